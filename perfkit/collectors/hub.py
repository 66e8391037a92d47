"""The collectors' shared state: who is listening, which segment each thread is in, and which hook
families are installed.

Hooks (patched torch/warp functions, the allocation mode, the line sampler) report *events* here;
every active sink (a :class:`perfkit.profile.session.Session`, a :func:`perfkit.budget` block) receives each
event. Hooks are installed once however many sinks are active (reference counted) and removed, with
every original restored, when the last sink leaves.

Per-thread state (:data:`tls`): ``depth`` > 0 while a hook runs, so a sync hook that calls into torch
code which hits another hook is one event, not two (``print(t)`` → ``__repr__`` → ``.item()`` is one
``print(t)``); ``stack`` is the segment stack (innermost last); ``runtime_syncs`` counts the syncs the
CUDA runtime reported on this thread (:mod:`.cuda_syncs`).

Where the syncs come from on a CUDA run (:data:`sync_source` ``"auto"``, the default): torch's own sync
detection reports every sync the runtime makes (:class:`.cuda_syncs.RuntimeSyncs`), so only the rows of
the hook tables that always sync are installed — to label their op and time their wait — and one of
them counts only when the runtime reported a sync inside it; a sync made outside every hook (an index, a
copy, torch's own Python code) is reported at its line. No Python runs for a call that does not sync.
With ``"hooks"``, or where the program set its own sync-debug mode, or on a CPU-only machine, every row
is installed and decides from the call.
"""

from __future__ import annotations

import importlib
import sys
import threading
from functools import lru_cache
from time import perf_counter
from types import CodeType, FrameType
from typing import Any, Callable

from perfkit.collectors.cuda_syncs import RUNTIME_OPS, RuntimeSyncs, sync_label
from perfkit.collectors.patches import Patcher, SyncOp, wraps
from perfkit.collectors.sites import code_counts_on_cpu, outside_perfkit, site_of


MAIN_IDENT = threading.main_thread().ident
MAIN_STACK: list[str] = []  # the main thread's segment stack (hot wrappers reach it without threading.local)


class _ThreadState(threading.local):
    def __init__(self) -> None:
        self.depth = 0  # > 0 while inside a perfkit hook on this thread
        self.main = threading.current_thread() is threading.main_thread()
        self.stack: list[str] = MAIN_STACK if self.main else []  # segment stack, innermost last
        self.last_cpu: tuple | None = None  # (frame id, line, tensor id) of the last .cpu() on a CPU tensor
        self.runtime_syncs = 0  # syncs the CUDA runtime reported on this thread (cuda_syncs), ever


tls = _ThreadState()

sinks: list[Any] = []  # objects with .add(kind, op, site, segment, thread, nbytes, would)
# the sinks the sync hooks report to: the same sinks, except while counting syncs is paused
# (:func:`pause_syncs`: empty, so every sync hook passes its call straight through)
sync_sinks: list[Any] = []
# callables ``(site, t0, t1)`` told the host time spent inside each real (not would-sync) sync call made
# on the main thread: perf_counter() before and after the original (syncs are rare: two clock reads each)
wait_listeners: list[Callable[[tuple, float, float], None]] = []
def _never() -> bool:
    return False


# torch.compiler.is_compiling once torch is imported: inside a torch.compile trace every wrapper steps
# aside (calls the original at once), so Dynamo sees the program's code, not perfkit's.
is_compiling = _never
verify_range = None  # while --verify records: (op, site) -> context manager around each hooked sync
verify_note = None  # while --verify records: site -> None, told each sync the runtime reported outside a hook
# "auto": on CUDA the runtime reports syncs (cuda_syncs) and only always-sync rows are hooked; "hooks":
# every row of every table decides from the call (set before the first acquire)
sync_source = "auto"
runtime: RuntimeSyncs | None = None  # installed while a CUDA run counts the runtime's own sync reports
# how the last installation of the torch family counts syncs: "runtime" (the CUDA runtime's own reports
# and the always-sync hooks), "hooks" (every hook decides from the call), "" (torch not hooked yet)
installed_sync_source = ""
count_cpu = False  # count sync calls on CPU tensors as would-sync-on-GPU (default: no CUDA on this machine)
_lock = threading.RLock()


class Sink:
    """Aggregates events by site: ``counts[(kind, op, file, line, function, thread, would)] = [n, bytes, {segment: n}]``."""

    def __init__(self) -> None:
        self.counts: dict[tuple, list] = {}

    def add(self, kind, op, site, segment, thread, nbytes, would, n=1, frame=None) -> None:
        self.count((kind, op, site[0], site[1], site[2], thread, would), segment, nbytes, n)

    def count(self, key: tuple, segment: str, nbytes, n: int) -> None:
        """Add ``n`` events (and their bytes) under ``key``, split by segment."""
        c = self.counts.get(key)
        if c is None:
            c = self.counts[key] = [0, 0, {}]
        c[0] += n
        if nbytes:
            c[1] += nbytes
        c[2][segment] = c[2].get(segment, 0) + n

    def total(self, kind: str) -> int:
        return sum(c[0] for k, c in self.counts.items() if k[0] == kind)


class CodeSet:
    """A set of code objects by identity, each kept alive: a code object's own hash reads its whole
    contents (~1 µs for a large function), too slow for a lookup per hooked call or per frame walked."""

    def __init__(self) -> None:
        self.ids: dict[int, CodeType] = {}

    def add(self, code: CodeType) -> None:
        self.ids[id(code)] = code

    def __contains__(self, code: object) -> bool:
        return self.ids.get(id(code)) is code

    def __len__(self) -> int:
        return len(self.ids)


transparent = CodeSet()  # code objects of perfkit wrappers that stand between user code and a hook
_transparent_ids = transparent.ids


def direct_caller(frame: FrameType | None) -> FrameType | None:
    """``frame``, or the first frame outside perfkit's own wrappers (segment/step wrappers)."""
    while frame is not None and id(frame.f_code) in _transparent_ids:
        frame = frame.f_back
    return frame


def _notify_wait(site: tuple, t0: float, t1: float) -> None:
    """Tell the :data:`wait_listeners` that a real sync at ``site`` held the main thread from ``t0`` to ``t1``."""
    for w in list(wait_listeners):
        try:
            w(site, t0, t1)
        except Exception:  # pragma: no cover - instrumentation must never break the program
            pass


def counts(cuda: bool, caller: FrameType | None) -> bool:
    """Whether a sync-prone call that the hook has decided would make the runtime wait on a GPU counts:
    always on a device tensor; on a host tensor (a CPU-only run, :data:`count_cpu`) as would-sync-on-GPU
    only where the program made the call (:func:`perfkit.collectors.sites.counts_on_cpu`: torch's own
    bookkeeping ``.item()`` is nobody's sync, its distribution checks are the caller's)."""
    return cuda or (count_cpu and caller is not None and code_counts_on_cpu(caller.f_code))


def _no_segment(frame: FrameType | None = None) -> str:
    return "other"


# The segment of time and events while no segment is open: "other", or the segment of the training
# loop's own code running now (collectors/regions.py sets it while a session knows the loop), found
# from the given frame outwards (from the caller's without one).
outside_segment: Callable[..., str] = _no_segment


def current_segment() -> str:
    st = tls.stack
    return st[-1] if st else outside_segment()


def sync_call(orig: Callable, op: str, caller: Any, args: tuple, kwargs: dict, would: bool = False,
              confirm: bool = True) -> Any:
    """Report one sync ``op`` at ``caller`` and run the original, the hooks quiet inside it (one call
    is one count, whatever the original calls in turn). Where the runtime reports syncs
    (:data:`runtime`) a call on a device tensor counts only the syncs the runtime reported inside it
    (``confirm``; False for explicit waits, which it does not report)."""
    if confirm and not would and runtime is not None:
        return _confirmed_sync_call(orig, op, caller, args, kwargs)
    st = tls
    st.depth += 1
    try:
        site = emit("sync", op, caller, would=would)
        vr = verify_range
        # the host's wait in a real sync on the main thread is timed (a would-sync waits for nothing)
        timed = not would and site is not None and wait_listeners and st.main
        t0 = perf_counter() if timed else 0.0
        try:
            if vr is None:
                return orig(*args, **kwargs)
            with vr(op, site):
                return orig(*args, **kwargs)
        finally:
            if timed:
                _notify_wait(site, t0, perf_counter())
    finally:
        st.depth -= 1


def _confirmed_sync_call(orig: Callable, op: str, caller: Any, args: tuple, kwargs: dict) -> Any:
    """:func:`sync_call` where the runtime says whether the call synced: run it, then report the syncs
    the runtime reported during it (none: the call made the GPU wait for nothing, no event)."""
    st = tls
    st.depth += 1
    before = st.runtime_syncs
    vr = verify_range
    t0 = perf_counter()
    try:
        if vr is None:
            return orig(*args, **kwargs)
        with vr(op, site_of(caller)):
            return orig(*args, **kwargs)
    finally:
        t1 = perf_counter()
        st.depth -= 1
        n = st.runtime_syncs - before
        if n > 0:
            site = emit("sync", op, caller, n=n)
            if st.main and site is not None and wait_listeners:
                _notify_wait(site, t0, t1)


def _runtime_sync(frame: FrameType) -> None:
    """A sync the runtime reported outside every hook: one event at its line, named from the expression
    of the program's frame that made it (past perfkit's pass-through frames: a sampled step's allocation
    mode runs every op from its own frame). perfkit's own syncs run inside its hooks or its scheduler,
    where ``tls.depth`` > 0, and never get here."""
    frame = outside_perfkit(frame)
    if frame is None or not sync_sinks or is_compiling():
        return
    site = emit("sync", sync_label(frame, _known_label), frame)
    note = verify_note
    if note is not None and site is not None:
        note(site)


def _known_label(label: str) -> bool:
    return label in sync_ops()


def _inside_hook() -> bool:
    return tls.depth > 0


def _count_in_hook() -> None:
    tls.runtime_syncs += 1


def _install_runtime_syncs(patcher: Patcher) -> bool:
    """Turn the runtime's own sync reports on for a CUDA run (False where they cannot be had)."""
    global runtime
    torch = sys.modules.get("torch")
    if torch is None or sync_source != "auto" or count_cpu or not torch.cuda.is_available():
        return False
    rs = RuntimeSyncs(_runtime_sync, _inside_hook, _count_in_hook)
    if not rs.install(patcher, torch):
        return False
    runtime = rs
    return True


def api_sync_hook(orig: Callable, op: str) -> Callable:
    """Wrap a device-wide sync (``torch.cuda.synchronize``, ``Event.synchronize``, ``wp.synchronize``):
    always a sync (would-sync where CPU calls are counted)."""
    state = tls

    @wraps(orig)
    def hook(*args, **kwargs):
        if not sync_sinks or state.depth or is_compiling():
            return orig(*args, **kwargs)
        caller = direct_caller(sys._getframe(1))
        return sync_call(orig, op, caller, args, kwargs, would=count_cpu, confirm=False)

    return hook


def emit(kind: str, op: str, frame: FrameType | None, nbytes: int | None = None, would: bool = False,
         n: int = 1) -> tuple | None:
    """Report one event at its site (:func:`perfkit.collectors.sites.site_of` of ``frame``) to every
    active sink, and return the site; a sink that keeps where an event came from reads ``frame`` itself."""
    if not sinks:
        return None
    site = None
    t0 = perf_counter()
    try:
        site = site_of(frame)
        st = tls
        stack = st.stack
        seg = stack[-1] if stack else outside_segment(frame if frame is not None else sys._getframe(1))
        thread = None if st.main else threading.current_thread().name
        for s in list(sinks):
            s.add(kind, op, site, seg, thread, nbytes, would, n, frame)
    except Exception:  # pragma: no cover - instrumentation must never break the program it watches
        pass
    if kind == "sync":
        t = emit_time
        t[0] += 1
        t[1] += perf_counter() - t0
    return site


# sync events emitted and the seconds spent finding their site and counting them, in the program itself
# (the self block's price of that part: a tight calibration loop keeps it in the CPU's caches, a real
# program's work between syncs does not — ~5x slower in a manager env on the CPU)
emit_time = [0, 0.0]


# ---- reference-counted installation of the always-on hooks -----------------------------------------

# The hook families, the one list of them: (the library's top module, the perfkit module whose
# ``PATCHES`` table, ``SYNC_OPS`` and ``install(patcher, always_only)`` hook it). A family is installed
# once its library has been imported (``install_available``).
FAMILIES: tuple[tuple[str, str], ...] = (
    ("torch", "perfkit.collectors.torch_sync"),
    ("warp", "perfkit.collectors.warp_sync"),
)


@lru_cache(maxsize=1)
def sync_ops() -> dict[str, SyncOp]:
    """``{label: SyncOp}`` of every op any family reports (importing a family does not import its library)."""
    out: dict[str, SyncOp] = {}
    for _, module in FAMILIES:
        out.update(importlib.import_module(module).SYNC_OPS)
    for label, op in RUNTIME_OPS.items():  # what a runtime-reported sync outside the tables' hooks is called
        out.setdefault(label, op)
    return out


def sync_op(label: str) -> SyncOp | None:
    """The :class:`SyncOp` a finding's ``op`` names, None for a label no table has (an older record's)."""
    return sync_ops().get(label)


def fixes() -> dict[str, str]:
    """``{op label: fix in words}`` of every sync op (a finding's ``message``)."""
    return {label: op.fix for label, op in sync_ops().items()}


def pause_syncs() -> bool:
    """Stop counting syncs (:mod:`.sync_gate`): the sync hooks pass every call through and the runtime's
    detection is off. Only while one sink is active (a :func:`perfkit.budget` block inside a session
    counts every sync); False where it cannot pause."""
    global syncs_paused
    with _lock:
        if len(sinks) != 1:
            return False
        if runtime is not None and not runtime.pause():
            return False
        sync_sinks.clear()
        syncs_paused = True
        return True


def resume_syncs() -> None:
    """Count syncs again (every active sink; the runtime's detection back on where it was)."""
    global syncs_paused
    with _lock:
        if syncs_paused and runtime is not None:
            runtime.resume()
        syncs_paused = False
        sync_sinks[:] = sinks


syncs_paused = False
_installed = 0
_patcher: Patcher | None = None
_installed_families: set[str] = set()


def acquire(sink: Any, count_cpu_tensors: bool | None = None) -> None:
    """Register ``sink`` and make sure the sync hooks are in place.

    ``count_cpu_tensors``: count sync calls on CPU tensors as would-sync-on-GPU; None = only when
    this machine has no CUDA (decided by the first sink)."""
    global _installed, _patcher, count_cpu
    with _lock:
        if _installed == 0:
            _patcher = Patcher()
            _installed_families.clear()
            if count_cpu_tensors is None:
                count_cpu_tensors = not _cuda_available()
            count_cpu = bool(count_cpu_tensors)
        _installed += 1
        _bind_is_compiling()
        install_available()
        sinks.append(sink)
        resume_syncs()  # a new sink counts every sync it sees


def install_available() -> None:
    """Install hook families for libraries imported since the last call (cheap when nothing is new)."""
    if _patcher is None or len(_installed_families) == len(FAMILIES):
        return
    with _lock:
        for library, module in FAMILIES:
            if library not in _installed_families and library in sys.modules:
                always_only = False
                if library == "torch":
                    global installed_sync_source
                    installed_sync_source = "runtime" if _install_runtime_syncs(_patcher) else "hooks"
                    always_only = installed_sync_source == "runtime"  # the runtime reports the rest
                importlib.import_module(module).install(_patcher, always_only)
                _installed_families.add(library)


def _bind_is_compiling() -> None:
    global is_compiling
    torch = sys.modules.get("torch")
    fn = getattr(getattr(torch, "compiler", None), "is_compiling", None) if torch is not None else None
    is_compiling = fn if fn is not None else _never


def _cuda_available() -> bool:
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch  # noqa: F811
        except ImportError:
            return False
    return bool(torch.cuda.is_available())


def release(sink: Any) -> None:
    global _installed, _patcher, runtime
    with _lock:
        try:
            sinks.remove(sink)
        except ValueError:
            pass
        resume_syncs()
        _installed -= 1
        if _installed <= 0:
            _installed = 0
            if _patcher is not None:
                _patcher.undo()
            _patcher = None
            _installed_families.clear()
            runtime = None

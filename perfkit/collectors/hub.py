"""The collectors' shared state: who is listening, which segment each thread is in, and which hook
families are installed.

Hooks (patched torch/warp functions, the allocation mode, the line sampler) report *events* here;
every active sink (a :class:`perfkit.session.Session`, a :func:`perfkit.budget` block) receives each
event. Hooks are installed once however many sinks are active (reference counted) and removed, with
every original restored, when the last sink leaves.

Per-thread state (:data:`tls`): ``depth`` > 0 while a hook runs, so a sync hook that calls into torch
code which hits another hook is one event, not two (``print(t)`` → ``__repr__`` → ``.item()`` is one
``print(t)``); ``stack`` is the segment stack (innermost last).
"""

from __future__ import annotations

import importlib
import sys
import threading
from time import perf_counter
from types import FrameType
from typing import Any, Callable

from perfkit.collectors.patches import Patcher, wraps
from perfkit.collectors.sites import site_of


MAIN_IDENT = threading.main_thread().ident
MAIN_STACK: list[str] = []  # the main thread's segment stack (hot wrappers reach it without threading.local)


class _ThreadState(threading.local):
    def __init__(self) -> None:
        self.depth = 0  # > 0 while inside a perfkit hook on this thread
        self.main = threading.current_thread() is threading.main_thread()
        self.stack: list[str] = MAIN_STACK if self.main else []  # segment stack, innermost last
        self.last_cpu: tuple | None = None  # (frame id, line, tensor id) of the last .cpu() on a CPU tensor
        self.sync_site: tuple | None = None  # site of the real sync just emitted (its call gets timed)


tls = _ThreadState()

sinks: list[Any] = []  # objects with .add(kind, op, site, segment, thread, nbytes, would)
# callables ``(site, t0, t1)`` told the host time spent inside each real (not would-sync) sync call made
# on the main thread: perf_counter() before and after the original (syncs are rare: two clock reads each)
wait_listeners: list[Callable[[tuple, float, float], None]] = []
def _never() -> bool:
    return False


# torch.compiler.is_compiling once torch is imported: inside a torch.compile trace every wrapper steps
# aside (calls the original at once), so Dynamo sees the program's code, not perfkit's.
is_compiling = _never
verify_range = None  # while --verify records: op -> context manager around each hooked sync
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


transparent: set = set()  # code objects of perfkit wrappers that stand between user code and a hook


def direct_caller(frame: FrameType | None) -> FrameType | None:
    """``frame``, or the first frame outside perfkit's own wrappers (segment/step wrappers)."""
    while frame is not None and frame.f_code in transparent:
        frame = frame.f_back
    return frame


def call_original(orig, op: str, args: tuple, kwargs: dict):
    """Run the hooked original; inside a ``--verify`` range when one is recording; timed for the
    :data:`wait_listeners` when :func:`emit` just reported it as a real sync on the main thread."""
    vr = verify_range
    if wait_listeners:
        st = tls
        site = st.sync_site
        if site is not None:
            st.sync_site = None
            t0 = perf_counter()
            try:
                if vr is None:
                    return orig(*args, **kwargs)
                with vr(op):
                    return orig(*args, **kwargs)
            finally:
                t1 = perf_counter()
                for w in list(wait_listeners):
                    try:
                        w(site, t0, t1)
                    except Exception:  # pragma: no cover - instrumentation must never break the program
                        pass
    if vr is None:
        return orig(*args, **kwargs)
    with vr(op):
        return orig(*args, **kwargs)


def _no_segment() -> str:
    return "other"


# The segment of time and events while no segment is open: "other", or the segment of the training
# loop's own code running now (collectors/regions.py sets it while a session knows the loop).
outside_segment: Callable[[], str] = _no_segment


def current_segment() -> str:
    st = tls.stack
    return st[-1] if st else outside_segment()


def sync_call(orig: Callable, op: str, caller: Any, args: tuple, kwargs: dict, would: bool = False) -> Any:
    """Report one sync ``op`` at ``caller`` and run the original, the hooks quiet inside it (one call
    is one count, whatever the original calls in turn)."""
    tls.depth += 1
    try:
        emit("sync", op, caller, would=would)
        return call_original(orig, op, args, kwargs)
    finally:
        tls.depth -= 1


def api_sync_hook(orig: Callable, op: str) -> Callable:
    """Wrap a device-wide sync (``torch.cuda.synchronize``, ``Event.synchronize``, ``wp.synchronize``):
    always a sync (would-sync where CPU calls are counted)."""
    state = tls

    @wraps(orig)
    def hook(*args, **kwargs):
        if not sinks or state.depth or is_compiling():
            return orig(*args, **kwargs)
        caller = direct_caller(sys._getframe(1))
        return sync_call(orig, op, caller, args, kwargs, would=count_cpu)

    return hook


def emit(kind: str, op: str, frame: FrameType | None, nbytes: int | None = None, would: bool = False, n: int = 1) -> None:
    """Report one event at its site (:func:`perfkit.collectors.sites.site_of` of ``frame``) to every
    active sink; a sink that keeps where an event came from reads ``frame`` itself."""
    if not sinks:
        return
    try:
        site = site_of(frame)
        seg = current_segment()
        main = tls.main
        thread = None if main else threading.current_thread().name
        if kind == "sync" and wait_listeners:
            tls.sync_site = site if (main and not would) else None
        for s in list(sinks):
            s.add(kind, op, site, seg, thread, nbytes, would, n, frame)
    except Exception:  # pragma: no cover - instrumentation must never break the program it watches
        pass


# ---- reference-counted installation of the always-on hooks -----------------------------------------

# The hook families: (the library's top module, the perfkit module whose ``install(patcher)`` hooks it).
# A family is installed once its library has been imported (``install_available``).
FAMILIES: tuple[tuple[str, str], ...] = (
    ("torch", "perfkit.collectors.torch_sync"),
    ("warp", "perfkit.collectors.warp_sync"),
)

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


def install_available() -> None:
    """Install hook families for libraries imported since the last call (cheap when nothing is new)."""
    if _patcher is None or len(_installed_families) == len(FAMILIES):
        return
    with _lock:
        for library, module in FAMILIES:
            if library not in _installed_families and library in sys.modules:
                importlib.import_module(module).install(_patcher)
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


def all_installed() -> bool:
    return len(_installed_families) == len(FAMILIES)


def release(sink: Any) -> None:
    global _installed, _patcher
    with _lock:
        try:
            sinks.remove(sink)
        except ValueError:
            pass
        _installed -= 1
        if _installed <= 0:
            _installed = 0
            if _patcher is not None:
                _patcher.undo()
            _patcher = None
            _installed_families.clear()

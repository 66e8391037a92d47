"""Steps: the clock that marks env-step boundaries, and finding the env step with no code change.

* :class:`StepClock` — one per session. Entering the outermost env ``step`` (through
  :func:`step_wrapper`) or ``perfkit.step()`` is a *step boundary*: :meth:`StepClock.begin` records the
  previous step's time (the fast path: one list append) or, on steps the session scheduled as
  special (warm-up, sampled, CUDA-timed, ...), hands the boundary to the session's scheduler;
  :meth:`StepClock.end` notes when the step call returned. The clock also knows the phase of the
  current step (setup before the first step, warm-up, steady) and keeps the syncs seen since the last
  boundary (``trail``: once the program stops stepping they are teardown).
* :class:`PhaseSink` — the session's event sink: events keyed by that phase (allocation and stream
  events only while a step is sampled).
* :class:`Discovery` — a short *discovery window*, from the session's start to the end of warm-up,
  runs a ``sys.setprofile`` function. It looks at Python calls only by name:

  * a call of a method named ``step`` whose receiver has an integer ``num_envs`` (instance or class) is
    an env step: the method is wrapped on the class that defines it (so every later call is a step
    boundary through a plain wrapper) and this very call is counted as the first step;
  * a user-code function whose name the rules put in a segment (``compute_reward`` → reward,
    ``simulate`` → physics, ``log_metrics`` → logging, or a name from ``[tool.perfkit] segments``) runs
    in that segment, and is remembered so that it can be wrapped where it lives (a class or module
    attribute) when the window closes.

  * what "other" is made of: the env step's own body (``other/<Class>.step``, inside the boundary), its
    callees, the callees of the code that calls the first step (the training loop, whose own code
    :mod:`perfkit.collectors.regions` reads), and below a callee that took most of its siblings' time
    in the window, its callees (``other/<part>/<sub>``).

  When the window closes the profile function is removed: steady state runs with wrappers only.
  Nested functions and lambdas cannot be wrapped in place; they keep their segment only during warm-up.
"""

from __future__ import annotations

import sys
import threading
import weakref
from dataclasses import dataclass, field
from time import perf_counter
from types import FrameType
from typing import Any, Callable, NamedTuple

from perfkit.collectors import segments
from perfkit.batched_env import num_envs_of
from perfkit.collectors import hub
from perfkit.collectors.hub import Sink
from perfkit.collectors.patches import Patcher, wraps
from perfkit.collectors.sites import chain_of, is_program_file

MAX_STEP_STARTS = 1_000_000  # steps whose start the whole-run timeline keeps (8 bytes of JSON each, roughly)
KEPT_TRAILS = 4096  # the first steps whose sync events are kept per step (the rates' window is cut among them)
current: "StepClock | None" = None
"""The active session's clock (None outside a session): what the step wrappers report to."""


class Boundary(NamedTuple):
    """What the scheduler decided at a special step boundary; the clock applies it."""

    took: float | None  # the closing step's time (None: no step closes, the first boundary)
    timed: bool  # whether the closing step counts in the steady-state timing
    next_special: int  # the next boundary the scheduler must see
    begin_t: float  # when the new step begins: after perfkit's own work at the boundary


@dataclass(frozen=True)
class ClockSummary:
    """What a :class:`StepClock` saw (:meth:`StepClock.summary`): step times in seconds, the steps'
    starts and the last step's end in ms from the session's start."""

    total_steps: int = 0  # every step boundary seen, warm-up included
    manual: bool = False  # perfkit.step() marked the steps
    steady_t: float | None = None  # perf_counter() when the first steady step's boundary came
    step_times: list[float] = field(default_factory=list)  # the timed steady steps
    untimed_step_times: list[float] = field(default_factory=list)  # steady steps perfkit worked in (sampled, --verify)
    step_starts: list[float] = field(default_factory=list)  # ms, every step (up to MAX_STEP_STARTS)
    last_step_end: float | None = None  # ms, when the last step call returned
    trail: dict[tuple, int] = field(default_factory=dict)  # syncs after the last step's start, by sink key
    kept_trails: dict[int, dict[tuple, int]] = field(default_factory=dict)  # step -> its syncs (the first steps)
    other_envs: dict[tuple[str, str], int] = field(default_factory=dict)  # (thread, env type) -> steps not counted


@dataclass(frozen=True)
class SyncSummary:
    """What the session's :class:`PhaseSink` counted (:meth:`PhaseSink.summary`)."""

    counts: dict[tuple, list] = field(default_factory=dict)  # (kind, op, file, line, func, thread, would, phase) -> [n, bytes, {segment: n}]
    per_sample: dict[tuple, dict[int, int]] = field(default_factory=dict)  # sampled kinds: site -> {step: events}
    chains: dict[tuple, tuple] = field(default_factory=dict)  # (kind, op, file, line) -> ((file, line), ...)


class StepClock:
    """Step boundaries, step times and the current phase (see module doc).

    ``on_boundary(now, index, env) -> Boundary`` (the session's scheduler, which registers itself) is
    called for every boundary whose index is not below ``next_special``; all others take the fast path. The clock alone writes its fields: on the fast
    path it times the step itself, on the slow path it applies the scheduler's :class:`Boundary`
    (``times`` holds the duration of every step counted as timed, ``untimed`` the other steady ones)."""

    def __init__(self, warmup_steps: int, on_boundary: Callable[[float, int, Any], Boundary] | None = None):
        self.warmup_steps = warmup_steps
        self.on_boundary = on_boundary
        self.index = 0  # the current step (1, 2, ...); 0 before the first
        self.times: list[float] = []  # seconds, timed steps only
        self.untimed: list[float] = []  # seconds, steady steps not timed (perfkit worked in them)
        self.steady_t: float | None = None  # perf_counter() at the first steady step's boundary
        self.begin_t = 0.0  # perf_counter() at the current step's boundary
        self.last_end: float | None = None  # perf_counter() when the last step call returned
        self.in_step = False  # inside an env step call (a nested step is not another boundary)
        self.manual = False  # perfkit.step() was called: automatic detection is off
        self.next_special = 1
        self.trail: dict[tuple, int] = {}  # warm-up and steady sync events since the last boundary, by sink key
        self.kept: dict[int, dict[tuple, int]] = {}  # step -> its trail, for the first KEPT_TRAILS steps that synced
        self.starts: list[float] = []  # perf_counter() at the start of every step (the whole-run timeline)
        # whose steps are boundaries: the first stepping thread and env; another env's steps (an eval env,
        # an env on another thread) are counted apart, by (thread name, env type), never as boundaries
        self.thread: int | None = None
        self._env_ref: Any = None
        self.others: dict[tuple[str, str], int] = {}

    @property
    def phase(self) -> str:
        i = self.index
        if i == 0:
            return "setup"
        return "warmup" if i <= self.warmup_steps else "steady"

    def owns(self, env: Any) -> bool:
        """Whether a step of ``env`` on this thread is a boundary of this clock (binds on the first one)."""
        tid = threading.get_ident()
        if self.thread is None:
            self.thread = tid
            self._bind(env)
            return True
        ref = self._env_ref
        bound = ref() if ref is not None else None
        if tid == self.thread and (env is None or bound is None or bound is env):
            if bound is None and env is not None:
                self._bind(env)  # the first env is gone (rebuilt): follow the new one
            return True
        key = (threading.current_thread().name, type(env).__qualname__ if env is not None else "perfkit.step()")
        self.others[key] = self.others.get(key, 0) + 1
        return False

    def _bind(self, env: Any) -> None:
        if env is None:
            self._env_ref = None
            return
        try:
            self._env_ref = weakref.ref(env)
        except TypeError:  # not weak-referenceable: hold its identity only while it lives here
            self._env_ref = lambda e=env: e

    def begin(self, env: Any = None, now: float | None = None) -> None:
        """A step boundary: the previous step ends and step ``index + 1`` begins."""
        if now is None:
            now = perf_counter()
        if self.trail:
            if self.index <= KEPT_TRAILS:
                self.kept[self.index] = self.trail
            self.trail = {}
        idx = self.index + 1
        if idx < self.next_special:
            self.times.append(now - self.begin_t)
            self.index = idx
            self.begin_t = now
            if idx <= MAX_STEP_STARTS:
                self.starts.append(now)
            return
        if idx == self.warmup_steps + 1:
            self.steady_t = now
        hub.tls.depth += 1  # the scheduler's own torch calls are not the user's
        try:
            decided = self.on_boundary(now, idx, env)
        finally:
            hub.tls.depth -= 1
        self.apply(idx, decided)

    def apply(self, idx: int, decided: Boundary) -> None:
        """Step ``idx`` begins as the scheduler decided."""
        self.close(decided.took, decided.timed)
        self.index = idx
        self.begin_t = decided.begin_t
        self.next_special = decided.next_special
        if idx <= MAX_STEP_STARTS:
            self.starts.append(decided.begin_t)

    def close(self, took: float | None, timed: bool) -> None:
        """The current step ended after ``took`` seconds (None: no step was running); ``timed``: it
        counts in the steady-state timing (else, a steady step, it is kept apart)."""
        if took is None:
            return
        if timed:
            self.times.append(took)
        elif self.index > self.warmup_steps:
            self.untimed.append(took)

    def summary(self, t0: float) -> ClockSummary:
        """What this clock saw; ``t0``: the session's start (the origin of the ms offsets)."""
        return ClockSummary(
            total_steps=self.index, manual=self.manual, steady_t=self.steady_t, step_times=list(self.times),
            untimed_step_times=list(self.untimed), step_starts=[round((t - t0) * 1e3, 3) for t in self.starts],
            last_step_end=round((self.last_end - t0) * 1e3, 3) if self.last_end else None,
            trail=dict(self.trail), kept_trails=self.kept, other_envs=dict(self.others))

    on_end: Callable[[float], None] | None = None  # told when each step call returns (the session's segment clock)

    def end(self) -> None:
        """The env step call returned (the last step of a run ends here, not at the session's end)."""
        t = self.last_end = perf_counter()
        if self.on_end is not None:
            self.on_end(t)

    def mark(self) -> None:
        """``perfkit.step()``: a boundary by hand; automatic detection stops for the session."""
        self.manual = True
        if self.owns(None):
            self.begin(None)


class PhaseSink(Sink):
    """The session's sink: events keyed by the clock's phase (``setup``/``warmup``/``steady``);
    allocation and stream events count only while ``sampling()`` says a step is sampled (phase
    ``sampled``). Warm-up and steady syncs are also kept in the clock's trail."""

    def __init__(self, clock: StepClock, sampling: Callable[[], bool]):
        super().__init__()
        self.clock = clock
        self.sampling = sampling
        self.chains: dict[tuple, tuple] = {}  # (kind, op, file, line) -> the chain back to user code, first seen in steady state if ever
        self.per_sample: dict[tuple, dict[int, int]] = {}  # sampled kinds: site key -> {sampled step: events}

    def summary(self) -> SyncSummary:
        return SyncSummary(counts=self.counts, per_sample=self.per_sample, chains=self.chains)

    def add(self, kind, op, site, segment, thread, nbytes, would, n=1, frame=None) -> None:
        """One event, in one call (a sync's path: its phase from the clock's index, its key, the chain
        of a key not seen before, its count by segment and the step's trail)."""
        clock = self.clock
        i = clock.index
        if kind == "sync":
            phase = "steady" if i > clock.warmup_steps else "warmup" if i else "setup"
        elif kind in ("alloc", "stream"):
            if not self.sampling():
                return
            phase = "sampled"
            where = (kind, op, site[0], site[1], site[2], thread, would)
            per = self.per_sample.get(where)
            if per is None:
                per = self.per_sample[where] = {}
            per[i] = per.get(i, 0) + n
        else:
            phase = clock.phase
        key = (kind, op, site[0], site[1], site[2], thread, would, phase)
        counts = self.counts
        c = counts.get(key)
        if c is None:
            where = (kind, op, site[0], site[1])
            if phase in ("steady", "sampled") or where not in self.chains:
                self.chains[where] = chain_of(frame)  # a steady-state path wins over set-up's
            c = counts[key] = [0, 0, {}]
        c[0] += n
        if nbytes:
            c[1] += nbytes
        segs = c[2]
        segs[segment] = segs.get(segment, 0) + n
        if kind == "sync":
            if i:  # not set-up
                trail = clock.trail
                trail[key] = trail.get(key, 0) + n


def step_wrapper(orig: Callable) -> Callable:
    """Wrap an env's ``step``: the outermost call is one step boundary of the active clock (gym-style
    wrappers nest; a step inside a step is not another one)."""
    mod = sys.modules[__name__]

    def step(*args, **kwargs):
        c = mod.current
        if c is None or c.in_step or c.manual or hub.is_compiling():
            return orig(*args, **kwargs)
        env = args[0] if args else None
        if not c.owns(env):
            return orig(*args, **kwargs)
        c.in_step = True
        c.begin(env)
        try:
            return orig(*args, **kwargs)
        finally:
            c.in_step = False
            c.end()

    wraps(orig)(step)
    step.__perfkit_step__ = True  # type: ignore[attr-defined]
    return step


hub.transparent.add(step_wrapper(lambda: None).__code__)


def install_step_fn(patcher: Patcher, spec: str) -> None:
    """``--step-fn module:Class.method`` (or ``module:function``): wrap it as the env step.
    ValueError with what was wrong when it cannot be found."""
    from perfkit import targets

    try:
        mod, dotted = targets.parse(spec, "--step-fn")
        targets.cwd_on_path()
        owner, name, value = targets.resolve(mod, dotted)
    except targets.TargetError as e:
        msg = str(e)
        raise ValueError(msg if "must look like" in msg else f"--step-fn {msg}" if msg.startswith(f"{spec}: ")
                         else f"--step-fn {spec}: {msg}") from None
    if not callable(value):
        raise ValueError(f"--step-fn {spec}: {type(value).__name__} is not callable")
    raw = vars(owner).get(name, value) if isinstance(owner, type) else value
    if isinstance(owner, type):
        patcher.set(owner, name, step_wrapper(raw))
    else:
        patcher.set_everywhere(owner, name, step_wrapper(raw))


def defining_class(cls: type, name: str, code: Any = None) -> type | None:
    for k in cls.__mro__:
        raw = vars(k).get(name)
        if raw is None:
            continue
        fn = getattr(raw, "__func__", raw)
        if code is None or getattr(fn, "__code__", None) is code:
            return k
        return None
    return None


def patch_step_method(patcher: Patcher, cls: type, name: str, label: str | None = None) -> bool:
    """Wrap ``cls``'s ``name`` method as the env step; with ``label``, its body runs in that segment
    (inside the boundary: the step's own code is a named part of "other")."""
    owner = defining_class(cls, name)
    if owner is None:
        return False
    raw = vars(owner)[name]
    if getattr(raw, "__perfkit_step__", False):
        return False
    if isinstance(raw, (staticmethod, classmethod)):
        return False
    patcher.set(owner, name, step_wrapper(segments.wrap(raw, label) if label else raw))
    return True


def callee_label(code: Any) -> str:
    """The name of a function's part of "other": ``other/<qualname>``."""
    return "other/" + getattr(code, "co_qualname", code.co_name).replace(".<locals>", "")


class Discovery:
    """The ``sys.setprofile`` function of the discovery window (see module doc)."""

    MAX_CALLEES = 32  # the env step's and the loop's callees that break "other" down
    MAX_NESTED = 64  # their callees, and so on, found in the window (wrapped only below dominant ones)
    MAX_DEPTH = 3  # callees of callees ..., kept below a callee that dominates its siblings
    DOMINANT_SHARE = 0.5  # of its siblings' time in the window

    def __init__(self, clock: StepClock, patcher: Patcher, find_steps: bool, name_segments: dict[str, str],
                 step_methods: tuple[str, ...] = ("step",)):
        self.clock = clock
        self.patcher = patcher
        self.step_methods = frozenset(step_methods)
        self.find_steps = find_steps
        self.name_segments = name_segments
        self._open: dict[int, tuple] = {}  # id(frame) -> ("step",) | ("inner",) | (segment token, code)
        # id(code) -> (code, its rule segment or None), decided at its first call; by identity, as below
        self._seen: dict[int, tuple[Any, str | None]] = {}
        self.candidates: list[tuple[Any, str, str, str]] = []  # (owner, name, segment, how: class|module|dict)
        self.step_classes: list[type] = []
        self._rejected_step_codes: set = set()
        self._step_frames: list[int] = []  # ids of the open env-step frames, innermost last
        self._callees: dict[Any, str] = {}  # code -> "other/<qualname>" of the env step's direct callees
        self.disqualified: set = set()  # learner-named codes seen around an env step: a training loop
        self.modules_seen: set[str] = set()  # modules of program code that ran while the window was open
        self.loop_code: Any = None  # the code that calls the env step (collectors/regions.py reads it)
        self._parent: dict[Any, Any] = {}  # callee code -> its caller's code ("step" / "loop" for the first level)
        self._callee_time: dict[Any, float] = {}  # callee code -> seconds inside it while the window was open
        self._nested: dict[Any, list] = {}  # callee code below the first level -> its wrap candidates
        self._not_parts: set = set()  # callees that cannot be wrapped (property getters, ...) or past the caps
        self._loop_table: dict[int, str] = {}
        # id(code) -> code that _on_call said can never matter: the setprofile path skips it at once (the
        # monitoring path disables it); by identity, a code's own hash reads its whole contents
        self._ignored: dict[int, Any] = {}
        # program codes whose first call _on_call decided with nothing to do (no segment, not a step, not
        # a part): the monitoring path passes over their calls while no step, loop or part is known
        self._quiet: dict[int, Any] = {}  # (id -> code, by identity)
        self._stepped = False  # an env step has begun (program code may be a part of "other" from here on)
        self._returns: set = set()  # codes a frame was opened for: their returns are reported (monitoring)

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        """The ``sys.setprofile`` function (Python before 3.12, or when another tool holds
        ``sys.monitoring``'s profiler slot)."""
        try:
            if event == "call":
                code = frame.f_code
                if self._ignored.get(id(code)) is code:  # nothing about it can matter (as monitoring disables it)
                    return
                if not self._stepped and self._quiet.get(id(code)) is code:  # nothing to do before the first step
                    return
                if not self._on_call(frame, code):
                    self._ignored[id(code)] = code
            elif event == "return" and self._open:
                self._on_return(id(frame))
        except Exception:  # pragma: no cover - an error here must not reach the program (or drop the profiler)
            pass

    def watch_modules(self, module_call_code: Any, is_grad_enabled: Callable[[], bool], found: list) -> None:
        """Also find the policy: outermost ``nn.Module`` calls made with autograd off (pushed as 'policy'
        during the window; their classes are wrapped when it closes)."""
        self._module_code = module_call_code
        self._grad_on = is_grad_enabled
        self._policy_found = found

    _module_code: Any = None

    def _on_call(self, frame: FrameType, code: Any) -> bool:
        """A Python function starts. Returns False when nothing about ``code`` can ever matter (runtime
        code that is neither a step nor the module call): the monitoring backend then stops reporting it."""
        if code is self._module_code:
            if not self._grad_on() and "policy" not in hub.tls.stack and hub.tls.main:
                mod = frame.f_locals.get("self")
                if mod is not None:
                    cls = type(mod)
                    if cls not in self._policy_found:
                        self._policy_found.append(cls)
                    self._open[id(frame)] = (segments.push("policy"), None)
            return True
        name = code.co_name
        if name in self.step_methods and code not in self._rejected_step_codes and self._step_call(frame, code, name):
            return True
        context = self._step_frames or self._open or self.loop_code is not None
        if context and code not in self._callees and code not in self._not_parts:
            if self._step_frames and self._called_by_step(frame):
                self._callee(frame, code, "step")
            elif self._open or self.loop_code is not None:
                caller = hub.direct_caller(frame.f_back)
                if caller is None:
                    pass
                elif caller.f_code is self.loop_code:
                    if caller.f_lasti not in self._loop_table:
                        self._callee(frame, code, "loop")
                else:
                    entry = self._open.get(id(caller))
                    if entry is not None and len(entry) > 2 and self._depth(entry[1]) < self.MAX_DEPTH:
                        self._callee(frame, code, entry[1])
        seg = self._rule_segment(frame, code)
        if seg is None and self._callees:
            seg = self._callees.get(code)
            if seg is not None and code not in self.disqualified:  # a part of "other": timed, to find what dominates
                self._open[id(frame)] = (segments.push(seg), code, perf_counter())
                return True
        if seg is not None and code not in self.disqualified:
            self._open[id(frame)] = (segments.push(seg), code)
        if seg is not None or name in self.step_methods:
            return True
        if is_program_file(code.co_filename):
            if not self._callees or code not in self._callees:
                self._quiet[id(code)] = code
            return True
        return False

    def _on_return(self, frame_id: int) -> None:
        entry = self._open.pop(frame_id, None)
        if entry is None:
            return
        if entry[0] == "step":
            self._step_frames.pop()
            self.clock.in_step = False
            self.clock.end()
        elif entry[0] == "inner":
            self._step_frames.pop()
        else:
            segments.pop(entry[0])
            if len(entry) > 2:
                code = entry[1]
                self._callee_time[code] = self._callee_time.get(code, 0.0) + perf_counter() - entry[2]

    def _rule_segment(self, frame: FrameType, code: Any) -> str | None:
        """The segment the rules give ``code`` (config names, then :func:`perfkit.collectors.segments.segment_for`),
        decided at its first call; a function with one is remembered for wrapping."""
        hit = self._seen.get(id(code))
        if hit is not None and hit[0] is code:
            return hit[1]
        seg = None
        if is_program_file(code.co_filename):
            module = frame.f_globals.get("__name__")
            if module:
                self.modules_seen.add(module)
            name = code.co_name
            seg = self.name_segments.get(name) or segments.segment_for(name, module, getattr(code, "co_qualname", name), code)
            if seg != "logging" and not name.startswith("__") and code.co_argcount and code.co_varnames[0] in ("self", "cls"):
                obj = self._receiver(frame, code)
                if obj is not None and segments.is_logger_class(obj if isinstance(obj, type) else type(obj)):
                    seg = "logging"  # a method of a logger class, whatever its name
            if seg is not None:
                self._remember(frame, code, seg)
        self._seen[id(code)] = (code, seg)
        return seg

    def _step_call(self, frame: FrameType, code: Any, name: str) -> bool:
        """A call of a step-named method: an env step when its receiver has ``num_envs`` (True), else
        remembered as not one (False)."""
        c = self.clock
        if c.manual or not self.find_steps:
            return False
        obj = self._receiver(frame, code)
        if num_envs_of(obj) is None:
            self._rejected_step_codes.add(code)
            return False
        if c.in_step:  # a step inside the step (a wrapper's env, or the wrapped method itself)
            self._open[id(frame)] = ("inner",)
            self._step_frames.append(id(frame))
            if code not in self._callees:  # its own code: a named part of "other"
                self._callees[code] = callee_label(code)
                self._remember(frame, code, self._callees[code])
            return True
        cls = type(obj)
        if patch_step_method(self.patcher, cls, name, callee_label(code)):
            self.step_classes.append(cls)
        if not c.owns(obj):
            return True
        if self.loop_code is None:
            self._find_loop(frame, name)
        self._disqualify_open_learners()
        if not self._stepped:
            self._stepped = True
            if self._tool is not None:  # the program code disabled before this step is reported again
                sys.monitoring.restart_events()
        c.in_step = True
        c.begin(obj)
        self._open[id(frame)] = ("step",)
        self._step_frames.append(id(frame))
        return True

    def _find_loop(self, step_frame: FrameType, name: str) -> None:
        """The code that called the first env step is the training loop: its own code's segments come
        from its source (:mod:`perfkit.collectors.regions`), known until the session's end."""
        from perfkit.collectors import regions

        loop = hub.direct_caller(step_frame.f_back)
        if loop is None or not is_program_file(loop.f_code.co_filename):
            return
        code = loop.f_code
        try:
            table = regions.table_for(code, loop.f_lineno, self.step_methods | {name})
        except Exception:  # pragma: no cover - unreadable source: the loop is named, not split
            table = {}
        self.loop_code, self._loop_table = code, table
        regions.install(code, table, regions.loop_label(code))
        self.patcher.on_undo(regions.clear)

    def _disqualify_open_learners(self) -> None:
        """A learner-named function open around an env step is a training loop, not a learner update."""
        for key, entry in list(self._open.items()):
            code = entry[1] if len(entry) > 1 else None
            if code is not None and self._seen.get(id(code), (None, None))[1] == "learner":
                self.disqualified.add(code)
                segments.pop(entry[0])
                del self._open[key]

    def _called_by_step(self, frame: FrameType) -> bool:
        caller = hub.direct_caller(frame.f_back)
        return caller is not None and id(caller) == self._step_frames[-1]

    def _callee(self, frame: FrameType, code: Any, parent: Any) -> None:
        """A direct callee of the innermost env step, of the training loop's own code, or of one of
        those (``parent``: "step", "loop" or its caller's code): what "other" is broken down by.
        Below the first level, ``other/<caller's part>/<qualname>``, wrapped only under a callee that
        dominates its siblings (:meth:`_kept`)."""
        if not is_program_file(code.co_filename) or code.co_name.startswith("<") or self._rule_segment(frame, code) is not None:
            return
        top = parent in ("step", "loop")
        if top:
            label = callee_label(code)
        else:
            label = self._callees[parent] + "/" + callee_label(code)[len("other/"):]
        found: list = []
        self._remember(frame, code, label, into=found)
        full = len(self._parent) - len(self._nested) >= self.MAX_CALLEES if top else len(self._nested) >= self.MAX_NESTED
        if not found or full:
            self._not_parts.add(code)
            return
        self._callees[code] = label
        self._parent[code] = parent
        if top:
            self.candidates.extend(found)
        else:
            self._nested[code] = found

    def _depth(self, code: Any) -> int:
        d = 0
        while code in self._parent and d <= self.MAX_DEPTH:
            code = self._parent[code]
            d += 1
        return d

    def _dominant(self, code: Any) -> bool:
        """Whether ``code`` took at least :attr:`DOMINANT_SHARE` of its siblings' time in the window."""
        parent = self._parent.get(code)
        total = sum(self._callee_time.get(c, 0.0) for c, p in self._parent.items() if p == parent)
        return total > 0 and self._callee_time.get(code, 0.0) >= self.DOMINANT_SHARE * total

    def _kept(self, code: Any) -> bool:
        """A nested callee is wrapped when every part above it dominates its siblings."""
        parent = self._parent.get(code)
        for _ in range(self.MAX_DEPTH):
            if parent in (None, "step", "loop"):
                return True
            if not self._dominant(parent):
                return False
            parent = self._parent.get(parent)
        return False

    @staticmethod
    def _receiver(frame: FrameType, code: Any) -> Any:
        if code.co_argcount < 1:
            return None
        return frame.f_locals.get(code.co_varnames[0])

    def _remember(self, frame: FrameType, code: Any, seg: str, into: list | None = None) -> None:
        candidates = self.candidates if into is None else into
        name = code.co_name
        g = frame.f_globals
        fn = g.get(name)
        if getattr(fn, "__code__", None) is code:
            mod = sys.modules.get(g.get("__name__", ""))
            if mod is not None and getattr(mod, "__dict__", None) is g:
                candidates.append((mod, name, seg, "module"))
            else:  # a module loaded without registering it: patch its namespace
                candidates.append((g, name, seg, "dict"))
            return
        obj = self._receiver(frame, code)
        if obj is None:
            return
        cls = obj if isinstance(obj, type) else type(obj)
        owner = defining_class(cls, name, code)
        if owner is not None:
            candidates.append((owner, name, seg, "class"))

    def start(self) -> bool:
        """Open the window: ``sys.monitoring`` where there is one (3.12+: each runtime function reports
        its first call only), else ``sys.setprofile`` with imports of new modules run unobserved (an
        import's module code is nobody's step). False when another profiler holds the slot."""
        mon = getattr(sys, "monitoring", None)
        if mon is not None and self._start_monitoring(mon):
            self._hook_imports()
            return True
        if sys.getprofile() is not None:
            return False
        sys.setprofile(self)
        self._hook_imports()
        return True

    _tool: int | None = None
    _import_patched = False

    def _start_monitoring(self, mon: Any) -> bool:
        """Report Python calls through ``sys.monitoring``. Each code's first call reaches
        :meth:`_on_call`; runtime code is disabled there and then. Program code (the user's and
        libraries') with nothing to do (:attr:`_quiet`: no segment, not a step) is disabled too until
        the first env step — before it no code can be a part of "other" (those are callees of the step,
        of the loop, or of such a part), and imports and set-up make nearly all first calls — and is
        reported again from the first step on (``restart_events``, which also re-enables what other
        tools disabled: each gets those events once more), passed over at once while nothing is open
        and no step or loop is known. Returns are reported only for the codes a frame was opened for
        (a local ``PY_RETURN`` event, set when it opens): every other return costs nothing."""
        tool = mon.PROFILER_ID
        try:
            mon.use_tool_id(tool, "perfkit")
        except ValueError:  # another profiler holds the slot: the setprofile path decides
            return False
        E, DISABLE = mon.events, mon.DISABLE
        on_call, on_return, open_ = self._on_call, self._on_return, self._open
        quiet, step_frames, returns = self._quiet, self._step_frames, self._returns
        set_local, RETURN = mon.set_local_events, E.PY_RETURN
        getframe = sys._getframe

        ignored = self._ignored

        def py_start(code, offset):
            if quiet.get(id(code)) is code:
                if not self._stepped:  # reported again from the first step on (restart_events)
                    return DISABLE
                if not open_ and not step_frames and self.loop_code is None:
                    return None
            elif ignored.get(id(code)) is code:  # decided before the first step's restart: still nothing
                return DISABLE
            try:
                frame = getframe(1)
                keep = on_call(frame, code)
                if not keep:
                    ignored[id(code)] = code
                if open_ and code not in returns and id(frame) in open_:
                    returns.add(code)
                    set_local(tool, code, RETURN)  # from this very call on
                return None if keep else DISABLE
            except Exception:  # pragma: no cover
                return None

        def py_return(code, offset, retval):
            if open_:
                fid = id(getframe(1))
                if fid in open_:
                    on_return(fid)

        def py_unwind(code, offset, exc):  # a frame left by an exception (not a local event: every code)
            if open_:
                fid = id(getframe(1))
                if fid in open_:
                    on_return(fid)

        mon.register_callback(tool, E.PY_START, py_start)
        mon.register_callback(tool, RETURN, py_return)
        mon.register_callback(tool, E.PY_UNWIND, py_unwind)
        mon.set_events(tool, E.PY_START | E.PY_UNWIND)
        self._tool = tool
        return True

    def _stop_monitoring(self) -> None:
        mon = sys.monitoring
        tool = self._tool
        self._tool = None
        mon.set_events(tool, 0)
        for code in self._returns:
            mon.set_local_events(tool, code, 0)
        self._returns.clear()
        for ev in (mon.events.PY_START, mon.events.PY_RETURN, mon.events.PY_UNWIND):
            mon.register_callback(tool, ev, None)
        mon.free_tool_id(tool)  # (no restart_events: it would re-enable other tools' disabled events too)

    def _hook_imports(self) -> None:
        import builtins

        orig = builtins.__import__
        me = self
        mon = sys.monitoring if self._tool is not None else None

        def __import__(name, globals=None, locals=None, fromlist=(), level=0):
            if level == 0 and name in sys.modules:
                return orig(name, globals, locals, fromlist, level)
            if mon is not None:  # sys.monitoring: the window's global events off while the module loads
                tool = me._tool
                events = mon.get_events(tool) if tool is not None else 0
                if not events:  # the window closed, or an outer import turned them off already
                    return orig(name, globals, locals, fromlist, level)
                mon.set_events(tool, 0)
                try:
                    return orig(name, globals, locals, fromlist, level)
                finally:
                    if me._tool == tool and me._import_patched:
                        mon.set_events(tool, events)
            if sys.getprofile() is not me:
                return orig(name, globals, locals, fromlist, level)
            sys.setprofile(None)
            try:
                return orig(name, globals, locals, fromlist, level)
            finally:
                if me._import_patched:
                    sys.setprofile(me)

        __import__.__perfkit_import__ = True  # type: ignore[attr-defined]
        self._import_orig = orig
        builtins.__import__ = __import__
        self._import_patched = True

    closed = False  # stop() was called: the window is shut for good

    def stop(self, wrap_found: bool = True) -> None:
        """Close the window: drop the profile function and, with ``wrap_found``, wrap what it found
        (through the session's patcher, so the session's end unwraps it). A session that ends during
        warm-up closes the window without wrapping anything."""
        self.closed = True
        if self._tool is not None:
            self._stop_monitoring()
        if self._import_patched:
            import builtins

            self._import_patched = False
            if getattr(builtins.__import__, "__perfkit_import__", False):  # not replaced by someone since
                builtins.__import__ = self._import_orig
        if sys.getprofile() is self:
            sys.setprofile(None)
        # frames still open keep their segment until they return through the wrappers' absence:
        # pop their segment tokens now (outermost first) so nothing leaks past the window.
        toks = [e[0] for e in self._open.values() if isinstance(e[0], int)]
        if toks:
            segments.pop(min(toks))
        self._open.clear()
        self._step_frames.clear()
        if wrap_found:
            from perfkit.collectors.segment_rules import wrap_attr, wrap_item

            skip = {getattr(c, "co_name", None) for c in self.disqualified}
            nested = [c for code, cands in self._nested.items() if self._kept(code) for c in cands]
            for owner, name, seg, how in [*self.candidates, *nested]:
                if seg == "learner" and name in skip:
                    continue
                if how == "dict":
                    wrap_item(self.patcher, owner, name, seg)
                else:
                    wrap_attr(self.patcher, owner, name, seg, everywhere=how == "module")
        self.candidates.clear()
        self._nested.clear()

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

  When the window closes the profile function is removed: steady state runs with wrappers only.
  Nested functions and lambdas cannot be wrapped in place; they keep their segment only during warm-up.
"""

from __future__ import annotations

import sys
from time import perf_counter
from types import FrameType
from typing import Any, Callable

from perfkit import segments
from perfkit.batched_env import num_envs_of
from perfkit.collectors import hub
from perfkit.collectors.hub import Sink
from perfkit.collectors.patches import Patcher, wraps
from perfkit.collectors.sites import chain_of, is_program_file

current: "StepClock | None" = None
"""The active session's clock (None outside a session): what the step wrappers report to."""


class StepClock:
    """Step boundaries, step times and the current phase (see module doc).

    ``on_boundary(now, index, env)`` is called for every boundary whose index is not below
    ``next_special`` (the session's scheduler sets ``next_special`` to the next step it wants to see);
    all others take the fast path. ``times`` holds the duration of every step the scheduler counts as
    timed (it appends those itself on the slow path)."""

    def __init__(self, warmup_steps: int, on_boundary: Callable[[float, int, Any], None]):
        self.warmup_steps = warmup_steps
        self.on_boundary = on_boundary
        self.index = 0  # the current step (1, 2, ...); 0 before the first
        self.times: list[float] = []  # seconds, timed steps only
        self.begin_t = 0.0  # perf_counter() at the current step's boundary
        self.last_end: float | None = None  # perf_counter() when the last step call returned
        self.in_step = False  # inside an env step call (a nested step is not another boundary)
        self.manual = False  # perfkit.step() was called: automatic detection is off
        self.next_special = 1
        self.trail: dict[tuple, int] = {}  # steady sync events since the last boundary, by sink key

    @property
    def phase(self) -> str:
        i = self.index
        if i == 0:
            return "setup"
        return "warmup" if i <= self.warmup_steps else "steady"

    def begin(self, env: Any = None, now: float | None = None) -> None:
        """A step boundary: the previous step ends and step ``index + 1`` begins."""
        if now is None:
            now = perf_counter()
        if self.trail:
            self.trail = {}
        idx = self.index + 1
        if idx < self.next_special:
            self.times.append(now - self.begin_t)
            self.index = idx
            self.begin_t = now
            return
        hub.tls.depth += 1  # the scheduler's own torch calls are not the user's
        try:
            self.on_boundary(now, idx, env)
        finally:
            hub.tls.depth -= 1

    def end(self) -> None:
        """The env step call returned (the last step of a run ends here, not at the session's end)."""
        self.last_end = perf_counter()

    def mark(self) -> None:
        """``perfkit.step()``: a boundary by hand; automatic detection stops for the session."""
        self.manual = True
        self.begin(None)


class PhaseSink(Sink):
    """The session's sink: events keyed by the clock's phase (``setup``/``warmup``/``steady``);
    allocation and stream events count only while ``sampling()`` says a step is sampled (phase
    ``sampled``). Steady syncs are also kept in the clock's trail."""

    def __init__(self, clock: StepClock, sampling: Callable[[], bool], on_sync: Callable[[], None] | None = None):
        super().__init__()
        self.clock = clock
        self.sampling = sampling
        self.on_sync = on_sync
        self.chains: dict[tuple, tuple] = {}  # (kind, op, file, line) -> the chain back to user code, first seen

    def add(self, kind, op, site, segment, thread, nbytes, would, n=1, frame=None) -> None:
        if kind in ("alloc", "stream"):
            if not self.sampling():
                return
            phase = "sampled"
        else:
            phase = self.clock.phase
        key = (kind, op, site[0], site[1], site[2], thread, would, phase)
        if key not in self.counts:
            where = (kind, op, site[0], site[1])
            if where not in self.chains:
                self.chains[where] = chain_of(frame)
        self.count(key, segment, nbytes, n)
        if kind == "sync":
            if phase == "steady":
                trail = self.clock.trail
                trail[key] = trail.get(key, 0) + n
            if self.on_sync is not None:
                self.on_sync()


def step_wrapper(orig: Callable) -> Callable:
    """Wrap an env's ``step``: the outermost call is one step boundary of the active clock (gym-style
    wrappers nest; a step inside a step is not another one)."""
    mod = sys.modules[__name__]

    def step(*args, **kwargs):
        c = mod.current
        if c is None or c.in_step or c.manual or hub.is_compiling():
            return orig(*args, **kwargs)
        c.in_step = True
        c.begin(args[0] if args else None)
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
        raise ValueError(str(e) if "must look like" in str(e) else f"--step-fn {spec}: {e}") from None
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


def patch_step_method(patcher: Patcher, cls: type, name: str) -> bool:
    owner = defining_class(cls, name)
    if owner is None:
        return False
    raw = vars(owner)[name]
    if getattr(raw, "__perfkit_step__", False):
        return False
    if isinstance(raw, (staticmethod, classmethod)):
        return False
    patcher.set(owner, name, step_wrapper(raw))
    return True


class Discovery:
    """The ``sys.setprofile`` function of the discovery window (see module doc)."""

    def __init__(self, clock: StepClock, patcher: Patcher, find_steps: bool, name_segments: dict[str, str]):
        self.clock = clock
        self.patcher = patcher
        self.find_steps = find_steps
        self.name_segments = name_segments
        self._open: dict[int, Any] = {}  # id(frame) -> "step" | segment token
        self._seen: set = set()
        self.candidates: list[tuple[Any, str, str, bool]] = []  # (owner, name, segment, is_module)
        self.step_classes: list[type] = []
        self._rejected_step_codes: set = set()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        try:
            self._event(frame, event)
        except Exception:  # pragma: no cover - an error here must not reach the program (or drop the profiler)
            pass

    def watch_modules(self, module_call_code: Any, is_grad_enabled: Callable[[], bool], found: list) -> None:
        """Also find the policy: outermost ``nn.Module`` calls made with autograd off (pushed as 'policy'
        during the window; their classes are wrapped when it closes)."""
        self._module_code = module_call_code
        self._grad_on = is_grad_enabled
        self._policy_found = found

    _module_code: Any = None

    def _event(self, frame: FrameType, event: str) -> None:
        if event == "call":
            code = frame.f_code
            if code is self._module_code:
                if not self._grad_on() and "policy" not in hub.tls.stack and hub.tls.main:
                    mod = frame.f_locals.get("self")
                    if mod is not None:
                        cls = type(mod)
                        if cls not in self._policy_found:
                            self._policy_found.append(cls)
                        self._open[id(frame)] = segments.push("policy")
                return
            name = code.co_name
            if name == "step" and self.find_steps and code not in self._rejected_step_codes:
                c = self.clock
                if c.in_step or c.manual:
                    return
                obj = self._receiver(frame, code)
                n = num_envs_of(obj)
                if n is None:
                    self._rejected_step_codes.add(code)
                    return
                cls = type(obj)
                if patch_step_method(self.patcher, cls, "step"):
                    self.step_classes.append(cls)
                c.in_step = True
                c.begin(obj)
                self._open[id(frame)] = "step"
                return
            if code in self._seen:
                tok_seg = self._seen_seg.get(code)
                if tok_seg is not None:
                    self._open[id(frame)] = segments.push(tok_seg)
                return
            self._seen.add(code)
            if not is_program_file(code.co_filename):
                self._seen_seg[code] = None
                return
            seg = self.name_segments.get(name) or segments.segment_for_name(name)
            self._seen_seg[code] = seg
            if seg is None:
                return
            self._open[id(frame)] = segments.push(seg)
            self._remember(frame, code, seg)
        elif event == "return" and self._open:
            tok = self._open.pop(id(frame), None)
            if tok is None:
                return
            if tok == "step":
                self.clock.in_step = False
                self.clock.end()
            else:
                segments.pop(tok)

    _seen_seg: dict = {}

    @staticmethod
    def _receiver(frame: FrameType, code: Any) -> Any:
        if code.co_argcount < 1:
            return None
        return frame.f_locals.get(code.co_varnames[0])

    def _remember(self, frame: FrameType, code: Any, seg: str) -> None:
        name = code.co_name
        g = frame.f_globals
        fn = g.get(name)
        if getattr(fn, "__code__", None) is code:
            mod = sys.modules.get(g.get("__name__", ""))
            if mod is not None:
                self.candidates.append((mod, name, seg, True))
            return
        obj = self._receiver(frame, code)
        if obj is None:
            return
        cls = obj if isinstance(obj, type) else type(obj)
        owner = defining_class(cls, name, code)
        if owner is not None:
            self.candidates.append((owner, name, seg, False))

    def start(self) -> bool:
        if sys.getprofile() is not None:
            return False
        self._seen_seg = {}
        sys.setprofile(self)
        return True

    def stop(self, wrap_found: bool = True) -> None:
        """Close the window: drop the profile function and, with ``wrap_found``, wrap what it found
        (through the session's patcher, so the session's end unwraps it). A session that ends during
        warm-up closes the window without wrapping anything."""
        if sys.getprofile() is self:
            sys.setprofile(None)
        # frames still open keep their segment until they return through the wrappers' absence:
        # pop their segment tokens now (outermost first) so nothing leaks past the window.
        toks = [t for t in self._open.values() if t != "step"]
        if toks:
            segments.pop(min(toks))
        self._open.clear()
        if wrap_found:
            from perfkit.collectors.segment_rules import wrap_attr

            for owner, name, seg, is_module in self.candidates:
                wrap_attr(self.patcher, owner, name, seg, everywhere=is_module)
        self.candidates.clear()

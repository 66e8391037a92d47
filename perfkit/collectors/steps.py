"""Finding the env step with no code change, and the user functions the name rules put in a segment.

A short *discovery window* — from the session's start to the end of warm-up — runs a ``sys.setprofile``
function. It looks at Python calls only by name:

* a call of a method named ``step`` whose receiver has an integer ``num_envs`` (instance or class) is an
  env step: the method is wrapped on the class that defines it (so every later call is a step boundary
  through a plain wrapper) and this very call is counted as the first step;
* a user-code function whose name the rules put in a segment (``compute_reward`` → reward,
  ``simulate`` → physics, ``log_metrics`` → logging, or a name from ``[tool.perfkit] segments``) runs in
  that segment, and is remembered so that it can be wrapped where it lives (a class or module
  attribute) when the window closes.

When the window closes the profile function is removed: steady state runs with wrappers only.
Nested functions and lambdas cannot be wrapped in place; they keep their segment only during warm-up.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import TYPE_CHECKING, Any, Callable

from perfkit import segments
from perfkit.batched_env import num_envs_of
from perfkit.collectors.sites import is_user_file
from perfkit.collectors import hub
from perfkit.collectors.patches import Patcher, wraps

if TYPE_CHECKING:  # pragma: no cover
    from perfkit.session import Session


def step_wrapper(orig: Callable, session_getter: Callable[[], "Session | None"] | None = None) -> Callable:
    """Wrap an env's ``step``: the outermost call is one step boundary (gym-style wrappers nest).

    ``session_getter`` None reads the active session directly (one call less per step)."""

    from time import perf_counter

    import perfkit.session as session_mod

    def step(*args, **kwargs):
        s = session_mod._active if session_getter is None else session_getter()
        if s is None or s._in_step or s.manual_steps or hub.is_compiling():
            return orig(*args, **kwargs)
        s._in_step = True
        now = perf_counter()
        idx = s.step_index + 1
        if idx < s._next_special:  # Session.begin_step's fast path, inlined: one call less per step
            if s._trail:
                s._trail = {}
            s.step_times.append(now - s.t_step_begin)
            s.step_index = idx
            s.t_step_begin = now
        else:
            s.begin_step(args[0] if args else None, now)
        try:
            return orig(*args, **kwargs)
        finally:
            s._in_step = False
            s.t_last_end = perf_counter()

    wraps(orig)(step)
    step.__perfkit_step__ = True  # type: ignore[attr-defined]
    return step


hub.transparent.add(step_wrapper(lambda: None).__code__)


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


def patch_step_method(patcher: Patcher, cls: type, name: str, session_getter) -> bool:
    owner = defining_class(cls, name)
    if owner is None:
        return False
    raw = vars(owner)[name]
    if getattr(raw, "__perfkit_step__", False):
        return False
    if isinstance(raw, (staticmethod, classmethod)):
        return False
    patcher.set(owner, name, step_wrapper(raw, session_getter))
    return True


class Discovery:
    """The ``sys.setprofile`` function of the discovery window (see module doc)."""

    def __init__(self, session: "Session", find_steps: bool, name_segments: dict[str, str]):
        self.session = session
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
                s = self.session
                if s._in_step or s.manual_steps:
                    return
                obj = self._receiver(frame, code)
                n = num_envs_of(obj)
                if n is None:
                    self._rejected_step_codes.add(code)
                    return
                cls = type(obj)
                if patch_step_method(s.patcher, cls, "step", None):
                    self.step_classes.append(cls)
                s._in_step = True
                s.begin_step(obj)
                self._open[id(frame)] = "step"
                return
            if code in self._seen:
                tok_seg = self._seen_seg.get(code)
                if tok_seg is not None:
                    self._open[id(frame)] = segments.push(tok_seg)
                return
            self._seen.add(code)
            if not is_user_file(code.co_filename):
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
                s = self.session
                s._in_step = False
                s.end_step()
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

    def stop(self, patcher: Patcher) -> None:
        """Close the window: drop the profile function, wrap what it found."""
        if sys.getprofile() is self:
            sys.setprofile(None)
        # frames still open keep their segment until they return through the wrappers' absence:
        # pop their segment tokens now (outermost first) so nothing leaks past the window.
        toks = [t for t in self._open.values() if t != "step"]
        if toks:
            segments.pop(min(toks))
        self._open.clear()
        from perfkit.collectors.segment_rules import wrap_attr

        for owner, name, seg, is_module in self.candidates:
            wrap_attr(patcher, owner, name, seg, everywhere=is_module)
        self.candidates.clear()

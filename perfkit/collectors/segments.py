"""Segments of a training loop (physics, policy, reward, learner, logging, other) and the segment API.

``perfkit.segment("reward")`` is a context manager and a decorator; segments nest and time goes to the
innermost. Without any code change a profiling session assigns segments by rules (docs/design.md):

* physics: calls of ``mujoco_warp.step``, ``wp.capture_launch``, ``mujoco.mj_step``, ``mujoco.rollout``,
  and user functions whose name says physics/simulate;
* policy: ``nn.Module`` calls while autograd is off (``no_grad`` / ``inference_mode``);
* learner: ``backward``, ``optimizer.step``, ``zero_grad``;
* reward: user functions whose name contains ``reward``;
* logging: ``print``, ``logging``, TensorBoard's ``SummaryWriter``, ``tqdm``, user functions whose name
  contains ``log``;
* everything else: other.

Config (``[tool.perfkit] segments = {"pkg.mod:Class.method" = "physics", "compute_obs" = "policy"}``)
and the API override the rules. The rules' machinery lives in :mod:`perfkit.collectors.segment_rules`.
"""

from __future__ import annotations

import inspect
import re
import sys
import threading
from typing import Any, Callable

from perfkit.collectors import hub
from perfkit.collectors.hub import tls
from perfkit.collectors.patches import wraps

# Called with the new innermost segment name on every transition in the main thread while a
# session times segments (None otherwise).
on_transition: Callable[[str], None] | None = None

_NAME_RULES = (
    ("reward", re.compile(r"reward")),
    ("physics", re.compile(r"physic|simulat")),
    ("logging", re.compile(r"(^|_)(log|logs|logging|logger)(_|$)|^log[A-Z]")),
)
_NOT_LOGGING = re.compile(r"(^|_)log_?(prob|probs|std|softmax|sigmoid|det|sum|likelihood|ratio|pi|p|alpha)(_|$)")


def segment_for_name(name: str) -> str | None:
    """The segment a function's *name* puts it in, or None (the name rules of docs/design.md)."""
    low = name.lower()
    for seg, pat in _NAME_RULES:
        if seg == "logging":
            if pat.search(name) and not _NOT_LOGGING.search(low):
                return seg
        elif pat.search(low):
            return seg
    return None


# A learner update: a method named like one (rsl_rl's PPO.update, SB3's PPO.train, skrl's _update) that
# runs the optimizer itself (its code calls backward or zero_grad).
_LEARNER_NAME = re.compile(r"^_*(update|train|optimi[sz]e|learn_step|train_step)(_\w*)?$")
_LEARNER_CALLS = frozenset({"backward", "zero_grad"})
_LOGGING_OWNER = re.compile(r"(^|_)(log|logs|logging|logger|loggers)$|Logger$|^Logger")


def is_logger_class_name(name: str) -> bool:
    """``Logger``, ``EpisodeLogger``, ``logger``, ``wandb_log``: a class (or module) named like a logger."""
    return bool(_LOGGING_OWNER.search(name))


def is_logger_class(cls: type) -> bool:
    """A class named like a logger, one derived from one (``class Tracker(Logger)``), or a writer
    derived from TensorBoard's ``SummaryWriter`` (rsl_rl's ``WandbSummaryWriter``): every method of
    one is logging."""
    return any(is_logger_class_name(k.__name__) or k.__name__ == "SummaryWriter" for k in cls.__mro__[:-1])


def segment_for(name: str, module: str | None = None, qualname: str | None = None, code=None) -> str | None:
    """The segment a function belongs to by rule, library functions as user ones, or None:

    * a method of a class named like a logger: every one is logging (``Logger.log``,
      ``Logger.process_env_step``, ``EpisodeLogger.update_reward_stats``);
    * its name (:func:`segment_for_name`: ``compute_reward``, ``simulate``, ``log_metrics``);
    * a learner update: named like ``update``/``train``/``optimize`` and calling ``backward`` or
      ``zero_grad`` itself (``code``'s names);
    * its class (``RewardManager.compute`` is reward);
    * its module (reward terms in ``mdp/rewards.py``; ``rsl_rl/utils/logger.py``)."""
    parts = (qualname or "").split(".")
    owner = parts[-2] if len(parts) >= 2 and parts[-2] != "<locals>" else ""
    if owner and is_logger_class_name(owner):
        return "logging"
    seg = segment_for_name(name)
    if seg is not None:
        return seg
    if code is not None and _LEARNER_NAME.match(name) and _LEARNER_CALLS & set(getattr(code, "co_names", ())):
        return "learner"
    if owner:
        if "reward" in owner.lower():
            return "reward"
    leaf = (module or "").rsplit(".", 1)[-1]
    if leaf:
        if "reward" in leaf.lower():
            return "reward"
        if _LOGGING_OWNER.search(leaf.lower()):
            return "logging"
    return None


def current() -> str:
    """The innermost segment of the calling thread (outside any: 'other', or the segment of the
    training loop's code running now, :mod:`perfkit.collectors.regions`)."""
    st = tls.stack
    return st[-1] if st else hub.outside_segment()


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"perfkit.segment needs a non-empty segment name, got {name!r}")
    return name


class segment:
    """``with perfkit.segment("reward"): ...`` or ``@perfkit.segment("reward")``: time and findings inside
    go to that segment (the innermost one wins when segments nest)."""

    __slots__ = ("name", "_tokens")

    def __init__(self, name: str):
        self.name = _check_name(name)
        self._tokens: list[int] = []

    def __enter__(self) -> "segment":
        if hub.is_compiling():
            self._tokens.append(-1)
            return self
        st = tls.stack
        self._tokens.append(len(st))
        st.append(self.name)
        cb = on_transition
        if cb is not None and tls.main:
            cb(self.name)
        return self

    def __exit__(self, *exc) -> bool:
        tok = self._tokens.pop() if self._tokens else -2
        if tok == -1:
            return False
        st = tls.stack
        if tok == -2:
            tok = len(st) - 1
        del st[tok:]
        cb = on_transition
        if cb is not None and tls.main:
            cb(st[-1] if st else hub.outside_segment())
        return False

    def __call__(self, fn: Callable) -> Callable:
        if inspect.isgeneratorfunction(fn) or inspect.iscoroutinefunction(fn):
            raise TypeError("perfkit.segment decorates plain functions; use `with perfkit.segment(...)` inside generators/coroutines")
        return wrap(fn, self.name)

    def __repr__(self) -> str:
        return f"perfkit.segment({self.name!r})"


def wrap(fn: Callable, name: str) -> Callable:
    """``fn`` wrapped so that its calls run in segment ``name`` (a plain function: binds as a method).

    The main thread's path avoids ``threading.local`` (the segment stack is :data:`hub.MAIN_STACK`): this
    wrapper runs on every call of every segment-ruled function, so every attribute lookup counts."""
    _check_name(name)
    main_stack = hub.MAIN_STACK
    main_ident = hub.MAIN_IDENT
    get_ident = threading.get_ident
    mod = sys.modules[__name__]

    def in_segment(*args, **kwargs):
        if hub.is_compiling():  # inside a torch.compile trace: be the original function
            return fn(*args, **kwargs)
        if get_ident() == main_ident:
            st = main_stack
            if st and st[-1] == name:  # already inside this segment: nothing changes, nothing to time
                return fn(*args, **kwargs)
            tok = len(st)
            st.append(name)
            cb = mod.on_transition
            if cb is not None:
                cb(name)
            try:
                return fn(*args, **kwargs)
            finally:
                del st[tok:]
                if cb is not None:
                    cb(st[-1] if st else hub.outside_segment())
        st = tls.stack  # another thread: its own stack, no timing
        if st and st[-1] == name:
            return fn(*args, **kwargs)
        tok = len(st)
        st.append(name)
        try:
            return fn(*args, **kwargs)
        finally:
            del st[tok:]

    wraps(fn)(in_segment)
    in_segment.__perfkit_segment__ = name  # type: ignore[attr-defined]
    return in_segment


hub.transparent.add(wrap(lambda: None, "other").__code__)


def push(name: str) -> int:
    """Enter segment ``name`` (for hooks that have no ``with`` block); returns the token for :func:`pop`."""
    st = tls.stack
    tok = len(st)
    st.append(name)
    cb = on_transition
    if cb is not None and tls.main:
        cb(name)
    return tok


def pop(token: int) -> None:
    st = tls.stack
    if token < len(st):
        del st[token:]
        cb = on_transition
        if cb is not None and tls.main:
            cb(st[-1] if st else hub.outside_segment())

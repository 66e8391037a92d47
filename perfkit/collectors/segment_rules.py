"""The automatic segment rules (docs/design.md) as hooks: which library calls are physics, learner, logging,
and which module calls are the policy.

* Known library entry points are wrapped in place (``mujoco_warp.step``, ``wp.capture_launch``,
  ``mujoco.mj_step``, ``mujoco.rollout``, ``Tensor.backward``, ``Optimizer.zero_grad``, ``print``,
  ``logging``, ``SummaryWriter``, ``tqdm``); their modules are picked up when they get imported
  (:meth:`SegmentRules.poll`, called at step boundaries).
* ``optimizer.step`` is the learner through torch's global optimizer step hooks (fire once per step).
* The policy: during the warm-up window the discovery profile function (:mod:`.steps`) sees the
  outermost ``nn.Module`` calls made with autograd off; when the window closes the found classes'
  ``forward`` is wrapped — one cheap wrapper per policy call in steady state. (torch's global module
  hooks would do the same but put every module call on torch's slow path, and warn under
  ``torch.compile``.)
* Config targets ``"pkg.mod:Class.method" = "segment"`` are wrapped at start.
* Name rules (``log_iteration`` is logging, ``compute_reward`` is reward): the discovery window sees the
  user functions called while it is open; when it closes, the user modules are also scanned
  (:meth:`SegmentRules.wrap_named`) so functions first called later — a once-per-iteration
  ``log_iteration`` after a warm-up shorter than the rollout — get their segment too.
"""

from __future__ import annotations

import inspect
import sys
import threading
from typing import Any, Callable

from perfkit.collectors import segments
from perfkit.targets import resolve
from perfkit.collectors.sites import is_program_file, is_user_file
from perfkit.collectors import hub
from perfkit.collectors.hub import tls
from perfkit.collectors.patches import Patcher

# (module, dotted attribute, segment)
KNOWN_TARGETS: tuple[tuple[str, str, str], ...] = (
    ("mujoco_warp", "step", "physics"),
    ("warp", "capture_launch", "physics"),
    ("mujoco", "mj_step", "physics"),
    ("mujoco.rollout", "rollout", "physics"),
    ("mujoco.rollout", "Rollout.rollout", "physics"),
    ("torch", "Tensor.backward", "learner"),
    ("torch.autograd", "backward", "learner"),
    ("torch.optim", "Optimizer.zero_grad", "learner"),
    ("torch.nn", "Module.zero_grad", "learner"),
    ("builtins", "print", "logging"),
    ("logging", "Logger._log", "logging"),
    ("tqdm.std", "tqdm.update", "logging"),
    ("tqdm.std", "tqdm.set_postfix", "logging"),
    ("tqdm.std", "tqdm.set_description", "logging"),
    ("tqdm.std", "tqdm.refresh", "logging"),
    ("torch.utils.tensorboard.writer", "SummaryWriter.add_scalar", "logging"),
    ("torch.utils.tensorboard.writer", "SummaryWriter.add_scalars", "logging"),
    ("torch.utils.tensorboard.writer", "SummaryWriter.add_histogram", "logging"),
    ("torch.utils.tensorboard.writer", "SummaryWriter.add_image", "logging"),
    ("torch.utils.tensorboard.writer", "SummaryWriter.add_text", "logging"),
    ("torch.utils.tensorboard.writer", "SummaryWriter.flush", "logging"),
)

# Targets whose every module-global alias should be replaced too (``from mujoco_warp import step``).
_EVERYWHERE = {("mujoco_warp", "step"), ("warp", "capture_launch"), ("mujoco", "mj_step"), ("mujoco.rollout", "rollout")}


def wrap_attr(patcher: Patcher, owner: Any, name: str, seg: str, everywhere: bool = False) -> bool:
    """Wrap ``owner.name`` so its calls run in segment ``seg``; static/class methods kept as such."""
    raw = vars(owner).get(name) if isinstance(owner, type) else None
    if raw is None:
        # inherited method: wrap the attribute the class resolves to (set on ``owner``)
        raw = getattr(owner, name)
    if getattr(raw, "__perfkit_segment__", None) is not None:
        return False  # already wrapped
    if isinstance(raw, staticmethod):
        new: Any = staticmethod(segments.wrap(raw.__func__, seg))
    elif isinstance(raw, classmethod):
        new = classmethod(segments.wrap(raw.__func__, seg))
    else:
        new = segments.wrap(raw, seg)
    try:
        if everywhere:
            patcher.set_everywhere(owner, name, new)
        else:
            patcher.set(owner, name, new)
    except (AttributeError, TypeError):
        return False
    return True


def wrap_item(patcher: Patcher, namespace: dict, name: str, seg: str) -> bool:
    """Wrap the function ``namespace[name]`` (a module's globals where the module is not registered in
    ``sys.modules``: a script loaded by hand) so its calls run in segment ``seg``."""
    fn = namespace.get(name)
    if fn is None or getattr(fn, "__perfkit_segment__", None) is not None:
        return False
    patcher.set_item(namespace, name, segments.wrap(fn, seg))
    return True


class SegmentRules:
    """Installs the rules for one session; everything goes through the session's patcher."""

    def __init__(self, patcher: Patcher, config_targets: dict[str, str] | None = None):
        self.patcher = patcher
        self.config_targets = dict(config_targets or {})
        self._done: set[tuple[str, str]] = set()
        self._modules_pending = {m for m, _, _ in KNOWN_TARGETS}
        self._handles: list[Any] = []
        self._opt_tokens: dict[int, int] = {}
        self.policy_classes: list[type] = []
        self.errors: list[str] = []

    # ---- known targets ------------------------------------------------------------------------
    def install(self) -> None:
        with self.patcher.batch():  # the aliases of every target replaced in one pass over the modules
            for key, seg in self.config_targets.items():
                mod, _, dotted = key.partition(":")
                try:
                    owner, name, _ = resolve(mod, dotted)
                except LookupError as e:
                    self.errors.append(f"[tool.perfkit] segments: {e}")
                    continue
                wrap_attr(self.patcher, owner, name, seg, everywhere=not isinstance(owner, type))
                self._done.add((mod, dotted))
            self.poll()
        self._install_optimizer_hooks()

    def poll(self) -> None:
        """Wrap known targets of modules imported since the last call (cheap when none are new); their
        aliases in the loaded modules are replaced in one pass (``mujoco.mj_step`` and
        ``mujoco.rollout.rollout`` scanned ~2,400 modules each on a real stack)."""
        if not self._modules_pending:
            return
        ready = {m for m in self._modules_pending if m in sys.modules}
        if not ready:
            return
        with self.patcher.batch():
            for mod, dotted, seg in KNOWN_TARGETS:
                if mod not in ready or (mod, dotted) in self._done:
                    continue
                self._done.add((mod, dotted))
                try:
                    owner, name, _ = resolve(mod, dotted)
                except LookupError:
                    continue
                wrap_attr(self.patcher, owner, name, seg, everywhere=(mod, dotted) in _EVERYWHERE)
        self._modules_pending -= ready
        if "torch" in ready:
            self._install_optimizer_hooks()

    def _install_optimizer_hooks(self) -> None:
        if "torch" not in sys.modules or any(h[0] == "opt" for h in self._handles):
            return
        from torch.optim import optimizer as opt

        tokens = self._opt_tokens

        def pre(optimizer, args, kwargs):
            if not hub.is_compiling():
                tokens[id(optimizer)] = segments.push("learner")

        def post(optimizer, args, kwargs):
            if hub.is_compiling():
                return
            tok = tokens.pop(id(optimizer), None)
            if tok is not None:
                segments.pop(tok)

        self._handles.append(("opt", opt.register_optimizer_step_pre_hook(pre)))
        self._handles.append(("opt", opt.register_optimizer_step_post_hook(post)))

    # ---- name rules -----------------------------------------------------------------------------
    def wrap_named(self, name_segments: dict[str, str] | None = None, frame: Any = None,
                   modules: set[str] | None = None, skip: set | None = None) -> list[str]:
        """Wrap the functions and methods whose rules put them in a segment (``name_segments`` — config
        names — first, then :func:`perfkit.collectors.segments.segment_for`) in the user's modules, the library
        modules named in ``modules`` (those that ran during the discovery window), and the globals of
        ``frame`` and its callers (a script loaded without registering its module). Code objects in
        ``skip`` (training loops named like a learner) and already-wrapped functions are left alone.
        Returns ``"module:qualname"`` of each wrapped one."""
        names = dict(name_segments or {})
        wanted = set(modules or ())
        # a library's modules that did not run in the window but belong to one that did (a logger's
        # writer module first used by the once-per-iteration log())
        packages = {m.partition(".")[0] for m in wanted}
        wanted |= {m for m in list(sys.modules) if m.partition(".")[0] in packages}
        skip = skip or set()
        spaces: dict[int, tuple[Any, dict]] = {}
        for modname, mod in list(sys.modules.items()):
            d = getattr(mod, "__dict__", None)
            file = getattr(mod, "__file__", None)
            if isinstance(d, dict) and file and (is_user_file(file) or (modname in wanted and is_program_file(file))):
                spaces[id(d)] = (mod, d)
        while frame is not None:
            g = frame.f_globals
            if id(g) not in spaces and is_program_file(frame.f_code.co_filename):
                spaces[id(g)] = (None, g)
            frame = frame.f_back
        done: list[str] = []
        for mod, d in spaces.values():
            modname = d.get("__name__")
            if not modname:
                continue
            for attr, val in list(d.items()):
                if inspect.isfunction(val) and val.__module__ == modname:
                    if val.__code__ in skip:
                        continue
                    seg = _named_segment(attr, val, names)
                    if seg is None:
                        continue
                    if mod is None:
                        if wrap_item(self.patcher, d, attr, seg):
                            done.append(f"{modname}:{attr}")
                    elif wrap_attr(self.patcher, mod, attr, seg, everywhere=True):
                        done.append(f"{modname}:{attr}")
                elif isinstance(val, type) and val.__module__ == modname:
                    logger = segments.is_logger_class(val)
                    for mname, raw in list(vars(val).items()):
                        fn = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
                        if not inspect.isfunction(fn) or fn.__code__ in skip:
                            continue
                        # every method of a logger class (one named like it, or a subclass) is logging
                        seg = _named_segment(mname, fn, {**names, mname: "logging"} if logger else names)
                        if seg is not None and wrap_attr(self.patcher, val, mname, seg):
                            done.append(f"{modname}:{val.__qualname__}.{mname}")
        return done

    # ---- policy discovery ------------------------------------------------------------------------
    def start_policy_discovery(self, discovery: Any) -> None:
        """The discovery window's profile function watches ``nn.Module`` calls (no global module hooks:
        those would put every module call on torch's slow path and warn under ``torch.compile``)."""
        import torch

        call = getattr(torch.nn.Module, "_wrapped_call_impl", None) or torch.nn.Module._call_impl
        discovery.watch_modules(call.__code__, torch.is_grad_enabled, self.policy_classes)

    def finish_policy_discovery(self) -> None:
        """Wrap the found policy classes' ``forward`` (the window that found them is closing).

        A wrapper module is the policy like any other: ``DistributedDataParallel`` (whose ``forward``
        perfkit's comm collector has wrapped already: wrapped again, on top) and ``torch.compile``'s
        ``OptimizedModule`` (it sets ``forward`` per instance, to the compiled callable: its class's
        ``__call__`` is wrapped instead — the compiled code inside never runs the module's Python)."""
        if not self.policy_classes:
            return
        import torch

        is_grad_enabled = torch.is_grad_enabled
        for cls in self.policy_classes:
            found = _policy_entry(cls, torch.nn.Module)
            if found is None:
                continue
            owner, attr = found
            orig = vars(owner)[attr]
            if getattr(orig, "__perfkit_policy__", False):
                continue
            self.patcher.set(owner, attr, _policy_forward(orig, is_grad_enabled))

    def remove(self) -> None:
        for _, h in self._handles:
            h.remove()
        self._handles.clear()


def _named_segment(name: str, fn: Any, names: dict[str, str]) -> str | None:
    """The rule segment of function ``fn`` called ``name`` (None: no rule, dunder, generator, a perfkit
    wrapper, or defined in the runtime)."""
    if name.startswith("__") or getattr(fn, "__perfkit_segment__", None) is not None:
        return None
    code = getattr(fn, "__code__", None)
    if code is None or not is_program_file(code.co_filename) or code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        return None
    return names.get(name) or segments.segment_for(name, getattr(fn, "__module__", None), getattr(fn, "__qualname__", name), code)


def _policy_entry(cls: type, module_base: type) -> tuple[type, str] | None:
    """(class, attribute) to wrap so that calls of ``cls`` modules run in the policy segment: the
    nearest ``forward`` defined below ``nn.Module``, else the nearest ``__call__`` (a wrapper module
    whose ``forward`` is an instance attribute, as ``torch.compile``'s), else None."""
    below = [k for k in cls.__mro__ if k is not module_base and issubclass(k, module_base)]
    for attr in ("forward", "__call__"):
        owner = next((k for k in below if inspect.isfunction(vars(k).get(attr))), None)
        if owner is not None:
            return owner, attr
    return None


def _policy_forward(orig: Callable, is_grad_enabled: Callable[[], bool]) -> Callable:
    main_stack, main_ident, get_ident = hub.MAIN_STACK, hub.MAIN_IDENT, threading.get_ident

    def forward(self, *args, **kwargs):
        if is_grad_enabled() or hub.is_compiling():
            return orig(self, *args, **kwargs)
        main = get_ident() == main_ident
        st = main_stack if main else tls.stack
        if st and st[-1] == "policy":
            return orig(self, *args, **kwargs)
        tok = len(st)
        st.append("policy")
        cb = segments.on_transition if main else None
        if cb is not None:
            cb("policy")
        try:
            return orig(self, *args, **kwargs)
        finally:
            del st[tok:]
            if cb is not None:
                cb(st[-1] if st else hub.outside_segment())

    forward.__perfkit_wrapped__ = orig  # type: ignore[attr-defined]
    forward.__perfkit_policy__ = True  # type: ignore[attr-defined]
    forward.__wrapped__ = orig  # type: ignore[attr-defined]
    forward.__name__ = getattr(orig, "__name__", "forward")
    forward.__qualname__ = getattr(orig, "__qualname__", "forward")
    return forward

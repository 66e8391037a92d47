"""Which code is a hot path.

Seeds: methods named like ``step``/``reset*``/``compute_*``/``_reward_*``/..., functions decorated
``@perfkit.hot`` or marked ``# perfkit: hot``, names configured in ``[tool.perfkit.lint] hot``, the
body of any loop that calls an env step (a runner's rollout loop; what the innermost such loop calls is
per-step, what an iteration loop around it calls is per-iteration), a learner's update (a function named
like one that makes a gradient step itself), a function that steps its envs once outside any loop (and a
loop that calls one), and an RL algorithm's per-step entry points (``act*``, ``draw_action``, ``predict``,
``store_episode``... of a class that learns), which the user's script calls rather than the library.
Then everything those call, transitively, across the linted files (see perfkit.lint.project). ``--all``
makes every function hot.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from dataclasses import dataclass, field

from perfkit.lint.modinfo import FUNC_DEFS, ModuleInfo, Unit, dotted, if_tests, unit_nodes
from perfkit.lint.project import GENERIC, STORAGE_CLASS, STORAGE_METHODS, Project

HOT_NAME = re.compile(
    r"^(_*step|_*reset\w*|_*compute_\w+|_reward_\w+|_?get_observations|_?pre_physics_step|_?post_physics_step|"
    r"_apply_actions?|act|update|forward|"
    # a direct-workflow env's per-step parts, called by a base class outside the linted files (Isaac Lab's
    # DirectRLEnv.step runs _get_rewards, _get_dones, _get_states); a per-step hook (a callback's _on_step); the
    # two halves of a vector env's step (step_async, step_wait: hot, not proven, like any wrapper of a step)
    r"_?get_(rewards?|dones|states|terminations?)|_*on_(env_)?step|step_async|step_wait)$"
)
# per-step only as methods: a manager's compute()/apply(), a term's __call__(env, ...), an algorithm's train(self)
HOT_METHOD = re.compile(r"^(compute|apply|__call__|train)$")
# named like a hot path but set-up: nn.Module.reset_parameters() and friends
_NOT_HOT_NAME = re.compile(r"^_*reset_\w*parameters$|^_*reset_(seed|cache|keys|spec|specs|stats|states?_dict)$")
# SB3/TD3/SAC/DQN style: train(self, gradient_steps, batch_size) runs the gradient steps of one env step
_OFF_POLICY_TRAIN = re.compile(r"^(gradient_steps|n_?updates|num_updates|n_?gradient_steps|batch_size|n_?steps|"
                               r"iterations?|num_iterations|updates?)$")
_MANAGER_CLASS = re.compile(r"(Manager|Term)s?$")
# receivers whose .step() is not an environment step
_NOT_ENV_STEP = re.compile(r"(^|\.|_)(opt|optim|optimizer|optimiser|scheduler|sched|scaler|lr_scheduler)$", re.I)
# calls that advance the environments inside a rollout loop (besides a .step() method)
_ENV_STEP_NAME = re.compile(r"^_*(env_step|step_env|envs_step|step_envs|step_and_maybe_reset|env_steps)$")
_GENERIC = GENERIC
INIT_NAMES = ("__init__", "__post_init__", "__new__")
_SETUP_NAME = re.compile(r"^_*(init|initialize|initialise|setup|set_up|alloc|allocate|build|create|prepare|make|"
                         r"configure|construct|load|register|spawn|compile)(_|$)")


@dataclass
class HotPaths:
    units: set = field(default_factory=set)  # hot units
    loops: set = field(default_factory=set)  # id() of loop nodes whose body is hot
    setup_units: set = field(default_factory=set)  # allocation is the point here (__init__, --all setup fns)
    loop_units: set = field(default_factory=set)  # units holding a hot loop
    loop_spans: dict = field(default_factory=dict)  # unit -> [(first, last line of a hot loop's body)]
    # proven per-step (or per-iteration) code: a rollout loop's body and what it calls, an env's step method, a
    # learner's update that runs backward, code marked hot; not code hot by a name pattern alone (forward, act,
    # compute_*): a sync-prone call there with a receiver of unknown type is still a `high` finding
    proven: set = field(default_factory=set)
    # unit -> [(first, last line)] of `if flag:` blocks that no hot caller runs: every hot call passes the
    # parameter a constant that skips the block (`self._log(x, verbose=False)`), and the unit is no seed
    cold_spans: dict = field(default_factory=dict)
    # units that collect a rollout: one loop of env steps, no loop around it, no gradient step (agilerl's
    # `collect_rollouts(agent, env, n_steps)`); a loop calling one is a training iteration loop
    collectors: set = field(default_factory=set)
    # units that step their envs once outside any loop of their own (mushroom-rl's `Core._step`): a loop that
    # calls one is a rollout loop
    steps_once: set = field(default_factory=set)
    # unit -> [(first, last line, proven)] of lambdas it binds to ``self.attr`` that hot code calls as
    # ``self.attr(...)``: their bodies run on the hot path, though the unit building them (``__init__``) does not
    lambda_spans: dict = field(default_factory=dict)
    # functions of any name that make one gradient step outside any loop of their own: proven where hot
    gradient_steps: set = field(default_factory=set)
    # unit -> [(first, last line)] of training iteration loops (see iteration_loops): their own lines run once per
    # iteration, hot but not proven
    iter_spans: dict = field(default_factory=dict)


_STEP_TEXT = re.compile(r"(\.step|env_step|step_env|envs_step|step_envs|step_and_maybe_reset|env_steps)\s*\(")


def is_step_call(node, mod: ModuleInfo | None = None) -> bool:
    """``env.step(...)``: a step *method* (not ``optimizer.step()``, not a module function ``mjw.step``),
    or a call named like an env step: ``self.env_step(...)``, ``step_and_maybe_reset(...)``."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr == "step":
        recv = dotted(f.value) or ""
        if mod is not None and recv in mod.aliases:
            return False
        return not _NOT_ENV_STEP.search(recv)
    return bool(_ENV_STEP_NAME.match(_call_name(node)))


def _call_name(c: ast.Call) -> str:
    """The called name: ``f`` of ``f(...)``, ``m`` of ``x.m(...)`` ('' otherwise)."""
    f = c.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _names_pattern(names, tail: str) -> re.Pattern:
    """A regex finding any of ``names`` as a word followed by ``tail`` (a call: ``\\s*\\(``), for
    :meth:`units_matching`."""
    return re.compile(r"\b(" + "|".join(re.escape(n) for n in sorted(names)) + r")" + tail)


def _loop_calls_step(loop, mod) -> bool:
    stack = list(loop.body)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if is_step_call(n, mod):
            return True
        stack.extend(ast.iter_child_nodes(n))
    return False


def resolve_call(mod: ModuleInfo, unit: Unit, call: ast.Call) -> list:
    """The units ``call`` may run, within the linted files (see perfkit.lint.project)."""
    project = mod.project
    if project is None:
        project = Project([mod])
    return project.resolve_call(mod, unit, call)


def _is_classmethod(unit: Unit) -> bool:
    return any(dotted(d) == "classmethod" for d in getattr(unit.node, "decorator_list", ()))


def name_hot(unit: Unit) -> bool:
    """Hot by its name alone: a function with a per-step name. Never a classmethod (it builds rather than
    steps); a module-level function only in a module that imports torch: in a pure Warp module,
    ``step(model, data)`` / ``forward(...)`` are physics entry points that callers capture into a CUDA
    graph (they become hot through the call graph when a step calls them)."""
    if _is_classmethod(unit) or _NOT_HOT_NAME.match(unit.name):
        return False
    if HOT_NAME.match(unit.name):
        return unit.cls is not None or (unit.mod is not None and unit.mod.uses_torch)
    if unit.cls is None:
        return False
    if HOT_METHOD.match(unit.name):
        args = unit.node.args
        params = [a.arg for a in args.posonlyargs + args.args][1:] + [a.arg for a in args.kwonlyargs]
        if unit.name == "train":  # an algorithm's train(self) / off-policy train(self, gradient_steps, ...),
            return (not params and args.vararg is None) or (  # not nn.Module.train(mode)
                bool(params) and bool(_OFF_POLICY_TRAIN.match(params[0])))
        if unit.name == "__call__":  # a term evaluated on the env: __call__(self, env, ...)
            return bool(params) and params[0] in ("env", "envs") and unit.mod is not None and unit.mod.uses_torch
        names = [unit.cls.name] + list(unit.cls.bases)
        return any(_MANAGER_CLASS.search(n) for n in names)  # a manager's compute()/apply()
    return False


_CAPTURES = ("warp.ScopedCapture", "torch.cuda.graph", "torch.cuda.graphs.graph", "warp.capture_begin")


def capture_spans(unit: Unit) -> list:
    """(first, last) lines of the ``with wp.ScopedCapture()`` / ``with torch.cuda.graph(g)`` blocks of ``unit``."""
    spans = unit.__dict__.get("_capture_spans")
    if spans is None:
        spans = []
        mod = unit.mod
        if mod is not None and ("Capture" in mod.text or "graph(" in mod.text):
            for n in unit_nodes(unit):
                if isinstance(n, (ast.With, ast.AsyncWith)):
                    for item in n.items:
                        c = item.context_expr
                        if (mod.qual(c.func if isinstance(c, ast.Call) else c) or "") in _CAPTURES:
                            spans.append((n.body[0].lineno, n.end_lineno))
        unit._capture_spans = spans
    return spans


def is_setup(unit: Unit) -> bool:
    return unit.name in INIT_NAMES or bool(_SETUP_NAME.match(unit.name))


# set-up names that stay set-up when a per-step caller runs them: a lazy first-call initialisation (torchrl's
# storage `_init(data)` on the first write); `prepare_obs`, `make_obs`, `build_rnn_inputs` called every step convert
# or assemble each step's data instead
_LAZY_INIT_NAME = re.compile(r"^_*(init|initiali[sz]e|alloc|allocate|setup|set_up|register|spawn|compile|load)(_|$)")


def setup_when_proven(unit: Unit) -> bool:
    """Whether ``unit`` (set-up by :func:`is_setup`) is still set-up on a proven per-step path."""
    return unit.name in INIT_NAMES or bool(_LAZY_INIT_NAME.match(unit.name))


_VEC_STEP_HALF = re.compile(r"^step_(async|wait)$")
_STEP_METHOD = re.compile(r"^_*(step|step_\w+|\w+_step|pre_physics_step|post_physics_step)$")
# a learner's method: update / train / learn / optimize / fit, alone or as a word of the name (`_update_with_batch`,
# `train_on_batch`, `optimize_model`, `learner_update`, mushroom-rl's `_fit_batch`)
_LEARNER_NAME = re.compile(r"(^|_)(update|train|learn|optimi[sz]e|fit)(_|$)")
# receivers whose .step() is a gradient step: an optimizer (`self.optim.step(loss)`) or an AMP grad scaler
_OPTIMIZER = re.compile(r"(^|\.|_)(opt|optim|optimizer|optimiser|\w*_optim|\w*_optimizer|scaler|grad_scaler)$", re.I)


def _is_gradient_step(n) -> bool:
    """``loss.backward()``, ``torch.autograd.backward(...)``, an optimizer's / grad scaler's ``step()``."""
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
        if n.func.attr == "backward":
            return True
        return n.func.attr == "step" and bool(_OPTIMIZER.search(dotted(n.func.value) or ""))
    return False


_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def learner_step(unit: Unit):
    """Where a learner's update runs: for a function named like one (:data:`_LEARNER_NAME`) whose own code makes
    a gradient step (SB3's ``train(self, gradient_steps)``, tianshou's ``_update_with_batch``, sample-factory's
    ``_train``, a DQN tutorial's ``optimize_model``), ``[]`` when a gradient step sits outside any loop (the
    whole function runs once per gradient step, wherever it is called from), else the outermost loops holding
    one (a ``train(cfg)`` that is a whole training run: its set-up before the loop runs once). None when the
    unit is no learner."""
    if unit.is_module or unit.kernel or _is_classmethod(unit) or not _LEARNER_NAME.search(unit.name):
        return None
    loops, bare = [], False
    stack = [(n, None) for n in reversed(unit.node.body)]
    while stack:  # source order, not entering nested defs; each node with its outermost loop
        n, outer = stack.pop()
        if isinstance(n, FUNC_DEFS + (ast.ClassDef, ast.Lambda)):
            continue
        if _is_gradient_step(n):
            if outer is None:
                bare = True
            elif outer not in loops:
                loops.append(outer)
        if outer is None and isinstance(n, _LOOPS):
            outer = n
        stack.extend((c, outer) for c in reversed(list(ast.iter_child_nodes(n))))
    if bare:
        return []
    return loops or None


def storage_entry(unit: Unit) -> bool:
    """A per-transition / per-batch method (``add``, ``insert``, ``store``, ``push``, ``sample``) of a class named like
    a storage (a replay buffer, a rollout storage, a memory). Not a classmethod, nor a static method."""
    return unit.cls is not None and bool(unit.self_name) and not _is_classmethod(unit) \
        and unit.name in STORAGE_METHODS and bool(STORAGE_CLASS.search(unit.cls.name))


def _bare_gradient_step(unit: Unit) -> bool:
    """A function (of any name) whose own code makes a gradient step outside any loop: each call is one gradient
    step, so where hot code calls it, it runs once per step."""
    if unit.is_module or unit.kernel or _is_classmethod(unit) or not isinstance(unit.node, FUNC_DEFS):
        return False
    text = unit.mod.text if unit.mod is not None else ""
    if "backward" not in text and ".step" not in text:
        return False
    stack = list(unit.node.body)
    while stack:
        n = stack.pop()
        if isinstance(n, FUNC_DEFS + (ast.ClassDef, ast.Lambda) + _LOOPS):
            continue
        if _is_gradient_step(n):
            return True
        stack.extend(ast.iter_child_nodes(n))
    return False


# an RL algorithm's per-step entry points, which the user's training script calls (machin's `act_discrete`,
# `store_episode`; mushroom-rl's `draw_action`, its approximators' `predict`; pfrl's `batch_act` / `observe`;
# skrl's `record_transition`; a Lightning module's `training_step`)
_AGENT_ENTRY = re.compile(r"^(act|act_\w+|batch_act|draw_actions?|get_actions?|select_actions?|choose_actions?|"
                          r"sample_actions?|predict|observe|batch_observe|remember|record_transitions?|"
                          r"(store|add)_(transitions?|episodes?|experiences?)|train_step|training_step)$")
_GRADIENT_TEXT = re.compile(r"backward\s*\(|\.step\s*\(")


def learner_classes(project) -> set:
    """id() of the project classes that make gradient steps: a method's own code calls ``backward()`` or an
    optimizer's ``step()``."""
    found = project.__dict__.get("_learner_classes")
    if found is None:
        found = project._learner_classes = set()
        for mod in project.mods:
            if "backward" not in mod.text and ".step" not in mod.text:
                continue
            for unit in mod.units_matching(_GRADIENT_TEXT):
                if unit.cls is not None and id(unit.cls) not in found and any(
                        _is_gradient_step(n) for n in unit_nodes(unit)):
                    found.add(id(unit.cls))
    return found


def agent_entry(unit: Unit) -> bool:
    """A per-step entry point of an RL algorithm (:data:`_AGENT_ENTRY`) defined on a class that learns: the class,
    one of its project bases or one of its project subclasses makes a gradient step (machin's ``A2C.store_episode``,
    mushroom-rl's ``TorchApproximator.predict``). Not a classmethod, nor a static method."""
    if unit.cls is None or not unit.self_name or _is_classmethod(unit) or not _AGENT_ENTRY.match(unit.name):
        return False
    project = unit.mod.project if unit.mod is not None else None
    if project is None:
        return False
    learners = learner_classes(project)
    if not learners:
        return False
    return any(id(c) in learners for c in project.class_chain(unit.cls)) or any(
        id(c) in learners for c in project.subclasses(unit.cls))


def proven_per_step(unit: Unit) -> bool:
    """An env's step method (a method named ``step``/``*_step``, not a classmethod, not an optimizer's), or a
    learner's update (:func:`learner_step`)."""
    if unit.cls is None or _is_classmethod(unit):
        return False
    if _STEP_METHOD.match(unit.name) and not _VEC_STEP_HALF.match(unit.name):
        return not _NOT_ENV_STEP.search(unit.cls.name) and "Optim" not in unit.cls.name
    return learner_step(unit) is not None


def module_seeds(mod: ModuleInfo, directives, hot_patterns=(), all_functions=False, hp=None, proven=None):
    """(HotPaths with this module's setup units and rollout loops, [seed units], [units hot by name only]);
    ``proven`` (a list) gets the seeds that are proven per-step (see HotPaths.proven)."""
    hp = hp or HotPaths()
    proven = proven if proven is not None else []
    seeds, by_name, learner_loops = [], [], []
    for unit in mod.units:
        if unit.is_module or unit.kernel:
            continue
        if unit.name in INIT_NAMES:
            hp.setup_units.add(unit)
        if all_functions:
            seeds.append(unit)
            if _SETUP_NAME.match(unit.name):
                hp.setup_units.add(unit)
            continue
        if _marked(mod, unit, directives) or any(
            fnmatch.fnmatchcase(unit.name, p) or fnmatch.fnmatchcase(unit.qualname, p) for p in hot_patterns
        ):
            seeds.append(unit)
            proven.append(unit)
        elif name_hot(unit):
            by_name.append(unit)
            if proven_per_step(unit):
                proven.append(unit)
        elif storage_entry(unit):
            # a replay buffer's / rollout storage's add and sample: every env step and every gradient step, called
            # by the library's runners or by an algorithm outside the linted files (SB3 sampling a wrapped buffer)
            by_name.append(unit)
            proven.append(unit)
        elif agent_entry(unit):
            # hot, and proven: a learning agent's act / store / predict runs once per env step (or per gradient
            # step), whoever calls it: the user's script, the library's runner
            by_name.append(unit)
            proven.append(unit)
        else:
            loops = learner_step(unit)
            if loops == []:
                seeds.append(unit)
                proven.append(unit)
            elif loops is None and _bare_gradient_step(unit):
                hp.gradient_steps.add(unit)  # per gradient step where hot code calls it (d3rlpy's `warmup_actor`)
            learner_loops.extend((unit, node) for node in loops or ())
    # rollout loops: any loop calling an env step, in any unit
    step_units = mod.units_matching(_STEP_TEXT) if "step" in mod.text else ()
    for unit in mod.units:
        if unit.kernel or unit not in step_units:
            continue
        step_loops = [n for n in unit_nodes(unit) if isinstance(n, (ast.For, ast.AsyncFor, ast.While))
                      and id(n) not in hp.loops and _loop_calls_step(n, mod)]
        inner = {id(n) for loop in step_loops for n in ast.walk(loop) if n is not loop and n in step_loops}
        outers = False
        for node in step_loops:
            # an iteration loop around a step loop: its own calls run once per iteration (hot, not proven)
            outer = any(id(n) in inner for n in ast.walk(node) if n is not node)
            outers = outers or outer
            _hot_loop(hp, mod, unit, node, seeds, proven, seed_calls=True, prove_calls=not outer)
        if step_loops and not outers and not unit.is_module and not _in_loop(unit, step_loops) \
                and not any(_is_gradient_step(n) for n in unit_nodes(unit)):
            hp.collectors.add(unit)
        if not step_loops and _steps_once(unit, mod):
            seeds.append(unit)  # hot; not proven: what it calls around the step (a reset, a wrapper's) varies
            hp.steps_once.add(unit)
    for unit, node in learner_loops:  # after the rollout loops: an iteration loop stays one
        _hot_loop(hp, mod, unit, node, seeds, proven)
    return hp, seeds, by_name


# `self.vec_env.step(a)`, `envs.step(a)`, `self.env_step(a)`, mushroom-rl's `self.mdp.step(action)`
_ENV_NAMED = re.compile(r"env|(^|[._])mdp([._]|$)", re.I)
# one env step taken to check, time, evaluate or show it: not the training loop's step
_CHECK_NAME = re.compile(r"^_*(check|test|validate|verify|warm_?up|bench\w*|measure|time|timed|profile|demo|eval\w*|"
                         r"play|render|record|visuali[sz]e)(_|$)")


def _steps_once(unit: Unit, mod: ModuleInfo) -> bool:
    """A function that advances the envs once, outside any loop of its own (sample-factory's
    ``advance_rollouts``, an event handler called once per env step, ``collect_one_step``): everything it does
    runs once per env step. Not module-level code, nor set-up or checks (``__init__``, ``check_env``)."""
    if unit.is_module or is_setup(unit) or _CHECK_NAME.match(unit.name) or _is_classmethod(unit):
        return False
    stack = list(unit.node.body)
    while stack:
        n = stack.pop()
        if isinstance(n, FUNC_DEFS + (ast.ClassDef, ast.Lambda) + _LOOPS + (ast.ListComp, ast.SetComp,
                                                                             ast.DictComp, ast.GeneratorExp)):
            continue
        if is_step_call(n, mod) and _ENV_NAMED.search(dotted(n.func) or ""):
            return True
        stack.extend(ast.iter_child_nodes(n))
    return False


def _hot_loop(hp: HotPaths, mod: ModuleInfo, unit: Unit, node, seeds: list, proven: list, seed_calls=True,
              prove_calls=True):
    """``node``'s body runs every step (or gradient step): checked as hot and proven, and (``seed_calls``) what
    it calls is hot too, and proven with ``prove_calls``."""
    if id(node) in hp.loops:
        return
    hp.loops.add(id(node))
    hp.loop_units.add(unit)
    # a `while` loop's test runs before every iteration (rl4co's `while not td["done"].all():` around its env
    # steps); a `for` loop's iterable is evaluated once
    first = node.test.lineno if isinstance(node, ast.While) else node.body[0].lineno
    hp.loop_spans.setdefault(unit, []).append((first, node.end_lineno))
    if seed_calls:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                called = resolve_call(mod, unit, sub)
                seeds.extend(called)
                if prove_calls:
                    proven.extend(called)


def _in_loop(unit: Unit, loops: list) -> bool:
    """Whether one of ``loops`` sits inside another loop of ``unit``."""
    ids = {id(n) for n in loops}
    for n in unit_nodes(unit):
        if isinstance(n, _LOOPS) and id(n) not in ids and any(id(c) in ids for c in ast.walk(n) if c is not n):
            return True
    return False


def _calls_learner(loop) -> bool:
    """The loop's body calls something named like a learner's update (``agent.learn()``, ``self.update()``)."""
    return any(isinstance(c, ast.Call) and _LEARNER_NAME.search(_call_name(c)) for c in ast.walk(loop))


def iteration_loops(hp: HotPaths, project, seeds: list, proven: list):
    """A loop that calls a rollout collector and a learner (``for it in range(n): collect_rollouts(agent, env);
    agent.learn()``) is a training iteration loop: what it calls runs once per rollout, hot (not proven). Its own
    lines (an every-N-iterations print) are left as they are. (A loop over seeds or episodes that calls a collector
    and learns nothing — a motion-planning demo — is not one.)"""
    if not hp.collectors:
        return
    for _ in range(3):  # a wrapper that calls a collector once (`collect_rollouts` -> `_collect_rollouts`) is one
        names = {u.name for u in hp.collectors}
        pattern = _names_pattern(names, r"\s*\(")
        wrappers = set()
        for mod in project.mods:
            for unit in mod.units_matching(pattern) if pattern.search(mod.text) else ():
                if unit.kernel or unit.is_module or unit in hp.collectors:
                    continue
                stack = list(unit.node.body)
                while stack:
                    n = stack.pop()
                    if isinstance(n, FUNC_DEFS + (ast.ClassDef, ast.Lambda) + _LOOPS):
                        continue
                    if isinstance(n, ast.Call) and set(resolve_call(mod, unit, n)) & hp.collectors:
                        wrappers.add(unit)
                        break
                    stack.extend(ast.iter_child_nodes(n))
        if not wrappers:
            break
        hp.collectors |= wrappers
    names = {u.name for u in hp.collectors}
    pattern = _names_pattern(names, r"\b")
    reaches: dict = {}
    for mod in project.mods:
        if not pattern.search(mod.text):
            continue
        for unit in mod.units:
            if unit.kernel or unit in hp.collectors:
                continue
            calling = [n for n in unit_nodes(unit) if isinstance(n, _LOOPS) and _calls_learner(n) and any(
                isinstance(c, ast.Call) and set(resolve_call(mod, unit, c)) & hp.collectors for c in ast.walk(n))]
            for node in calling:  # the innermost such loop: one around it runs generations, evaluations...
                if id(node) not in hp.loops and not any(o is not node and o in ast.walk(node) for o in calling):
                    seeds.extend(u for c in ast.walk(node) if isinstance(c, ast.Call)
                                 for u in resolve_call(mod, unit, c))
                    if any(isinstance(c, ast.Call) and _LEARNER_NAME.search(_call_name(c)) and any(
                            _reaches_gradient_step(u, reaches) for u in resolve_call(mod, unit, c))
                           for c in ast.walk(node)):  # (a learner that learns: not a viewer's `update_*()`)
                        _iteration_span(hp, unit, node)


def _iteration_span(hp: HotPaths, unit: Unit, node):
    """The loop's own lines run once per iteration, but for the blocks under a periodic test (`if it % 10 == 0:`,
    a log every N iterations): split around them."""
    first = node.test.lineno if isinstance(node, ast.While) else node.body[0].lineno
    cold = sorted((n.body[0].lineno, n.end_lineno) for n in ast.walk(node)
                  if isinstance(n, ast.If) and _periodic(n.test))
    spans, at = [], first
    for a, b in cold:
        if a > at:
            spans.append((at, a - 1))
        at = max(at, b + 1)
    if at <= node.end_lineno:
        spans.append((at, node.end_lineno))
    hp.iter_spans.setdefault(unit, []).extend(spans)


def _periodic(test) -> bool:
    """``it % 10 == 0``, ``not step % n``, ``(i + 1) % log_interval == 0 and verbose``: every N iterations."""
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(test))


def _reaches_gradient_step(unit: Unit, memo: dict, depth: int = 3) -> bool:
    """``unit`` makes a gradient step, itself or through the functions it calls (``depth`` calls deep):
    ``update_net`` -> ``update_objectives`` -> ``optimizer_backward`` -> ``loss.backward()``."""
    key = (unit, depth)
    if key in memo:
        return memo[key]
    memo[key] = False  # cycle guard
    if unit.kernel or unit.mod is None or not isinstance(unit.node, FUNC_DEFS):
        return False
    nodes = unit_nodes(unit)
    found = any(_is_gradient_step(n) for n in nodes)
    if not found and depth > 0:
        found = any(_reaches_gradient_step(u, memo, depth - 1) for n in nodes if isinstance(n, ast.Call)
                    for u in resolve_call(unit.mod, unit, n))
    memo[key] = found
    return found


# a call of a learner-named function on a line (`agent.update_net(buffer)`, `self.learn()`): a cheap filter
_LEARNER_CALL_TEXT = re.compile(r"(?:update|train|learn|optimi[sz]e|fit)\w*\s*\(")


def learner_call_loops(hp: HotPaths, project):
    """A loop whose body calls a learning agent's update by name (``agent.update_net(buffer)``, ``self.learn()``: a
    learner-named method of a class that makes gradient steps) is a training iteration loop, though it collects no
    rollout of its own (a learner process fed by workers): its own lines — the per-iteration reads of the rollout it
    trains on, `buffer_items[2].mean().item()` — run once per update, hot (not proven). The innermost such loop; not
    inside the learner's own class (its update loops are per-update already)."""
    learners = learner_classes(project)
    if not learners:
        return
    reaches: dict = {}
    for mod in project.mods:
        if not _LEARNER_CALL_TEXT.search(mod.text):
            continue
        for unit in sorted(mod.units_matching(_LEARNER_CALL_TEXT), key=lambda u: u.lineno):
            if unit.kernel or unit.is_module or unit in hp.collectors:
                continue
            if unit.cls is not None and any(id(c) in learners for c in project.class_chain(unit.cls)):
                continue
            nodes = unit_nodes(unit)
            lines = [c.lineno for c in nodes if type(c) is ast.Call and _LEARNER_NAME.search(_call_name(c)) and any(
                u.cls is not None and any(id(k) in learners for k in project.class_chain(u.cls))
                and _reaches_gradient_step(u, reaches) for u in resolve_call(mod, unit, c))]
            if not lines:
                continue
            loops = [n for n in nodes if isinstance(n, _LOOPS) and id(n) not in hp.loops
                     and any(n.lineno <= x <= n.end_lineno for x in lines)]
            for node in loops:
                if not any(o is not node and node.lineno <= o.lineno and o.end_lineno <= node.end_lineno
                           and any(o.lineno <= x <= o.end_lineno for x in lines) for o in loops) and not any(
                        a <= node.lineno and node.end_lineno <= b for a, b in hp.iter_spans.get(unit, ())):
                    _iteration_span(hp, unit, node)


def stepping_loops(hp: HotPaths, project, seeds: list, proven: list):
    """A loop that calls a function stepping the envs once (mushroom-rl's ``while move_condition(): sample =
    self._step(render)``, where ``_step`` runs ``self.mdp.step(action)``) is a rollout loop: its body and what
    it calls run every env step (the agent's ``fit(dataset)`` after the step included), proven like a loop that
    calls ``env.step`` itself. The innermost such loop: one around it runs episodes or epochs."""
    names = {u.name for u in hp.steps_once if u.name != "step"}  # a loop calling `.step()` is one already
    if not names:
        return
    pattern = _names_pattern(names, r"\(")
    calls = [n + "(" for n in sorted(names)]
    for mod in project.mods:
        if not any(c in mod.text for c in calls):  # a substring test first: the regex over every file costs
            continue
        for unit in sorted(mod.units_matching(pattern), key=lambda u: u.lineno):
            if unit.kernel:
                continue
            nodes = unit_nodes(unit)
            lines = [c.lineno for c in nodes if type(c) is ast.Call and _call_name(c) in names
                     and set(resolve_call(mod, unit, c)) & hp.steps_once]
            if not lines:
                continue
            loops = [n for n in nodes if isinstance(n, _LOOPS) and any(n.lineno <= x <= n.end_lineno for x in lines)]
            for node in loops:
                if id(node) not in hp.loops and not any(o is not node and node.lineno <= o.lineno and
                                                        o.end_lineno <= node.end_lineno for o in loops):
                    _hot_loop(hp, mod, unit, node, seeds, proven)


def _setup_only(project, candidates: list) -> set:
    """Of the units hot by name only, those whose every caller in the linted files is set-up code
    (``__init__``, ``_build_*``...): a ``_compute_offsets`` helper run once from ``__init__``."""
    if not candidates:
        return set()
    names = {u.name for u in candidates}
    cand = set(candidates)
    callers: dict = {}
    pattern = _names_pattern(names, r"\s*\(")
    for mod in project.mods:
        if not any(n in mod.text for n in names):
            continue
        for unit in mod.units_matching(pattern):
            if unit.kernel:
                continue
            for node in unit_nodes(unit):
                if isinstance(node, ast.Call):
                    if _call_name(node) not in names:
                        continue
                    for callee in resolve_call(mod, unit, node):
                        if callee in cand and callee is not unit:
                            callers.setdefault(callee, []).append(unit)
    return {u for u, cs in callers.items() if cs and all(is_setup(c) for c in cs)}


def spread(hp: HotPaths, seeds, into: set | None = None) -> HotPaths:
    """Everything the seeds call, transitively, across the linted files (set-up callees excluded), added to
    ``into`` (default: ``hp.units``)."""
    units = hp.units if into is None else into
    todo = list(seeds)
    calls = {} if into is None else None  # callee -> [(call, caller)] from hot code
    while todo:
        unit = todo.pop()
        if unit in units or unit.kernel:
            continue
        units.add(unit)
        mod = unit.mod
        captured = capture_spans(unit)
        props = learner_properties(unit)
        for node in unit_nodes(unit):
            if props and type(node) is ast.Attribute and type(node.value) is ast.Name \
                    and node.value.id == unit.self_name and node.attr in props:
                for callee in props[node.attr]:  # `self.temperature` runs the property's getter
                    if calls is not None:
                        calls.setdefault(callee, [])
                    if callee not in units:
                        todo.append(callee)
                continue
            if isinstance(node, ast.Call):
                if captured and any(a <= node.lineno <= b for a, b in captured):
                    continue  # recorded once into a CUDA graph, replayed with capture_launch: not per-step Python
                for callee in resolve_call(mod, unit, node):
                    if calls is not None:
                        calls.setdefault(callee, []).append((node, unit))
                    if callee not in units and callee.name not in INIT_NAMES:
                        todo.append(callee)
    if calls is not None:
        seeded = set(seeds)
        for callee, sites in calls.items():
            if callee not in seeded and callee in units:
                spans = _cold_spans(callee, sites)
                if spans:
                    hp.cold_spans[callee] = spans
    return hp


def learner_properties(unit: Unit) -> dict:
    """{name: [getter units]} of the ``@property`` getters of a learning agent (a class that makes gradient steps,
    :func:`learner_classes`), for a method of it: reading ``self.temperature`` in its update runs the getter
    (pfrl's SAC ``temperature``: ``float(self.temperature_holder())``, every gradient step). Not ``cached_property``
    (computed once), nor the properties of other classes (an env's or a struct's, whose reads are mostly set-up)."""
    cls = unit.cls
    if cls is None or not unit.self_name or unit.mod is None or unit.mod.project is None:
        return {}
    got = cls.__dict__.get("_learner_properties")
    if got is None:
        got = {}
        project = unit.mod.project
        chain = project.class_chain(cls)
        names = {n for c in chain for n, u in c.methods.items() if _is_property(u)}
        if names:
            learners = learner_classes(project)
            if any(id(c) in learners for c in chain + project.subclasses(cls)):
                got = {n: [u for u in project.methods_of(cls, n) if _is_property(u)] for n in sorted(names)}
        cls._learner_properties = got
    return got


def _is_property(unit: Unit) -> bool:
    return any(dotted(d) in ("property", "builtins.property") for d in getattr(unit.node, "decorator_list", ()))


def _passed(callee: Unit, call: ast.Call, caller: Unit):
    """{parameter: the constant passed (or defaulted) at ``call``, or _UNKNOWN}."""
    args = callee.node.args
    params = [a.arg for a in args.posonlyargs + args.args]
    if callee.self_name and isinstance(call.func, ast.Attribute):
        params = params[1:]
    defaults = dict(zip([a.arg for a in args.posonlyargs + args.args][-len(args.defaults):] if args.defaults else [],
                        args.defaults))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    if any(isinstance(a, ast.Starred) for a in call.args) or any(kw.arg is None for kw in call.keywords):
        return None  # *args / **kwargs: cannot tell
    given = dict(zip(params, call.args))
    given.update({kw.arg: kw.value for kw in call.keywords})
    out = {}
    for p in params + [a.arg for a in args.kwonlyargs]:
        v = given.get(p, defaults.get(p))
        out[p] = v.value if isinstance(v, ast.Constant) else _UNKNOWN
    return out


_UNKNOWN = object()


def _cold_spans(callee: Unit, sites) -> list:
    if not isinstance(callee.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    passed = [_passed(callee, call, caller) for call, caller in sites]
    if not passed or any(p is None for p in passed):
        return []
    spans = []
    for n, test, negate in if_tests(callee):
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and not negate \
                and isinstance(test.values[0], ast.Name):
            # `if wait and not done:` with wait False on every hot call: the body never runs there
            values = [p.get(test.values[0].id, _UNKNOWN) for p in passed]
            if values and not any(v is _UNKNOWN for v in values) and not any(values):
                spans.append((n.body[0].lineno, n.body[-1].end_lineno))
            continue
        if not isinstance(test, ast.Name):
            continue
        values = [p.get(test.id, _UNKNOWN) for p in passed]
        if any(v is _UNKNOWN for v in values) or test.id not in passed[0]:
            continue
        truth = {bool(v) != negate for v in values}
        if len(truth) == 1 and n.body[0].lineno > test.end_lineno:  # the test reads a constant (`if env_ids:` left
            # to its None default by every hot call): no sync of its own
            spans.append((test.lineno, test.end_lineno))
        if truth == {False}:  # no hot call runs the body
            spans.append((n.body[0].lineno, n.body[-1].end_lineno))
        elif truth == {True} and n.orelse:
            spans.append((n.orelse[0].lineno, n.orelse[-1].end_lineno))
        elif truth == {True} and n in callee.node.body and isinstance(n.body[-1], (ast.Return, ast.Raise)):
            rest = callee.node.body[callee.node.body.index(n) + 1:]  # `if not strict: return x` returns early
            if rest:
                spans.append((rest[0].lineno, rest[-1].end_lineno))
    return spans


def _self_lambdas(unit: Unit) -> list:
    """[(attr, Lambda)] of ``self.attr = lambda ...`` in ``unit``."""
    out = []
    for n in unit_nodes(unit):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Lambda):
            out += [(t.attr, n.value) for t in n.targets if isinstance(t, ast.Attribute)
                    and isinstance(t.value, ast.Name) and t.value.id == unit.self_name]
    return out


def hot_lambdas(hp: HotPaths, project):
    """rllte's ``self._format_obs = lambda x: th.as_tensor(x, device=self.device)``, built in ``__init__`` and
    called as ``self._format_obs(obs)`` from ``step()``: the lambda's body is hot wherever a hot method of the class
    (or of a subclass) calls the attribute, and proven when a proven one does (:attr:`HotPaths.lambda_spans`)."""
    for mod in project.mods:
        if "lambda" not in mod.text:
            continue
        for cls in mod.classes.values():
            bound = {}  # attr -> [(unit building it, Lambda)]
            for u in cls.methods.values():
                if u.self_name:
                    for attr, lam in _self_lambdas(u):
                        bound.setdefault(attr, []).append((u, lam))
            if not bound:
                continue
            proven_attrs: dict = {}  # attr -> proven
            for c in [cls] + project.subclasses(cls):
                for u in c.methods.values():
                    spans = hp.loop_spans.get(u, ()) if u not in hp.units else ()
                    if not u.self_name or (u not in hp.units and not spans):
                        continue
                    for n in unit_nodes(u):
                        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                                and isinstance(n.func.value, ast.Name) and n.func.value.id == u.self_name
                                and n.func.attr in bound) or project.method(c, n.func.attr) is not None:
                            continue
                        in_loop = any(a <= n.lineno <= b for a, b in spans)
                        if u in hp.units or in_loop:
                            attr = n.func.attr
                            proven_attrs[attr] = proven_attrs.get(attr, False) or u in hp.proven or in_loop
            for attr in sorted(proven_attrs):
                for owner, lam in bound[attr]:
                    hp.lambda_spans.setdefault(owner, []).append(
                        (lam.body.lineno, lam.body.end_lineno, proven_attrs[attr]))


def find_hot_project(project, directives_of, hot_patterns=(), all_functions=False) -> HotPaths:
    """One HotPaths for all the modules of ``project`` (``directives_of(mod)`` -> its Directives)."""
    hp = HotPaths()
    seeds, by_name, proven = [], [], []
    for mod in project.mods:
        _, s, n = module_seeds(mod, directives_of(mod), hot_patterns, all_functions, hp, proven)
        seeds += s
        by_name += n
    stepping_loops(hp, project, seeds, proven)
    iteration_loops(hp, project, seeds, proven)
    if not all_functions:
        learner_call_loops(hp, project)
    cold = _setup_only(project, by_name)
    seeds += [u for u in by_name if u not in cold]
    spread(hp, seeds)
    if not all_functions:
        spread(hp, [u for u in proven if u not in cold] + sorted(
            (u for u in hp.gradient_steps if u in hp.units), key=lambda u: (u.mod.path, u.lineno)), into=hp.proven)
        hp.proven &= hp.units
        hot_lambdas(hp, project)
    return hp


def find_hot(mod: ModuleInfo, directives, hot_patterns=(), all_functions=False) -> HotPaths:
    """Hot paths of one module linted alone."""
    project = mod.project or Project([mod])
    return find_hot_project(project, lambda m: directives, hot_patterns, all_functions)


def _marked(mod: ModuleInfo, unit: Unit, directives) -> bool:
    node = unit.node
    for d in node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if mod.qual(target) in ("perfkit.hot", "perfkit.lint.hot"):
            return True
    if directives.hot_lines:
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        body_first = node.body[0].lineno if node.body else node.lineno
        for line in range(first - 1, body_first):
            if line in directives.hot_lines:
                return True
    return False

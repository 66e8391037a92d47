"""Which code is a hot path (DESIGN.md, "Linter").

Seeds: functions named like ``step``/``reset*``/``compute_*``/``_reward_*``/..., functions decorated
``@perfkit.hot`` or marked ``# perfkit: hot``, names configured in ``[tool.perfkit.lint] hot``, and
the body of any loop that calls a ``step`` method (a runner's rollout loop). Then everything those
call in the same module, transitively. ``--all`` makes every function hot.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from dataclasses import dataclass, field

from perfkit.lint.modinfo import ModuleInfo, Unit, dotted, unit_nodes

HOT_NAME = re.compile(
    r"^(_*step|_*reset\w*|_*compute_\w+|_reward_\w+|_?get_observations|_pre_physics_step|_post_physics_step|"
    r"_apply_actions?|act|update|forward)$"
)
# receivers whose .step() is not an environment step
_NOT_ENV_STEP = re.compile(r"(^|\.|_)(opt|optim|optimizer|optimiser|scheduler|sched|scaler|lr_scheduler)$", re.I)
# method names too generic to resolve obj.name(...) to "the" method of that name in this module
_GENERIC = {
    "append", "extend", "get", "items", "keys", "values", "pop", "add", "copy", "clear", "insert", "remove",
    "format", "join", "split", "strip", "read", "write", "close", "open", "run", "start", "stop", "send",
    "put", "call", "__call__", "__init__", "to", "cpu", "cuda", "item", "numpy", "sum", "mean", "view",
}
INIT_NAMES = ("__init__", "__post_init__", "__new__")
_SETUP_NAME = re.compile(r"^_*(init|setup|alloc|allocate|build|create|prepare|make)(_|$)")


@dataclass
class HotPaths:
    units: set = field(default_factory=set)  # hot units
    loops: set = field(default_factory=set)  # id() of loop nodes whose body is hot
    setup_units: set = field(default_factory=set)  # allocation is the point here (__init__, --all setup fns)
    loop_units: set = field(default_factory=set)  # units holding a hot loop
    loop_spans: dict = field(default_factory=dict)  # unit -> [(first, last line of a hot loop's body)]


_STEP_TEXT = re.compile(r"\.step\s*\(")


def is_step_call(node, mod: ModuleInfo | None = None) -> bool:
    """``env.step(...)``: a step *method* (not ``optimizer.step()``, not a module function ``mjw.step``)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "step":
        recv = dotted(node.func.value) or ""
        if mod is not None and recv in mod.aliases:
            return False
        return not _NOT_ENV_STEP.search(recv)
    return False


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
    f = call.func
    if isinstance(f, ast.Name):
        return list(mod.functions.get(f.id, ()))
    if isinstance(f, ast.Attribute):
        base, name = f.value, f.attr
        if isinstance(base, ast.Name):
            if unit.self_name and base.id == unit.self_name and unit.cls is not None:
                for c in mod.class_chain(unit.cls):
                    if name in c.methods:
                        return [c.methods[name]]
                # a method of a subclass defined here (template method pattern)
                return list(mod.methods.get(name, ()))
            if base.id in mod.classes:
                m = mod.classes[base.id].methods.get(name)
                return [m] if m else []
            if base.id in mod.aliases:
                return []  # a module function: torch.zeros, wp.launch
        if name not in _GENERIC:
            cands = mod.methods.get(name, ())
            if len(cands) == 1:
                return list(cands)
    return []


def find_hot(mod: ModuleInfo, directives, hot_patterns=(), all_functions=False) -> HotPaths:
    hp = HotPaths()
    seeds = []
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
        if HOT_NAME.match(unit.name) or _marked(mod, unit, directives) or any(
            fnmatch.fnmatchcase(unit.name, p) or fnmatch.fnmatchcase(unit.qualname, p) for p in hot_patterns
        ):
            seeds.append(unit)
    # rollout loops: any loop calling a .step() method, in any unit
    step_units = mod.units_matching(_STEP_TEXT) if ".step" in mod.text else ()
    for unit in mod.units:
        if unit.kernel or unit not in step_units:
            continue
        for node in unit_nodes(unit):
            if isinstance(node, (ast.For, ast.AsyncFor, ast.While)) and id(node) not in hp.loops:
                if _loop_calls_step(node, mod):
                    hp.loops.add(id(node))
                    hp.loop_units.add(unit)
                    hp.loop_spans.setdefault(unit, []).append((node.body[0].lineno, node.end_lineno))
                    for sub in ast.walk(node):
                        if isinstance(sub, ast.Call):
                            seeds.extend(resolve_call(mod, unit, sub))
    # callees in the same module
    todo = list(seeds)
    while todo:
        unit = todo.pop()
        if unit in hp.units or unit.kernel:
            continue
        hp.units.add(unit)
        for node in unit_nodes(unit):
            if isinstance(node, ast.Call):
                for callee in resolve_call(mod, unit, node):
                    if callee not in hp.units and callee.name not in INIT_NAMES:
                        todo.append(callee)
    return hp


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

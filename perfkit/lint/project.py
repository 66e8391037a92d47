"""The linted files as one program: module names, the project's own imports resolved, classes and
their bases across modules, and calls resolved to the functions they run (the call graph that
carries hotness from env steps and rollout loops into helpers defined in other modules).

Resolution is static and deliberately modest: a plain or imported function, ``self.method()``
through the class and its bases (and the overrides in its subclasses), ``obj.method()`` when
``obj``'s class is known (a parameter annotation, ``self.obj = Class(...)``, ``obj = Class(...)``),
``module.func()``, and otherwise a method name that is specific enough (not ``append``/``add``/...)
to stand for every project method of that name.
"""

from __future__ import annotations

import ast
import os
import re

from perfkit.lint.modinfo import FUNC_DEFS, ClassInfo, ModuleInfo, Unit, dotted, unit_nodes

# method names too generic to resolve obj.name(...) to every project method of that name
GENERIC = {
    "append", "extend", "get", "items", "keys", "values", "pop", "add", "copy", "clear", "insert", "remove",
    "format", "join", "split", "strip", "read", "write", "close", "open", "run", "start", "stop", "send",
    "put", "call", "__call__", "__init__", "to", "cpu", "cuda", "item", "numpy", "sum", "mean", "view",
    "update", "reset", "step", "forward", "compute", "apply", "sample", "set", "load", "save", "init",
    "setup", "build", "log", "info", "debug", "warning", "error", "train", "eval", "act", "process", "clone",
    "detach", "reshape", "expand", "flatten", "squeeze", "unsqueeze", "float", "long", "int", "bool", "max",
    "min", "any", "all", "size", "shape", "index", "count", "sort", "render", "seed", "parameters", "state_dict",
    "load_state_dict", "register", "wait", "result", "submit", "print", "record", "select", "exclude", "set_",
    "named_parameters", "modules", "children", "zero_grad", "backward", "encode", "decode", "transform", "predict",
    "__enter__", "__exit__", "__getitem__", "__setitem__", "__len__", "__iter__", "__next__", "__repr__", "__str__",
}
_MAX_NAME_TARGETS = 4  # a "specific" name defined more often than this is generic in this project
# receivers that hold the algorithm a training loop drives (`agent.get_action(obs)`, `self.policy.learn()`,
# `for agent in population.agents:`): any project method of that (specific) name may run, however many there are
ROLE_RECEIVER = re.compile(r"(^|_)(agent|policy|algo|algorithm|learner)$", re.IGNORECASE)
# a storage's per-transition / per-batch methods (`self.storage.add(obs, ...)`, `self.rb.sample()`) on a receiver
# named like one whose class the code does not say (set by a factory, a config or a setter): every project class
# named like a storage that defines the method may run (rllte's replay / rollout storages' `add`)
STORAGE_RECEIVER = re.compile(r"(^|_)(storage|buffer|replay|replay_buffer|rb|memory|rollouts?)$", re.IGNORECASE)
STORAGE_CLASS = re.compile(r"(Storage|Buffer|Memory|Replay)")
STORAGE_METHODS = {"add", "insert", "store", "push", "sample"}


def _package_dir_name(path: str, cache: dict) -> str:
    """``a/pkg/sub/mod.py`` -> ``pkg.sub.mod`` (walking up while folders hold ``__init__.py``)."""
    path = os.path.abspath(path)
    d, base = os.path.split(path)
    stem = base.rsplit(".", 1)[0]
    parts = [] if stem == "__init__" else [stem]
    while True:
        has = cache.get(d)
        if has is None:
            has = cache[d] = os.path.isfile(os.path.join(d, "__init__.py"))
        if not has:
            break
        d, name = os.path.split(d)
        parts.append(name)
        if not name:
            break
    return ".".join(reversed(parts)) or stem


class Project:
    def __init__(self, mods):
        self.mods = list(mods)
        self.by_name: dict[str, ModuleInfo] = {}
        self.methods: dict[str, list] = {}  # method name -> [Unit] across modules
        cache: dict = {}
        for m in self.mods:
            m.project = self
            if m.path.startswith("<"):
                m.modname = m.path.strip("<>") or "module"
            else:
                m.modname = _package_dir_name(m.path, cache)
            m.is_package = os.path.basename(m.path).startswith("__init__.")
            self.by_name.setdefault(m.modname, m)
            for name, units in m.methods.items():
                self.methods.setdefault(name, []).extend(units)
        self._by_stem: dict = {}  # last dotted part of a module's file path -> [ModuleInfo], for _by_path
        for m in self.mods:
            if not m.path.startswith("<"):
                self._by_stem.setdefault(m.modname.rsplit(".", 1)[-1], []).append(m)
        self._merge_star_imports()
        self._spread_default_device()
        self._chains: dict = {}
        self._subclasses = None
        self._attr_classes: dict = {}
        self._local_classes: dict = {}
        self._symbols: dict = {}

    # -- names -------------------------------------------------------------------------------
    @staticmethod
    def _relative(mod: ModuleInfo, level: int, module: str, sym: str = "") -> str:
        """The absolute dotted name ``from <level dots><module> import <sym>`` in ``mod`` means."""
        pkg = mod.modname.split(".")
        if level:
            if not getattr(mod, "is_package", False):
                pkg = pkg[:-1]
            if level > 1:
                pkg = pkg[: len(pkg) - (level - 1)]
        else:
            pkg = []
        parts = pkg + ([module] if module else []) + ([sym] if sym else [])
        return ".".join(p for p in parts if p)

    def _absolute(self, mod: ModuleInfo, name: str) -> str | None:
        """The absolute dotted target a module-level name stands for (an import), or None."""
        target = mod.aliases.get(name)
        if target is not None:
            return target
        rel = mod.rel_imports.get(name)
        if rel is None:
            return None
        return self._relative(mod, *rel)

    def _merge_star_imports(self):
        """``from .dqn import *`` of a linted module binds what that module exports here: its imports (so
        ``t.allclose`` is ``torch.allclose`` and the module uses torch, as machin's algorithms do), its classes
        and functions. Chains (``apex`` -> ``dqn_per`` -> ``dqn``) are merged source first; this module's own
        names win."""
        done, active = set(), set()

        def merge(m):
            if id(m) in done or id(m) in active:
                return
            active.add(id(m))
            for level, module in m.star_imports:
                target = self._relative(m, level, module)
                src = self.by_name.get(target) or (self._by_path(target.split(".")) if target else None)
                if src is None or src is m:
                    continue
                merge(src)
                for name in src.exported():
                    if name in m.aliases or name in m.rel_imports or name in m.classes or name in m.functions:
                        continue
                    if name in src.classes or name in src.functions:
                        m.aliases[name] = f"{src.modname}.{name}"
                    else:
                        target = self._absolute(src, name)
                        if target is not None:
                            m.aliases[name] = target
            active.discard(id(m))
            done.add(id(m))
            m.import_flags()

        for m in self.mods:
            if m.star_imports:
                merge(m)

    def _module_of(self, target: str):
        """The linted module a dotted import target names (``pkg.mod`` or ``pkg.mod.name``), or None."""
        parts = target.split(".")
        for i in range(len(parts), 0, -1):
            m = self.by_name.get(".".join(parts[:i]))
            if m is None and i >= 2:
                m = self._by_path(parts[:i])
            if m is not None:
                return m
        return None

    def _spread_default_device(self):
        """``torch.set_default_device("cuda")`` is a process-wide setting: it reaches the modules that run in the
        setter's process, those linked to it by imports either way (the library the script imports, the package
        whose ``__init__`` sets it), not a folder's other scripts (cleanrl's one ``ppo_trxl.py`` that sets it)."""
        setters = [m for m in self.mods if m.sets_default_device]
        if not setters:
            return
        links: dict = {id(m): [] for m in self.mods}
        for m in self.mods:
            targets = list(m.aliases.values()) + [self._relative(m, *r) for r in m.rel_imports.values()] + [
                self._relative(m, level, module) for level, module in m.star_imports]
            for t in targets:
                other = self._module_of(t) if t else None
                if other is not None and other is not m:
                    links[id(m)].append(other)
                    links[id(other)].append(m)
        todo, seen = list(setters), {id(m) for m in setters}
        while todo:
            m = todo.pop()
            m.sets_default_device = True
            for other in links[id(m)]:
                if id(other) not in seen:
                    seen.add(id(other))
                    todo.append(other)

    def symbol(self, mod: ModuleInfo, name: str, depth: int = 0):
        """What ``name`` means at the top level of ``mod``: a ModuleInfo, a ClassInfo, a list of Units, or None."""
        key = (id(mod), name)
        if key in self._symbols:
            return self._symbols[key]
        self._symbols[key] = None  # cycle guard
        out = None
        if name in mod.classes:
            out = mod.classes[name]
        elif name in mod.functions:
            out = [u for u in mod.functions[name] if u.parent is mod.module_unit]
        elif name in mod.type_aliases and dotted(mod.type_aliases[name]) is not None and depth < 6:
            out = self.resolve_expr(mod, mod.type_aliases[name])  # SupportedOnPolicy = PPO
        elif depth < 6:
            target = self._absolute(mod, name)
            if target is not None:
                out = self.lookup(target, depth + 1)
        self._symbols[key] = out
        return out

    def lookup(self, target: str, depth: int = 0):
        """A dotted absolute name (``pkg.mod.Class.method``) -> ModuleInfo / ClassInfo / [Unit] / None."""
        parts = target.split(".")
        for i in range(len(parts), 0, -1):
            m = self.by_name.get(".".join(parts[:i]))
            if m is None and i >= 2:
                m = self._by_path(parts[:i])
            if m is None:
                continue
            rest = parts[i:]
            if not rest:
                return m
            obj = self.symbol(m, rest[0], depth)
            for attr in rest[1:]:
                if isinstance(obj, ClassInfo):
                    u = self.method(obj, attr)
                    obj = [u] if u else None
                elif isinstance(obj, ModuleInfo):
                    obj = self.symbol(obj, attr, depth + 1)
                else:
                    return None
            return obj
        return None

    def _by_path(self, parts: list):
        """The one linted module whose file path ends with ``parts`` (``legged_gym/envs/base/base_task.py`` for
        ``legged_gym.envs.base.base_task``): a module of a namespace package (a folder without
        ``__init__.py``, PEP 420), whose name from ``__init__.py`` files is only its last parts."""
        cands = [m for m in self._by_stem.get(parts[-1], ())
                 if os.path.splitext(os.path.abspath(m.path))[0].replace(os.sep, "/").endswith("/" + "/".join(parts))]
        return cands[0] if len(cands) == 1 else None

    def type_alias(self, mod: ModuleInfo, expr, depth: int = 0):
        """``(module, type expression)`` a (dotted) name stands for when it is a module-level type alias
        (``GymEnv = Union[gym.Env, gymnasium.Env]`` here or in a linted module it is imported from), else None."""
        if depth > 6:
            return None
        if isinstance(expr, ast.Name):
            if expr.id in mod.type_aliases:
                return mod, mod.type_aliases[expr.id]
            target = self._absolute(mod, expr.id)
            if target is None or "." not in target:
                return None
            where, _, name = target.rpartition(".")
            m = self.lookup(where, depth + 1)
        elif isinstance(expr, ast.Attribute):
            m, name = self.resolve_expr(mod, expr.value), expr.attr
        else:
            return None
        if not isinstance(m, ModuleInfo) or m is mod and isinstance(expr, ast.Attribute):
            return None
        return self.type_alias(m, ast.Name(id=name, ctx=ast.Load()), depth + 1)

    def resolve_expr(self, mod: ModuleInfo, expr):
        """A Name/Attribute chain at module scope -> ModuleInfo / ClassInfo / [Unit] / None."""
        d = dotted(expr)
        if d is None:
            return None
        head, *rest = d.split(".")
        obj = self.symbol(mod, head)
        for attr in rest:
            if isinstance(obj, ModuleInfo):
                # `pkg.utils.fn`: a name the package module binds, else its submodule (`import pkg` makes
                # `pkg.utils` reachable once anything imported it, as a training script's `import pkg` does)
                obj = self.symbol(obj, attr) or self.by_name.get(f"{obj.modname}.{attr}")
            elif isinstance(obj, ClassInfo):
                u = self.method(obj, attr)
                obj = [u] if u else None
            else:
                return None
        return obj

    # -- classes -----------------------------------------------------------------------------
    def class_chain(self, cls: ClassInfo) -> list:
        """``cls`` and its bases found among the linted modules, nearest first (no cycles)."""
        chain = self._chains.get(id(cls))
        if chain is not None:
            return chain
        seen, chain, todo = set(), [], [cls]
        while todo:
            c = todo.pop(0)
            if id(c) in seen:
                continue
            seen.add(id(c))
            chain.append(c)
            for expr in c.base_exprs:
                b = self._base(c, expr)
                if b is not None:
                    todo.append(b)
        self._chains[id(cls)] = chain
        return chain

    def _base(self, cls: ClassInfo, expr: str):
        mod = cls.mod
        if not expr:
            return None
        head = expr.split(".")[0]
        if "." not in expr and head in mod.classes and mod.classes[head] is not cls:
            return mod.classes[head]
        node = ast.parse(expr, mode="eval").body if expr.replace(".", "").replace("_", "").isalnum() else None
        obj = self.resolve_expr(mod, node) if node is not None else None
        return obj if isinstance(obj, ClassInfo) and obj is not cls else None

    def subclasses(self, cls: ClassInfo) -> list:
        """Every linted class that has ``cls`` among its bases (transitively)."""
        if self._subclasses is None:
            index: dict = {}
            for m in self.mods:
                for c in m.classes.values():
                    for b in self.class_chain(c)[1:]:
                        index.setdefault(id(b), []).append(c)
            self._subclasses = index
        return self._subclasses.get(id(cls), [])

    def method(self, cls: ClassInfo, name: str):
        for c in self.class_chain(cls):
            u = c.methods.get(name)
            if u is not None:
                return u
        return None

    def methods_of(self, cls: ClassInfo, name: str) -> list:
        """The method ``name`` runs on an object of ``cls`` or of any subclass."""
        out = []
        u = self.method(cls, name)
        if u is not None:
            out.append(u)
        for sub in self.subclasses(cls):
            v = sub.methods.get(name)
            if v is not None and v not in out:
                out.append(v)
        if u is not None and u.cls is not cls and _abstract(u):
            # inherited abstract: ``self.storage: ReplayStorageType`` (a typing-only subclass of BaseStorage) runs
            # the ``add`` of whichever concrete storage it holds, a sibling subclass of the class declaring it
            for sub in self.subclasses(u.cls):
                v = sub.methods.get(name)
                if v is not None and v not in out and not _abstract(v):
                    out.append(v)
        return out

    def annotation_class(self, mod: ModuleInfo, ann, depth: int = 0):
        if ann is None:
            return None
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            try:
                ann = ast.parse(ann.value, mode="eval").body
            except SyntaxError:
                return None
        if isinstance(ann, ast.Subscript):  # Optional[X]
            inner = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            for e in inner:
                c = self.annotation_class(mod, e, depth)
                if c is not None:
                    return c
            return None
        if isinstance(ann, ast.BinOp):  # X | None
            return self.annotation_class(mod, ann.left, depth) or self.annotation_class(mod, ann.right, depth)
        obj = self.resolve_expr(mod, ann)
        if obj is None and depth < 6:  # Agent = Union[PPO, None] in this or another linted module
            alias = self.type_alias(mod, ann)
            if alias is not None:
                return self.annotation_class(alias[0], alias[1], depth + 1)
        return obj if isinstance(obj, ClassInfo) else None

    def external_subclasses(self, mod: ModuleInfo, ann, qualified: bool = False) -> list:
        """The linted classes deriving from the class outside the project that ``ann`` names: a parameter
        annotated ``rollout_buffer: RolloutBuffer`` (stable-baselines3's) may be any project subclass of it
        (``RecurrentRolloutBuffer``), so ``rollout_buffer.add(...)`` may run each one's ``add``."""
        q = dotted(ann) if qualified else mod.qual(ann)
        if not q or "." not in q:
            return []
        index = self.__dict__.get("_external_index")
        if index is None:
            index = self._external_index = {}
            for m in self.mods:
                for c in m.classes.values():
                    for expr in c.base_exprs:
                        if expr and self._base(c, expr) is None:
                            head, sep, rest = expr.partition(".")
                            bq = m.qual(ast.Name(id=head, ctx=ast.Load()))
                            bq = (bq + sep + rest) if bq else expr
                            if "." in bq:
                                index.setdefault(bq, []).append(c)
        direct = index.get(q, [])
        out = []
        for c in direct:
            for sub in [c] + self.subclasses(c):
                if sub not in out:
                    out.append(sub)
        return out

    def local_callables(self, mod: ModuleInfo, unit: Unit) -> dict:
        """Local names of ``unit`` bound to project functions (``collect = collect_rollouts_recurrent if r else
        collect_rollouts``, or one per branch): name -> every function it may call."""
        cache = self.__dict__.setdefault("_local_callables", {})
        out = cache.get(unit)
        if out is not None:
            return out
        out = cache[unit] = {}
        for n in unit_nodes(unit):
            if not (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)):
                continue
            vals = [n.value.body, n.value.orelse] if isinstance(n.value, ast.IfExp) else [n.value]
            if isinstance(n.value, ast.Call) and not isinstance(n.value.func, ast.Lambda):
                # `gae = gae_function(cfg.algo.gae_method)`: a factory / dispatcher returning project functions
                made = [f for t in self.resolve_call(mod, unit, n.value)[:4] for f in self.returned_functions(t)]
                if made:
                    got = out.setdefault(n.targets[0].id, [])
                    got += [u for u in made if u not in got]
                continue
            for v in vals:
                if dotted(v) is None or (isinstance(v, ast.Name) and v.id == n.targets[0].id):
                    continue
                obj = self.resolve_expr(mod, v)
                if isinstance(obj, list):
                    got = out.setdefault(n.targets[0].id, [])
                    got += [u for u in obj if u not in got and isinstance(u.node, FUNC_DEFS)]
        return out

    def returned_functions(self, unit: Unit) -> list:
        """The project functions ``unit`` returns (not calls): ``return gae`` / ``return fn if c else other``, an item
        of a local table of them (``methods = {"loop": gae, "scan": scan_gae}; return methods[name]``), or a def
        nested in it (a closure)."""
        cache = self.__dict__.setdefault("_returned_functions", {})
        out = cache.get(unit)
        if out is not None:
            return out
        out = cache[unit] = []
        if unit.is_module or unit.kernel or unit.mod is None or not isinstance(unit.node, FUNC_DEFS):
            return out
        mod = unit.mod
        nodes = unit_nodes(unit)
        tables = {}  # local name -> the function references of the dict / list / tuple literal bound to it
        for n in nodes:
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                    and isinstance(n.value, (ast.Dict, ast.List, ast.Tuple)):
                tables[n.targets[0].id] = n.value.values if isinstance(n.value, ast.Dict) else n.value.elts
        nested = {u.name: u for u in mod.units if u.parent is unit and isinstance(u.node, FUNC_DEFS)}
        for n in nodes:
            if not (isinstance(n, ast.Return) and n.value is not None):
                continue
            exprs = [n.value.body, n.value.orelse] if isinstance(n.value, ast.IfExp) else [n.value]
            for e in exprs:
                if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name):
                    refs = tables.get(e.value.id, [])
                elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "get" \
                        and isinstance(e.func.value, ast.Name):
                    refs = tables.get(e.func.value.id, [])
                else:
                    refs = [e]
                for r in refs:
                    if r is None or dotted(r) is None:
                        continue
                    if isinstance(r, ast.Name) and r.id in nested:
                        got = [nested[r.id]]
                    elif isinstance(r, ast.Name) and r.id in mod.functions:
                        got = mod.functions[r.id]
                    else:
                        obj = self.resolve_expr(mod, r)
                        got = obj if isinstance(obj, list) else []
                    out += [u for u in got if u not in out and u is not unit and isinstance(u.node, FUNC_DEFS)]
        return out

    def _class_of_value(self, mod: ModuleInfo, value):
        if isinstance(value, ast.Call):
            obj = self.resolve_expr(mod, value.func)
            if isinstance(obj, ClassInfo):
                return obj
        return None

    def attr_classes(self, cls: ClassInfo) -> dict:
        """``self.<attr>`` -> ClassInfo, from ``self.attr = Class(...)`` / ``self.attr: Class`` in the class chain."""
        out = self._attr_classes.get(id(cls))
        if out is not None:
            return out
        out = self._attr_classes[id(cls)] = {}
        for c in reversed(self.class_chain(cls)):
            mod = c.mod
            for st in c.node.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    k = self.annotation_class(mod, st.annotation)
                    if k is not None:
                        out[st.target.id] = k
            for u in c.methods.values():
                if not u.self_name:
                    continue
                params = {}
                for a in u.node.args.args + u.node.args.kwonlyargs:
                    k = self.annotation_class(mod, a.annotation) if a.annotation is not None else None
                    if k is not None:
                        params[a.arg] = k
                for n in unit_nodes(u):
                    if isinstance(n, ast.Assign) and len(n.targets) == 1:
                        t, v = n.targets[0], n.value
                    elif isinstance(n, ast.AnnAssign):
                        t, v = n.target, n.value
                    else:
                        continue
                    if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == u.self_name):
                        continue
                    k = None
                    if isinstance(n, ast.AnnAssign):
                        k = self.annotation_class(mod, n.annotation)
                    if k is None and v is not None:
                        k = self._class_of_value(mod, v)
                        if k is None and isinstance(v, ast.Name):
                            k = params.get(v.id)
                    if k is not None:
                        out[t.attr] = k
        return out

    def receiver_class(self, mod: ModuleInfo, unit: Unit, expr):
        """The project class of the object ``expr`` evaluates to, where the code says it."""
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and unit.self_name \
                and expr.value.id == unit.self_name and unit.cls is not None:
            return self.attr_classes(unit.cls).get(expr.attr)
        if isinstance(expr, ast.Name) and not unit.is_module:
            local = self._local_classes.get(unit)
            if local is None:
                local = self._local_classes[unit] = {}
                args = unit.node.args
                for a in args.posonlyargs + args.args + args.kwonlyargs:
                    if a.annotation is not None:
                        k = self.annotation_class(mod, a.annotation) or self.external_subclasses(mod, a.annotation)
                        if k:
                            local[a.arg] = k
                for n in unit_nodes(unit):
                    if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                        k = self._class_of_value(mod, n.value)
                        if k is not None:
                            local.setdefault(n.targets[0].id, k)
            return local.get(expr.id)
        return None

    # -- calls -------------------------------------------------------------------------------
    def resolve_call(self, mod: ModuleInfo, unit: Unit, call: ast.Call) -> list:
        """The units ``call`` may run (empty when unknown or outside the linted files)."""
        f = call.func
        if isinstance(f, ast.Name):
            local = mod.functions.get(f.id)
            if local:
                return list(local)
            obj = self.symbol(mod, f.id)
            if isinstance(obj, list):
                return obj
            if obj is None and not unit.is_module:
                return self.local_callables(mod, unit).get(f.id, [])
            return []  # a class (its __init__ is set-up, not per-step work) or unknown
        if not isinstance(f, ast.Attribute):
            return []
        base, name = f.value, f.attr
        if isinstance(base, ast.Name):
            if unit.self_name and base.id == unit.self_name and unit.cls is not None:
                return self.methods_of(unit.cls, name)
            if base.id == "super" or base.id in mod.classes:
                cls = mod.classes.get(base.id)
                u = self.method(cls, name) if cls else None
                return [u] if u else []
            if base.id in mod.aliases or base.id in mod.rel_imports:
                obj = self.resolve_expr(mod, f)
                return obj if isinstance(obj, list) else []
        elif isinstance(base, ast.Attribute):  # `pkg.utils.fn(x)` through an imported package
            head = dotted(base)
            head = head.split(".", 1)[0] if head else None
            if head is not None and (head in mod.aliases or head in mod.rel_imports) and head not in mod.classes \
                    and not (unit.self_name and head == unit.self_name):
                obj = self.resolve_expr(mod, f)
                if isinstance(obj, list):
                    return obj
        if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super" \
                and unit.cls is not None:
            for c in self.class_chain(unit.cls)[1:]:
                if name in c.methods:
                    return [c.methods[name]]
            return []
        cls = self.receiver_class(mod, unit, base)
        if isinstance(cls, list):  # an external class's project subclasses
            out = []
            for c in cls:
                out += [u for u in self.methods_of(c, name) if u not in out]
            return out
        if cls is not None:
            return self.methods_of(cls, name)
        if name in STORAGE_METHODS and STORAGE_RECEIVER.search((dotted(base) or "").rsplit(".", 1)[-1]):
            top = mod.modname.split(".", 1)[0]
            cands = [u for u in self.methods.get(name, ()) if u.cls is not None and STORAGE_CLASS.search(u.cls.name)
                     and (u.mod is mod or u.mod.modname.split(".", 1)[0] == top)]
            if cands:
                return cands
        if name not in GENERIC and not name.startswith("__"):
            top = mod.modname.split(".", 1)[0]  # a bare name stands for methods of the caller's own package only
            cands = [u for u in self.methods.get(name, ()) if u.mod is mod or u.mod.modname.split(".", 1)[0] == top]
            if 0 < len(cands) <= _MAX_NAME_TARGETS:
                return cands
            recv = dotted(base) or ""
            if cands and ROLE_RECEIVER.search(recv.rsplit(".", 1)[-1]):
                return cands
        return []


def _abstract(unit: Unit) -> bool:
    """A method that only declares: ``@abstractmethod``, or a body of a docstring, ``pass``, ``...`` or
    ``raise NotImplementedError``."""
    node = unit.node
    if not isinstance(node, FUNC_DEFS):
        return False
    if any((dotted(d) or "").rsplit(".", 1)[-1] == "abstractmethod" for d in node.decorator_list):
        return True
    body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if not body:
        return True
    if len(body) != 1:
        return False
    s = body[0]
    if isinstance(s, ast.Pass):
        return True
    if isinstance(s, ast.Raise) and s.exc is not None:
        e = s.exc.func if isinstance(s.exc, ast.Call) else s.exc
        return dotted(e) == "NotImplementedError"
    return False


def single(mod: ModuleInfo) -> Project:
    return Project([mod])


__all__ = ["Project", "single", "GENERIC", "FUNC_DEFS"]

"""What the linter knows about one module: import aliases, its functions ("units"), its classes.

A *unit* is a piece of code analysed as one: the module's top-level code, or one function
(methods and nested functions included). Units never overlap: a unit's walk skips nested defs.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

FUNC_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_STMT_FIELDS = ("body", "orelse", "finalbody", "handlers")


@dataclass(eq=False)
class ClassInfo:
    node: ast.ClassDef
    name: str
    bases: list  # names of base classes (last dotted part)
    methods: dict = field(default_factory=dict)  # name -> Unit
    mod: "ModuleInfo | None" = None  # the module defining it
    base_exprs: list = field(default_factory=list)  # dotted source text of the bases ("nn.Module", "base.Env")
    attrs: dict | None = None  # self attribute -> kind, filled by infer.class_attrs()
    building: bool = False
    # self attributes that may also hold None or a Python flag (`self.x = None`, `logstd: Optional[Tensor]`,
    # `else: self.mask = True`): their truth test may be a None / flag check (infer.class_attrs())
    flag_attrs: set = field(default_factory=set)


@dataclass(eq=False)
class Unit:
    node: ast.AST  # ast.Module or a function def
    name: str  # function name, "<module>" for top-level code
    qualname: str  # "Class.method", "outer.<locals>.inner" -> "outer.inner"
    cls: ClassInfo | None = None  # set for methods
    parent: "Unit | None" = None
    kernel: bool = False  # @wp.kernel / @wp.func: device code, never linted
    self_name: str | None = None  # first parameter of a method
    mod: "ModuleInfo | None" = None  # the module it belongs to

    @property
    def is_module(self) -> bool:
        return isinstance(self.node, ast.Module)

    @property
    def lineno(self) -> int:
        return getattr(self.node, "lineno", 1)


def dotted(expr) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        parts.append(expr.id)
        return ".".join(reversed(parts))
    return None


_KERNEL_DECORATORS = {"warp.kernel", "warp.func", "warp.func_native", "warp.func_grad", "warp.func_replay"}


_DEFAULT_DEVICE = re.compile(r"set_default_device\((?!\s*['\"]cpu['\"])|set_default_tensor_type\([^)]*cuda")


def _calls_set_default_device(tree) -> bool:
    """The code calls ``set_default_device(d)`` (not to "cpu") or ``set_default_tensor_type(<cuda type>)``: the text
    matched, but a string or comment naming it (a linter's own tables) sets nothing."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name == "set_default_device":
                a = n.args[0] if n.args else None
                if not (isinstance(a, ast.Constant) and a.value == "cpu"):
                    return True
            elif name == "set_default_tensor_type" and "cuda" in ast.unparse(n):
                return True
    return False


class ModuleInfo:
    def __init__(self, tree: ast.Module, text: str, path: str = "<string>"):
        self.tree = tree
        self.text = text
        self.path = path
        self.aliases: dict[str, str] = {}
        self.rel_imports: dict[str, tuple] = {}  # name -> (level, module, name) of a relative import
        self.star_imports: list[tuple] = []  # (level, module) of each `from module import *` (the Project merges)
        self.units: list[Unit] = []
        self.classes: dict[str, ClassInfo] = {}
        self.functions: dict[str, list[Unit]] = {}  # plain (non-method) functions by name
        self.methods: dict[str, list[Unit]] = {}  # methods of any class by name
        # module-level names bound once to a type expression: `GymEnv = Union[gym.Env, gymnasium.Env]`,
        # `SupportedOnPolicy = PPO`, `Mask: TypeAlias = np.ndarray | None` (annotations read through them)
        self.type_aliases: dict[str, ast.expr] = {}
        self.module_unit = Unit(tree, "<module>", "<module>", mod=self)
        self.units.append(self.module_unit)
        self._collect(tree.body, self.module_unit, None, "")
        self.import_flags()
        self._return_kinds: dict = {}
        # a factory without device= allocates on the default device: the GPU where the code (or, once linted
        # as a project, any module of it) sets one: torch.set_default_device("cuda"), Genesis' gs.init(...)
        self.sets_default_device = (bool(_DEFAULT_DEVICE.search(text)) and _calls_set_default_device(tree)) or (
            "genesis" in self._roots and ".init(" in text)
        self.project = None  # the Project (perfkit.lint.project) when linted with other files
        self.modname = ""  # dotted module name within its package tree (set by the Project)

    def import_flags(self):
        """Which libraries the module's imports name (again once the Project has merged its star imports)."""
        roots = self._roots = {v.split(".")[0] for v in self.aliases.values()}
        self.uses_torch = "torch" in roots
        self.uses_warp = "warp" in roots or "mujoco_warp" in roots
        self.uses_gym = "gym" in roots or "gymnasium" in roots  # CPU envs: step() returns numpy
        # Warp and torch share memory here (zero-copy views), so their streams must agree.
        self.shares_torch_warp = self.uses_torch and self.uses_warp and (
            "to_torch" in self.text or "from_torch" in self.text or "__cuda_array_interface__" in self.text
        )

    def exported(self) -> list:
        """The names ``from this_module import *`` binds: ``__all__`` when the module lists it, else every
        top-level name not starting with an underscore."""
        names = None
        for st in self.tree.body:
            if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in st.targets):
                if isinstance(st.value, (ast.List, ast.Tuple)) and all(
                        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in st.value.elts):
                    names = [e.value for e in st.value.elts]
        if names is not None:
            return names
        top = list(self.aliases) + list(self.rel_imports) + list(self.classes) + [
            n for n, us in self.functions.items() if any(u.parent is self.module_unit for u in us)]
        return [n for n in dict.fromkeys(top) if not n.startswith("_")]

    # -- lines -> units ----------------------------------------------------------------------
    def unit_at(self, line: int) -> Unit:
        """The innermost unit whose code holds ``line``."""
        spans = getattr(self, "_spans", None)
        if spans is None:
            spans = sorted(((u.node.lineno, u.node.end_lineno or u.node.lineno, u) for u in self.units
                            if not u.is_module), key=lambda t: (t[0], -t[1]))
            self._spans = spans
        best = self.module_unit
        for start, end, unit in spans:
            if start > line:
                break
            if end >= line:
                best = unit  # later starts are nested deeper
        return best

    def units_matching(self, pattern) -> set:
        """Units holding a source line that matches the compiled regex ``pattern``."""
        import bisect

        starts = getattr(self, "_line_starts", None)
        if starts is None:
            starts = [0]
            find = self.text.find
            i = find("\n")
            while i >= 0:
                starts.append(i + 1)
                i = find("\n", i + 1)
            self._line_starts = starts
        out = set()
        for m in pattern.finditer(self.text):
            out.add(self.unit_at(bisect.bisect_right(starts, m.start())))
        return out

    # -- names -------------------------------------------------------------------------------
    def qual(self, expr) -> str | None:
        """The canonical dotted name of ``expr``: ``th.cuda.synchronize`` -> ``torch.cuda.synchronize``."""
        d = dotted(expr)
        if d is None:
            return None
        head, sep, rest = d.partition(".")
        target = self.aliases.get(head)
        if target is None:
            return d
        return target + sep + rest

    def _add_import(self, node):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    self.aliases[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    self.aliases[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                if a.name != "*":
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                else:
                    self.star_imports.append((0, node.module))
        elif isinstance(node, ast.ImportFrom) and node.level:  # from .x import y: resolved by the Project
            for a in node.names:
                if a.name != "*":
                    self.rel_imports[a.asname or a.name] = (node.level, node.module or "", a.name)
                else:
                    self.star_imports.append((node.level, node.module or ""))

    # -- units -------------------------------------------------------------------------------
    def _collect(self, stmts, owner: Unit, cls: ClassInfo | None, prefix: str):
        for st in stmts:
            if isinstance(st, (ast.Import, ast.ImportFrom)):
                self._add_import(st)
            elif isinstance(st, FUNC_DEFS):
                qn = f"{prefix}{st.name}"
                unit = Unit(st, st.name, qn, cls=cls, parent=owner, mod=self)
                unit.kernel = any(self.qual(_decorator_target(d)) in _KERNEL_DECORATORS for d in st.decorator_list)
                if cls is not None:
                    args = st.args.posonlyargs + st.args.args
                    if args and not any(dotted(d) == "staticmethod" for d in st.decorator_list):
                        unit.self_name = args[0].arg
                    known = cls.methods.get(st.name)
                    if known is None or _overload_stub(known.node):
                        cls.methods[st.name] = unit  # an @overload signature stands for the def that follows it
                    self.methods.setdefault(st.name, []).append(unit)
                else:
                    self.functions.setdefault(st.name, []).append(unit)
                self.units.append(unit)
                self._collect(st.body, unit, None, qn + ".")
            elif owner is self.module_unit and cls is None and isinstance(st, (ast.Assign, ast.AnnAssign)):
                self._type_alias(st)
            elif isinstance(st, ast.ClassDef):
                # a generic base (`Algorithm[TPolicy]`, `Generic[T]`) is its class: the subscript is typing only
                exprs = [dotted(b.value if isinstance(b, ast.Subscript) else b) or "" for b in st.bases]
                info = ClassInfo(st, st.name, [e.split(".")[-1] for e in exprs], mod=self, base_exprs=exprs)
                self.classes.setdefault(st.name, info)
                self._collect(st.body, owner, info, f"{prefix}{st.name}.")
            else:
                for f in _STMT_FIELDS:
                    sub = getattr(st, f, None)
                    if sub:
                        self._collect(sub, owner, cls, prefix)
                if isinstance(st, ast.Match):
                    for case in st.cases:
                        self._collect(case.body, owner, cls, prefix)

    def _type_alias(self, st):
        """Record ``Name = <type expression>`` at module level (a name bound twice is no alias)."""
        if isinstance(st, ast.Assign):
            if len(st.targets) != 1 or not isinstance(st.targets[0], ast.Name):
                return
            name, value = st.targets[0].id, st.value
        else:
            if not isinstance(st.target, ast.Name) or st.value is None:
                return
            if (dotted(st.annotation) or "").rsplit(".", 1)[-1] != "TypeAlias":
                return
            name, value = st.target.id, st.value
        if name in self.type_aliases or not _is_type_expr(value):
            self.type_aliases.pop(name, None)
            return
        self.type_aliases[name] = value

    def class_chain(self, cls: ClassInfo):
        """``cls`` and its base classes defined in this module or, within a Project, in the other linted
        modules (no cycles). Each ClassInfo's ``mod`` says where it is defined."""
        if self.project is not None:
            return self.project.class_chain(cls)
        seen, out, todo = set(), [], [cls]
        while todo:
            c = todo.pop(0)
            if c.name in seen:
                continue
            seen.add(c.name)
            out.append(c)
            todo.extend(self.classes[b] for b in c.bases if b in self.classes)
        return out


def _is_type_expr(e) -> bool:
    """``A``, ``a.B``, ``A[B, C]``, ``A | B | None``, ``Optional[A]``: an expression made only of (dotted) names,
    subscripts, ``|`` unions and ``None``/string constants."""
    if isinstance(e, ast.Constant):
        return e.value is None or isinstance(e.value, str)
    if dotted(e) is not None:
        return True
    if isinstance(e, ast.Subscript):
        return dotted(e.value) is not None and _is_type_expr(e.slice)
    if isinstance(e, ast.Tuple):
        return all(_is_type_expr(x) for x in e.elts)
    if isinstance(e, ast.List):  # Callable[[A], B]
        return all(_is_type_expr(x) for x in e.elts)
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.BitOr):
        return _is_type_expr(e.left) and _is_type_expr(e.right)
    return False


def _decorator_target(d):
    return d.func if isinstance(d, ast.Call) else d


def if_tests(unit: Unit):
    """``(if node, its test with a leading ``not`` taken off, whether it was negated)`` for every ``if``
    statement of ``unit`` (:func:`unit_nodes` order)."""
    for n in unit_nodes(unit):
        if isinstance(n, ast.If):
            test, negated = n.test, False
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test, negated = test.operand, True
            yield n, test, negated


def _overload_stub(node) -> bool:
    """A ``@typing.overload`` signature: the implementation is the def of the same name after it."""
    return any((dotted(d) or "").rsplit(".", 1)[-1] == "overload" for d in getattr(node, "decorator_list", ()))


def error_path(unit: Unit) -> set:
    """id() of the nodes of ``unit`` that run only when something failed: a ``raise`` statement, an assert's
    message."""
    ids = unit.__dict__.get("_error_path")
    if ids is None:
        ids = set()
        for n in unit_nodes(unit):
            if type(n) is ast.Raise or (type(n) is ast.Assert and n.msg is not None):
                ids.update(id(c) for c in ast.walk(n if type(n) is ast.Raise else n.msg))
        unit._error_path = ids
    return ids


def unit_nodes(unit: Unit) -> list:
    """Every node of ``unit`` in depth-first source order, not entering nested defs or classes' methods.

    Decorators of nested defs belong to this unit (they run in its scope). Computed once per unit.
    """
    nodes = unit.__dict__.get("_nodes")
    if nodes is not None:
        return nodes
    nodes = []
    append = nodes.append
    stack = list(reversed(unit.node.body))
    pop, extend = stack.pop, stack.extend
    AST = ast.AST
    while stack:
        node = pop()
        t = type(node)
        if t is ast.FunctionDef or t is ast.AsyncFunctionDef:
            extend(reversed(node.decorator_list))
            continue
        if t is ast.ClassDef:
            extend(reversed([s for s in node.body if not isinstance(s, FUNC_DEFS)]))
            extend(reversed(node.decorator_list))
            continue
        append(node)
        children = []
        for name in node._fields:
            value = getattr(node, name, None)
            if type(value) is list:
                children.extend(v for v in value if isinstance(v, AST))
            elif isinstance(value, AST):
                children.append(value)
        if children:
            children.reverse()
            extend(children)
    unit._nodes = nodes
    return nodes

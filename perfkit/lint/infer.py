"""A light, local type inference: which expressions are torch tensors, Warp arrays, or neither.

Flow-insensitive within a function (a name is a tensor if any assignment makes it one), and
local to the module: names bound from torch/warp calls, ``self`` attributes assigned tensors in any
method of the class (``__init__`` first), parameters annotated as tensors, results of tensor
methods and of operators on tensors, returns of functions in the same module, and — in modules
that import torch — results of ``env.step()``/``env.reset()`` and of calls that take a tensor.
"""

from __future__ import annotations

import ast
import re

from perfkit.lint.modinfo import FUNC_DEFS, ModuleInfo, Unit, dotted, unit_nodes

TENSOR = "tensor"  # a torch tensor that may live on the GPU
BOOL = "bool"  # a boolean torch tensor (a mask)
CPU = "cpu"  # a torch tensor known to be on the host (from_numpy, .cpu(), device="cpu")
WARP = "warp"  # a Warp array
MJDATA = "mjdata"  # mujoco_warp Data (its fields are Warp arrays)
MJMODEL = "mjmodel"
NDARRAY = "ndarray"  # numpy: host memory, never a sync
HOST = "host"  # plain Python data: numbers, strings, lists, tuples, dicts (never a sync)
TDICT = "tensordict"  # a TensorDict: its values are tensors
HOSTENV = "hostenv"  # a CPU vector env (gym / SB3 VecEnv): step()/reset() return numpy arrays
DEVICE = frozenset({TENSOR, BOOL})  # reading these on the host syncs
TORCH = frozenset({TENSOR, BOOL, CPU})
HOSTSEQ = "hostseq"  # a list/tuple whose items are host data (numpy views of pinned buffers, numbers)
TMAP = "tensormap"  # a plain dict whose values are device tensors ({name: torch.zeros(n, device=d) for ...})
HOSTISH = frozenset({HOST, NDARRAY, CPU, HOSTSEQ})  # known to live on the host

# torch.<name>(...) that do not return a tensor
_TORCH_NON_TENSOR = {
    "device", "dtype", "no_grad", "inference_mode", "enable_grad", "set_grad_enabled", "manual_seed",
    "seed", "is_tensor", "is_floating_point", "is_complex", "numel", "Size", "Generator", "compile",
    "get_default_dtype", "set_default_dtype", "set_default_device", "finfo", "iinfo", "load", "save",
    "is_grad_enabled", "get_rng_state", "set_rng_state", "set_printoptions", "use_deterministic_algorithms",
    "set_float32_matmul_precision", "set_num_threads", "get_num_threads", "is_nonzero", "equal",
    "allclose", "result_type", "promote_types", "can_cast", "Stream", "Event", "typename",
}
_BOOL_FUNCS = {
    "isnan", "isinf", "isfinite", "isneginf", "isposinf", "isreal", "logical_and", "logical_or", "logical_not",
    "logical_xor", "eq", "ne", "gt", "ge", "lt", "le", "greater", "less", "greater_equal", "less_equal",
    "not_equal", "isin", "isclose", "signbit", "any", "all", "bool",
}
_TENSOR_ATTRS = {"T", "mT", "H", "mH", "data", "grad", "real", "imag", "values", "indices"}
_NON_TENSOR_METHODS = {
    "size", "dim", "ndimension", "numel", "nelement", "element_size", "data_ptr", "stride", "is_contiguous",
    "get_device", "storage_offset", "is_floating_point", "is_complex", "equal", "allclose", "tolist", "item",
    "numpy", "backward", "register_hook", "untyped_storage", "storage", "is_pinned", "is_shared",
    "record_stream", "__len__", "__array__", "retain_grad", "share_memory_", "is_set_to", "dense_dim", "sparse_dim",
    "_nnz", "is_coalesced", "q_scale", "q_zero_point", "qscheme", "is_inference", "nbytes", "itemsize",
    "get_device_name", "__index__", "__int__", "__float__", "__bool__",
}
_WARP_ARRAY_FUNCS = {
    "array", "zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like", "clone",
    "from_numpy", "from_torch", "from_jax", "from_dlpack", "from_paddle", "array1d", "array2d", "array3d",
    "array4d", "indexedarray", "fabricarray",
}
_WARP_ARRAY_METHODS = {"view", "reshape", "flatten", "contiguous", "transpose", "to", "astype"}
_HOST_BUILTINS = {
    "len", "range", "str", "repr", "int", "float", "bool", "complex", "isinstance", "issubclass", "print", "type",
    "hasattr", "getattr", "setattr", "id", "hash", "format", "sorted", "list", "dict", "set", "tuple", "enumerate",
    "zip", "open", "min", "max", "sum", "abs", "round", "iter", "next", "super", "vars", "dir", "callable", "all",
    "any", "map", "filter", "reversed", "chr", "ord", "divmod", "pow", "object", "frozenset", "bytes", "input",
}
_NOT_TENSOR_NAMES = re.compile(r"^(info|infos|extras?|stats|metrics|_)$")
_MASK_NAME = re.compile(r"(^|_)(mask|masks|done|dones|terminated|terminate|terminations|truncated|truncations|"
                        r"timeouts?|time_outs|alive|valid|active|fallen|resets)$|^(is|has|should)_")
ENV_RECEIVER = re.compile(r"env", re.IGNORECASE)
# unannotated parameters that batched-env code uses for tensors (in modules that import torch)
_TENSOR_PARAM = re.compile(r"^(actions?|obs|observations?|next_obs|rewards?|dones?|terminated|truncated|"
                           r"timeouts|env_ids|env_idx|masks?|reset_mask|done_mask)$")


# a gym/gymnasium space (`self.action_space`, `env.single_observation_space`) and its numpy attributes
_GYM_SPACE = re.compile(r"(^|[._])(single_)?(action|observation|obs|state)_space$")
_SPACE_ATTRS = {"low", "high", "nvec", "n", "shape", "start"}


def is_mask_name(name: str) -> bool:
    return bool(_MASK_NAME.search(name))


_CONTAINERS = {"list", "List", "tuple", "Tuple", "dict", "Dict", "Sequence", "Iterable", "Iterator", "Mapping",
               "set", "Set", "frozenset", "FrozenSet", "deque", "Deque", "MutableSequence", "Generator", "Callable",
               "type", "Type", "OrderedDict", "DefaultDict", "defaultdict", "Collection", "MutableMapping"}


_HOST_TYPES = {"int", "float", "str", "bool", "bytes", "complex", "list", "tuple", "dict", "set", "frozenset", "slice", "range",
               "List", "Tuple", "Dict", "Set", "Sequence", "Mapping", "numbers.Number", "numbers.Real", "Number",
               "Real", "numpy.number", "numpy.generic", "numpy.floating", "numpy.integer", "numpy.bool_",
               "numpy.float32", "numpy.float64", "numpy.int64", "numpy.int32"}
_NDARRAY_TYPES = {"numpy.ndarray", "numpy.typing.NDArray", "numpy.typing.ArrayLike", "NDArray", "numpy.array"}
_TDICT_NAMES = {"TensorDict", "TensorDictBase", "LazyStackedTensorDict", "TensorDictParams"}
_TDICT_PARAM = re.compile(r"^(tensordict|td|tensordict_out|next_tensordict|tensordict_reset|next_td|td_out|"
                          r"tensordict_in|td_in)$")


def _listed(e) -> list:
    """The items a list / tuple display or a comprehension builds (``[a, b]``, ``[f(x) for x in xs]``)."""
    if isinstance(e, (ast.List, ast.Tuple)):
        return list(e.elts)
    if isinstance(e, (ast.ListComp, ast.GeneratorExp)):
        return [e.elt]
    return []


def says_nothing(mod: ModuleInfo, ann) -> bool:
    """``x: Any`` / ``x: object``: the annotation declares nothing; the parameter holds what its callers pass."""
    last = ann.id if type(ann) is ast.Name else ann.attr if type(ann) is ast.Attribute else None
    if last not in ("Any", "object"):
        return False
    return (mod.qual(ann) or dotted(ann)) in ("typing.Any", "Any", "object", "typing_extensions.Any")


def _union_members(t) -> list:
    """``A | B | C`` -> [A, B, C]."""
    if isinstance(t, ast.BinOp) and isinstance(t.op, ast.BitOr):
        return _union_members(t.left) + _union_members(t.right)
    return [t]


def type_kind(mod: ModuleInfo, t) -> str | None:
    """The kind an ``isinstance(x, t)`` check proves (t a type, a tuple of types or a ``A | B`` union)."""
    if isinstance(t, ast.BinOp) and isinstance(t.op, ast.BitOr):
        t = ast.Tuple(elts=_union_members(t), ctx=ast.Load())
    if isinstance(t, ast.Tuple):
        kinds = {type_kind(mod, e) for e in t.elts}
        if len(kinds) == 1:
            return kinds.pop()
        if kinds <= HOSTISH:
            return HOST
        return None
    q = mod.qual(t) or ""
    if q.startswith("torch.") and q.endswith("Tensor"):
        return TENSOR
    if q in _NDARRAY_TYPES:
        return NDARRAY
    if q in _HOST_TYPES:
        return HOST
    if q.rsplit(".", 1)[-1] in _TDICT_NAMES:
        return TDICT
    return None


def _union_kind(kinds: set) -> str | None:
    """``Sequence[int] | torch.Tensor | None``: a device tensor when one member is (reading it syncs when it
    is one; ``isinstance`` tests narrow it), else the one kind of every member, else unknown."""
    if len(kinds) == 1:
        return next(iter(kinds))
    if kinds & DEVICE:
        return join_kinds(kinds & DEVICE)
    return TENSOR if kinds and kinds <= TORCH else None


_ITEMS_OF: set = set()  # units whose returned tuples are being typed (recursion guard)
_EXPANDING: set = set()  # type aliases being expanded (`A = Union[A, int]` must not recurse for ever)


def annotation_kind(mod: ModuleInfo, ann) -> str | None:
    k = _annotation_kind(mod, ann)
    if k is None and isinstance(ann, (ast.Name, ast.Attribute)):
        alias = _type_alias(mod, ann)  # GymEnv = Union[gym.Env, gymnasium.Env]: what it stands for
        if alias is not None and id(alias[1]) not in _EXPANDING:
            _EXPANDING.add(id(alias[1]))
            try:
                return annotation_kind(alias[0], alias[1])
            finally:
                _EXPANDING.discard(id(alias[1]))
    return k


def _members(mod: ModuleInfo, ann, depth: int = 0) -> list:
    """``(module, member)`` for each member of a union annotation (``A | B``, ``Union[A, B]``, ``Optional[A]``,
    through type aliases, each read in the module that writes it)."""
    if depth > 6:
        return [(mod, ann)]
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        return _members(mod, ann.left, depth + 1) + _members(mod, ann.right, depth + 1)
    outer = (mod.qual(ann.value) or "").rsplit(".", 1)[-1] if isinstance(ann, ast.Subscript) else ""
    if outer in ("Union", "Optional"):
        sl = ann.slice
        out = [m for e in (sl.elts if isinstance(sl, ast.Tuple) else [sl]) for m in _members(mod, e, depth + 1)]
        return out + [(mod, ast.Constant(value=None))] if outer == "Optional" else out
    if isinstance(ann, (ast.Name, ast.Attribute)):
        alias = _type_alias(mod, ann)
        if alias is not None:
            return _members(alias[0], alias[1], depth + 1)
    return [(mod, ann)]


def optional(mod: ModuleInfo, ann) -> bool:
    """``Optional[T]``, ``T | None``, ``Union[T, None]`` (through type aliases)."""
    return any((isinstance(e, ast.Constant) and e.value is None) or dotted(e) == "None" for _, e in _members(mod, ann))


def flag_attr(mod: ModuleInfo, cls, attr: str) -> bool:
    """``self.<attr>`` of ``cls`` (or a base) may hold None or a Python flag besides a tensor."""
    if cls is None:
        return False
    class_attrs(mod, cls)
    return any(attr in c.flag_attrs for c in mod.class_chain(cls))


def mixed_union(mod: ModuleInfo, ann) -> bool:
    """A union of device tensors and host data (``np.ndarray | Sequence[np.ndarray] | torch.Tensor``): which one
    a value is only its producer knows."""
    kinds = {annotation_kind(m, e) for m, e in _members(mod, ann)  # a slice / None is an index, not data
             if not (isinstance(e, ast.Constant) and e.value is None) and dotted(e) not in ("None", "slice", "range")}
    return bool(kinds & DEVICE) and bool(kinds & HOSTISH)


_GYM_BASES = ("gym.Env", "gymnasium.Env", "gym.core.Env", "gymnasium.core.Env", "gym.vector.VectorEnv",
              "gymnasium.vector.VectorEnv", "gymnasium.vector.vector_env.VectorEnv", "gym.Wrapper", "gymnasium.Wrapper")


def torch_gym_envs(mod: ModuleInfo) -> bool:
    """Whether the linted project defines gym/gymnasium envs whose ``step()`` returns torch tensors (ManiSkill's
    GPU-simulated envs): there, a ``gym.make(...)`` / ``gym.Env`` is no proof of host data."""
    holder = _holder(mod)
    got = holder.__dict__.get("_torch_gym_envs")
    if got is None:
        holder._torch_gym_envs = False  # while computing
        project = mod.project
        got = False
        if project is not None:
            for base in _GYM_BASES:
                for c in project.external_subclasses(mod, ast.parse(base, mode="eval").body, qualified=True):
                    step = c.methods.get("step")
                    if step is not None and c.mod is not None and c.mod.uses_torch \
                            and return_kind(c.mod, step) in TORCH:
                        got = True
                        break
                if got:
                    break
        holder._torch_gym_envs = got
    return got


def _type_alias(mod: ModuleInfo, ann):
    if mod.project is not None:
        return mod.project.type_alias(mod, ann)
    if isinstance(ann, ast.Name) and ann.id in mod.type_aliases:
        return mod, mod.type_aliases[ann.id]
    return None


def _annotation_kind(mod: ModuleInfo, ann) -> str | None:
    if ann is None:
        return None
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        s = ann.value
        if "BoolTensor" in s:
            return BOOL
        if "Tensor" in s and "TensorDict" not in s:
            return TENSOR
        if "wp.array" in s or "warp.array" in s:
            return WARP
        if "ndarray" in s:
            return NDARRAY
        if "VecEnv" in s:
            return HOSTENV
        return None
    if isinstance(ann, ast.Call):  # wp.array(dtype=wp.vec3)
        ann = ann.func
    if isinstance(ann, ast.Subscript):  # Optional[Tensor], Float[Tensor, "n"], wp.array[...]
        base = annotation_kind(mod, ann.value)
        if base:
            return base
        outer = (mod.qual(ann.value) or "").rsplit(".", 1)[-1]
        if outer in _CONTAINERS:
            return HOST  # list[Tensor] is a list
        sl = ann.slice
        elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        if outer in ("Union", "Optional"):  # one kind for every member, else unknown
            kinds = {annotation_kind(mod, e) for e in elts
                     if not (isinstance(e, ast.Constant) and e.value is None) and dotted(e) != "None"}
            return _union_kind(kinds)
        for e in elts:
            k = annotation_kind(mod, e)
            if k:
                return k
        return None
    if isinstance(ann, ast.BinOp):  # Tensor | None, np.ndarray | Tensor
        members = [x for x in (ann.left, ann.right) if not (isinstance(x, ast.Constant) and x.value is None)]
        return _union_kind({annotation_kind(mod, x) for x in members})
    q = mod.qual(ann)
    if not q:
        return None
    if q in _NDARRAY_TYPES:
        return NDARRAY
    if q in _HOST_TYPES:
        return HOST
    if q.rsplit(".", 1)[-1] in _TDICT_NAMES:
        return TDICT
    if "VecEnv" in q.rsplit(".", 1)[-1] or (q.startswith(("gym.", "gymnasium.")) and q.endswith(("Env", "Wrapper"))):
        return HOSTENV  # gym.Env, gymnasium.vector.VectorEnv, gym.Wrapper: step() returns numpy / Python values
    if q in ("torch.BoolTensor", "torch.cuda.BoolTensor"):
        return BOOL
    if q.startswith("torch.") and q.endswith("Tensor"):
        return TENSOR
    if q in ("warp.array", "warp.types.array") or (q.startswith("warp.array") and q[10:].isdigit()):
        return WARP
    if q.startswith("mujoco_warp.") and q.endswith(".Data"):
        return MJDATA
    if q.startswith("mujoco_warp.") and q.endswith(".Model"):
        return MJMODEL
    return None


_COMPS = frozenset({ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp})
_EXITS = frozenset({ast.Return, ast.Raise, ast.Continue, ast.Break})


def _exit_test(tst) -> bool:
    """The test of an if that leaves its block narrows the rest: ``isinstance(x, T)`` or ``x.is_cuda``."""
    if type(tst) is ast.Attribute:
        return tst.attr == "is_cuda"
    return type(tst) is ast.Call and type(tst.func) is ast.Name and tst.func.id == "isinstance" and len(tst.args) == 2


class Typer:
    """Kinds of the expressions of one unit.

    A local name has the kind of its latest assignment before the use (in source order; names assigned
    only later, in a loop, take their summary kind), narrowed inside ``if isinstance(name, T):`` blocks.
    """

    def __init__(self, mod: ModuleInfo, unit: Unit, building_attrs: dict | None = None):
        self.mod = mod
        self.unit = unit
        self.env: dict[str, str] = {}  # name -> summary kind (any assignment)
        self.binds: dict[str, list] = {}  # name -> [(position, kind)] in source order
        self.refine: list = []  # (name, first line, last line, kind) from isinstance() tests
        self._memo: dict[int, str | None] = {}
        self._attrs = building_attrs  # while a class's attributes are being inferred
        self.branches: list = []  # (id of an If, 0 body / 1 else, first pos, last pos): where joins happen
        self._paths: dict = {}
        # (name, position) of bindings typed a tensor by a guess alone: a parameter by its name (`done`), the items
        # of an env's step() of unknown type, a parameter every hot call passes such a guess (see guessed_flag)
        self.guessed: set = set()
        # (name, position) of a comprehension's own bindings -> the comprehension's span: its scope, in Python 3
        self.scoped: dict = {}
        self.host_spans: list = []  # where only host tensors go: the rest of a block after `if x.is_cuda: return`
        self._build()

    # -- the unit's local names --------------------------------------------------------------
    def _param_kind(self, a):
        u = self.unit
        if a.annotation is not None and says_nothing(self.mod, a.annotation):
            # `x: Any`: what every hot call passes when that is host data (`default_collate(...)`); the declaration
            # still keeps guesses away (a device tensor passed or a name like `obs` types nothing here)
            hint = passed_kind(self.mod, u, a.arg) if self._attrs is None else None
            return hint if hint in HOSTISH else None
        if a.annotation is not None:
            k = annotation_kind(self.mod, a.annotation)
            if k in DEVICE and self._attrs is None and mixed_union(self.mod, a.annotation):
                # `mask: np.ndarray | torch.Tensor | None`: either; what the callers pass, where they agree on host
                hint = passed_kind(self.mod, u, a.arg)
                if hint in HOSTISH:
                    return hint  # every hot call passes host data
            elif k == TENSOR and self._attrs is None and passed_kind(self.mod, u, a.arg) == CPU \
                    and a.arg in _holder(self.mod).__dict__.get("_passes_cpu", {}).get(u, ()):
                return CPU  # `ids: Tensor` says a tensor, not where: every hot call passes `ids.cpu()`
            return k
        if a.arg == u.self_name:
            return None
        k = param_hints(self.mod).get(u, {}).get(a.arg) if self._attrs is None else None
        if k is not None and a.arg in _holder(self.mod).__dict__.get("_param_guessed", {}).get(u, ()):
            self.guessed.add((a.arg, (0, 0)))
        if k is None and self.mod.uses_torch:
            if _TENSOR_PARAM.match(a.arg):
                k = BOOL if is_mask_name(a.arg) else TENSOR
                self.guessed.add((a.arg, (0, 0)))
            elif _TDICT_PARAM.match(a.arg):
                k = TDICT
        return k

    def _build(self):
        u = self.unit
        if not u.is_module:
            args = u.node.args
            for a in args.posonlyargs + args.args + args.kwonlyargs:
                k = self._param_kind(a)
                self.binds[a.arg] = [((0, 0), k)]  # a parameter shadows module names, known or not
                if k:
                    self.env[a.arg] = k
            for a in (args.vararg, args.kwarg):
                if a is not None:
                    self.env[a.arg] = self.binds.setdefault(a.arg, [((0, 0), HOST)])[0][1]
        nodes = unit_nodes(u)
        comps = {}  # id of an ast.comprehension -> the span of the comprehension expression holding it
        exits = set()  # ids of `if isinstance(x, Tensor): return` / `if x.is_cuda: return` without else
        for node in nodes:  # first the branches and narrowings, which the kinds of the bindings below read
            t = type(node)
            if t is ast.If:
                self._isinstance_test(node)
                self._branch(node)
                if not node.orelse and type(node.body[-1]) in _EXITS and _exit_test(node.test):
                    exits.add(id(node))
            elif t is ast.IfExp or t is ast.BoolOp:
                self._expr_narrowing(node)
            elif t in _COMPS:
                span = ((node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset))
                for g in node.generators:
                    comps[id(g)] = span
        if exits and not u.is_module:
            self._early_exits(u.node.body, exits)
        for node in nodes:
            t = type(node)
            if t is ast.Assign:
                pos = (node.end_lineno, node.end_col_offset)
                for tg in node.targets:
                    self._bind(tg, node.value, pos)
            elif t is ast.AnnAssign:
                pos = (node.end_lineno, node.end_col_offset)
                k = annotation_kind(self.mod, node.annotation)
                if k and isinstance(node.target, ast.Name):
                    self._set(node.target.id, k, pos)
                elif node.value is not None:
                    self._bind(node.target, node.value, pos)
            elif t is ast.AugAssign and isinstance(node.target, ast.Name):
                k = self.kind(node.value)
                if k in TORCH and node.target.id not in self.env:
                    self._set(node.target.id, TENSOR, (node.end_lineno, node.end_col_offset))
            elif t is ast.For or t is ast.comprehension or t is ast.AsyncFor:
                k = self.kind(node.iter)
                pos = (node.iter.end_lineno, node.iter.end_col_offset)
                span = comps.get(id(node))
                if span is not None:  # `[t[0] for t in pair]` does not rebind the loop's `t` after it
                    self.scoped.update(((x.id, pos), span) for x in ast.walk(node.target) if isinstance(x, ast.Name))
                if isinstance(node.target, ast.Name):
                    if k in TORCH or k == NDARRAY:
                        self._set(node.target.id, k, pos)
                    elif isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Name) \
                            and node.iter.func.id == "range":
                        self._set(node.target.id, HOST, pos)  # an int
                    else:  # items of a list/dict/unknown iterable: a new, unknown value each iteration
                        self._set(node.target.id, NDARRAY if k == HOSTSEQ else None, pos)
                else:
                    for t in ast.walk(node.target):
                        if isinstance(t, ast.Name):
                            self._set(t.id, None, pos)
            elif t is ast.NamedExpr:
                self._bind(node.target, node.value, (node.end_lineno, node.end_col_offset))
            elif t is ast.withitem and node.optional_vars is not None:
                e = node.context_expr
                self._bind(node.optional_vars, e, (e.end_lineno, e.end_col_offset))
            elif t is ast.Call and self._attrs is not None:
                self._register_buffer(node)

    def _isinstance_test(self, node: ast.If):
        test, negate = node.test, False
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, negate = test.operand, True
        tests = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and not negate else [test]
        for tst in tests:
            if not (isinstance(tst, ast.Call) and isinstance(tst.func, ast.Name) and tst.func.id == "isinstance"
                    and len(tst.args) == 2 and isinstance(tst.args[0], ast.Name)):
                continue
            k = type_kind(self.mod, tst.args[1])
            if k is None:
                continue
            name = tst.args[0].id
            yes = ((node.body[0].lineno, 0), (node.body[-1].end_lineno, 1 << 30))
            no = ((node.orelse[0].lineno, 0), (node.orelse[-1].end_lineno, 1 << 30)) if node.orelse else None
            if negate:
                yes, no = no, yes
            if yes:
                self.refine.append((name, yes[0], yes[1], k))
            if no and k in TORCH and len(tests) == 1:
                self.refine.append((name, no[0], no[1], HOST))  # not a tensor

    def _early_exits(self, stmts, exits: set):
        """``if isinstance(x, torch.Tensor): return ...`` (no else): the rest of the block sees ``x`` not a tensor.
        ``exits``: the ids of such ifs (found in _build; this finds the blocks they end)."""
        for i, st in enumerate(stmts):
            if isinstance(st, FUNC_DEFS + (ast.ClassDef,)):
                continue
            if id(st) in exits and i + 1 < len(stmts):
                tst = st.test
                rest = ((stmts[i + 1].lineno, 0), (stmts[-1].end_lineno, 1 << 30))
                if isinstance(tst, ast.Attribute) and tst.attr == "is_cuda" and isinstance(st.body[-1], ast.Return):
                    self.host_spans.append(rest)  # `if params[0].is_cuda: return clip_grad_norm_(...)`: a CPU path
                if isinstance(tst, ast.Call) and isinstance(tst.func, ast.Name) and tst.func.id == "isinstance" \
                        and len(tst.args) == 2 and isinstance(tst.args[0], ast.Name) \
                        and type_kind(self.mod, tst.args[1]) in TORCH:
                    self.refine.append((tst.args[0].id, rest[0], rest[1], HOST))
            for field in ("body", "orelse", "finalbody"):
                sub = getattr(st, field, None)
                if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                    self._early_exits(sub, exits)
            for h in getattr(st, "handlers", ()):
                self._early_exits(h.body, exits)

    def _branch(self, node: ast.If):
        for i, block in enumerate((node.body, node.orelse)):
            if block:
                self.branches.append((id(node), i, (block[0].lineno, block[0].col_offset),
                                      (block[-1].end_lineno, block[-1].end_col_offset)))

    def _expr_narrowing(self, node):
        """``a.item() if isinstance(a, T) else a`` and ``isinstance(a, T) and a.item()``: narrowed by position."""
        if isinstance(node, ast.IfExp):
            test, spans = node.test, [(node.body, True), (node.orelse, False)]
        elif isinstance(node.op, ast.And):
            test, spans = node.values[0], [(v, True) for v in node.values[1:]]
        else:  # isinstance(a, T) or a.item(): the later operands run when the test failed
            test, spans = node.values[0], [(v, False) for v in node.values[1:]]
        negate = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        if negate:
            test = test.operand
        if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance"
                and len(test.args) == 2 and isinstance(test.args[0], ast.Name)):
            return
        k = type_kind(self.mod, test.args[1])
        if k is None:
            return
        name = test.args[0].id
        for expr, yes in spans:
            if yes != negate:
                kind = k
            elif k in TORCH:
                kind = HOST  # not a tensor
            else:
                continue
            self.refine.append((name, (expr.lineno, expr.col_offset), (expr.end_lineno, expr.end_col_offset), kind))

    def _path(self, pos) -> tuple:
        """The (If, branch) pairs whose block holds ``pos``, outermost first."""
        p = self._paths.get(pos)
        if p is None:
            p = self._paths[pos] = tuple((b[0], b[1]) for b in self.branches if b[2] <= pos <= b[3])
        return p

    def _reaching(self, binds, pos):
        """The bindings of a name that may reach ``pos``: the last one on every path to it (a binding
        in an enclosing block), and the later ones in branches that end before it (not the other branch
        of an ``if`` that holds ``pos``). Bindings in an ``if``'s both branches kill the ones before it."""
        before = [b for b in binds if b[0] < pos]
        if len(before) <= 1 or not self.branches:
            return before[-1:]
        here = self._path(pos)
        dom = 0
        for i, b in enumerate(before):
            bp = self._path(b[0])
            if here[:len(bp)] == bp:
                dom = i
        out = [before[dom]]
        both: dict = {}
        for b in before[dom + 1:]:
            bp = self._path(b[0])
            n = 0
            while n < len(bp) and n < len(here) and bp[n] == here[n]:
                n += 1
            if n < len(bp) and n < len(here) and bp[n][0] == here[n][0]:
                continue  # the other branch of an if that holds the use
            out.append(b)
            if len(bp) == n + 1:  # directly in a branch of an if that ended before the use
                both.setdefault(bp[n][0], set()).add(bp[n][1])
        complete = [i for i, br in both.items() if br == {0, 1}]
        if complete:  # if/else both assign: what came before the (last such) if does not reach
            start = max(b[2] for b in self.branches if b[0] in complete and b[1] == 0)
            out = [b for b in out if b[0] >= start]
        return out

    def _register_buffer(self, node: ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "register_buffer" and isinstance(f.value, ast.Name) \
                and f.value.id == self.unit.self_name and len(node.args) >= 2:
            name = node.args[0]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                k = self.kind(node.args[1])  # made without device=, it moves with the module's .to(device)
                self._attrs[name.value] = BOOL if k == BOOL or (k == CPU and _bool_dtype(self.mod, node.args[1])) \
                    else TENSOR

    def _set(self, name, kind, pos=(0, 0)):
        self.binds.setdefault(name, []).append((pos, kind))
        self._memo.clear()
        if kind is None:
            return
        old = self.env.get(name)
        if old is None or (old == BOOL and kind == TENSOR) or (old in HOSTISH and kind in DEVICE):
            self.env[name] = kind

    def _unbind_nested(self, target, pos):
        """Bind the names of the tuples nested in ``target`` (``(a, b), c = ...``) to an unknown kind: a use after it
        must not reach back past it (``b = b.cpu()`` read as its own result)."""
        for t in target.elts:
            if isinstance(t, ast.Starred):
                t = t.value
            if isinstance(t, (ast.Tuple, ast.List)):
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        self._set(n.id, None, pos)

    def _bind(self, target, value, pos=(0, 0)):
        if isinstance(target, ast.Name):
            self._set(target.id, self.kind(value), pos)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                for t, v in zip(target.elts, value.elts):
                    self._bind(t, v, pos)
                return
            k = self.kind(value)
            items = self._tuple_returns(value, len(target.elts)) if k != NDARRAY else None  # (a host env's step)
            if items is None and k in TORCH:
                items = self._returned_items(value, len(target.elts), k)
            self._unbind_nested(target, pos)  # `(dist, v), _ = f(x)`: what the inner names hold is not known here
            if items is not None:  # `a, b = self.f(x)` with `def f(...) -> tuple[torch.Tensor, np.ndarray]`
                for t, k in zip(target.elts, items):
                    if isinstance(t, ast.Name):
                        self._set(t.id, BOOL if k in DEVICE and is_mask_name(t.id) else k, pos)
                return
            guess = self._is_env_call(value) and self.kind(value.func.value) is None and not self.mod.uses_gym \
                and not self._declared_receiver(value.func.value)
            if k is None and self.mod.uses_torch and guess:
                k = TENSOR
            if guess and k in DEVICE:  # an env of unknown type: its items are tensors by a guess alone
                self.guessed.update((t.id, pos) for t in target.elts if isinstance(t, ast.Name))
            host = set()
            if k in DEVICE and self._is_env_call(value) and self.kind(value.func.value) is None:
                host = self._numpy_read(target.elts)  # what this code reads with numpy is host data
            if k in TORCH or k == NDARRAY:
                for t in target.elts:
                    if isinstance(t, ast.Starred):
                        t = t.value
                    if isinstance(t, ast.Name) and t.id in host:
                        self._set(t.id, NDARRAY, pos)
                    elif isinstance(t, ast.Name):
                        if _NOT_TENSOR_NAMES.match(t.id):  # a host env's info dict holds host data too
                            self._set(t.id, HOSTSEQ if k == NDARRAY and not torch_gym_envs(self.mod) else HOST, pos)
                        else:
                            self._set(t.id, BOOL if is_mask_name(t.id) and k in DEVICE else k, pos)
            else:
                for t in target.elts:
                    if isinstance(t, ast.Starred):
                        t = t.value
                    if isinstance(t, ast.Name):
                        self._set(t.id, None, pos)
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                and isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str):
            # `info["td"] = x.to("cpu")`: the key of a local dict holds what was last written there (see _item_kind)
            self._set(_item_name(target.value.id, target.slice.value), self.kind(value), pos)
        elif isinstance(target, ast.Attribute) and self._attrs is not None:
            if isinstance(target.value, ast.Name) and target.value.id == self.unit.self_name:
                k = self.kind(value)
                old = self._attrs.get(target.attr)
                branches = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
                if self.unit.cls is not None and (any(isinstance(v, ast.Constant) for v in branches)
                                                  or isinstance(value, ast.Compare)):
                    self.unit.cls.flag_attrs.add(target.attr)  # None, True, 0, `a is not None`: a flag too
                inherited = getattr(self._attrs, "inherited", ())
                if k in HOSTISH and target.attr in inherited:
                    # the class's own code keeps it on the host (a CPU env's `self.actions = torch.zeros(n)`), where a
                    # base's fallback (`if self.actions is None: self.actions = torch.zeros(n, device=d)`) never runs
                    inherited.discard(target.attr)
                    self._attrs[target.attr] = k
                elif not k:
                    pass
                elif old in DEVICE:  # `else: self.flag = True` does not erase a device mask
                    if k in DEVICE:
                        self._attrs[target.attr] = join_kinds((old, k))
                elif target.attr not in self._attrs or old in (CPU, HOST, None):
                    self._attrs[target.attr] = k

    def _returned_items(self, value, n: int, k: str):
        """The kinds of the items of ``value`` (a tensor kind ``k`` as a whole), a call of project functions every
        ``return`` of which is a tuple display of ``n`` items (``return loss, dict(kl=kl.item())``): a position that
        every return fills with host data is host data, one with a tensor that tensor, the others ``k``."""
        if not isinstance(value, ast.Call) or self.mod.project is None or self.unit.is_module:
            return None
        targets = self.mod.project.resolve_call(self.mod, self.unit, value)
        if not targets or len(targets) > 4:
            return None
        per = [[] for _ in range(n)]
        for u in targets:
            if u.mod is None or not isinstance(u.node, FUNC_DEFS) or u in _ITEMS_OF:
                return None
            rets = [r.value for r in unit_nodes(u) if type(r) is ast.Return]
            if not rets or not all(isinstance(r, ast.Tuple) and len(r.elts) == n
                                   and not any(isinstance(x, ast.Starred) for x in r.elts) for r in rets):
                return None
            _ITEMS_OF.add(u)
            try:
                t = typer_for(u.mod, u)
                for r in rets:
                    for i, x in enumerate(r.elts):
                        per[i].append(t.kind(x))
            finally:
                _ITEMS_OF.discard(u)
        out = []
        for kinds in per:
            j = join_kinds(kinds)
            out.append(j if j is not None and (j in TORCH or all(x is not None for x in kinds)) else k)
        return out

    def _tuple_returns(self, value, n: int):
        """The kinds of the items of ``value``, a call of project functions whose return annotations all say
        ``tuple[A, B, ...]`` with ``n`` items (one list for every function the call may run), else None."""
        if not isinstance(value, ast.Call) or self.mod.project is None or self.unit.is_module:
            return None
        targets = self.mod.project.resolve_call(self.mod, self.unit, value)
        if not targets or len(targets) > 4:
            return None
        got = None
        for u in targets:
            ret = getattr(u.node, "returns", None)
            if ret is None or u.mod is None:
                return None
            m = u.mod
            if isinstance(ret, (ast.Name, ast.Attribute)):
                alias = _type_alias(m, ret)
                if alias is not None:
                    m, ret = alias
            if not (isinstance(ret, ast.Subscript) and (m.qual(ret.value) or "").rsplit(".", 1)[-1] in ("tuple", "Tuple")
                    and isinstance(ret.slice, ast.Tuple) and len(ret.slice.elts) == n
                    and not any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in ret.slice.elts)):
                return None
            kinds = [annotation_kind(m, e) for e in ret.slice.elts]
            if got is not None and kinds != got:
                return None
            got = kinds
        return got

    def name_kind(self, e: ast.Name):
        """The kind of a local name at this use (None: unknown here)."""
        name = e.id
        pos = (e.lineno, e.col_offset)
        binds = self._binds_at(name, pos)
        reach = self._reaching(binds, pos) if binds else []
        if self.refine:
            best = None
            for r in self.refine:
                if r[0] == name and r[1] <= pos <= r[2] and (best is None or r[1] >= best[1]):
                    best = r
            if best is not None and all(b[0] < best[1] for b in reach):
                if best[3] in TORCH and reach and not self._declared(name, reach):
                    # `if isinstance(x, torch.Tensor):` on a value known to be numpy / Python data: dead (not when
                    # only an annotation says so: `seq_length: int` checked for a tensor is one now and then)
                    k = reach[0][1] if len(reach) == 1 else join_kinds(b[1] for b in reach)
                    if k in (NDARRAY, HOST, HOSTSEQ):
                        return k
                    if k == CPU and best[3] == TENSOR:
                        return CPU  # a host tensor is a torch.Tensor: the test says nothing of its device
                return best[3]
            if best is not None and reach:  # rebound inside the narrowed block on some path: the narrowing
                # holds for the value from before it (`else: if c: x = np.array(x)` ... `torch.tensor(x)`)
                return join_kinds(best[3] if b[0] < best[1] else b[1] for b in reach)
        if reach:
            return reach[0][1] if len(reach) == 1 else join_kinds(b[1] for b in reach)
        return self.env.get(name)

    def _host_envs(self) -> set:
        """Dotted receivers this unit calls ``.step(x)`` on with host data ``x`` (a CPU env)."""
        got = self.__dict__.get("_host_env_recvs")
        if got is None:
            self._host_env_recvs = got = set()  # while computing
            for n in unit_nodes(self.unit) if ".step(" in self.mod.text else ():
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "step" \
                        and n.args and (self.kind(n.args[0]) in HOSTISH or self._made_on_host(n.args[0])):
                    got.add(dotted(n.func.value))
            got.discard(None)
        return got

    def made_here(self, e) -> bool:
        """``e``'s kind comes from this unit's own code, or from what every hot call passes its parameter (a hint
        that one call passes a host tensor, another a value of unknown kind, says little of where it lives)."""
        if not isinstance(e, ast.Name) or self.unit.is_module:
            return True
        pos = (e.lineno, e.col_offset)
        if not any(b[0] == (0, 0) for b in self._reaching(self._binds_at(e.id, pos), pos)):
            return True
        return passed_kind(self.mod, self.unit, e.id) is not None  # every hot call passes a known kind

    def _made_on_host(self, e) -> bool:
        """``e`` is read to the host by its own form (``x.item()``, ``x.cpu().numpy()``, ``x.tolist()``, a NumPy
        call), or is a local name every assignment of which is: the action a gym loop steps with, bound further down
        the loop than the ``env.reset()`` above it, which is typed first (``obs, _ = env.reset()`` before
        ``action = policy(obs).item()`` and ``env.step(action)``)."""
        def host(v, mod, unit, deep=True) -> bool:
            if isinstance(v, ast.Call):
                if isinstance(v.func, ast.Attribute) and v.func.attr in ("item", "numpy", "tolist"):
                    return True
                if (mod.qual(v.func) or "").startswith("numpy."):
                    return True
                # a project function or method every return of which reads to the host in its own form (an
                # agent's `select_action` ending in `.cpu().numpy()`)
                targets = mod.project.resolve_call(mod, unit, v) if deep and mod.project is not None \
                    and not unit.is_module else []
                if not targets or len(targets) > 4:
                    return False
                for t in targets:
                    rets = [n.value for n in unit_nodes(t) if type(n) is ast.Return] if t.mod is not None \
                        and isinstance(t.node, FUNC_DEFS) else []
                    if not rets or not all(r is not None and host(r, t.mod, t, False) for r in rets):
                        return False
                return True
            return isinstance(v, ast.Constant) and v.value is not None
        if host(e, self.mod, self.unit):
            return True
        if not isinstance(e, ast.Name) or self.unit.is_module:
            return False
        values = [n.value for n in unit_nodes(self.unit) if type(n) is ast.Assign
                  and any(isinstance(t, ast.Name) and t.id == e.id for t in n.targets)]
        return bool(values) and all(host(v, self.mod, self.unit) for v in values)

    def _binds_at(self, name, pos) -> list:
        """The bindings of ``name`` in scope at ``pos`` (not those of a comprehension that does not hold it)."""
        binds = self.binds.get(name, [])
        if self.scoped and binds:
            out = []
            for b in binds:
                span = self.scoped.get((name, b[0]))
                if span is None:
                    out.append(b)
                elif span[0] <= pos <= span[1]:  # its element (`int(c)` of `[int(c) for c in x]`) comes first
                    out.append((span[0], b[1]))
            binds = sorted(out, key=lambda b: b[0])
        return binds

    def _declared_receiver(self, recv) -> bool:
        """The code says what ``recv`` is: an annotated parameter, or an object of a project class."""
        if self.unit.is_module:
            return False
        if isinstance(recv, ast.Name):
            a = self.unit.node.args
            if any(p.arg == recv.id and p.annotation is not None for p in a.posonlyargs + a.args + a.kwonlyargs):
                return True
        project = self.mod.project
        return project is not None and bool(project.receiver_class(self.mod, self.unit, recv))

    def guessed_flag(self, e) -> bool:
        """``e`` is a local name whose every binding reaching it is typed a tensor by a guess alone (a parameter
        named ``done``, an item of an unknown env's ``step()``, or a parameter that hot calls pass such values)."""
        if not isinstance(e, ast.Name) or not self.guessed:
            return False
        pos = (e.lineno, e.col_offset)
        reach = self._reaching(self._binds_at(e.id, pos), pos)
        return bool(reach) and all((e.id, b[0]) in self.guessed for b in reach)

    def _declared(self, name, reach) -> bool:
        """``name`` reaches here as a parameter whose own annotation gives its kind (not a tensor-or-host union,
        which takes the kind its callers pass)."""
        if self.unit.is_module or not any(b[0] == (0, 0) for b in reach):
            return False
        a = self.unit.node.args
        for p in a.posonlyargs + a.args + a.kwonlyargs:
            if p.arg == name:
                return p.annotation is not None and not mixed_union(self.mod, p.annotation) \
                    and not says_nothing(self.mod, p.annotation)
        return False

    def _lambdas(self) -> dict:
        """Local names bound (once) to a lambda without parameters."""
        lams = self.__dict__.get("_lambda_defs")
        if lams is None:
            lams, seen = {}, set()
            for n in unit_nodes(self.unit) if "lambda" in self.mod.text else ():
                if type(n) is ast.Assign and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                    name = n.targets[0].id
                    v = n.value
                    if name in seen:
                        lams.pop(name, None)
                    elif isinstance(v, ast.Lambda) and not (v.args.args or v.args.posonlyargs or v.args.vararg
                                                             or v.args.kwonlyargs or v.args.kwarg):
                        lams[name] = v
                    seen.add(name)
            self._lambda_defs = lams
        return lams

    def _numpy_read(self, targets) -> set:
        """The names of ``targets`` this unit always reads with numpy, in its straight-line code or an ``if``'s
        test (``if np.isscalar(is_done):``; not inside a branch, which may be the host-env one): host data (a
        device tensor would not go there)."""
        names = {t.value.id if isinstance(t, ast.Starred) and isinstance(t.value, ast.Name) else
                 t.id if isinstance(t, ast.Name) else None for t in targets} - {None}
        reads = self.__dict__.get("_numpy_reads")
        if reads is None:
            reads = set()
            if not self.unit.is_module and ("np." in self.mod.text or "numpy" in self.mod.text):
                self._scan_numpy(self.unit.node.body, reads)
            self._numpy_reads = reads
        return names & reads

    def _scan_numpy(self, stmts, reads: set):
        stmts_left = True
        for st in stmts:
            if not stmts_left:
                return
            if isinstance(st, FUNC_DEFS + (ast.ClassDef,)):
                continue
            if isinstance(st, ast.If) and any(b and isinstance(b[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))
                                              for b in (st.body, st.orelse)):
                parts = [st.test]  # what follows runs on one branch only (`if tensor_env: return ...`)
                stmts_left = False
            elif isinstance(st, (ast.If, ast.While)):
                parts = [st.test]
            elif isinstance(st, (ast.For, ast.AsyncFor)):
                parts = [st.iter]
            elif isinstance(st, (ast.With, ast.AsyncWith)):
                parts = [i.context_expr for i in st.items]
                self._scan_numpy(st.body, reads)
            elif isinstance(st, ast.Try):
                parts = []
                self._scan_numpy(st.body, reads)
            else:
                parts = [st]
            for part in parts:
                for n in ast.walk(part):
                    if isinstance(n, ast.Call):
                        if (self.mod.qual(n.func) or "").startswith("numpy."):
                            reads.update(a.id for a in n.args if isinstance(a, ast.Name))
                        elif isinstance(n.func, ast.Attribute) and n.func.attr == "astype" \
                                and isinstance(n.func.value, ast.Name):
                            reads.add(n.func.value.id)

    def _is_env_call(self, value) -> bool:
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            if value.func.attr in ("step", "reset"):
                recv = dotted(value.func.value) or ""
                return bool(ENV_RECEIVER.search(recv))
        return False

    # -- expressions -------------------------------------------------------------------------
    def kind(self, e) -> str | None:
        key = id(e)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = None  # cycle guard
        k = self._kind(e)
        if k in DEVICE and (self.host_only or self.host_spans and self.on_host_path(e)):
            k = CPU  # a class that pins its device to the CPU computes on the host; so does a CPU-only path
        self._memo[key] = k
        return k

    def on_host_path(self, e) -> bool:
        """``e`` is on a path only host tensors take: after ``if x.is_cuda: return ...`` (see _early_exits)."""
        pos = (getattr(e, "lineno", 0), getattr(e, "col_offset", 0))
        return any(a <= pos <= b for a, b in self.host_spans)

    @property
    def host_only(self) -> bool:
        """The unit is a method of a class that pins its compute device to the host (:func:`cpu_pinned`)."""
        h = self.__dict__.get("_host_only")
        if h is None:
            h = self._host_only = self.unit.cls is not None and cpu_pinned(self.mod, self.unit.cls)
        return h

    def _self_attrs(self):
        cls = self.unit.cls
        if cls is None:
            return {}
        if self._attrs is not None:
            return self._attrs
        return class_attrs(self.mod, cls)

    def _kind(self, e):
        t = type(e)
        if t is ast.Name:
            k = self.name_kind(e) if e.id in self.binds or self.refine else None
            if k is None and e.id not in self.binds and not self.unit.is_module:
                cache = self.mod.__dict__.get("_typers", {})
                p = self.unit.parent
                while k is None and p is not None and not p.is_module:  # closures see the outer locals
                    outer = cache.get(p)
                    k = outer.env.get(e.id) if outer is not None else None
                    p = p.parent
                if k is None:
                    k = module_typer(self.mod).env.get(e.id)
            return k
        if t is ast.Attribute:
            base = e.value
            if isinstance(base, ast.Name) and base.id == self.unit.self_name and self.unit.self_name:
                return self._self_attrs().get(e.attr)
            bk = self.kind(base)
            if bk is None and e.attr in _SPACE_ATTRS and _GYM_SPACE.search(dotted(base) or ""):
                return NDARRAY  # self.action_space.nvec / .low / .high: a gym space's bounds are numpy arrays
            if bk in TORCH:
                if e.attr in _TENSOR_ATTRS:
                    return bk
                return HOST if e.attr in ("shape", "device", "dtype", "ndim", "is_cuda", "requires_grad") else None
            if bk == MJDATA:
                return WARP
            if bk == NDARRAY:
                return HOST if e.attr in ("shape", "ndim", "dtype", "size") else NDARRAY
            return None
        if t is ast.Constant:
            return None if e.value is None else HOST
        if t is ast.ListComp or t is ast.List or t is ast.Tuple:
            items = [e.elt] if t is ast.ListComp else e.elts
            if items and all(self.kind(x) in HOSTISH for x in items):
                return HOSTSEQ
            return HOST
        if t is ast.DictComp or t is ast.Dict:
            values = [e.value] if t is ast.DictComp else [v for v in e.values if v is not None]
            if values and all(self.kind(v) in DEVICE for v in values):
                return TMAP  # legged_gym's episode_sums: `self.episode_sums[key][env_ids] = 0.` writes a tensor
            return HOST
        if t in _HOST_NODES:
            return HOST
        if t is ast.Call:
            return self._call_kind(e)
        if t is ast.BinOp:
            lk, rk = self.kind(e.left), self.kind(e.right)
            if lk in TORCH or rk in TORCH:
                if isinstance(e.op, (ast.BitAnd, ast.BitOr, ast.BitXor)) and BOOL in (lk, rk):
                    return BOOL
                if CPU in (lk, rk) and not (lk in DEVICE or rk in DEVICE):
                    return CPU
                return TENSOR
            if NDARRAY in (lk, rk) and lk in HOSTISH and rk in HOSTISH:
                return NDARRAY
            if lk == HOST and rk == HOST:
                return HOST
            return None
        if t is ast.UnaryOp:
            if isinstance(e.op, ast.Not):
                return None
            return self.kind(e.operand)
        if t is ast.Compare:
            if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in e.ops):
                return None
            kinds = [self.kind(e.left)] + [self.kind(c) for c in e.comparators]
            if any(k in DEVICE for k in kinds):
                return BOOL
            if CPU in kinds:
                return CPU
            if NDARRAY in kinds and all(k in HOSTISH for k in kinds):
                return NDARRAY
            if all(k == HOST for k in kinds):
                return HOST
            return None
        if t is ast.Subscript:
            vk = self.kind(e.value)
            if vk in (HOST, None) and isinstance(e.value, ast.Name) and isinstance(e.slice, ast.Constant) \
                    and isinstance(e.slice.value, str):
                name = _item_name(e.value.id, e.slice.value)
                if name in self.binds:
                    reach = self._reaching(self.binds[name], (e.lineno, e.col_offset))
                    if reach:
                        return join_kinds(b[1] for b in reach)
            if vk in TORCH or vk == NDARRAY:
                return vk
            if vk == HOSTSEQ:
                return NDARRAY  # an item of host data (NDARRAY: its methods stay on the host)
            if vk == TDICT:
                return _tdict_item(e.slice)
            if vk == TMAP:
                name = _key_name(e.slice)
                return BOOL if name is not None and is_mask_name(name) else TENSOR
            return None
        if t is ast.IfExp:
            return self.kind(e.body) or self.kind(e.orelse)
        if t is ast.NamedExpr:
            return self.kind(e.value)
        if t is ast.Await:
            return self.kind(e.value)
        return None

    def _instance_call_kind(self, func):
        """``self.holder()``: calling an object of a project class (``self.holder = TemperatureHolder()``) runs its
        ``forward`` (an ``nn.Module``) or ``__call__``: what that returns."""
        cls = self.mod.project.receiver_class(self.mod, self.unit, func)
        if cls is None or isinstance(cls, list):
            return None
        for name in ("forward", "__call__"):
            u = self.mod.project.method(cls, name)
            if u is not None and u.mod is not None:
                return return_kind(u.mod, u)
        return None

    def _device_dict(self, e) -> bool:
        """``e`` is a dict of keyword arguments that names a device other than the host: ``dict(device=d, ...)``,
        ``{"device": d}``, or a local name / ``self`` attribute assigned one (in any method of the class)."""
        def names_device(v) -> bool:
            if isinstance(v, ast.Call) and dotted(v.func) == "dict":
                dev = [kw.value for kw in v.keywords if kw.arg == "device"]
            elif isinstance(v, ast.Dict):
                dev = [val for key, val in zip(v.keys, v.values)
                       if isinstance(key, ast.Constant) and key.value == "device"]
            else:
                return False
            return bool(dev) and not (isinstance(dev[0], ast.Constant) and dev[0].value in ("cpu", None))

        if names_device(e):
            return True
        if isinstance(e, ast.Name) and not self.unit.is_module:
            return any(names_device(n.value) for n in unit_nodes(self.unit) if type(n) is ast.Assign
                       and any(isinstance(t, ast.Name) and t.id == e.id for t in n.targets))
        if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == self.unit.self_name \
                and self.unit.self_name and self.unit.cls is not None:
            for c in self.mod.class_chain(self.unit.cls):
                for u in c.methods.values():
                    for n in unit_nodes(u):
                        if type(n) is ast.Assign and names_device(n.value) and any(
                                isinstance(t, ast.Attribute) and t.attr == e.attr and isinstance(t.value, ast.Name)
                                and t.value.id == u.self_name for t in n.targets):
                            return True
        return False

    def _device_items(self, e) -> bool:
        """``e`` is a device tensor, or a list built here of items one of which is (``[f(x) for x in xs]``, or a
        local name assigned such a list)."""
        if self.kind(e) in DEVICE:
            return True
        values = [e]
        if isinstance(e, ast.Name) and not self.unit.is_module:
            values = [n.value for n in unit_nodes(self.unit) if type(n) is ast.Assign
                      and any(isinstance(t, ast.Name) and t.id == e.id for t in n.targets)]
        return any(self.kind(x) in DEVICE for v in values for x in _listed(v))

    def _call_kind(self, e: ast.Call):
        k = self._call_kind_of(e)
        if k == CPU and not (self.mod.qual(e.func) or "").startswith("torch.") and any(
                kw.arg == "device" and not (isinstance(kw.value, ast.Constant) and kw.value.value in ("cpu", None))
                for kw in e.keywords):
            # a project converter returning a host tensor unless told where (`safe_to_tensor(x, device=d)` passing
            # its **kwargs to torch.as_tensor): given device=, its result is there
            return TENSOR
        return k

    def _call_kind_of(self, e: ast.Call):
        func = e.func
        q = self.mod.qual(func)
        if q:
            if q.startswith("torch."):
                k = _torch_call_kind(self.mod, q, e)
                if k == CPU and q.rsplit(".", 1)[-1] in _COLLATE and e.args and self._device_items(e.args[0]):
                    return TENSOR  # default_collate(list_of_device_tensors) stacks them on their device
                if k in DEVICE and e.args and not any(kw.arg == "device" for kw in e.keywords):
                    args = [x for a in e.args for x in (a.elts if isinstance(a, (ast.List, ast.Tuple)) else [a])]
                    arg_kinds = [self.kind(a) for a in args]  # torch.cat([a, b]): the listed tensors
                    if CPU in arg_kinds and not any(a in DEVICE for a in arg_kinds):
                        return CPU  # torch.prod(host_tensor) stays on the host
                    if q.rsplit(".", 1)[-1] in _JOINING and e.args and self.kind(e.args[0]) == HOSTSEQ:
                        return CPU  # torch.stack([torch.as_tensor(b) for b in batch]): host items, a host result
                return k
            if q.startswith("warp."):
                name = q[5:]
                if name == "to_torch":
                    return TENSOR
                return WARP if name in _WARP_ARRAY_FUNCS else None
            if q.startswith("mujoco_warp."):
                name = q.rsplit(".", 1)[-1]
                if name in ("make_data", "put_data"):
                    return MJDATA
                if name == "put_model":
                    return MJMODEL
                return None
            if q == "isaacgym.gymtorch.wrap_tensor":
                return TENSOR  # Isaac Gym's simulation state tensors, on the GPU pipeline's device
            if q.startswith(("numpy.", "np.")):
                return NDARRAY
            if q.startswith(("gym.", "gymnasium.")):
                return HOSTENV if q.rsplit(".", 1)[-1] in _GYM_ENV_MAKERS else None
            if q.rsplit(".", 1)[-1] in _TDICT_NAMES:
                return TDICT
        if isinstance(func, ast.Attribute):
            bk = self.kind(func.value)
            m = func.attr
            if m == "type_as" and bk == CPU and len(e.args) == 1:
                # converted to the other tensor's type, and moved to its device: machin's
                # `t.linspace(...).type_as(q_dist)` lives where q_dist does (unknown: it may be on the GPU)
                ok = self.kind(e.args[0])
                return TENSOR if ok in DEVICE else CPU if ok == CPU else None
            if bk == CPU and m == "to" and any(kw.arg is None and self._device_dict(kw.value) for kw in e.keywords):
                return TENSOR  # x.to(**self.tpdv) with `self.tpdv = dict(dtype=torch.float32, device=device)`
            if bk in TORCH and m == "to":
                dev = [a for a in list(e.args[:1]) + [kw.value for kw in e.keywords if kw.arg == "device"]
                       if isinstance(a, ast.Attribute) and a.attr == "device"]
                if dev:  # x.to(y.device): where y lives
                    yk = self.kind(dev[0].value)
                    if yk == CPU and self.made_here(dev[0].value):
                        return CPU
                    if yk in DEVICE:
                        return TENSOR
            if bk in TORCH:
                return _method_kind(bk, m, e)
            if bk == WARP:
                return WARP if m in _WARP_ARRAY_METHODS else None
            if bk == NDARRAY:
                return HOST if m in ("item", "tolist") else NDARRAY
            if bk == TDICT:
                return _tdict_method(m, e)
            if bk == HOSTENV and m in ("step", "reset", "step_wait"):
                return NDARRAY  # a CPU vector env returns numpy arrays
            if bk == TMAP:
                return TENSOR if m in ("get", "pop") and e.args else None
            if bk == HOSTSEQ and m in ("get", "pop"):
                return NDARRAY  # an item of host data (a host env's info.get("action_mask"))
            if bk is not None:
                return None
            if m in _HOST_RESULTS:  # x.cpu(), x.tolist(), x.item(), x.numpy(): host data, whatever x was
                return _HOST_RESULTS[m]
            if m == "to" and e.args and isinstance(e.args[0], ast.Constant) and e.args[0].value == "cpu":
                return CPU
            if self.mod.uses_torch and m in ("step", "reset") and ENV_RECEIVER.search(dotted(func.value) or ""):
                if m == "step" and e.args and self.kind(e.args[0]) in HOSTISH:
                    return NDARRAY  # numpy actions in, numpy observations out (a CPU VecEnv)
                if m == "reset" and dotted(func.value) in self._host_envs() and not torch_gym_envs(self.mod):
                    return NDARRAY  # the env this unit steps with numpy actions resets to numpy too
                if self.mod.uses_gym:
                    return None  # a gym/gymnasium env of unknown type: its step returns numpy unless it is a torch env
                return TENSOR
            # self.method(...) / Class.method(...) in this module: what it returns
            if isinstance(func.value, ast.Name) and func.value.id == self.unit.self_name and self.unit.cls:
                for c in self.mod.class_chain(self.unit.cls):
                    target = c.methods.get(m)
                    if target is not None:
                        return return_kind(self.mod, target)
            # obj.method(...) of a class in another linted module (self.storage = Storage(...)): its annotated
            # return type, else what its returns are; one kind for every method the call may run
            if self.mod.project is not None and not self.unit.is_module:
                targets = self.mod.project.resolve_call(self.mod, self.unit, e)
                if targets and len(targets) <= 4:
                    kinds = {return_kind(t.mod, t) if t.mod is not None else None for t in targets}
                    if len(kinds) == 1 and None not in kinds:
                        return kinds.pop()
                if not targets:
                    k = self._instance_call_kind(func)
                    if k is not None:
                        return k
        elif isinstance(func, ast.Name):
            name = func.id
            if name in self.mod.classes:
                return None
            lam = self._lambdas().get(name)
            if lam is not None:  # zeros = lambda: torch.zeros(n, device=d); zeros(): what its body makes
                return self.kind(lam.body)
            targets = self.mod.functions.get(name)
            if targets:
                return return_kind(self.mod, targets[0])
            if name in _HOST_RESULT_BUILTINS and name not in self.mod.aliases and name not in self.binds:
                return HOST
            if name in _HOST_BUILTINS and name not in self.mod.aliases:
                return None
            if self.mod.project is not None and (name in self.mod.aliases or name in self.mod.rel_imports):
                obj = self.mod.project.symbol(self.mod, name)
                if isinstance(obj, list) and obj:
                    return return_kind(obj[0].mod, obj[0])
        called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if self.mod.uses_torch and q not in ("print",) and not _PREDICATE.match(called) \
                and not _COUNT_CALL.search(called):
            # an unknown callable fed a tensor (a policy, a reward term): assume a tensor comes back
            for a in e.args:
                if self.kind(a) in DEVICE:
                    return TENSOR
        return None


_DTYPE_NAME = re.compile(r"(^|_)(u?int\d*|float\d*|bool|long|half|double|bfloat16|complex\d*|dtype|tc_\w+)$|^(float|int|bool)")
_HOST_FACTORIES = {"zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange", "linspace",
                   "logspace", "eye", "empty_strided", "tril_indices", "triu_indices"}
_HOST_NODES = {ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp, ast.JoinedStr}
_HOST_RESULTS = {"cpu": CPU, "numpy": NDARRAY, "tolist": HOST, "item": HOST}
_HOST_RESULT_BUILTINS = {"len", "str", "repr", "int", "float", "bool", "complex", "isinstance", "issubclass", "hash",
                         "id", "format", "list", "dict", "set", "tuple", "frozenset", "bytes", "chr", "ord",
                         "callable", "hasattr", "range"}
_TDICT_SAME = {"select", "exclude", "clone", "to", "cuda", "detach", "apply", "update", "set", "set_", "copy",
               "contiguous", "unsqueeze", "squeeze", "reshape", "view", "masked_fill", "masked_fill_", "zero_",
               "copy_", "update_", "expand", "flatten", "unflatten", "empty", "rename_key_", "pop", "get_sub_tensordict",
               "to_tensordict", "replace", "filter_non_tensor_data", "data", "float", "double", "half", "split_keys"}
_NEXT_KEYS = {"next", "collector", "info", "params", "agents"}


def _item_name(name: str, key: str) -> str:
    """The binding name of a local dict's constant key (never a Python identifier)."""
    return f"{name}[{key!r}]"


def _key_name(key):
    if isinstance(key, ast.Tuple) and key.elts:
        key = key.elts[-1]
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None


def _tdict_item(key):
    """``td["obs"]`` / ``td["next", "done"]``: a tensor (a mask by its name); ``td["next"]``: a TensorDict."""
    name = _key_name(key)
    if name is None:
        return None
    if name in _NEXT_KEYS:
        return TDICT
    return BOOL if is_mask_name(name) else TENSOR


def _tdict_method(m: str, e: ast.Call):
    if m in ("get", "pop", "get_at", "_get_str", "_get_tuple", "_get_at_str", "_get_at_tuple") and e.args:
        return _tdict_item(e.args[0])
    if m in ("cpu", "numpy", "tolist"):
        return HOST
    if m == "to" and e.args and isinstance(e.args[0], ast.Constant) and e.args[0].value == "cpu":
        return HOST
    if m in _TDICT_SAME:
        return TDICT
    return None


_TORCH_TENSOR_SUBMODULES = ("torch.nn.functional.", "torch.nn.init.", "torch.linalg.", "torch.fft.", "torch.special.",
                            "torch.sparse.", "torch.masked.", "torch.nested.")
_GYM_ENV_MAKERS = {"make", "make_vec", "SyncVectorEnv", "AsyncVectorEnv", "Env", "VectorEnv"}
_PREDICATE = re.compile(r"^_*(is|are|has|have|should|can|was|were)_")  # is_dataclass(x): a Python bool
# a count or a size (`env.get_num_starts(td)`, `count_params(m)`, `batch_size(td)`): a Python int, not a tensor
_COUNT_CALL = re.compile(r"(^|_)(num|count|size|len|length|ndim|numel)(_|$)")
_NON_TENSOR_NAME = re.compile(r"^(is_|are_|get_|set_|has_|use_|_)")


# the legacy typed constructors at torch's top level build host tensors (torch.cuda.FloatTensor is the device one)
_LEGACY_CPU_CONSTRUCTORS = frozenset({"Tensor", "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
                                      "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"})


# torch functions joining a sequence of tensors into one (the first argument)
_JOINING = frozenset({"cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack", "row_stack"})
# torch.utils.data's collation: stacks a list of samples (NumPy arrays, numbers, tensors) into batched tensors
_COLLATE = frozenset({"default_collate", "default_convert"})


def _torch_call_kind(mod, q: str, e: ast.Call):
    name = q.rsplit(".", 1)[-1]
    if name in _COLLATE and q.startswith("torch.utils.data."):
        return CPU  # a batch collated from host samples (see _call_kind_of: device samples stay on the device)
    if q.count(".") > 1 and not q.startswith(_TORCH_TENSOR_SUBMODULES):
        return None  # torch.jit.is_scripting(), torch.cuda.current_stream(), torch._C._foo(), ...
    if q.count(".") == 1 and name in _LEGACY_CPU_CONSTRUCTORS and not mod.sets_default_device:
        return CPU  # torch.FloatTensor(x), torch.Tensor(x): a host tensor; a later .to(device) is the upload
    if name in _TORCH_NON_TENSOR or name[:1].isupper() or _NON_TENSOR_NAME.match(name):
        return None
    if name == "from_numpy":
        return CPU
    return _TORCH_DEVICE_RULES(mod, name, e)


def _bool_dtype(mod, e) -> bool:
    return isinstance(e, ast.Call) and any(kw.arg == "dtype" and mod.qual(kw.value) == "torch.bool"
                                           for kw in e.keywords)


def _TORCH_DEVICE_RULES(mod, name, e):  # noqa: N802
    if name in _BOOL_FUNCS:
        return BOOL
    for kw in e.keywords:
        if kw.arg == "device" and isinstance(kw.value, ast.Constant) and kw.value.value == "cpu":
            return CPU
    if _bool_dtype(mod, e):  # a mask, on the host when made without device= and no default device is set
        if name in _HOST_FACTORIES and not any(kw.arg == "device" for kw in e.keywords) \
                and not mod.sets_default_device:
            return CPU
        return BOOL
    if name in ("tensor", "as_tensor") and not any(kw.arg == "device" for kw in e.keywords):
        return CPU  # default device; a later .to(device) / .cuda() is the host-to-device copy
    if name in _HOST_FACTORIES and not any(kw.arg == "device" for kw in e.keywords) and not mod.sets_default_device:
        return CPU  # a factory without device= allocates on the host (unless the module sets a default device)
    if name in ("where",) and len(e.args) >= 3:
        return TENSOR
    return TENSOR


def _method_kind(base: str, m: str, e: ast.Call):
    if m in _HOST_RESULTS:
        return _HOST_RESULTS[m]
    if m == "astype":  # a NumPy method (torch tensors have none): the value was a NumPy array all along
        return NDARRAY
    if m in _NON_TENSOR_METHODS:
        return HOST if m in ("size", "dim", "ndimension", "numel", "nelement", "element_size", "stride") else None
    if m == "cpu":
        return CPU
    if m in ("cuda",):
        return TENSOR
    if m == "to":
        for a in list(e.args) + [kw.value for kw in e.keywords if kw.arg == "device"]:
            if isinstance(a, ast.Constant) and isinstance(a.value, str):
                return CPU if a.value == "cpu" else TENSOR
            if isinstance(a, ast.Call) and dotted(a.func) in ("torch.device", "device"):
                arg = a.args[0] if a.args else None
                if isinstance(arg, ast.Constant) and arg.value == "cpu":
                    return CPU
                return TENSOR
        if base == CPU and (any(not (isinstance(a, ast.Attribute) and _DTYPE_NAME.search(a.attr)) for a in e.args)
                            or any(kw.arg == "device" and not (isinstance(kw.value, ast.Constant) and kw.value.value
                                                               is None) for kw in e.keywords)):
            # .to(self.device), .to(device=self.device, dtype=...): to the compute device
            return TENSOR
        return base
    if m in ("bool",) or m in _BOOL_FUNCS or m.rstrip("_") in ("eq", "ne", "gt", "ge", "lt", "le", "logical_not"):
        return CPU if base == CPU else BOOL
    if m.endswith("_") and not m.startswith("_"):
        return base
    if base == CPU:
        return CPU
    if base == BOOL and m in ("clone", "detach", "view", "reshape", "flatten", "squeeze", "unsqueeze",
                              "expand", "expand_as", "contiguous", "repeat", "transpose", "permute"):
        return BOOL
    return TENSOR


class _Building:
    """Stands in for the module's typer while it is being built (its own names are not known yet)."""

    env: dict = {}


def module_typer(mod: ModuleInfo) -> Typer:
    """The typer of the module's top-level code (module globals are visible in every function)."""
    t = getattr(mod, "_module_typer", None)
    if t is None:
        mod._module_typer = _Building()
        mod._module_typer = t = Typer(mod, mod.module_unit)
    return t


class _AttrTable(dict):
    """A class's attribute kinds; ``inherited``: those read from its bases that its own code has not assigned yet."""

    inherited: set = frozenset()


def class_attrs(mod: ModuleInfo, cls) -> dict:
    """``self`` attributes of ``cls`` (and its bases, in other linted modules too) that hold tensors/arrays.

    Each class is read in its own module (its imports). A table built while one of its bases was still being
    built (a base's method typed a subclass's) lacks the base's attributes: it is returned, not kept."""
    if cls.attrs is not None:
        return cls.attrs
    if cls.building:
        return {}
    mod = cls.mod or mod
    cls.building = True
    attrs = _AttrTable()
    complete = True
    for base in reversed(mod.class_chain(cls)[1:]):
        if base.building:
            complete = False
            continue
        attrs.update(class_attrs(base.mod or mod, base))
    attrs.inherited = set(attrs)
    for st in cls.node.body:  # class-level annotations: obs_buf: torch.Tensor
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
            k = annotation_kind(mod, st.annotation)
            if k:
                attrs[st.target.id] = k
            if k in DEVICE and optional(mod, st.annotation):
                cls.flag_attrs.add(st.target.id)  # logstd: Optional[torch.Tensor]
    methods = [u for u in cls.methods.values()]
    methods.sort(key=lambda u: (u.name != "__init__", u.lineno))
    typers = mod.__dict__.setdefault("_typers", {})
    built = []
    for unit in methods:
        if unit.self_name and not unit.kernel:
            built.append((unit, Typer(mod, unit, building_attrs=attrs)))
    cls.building = False
    if not complete:
        return attrs
    cls.attrs = attrs
    holder = _holder(mod)
    # the callers' kinds of the methods' parameters, once the hot callers are known (an annotated `ids: Tensor` that
    # every hot call passes `ids.cpu()` is a host tensor): the typers built above did not read them
    hinted = param_hints(mod) if "_callers" in holder.__dict__ else holder.__dict__.get("_param_hints") or {}
    for unit, t in built:  # reuse them: from now on they read the finished attribute table
        if unit in hinted:
            continue  # its parameters have call-site kinds this build did not use
        t._attrs = None
        t._memo.clear()
        typers.setdefault(unit, t)
    return attrs


def _cpu_device(mod: ModuleInfo, e) -> bool:
    """``"cpu"`` or ``torch.device("cpu")``."""
    if isinstance(e, ast.Constant):
        return e.value == "cpu"
    return isinstance(e, ast.Call) and mod.qual(e.func) == "torch.device" and len(e.args) == 1 \
        and isinstance(e.args[0], ast.Constant) and e.args[0].value == "cpu"


_SELF_DEVICE = re.compile(r"self\.device\s*(:[^=\n]*)?=[^=]")


def _own_device(mod: ModuleInfo, cls):
    """What ``cls``'s own code assigns to ``self.device``: None (nothing), "cpu" (only the host), "other"."""
    got = cls.__dict__.get("_own_device", False)
    if got is not False:
        return got
    got = None
    cmod = cls.mod or mod
    lines = cmod.__dict__.get("_lines")
    if lines is None:
        lines = cmod._lines = cmod.text.splitlines()
    if _SELF_DEVICE.search("\n".join(lines[cls.node.lineno - 1:cls.node.end_lineno])):
        for n in ast.walk(cls.node):
            if isinstance(n, (ast.Assign, ast.AnnAssign)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                if any(isinstance(t, ast.Attribute) and t.attr == "device" and isinstance(t.value, ast.Name)
                       and t.value.id == "self" for t in targets):
                    if n.value is None or not _cpu_device(cmod, n.value):
                        got = "other"
                        break
                    got = "cpu"
    cls._own_device = got
    return got


def cpu_pinned(mod: ModuleInfo, cls) -> bool:
    """``cls`` pins its compute device to the host: every ``self.device = ...`` in it, its project bases and
    subclasses assigns ``torch.device("cpu")`` / ``"cpu"`` (a Hogwild agent on a shared CPU model: pfrl's A3C),
    and there is at least one. Its tensors are host tensors, whatever its model returns."""
    got = cls.__dict__.get("_cpu_pinned")
    if got is None:
        project = mod.project
        classes = mod.class_chain(cls) + (project.subclasses(cls) if project is not None else [])
        own = {_own_device(mod, c) for c in classes}
        got = cls._cpu_pinned = "cpu" in own and "other" not in own
    return got


def return_kind(mod: ModuleInfo, unit: Unit) -> str | None:
    cache = mod._return_kinds
    if unit in cache:
        return cache[unit]
    cache[unit] = None  # recursion guard
    if unit.kernel or not isinstance(unit.node, FUNC_DEFS):
        return None
    k = annotation_kind(mod, unit.node.returns)
    if k in DEVICE and mixed_union(mod, unit.node.returns):
        cache[unit] = None  # `-> bool | np.ndarray | Tensor`: what comes back depends on what went in
        return None
    if k == TENSOR and _returns_host_tensors(mod, unit):
        k = CPU  # `-> th.Tensor` says a tensor, not where: every return is a host tensor (`th.as_tensor(array)`)
    if k is None:
        typer = typer_for(mod, unit)
        for node in unit_nodes(unit):
            if isinstance(node, ast.Return) and node.value is not None:
                v = node.value
                vals = v.elts if isinstance(v, ast.Tuple) else [v]
                for x in vals:
                    kk = typer.kind(x)
                    if kk in TORCH or kk == WARP:
                        k = kk if k is None or k == BOOL else k
                if k == TENSOR:
                    break
    cache[unit] = k
    return k


def _returns_host_tensors(mod: ModuleInfo, unit: Unit) -> bool:
    """Every ``return`` of ``unit`` gives a tensor that a torch factory made on the host (``th.as_tensor(array)``,
    ``torch.ones(n, dtype=torch.bool)`` without ``device=``), directly or through a local name bound only to such
    calls. Read from the code's shape alone, not from other functions' kinds: this runs while return kinds and the
    callers' parameter kinds are being worked out."""
    def host_call(e) -> bool:
        if not isinstance(e, ast.Call):
            return False
        q = mod.qual(e.func) or ""
        if q.startswith("torch."):
            return _torch_call_kind(mod, q, e) == CPU
        return isinstance(e.func, ast.Attribute) and e.func.attr == "cpu" and not e.args

    nodes = unit_nodes(unit)
    binds: dict = {}  # local name -> [values bound to it], None for a binding of another form
    for n in nodes:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            binds.setdefault(n.targets[0].id, []).append(n.value)
        elif isinstance(n, (ast.Assign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.withitem, ast.NamedExpr,
                            ast.comprehension)):
            targets = n.targets if isinstance(n, ast.Assign) else [getattr(n, "target", None) or
                                                                   getattr(n, "optional_vars", None)]
            for t in targets:
                for x in ast.walk(t) if t is not None else ():
                    if isinstance(x, ast.Name):
                        binds.setdefault(x.id, []).append(None)
    seen = False
    for n in nodes:
        if isinstance(n, ast.Return):
            v = n.value
            if isinstance(v, ast.Name):
                vals = binds.get(v.id)
                if not vals or not all(host_call(x) for x in vals):
                    return False
            elif not host_call(v):
                return False
            seen = True
    return seen


def typer_for(mod: ModuleInfo, unit: Unit) -> Typer:
    """The (cached) typer of ``unit``. A method's typer is kept only once its class's attribute table is
    complete: one built while a base class is still being built would keep what it bound from the partial
    table (a loop over ``self.rnn_states`` binding an unknown item)."""
    cache = mod.__dict__.setdefault("_typers", {})
    t = cache.get(unit)
    if t is None:
        if unit.is_module:
            t = module_typer(mod)
        else:
            if unit.cls is not None:
                class_attrs(mod, unit.cls)  # may build and cache this typer itself
                t = cache.get(unit)
                if t is not None:
                    return t
            t = Typer(mod, unit)
            if unit.cls is not None and unit.cls.attrs is None:
                return t  # a base is still being built
        cache[unit] = t
    return t


def _holder(mod: ModuleInfo):
    return mod.project if mod.project is not None else mod


def param_hints(mod: ModuleInfo) -> dict:
    """Kinds of unannotated parameters, from what the hot code passes them (across the linted files):
    ``self._reward_height(self.base_pos)`` makes ``_reward_height``'s parameter a tensor."""
    holder = _holder(mod)
    hints = holder.__dict__.get("_param_hints")
    if hints is not None:
        return hints
    from perfkit.lint.hotpaths import resolve_call

    holder._param_hints = hints = {}  # while computing: no hints (first-pass typers)
    seen: dict = {}  # callee -> {parameter: {kinds passed}}: joined once all are known, in no order
    unknown: dict = {}  # callee -> {parameters some hot call passes a value of unknown kind}
    holder._param_unknown = unknown
    holder._passes_device = given_device = set()  # callees some hot call passes `device=`
    guessed: dict = {}  # callee -> {parameter: every hot call passes a value typed by a guess alone}
    moved: dict = {}  # callee -> {parameter: every hot call passes `x.cpu()` / `x.to("cpu")`}
    # in source order, not the set's (hash/address) order: the typers built on the way are cached
    callers = sorted(holder.__dict__.get("_callers", ()),
                     key=lambda u: (u.mod.path if u.mod is not None else "", u.lineno, u.qualname))
    for unit in callers:
        if unit.kernel or unit.mod is None:
            continue
        umod = unit.mod
        t = Typer(umod, unit)
        for node in unit_nodes(unit):
            if not isinstance(node, ast.Call) or not (node.args or node.keywords):
                continue
            for callee in resolve_call(umod, unit, node):
                if callee.kernel or not isinstance(callee.node, FUNC_DEFS):
                    continue
                if callee is unit and not (isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                                           and node.func.value.id == unit.self_name):
                    continue  # a wrapper's `self.venv.step_async(actions)` calls the wrapped env's, not itself
                if any(kw.arg == "device" for kw in node.keywords):
                    given_device.add(callee)
                args = callee.node.args
                params = [a.arg for a in args.posonlyargs + args.args]
                offset = 1 if callee.self_name and isinstance(node.func, ast.Attribute) else 0
                got = []
                for i, a in enumerate(node.args):
                    if isinstance(a, ast.Starred) or i + offset >= len(params):
                        break
                    got.append((params[i + offset], a))
                named = set(params) | {a.arg for a in args.kwonlyargs}
                got += [(kw.arg, kw.value) for kw in node.keywords if kw.arg in named]
                for name, value in got:
                    k = t.kind(value)
                    if k in TORCH or k == WARP or k in HOSTISH:
                        seen.setdefault(callee, {}).setdefault(name, set()).add(k)
                        g = guessed.setdefault(callee, {})
                        g[name] = g.get(name, True) and t.guessed_flag(value)
                        c = moved.setdefault(callee, {})
                        c[name] = c.get(name, True) and _moved_to_host(value)
                    else:
                        unknown.setdefault(callee, set()).add(name)
    for callee, params in seen.items():
        hints[callee] = {name: join_kinds(kinds) for name, kinds in params.items()}
    holder._param_guessed = {c: {n for n, g in ps.items() if g} for c, ps in guessed.items()}
    holder._passes_cpu = {c: {n for n, g in ps.items() if g} for c, ps in moved.items()}
    for unit in hints:  # first-pass typers of these units are stale
        if unit.mod is not None:
            unit.mod.__dict__.get("_typers", {}).pop(unit, None)
            unit.mod._return_kinds.clear()
    return hints


def _moved_to_host(e) -> bool:
    """``x.cpu()`` / ``x[i:j].cpu()`` / ``x.to("cpu")``: a tensor the caller copies to the host itself."""
    if not (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute)):
        return False
    if e.func.attr == "cpu" and not e.args:
        return True
    return e.func.attr == "to" and bool(e.args) and isinstance(e.args[0], ast.Constant) and e.args[0].value == "cpu"


def passed_device(mod: ModuleInfo, unit: Unit) -> bool:
    """Some hot call of ``unit`` passes it ``device=`` (which its ``**kwargs`` may hand on to a torch factory)."""
    param_hints(mod)
    return unit in _holder(mod).__dict__.get("_passes_device", ())


def passed_kind(mod: ModuleInfo, unit: Unit, name: str) -> str | None:
    """The kind every hot call of ``unit`` passes its parameter ``name`` (None where one passes a value of unknown
    kind, or none is known)."""
    if name in _holder(mod).__dict__.get("_param_unknown", {}).get(unit, ()):
        return None
    return param_hints(mod).get(unit, {}).get(name)


def join_kinds(kinds) -> str | None:
    """One kind for a value that may be any of ``kinds`` (a parameter passed several, a name assigned in
    several branches): a device tensor wins (the sync happens on that path), a mask only when every device
    kind is a mask; host kinds that disagree -> host (a host tensor, else numpy, else Python data); any
    unknown -> unknown. Independent of the order."""
    kinds = set(kinds)
    dev = kinds & DEVICE
    if dev:
        return BOOL if dev == {BOOL} else TENSOR
    if len(kinds) == 1:
        return next(iter(kinds))
    if kinds <= HOSTISH:  # host data either way (a numpy mask here, a list there): never a sync
        return CPU if CPU in kinds else NDARRAY if NDARRAY in kinds else HOST
    return None

"""PK2xx: allocations on hot paths (new tensors through the CUDA caching allocator each step)."""

from __future__ import annotations

import ast
import re

from perfkit.lint.infer import CPU, DEVICE
from perfkit.lint.modinfo import dotted, unit_nodes
from perfkit.lint.registry import Rule, check, register
from perfkit.lint.rules.common import kwarg, last_name, receiver_is_module

_COUNTER = re.compile(r"(count|counter|step|steps|iter|iters|iteration|calls|_n|^n)$", re.I)

register(Rule(
    id="PK201", name="tensor-factory", category="alloc",
    summary="tensor factories (`torch.zeros/empty/ones/full/arange/rand*/eye/linspace`, `x.new_*`) on a hot path",
    message="{what} allocates a new tensor on every call; preallocate the buffer in `__init__` and refill it in place "
    "(`buf.zero_()`, `buf.fill_(v)`, `buf.normal_()`, `torch.arange(n, out=buf)`)",
    rationale="Each factory call goes through the CUDA caching allocator and launches a fill kernel; in a step loop "
    "that is per-step overhead, memory churn, and an obstacle to CUDA-graph capture.",
    fix="Allocate once in `__init__`; in the hot path write into the buffer in place or pass `out=`.",
    bad="noise = torch.randn(self.num_envs, self.act_dim, device=self.device)",
    good="self.noise.normal_()  # self.noise allocated in __init__",
))
register(Rule(
    id="PK202", name="clone-or-like", category="alloc",
    summary="`clone()` and `*_like` factories (`zeros_like`, `empty_like`, ...) on a hot path",
    message="{what} allocates a copy on every call; copy into a preallocated buffer with `buf.copy_(x)` "
    "(or `buf.zero_()`) instead",
    rationale="`clone()` and the `*_like` factories allocate a tensor of the same shape each call.",
    fix="Keep a buffer from `__init__` and `buf.copy_(x)` / `buf.zero_()` into it.",
    bad="self.prev_actions = actions.clone()",
    good="self.prev_actions.copy_(actions)",
))
register(Rule(
    id="PK203", name="rebind-state-buffer", category="alloc",
    summary="an out-of-place op that rebinds a tensor state buffer (`self.x = self.x + y`)",
    message="rebinding `self.{attr}` to the result of an out-of-place op allocates a new tensor every call; update the "
    "buffer in place (`self.{attr}.add_(...)`, `+=`, `.copy_(...)`, or `out=self.{attr}`)",
    rationale="Assigning a fresh result to a state buffer allocates, drops the old buffer, and breaks any view or "
    "CUDA graph that captured the old storage.",
    fix="Use the in-place form: `self.x += y`, `self.x.mul_(g)`, `torch.clamp(self.x, lo, hi, out=self.x)`, "
    "`self.x.copy_(expr)`.",
    bad="self.episode_len = self.episode_len + 1",
    good="self.episode_len += 1",
))

register(Rule(
    id="PK204", name="warp-alloc", category="alloc",
    summary="Warp allocations (`wp.empty/zeros/ones/full/clone/array/*_like`) on a hot path, outside graph capture",
    message="{what} allocates a Warp array on every call (and `wp.array(host_data)` also copies it to the device); "
            "preallocate it in `__init__` and refill it in place (`arr.zero_()`, `wp.copy(arr, src)`, a kernel)",
    rationale="Each Warp allocation goes through Warp's allocator (a CUDA allocation, or a pool's, per call); "
              "arrays built from host data add a blocking host-to-device copy. Inside a step loop that is per-step "
              "overhead, and it keeps the step out of a CUDA graph, whose buffers must stay put.",
    fix="Allocate once in `__init__`; per step, write into the array with `arr.zero_()`, `arr.fill_(v)`, "
        "`wp.copy(dst, src)` or a kernel. Allocations inside `wp.ScopedCapture` are recorded once, not repeated.",
    bad="contacts = wp.zeros(self.num_envs, dtype=wp.vec3)",
    good="self.contacts.zero_()  # allocated once in __init__",
))

_WARP_ALLOCS = {"empty", "zeros", "ones", "full", "clone", "array", "empty_like", "zeros_like", "ones_like",
                "full_like", "from_numpy", "array1d", "array2d", "array3d", "array4d"}
_FACTORIES = {"zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange", "range",
              "linspace", "logspace", "eye", "empty_strided", "normal", "bernoulli", "multinomial", "poisson",
              "tril_indices", "triu_indices"}
_LIKE = {"zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like", "clone"}
_NEW = {"new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"}
# methods returning views or working in place: rebinding to them allocates nothing
_VIEWS = {"view", "view_as", "reshape", "reshape_as", "unsqueeze", "squeeze", "transpose", "permute", "expand",
          "expand_as", "narrow", "select", "detach", "t", "unflatten", "as_strided", "diagonal", "unbind", "split",
          "chunk", "movedim", "swapaxes", "contiguous", "type_as", "to", "cuda"}


_DIST_PARAM = re.compile(r"^_*(action_)?(mean|means|mu|std|stds|stddev|sigma|log_std|logstd|var|loc|scale|logits|"
                         r"probs|alpha|beta|concentration\w*|distribution|dist)$")
_INIT_FLAG = re.compile(r"(init|initialized|initialised|built|ready|setup|allocated|first|started|warm|"
                        r"compiled|captured|cache|cached)\w*$", re.I)


def _assigned(body) -> set:
    """Dotted names the statements assign (``self.buf = ...``, ``buf = ...``)."""
    out = set()
    for st in body:
        for n in ast.walk(st):
            if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    for x in ast.walk(t):
                        d = dotted(x)
                        if d:
                            out.add(d)
    return out


def _is_init_not(operand, body) -> bool:
    """``if not X:`` guards a first-call initialisation only when the block sets X up (assigns it, or the
    attribute a ``hasattr`` asks for) or X is an init flag (``self._initialized``); ``if not cfg.fast:``
    around a per-step allocation is not one."""
    if isinstance(operand, ast.Call) and getattr(operand.func, "id", "") in ("hasattr", "getattr") and \
            len(operand.args) >= 2 and isinstance(operand.args[1], ast.Constant):
        obj = dotted(operand.args[0])
        return obj is not None and f"{obj}.{operand.args[1].value}" in _assigned(body)
    name = dotted(operand)
    if name is None:
        return False
    return bool(_INIT_FLAG.search(name.rsplit(".", 1)[-1])) or name in _assigned(body)


def _is_lazy_test(test, body=()) -> bool:
    """``x is None``, ``not x`` (see _is_init_not), ``len(state) == 0``, ``"k" not in state``: a first-call
    initialisation guard of the block ``body``."""
    if isinstance(test, ast.BoolOp):
        return any(_is_lazy_test(v, body) for v in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _is_init_not(test.operand, body)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, right = test.ops[0], test.comparators[0]
        if isinstance(op, (ast.Is, ast.NotIn)):
            return isinstance(op, ast.NotIn) or (isinstance(right, ast.Constant) and right.value is None)
        if isinstance(op, ast.Eq) and isinstance(right, ast.Constant) and right.value == 0:
            left = test.left
            if isinstance(left, ast.Call):
                return getattr(left.func, "id", "") == "len"
            return _COUNTER.search(last_name(left) or "") is not None  # step_count == 0: the first call
    return False


def _is_lazy_else(test) -> bool:
    """``if x is not None: ... else: <first call>``."""
    return isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot) and \
        isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None


def _lazy_spans(ctx) -> list:
    cache = ctx.mod.__dict__.setdefault("_pk2_lazy", {})
    spans = cache.get(ctx.unit)
    if spans is None:
        spans = cache[ctx.unit] = [(n.body[0].lineno, n.body[-1].end_lineno) for n in unit_nodes(ctx.unit)
                                   if isinstance(n, ast.If) and _is_lazy_test(n.test, n.body)] + \
                                  [(n.orelse[0].lineno, n.orelse[-1].end_lineno) for n in unit_nodes(ctx.unit)
                                   if isinstance(n, ast.If) and n.orelse and _is_lazy_else(n.test)]
    return spans


def _lazy_init(ctx, node) -> bool:
    spans = _lazy_spans(ctx)
    return bool(spans) and any(a <= node.lineno <= b for a, b in spans)


@check(ast.Call)
def factories(ctx, node: ast.Call):
    if _lazy_init(ctx, node):
        return  # allocated once, on first use
    f = node.func
    q = ctx.qual(f)
    if q and q.startswith("torch."):
        name = q[6:]
        if "." in name:
            return
        if kwarg(node, "out") is not None:
            return
        if name in _FACTORIES:
            if ctx.kind(node) == CPU:
                return  # host memory, not the CUDA allocator
            ctx.report("PK201", node, what=f"`torch.{name}()`")
        elif name in _LIKE:
            ctx.report("PK202", node, what=f"`torch.{name}()`")
    elif isinstance(f, ast.Attribute) and f.attr in ("clone",) + tuple(_NEW):
        k = ctx.kind(f.value)
        if k in DEVICE:
            if f.attr == "clone":
                ctx.report("PK202", node, what="`.clone()`")
            else:
                ctx.report("PK201", node, what=f"`.{f.attr}()`")
        elif k is None and f.attr == "clone" and ctx.mod.uses_torch and not receiver_is_module(ctx, f):
            # a receiver of unknown type (a wrapped env's reward): `.clone()` is torch's, numpy's is `.copy()`
            ctx.report("PK202", node, what="`.clone()`", confidence="medium")


def _allocating_value(ctx, value) -> bool:
    if isinstance(value, (ast.BinOp, ast.UnaryOp)):
        return ctx.kind(value) in DEVICE
    if isinstance(value, ast.Call):
        f = value.func
        if kwarg(value, "out") is not None:
            return False
        q = ctx.qual(f)
        if q and q.startswith("torch."):
            name = q.rsplit(".", 1)[-1]
            if name in _FACTORIES or name in _LIKE or name in ("tensor", "as_tensor", "from_numpy"):
                return False  # PK201/PK202/PK109 say it better
            return ctx.kind(value) in DEVICE
        if isinstance(f, ast.Attribute) and ctx.kind(f.value) in DEVICE:
            m = f.attr
            if m.endswith("_") or m in _VIEWS or m in _NEW or m == "clone":
                return False
            return ctx.kind(value) in DEVICE
    return False


@check(ast.Assign)
def rebind_buffers(ctx, node: ast.Assign):
    if len(node.targets) != 1 or ctx.unit.cls is None:
        return
    t = node.targets[0]
    if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == ctx.unit.self_name):
        return
    if ctx.kind(t) not in DEVICE:
        return
    if _DIST_PARAM.match(t.attr) and not any(dotted(n) == f"{t.value.id}.{t.attr}" for n in ast.walk(node.value)):
        return  # a distribution's parameters made by this forward pass: its output, not a state buffer
    if _allocating_value(ctx, node.value) and not _lazy_init(ctx, node):
        ctx.report("PK203", node, attr=t.attr)


def _captured_spans(ctx) -> list:
    cache = ctx.mod.__dict__.setdefault("_pk2_capture", {})
    spans = cache.get(ctx.unit)
    if spans is None:
        spans = cache[ctx.unit] = [
            (n.body[0].lineno, n.end_lineno) for n in unit_nodes(ctx.unit) if isinstance(n, (ast.With, ast.AsyncWith))
            and any((ctx.qual(i.context_expr.func if isinstance(i.context_expr, ast.Call) else i.context_expr) or "")
                    in ("warp.ScopedCapture", "torch.cuda.graph") for i in n.items)]
    return spans


@check(ast.Call)
def warp_allocs(ctx, node: ast.Call):
    q = ctx.qual(node.func)
    if not q or not q.startswith("warp.") or q[5:] not in _WARP_ALLOCS:
        return
    if q == "warp.array" and (kwarg(node, "ptr") is not None or kwarg(node, "capacity") is not None):
        return  # wraps existing memory
    if _lazy_init(ctx, node) or any(a <= node.lineno <= b for a, b in _captured_spans(ctx)):
        return
    ctx.report("PK204", node, what=f"`wp.{q[5:]}()`")

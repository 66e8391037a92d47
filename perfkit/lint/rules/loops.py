"""PK3xx: Python loops over environments on hot paths (n_envs times the kernel launches).

A loop is reported only when its body launches device work per iteration *with the loop variable*:
indexes a device tensor with it, or passes it to a tensor op. Loops over seeds, agents, action
heads, RNN-state tuples, numpy arrays or CPU envs (sequential by design) stay quiet."""

from __future__ import annotations

import ast
import re

from perfkit.lint.infer import DEVICE, WARP
from perfkit.lint.modinfo import unit_nodes
from perfkit.lint.registry import Rule, check, register
from perfkit.lint.rules.common import is_builtin, last_name

register(Rule(
    id="PK301", name="range-over-envs", category="loop",
    summary="`for i in range(num_envs)` (or `range(len(envs))`, `range(x.shape[0])`) on a hot path",
    message="a Python loop over {what} launches the loop body's kernels once per env; replace it with one batched "
    "tensor op over the env dimension (index with tensors, `torch.where`, broadcasting)",
    rationale="Each iteration launches its own small kernels (and often syncs); cost grows linearly with the number "
    "of environments while one batched op costs about the same for 1 or 10 000 envs.",
    fix="Vectorize over the env dimension: broadcasting, advanced indexing with an index tensor, `torch.where`, "
    "`scatter_`/`index_put_`, or a Warp kernel with `dim=num_envs`.",
    bad="for i in range(self.num_envs):\n    self.rew[i] = -self.pos[i].norm()",
    good="self.rew.copy_(-self.pos.norm(dim=-1))",
))
register(Rule(
    id="PK302", name="loop-over-env-container", category="loop",
    summary="iterating a per-env container (`for env in self.envs`, `for env_id in env_ids`) on a hot path",
    message="iterating {what} steps environments one at a time; keep env state in batched tensors and operate on all "
    "envs at once (index tensors / masks instead of per-env objects)",
    rationale="A list of per-env objects forces one Python iteration (and its kernel launches) per env.",
    fix="Store env state as batched tensors with a leading env dimension; express per-env logic with masks and "
    "index tensors.",
    bad="for env_id in env_ids:\n    self.pos[env_id] = self.init_pos[env_id]",
    good="self.pos[env_ids] = self.init_pos[env_ids]",
))
register(Rule(
    id="PK303", name="loop-over-tensor", category="loop",
    summary="iterating a tensor row by row (`for row in t`, `enumerate(t)`, `zip(t, ...)`) on a hot path",
    message="iterating a tensor makes one indexing op per row (and usually a sync per row); use a batched op over the "
    "first dimension instead",
    rationale="Iterating a tensor yields one view per row; whatever the body does is launched once per row.",
    fix="Operate on the whole tensor with broadcasting / reductions along the first dimension.",
    bad="for a in actions:\n    a.clamp_(-1.0, 1.0)",
    good="actions.clamp_(-1.0, 1.0)",
))

# agents are not envs: a multi-agent env's few agents (or an RL library's learners) share each env
_ENV_COUNT = re.compile(r"^(num_envs\w*|n_?envs?|nenvs|num_env|numenvs|n_?worlds?|nworlds?|num_worlds?|"
                        r"num_robots|n_robots|num_sims)$")
_ENV_CONTAINER = re.compile(r"(^|_)(envs|environments|worlds|sims|simulators|env_ids|env_idx|env_indices|envs_idx|"
                            r"world_ids|robots)$")


def _env_count(ctx, e) -> str | None:
    name = last_name(e)
    if name and _ENV_COUNT.match(name):
        return name
    if isinstance(e, ast.Call) and is_builtin(ctx, e, "len") and e.args:
        a = e.args[0]
        if _ENV_CONTAINER.search(last_name(a) or "-") or ctx.kind(a) in DEVICE:
            return f"len({last_name(a) or '...'})"
    if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Attribute) and e.value.attr == "shape":
        if isinstance(e.slice, ast.Constant) and e.slice.value == 0 and ctx.kind(e.value.value) in DEVICE:
            return f"{last_name(e.value.value) or 'x'}.shape[0]"
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "size" and e.args:
        a = e.args[0]
        if isinstance(a, ast.Constant) and a.value == 0 and ctx.kind(e.func.value) in DEVICE:
            return f"{last_name(e.func.value) or 'x'}.size(0)"
    return None


def _names(target) -> set:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _uses(expr, names) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(expr))


_ON_DEVICE = DEVICE | {WARP}
# views and metadata: no kernel launched
_VIEWS = {"view", "view_as", "reshape", "reshape_as", "transpose", "permute", "unsqueeze", "squeeze", "narrow", "select",
          "expand", "expand_as", "detach", "t", "unbind", "split", "chunk", "movedim", "flatten", "unflatten", "size",
          "dim", "numel", "stride", "data_ptr", "is_contiguous", "requires_grad_", "get_device"}


def _plain_view_read(sub) -> bool:
    """``x[i]`` read: a view, no kernel by itself (what is done with it — ``x[i] = v``, ``x[i] + 1``,
    ``x[i].clamp_()``, ``torch.f(x[i])`` — is caught by the other checks)."""
    return isinstance(sub.ctx, ast.Load) and not isinstance(sub.slice, (ast.Tuple, ast.List))


def _device_work_per_index(ctx, body, names) -> bool:
    """Whether ``body`` (statements or one expression) launches device work that depends on the loop
    variables ``names``: ``x[i]`` of a device tensor, a tensor op taking ``i``, or ``i`` itself a tensor row."""
    if not names:
        return False
    stack = list(body) if isinstance(body, list) else [body]
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, ast.Subscript) and ctx.kind(n.value) in _ON_DEVICE and _uses(n.slice, names) \
                and not _plain_view_read(n):
            return True
        if isinstance(n, ast.Call):
            f = n.func
            args = list(n.args) + [k.value for k in n.keywords]
            view = isinstance(f, ast.Attribute) and f.attr in _VIEWS
            if any(_uses(a, names) for a in args) and not view:
                q = ctx.qual(f) or ""
                if q.startswith(("torch.", "warp.launch")) and ctx.kind(n) in DEVICE | {None}:
                    return True
                if isinstance(f, ast.Attribute) and ctx.kind(f.value) in _ON_DEVICE:
                    return True
            if isinstance(f, ast.Attribute) and not view and _uses(f.value, names) and ctx.kind(f.value) in DEVICE:
                return True  # row.clamp_(...), x[i].clamp_(...): a kernel per index
        if isinstance(n, (ast.BinOp, ast.AugAssign)) and ctx.kind(n.target if isinstance(n, ast.AugAssign) else n) \
                in DEVICE and _uses(n, names):
            return True
        stack.extend(ast.iter_child_nodes(n))
    return False


def _returns_tuple(ctx, call) -> bool:
    """``call`` runs project functions that all return tuple displays (``return q1, q2``): iterating its result walks
    a few tensors, not a tensor's rows. An unresolved method is looked up by name across the project."""
    project = ctx.mod.project
    if not isinstance(call, ast.Call) or project is None or ctx.unit.is_module:
        return False
    targets = project.resolve_call(ctx.mod, ctx.unit, call)
    if not targets and isinstance(call.func, ast.Attribute):
        targets = project.methods.get(call.func.attr, [])
    if not targets or len(targets) > 8:
        return False
    for u in targets:
        rets = [n.value for n in unit_nodes(u) if isinstance(n, ast.Return)]
        if not rets or not all(isinstance(v, ast.Tuple) and len(v.elts) >= 2 for v in rets):
            return False
    return True


def _check_iter(ctx, it, where):
    if isinstance(it, ast.Call) and is_builtin(ctx, it, "range"):
        args = it.args
        if len(args) == 3 and not (isinstance(args[2], ast.Constant) and args[2].value == 1):
            return  # strided: minibatches, not envs
        if args:
            what = _env_count(ctx, args[1] if len(args) >= 2 else args[0])
            if what:
                ctx.report("PK301", where, what=f"`range({what})`")
                return True
        return False
    if isinstance(it, ast.Call) and is_builtin(ctx, it, "enumerate", "zip", "reversed", "sorted", "list"):
        for a in it.args:
            if _check_iter(ctx, a, where):
                return True
        return False
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in ("items", "values", "keys"):
        it = it.func.value
        if ctx.kind(it) in DEVICE:
            return False
    name = last_name(it)
    if name and _ENV_CONTAINER.search(name):
        ctx.report("PK302", where, what=f"`{name}`")
        return True
    if ctx.kind(it) in DEVICE and not _returns_tuple(ctx, it) and not _pieces_along_other_dim(ctx, it):
        ctx.report("PK303", where)
        return True
    return False


# torch functions / tensor methods returning a tuple of pieces along `dim`, and where `dim` sits positionally
_PIECES = {"split": (2, 1), "chunk": (2, 1), "tensor_split": (2, 1), "unbind": (1, 0)}


def _pieces_along_other_dim(ctx, it) -> bool:
    """``torch.split(obs, 1, dim=1)``, ``x.unbind(-1)``, ``x.chunk(3, dim=1)``: a few pieces along a feature
    dimension (one per observation component), not the rows of the env dimension."""
    if not isinstance(it, ast.Call):
        return False
    f = it.func
    q = ctx.qual(f) or ""
    if q.startswith("torch.") and q.rsplit(".", 1)[-1] in _PIECES:
        pos = _PIECES[q.rsplit(".", 1)[-1]][0]
    elif isinstance(f, ast.Attribute) and f.attr in _PIECES and ctx.kind(f.value) in DEVICE:
        pos = _PIECES[f.attr][1]
    else:
        return False
    dim = next((kw.value for kw in it.keywords if kw.arg == "dim"), it.args[pos] if len(it.args) > pos else None)
    if isinstance(dim, ast.UnaryOp) and isinstance(dim.op, ast.USub) and isinstance(dim.operand, ast.Constant):
        return True  # dim=-1: the last dimension, features
    return isinstance(dim, ast.Constant) and isinstance(dim.value, int) and dim.value != 0


class _Probe:
    """Runs _check_iter without reporting: which rule (and message) the loop's iterable would earn."""

    def __init__(self, ctx):
        self.ctx, self.found = ctx, None

    def __getattr__(self, name):
        return getattr(self.ctx, name)

    def report(self, rule_id, node, **fields):
        self.found = (rule_id, node, fields)


# a loop variable that counts time steps: a recursion over a rollout's steps (returns, a reward filter), not envs
_TIME_VAR = re.compile(r"^(t|tt|ts|step|steps|timestep|time_step|time|k_step)$")


def _over_time(ctx, it, target) -> bool:
    """``for t in reversed(range(len(rewards)))`` (a backward recursion: returns, GAE, lambda-returns) or a loop
    variable named like a time step over a tensor's length (``for step in range(rewards.size(0))``): sequential over
    the rollout's steps, which a batched op over envs cannot replace. A count named like envs (``num_envs``) stays a
    loop over envs."""
    if isinstance(it, ast.Call) and is_builtin(ctx, it, "reversed") and it.args and isinstance(it.args[0], ast.Call) \
            and is_builtin(ctx, it.args[0], "range"):
        return True
    if not (isinstance(target, ast.Name) and _TIME_VAR.match(target.id)):
        return False
    if isinstance(it, ast.Call) and is_builtin(ctx, it, "range") and it.args:
        bound = it.args[1] if len(it.args) >= 2 else it.args[0]
        return not _ENV_COUNT.match(last_name(bound) or "")
    return False


def _report_if_per_index(ctx, it, body, target):
    probe = _Probe(ctx)
    _check_iter(probe, it, it)
    if probe.found and _device_work_per_index(ctx, body, _names(target)):
        rule_id, node, fields = probe.found
        if rule_id == "PK301" and _over_time(ctx, it, target):
            return
        ctx.report(rule_id, node, **fields)


@check(ast.For, ast.AsyncFor)
def for_loops(ctx, node):
    _report_if_per_index(ctx, node.iter, node.body, node.target)


_COMPS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


@check(*_COMPS)
def comprehensions(ctx, node):
    elts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
    for gen in node.generators:
        _report_if_per_index(ctx, gen.iter, elts + list(gen.ifs), gen.target)

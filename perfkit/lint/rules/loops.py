"""PK3xx: Python loops over environments on hot paths (n_envs times the kernel launches)."""

from __future__ import annotations

import ast
import re

from perfkit.lint.infer import DEVICE
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
    bad="for a in actions:\n    self.apply(a)",
    good="self.apply_batched(actions)",
))

_ENV_COUNT = re.compile(r"^(num_envs\w*|n_?envs?|nenvs|num_env|numenvs|n_?worlds?|nworlds?|num_worlds?|"
                        r"num_agents|n_agents|num_robots|n_robots|num_sims)$")
_ENV_CONTAINER = re.compile(r"(^|_)(envs|environments|worlds|sims|simulators|env_ids|env_idx|env_indices|envs_idx|"
                            r"world_ids|robots|agents)$")


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
    if ctx.kind(it) in DEVICE:
        ctx.report("PK303", where)
        return True
    return False


@check(ast.For, ast.AsyncFor)
def for_loops(ctx, node):
    _check_iter(ctx, node.iter, node.iter)


@check(ast.comprehension)
def comprehensions(ctx, node):
    _check_iter(ctx, node.iter, node.iter)

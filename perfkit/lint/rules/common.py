"""Small AST helpers shared by the rule families."""

from __future__ import annotations

import ast


def kwarg(call: ast.Call, name: str):
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def is_true(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def last_name(expr) -> str:
    """``self.cfg.num_envs`` -> ``num_envs``; ``envs`` -> ``envs``; else ''."""
    if isinstance(expr, ast.Attribute):
        return expr.attr
    if isinstance(expr, ast.Name):
        return expr.id
    return ""


def is_builtin(ctx, call: ast.Call, *names) -> bool:
    f = call.func
    return isinstance(f, ast.Name) and f.id in names and f.id not in ctx.mod.aliases


def receiver_is_module(ctx, f: ast.Attribute) -> bool:
    """``np.unique`` / ``torch.unique``: the attribute hangs off an imported module, not an object."""
    v = f.value
    while isinstance(v, ast.Attribute):
        v = v.value
    return isinstance(v, ast.Name) and v.id in ctx.mod.aliases

"""PK5xx: stream hazards between Warp and torch when they share memory."""

from __future__ import annotations

import ast

from perfkit.lint.hotpaths import resolve_call
from perfkit.lint.modinfo import unit_nodes
from perfkit.lint.registry import Rule, check, register
from perfkit.lint.rules.common import kwarg

register(Rule(
    id="PK501", name="warp-launch-stream", category="stream",
    summary="a Warp launch on Warp's own stream in a module that shares arrays with torch and runs torch work "
            "on a side stream (`torch.cuda.stream(...)`)",
    message="{what} runs on Warp's current stream while torch works on a side stream and the two share memory: "
            "a race; pass `stream=wp.stream_from_torch()` or wrap it in `with wp.ScopedStream(wp.stream_from_torch()):`",
    rationale="Measured on an H200: torch on its legacy default stream is ordered after a Warp launch on Warp's "
              "(blocking) stream — 1,048,576 of 1,048,576 elements right, twice — because the legacy default stream "
              "waits for blocking streams. Torch's side streams are non-blocking: with torch on one (or Warp on a "
              "non-blocking stream) nothing orders the two, and torch read stale data (811,008 of 1,048,576 right). "
              "So the hazard is reported where the module puts torch work on a side stream.",
    fix="Launch on torch's current stream: `wp.launch(..., stream=wp.stream_from_torch())`, "
        "`wp.capture_launch(g, stream=wp.stream_from_torch())`, or run the block under "
        "`wp.ScopedStream(wp.stream_from_torch())`; or order them with events (`wp.wait_stream`).",
    bad="with torch.cuda.stream(self.side):\n    obs = wp.to_torch(self.qpos) * 2.0\n"
        "wp.launch(integrate, dim=n, inputs=[self.qpos])",
    good="with torch.cuda.stream(self.side):\n    obs = wp.to_torch(self.qpos) * 2.0\n"
         "wp.launch(integrate, dim=n, inputs=[self.qpos], stream=wp.stream_from_torch())",
    hot_only=False, severity="error",
))

_SIDE_STREAM = ("torch.cuda.stream(", "cuda.stream(", "torch.cuda.Stream(", "cuda.Stream(", "torch.cuda.set_stream(",
                "ExternalStream(", "torch.Stream(", "torch.cuda.StreamContext(")
_LAUNCHES = {"warp.launch", "warp.launch_tiled", "warp.capture_launch"}
_MJW_RUNNERS = {"step", "forward", "fwd_position", "fwd_velocity", "fwd_actuation", "fwd_acceleration", "euler",
                "implicit", "rungekutta4", "kinematics", "collision", "reset_data"}
_SCOPES = ("warp.ScopedStream", "warp.ScopedCapture", "warp.context.ScopedStream", "warp.utils.ScopedStream")


def _scoped_units(mod) -> set:
    """Units only ever called inside a ScopedStream/ScopedCapture block (transitively)."""
    cached = getattr(mod, "_pk5_scoped", None)
    if cached is not None:
        return cached
    scoped = set()
    todo = []
    for unit in mod.units:
        for node in unit_nodes(unit):
            if isinstance(node, (ast.With, ast.AsyncWith)) and any(_is_scope(mod, i.context_expr) for i in node.items):
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Call):
                        todo.extend(resolve_call(mod, unit, sub))
    while todo:
        u = todo.pop()
        if u in scoped:
            continue
        scoped.add(u)
        for node in unit_nodes(u):
            if isinstance(node, ast.Call):
                todo.extend(resolve_call(mod, u, node))
    mod._pk5_scoped = scoped
    return scoped


def _scoped_spans(ctx) -> list:
    cache = ctx.mod.__dict__.setdefault("_pk5_spans", {})
    spans = cache.get(ctx.unit)
    if spans is None:
        spans = cache[ctx.unit] = [
            (n.body[0].lineno, n.end_lineno) for n in unit_nodes(ctx.unit)
            if isinstance(n, (ast.With, ast.AsyncWith)) and any(_is_scope(ctx.mod, i.context_expr) for i in n.items)
        ]
    return spans


def _is_scope(mod, expr) -> bool:
    target = expr.func if isinstance(expr, ast.Call) else expr
    return (mod.qual(target) or "") in _SCOPES


@check(ast.Call, everywhere=True)
def warp_launch_stream(ctx, node: ast.Call):
    mod = ctx.mod
    if not mod.shares_torch_warp:
        return
    side = mod.__dict__.get("_pk5_side")
    if side is None:
        side = mod._pk5_side = any(t in mod.text for t in _SIDE_STREAM)
    if not side:
        return  # torch on the legacy default stream is ordered after Warp's blocking stream (measured)
    q = ctx.qual(node.func)
    if not q:
        return
    if q in _LAUNCHES:
        if kwarg(node, "stream") is not None:
            return
        what = f"`wp.{q.split('.')[-1]}`"
    elif q.startswith("mujoco_warp.") and q.split(".")[-1] in _MJW_RUNNERS:
        what = f"`{q.replace('mujoco_warp.', 'mjw.')}`"
    else:
        return
    line = node.lineno
    if any(a <= line <= b for a, b in _scoped_spans(ctx)):
        return
    if "set_stream(" in mod.text:
        return
    if ctx.unit in _scoped_units(mod):
        return
    ctx.report("PK501", node, what=what)

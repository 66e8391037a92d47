"""PK4xx: measurement bugs. These apply everywhere, not only on hot paths.

CUDA work is asynchronous: a host clock read right after launching it measures the launch, not the
work. A sync (or a value read back) between the work and the clock read makes the interval honest.
"""

from __future__ import annotations

import ast
import re

from perfkit.lint.hotpaths import resolve_call
from perfkit.lint.infer import DEVICE, WARP
from perfkit.lint.modinfo import if_tests, unit_nodes
from perfkit.lint.registry import Rule, register, unit_check

register(Rule(
    id="PK401", name="host-clock-without-sync", category="timing",
    summary="a host clock (`time.time()`, `perf_counter()`, `monotonic()`) read after GPU work with no sync in between",
    message="`{clock}()` is read after launching GPU work with no synchronize since: the interval measures kernel "
    "launches, not GPU time; call `torch.cuda.synchronize()` (or `wp.synchronize()`) before reading the clock, "
    "or time with CUDA events",
    rationale="Kernel launches return immediately; the GPU runs them later. Without a sync before the second clock "
    "read, the measured time is the launch overhead (and the real cost leaks into whichever later call "
    "happens to sync).",
    fix="Synchronize right before each clock read that closes an interval, or use "
    "`torch.cuda.Event(enable_timing=True)` pairs and read `elapsed_time` after `end.synchronize()` "
    "(or lazily, once `end.query()` is true). `perfkit profile` does this for you.",
    bad="t0 = time.perf_counter()\nenv.step(actions)\ndt = time.perf_counter() - t0",
    good="torch.cuda.synchronize(); t0 = time.perf_counter()\nenv.step(actions)\n"
         "torch.cuda.synchronize(); dt = time.perf_counter() - t0",
    hot_only=False, severity="error",
))
register(Rule(
    id="PK402", name="elapsed-time-without-sync", category="timing",
    summary="`start.elapsed_time(end)` right after `end.record()` with no `end.synchronize()` / `end.query()` between",
    message="`elapsed_time` needs `{end}` to have completed; call `{end}.synchronize()` first (off the hot path), or "
    "read it lazily once `{end}.query()` is true",
    rationale="`elapsed_time` on an event the GPU has not reached yet raises (or, wrapped in retries, measures "
    "nothing useful).",
    fix="Synchronize the end event before reading, or keep events in a queue and resolve those whose "
    "`query()` is true.",
    bad="end.record()\nms = start.elapsed_time(end)",
    good="end.record()\nend.synchronize()\nms = start.elapsed_time(end)",
    hot_only=False, severity="error",
))

_CLOCKS = {"time.time", "time.perf_counter", "time.monotonic", "time.time_ns", "time.perf_counter_ns",
           "time.monotonic_ns", "timeit.default_timer"}
_CLOCK_TEXT = re.compile(r"\b(time|perf_counter|monotonic|default_timer|time_ns|perf_counter_ns|monotonic_ns|"
                         r"elapsed_time)\s*\(")
_SYNC_ATTRS = {"synchronize", "item", "cpu", "numpy", "tolist", "query"}
_WORK_METHODS = {"step", "forward", "act", "rollout", "backward", "launch", "capture_launch", "simulate", "learn",
                 "train", "update", "collect", "evaluate", "infer", "predict", "replay", "run_step", "train_step",
                 "physics_step", "render"}
_HOST_PREFIX = ("time.", "timeit.", "logging.", "numpy.", "math.", "os.", "sys.", "json.", "random.", "pathlib.",
                "torch.cuda.", "torch.no_grad", "torch.inference_mode",
                "torch.manual_seed", "torch.device", "torch.cuda.current_stream", "torch.cuda.is_available",
                "torch.cuda.memory", "torch.cuda.max_memory", "torch.cuda.reset", "warp.synchronize",
                "warp.Scoped", "warp.config", "warp.init", "warp.get_", "warp.set_", "warp.is_", "tqdm",
                "torch.cuda.graph", "torch.cuda.CUDAGraph", "torch.cuda.Stream", "torch.cuda.stream")


_HOST_RECEIVER = re.compile(r"(^|\.|_)(sched|scheduler|schedulers|lr_scheduler|lr_schedule|schedule|lr|"
                            r"timer|timers|logger|writer|meter|meters|pbar|progress|stats)$", re.I)


def _classify(ctx, call: ast.Call):
    """'clock', 'sync', 'work' (known device work), 'work?' (inferred from a name) or None."""
    f = call.func
    q = ctx.qual(f)
    if q in _CLOCKS:
        return "clock"
    if isinstance(f, ast.Attribute) and f.attr in _SYNC_ATTRS:
        return "sync"
    if isinstance(f, ast.Attribute) and _HOST_RECEIVER.search(_dotted_text(f.value)):
        return None  # a host LR scheduler's .step()/.update(), a logger
    if q and (q.startswith("warp.synchronize") or q == "torch.cuda.synchronize"):
        return "sync"
    if isinstance(f, ast.Name) and f.id in ("float", "int", "bool", "print") and call.args:
        if any(ctx.kind(a) in DEVICE for a in call.args):
            return "sync"
    if q and q.startswith(_HOST_PREFIX):
        return None
    targets = resolve_call(ctx.mod, ctx.unit, call)
    if targets and any(_syncs_inside(ctx, t) for t in targets):
        return "sync"  # a helper like self.sync()
    if q in ("warp.launch", "warp.launch_tiled", "warp.capture_launch", "warp.copy") or (q or "").startswith(
            "mujoco_warp."):
        return "work"
    if q and q.startswith(("torch.", "warp.")):
        return "work" if ctx.kind(call) in (*DEVICE, WARP) else None
    if isinstance(f, ast.Attribute):
        k = ctx.kind(f.value)
        if k in DEVICE or k == WARP:
            return "work"
        if f.attr in _WORK_METHODS:
            return "work?"
    if any(ctx.kind(a) in DEVICE for a in call.args):
        return "work?"
    return None


def _dotted_text(e) -> str:
    parts = []
    while isinstance(e, ast.Attribute):
        parts.append(e.attr)
        e = e.value
    if isinstance(e, ast.Name):
        parts.append(e.id)
    return ".".join(reversed(parts))


def _syncs_inside(ctx, unit, depth: int = 0) -> bool:
    """Whether running ``unit`` waits for the GPU: a synchronize, or a read-back (``.item()``, ``.cpu()``,
    ``.numpy()``, ``.tolist()``), in it or in what it calls (two calls deep, across the linted files)."""
    holder = ctx.mod.project if ctx.mod.project is not None else ctx.mod
    cache = holder.__dict__.setdefault("_pk4_syncs", {})
    if unit in cache:
        return cache[unit]
    cache[unit] = False
    found = False
    cpu_only = _cpu_branches(unit)
    for n in unit_nodes(unit):
        if isinstance(n, ast.Call):
            f = n.func
            q = (unit.mod.qual(f) if unit.mod else ctx.qual(f)) or ""
            if (isinstance(f, ast.Attribute) and f.attr in _SYNC_ATTRS and f.attr != "query") \
                    or q.startswith("warp.synchronize"):
                if any(a <= n.lineno <= b for a, b in cpu_only):
                    continue  # only a CPU env waits here: the GPU path's interval stays unsynchronized
                found = True
                break
    if not found and depth < 2 and unit.mod is not None:
        for n in unit_nodes(unit):
            if isinstance(n, ast.Call) and any(_syncs_inside(ctx, t, depth + 1)
                                               for t in resolve_call(unit.mod, unit, n)):
                found = True
                break
    cache[unit] = found
    return found


_CPU_TEST = re.compile(r"cpu|numpy|ndarray", re.I)
_GPU_TEST = re.compile(r"cuda|gpu", re.I)


def _cpu_branches(unit) -> list:
    """(first, last) lines of the branches of ``unit`` that run only for a CPU env or host data:
    ``if device == "cpu":`` / ``if isinstance(obs, np.ndarray):`` bodies, the ``else`` of ``if ... cuda:``."""
    spans = unit.__dict__.get("_cpu_branches")
    if spans is None:
        spans = []
        for n, test, negated in if_tests(unit):
            text = ast.unparse(test)
            if isinstance(test, ast.Compare) and any(isinstance(op, (ast.NotEq, ast.IsNot)) for op in test.ops):
                negated = not negated
            cpu = bool(_CPU_TEST.search(text)) and not _GPU_TEST.search(text)
            gpu = bool(_GPU_TEST.search(text)) and not _CPU_TEST.search(text)
            if not (cpu or gpu):
                continue
            body_is_cpu = cpu != negated
            branch = n.body if body_is_cpu else n.orelse
            if branch:
                spans.append((branch[0].lineno, branch[-1].end_lineno))
        unit._cpu_branches = spans
    return spans


def _pos(n):
    return (n.end_lineno or n.lineno, n.end_col_offset or 0)


def _candidates(mod) -> set:
    if not (mod.uses_torch or mod.uses_warp):
        return set()
    return mod.units_matching(_CLOCK_TEXT)


def _captured(ctx) -> set:
    """ids of calls inside graph-capture blocks: they record work, they do not run it."""
    out = set()
    for node in unit_nodes(ctx.unit):
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                c = item.context_expr
                q = ctx.qual(c.func if isinstance(c, ast.Call) else c) or ""
                if q in ("warp.ScopedCapture", "torch.cuda.graph", "torch.cuda.graphs.graph"):
                    out.update(id(n) for st in node.body for n in ast.walk(st) if isinstance(n, ast.Call))
    return out


@unit_check(prefilter=_candidates)
def host_clock_intervals(ctx):
    nodes = list(unit_nodes(ctx.unit))
    calls = [n for n in nodes if isinstance(n, ast.Call)]
    if not calls:
        return
    quals = [ctx.qual(c.func) for c in calls]
    has_clock = sum(q in _CLOCKS for q in quals) >= 2
    has_elapsed = any(isinstance(c.func, ast.Attribute) and c.func.attr == "elapsed_time" for c in calls)
    if not (has_clock or has_elapsed):
        return
    # tensor arithmetic launches kernels too: x @ w, x += y
    events = calls + [n for n in nodes if isinstance(n, (ast.BinOp, ast.AugAssign))
                      and ctx.kind(n.target if isinstance(n, ast.AugAssign) else n) in DEVICE]
    events.sort(key=_pos)
    compared = {id(x) for n in nodes if isinstance(n, ast.Compare)
                for x in ast.walk(n) if isinstance(x, ast.Call)}  # deadline checks, not measurements
    closing = _closing_reads(nodes)
    if has_clock:
        started, pending = False, None  # pending: None, "work" (known device work) or "work?" (by name)
        captured = _captured(ctx)
        for c in events:
            if id(c) in captured:
                continue
            kind = _classify(ctx, c) if isinstance(c, ast.Call) else "work"
            if kind == "clock":
                if id(c) in compared:
                    continue
                if started and pending and id(c) in closing:
                    ctx.report("PK401", c, clock=(ctx.qual(c.func) or "time").split(".")[-1],
                               confidence="high" if pending == "work" else "medium")
                started, pending = True, None
            elif kind == "sync":
                pending = None
            elif kind in ("work", "work?") and started and pending != "work":
                pending = kind
    if has_elapsed:
        _elapsed(ctx, sorted(calls, key=_pos))


def _closing_reads(nodes) -> set:
    """ids of clock calls that end an interval: ``clock() - t0`` itself, or ``t1 = clock()`` with ``t1`` later the
    left side of a subtraction (``t1 - t0``). A read that only starts an interval measures nothing yet."""
    minuends, out, assigned = set(), set(), []
    for n in nodes:
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub):
            left = n.left
            if isinstance(left, ast.Call):
                out.add(id(left))
            elif isinstance(left, (ast.Name, ast.Attribute)):
                minuends.add(_dotted_text(left))
        elif isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add) and isinstance(n.value, ast.BinOp):
            pass  # total += clock() - t0: the BinOp above covers it
        elif isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and len(n.targets) == 1:
            assigned.append((_dotted_text(n.targets[0]), id(n.value)))
    out.update(call for target, call in assigned if target and target in minuends)
    return out


def _elapsed(ctx, calls):
    recorded = {}  # event name -> position of its last record() not yet synchronized
    for c in calls:
        f = c.func
        if not isinstance(f, ast.Attribute):
            if ctx.qual(f) == "torch.cuda.synchronize":
                recorded.clear()
            continue
        ev = ctx.mod.qual(f.value) if isinstance(f.value, (ast.Name, ast.Attribute)) else None
        if f.attr == "record" and ev:
            recorded[ev] = True
        elif f.attr in ("synchronize", "query") and ev:
            if ev in recorded:
                recorded[ev] = False
            if "stream" in ev.lower() or ev.endswith("cuda"):
                recorded.clear()
        elif f.attr == "elapsed_time" and c.args:
            end = ctx.mod.qual(c.args[0]) if isinstance(c.args[0], (ast.Name, ast.Attribute)) else None
            if end and recorded.get(end):
                ctx.report("PK402", c, end=end)

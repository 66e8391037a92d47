"""What a profiling session saw, as plain data (:class:`Snapshot`), and the run record built from it
(:func:`build_run`, a pure function: it reads the snapshot and returns a new :class:`Run`).

The session (:mod:`perfkit.session`) fills a snapshot when it ends — counts from its sink, step times
from its clock, segment and GPU times, what was sampled — and nothing in here touches a hook.

Counting definitions the record follows:

* ``steps`` are the steady-state steps (after ``warmup_steps``); step times cover the timed ones;
* a sync finding's ``per_step`` is its steady events over the steady steps' closed intervals (step
  start to next step start, the same intervals as the step times); syncs before the first step are
  setup and syncs after the last step's start, at sites that synced nowhere else, teardown — both
  are kept apart (``extra``), never per-step costs;
* allocation, loop and stream findings come from the sampled steps and are scaled to per step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perfkit.record import SEGMENTS, Finding, Run, SegmentStats
from perfkit.source import relpath, source_line


@dataclass
class Snapshot:
    command: list[str] = field(default_factory=list)
    status: str = "complete"
    t_start: float = 0.0
    t_end: float = 0.0
    t_steady0: float | None = None  # when the first steady step began
    warmup_steps: int = 0
    total_steps: int = 0  # every step boundary seen, warm-up included
    step_detection: str = "none"
    step_times: list[float] = field(default_factory=list)  # seconds, the timed steady steps
    num_envs: int | None = None
    env: dict[str, Any] = field(default_factory=dict)
    seg_totals: dict[str, float] = field(default_factory=dict)  # CPU seconds per segment over the timed steps
    seg_calls: dict[str, int] = field(default_factory=dict)
    gpu_totals: dict[str, float] | None = None  # GPU ms per segment over the GPU-timed steps (None: no GPU)
    gpu_steps: int = 0
    gpu_step_ms: list[float] = field(default_factory=list)
    counts: dict[tuple, list] = field(default_factory=dict)  # sink counts: (kind, op, file, line, func, thread, would, phase)
    trail: dict[tuple, int] = field(default_factory=dict)  # steady syncs after the last step's start
    sampled_steps: list[int] = field(default_factory=list)
    cuda_alloc: list[int] = field(default_factory=list)
    op_counts: dict[tuple[str, int], int] = field(default_factory=dict)
    line_counts: dict[tuple, list] = field(default_factory=dict)  # (code, line) -> [n, {segment: n}]
    line_calls: dict[Any, int] = field(default_factory=dict)
    line_steps: int = 0
    sync_waits: dict[tuple, list] = field(default_factory=dict)  # (file, line) -> [calls, wait_s, gap_s, gaps]
    timeline: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    step_classes: list[str] = field(default_factory=list)
    policy_classes: list[str] = field(default_factory=list)
    count_cpu_tensors: bool = False
    verify: dict[str, Any] | None = None
    interop_sites: dict[tuple, int] = field(default_factory=dict)
    machine: dict[str, Any] = field(default_factory=dict)
    memory: dict[str, Any] = field(default_factory=dict)
    fixes: dict[str, str] = field(default_factory=dict)  # sync op -> the fix in words
    alloc_fix: str = ""
    stream_fix: str = ""
    loop_fix: str = ""


def build_run(snap: Snapshot) -> Run:
    """The run record of ``snap`` (see module doc). Pricing is left to :func:`perfkit.analysis.cost.price_run`."""
    from perfkit.collectors import loops as loops_mod  # the loop analysis of sampled line counts

    run = Run(command=list(snap.command), status=snap.status)
    n_steps = snap.total_steps
    steady = max(0, n_steps - snap.warmup_steps)
    run.num_envs = snap.num_envs
    run.env = dict(snap.env)
    if snap.num_envs is not None:
        run.env.setdefault("num_envs", snap.num_envs)
    times = snap.step_times
    run.steps = steady
    run.step_times_ms = [round(t * 1e3, 4) for t in times]
    timed = sum(times)
    run.wall_s = round(timed, 6)
    run.warmup_s = round((snap.t_steady0 if snap.t_steady0 is not None else snap.t_end) - snap.t_start, 6)
    if times and timed > 0:
        run.sps = round(len(times) * (snap.num_envs or 1) / timed, 3)
        import numpy as np

        p50, p99 = np.percentile(times, [50, 99])  # linear interpolation between closest ranks
        run.step_ms = {"p50": round(float(p50) * 1e3, 4), "p99": round(float(p99) * 1e3, 4),
                       "mean": round(timed / len(times) * 1e3, 4)}
    run.segments = segment_stats(snap, steady, n_steps)
    findings, setup, teardown, loop_ops = _findings(snap, steady, n_steps, loops_mod)
    run.findings = findings
    if setup:
        run.extra["setup_syncs"] = setup
    if teardown:
        run.extra["teardown_syncs"] = teardown  # after the last step's start
    sync_wait = sync_wait_record(snap.sync_waits, len(times))
    if sync_wait:
        run.extra["sync_wait"] = sync_wait  # host time in each real sync, and the host work after it
    if loop_ops:
        run.extra["loop_ops"] = loop_ops  # torch ops per loop iteration (the cost model reads it)
    run.machine = dict(snap.machine)
    run.memory = dict(snap.memory)
    run.extra["total_steps"] = n_steps
    run.extra["warmup_steps"] = min(snap.warmup_steps, n_steps)
    run.extra["step_detection"] = snap.step_detection
    if snap.step_classes:
        run.extra["step_classes"] = list(snap.step_classes)
    run.extra["sampled_steps"] = list(snap.sampled_steps)
    if snap.policy_classes:
        run.extra["policy_classes"] = list(snap.policy_classes)
    if snap.cuda_alloc:
        run.extra["cuda_allocator_allocs_per_step"] = sum(snap.cuda_alloc) / len(snap.cuda_alloc)
    run.extra["timeline"] = list(snap.timeline)
    run.extra["count_cpu_tensors"] = snap.count_cpu_tensors
    if snap.gpu_totals is not None:
        run.extra["gpu_timed_steps"] = snap.gpu_steps
        if snap.gpu_step_ms:
            run.extra["gpu_step_ms_mean"] = sum(snap.gpu_step_ms) / len(snap.gpu_step_ms)
    if snap.verify is not None:
        run.extra["verify"] = snap.verify
    if snap.interop_sites:
        run.extra["warp_torch_interop"] = [
            {"call": k[0], "path": relpath(k[1]), "line": k[2], "count": v} for k, v in snap.interop_sites.items()
        ]
    notes = list(snap.notes)
    if n_steps == 0:
        notes.append("no env step was detected: no `step` method on an object with an integer `num_envs` "
                     "was called; use perfkit.step(), --step-fn or [tool.perfkit] step_fn")
    if notes:
        run.extra["notes"] = notes
    return run


def segment_stats(snap: Snapshot, steady: int, n_steps: int) -> dict[str, SegmentStats]:
    stats: dict[str, SegmentStats] = {}

    def get(name: str) -> SegmentStats:
        if name not in stats:
            stats[name] = SegmentStats()
        return stats[name]

    n = len(snap.step_times)
    for seg, secs in snap.seg_totals.items():
        get(seg).cpu_ms_per_step = round(secs * 1e3 / n, 6) if n else 0.0
    for seg, c in snap.seg_calls.items():
        get(seg).calls_per_step = round(c / n, 4) if n else 0.0
    if snap.gpu_totals is not None and snap.gpu_steps:
        for seg, ms in snap.gpu_totals.items():
            get(seg).gpu_ms_per_step = round(ms / snap.gpu_steps, 6)
    denom = steady or n_steps
    n_sampled = len(snap.sampled_steps)
    for key, (cnt, nbytes, segs) in snap.counts.items():
        kind, phase = key[0], key[7]
        if kind == "sync" and denom:
            if steady and phase != "steady":
                continue
            if not steady and phase == "setup":
                continue
            for seg, k in segs.items():
                get(seg).syncs_per_step += k / denom
        elif kind == "alloc" and n_sampled:
            for seg, k in segs.items():
                s = get(seg)
                s.allocs_per_step += k / n_sampled
                s.alloc_bytes_per_step += (nbytes * k / cnt) / n_sampled if cnt else 0
    for s in stats.values():
        s.syncs_per_step = round(s.syncs_per_step, 6)
        s.allocs_per_step = round(s.allocs_per_step, 6)
        s.alloc_bytes_per_step = round(s.alloc_bytes_per_step, 3)
    order = [s for s in SEGMENTS if s in stats] + sorted(s for s in stats if s not in SEGMENTS)
    return {k: stats[k] for k in order}


def _findings(snap: Snapshot, steady: int, n_steps: int, loops_mod) -> tuple[list[Finding], list[dict], list[dict], dict[str, float]]:
    """(findings, setup syncs, teardown syncs, torch ops per loop iteration)."""
    agg: dict[tuple, dict] = {}
    setup: list[dict] = []
    teardown: list[dict] = []
    # the steady steps' syncs are counted over their closed intervals (step start to next step start),
    # the same intervals as the step times; what follows the last step start is teardown
    trail = snap.trail if steady > 1 else {}
    intervals = steady - 1 if trail else steady
    n_sampled = len(snap.sampled_steps)
    for key, (cnt, nbytes, segs) in snap.counts.items():
        kind, op, fn, line, func, thread, would, phase = key
        if kind == "sync" and phase == "setup" and n_steps:
            setup.append({"op": op, "path": relpath(fn), "line": line, "count": cnt})
            continue
        tail = trail.get(key, 0)
        if tail and tail == cnt:  # this site synced only after the last step started: teardown
            teardown.append({"op": op, "path": relpath(fn), "line": line, "count": tail})
            continue
        if kind in ("alloc", "stream") and not n_sampled:
            continue
        k = (kind, op, fn, line, func, thread, would)
        a = agg.setdefault(k, {"count": 0, "steady": 0, "bytes": 0, "segs": {}})
        a["count"] += cnt
        a["bytes"] += nbytes
        if phase in ("steady", "sampled"):
            a["steady"] += cnt - tail  # over the closed intervals only
        for s, m in segs.items():
            a["segs"][s] = a["segs"].get(s, 0) + m
    out: list[Finding] = []
    for (kind, op, fn, line, func, thread, would), a in agg.items():
        seg = max(a["segs"], key=a["segs"].get) if a["segs"] else "other"
        f = Finding(kind=kind, op=op, path=relpath(fn), line=line, function=func, segment=seg,
                    thread=thread, would_sync_on_gpu=bool(would), code=source_line(fn, line))
        if kind == "sync":
            f.count = a["count"]
            if intervals:
                f.per_step = round(a["steady"] / intervals, 6)
            elif n_steps:
                f.per_step = round(a["count"] / n_steps, 6)
            f.message = snap.fixes.get(op, "")
        else:  # sampled kinds: scale the sampled steps to the run
            per = a["count"] / n_sampled
            f.per_step = round(per, 6)
            f.count = int(round(per * max(n_steps, 1)))
            if kind == "alloc":
                f.bytes = int(round(a["bytes"] / n_sampled * max(n_steps, 1)))
                f.message = snap.alloc_fix
            else:
                f.message = snap.stream_fix
        out.append(f)
    loop_ops: dict[str, float] = {}
    for lp in loops_mod.hot_loops(snap.line_counts, snap.line_steps, snap.num_envs, snap.line_calls):
        lo, hi = lp["span"]
        ops = sum(n for (fn_, ln), n in snap.op_counts.items() if fn_ == lp["filename"] and lo <= ln <= hi)
        if ops and n_sampled and lp["per_step"]:
            loop_ops[f"{relpath(lp['filename'])}:{lp['line']}"] = round(ops / n_sampled / lp["per_step"], 3)
        out.append(Finding(kind="loop", op=lp["kind"], path=relpath(lp["filename"]), line=lp["line"],
                           function=lp["function"], segment=lp["segment"], per_step=round(lp["per_step"], 3),
                           count=int(round(lp["per_step"] * max(n_steps, 1))), message=snap.loop_fix,
                           code=source_line(lp["filename"], lp["line"])))
    # kept apart: syncs before the first step (construction, reset) are not per-step costs
    setup.sort(key=lambda d: -d["count"])
    teardown.sort(key=lambda d: -d["count"])
    out.sort(key=lambda f: (-f.per_step, f.kind, f.path, f.line))
    return out, setup, teardown, loop_ops


def sync_wait_record(sites: dict[tuple, list], n_timed: int) -> dict[str, dict[str, float | None]]:
    """``{"path:line": {wait_ms_per_step, gap_ms_per_step_after, calls_per_step}}`` over the steady
    timed steps; the gap is the mean measured gap per call times the calls per step."""
    out: dict[str, dict[str, float | None]] = {}
    if not n_timed:
        return out
    for (fn, line), (calls, wait, gap, n_gap) in sites.items():
        per_step = calls / n_timed
        out[f"{relpath(fn)}:{line}"] = {
            "wait_ms_per_step": round(wait * 1e3 / n_timed, 6),
            "gap_ms_per_step_after": round(gap / n_gap * per_step * 1e3, 6) if n_gap else None,
            "calls_per_step": round(per_step, 6),
        }
    return out


__all__ = ["Snapshot", "build_run", "segment_stats", "sync_wait_record"]

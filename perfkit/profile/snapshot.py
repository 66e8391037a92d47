"""What a profiling session saw, as plain data (:class:`Snapshot`), and the run record built from it
(:func:`build_run`, a pure function: it reads the snapshot and returns a new :class:`Run`).

The session (:mod:`perfkit.profile.session`) takes a snapshot when it ends: the composition of each
collector's own frozen summary (the clock's steps and times, the sink's counts, the segment clock's
and the GPU's times, the sampler's counts and the schedule's weights, the per-sync waits) and what the
session itself knows. Nothing in here touches a hook.

Counting definitions the record follows (``perfkit.run/3``, as /2):

* ``steps`` are the steady-state steps (after ``warmup_steps``; ``total_steps`` counts them all);
  step times cover the timed ones (not sampled, not ``--verify``);
* every finding's ``count`` is its events over the steady-state steps and ``per_step = count /
  steps``. Syncs are counted exactly (every call is seen). A step runs from its boundary to the next;
  the last one has no next boundary, so at a site that also synced in earlier steps it is counted as
  at most the most events the site made in one earlier step, and a site that synced *only* after the
  last step began is teardown. When the loop's period is known (the steps between learner updates),
  a sync's rate is counted over whole periods: the steady steps cut at the start to k periods ending
  with the last step (:func:`rate_window`), and ``count = per_step * steps``. Syncs before the first step are setup. Setup and teardown are kept apart (``outside_steps``),
  never per-step costs. Warm-up events are in neither count;
* where counting syncs paused (:mod:`perfkit.collectors.sync_gate`: on CUDA, once a few whole periods of
  the loop agreed), a sync's rate is its events in the whole periods counted, each standing for the
  steps around it that were not counted (``extra.sync_counting``);
* allocation, loop and stream findings come from the sampled steps (``sampling``), each standing for
  the steps until the next: ``per_step`` is their weighted mean — or, for an event whose sampled
  occurrences follow one period exactly (every 10th step), one over that period — and ``count`` is
  ``per_step * steps``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perfkit.record import (
    EXTRA_SYNC_SOURCE, EXTRA_CUDA_ALLOCATOR_ALLOCS, EXTRA_CUDA_ALLOCATOR_PERIODS, EXTRA_GPU_STEP_MS_MEAN, EXTRA_GPU_TIMED_STEPS,
    EXTRA_LOOP_OPS, EXTRA_NOTES, EXTRA_POLICY_CLASSES, EXTRA_RATE_WINDOW,
    EXTRA_STEP_CLASSES, EXTRA_STEP_DETECTION, EXTRA_SYNC_COUNTING, EXTRA_SYNC_WAIT, EXTRA_VERIFY,
    EXTRA_WARP_TORCH_INTEROP, Finding, OutsideSteps, Run, SEGMENTS, SegmentStats, Timeline,
)
from perfkit.collectors.sampling import SampleSummary, ScheduleSummary
from perfkit.collectors.steps import ClockSummary, SyncSummary
from perfkit.collectors.sync_gate import AGREE, RECHECK, GateSummary
from perfkit.collectors.sync_wait import BURSTS, FIT, OVER, WaitSummary
from perfkit.collectors.timing import GpuSummary, SegmentSummary
from perfkit.source import relpath, source_line


@dataclass(frozen=True)
class Snapshot:
    """What a session saw: each collector's own summary, and what the session itself knows."""

    command: list[str] = field(default_factory=list)
    status: str = "complete"
    t_start: float = 0.0
    t_end: float = 0.0
    warmup_steps: int = 0
    step_detection: str = "none"
    num_envs: int | None = None
    env: dict[str, Any] = field(default_factory=dict)
    clock: ClockSummary = field(default_factory=ClockSummary)  # steps, their times, the syncs after the last start
    syncs: SyncSummary = field(default_factory=SyncSummary)  # the sink's counts by site and phase
    segments: SegmentSummary = field(default_factory=SegmentSummary)  # CPU time per segment, the learner's steps
    gpu: GpuSummary | None = None  # GPU time per segment (None: no GPU)
    sampling: SampleSummary = field(default_factory=SampleSummary)  # what the sampled steps counted
    schedule: ScheduleSummary = field(default_factory=ScheduleSummary)  # which steps were sampled, standing for what
    waits: WaitSummary = field(default_factory=WaitSummary)  # host time in each real sync and the work after it
    gate: GateSummary = field(default_factory=GateSummary)  # which steady steps counted syncs
    notes: list[str] = field(default_factory=list)
    step_classes: list[str] = field(default_factory=list)
    policy_classes: list[str] = field(default_factory=list)
    sync_source: str = ""  # "runtime" | "hooks" | "" (torch never hooked): perfkit.collectors.hub
    verify: dict[str, Any] | None = None
    machine: dict[str, Any] = field(default_factory=dict)
    memory: dict[str, Any] = field(default_factory=dict)
    fixes: dict[str, str] = field(default_factory=dict)  # sync op -> the fix in words
    alloc_fix: str = ""
    stream_fix: str = ""
    loop_fix: str = ""
    dist: dict[str, Any] | None = None  # perfkit.collectors.comm.CommCollector.snapshot(): rank, collectives, DDP
    self_meter: dict[str, Any] | None = None  # perfkit.collectors.self_cost.SelfMeter.snapshot(): perfkit's own cost


def build_run(snap: Snapshot) -> Run:
    """The run record of ``snap`` (see module doc). Pricing is left to :func:`perfkit.pricing.cost.price_run`."""
    from perfkit.collectors import loops as loops_mod  # the loop analysis of sampled line counts

    run = Run(command=list(snap.command), status=snap.status)
    n_steps = snap.clock.total_steps
    steady = max(0, n_steps - snap.warmup_steps)
    run.num_envs = snap.num_envs
    run.env = dict(snap.env)
    times = snap.clock.step_times
    if not times and snap.clock.untimed_step_times:  # every steady step was sampled (a short run): their times, said so
        times = snap.clock.untimed_step_times
    run.steps = steady
    run.step_times_ms = [round(t * 1e3, 4) for t in times]
    timed = sum(times)
    run.wall_s = round(timed, 6)
    run.warmup_s = round((snap.clock.steady_t if snap.clock.steady_t is not None else snap.t_end) - snap.t_start, 6)
    if times and timed > 0:
        run.sps = round(len(times) * (snap.num_envs or 1) / timed, 3)
        p50, p99 = _percentiles(times)
        run.step_ms = {"p50": round(float(p50) * 1e3, 4), "p99": round(float(p99) * 1e3, 4),
                       "mean": round(timed / len(times) * 1e3, 4)}
    run.total_steps = n_steps
    run.warmup_steps = min(snap.warmup_steps, n_steps)
    run.sampling = {"steps": sorted(snap.schedule.weights), "weights": [snap.schedule.weights[i] for i in sorted(snap.schedule.weights)],
                    "every": snap.schedule.every}
    if snap.schedule.blocks:
        run.sampling["blocks"] = [list(b) for b in snap.schedule.blocks]
    run.segments = segment_stats(snap, steady, n_steps)
    findings, setup, teardown, loop_ops = _findings(snap, steady, n_steps, loops_mod)
    run.findings = findings
    run.outside_steps = OutsideSteps(setup=setup, teardown=teardown)  # teardown: after the last step's start
    counted_share = _counted_share(snap.gate, snap.warmup_steps, n_steps)  # of the steady steps, those that counted syncs
    sync_wait = sync_wait_record(snap.waits.sites, len(times) * counted_share)
    if sync_wait:
        run.extra[EXTRA_SYNC_WAIT] = sync_wait  # host time in each real sync, and the host work after it
    if loop_ops:
        run.extra[EXTRA_LOOP_OPS] = loop_ops  # torch ops per loop iteration (the cost model reads it)
    run.machine = dict(snap.machine)
    run.memory = dict(snap.memory)
    from perfkit.collectors.comm import dist_record

    run.dist = dist_record(snap.dist, len(times), run.env.get("device"), snap.machine.get("host"))
    from perfkit.collectors.self_cost import self_cost

    n_timed = len(times)
    transitions = 2 * sum(snap.segments.calls.values()) / n_timed if n_timed else 0.0  # an entry and the way back
    run.self = self_cost(snap.self_meter, transitions, run.syncs_per_step * counted_share)
    if snap.gate.mode == "periods":
        run.extra[EXTRA_SYNC_COUNTING] = _gate_record(snap.gate, snap.warmup_steps, n_steps)
    run.extra[EXTRA_STEP_DETECTION] = snap.step_detection
    if snap.step_classes:
        run.extra[EXTRA_STEP_CLASSES] = list(snap.step_classes)
    window = rate_window(snap, steady)
    if window:
        cut, period = window
        run.extra[EXTRA_RATE_WINDOW] = {"period": period, "steps": steady - cut, "first_step": snap.warmup_steps + cut + 1}
    if snap.policy_classes:
        run.extra[EXTRA_POLICY_CLASSES] = list(snap.policy_classes)
    periods = allocator_rates(snap)
    if periods:
        run.extra[EXTRA_CUDA_ALLOCATOR_PERIODS] = periods
    elif snap.sampling.cuda_alloc:
        run.extra[EXTRA_CUDA_ALLOCATOR_ALLOCS] = sum(snap.sampling.cuda_alloc) / len(snap.sampling.cuda_alloc)
    run.timeline = Timeline(spans=snap.segments.timeline + (snap.gpu.timeline if snap.gpu is not None else []),
                            step_starts_ms=list(snap.clock.step_starts), last_step_end_ms=snap.clock.last_step_end)
    if snap.sync_source:
        run.extra[EXTRA_SYNC_SOURCE] = snap.sync_source
    if snap.gpu is not None:
        run.extra[EXTRA_GPU_TIMED_STEPS] = snap.gpu.steps
        if snap.gpu.step_ms:
            run.extra[EXTRA_GPU_STEP_MS_MEAN] = sum(snap.gpu.step_ms) / len(snap.gpu.step_ms)
    if snap.verify is not None:
        from perfkit.profile.verify_agreement import agreement

        ver = dict(snap.verify)
        first = run.extra[EXTRA_RATE_WINDOW]["first_step"] if window else snap.warmup_steps + 1
        closed = not ver.get("ended_with_run") and ver.get("first_step") is not None
        agreed = agreement(ver, run.findings, first, _warmup_typical(snap, n_steps),
                           window_record=_window_record(snap, ver["first_step"], ver["last_step"]) if closed else None)
        ver.pop("by_step", None)  # per site and step: read here, too long for the record
        if agreed is not None:
            ver["agreement"] = agreed
        run.extra[EXTRA_VERIFY] = ver
    if snap.sampling.interop_sites:
        run.extra[EXTRA_WARP_TORCH_INTEROP] = [
            {"call": k[0], "path": relpath(k[1]), "line": k[2], "count": v} for k, v in snap.sampling.interop_sites.items()
        ]
    notes = list(snap.notes) + list(snap.sampling.notes)
    if snap.gate.paused and snap.gate.blocks:
        g = run.extra[EXTRA_SYNC_COUNTING]
        notes.append(f"syncs were counted on {g['blocks']} whole periods of the loop ({g['block_steps']} of {steady} steady "
                     f"steps; {g['period']} steps a period): once {AGREE} periods in a row agreed, one period in "
                     f"about every {RECHECK}; {g['sites_varying']} of {g['sites']} sites varied between them (their rates are "
                     "estimates) and a site that syncs only outside them is not seen (--sync-counting every-step "
                     "counts every step)")
    if not snap.clock.step_times and snap.clock.untimed_step_times:
        if snap.verify is not None and snap.verify.get("steps"):
            notes.append(f"every steady step ({len(snap.clock.untimed_step_times)}) was in the --verify window: its step "
                         "times include the profiler's cost; profile without --verify for clean times")
        else:
            notes.append(f"every steady step ({len(snap.clock.untimed_step_times)}) was sampled: its step times include "
                         "perfkit's sampling work; run more steps for clean times")
    if snap.clock.other_envs:
        notes.append("steps of another env were seen (" + ", ".join(f"{e} on thread {t}: {n}" for (t, e), n in snap.clock.other_envs.items())
                     + "); only the first env stepped on the first stepping thread marks the steps")
    if n_steps and not steady:
        notes.append(f"no steady-state step (the run had {n_steps} steps, warm-up {snap.warmup_steps}): "
                     "findings are counted over the warm-up steps")
    if n_steps == 0:
        notes.append("no env step was detected: no `step` method on an object with an integer `num_envs` "
                     "was called; use perfkit.step(), --step-fn or [tool.perfkit] step_fn")
    if notes:
        run.extra[EXTRA_NOTES] = notes
    return run


def _window_record(snap: Any, first: int, last: int) -> dict[str, float] | None:
    """Per site ("path:line"), the record's own syncs per step in steps ``first``..``last`` (the clock's
    per-step trails; would-syncs left out, as the runtime makes none): what a verify window that closed
    before the run ended is set beside. None where the kept trails do not reach its last step."""
    from perfkit.collectors.steps import KEPT_TRAILS

    if last > KEPT_TRAILS or last < first:
        return None
    out: dict[str, float] = {}
    for idx in range(first, last + 1):
        for key, m in (snap.clock.kept_trails.get(idx) or {}).items():
            if key[0] == "sync" and not key[6]:
                site = f"{relpath(key[2])}:{key[3]}"
                out[site] = out.get(site, 0) + m
    n = last - first + 1
    return {site: m / n for site, m in out.items()}


def _percentiles(values: list[float]) -> tuple[float, float]:
    """p50 and p99 by linear interpolation between closest ranks (numpy's default; the standard
    library's "inclusive" quantiles where numpy is not installed)."""
    try:
        import numpy as np

        p50, p99 = np.percentile(values, [50, 99])
        return float(p50), float(p99)
    except ImportError:
        import statistics

        if len(values) < 2:
            return float(values[0]), float(values[0])
        q = statistics.quantiles(values, n=100, method="inclusive")
        return q[49], q[98]


MAX_PERIOD = 64  # the longest period an event's sampled occurrences are checked for


def sampled_rate(occurrences: dict[int, int], sampled: dict[int, int]) -> float:
    """Events per step of one site from the sampled steps (``{step: weight}``, the weight being the steps
    a sample stands for): one over the period when the occurrences follow exactly one period — the same
    count on exactly the sampled steps of one residue class, with every residue class sampled, and no
    other period fitting as well — else the weighted mean."""
    steps = sorted(sampled)
    hits = [i for i in steps if occurrences.get(i)]
    if 2 <= len(hits) < len(steps):
        values = {occurrences[i] for i in hits}
        if len(values) == 1:
            n = values.pop()
            hit_set = set(hits)
            fits = []
            for period in range(2, min(MAX_PERIOD, len(steps)) + 1):
                r = hits[0] % period
                if len({i % period for i in steps}) < period:
                    continue  # some residue never sampled: no evidence either way
                if all((i % period == r) == (i in hit_set) for i in steps):
                    fits.append(period)
            if len(fits) == 1:  # two periods that both fit (two hits 31 x 32 steps apart fit 31 and 32) say neither
                return n / fits[0]
    total = sum(sampled[i] for i in steps)
    return sum(occurrences.get(i, 0) * sampled[i] for i in steps) / total if total else 0.0


def allocator_rates(snap: Snapshot) -> dict[str, Any] | None:
    """The CUDA caching allocator's allocations per step over whole periods of the loop: its count at
    the learner's first entry of each steady update (:class:`~perfkit.collectors.timing.SegmentClock`
    reads it there, once per period), from the second such update to the last (the first pays one-off
    costs: optimizer state, caches) when there are three, else from the first; the learner's own share
    from its exits. None without CUDA or with fewer than two steady updates."""
    reads = [r for r in snap.segments.learner_allocs if r[0] > snap.warmup_steps]
    if len(reads) >= 3:
        reads = reads[1:]
    if len(reads) < 2:
        return None
    (s0, c0, _), (s1, c1, _) = reads[0], reads[-1]
    steps = s1 - s0
    if steps <= 0:
        return None
    out: dict[str, Any] = {"allocs_per_step": round((c1 - c0) / steps, 6), "periods": len(reads) - 1, "steps": steps}
    if all(exit_ is not None for _, _, exit_ in reads[:-1]):
        out["learner_allocs_per_step"] = round(sum(exit_ - enter for _, enter, exit_ in reads[:-1]) / steps, 6)
    return out


def rate_window(snap: Snapshot, steady: int) -> tuple[int, int] | None:
    """``(cut, period)``: the rates of syncs are counted over the steady steps after the first ``cut``,
    a whole number of periods of the training loop (``period`` env steps from one learner update to
    the next), so that work done once per period reads its exact rate however the run's length falls.
    None: no period known, or the steady state already holds whole periods, or the steps to cut were
    not kept."""
    from perfkit.collectors.sampling import loop_period
    from perfkit.collectors.steps import KEPT_TRAILS

    period = loop_period(snap.segments.learner_steps)
    if period is None or period < 2 or steady < period:
        return None
    cut = steady % period
    if snap.warmup_steps + cut > KEPT_TRAILS:
        return None
    return cut, period


def _sync_counts(snap: Snapshot, steady: int, n_steps: int) -> tuple[dict[tuple, tuple[float, dict, int]], list[dict], list[dict]]:
    """``{site key: (events per step, {segment: events}, events)}`` of the syncs by the module doc's
    definition (with no step at all, the rate is 0 and the events are the run's), and the setup and
    teardown lists."""
    per: dict[tuple, list] = {}  # site -> [steady events, {segment: events}, of them after the last boundary, warm-up events]
    setup: list[dict] = []
    teardown: list[dict] = []
    for key, (cnt, _nbytes, segs) in snap.syncs.counts.items():
        kind, op, fn, line, func, thread, would, phase = key
        if kind != "sync":
            continue
        if phase == "setup" and n_steps:
            setup.append({"op": op, "path": relpath(fn), "line": line, "count": cnt})
            continue
        e = per.setdefault(key[:7], [0, {}, 0, 0])
        if steady and phase == "warmup":
            e[3] += cnt  # warm-up events are no per-step cost; they only show the site recurs
            continue
        e[0] += cnt
        e[2] += snap.clock.trail.get(key, 0)
        for sg, m in segs.items():
            e[1][sg] = e[1].get(sg, 0) + m
    window = rate_window(snap, steady)
    cut = window[0] if window else 0
    early: dict[tuple, int] = {}  # site -> events in the steady steps cut from the window
    peak: dict[tuple, int] = {}  # site -> the most events it made in one step (of the kept steps)
    for idx, trail in snap.clock.kept_trails.items():
        for key, m in trail.items():
            k7 = key[:7]
            if m > peak.get(k7, 0):
                peak[k7] = m
            if cut and snap.warmup_steps < idx <= snap.warmup_steps + cut and key[7] == "steady":
                early[k7] = early.get(k7, 0) + m
    steps = steady or n_steps
    if snap.gate.paused and snap.gate.blocks:
        return _gated_rates(snap, per, steps, n_steps, teardown), setup, teardown
    out: dict[tuple, tuple[float, dict, int]] = {}
    warm_steps = min(snap.warmup_steps, n_steps)
    for k7, (cnt, segs, tail, warm) in per.items():
        if not cnt:
            continue
        if steady >= 2 and tail:
            closed = cnt - tail
            if k7 in peak:  # the last step holds at most what the site made in one earlier step
                typical = peak[k7]
            elif closed > 0:
                typical = -(-closed // (steady - 1))
            elif warm:
                typical = _per_step_cap(warm, warm_steps)
            else:  # synced only after the last step began, never before: teardown
                teardown.append({"op": k7[1], "path": relpath(k7[2]), "line": k7[3], "count": tail})
                continue
            cnt = closed + min(tail, typical)
        if window:
            rate = (cnt - early.get(k7, 0)) / (steady - cut)
        else:
            rate = cnt / steps if steps else 0.0
        out[k7] = (rate, segs, int(round(rate * steps)) if steps else cnt)
    setup.sort(key=lambda d: -d["count"])
    teardown.sort(key=lambda d: -d["count"])
    return out, setup, teardown


def _on_steps(gate: GateSummary, warmup: int, n_steps: int) -> int:
    """The steady steps that counted syncs (the gate's ranges, the last open one to the run's last step)."""
    return sum(max(0, min(b if b is not None else n_steps, n_steps) - max(a, warmup + 1) + 1) for a, b in gate.on)


def _counted_share(gate: GateSummary, warmup: int, n_steps: int) -> float:
    """Of the steady steps, the share that counted syncs (1 where counting never paused)."""
    steady = n_steps - warmup
    if not gate.paused or steady <= 0:
        return 1.0
    return min(1.0, _on_steps(gate, warmup, n_steps) / steady)


def _gate_record(gate: GateSummary, warmup: int, n_steps: int) -> dict[str, Any]:
    """``extra.sync_counting``: how syncs were counted, and how many sites' counts differed between the
    counted periods (their rates are estimates; the others' are exact for a loop that repeats)."""
    sites = {k for counts in gate.block_counts for k in counts}
    varying = sum(1 for k in sites if len({c.get(k, [0])[0] for c in gate.block_counts}) > 1)
    # each counted period: its steps, its events, and what kept it from agreeing with the one before, as the
    # gate decided (what made counting go on: a data-dependent site, a change of regime)
    periods: list[dict[str, Any]] = []
    prev: dict[tuple, list] = {}
    for i, ((a, b), counts) in enumerate(zip(gate.blocks, gate.block_counts)):
        entry: dict[str, Any] = {"steps": [a, b], "events": sum(c[0] for c in counts.values())}
        why = gate.block_disagreed[i] if i < len(gate.block_disagreed) else None
        if why is not None:
            entry["differing"] = sorted(f"{relpath(k[2])}:{k[3]} {prev.get(k, [0])[0]}->{counts.get(k, [0])[0]}"
                                        for k in why) or [f"total {periods[-1]['events']}->{entry['events']}"]
        periods.append(entry)
        prev = counts
    return {"mode": gate.mode, "paused": gate.paused, "period": gate.period, "blocks": len(gate.blocks),
            "block_steps": gate.block_steps, "counted_steps": _on_steps(gate, warmup, n_steps),
            "sites": len(sites), "sites_varying": varying, "agree": AGREE, "recheck": RECHECK,
            "periods": periods}


def _gated_rates(snap: Snapshot, per: dict[tuple, list], steps: int, n_steps: int,
                 teardown: list[dict]) -> dict[tuple, tuple[float, dict, int]]:
    """The sync rates where counting paused (:mod:`perfkit.collectors.sync_gate`): a site's events in the
    whole periods counted, each standing for the steps it stands in for, per step
    (:meth:`~perfkit.collectors.sync_gate.GateSummary.rates`); a site seen only in other counted steps
    (before the first period, or in one cut short by the run's end) over every step that counted, its
    events after the last step's start left out (a site with none but those is teardown)."""
    gate = snap.gate
    rates = gate.rates(n_steps)
    on = _on_steps(gate, snap.warmup_steps, n_steps)
    out: dict[tuple, tuple[float, dict, int]] = {}
    for k7, (cnt, segs, tail, _warm) in per.items():
        if k7 in rates:
            rate, segs = rates[k7]
        elif cnt > tail and on:
            rate = (cnt - tail) / on
        else:
            teardown.append({"op": k7[1], "path": relpath(k7[2]), "line": k7[3], "count": tail})
            continue
        out[k7] = (rate, segs, int(round(rate * steps)))
    return out


def _per_step_cap(events: int, steps: int) -> int:
    """Events in a typical step of ``steps`` holding ``events``, rounded up: what an open-ended last step
    may count at a site (:func:`_sync_counts`)."""
    return -(-events // max(1, steps))


def _warmup_typical(snap: Snapshot, n_steps: int) -> dict[str, int]:
    """Per site ("path:line") that synced in the warm-up, its events in a typical warm-up step: the cap
    :func:`_sync_counts` puts on a last step whose site never synced in a closed steady step."""
    warm: dict[str, int] = {}
    for (kind, _op, fn, line, _func, _thread, _would, phase), (cnt, _nbytes, _segs) in snap.syncs.counts.items():
        if kind == "sync" and phase == "warmup":
            key = f"{relpath(fn)}:{line}"
            warm[key] = warm.get(key, 0) + cnt
    warm_steps = min(snap.warmup_steps, n_steps)
    return {k: _per_step_cap(n, warm_steps) for k, n in warm.items()}


def _sampled_rates(snap: Snapshot) -> dict[tuple, float]:
    live = {i: w for i, w in snap.schedule.weights.items() if w}  # steps standing for none (see SampleSchedule.weights) are out
    return {k7: sampled_rate(occ, live) for k7, occ in snap.syncs.per_sample.items()} if live else {}


def gpu_ms_per_step(gpu: GpuSummary, seg: str, cpu_ms_per_step: float | None) -> float:
    """GPU time per step of segment ``seg`` from the GPU-timed steps (every ``timing_every``-th). A
    segment that ran on every one of them: its GPU time over those steps. One that ran on some only (the
    learner's update, once an iteration; a print every so often): a handful of timed steps catch it 0, 1
    or 2 times where the steps' share says 0.7, so their mean would be 0, 1.4 or 2.9 times its cost. Its
    GPU time per host ms on the timed steps, times its host ms per step over every timed step, instead."""
    ms = gpu.totals[seg]
    cpu = gpu.cpu_totals.get(seg, 0.0)
    if gpu.steps_with.get(seg, gpu.steps) >= gpu.steps or not cpu_ms_per_step or cpu <= 0.0:
        return ms / gpu.steps
    return ms / cpu * cpu_ms_per_step


def segment_stats(snap: Snapshot, steady: int, n_steps: int) -> dict[str, SegmentStats]:
    """Per-segment costs per step; segments named ``other/<part>`` (the env step's and the training
    loop's callees and own code) are folded into ``other`` (its totals include them) and listed as its
    ``children``; ``other/<part>/<sub>`` (below a part that dominates) likewise into the part."""
    stats: dict[str, SegmentStats] = {}

    def get(name: str) -> SegmentStats:
        if name not in stats:
            stats[name] = SegmentStats()
        return stats[name]

    n = len(snap.clock.step_times)
    for seg, secs in snap.segments.totals.items():
        get(seg).cpu_ms_per_step = round(secs * 1e3 / n, 6) if n else 0.0
    for seg, c in snap.segments.calls.items():
        get(seg).calls_per_step = round(c / n, 4) if n else 0.0
    if snap.gpu is not None and snap.gpu.steps:
        for seg in snap.gpu.totals:
            st = get(seg)
            st.gpu_ms_per_step = round(gpu_ms_per_step(snap.gpu, seg, st.cpu_ms_per_step), 6)
    syncs, _, _ = _sync_counts(snap, steady, n_steps)
    for rate, segs, _ in syncs.values():
        total = sum(segs.values())
        for seg, k in segs.items():
            if total:
                get(seg).syncs_per_step += rate * k / total
    rates = _sampled_rates(snap)
    for key, (cnt, nbytes, segs) in snap.syncs.counts.items():
        if key[0] != "alloc" or not cnt:
            continue
        rate = rates.get(key[:7], 0.0)
        for seg, k in segs.items():
            s = get(seg)
            s.allocs_per_step += rate * k / cnt
            s.alloc_bytes_per_step += rate * k / cnt * (nbytes / cnt)
    parts = {name[len("other/"):]: stats.pop(name) for name in [n for n in stats if n.startswith("other/")]}
    if parts:
        # deepest first: other/A/B is a child of other/A (whose totals include it), other/A of other
        for path in sorted(parts, key=lambda p: -p.count("/")):
            head, _, leaf = path.rpartition("/")
            parent = parts.get(head) if head else None
            if parent is None:
                parent, leaf = get("other"), path
            _fold_into(parent, leaf, parts[path])
    for s in _with_children(stats.values()):
        s.cpu_ms_per_step = round(s.cpu_ms_per_step, 6)
        s.syncs_per_step = round(s.syncs_per_step, 6)
        s.allocs_per_step = round(s.allocs_per_step, 6)
        s.alloc_bytes_per_step = round(s.alloc_bytes_per_step, 3)
        if s.gpu_ms_per_step is not None:
            s.gpu_ms_per_step = round(s.gpu_ms_per_step, 6)
    order = [s for s in SEGMENTS if s in stats] + sorted(s for s in stats if s not in SEGMENTS)
    return {k: stats[k] for k in order}


def _fold_into(parent: SegmentStats, name: str, child: SegmentStats) -> None:
    """``child`` listed in ``parent.children`` as ``name``, its costs added to the parent's."""
    if parent.children is None:
        parent.children = {}
    parent.children[name] = child
    for f in ("cpu_ms_per_step", "syncs_per_step", "allocs_per_step", "alloc_bytes_per_step"):
        setattr(parent, f, getattr(parent, f) + getattr(child, f))
    if child.gpu_ms_per_step is not None:
        parent.gpu_ms_per_step = (parent.gpu_ms_per_step or 0.0) + child.gpu_ms_per_step


def _with_children(stats) -> list[SegmentStats]:
    out = []
    for s in stats:
        out.append(s)
        out.extend(_with_children((s.children or {}).values()))
    return out


def _top_segment(segs: dict[str, int]) -> str:
    seg = max(segs, key=segs.get) if segs else "other"
    return "other" if seg.startswith("other/") else seg


def _lint_rule(op: str) -> str | None:
    """The static rule the sync-op table names for ``op`` (``perfkit.collectors.patches.SyncOp``)."""
    from perfkit.collectors.hub import sync_op

    o = sync_op(op)
    return o.lint_rule if o is not None else None


def _findings(snap: Snapshot, steady: int, n_steps: int, loops_mod) -> tuple[list[Finding], list[dict], list[dict], dict[str, float]]:
    """(findings, setup syncs, teardown syncs, torch ops per loop iteration)."""
    from perfkit.collectors.sites import library_of

    steps = steady or n_steps  # what per_step divides by (warm-up only when there is no steady step)
    out: list[Finding] = []

    def where(kind: str, op: str, fn: str, line: int) -> dict[str, Any]:
        chain = snap.syncs.chains.get((kind, op, fn, line)) or ()
        return {"chain": [f"{relpath(f)}:{ln}" for f, ln in chain], "library": library_of(fn)}

    syncs, setup, teardown = _sync_counts(snap, steady, n_steps)
    for (kind, op, fn, line, func, thread, would), (rate, segs, count) in syncs.items():
        out.append(Finding(kind=kind, op=op, path=relpath(fn), line=line, function=func, segment=_top_segment(segs),
                           thread=thread, would_sync_on_gpu=bool(would), code=source_line(fn, line),
                           count=count, per_step=round(rate, 6), message=snap.fixes.get(op, ""),
                           lint_rule=_lint_rule(op), **where(kind, op, fn, line)))
    rates = _sampled_rates(snap)
    sampled_kinds: dict[tuple, list] = {}
    for key, (cnt, nbytes, segs) in snap.syncs.counts.items():
        if key[0] in ("alloc", "stream"):
            e = sampled_kinds.setdefault(key[:7], [0, 0, {}])
            e[0] += cnt
            e[1] += nbytes
            for sg, m in segs.items():
                e[2][sg] = e[2].get(sg, 0) + m
    for (kind, op, fn, line, func, thread, would), (cnt, nbytes, segs) in sampled_kinds.items():
        rate = rates.get((kind, op, fn, line, func, thread, would), 0.0)
        if rate <= 0:
            continue
        f = Finding(kind=kind, op=op, path=relpath(fn), line=line, function=func, segment=_top_segment(segs),
                    thread=thread, would_sync_on_gpu=bool(would), code=source_line(fn, line),
                    per_step=round(rate, 6), count=int(round(rate * steps)), **where(kind, op, fn, line))
        if kind == "alloc":
            f.bytes = int(round(nbytes / cnt * rate * steps)) if cnt else None
            f.message = snap.alloc_fix
        else:
            f.message = snap.stream_fix
        out.append(f)
    loop_ops: dict[str, float] = {}
    n_sampled = snap.sampling.line_steps
    for lp in loops_mod.hot_loops(snap.sampling.line_counts, snap.sampling.line_steps, snap.num_envs, snap.sampling.line_entries, snap.sampling.line_trips):
        lo, hi = lp["span"]
        ops = sum(n for (fn_, ln), n in snap.sampling.op_counts.items() if fn_ == lp["filename"] and lo <= ln <= hi)
        if ops and n_sampled and lp["per_step"]:
            loop_ops[f"{relpath(lp['filename'])}:{lp['line']}"] = round(ops / n_sampled / lp["per_step"], 3)
        out.append(Finding(kind="loop", op=lp["kind"], path=relpath(lp["filename"]), line=lp["line"],
                           function=lp["function"], segment=_top_segment({lp["segment"]: 1}), per_step=round(lp["per_step"], 3),
                           count=int(round(lp["per_step"] * steps)), message=snap.loop_fix,
                           code=source_line(lp["filename"], lp["line"]), library=library_of(lp["filename"])))
    out.sort(key=lambda f: (-f.per_step, f.kind, f.path, f.line))
    return out, setup, teardown, loop_ops


def sync_wait_record(sites: dict[tuple, list], n_timed: int) -> dict[str, dict[str, Any]]:
    """``{"path:line": {wait_ms_per_step, gap_ms_per_step_after, calls_per_step, bursts}}`` over the steady
    timed steps; the gap is the mean measured gap per call times the calls per step. ``bursts`` (absent in
    older records, which the cost model prices from the site's averages): per step, the site's bursts
    (:mod:`perfkit.collectors.sync_wait`) in two classes, ``fit`` (their waits fit in their gaps) and
    ``over``, each ``{wait_ms, gap_ms, calls}``, scaled from the closed bursts to all the site's calls."""
    out: dict[str, dict[str, Any]] = {}
    if not n_timed:
        return out
    for (fn, line), acc in sites.items():
        calls, wait, gap, n_gap = acc[:4]
        per_step = calls / n_timed
        d: dict[str, Any] = {
            "wait_ms_per_step": round(wait * 1e3 / n_timed, 6),
            "gap_ms_per_step_after": round(gap / n_gap * per_step * 1e3, 6) if n_gap else None,
            "calls_per_step": round(per_step, 6),
        }
        closed = acc[FIT + 2] + acc[OVER + 2] if len(acc) > BURSTS else 0  # calls in the closed bursts
        if closed:
            k = calls / closed / n_timed  # closed bursts' sums -> per step, for all the site's calls
            d["bursts"] = {"per_step": round(acc[BURSTS] * k, 6), **{
                cls: {"wait_ms": round(acc[i] * 1e3 * k, 6), "gap_ms": round(acc[i + 1] * 1e3 * k, 6),
                      "calls": round(acc[i + 2] * k, 6)} for cls, i in (("fit", FIT), ("over", OVER))}}
        out[f"{relpath(fn)}:{line}"] = d
    return out


__all__ = ["Snapshot", "build_run", "segment_stats", "sync_wait_record"]

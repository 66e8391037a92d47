"""Compare runs: per-metric deltas and regression verdicts (the CI gate behind ``perfkit compare``).

**What is gated by default is what is deterministic**: syncs, allocations and per-env loop iterations
per step, in total and per finding site (a site whose count per step grows past the threshold, or a
site present in NEW and in no BASE run). Counts regress on any relative increase past the threshold,
including 0 -> anything (a sync-free step that starts syncing is exactly what the gate is for).

**Times are gated only between runs.** Load on a shared machine drifts between runs far more than
within one, so a time metric (SPS, step p25/p50/p99, a segment's ms/step) is tested on each run's own
value, one observation per run (:func:`perfkit.analysis.stats.between_runs`, Welch's t): it is worse
beyond the runs' spread when its mean over NEW's runs is worse than over BASE's by more than
``threshold`` (relative, 0.05 = 5 %) and ``min_abs_ms`` (for times), and the 95 % interval of that
same change lies wholly on the worse side. The gate judges the step's own times — SPS and the step
time's p25 and p50; p99 and the segments (where the time went) are tested and shown but not gated:
every gated metric is one more chance of a false alarm (benchmarks/compare_gate.py: gating the six
segments too failed 3 of 10 comparisons of unchanged runs on this project's loaded 2-core machine). With fewer than ``MIN_RUNS`` runs on a side the change is shown with "cannot tell it from
noise" and gates nothing, unless ``strict`` (then the threshold alone decides).

A NEW run that is not ``complete`` (crashed: ``partial``) fails the gate; so does a metric the gate
needs (SPS, step times, segment times) that a record lacks: missing data never passes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from perfkit.analysis.stats import MIN_RUNS, Evidence, RunsEvidence, between_runs, ratio_evidence
from perfkit.formatting import num
from perfkit.record import EXTRA_PHYSICS_SPS, SEGMENTS, Finding, Run

DEFAULT_THRESHOLD = 0.05
DEFAULT_MIN_ABS_MS = 0.01
# the step-time quantiles the gate judges (with SPS); p99 and the segments are tested and shown, not gated
GATED_QUANTILES = ("p25", "p50")

HIGHER = "higher"
LOWER = "lower"


@dataclass
class MetricDelta:
    metric: str
    base: float | None
    new: float | None
    better: str  # HIGHER or LOWER is better
    unit: str = ""
    gate: bool = True  # False: shown, never a regression (e.g. compile time, which the kernel cache decides)
    regression: bool = False
    improvement: bool = False
    worse: bool = False  # moved the wrong way past the threshold (a regression when gated and beyond the spread)
    evidence: Evidence | None = None  # sweeps: the per-step samples' verdict on a point's change
    runs: RunsEvidence | None = None  # a time metric with MIN_RUNS runs a side: the between-run test
    timed: bool = False  # a time metric (gated between runs only); else a count, gated on the threshold
    untestable: bool = False  # a time metric with too few runs to test: shown, gated only when strict
    within_noise: bool = False  # worse past the threshold, but not beyond the runs' own spread
    missing: str | None = None  # "base" | "new" | "both": a metric the gate needs that a record lacks

    @property
    def delta(self) -> float | None:
        if self.base is None or self.new is None:
            return None
        return self.new - self.base

    @property
    def delta_pct(self) -> float | None:
        if self.base is None or self.new is None:
            return None
        if self.base == 0:
            return 0.0 if self.new == 0 else math.copysign(math.inf, self.new)
        return (self.new - self.base) / abs(self.base)

    @property
    def verdict(self) -> str:
        if self.missing:
            return "MISSING"
        if self.base is None or self.new is None:
            return "n/a"
        if self.regression:
            return "REGRESSION"
        if self.worse and not self.gate:
            return "worse (not gated)"
        if self.worse and self.untestable:
            return "worse (cannot tell from noise)"
        if self.within_noise:
            return "worse (within noise)"
        if self.improvement:
            return "better"
        return "ok"

    @property
    def sureness(self) -> str:
        """How sure the verdict is, in words ("" where nothing could be said)."""
        if self.runs is not None:
            return self.runs.describe()
        if self.evidence is not None:
            return self.evidence.describe()
        if self.untestable:
            return (f"fewer than {MIN_RUNS} runs a side: a time change cannot be told from noise "
                    f"(give {MIN_RUNS}+ records per side)")
        return ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(delta=self.delta, delta_pct=_finite(self.delta_pct), verdict=self.verdict,
                 evidence=self.evidence.to_dict() if self.evidence is not None else None,
                 runs=self.runs.to_dict() if self.runs is not None else None, sureness=self.sureness)
        return d


@dataclass
class SiteChange:
    """A finding site present on both sides whose count per step grew past the threshold."""

    finding: Finding
    base: float  # per step, mean over BASE's runs
    new: float  # per step, mean over NEW's runs


@dataclass
class RunDiff:
    base_label: str
    new_label: str
    threshold: float
    metrics: list[MetricDelta] = field(default_factory=list)
    new_findings: list[Finding] = field(default_factory=list)
    resolved_findings: list[Finding] = field(default_factory=list)
    site_changes: list[SiteChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    n_base: int = 1
    n_new: int = 1
    failed_new: list[str] = field(default_factory=list)  # NEW runs that are not complete: "label: status"

    @property
    def regressions(self) -> list[str]:
        out = [f"NEW run {r} (a crashed candidate never passes)" for r in self.failed_new]
        for m in self.metrics:
            if m.missing:
                where = {"base": "BASE", "new": "NEW", "both": "either record"}[m.missing]
                out.append(f"{m.metric}: not measured in {where} (a gate cannot pass on missing data)")
            elif m.regression:
                sure = f"; {m.sureness}" if m.sureness else ""
                out.append(f"{m.metric}: {_fmt(m.base)} -> {_fmt(m.new)}{m.unit and ' ' + m.unit} "
                           f"({_pct(m.delta_pct)}, {m.better} is better{sure})")
        out += [f"new {f.kind} finding: {f.op} at {f.site} ({f.per_step:g}/step)" for f in self.new_findings]
        out += [f"{c.finding.kind} at {c.finding.site} ({c.finding.op}): {c.base:g} -> {c.new:g}/step"
                for c in self.site_changes]
        return out

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": self.base_label,
            "new": self.new_label,
            "runs": {"base": self.n_base, "new": self.n_new},
            "threshold": self.threshold,
            "regressed": self.regressed,
            "regressions": self.regressions,
            "metrics": [m.to_dict() for m in self.metrics],
            "new_findings": [asdict(f) for f in self.new_findings],
            "resolved_findings": [asdict(f) for f in self.resolved_findings],
            "site_changes": [{"site": c.finding.site, "kind": c.finding.kind, "op": c.finding.op, "base": c.base,
                              "new": c.new} for c in self.site_changes],
            "notes": self.notes,
        }


def finding_key(f: Finding) -> tuple:
    """Identity of a finding site across two runs. Line numbers shift with unrelated edits, so the
    key is the operation, file and function (plus the source text when both runs have it)."""
    return (f.kind, f.op, f.path, f.function, f.code)


def _segment_clock(bases: list[Run], news: list[Run], name: str) -> str:
    """``gpu`` when every run on both sides timed the segment on the GPU, else ``cpu``."""
    segs = [r.segments.get(name) for r in bases + news]
    if all(s is not None and s.gpu_ms_per_step is not None for s in segs):
        return "gpu"
    return "cpu"


def syncs_per_step(run: Run) -> float:
    """Measured syncs per step: the segments' counters, or the findings where those are larger
    (a run whose counters were not taken still has attributed sites)."""
    return max(sum(s.syncs_per_step for s in run.segments.values()), run.syncs_per_step)


def allocs_per_step(run: Run) -> float:
    return max(sum(s.allocs_per_step for s in run.segments.values()), run.allocs_per_step)


def loops_per_step(run: Run) -> float:
    """Per-env loop iterations per step, summed over the loop sites."""
    return float(sum(f.per_step for f in run.findings if f.kind == "loop"))


def _throughput_missing(run: Run) -> bool:
    return _num(run.sps) is None or not run.steps


def _quantile(values: list[float], q: float) -> float | None:
    import numpy as np

    v = [x for x in values if isinstance(x, (int, float)) and math.isfinite(x)]
    return float(np.quantile(v, q)) if v else None  # linear interpolation, as the records' p50/p99


def _mean(values: list[float | None]) -> float | None:
    """The mean over runs; None when any run lacks the value (missing data never averages away)."""
    if not values or any(v is None for v in values):
        return None
    return float(sum(values) / len(values))


def diff_runs(
    base: Run,
    new: Run,
    threshold: float = DEFAULT_THRESHOLD,
    min_abs_ms: float = DEFAULT_MIN_ABS_MS,
    base_label: str = "base",
    new_label: str = "new",
    strict: bool = False,
) -> RunDiff:
    """One run a side: :func:`diff_groups` of ``[base]`` and ``[new]``."""
    return diff_groups([base], [new], threshold, min_abs_ms, base_label, new_label, strict)


def diff_groups(
    bases: list[Run],
    news: list[Run],
    threshold: float = DEFAULT_THRESHOLD,
    min_abs_ms: float = DEFAULT_MIN_ABS_MS,
    base_label: str = "base",
    new_label: str = "new",
    strict: bool = False,
    run_labels: tuple[list[str], list[str]] | None = None,
) -> RunDiff:
    """Compare BASE's runs with NEW's (several records a side: repeated runs of one version).
    Values are means over each side's runs; times are tested between runs (module doc)."""
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    if not bases or not news:
        raise ValueError("each side needs at least one run")
    d = RunDiff(base_label=base_label, new_label=new_label, threshold=threshold, n_base=len(bases), n_new=len(news))
    blabels, nlabels = run_labels or ([f"{base_label}[{i}]" for i in range(len(bases))],
                                      [f"{new_label}[{i}]" for i in range(len(news))])
    envs = {r.num_envs for r in bases + news}
    if len(envs) > 1:
        d.notes.append(f"num_envs differs ({', '.join(map(str, sorted(envs, key=str)))}): SPS and per-step times "
                       "are not like for like")
    devices = {r.machine.get("device") for r in bases + news}
    if len(devices) > 1:
        d.notes.append(f"measured on different devices ({', '.join(sorted(map(str, devices)))})")
    for r, label in zip(bases, blabels):
        if r.status != "complete":
            d.notes.append(f"BASE run {label} is {r.status!r}, not complete")
    d.failed_new = [f"{label} is {r.status!r}, not complete" for r, label in zip(news, nlabels) if r.status != "complete"]
    testable = len(bases) >= MIN_RUNS and len(news) >= MIN_RUNS
    if not testable:
        d.notes.append(f"{len(bases)} vs {len(news)} run(s): time changes are shown, not tested — one run cannot tell "
                       f"a change from the machine's noise (give {MIN_RUNS}+ records per side to test them between "
                       "runs" + (")" if not strict else "; --strict: the threshold alone decides)"))

    def add(metric, bvals, nvals, better, unit="", gate=True, abs_floor=0.0, timed=False, required=False):
        m = MetricDelta(metric, _mean([_num(v) for v in bvals]), _mean([_num(v) for v in nvals]), better, unit, gate,
                        timed=timed)
        if m.base is not None and m.new is not None:
            worse = (m.new - m.base) if better == LOWER else (m.base - m.new)
            rel_limit = threshold * abs(m.base)
            m.worse = worse > rel_limit and worse > abs_floor
            better_enough = -worse > rel_limit and -worse > abs_floor
            beyond = beyond_better = True  # a count, or strict: the threshold decides
            if timed:
                m.runs = between_runs(bvals, nvals, higher_is_worse=better == LOWER) if testable else None
                if m.runs is not None:
                    beyond, beyond_better = m.runs.worse, m.runs.better
                else:
                    m.untestable = True
                    beyond = strict
                    beyond_better = False
            m.within_noise = m.worse and not beyond and not m.untestable
            m.regression = gate and m.worse and beyond
            m.improvement = better_enough and beyond_better
        elif required:
            m.missing = "both" if m.base is None and m.new is None else "base" if m.base is None else "new"
            m.regression = True
        d.metrics.append(m)
        return m

    unit = "env steps/s" if all(r.num_envs is not None for r in bases + news) else "steps/s"

    def sps(r):
        return None if _throughput_missing(r) else r.sps

    add("sps", [sps(r) for r in bases], [sps(r) for r in news], HIGHER, unit, timed=True, required=True)
    if any(EXTRA_PHYSICS_SPS in r.extra for r in bases + news):
        add("physics_sps", [r.extra.get(EXTRA_PHYSICS_SPS) for r in bases], [r.extra.get(EXTRA_PHYSICS_SPS) for r in news],
            HIGHER, "physics steps/s", timed=True)
    if all(r.step_times_ms for r in bases + news):
        # the fastest quartile of each run's steps: what other load on a shared machine disturbs least
        # (it only ever adds time), so the time metric most able to see a real change between runs
        add("step_ms.p25", [_quantile(r.step_times_ms, 0.25) for r in bases],
            [_quantile(r.step_times_ms, 0.25) for r in news], LOWER, "ms", abs_floor=min_abs_ms, timed=True)
    for q in ("p50", "p99"):
        add(f"step_ms.{q}", [r.step_ms.get(q) for r in bases], [r.step_ms.get(q) for r in news], LOWER, "ms",
            abs_floor=min_abs_ms, timed=True, gate=q in GATED_QUANTILES,
            required=any(q in r.step_ms for r in bases + news))
    has_segments = [bool(r.segments) for r in bases + news]
    if any(has_segments) and not all(has_segments):
        m = MetricDelta("segments", None, None, LOWER, "ms/step")
        m.missing = "new" if all(bool(r.segments) for r in bases) else "base"
        m.regression = True
        d.metrics.append(m)
    names = [s for s in SEGMENTS if any(s in r.segments for r in bases + news)]
    names += sorted(set().union(*(r.segments for r in bases + news)) - set(SEGMENTS))
    for name in names if all(has_segments) else []:
        clock = _segment_clock(bases, news, name)

        def seg_ms(r):
            s = r.segments.get(name)
            if s is None:
                return 0.0  # a segment a run never entered took no time in it
            return s.gpu_ms_per_step if clock == "gpu" else s.cpu_ms_per_step

        add(f"segment.{name}.{clock}_ms", [seg_ms(r) for r in bases], [seg_ms(r) for r in news], LOWER, "ms/step",
            abs_floor=min_abs_ms, timed=True, gate=False)
    add("syncs_per_step", [syncs_per_step(r) for r in bases], [syncs_per_step(r) for r in news], LOWER)
    add("allocs_per_step", [allocs_per_step(r) for r in bases], [allocs_per_step(r) for r in news], LOWER)
    add("loops_per_step", [loops_per_step(r) for r in bases], [loops_per_step(r) for r in news], LOWER, "iterations")
    add("memory_bytes", [r.peak_memory()[0] for r in bases], [r.peak_memory()[0] for r in news], LOWER, "bytes")
    add("warmup_s", [r.warmup_s for r in bases], [r.warmup_s for r in news], LOWER, "s", gate=False, timed=True)

    def per_site(runs: list[Run]) -> dict[tuple, tuple[Finding, float]]:
        out: dict[tuple, tuple[Finding, float]] = {}
        for r in runs:
            for f in r.findings:
                k = finding_key(f)
                first, total = out.get(k, (f, 0.0))
                out[k] = (first, total + f.per_step)
        return {k: (f, total / len(runs)) for k, (f, total) in out.items()}

    b_sites, n_sites = per_site(bases), per_site(news)
    d.new_findings = [f for k, (f, _) in n_sites.items() if k not in b_sites]
    d.resolved_findings = [f for k, (f, _) in b_sites.items() if k not in n_sites]
    for k, (f, n_ps) in n_sites.items():
        if k in b_sites and f.kind in ("sync", "alloc", "loop"):
            b_ps = b_sites[k][1]
            if n_ps - b_ps > threshold * b_ps and n_ps - b_ps > 1e-9:
                d.site_changes.append(SiteChange(f, b_ps, n_ps))
    return d


def parse_threshold(text: str) -> float:
    """``"5%"`` -> 0.05, ``"0.05"`` -> 0.05, ``"5"`` -> 0.05 (a bare number above 1 is a percentage)."""
    s = str(text).strip()
    try:
        if s.endswith("%"):
            v = float(s[:-1]) / 100.0
        else:
            v = float(s)
            if v >= 1:
                v /= 100.0
    except ValueError:
        raise ValueError(f"not a threshold: {text!r} (use e.g. 5% or 0.05)") from None
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"threshold must be a non-negative percentage, got {text!r}")
    return v


def _num(v) -> float | None:
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _finite(v):
    if v is None or not math.isfinite(v):
        return None if v is None else ("inf" if v > 0 else "-inf")
    return v


def _fmt(v) -> str:
    return num(v, 4)


def _pct(p) -> str:
    if p is None:
        return "-"
    if math.isinf(p):
        return "new" if p > 0 else "-inf%"
    return f"{p:+.1%}"


# ---- sweeps -----------------------------------------------------------------------------------

@dataclass
class SweepPointDelta:
    num_envs: int
    base_status: str
    new_status: str
    sps: MetricDelta


@dataclass
class SweepDiff:
    base_label: str
    new_label: str
    threshold: float
    points: list[SweepPointDelta] = field(default_factory=list)
    base_knee: int | None = None
    new_knee: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[str]:
        out = []
        for p in self.points:
            if p.base_status == "complete" and p.new_status != "complete" and p.new_status != "missing":
                out.append(f"num_envs={p.num_envs}: completed in base, {p.new_status} in new")
            elif p.sps.regression:
                out.append(f"num_envs={p.num_envs}: sps {_fmt(p.sps.base)} -> {_fmt(p.sps.new)} ({_pct(p.sps.delta_pct)})")
        return out

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": self.base_label, "new": self.new_label, "threshold": self.threshold,
            "regressed": self.regressed, "regressions": self.regressions,
            "base_knee": self.base_knee, "new_knee": self.new_knee, "notes": self.notes,
            "points": [{"num_envs": p.num_envs, "base_status": p.base_status, "new_status": p.new_status,
                        **{k: v for k, v in p.sps.to_dict().items() if k in ("base", "new", "delta", "delta_pct", "verdict")}}
                       for p in self.points],
        }


def diff_sweeps(
    base: dict[int, tuple[str, Run | None]],
    new: dict[int, tuple[str, Run | None]],
    threshold: float = DEFAULT_THRESHOLD,
    base_label: str = "base",
    new_label: str = "new",
    knee_threshold: float = 0.10,
) -> SweepDiff:
    """Compare two throughput curves point by point: ``{num_envs: (status, run)}`` each.

    A point regresses when its SPS drops by more than ``threshold`` and beyond both points' step-time
    spread (where their records hold per-step samples), or when it completed in BASE and ran out of
    memory or failed in NEW. Env counts measured on one side only are noted, not judged.
    """
    from perfkit.sweeps.knee import find_knee

    d = SweepDiff(base_label=base_label, new_label=new_label, threshold=threshold)
    for n in sorted(set(base) | set(new)):
        bs, br = base.get(n, ("missing", None))
        ns, nr = new.get(n, ("missing", None))
        m = MetricDelta(f"sps@{n}", _num(br.sps) if br is not None and bs == "complete" else None,
                        _num(nr.sps) if nr is not None and ns == "complete" else None, HIGHER, "env steps/s")
        if m.base is not None and m.new is not None:
            worse = m.base - m.new
            m.worse = worse > threshold * abs(m.base)
            ev = ratio_evidence(br.step_times_ms, nr.step_times_ms, "mean")  # None without enough samples
            m.evidence = ev
            m.within_noise = m.worse and ev is not None and not ev.worse
            m.regression = m.worse and not m.within_noise
            m.improvement = -worse > threshold * abs(m.base) and (ev is None or ev.hi < 1.0)
        d.points.append(SweepPointDelta(n, bs, ns, m))
        if "missing" in (bs, ns):
            d.notes.append(f"num_envs={n} measured only in {'new' if bs == 'missing' else 'base'}")

    def knee(side):
        done = [(n, r.sps) for n, (s, r) in side.items() if s == "complete" and r is not None]
        return find_knee([n for n, _ in done], [s for _, s in done], knee_threshold).num_envs

    d.base_knee, d.new_knee = knee(base), knee(new)
    return d

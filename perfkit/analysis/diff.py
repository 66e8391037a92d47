"""Compare two runs: per-metric deltas and regression verdicts (the CI gate behind ``perfkit compare``).

Each metric knows which direction is better. A metric is *worse* when it moves the wrong way by more
than ``threshold`` (relative, 0.05 = 5 %) — and, for times, by more than ``min_abs_ms`` as well, so
a 0.002 ms segment doubling is not a failed build. A worse time metric is a *regression* only when
the change is beyond both runs' own spread (:mod:`perfkit.analysis.stats`, on the per-step samples
the records hold): SPS and the mean step time, p50 and p99 each by the bootstrap interval of their
step-time ratio, which must lie wholly on the slower side of 1; a segment by its own per-step times
where the record's timeline covers enough steps, else by the spread of the mean step time it is part
of (a segment varies no more than its step). Records without per-step samples are judged on the
threshold alone, and the diff says so. Counts of syncs and allocations per step are counted, not
timed: they regress on any relative increase past the threshold, including 0 -> anything (a
sync-free step that starts syncing is exactly what the gate is for). A finding site present in NEW
but not in BASE is a new finding and a regression on its own. A metric the gate needs (SPS, step
times, segment times) that one record lacks is a regression too: missing data never passes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from perfkit.analysis.stats import MIN_SAMPLES, Evidence, mean_difference_halfwidth, ratio_evidence
from perfkit.record import EXTRA_PHYSICS_SPS, EXTRA_TIMELINE, SEGMENTS, Finding, Run

DEFAULT_THRESHOLD = 0.05
DEFAULT_MIN_ABS_MS = 0.01

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
    evidence: Evidence | None = None  # the per-step samples' verdict on the change, where there are samples
    noise_ms: float | None = None  # else, for a segment: the spread of the mean step time it is part of
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
        if self.within_noise:
            return "worse (within noise)"
        if self.improvement:
            return "better"
        return "ok"

    @property
    def sureness(self) -> str:
        """How sure the verdict is, in words ("" where nothing could be said)."""
        if self.evidence is not None:
            return self.evidence.describe()
        if self.noise_ms is not None:
            return f"step-time spread +/-{self.noise_ms:.3g} ms (no per-step samples of this segment)"
        return ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(delta=self.delta, delta_pct=_finite(self.delta_pct), verdict=self.verdict,
                 evidence=self.evidence.to_dict() if self.evidence is not None else None, sureness=self.sureness)
        return d


@dataclass
class RunDiff:
    base_label: str
    new_label: str
    threshold: float
    metrics: list[MetricDelta] = field(default_factory=list)
    new_findings: list[Finding] = field(default_factory=list)
    resolved_findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[str]:
        out = []
        for m in self.metrics:
            if m.missing:
                where = {"base": "BASE", "new": "NEW", "both": "either record"}[m.missing]
                out.append(f"{m.metric}: not measured in {where} (a gate cannot pass on missing data)")
            elif m.regression:
                sure = f"; {m.sureness}" if m.sureness else ""
                out.append(f"{m.metric}: {_fmt(m.base)} -> {_fmt(m.new)}{m.unit and ' ' + m.unit} "
                           f"({_pct(m.delta_pct)}, {m.better} is better{sure})")
        out += [f"new {f.kind} finding: {f.op} at {f.site} ({f.per_step:g}/step)" for f in self.new_findings]
        return out

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": self.base_label,
            "new": self.new_label,
            "threshold": self.threshold,
            "regressed": self.regressed,
            "regressions": self.regressions,
            "metrics": [m.to_dict() for m in self.metrics],
            "new_findings": [asdict(f) for f in self.new_findings],
            "resolved_findings": [asdict(f) for f in self.resolved_findings],
            "notes": self.notes,
        }


def finding_key(f: Finding) -> tuple:
    """Identity of a finding site across two runs. Line numbers shift with unrelated edits, so the
    key is the operation, file and function (plus the source text when both runs have it)."""
    return (f.kind, f.op, f.path, f.function, f.code)


def _segment_time(run: Run, name: str) -> float | None:
    s = run.segments.get(name)
    if s is None:
        return None
    return s.gpu_ms_per_step if s.gpu_ms_per_step is not None else s.cpu_ms_per_step


def _segment_clock(base: Run, new: Run, name: str) -> str:
    b, n = base.segments.get(name), new.segments.get(name)
    if b is not None and n is not None and b.gpu_ms_per_step is not None and n.gpu_ms_per_step is not None:
        return "gpu"
    return "cpu"


def syncs_per_step(run: Run) -> float:
    """Measured syncs per step: the segments' counters, or the findings where those are larger
    (a run whose counters were not taken still has attributed sites)."""
    return max(sum(s.syncs_per_step for s in run.segments.values()), run.syncs_per_step)


def allocs_per_step(run: Run) -> float:
    return max(sum(s.allocs_per_step for s in run.segments.values()), run.allocs_per_step)


def _segment_samples(run: Run, name: str, clock: str) -> list[float] | None:
    """Per-step times of one segment from the record's timeline (0 in a step it did not run in),
    or None when the timeline covers fewer than MIN_SAMPLES steps."""
    timeline = run.extra.get(EXTRA_TIMELINE)
    if not isinstance(timeline, list):
        return None
    per_step: dict[int, float] = {}
    want_gpu = clock == "gpu"
    for e in timeline:
        if not isinstance(e, dict) or bool(e.get("gpu", False)) != want_gpu:
            continue
        try:
            step, dur = int(e["step"]), float(e["dur_ms"])
        except (KeyError, TypeError, ValueError):
            return None
        per_step.setdefault(step, 0.0)
        if e.get("segment") == name:
            per_step[step] += dur
    return list(per_step.values()) if len(per_step) >= MIN_SAMPLES else None


def _throughput_missing(run: Run) -> bool:
    return _num(run.sps) is None or not run.steps


def diff_runs(
    base: Run,
    new: Run,
    threshold: float = DEFAULT_THRESHOLD,
    min_abs_ms: float = DEFAULT_MIN_ABS_MS,
    base_label: str = "base",
    new_label: str = "new",
) -> RunDiff:
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    d = RunDiff(base_label=base_label, new_label=new_label, threshold=threshold)
    if base.num_envs != new.num_envs:
        d.notes.append(f"num_envs differs ({base.num_envs} vs {new.num_envs}): SPS and per-step times are not like for like")
    if base.machine.get("device") != new.machine.get("device"):
        d.notes.append(f"measured on different devices ({base.machine.get('device')} vs {new.machine.get('device')})")
    for r, label in ((base, base_label), (new, new_label)):
        if r.status != "complete":
            d.notes.append(f"{label} run is {r.status!r}, not complete")
    sampled = len(base.step_times_ms) >= MIN_SAMPLES and len(new.step_times_ms) >= MIN_SAMPLES
    if not sampled:
        short = [label for r, label in ((base, base_label), (new, new_label)) if len(r.step_times_ms) < MIN_SAMPLES]
        d.notes.append(f"fewer than {MIN_SAMPLES} per-step samples in {' and '.join(short)}: time metrics are judged "
                       "on the threshold alone, not on the runs' spread")

    def evidence(stat: str) -> Evidence | None:
        return ratio_evidence(base.step_times_ms, new.step_times_ms, stat) if sampled else None

    step_noise = mean_difference_halfwidth(base.step_times_ms, new.step_times_ms) if sampled else None

    def add(metric, b, n, better, unit="", gate=True, abs_floor=0.0, ev=None, noise_ms=None, required=False):
        m = MetricDelta(metric, _num(b), _num(n), better, unit, gate)
        if m.base is not None and m.new is not None:
            worse = (m.new - m.base) if better == LOWER else (m.base - m.new)
            rel_limit = threshold * abs(m.base)
            m.worse = worse > rel_limit and worse > abs_floor
            better_enough = -worse > rel_limit and -worse > abs_floor
            if ev is not None:
                m.evidence = ev
                beyond, beyond_better = ev.worse, (ev.hi < 1.0 if ev.higher_is_worse else ev.lo > 1.0)
            elif noise_ms is not None:
                m.noise_ms = noise_ms
                beyond, beyond_better = worse > noise_ms, -worse > noise_ms
            else:
                beyond = beyond_better = True  # nothing to weigh the change against: the threshold decides
            m.within_noise = m.worse and not beyond
            m.regression = gate and m.worse and beyond
            m.improvement = better_enough and beyond_better
        elif required:
            m.missing = "both" if m.base is None and m.new is None else "base" if m.base is None else "new"
            m.regression = True
        d.metrics.append(m)
        return m

    unit = "env steps/s" if base.num_envs is not None and new.num_envs is not None else "steps/s"
    mean_ev = evidence("mean")
    add("sps", None if _throughput_missing(base) else base.sps, None if _throughput_missing(new) else new.sps,
        HIGHER, unit, ev=mean_ev, required=True)
    if EXTRA_PHYSICS_SPS in base.extra or EXTRA_PHYSICS_SPS in new.extra:
        add("physics_sps", base.extra.get(EXTRA_PHYSICS_SPS), new.extra.get(EXTRA_PHYSICS_SPS), HIGHER, "physics steps/s",
            ev=mean_ev)
    for q, stat in (("p50", "median"), ("p99", "p99")):
        add(f"step_ms.{q}", base.step_ms.get(q), new.step_ms.get(q), LOWER, "ms", abs_floor=min_abs_ms, ev=evidence(stat),
            required=q in base.step_ms or q in new.step_ms)
    if bool(base.segments) != bool(new.segments):
        m = MetricDelta("segments", None, None, LOWER, "ms/step")
        m.missing, m.regression = ("new" if base.segments else "base"), True
        d.metrics.append(m)
    names = [s for s in SEGMENTS if s in base.segments or s in new.segments]
    names += sorted((set(base.segments) | set(new.segments)) - set(SEGMENTS))
    for name in names if base.segments and new.segments else []:
        clock = _segment_clock(base, new, name)
        b, n = base.segments.get(name), new.segments.get(name)
        bt = (b.gpu_ms_per_step if clock == "gpu" else b.cpu_ms_per_step) if b else None
        nt = (n.gpu_ms_per_step if clock == "gpu" else n.cpu_ms_per_step) if n else None
        bs, ns = _segment_samples(base, name, clock), _segment_samples(new, name, clock)
        ev = ratio_evidence(bs, ns, "mean") if bs is not None and ns is not None else None
        add(f"segment.{name}.{clock}_ms", bt if b else 0.0, nt if n else 0.0, LOWER, "ms/step", abs_floor=min_abs_ms,
            ev=ev, noise_ms=None if ev is not None else step_noise)
    add("syncs_per_step", syncs_per_step(base), syncs_per_step(new), LOWER)
    add("allocs_per_step", allocs_per_step(base), allocs_per_step(new), LOWER)
    add("memory_bytes", base.peak_memory()[0], new.peak_memory()[0], LOWER, "bytes")
    add("warmup_s", base.warmup_s, new.warmup_s, LOWER, "s", gate=False)

    base_keys = {finding_key(f) for f in base.findings}
    new_keys = {finding_key(f) for f in new.findings}
    d.new_findings = [f for f in new.findings if finding_key(f) not in base_keys]
    d.resolved_findings = [f for f in base.findings if finding_key(f) not in new_keys]
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
    if v is None:
        return "-"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.4g}"


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
    from perfkit.analysis.knee import find_knee

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

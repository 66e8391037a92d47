"""How sure a difference is. Between runs (the compare gate's time test, :func:`between_runs`): Welch's
t on one value per run. Within a run (sweeps' points, one run each): bootstrap confidence intervals
of a ratio of statistics of per-step samples (step times, or a segment's time in each step).

A training loop's step times are a mixture: ordinary env/policy steps, and every few steps a learner
update ten times longer. How many update steps a run holds is fixed by its schedule, not by chance,
so resampling steps freely (an i.i.d. bootstrap) would invent runs with twice or half the updates
and make every interval uselessly wide. The resampling here is stratified: the sorted step times are
cut wherever one is more than ``HEAVY`` times the one below it (a gap no noise bridges), and each
stratum is resampled with its own count kept. Within a stratum steps are exchangeable.

The resampling is seeded, so the same two records always give the same interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

from perfkit.student_t import t_quantile, t_sf

HEAVY = 3.0  # a jump of this factor between consecutive sorted step times separates two kinds of step
MIN_SAMPLES = 10  # fewer per-step samples than this on either side: no interval
N_BOOT = 2000
CONFIDENCE = 0.95
_CHUNK = 2_000_000  # resampled values held at once (memory bound for long runs)


@dataclass
class Evidence:
    """The ratio ``stat(new) / stat(base)`` of per-step samples and its bootstrap interval."""

    stat: str  # "mean" | "median" | "p99"
    ratio: float
    lo: float
    hi: float
    p_not_worse: float  # one-sided: share of resampled ratios on the not-worse side (small = surely worse)
    n_base: int
    n_new: int
    higher_is_worse: bool = True  # step times: a ratio above 1 is a slowdown

    @property
    def worse(self) -> bool:
        """The whole interval lies on the worse side of 1: the change is beyond both runs' spread."""
        return self.lo > 1.0 if self.higher_is_worse else self.hi < 1.0

    def describe(self) -> str:
        p = "p < 0.001" if self.p_not_worse < 1e-3 else f"p = {self.p_not_worse:.3f}"
        return (f"{CONFIDENCE:.0%} CI of the {self.stat} step-time ratio {self.lo:.3f}-{self.hi:.3f} "
                f"({self.n_base} vs {self.n_new} steps; {p} that it is not slower)")

    def to_dict(self) -> dict:
        return {"stat": self.stat, "ratio": self.ratio, "ci": [self.lo, self.hi], "confidence": CONFIDENCE,
                "p_not_worse": self.p_not_worse, "n_base": self.n_base, "n_new": self.n_new,
                "beyond_spread": self.worse}


def _stat_fn(stat: str) -> Callable:
    import numpy as np

    if stat == "mean":
        return lambda a: np.mean(a, axis=-1)
    if stat == "median":
        return lambda a: np.median(a, axis=-1)
    if stat == "p99":
        return lambda a: np.quantile(a, 0.99, axis=-1)  # linear interpolation, as the records' p99
    raise ValueError(f"unknown statistic {stat!r}")


def strata(x) -> list:
    """``x`` sorted and cut where a value exceeds the one below it ``HEAVY``-fold (non-positive
    values stay with the smallest)."""
    import numpy as np

    v = np.sort(np.asarray(x, dtype=float))
    pos = np.maximum(v, np.finfo(float).tiny)
    cuts = np.nonzero((v[1:] > 0) & (pos[1:] > HEAVY * pos[:-1]))[0] + 1
    return [part for part in np.split(v, cuts) if len(part)]


def _resampled_stats(x, stat: Callable, n_boot: int, rng):
    """``n_boot`` values of ``stat`` over stratified resamples of ``x`` (each kind of step kept apart)."""
    import numpy as np

    groups = strata(x)
    out = np.empty(n_boot)
    per = max(1, _CHUNK // len(x))
    for start in range(0, n_boot, per):
        b = min(per, n_boot - start)
        parts = [g[rng.integers(0, len(g), size=(b, len(g)))] for g in groups]
        out[start:start + b] = stat(np.concatenate(parts, axis=1))
    return out


def ratio_evidence(base: Sequence[float], new: Sequence[float], stat: str = "mean", *, higher_is_worse: bool = True,
                   n_boot: int = N_BOOT, seed: int = 0) -> Evidence | None:
    """Evidence for ``stat(new) / stat(base)``; None when either side has fewer than MIN_SAMPLES
    finite samples or a statistic is not positive."""
    import numpy as np

    x = np.asarray([v for v in base if isinstance(v, (int, float)) and math.isfinite(v)], dtype=float)
    y = np.asarray([v for v in new if isinstance(v, (int, float)) and math.isfinite(v)], dtype=float)
    if len(x) < MIN_SAMPLES or len(y) < MIN_SAMPLES:
        return None
    f = _stat_fn(stat)
    sx, sy = float(f(x)), float(f(y))
    if sx <= 0 or sy <= 0:
        return None
    rng = np.random.default_rng(seed)
    bx = _resampled_stats(x, f, n_boot, rng)
    by = _resampled_stats(y, f, n_boot, rng)
    ok = bx > 0
    r = by[ok] / bx[ok]
    alpha = (1.0 - CONFIDENCE) / 2
    lo, hi = (float(q) for q in np.quantile(r, [alpha, 1.0 - alpha]))
    not_worse = float(np.mean(r <= 1.0)) if higher_is_worse else float(np.mean(r >= 1.0))
    return Evidence(stat=stat, ratio=sy / sx, lo=lo, hi=hi, p_not_worse=not_worse, n_base=len(x), n_new=len(y),
                    higher_is_worse=higher_is_worse)


def mean_difference_halfwidth(base: Sequence[float], new: Sequence[float], *, n_boot: int = N_BOOT,
                              seed: int = 0) -> float | None:
    """Half the width of the bootstrap interval of ``mean(new) - mean(base)`` (ms): the spread of the
    two runs' mean step time. None without MIN_SAMPLES samples on both sides."""
    import numpy as np

    x = np.asarray([v for v in base if isinstance(v, (int, float)) and math.isfinite(v)], dtype=float)
    y = np.asarray([v for v in new if isinstance(v, (int, float)) and math.isfinite(v)], dtype=float)
    if len(x) < MIN_SAMPLES or len(y) < MIN_SAMPLES:
        return None
    rng = np.random.default_rng(seed)
    f = _stat_fn("mean")
    d = _resampled_stats(y, f, n_boot, rng) - _resampled_stats(x, f, n_boot, rng)
    alpha = (1.0 - CONFIDENCE) / 2
    lo, hi = np.quantile(d, [alpha, 1.0 - alpha])
    return float(hi - lo) / 2


# ---- between runs: each run one observation ----------------------------------------------------------
#
# Load on a shared machine drifts between runs far more than within one, so a time gate tests the
# runs' own values (each run's SPS, p50, a segment's ms/step), never the steps inside one run:
# Welch's t on the run-level values, its interval on the difference of the means, expressed as a
# share of BASE's mean, which is exactly the change column's quantity ``mean(new) / mean(base) - 1``.

MIN_RUNS = 3  # fewer runs than this on either side: the change is shown, never tested


@dataclass
class RunsEvidence:
    """The relative change ``mean(new) / mean(base) - 1`` of run-level values and its Welch interval."""

    change: float
    lo: float
    hi: float
    p_not_worse: float  # one-sided Welch p that the change is not on the worse side (small = surely worse)
    n_base: int
    n_new: int
    higher_is_worse: bool = True

    @property
    def worse(self) -> bool:
        """The whole interval lies on the worse side of no change."""
        return self.lo > 0.0 if self.higher_is_worse else self.hi < 0.0

    @property
    def better(self) -> bool:
        return self.hi < 0.0 if self.higher_is_worse else self.lo > 0.0

    def describe(self) -> str:
        p = "p < 0.001" if self.p_not_worse < 1e-3 else f"p = {self.p_not_worse:.3f}"
        return (f"{CONFIDENCE:.0%} CI of the change between runs {self.lo:+.1%} to {self.hi:+.1%} "
                f"({self.n_base} vs {self.n_new} runs; {p} that it is not worse)")

    def to_dict(self) -> dict:
        return {"test": "welch between runs", "change": self.change, "ci": [self.lo, self.hi],
                "confidence": CONFIDENCE, "p_not_worse": self.p_not_worse, "n_base": self.n_base,
                "n_new": self.n_new, "beyond_spread": self.worse}


def between_runs(base: Sequence[float], new: Sequence[float], *, higher_is_worse: bool = True) -> RunsEvidence | None:
    """Welch's test of run-level values (one per run); None with fewer than MIN_RUNS finite values on a
    side or a base mean that is not positive."""
    x = [float(v) for v in base if isinstance(v, (int, float)) and math.isfinite(v)]
    y = [float(v) for v in new if isinstance(v, (int, float)) and math.isfinite(v)]
    if len(x) < MIN_RUNS or len(y) < MIN_RUNS:
        return None
    mx, my = sum(x) / len(x), sum(y) / len(y)
    if mx <= 0:
        return None
    vx = sum((v - mx) ** 2 for v in x) / (len(x) - 1) / len(x)
    vy = sum((v - my) ** 2 for v in y) / (len(y) - 1) / len(y)
    diff, se = my - mx, math.sqrt(vx + vy)
    if se == 0.0:
        lo = hi = diff
        worse_side = diff > 0 if higher_is_worse else diff < 0
        p = 0.0 if worse_side else 1.0
    else:
        df = (vx + vy) ** 2 / ((vx ** 2 / (len(x) - 1) if vx else 0.0) + (vy ** 2 / (len(y) - 1) if vy else 0.0))
        half = t_quantile(1.0 - (1.0 - CONFIDENCE) / 2, df) * se
        lo, hi = diff - half, diff + half
        t = diff / se if higher_is_worse else -diff / se
        p = t_sf(t, df)
    return RunsEvidence(change=diff / mx, lo=lo / mx, hi=hi / mx, p_not_worse=p, n_base=len(x), n_new=len(y),
                        higher_is_worse=higher_is_worse)

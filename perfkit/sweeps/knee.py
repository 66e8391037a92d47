"""Saturation knee of a throughput curve: the env count past which doubling ``num_envs`` stops paying.

A batched simulator's SPS grows almost linearly with the number of worlds while the GPU is
under-occupied, then flattens once it is saturated. The knee is the last env count worth having:
the point from which every further doubling gains less than ``threshold`` (default 10 %) of
throughput. "Every further", not just "the next": a single noisy dip followed by more growth is not
saturation (``first_below`` keeps the first such point for whoever wants it).
Env counts that are not spaced by exactly 2x are normalised to a per-doubling gain, so
``256, 1024, 4096`` (4x steps) and ``256..32768`` (2x steps) give comparable answers.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

DEFAULT_THRESHOLD = 0.10


@dataclass
class Knee:
    """Where the curve saturates. ``num_envs`` is None when it never does within the measured range."""

    num_envs: int | None
    sps: float | None
    threshold: float
    # per interval between consecutive points: (n_from, n_to, gain per doubling)
    gains: list[tuple[int, int, float]] = field(default_factory=list)
    peak_num_envs: int | None = None
    peak_sps: float | None = None
    first_below: int | None = None  # the first point whose next doubling gains < threshold

    @property
    def saturated(self) -> bool:
        return self.num_envs is not None

    def describe(self) -> str:
        if not self.gains and self.peak_num_envs is None:
            return "no knee: no completed points"
        if not self.gains:
            return "no knee: one completed point only"
        pct = f"{self.threshold:.0%}"
        if self.num_envs is None:
            last = self.gains[-1][2]
            low = [g for _, _, g in self.gains if g < self.threshold]
            if not low:
                return f"no knee up to {self.gains[-1][1]} envs: every doubling still gains at least {pct}"
            worst = min(low)
            earlier = (f"an earlier one lost {-worst:.1%} of throughput" if worst < 0
                       else f"an earlier one gained only {worst:+.1%}")
            return (f"no knee up to {self.gains[-1][1]} envs: the last doubling still gains {last:+.1%} "
                    f"(at least {pct}), though {earlier}")
        worst = min(g for n0, _, g in self.gains if n0 >= self.num_envs)
        falls = f"; throughput falls past it (down to {worst:+.1%} per doubling)" if worst < 0 else ""
        return f"knee at {self.num_envs} envs ({self.sps:,.0f} SPS): doubling past it gains less than {pct}{falls}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["gains"] = [list(g) for g in self.gains]
        d["saturated"] = self.saturated
        d["description"] = self.describe()
        return d


def gain_per_doubling(n0: float, sps0: float, n1: float, sps1: float) -> float:
    """Relative SPS gain for one doubling of env count, from two points ``n0 < n1``."""
    if n1 <= n0:
        raise ValueError(f"env counts must increase: {n0} then {n1}")
    if sps0 <= 0:
        return math.inf if sps1 > 0 else 0.0
    if sps1 <= 0:
        return -1.0
    doublings = math.log2(n1 / n0)
    return (sps1 / sps0) ** (1.0 / doublings) - 1.0


def find_knee(
    num_envs: Sequence[int], sps: Sequence[float], threshold: float = DEFAULT_THRESHOLD
) -> Knee:
    """The first env count from which every further doubling gains less than ``threshold``.

    ``num_envs``/``sps`` are the completed points of a sweep (failed or out-of-memory points left
    out); they are sorted here. Duplicated env counts keep the best SPS.
    """
    if not 0 < threshold < 10:
        raise ValueError(f"threshold is a fraction (0.10 for 10%), got {threshold}")
    if len(num_envs) != len(sps):
        raise ValueError(f"{len(num_envs)} env counts but {len(sps)} SPS values")
    best: dict[int, float] = {}
    for n, s in zip(num_envs, sps):
        if s is None or (isinstance(s, float) and math.isnan(s)):
            continue
        n = int(n)
        best[n] = max(float(s), best.get(n, -math.inf))
    pts = sorted(best.items())
    knee = Knee(num_envs=None, sps=None, threshold=threshold)
    if pts:
        peak = max(pts, key=lambda p: p[1])
        knee.peak_num_envs, knee.peak_sps = peak
    for (n0, s0), (n1, s1) in zip(pts, pts[1:]):
        g = gain_per_doubling(n0, s0, n1, s1)
        knee.gains.append((n0, n1, g))
        if knee.first_below is None and g < threshold:
            knee.first_below = n0
    # the knee: the earliest point after which no doubling gains the threshold any more
    for i in range(len(knee.gains)):
        if all(g < threshold for _, _, g in knee.gains[i:]):
            knee.num_envs, knee.sps = pts[i]
            break
    return knee

"""Which steady steps count syncs: every one, or — once the training loop has shown the same syncs in a
few whole periods in a row — one whole period in every few.

Counting a sync costs perfkit its event path at every sync: on a CUDA run the runtime's warning, Python's
warnings machinery and the count — on the H200 inside a manager-based env through rsl_rl ~34 µs a sync, right
after the GPU drained (``scripts/gpu/onoff.py``: a step counting its ~90 syncs took ~18 % longer than a
paused one), most of perfkit's steady cost there. An RL training loop repeats
itself period by period (a rollout of ``num_steps`` env steps, then a learner update), so the syncs of a
few whole periods say what every period does. :class:`SyncGate` (mode ``"periods"``):

* counts every step until the loop's period is known (from the first learner update: the steps before
  it, until the second confirms or corrects it) and then counts it in *blocks* of one period (any
  ``period`` consecutive steps hold one learner update, wherever they start; a wrong estimate puts zero
  or two updates in a block, so blocks disagree and counting goes on);
* once ``AGREE`` blocks in a row agree (each site within :func:`agree`'s tolerance) it pauses
  counting: :func:`perfkit.collectors.hub.pause_syncs` turns the runtime's detection off and the sync
  hooks pass every call straight through;
* then counts one block in every ``RECHECK`` blocks on average (the gap drawn at random, the same draws
  every run: a fixed stride can fall at one phase of the loop's own cycles, episodes timing out together);
  a block that does not agree with the last counted one keeps counting on until ``AGREE`` agree again;
* the record's sync rates are the counted whole blocks', each standing for the steps it stands in for
  (:meth:`GateSummary.rates`).

Mode ``"every-step"`` (the default off CUDA, under ``--verify``, with another sink active, or set by
``[tool.perfkit] sync_counting``) never pauses: the rates are every steady step's. A loop without a
learner update never pauses either (no period to count whole).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from math import sqrt
from typing import Callable

AGREE = 3  # whole periods in a row that must agree before counting pauses
# once paused, one period counted in every RECHECK periods on average (8 until the H200 showed that a counted
# step of the manager env costs ~18 % more than a paused one: the share counted is the steady cost)
RECHECK = 16
SITE_SLACK = 0.25  # a site's count may differ by this share of the larger (or by 2 events) ...
TOTAL_SLACK = 0.05  # ... and a period's total by this share, for two periods to agree


def agree(a: dict[tuple, int], b: dict[tuple, int]) -> bool:
    """Whether two periods' ``{site: events}`` say the same: each site's counts within
    ``max(2, SITE_SLACK x the larger, 2 sqrt(the larger))`` of each other (a site in one period only
    counts 0 in the other), the totals within ``TOTAL_SLACK``.

    A data-dependent site moves from period to period by its own counting noise: rsl_rl's adaptive
    learning rate compares ``kl_mean`` a second time only when the first comparison fails (13 to 29 a
    period on the manager env), a reset's syncs come with the envs that happen to end. On the H200 such
    sites made every recheck of a 40-iteration manager env run disagree with a 25 % slack and counting go
    on for three more periods each time (235-309 of 936 steps counted where 10 % was meant); ``2 sqrt(n)``
    is about two standard deviations of a count of ``n`` events that come at random. A site that appears
    with more than two events, or a total that moves by more than ``TOTAL_SLACK``, is a change of regime.
    The rates of sites that move are estimates from the counted periods (``sites_varying`` in the record):
    on the manager env on the CPU, 256 envs, 30-48 iterations, whose reset syncs vary period to period, the
    total read 1.012-1.015x a run counting every step and 36 of 38 sites within 5 % (1.05-1.08x and 24 of
    38 while the rechecks came at a fixed stride)."""
    if differing(a, b):
        return False
    ta, tb = sum(a.values()), sum(b.values())
    return abs(ta - tb) <= TOTAL_SLACK * max(ta, tb)


def differing(a: dict[tuple, int], b: dict[tuple, int]) -> list[tuple]:
    """The sites whose counts in two periods differ by more than :func:`agree` allows them."""
    out = []
    for k in a.keys() | b.keys():
        n, m = a.get(k, 0), b.get(k, 0)
        big = max(n, m)
        if abs(n - m) > max(2, SITE_SLACK * big, 2 * sqrt(big)):
            out.append(k)
    return out


@dataclass(frozen=True)
class GateSummary:
    """What the gate decided (:meth:`SyncGate.summary`): ``blocks``: the counted whole periods (first and
    last step), ``block_counts``: per block ``{site key (7 fields): [events, {segment: events}]}``, ``on``:
    the steady step ranges syncs were counted in (the last open-ended: ``None``), ``paused``: whether
    counting ever paused (else every steady step counted and the rates are the usual ones),
    ``block_disagreed``: per block, None where it agreed with the block before (or had none to compare
    with: the first, or the first after the period was re-estimated), else the sites outside
    :func:`agree`'s tolerance (empty: only the total moved)."""

    mode: str = "every-step"
    period: int | None = None
    paused: bool = False
    blocks: list[tuple[int, int]] = field(default_factory=list)
    block_counts: list[dict[tuple, list]] = field(default_factory=list)
    on: list[tuple[int, int | None]] = field(default_factory=list)
    block_disagreed: list[list[tuple] | None] = field(default_factory=list)

    @property
    def block_steps(self) -> int:
        return sum(b - a + 1 for a, b in self.blocks)

    def rates(self, last_step: int) -> dict[tuple, tuple[float, dict]]:
        """``{site: (events per step, {segment: events})}`` over the steps from the first block to
        ``last_step``: each block stands for itself and the uncounted steps before it (the stretch it
        ended), the last also for the steps after it — every step stands in once, so a period early in
        the run (resets bunched after a random start) weighs what it is, one period, and a recheck the
        periods it checked."""
        if not self.blocks:
            return {}
        weights, prev = [], None
        for a, b in self.blocks:
            weights.append(b - a + 1 + (a - prev - 1 if prev is not None else 0))
            prev = b
        weights[-1] += max(0, last_step - prev)
        total = sum(weights)
        out: dict[tuple, list] = {}
        for (a, b), w, counts in zip(self.blocks, weights, self.block_counts):
            scale = w / (b - a + 1)
            for k, (n, segs) in counts.items():
                e = out.setdefault(k, [0.0, {}])
                e[0] += n * scale
                for sg, m in segs.items():
                    e[1][sg] = e[1].get(sg, 0) + m
        return {k: (n / total, segs) for k, (n, segs) in out.items()}


def steady_syncs(counts: dict[tuple, list]) -> dict[tuple, tuple[int, dict]]:
    """``{site key (7 fields): (events, {segment: events})}`` of the steady syncs in a sink's counts."""
    out: dict[tuple, tuple[int, dict]] = {}
    for key, (n, _nbytes, segs) in counts.items():
        if key[0] == "sync" and key[7] == "steady":
            out[key[:7]] = (n, dict(segs))
    return out


class SyncGate:
    """Decides, at the scheduler's special boundaries, whether the steps from there on count syncs (see
    module doc). ``counts()`` reads the session sink's counts; ``pause``/``resume`` switch counting."""

    def __init__(self, mode: str, counts: Callable[[], dict[tuple, list]], pause: Callable[[], bool],
                 resume: Callable[[], None]):
        self.mode = mode
        self._counts = counts
        self._pause = pause
        self._resume = resume
        self.period: int | None = None
        self.counting = True
        self.paused_ever = False
        self.block_start: int | None = None  # the first step of the block being counted (or skipped)
        self._base: dict[tuple, tuple[int, dict]] = {}  # steady counts when the counted block began
        self.last: dict[tuple, int] | None = None  # the last counted block's {site: events}
        self.streak = 0  # counted blocks in a row that agreed with the one before
        self.blocks: list[tuple[int, int]] = []
        self.block_counts: list[dict[tuple, list]] = []  # per block: site -> [events, {segment: events}]
        self.block_disagreed: list[list[tuple] | None] = []  # per block: why it did not agree (GateSummary)
        self.on: list[list] = []  # [first step, last step or None] while counting
        # the periods skipped before each recheck: RECHECK on average, drawn from RECHECK/2 .. 3 RECHECK/2 (the
        # same draws every run) so that a recheck does not fall at one phase of a cycle of the loop's own —
        # episodes that time out together every ~21 periods read +5..8 % at a fixed stride of 16
        self._rng = random.Random(0)
        self._skip = RECHECK - 1

    def next_boundary(self) -> int | None:
        """The next step boundary the gate must see: where the block being counted ends, or the skipped
        stretch before the next counted one (None: none scheduled)."""
        if self.block_start is None or self.period is None:
            return None
        return self.block_start + (self.period if self.counting else self._skip * self.period)

    def at(self, idx: int, steady: bool, period: int | None) -> None:
        """Step ``idx`` begins (a special boundary); ``period``: the loop's period as known now (from the
        first learner update on, an estimate until a second confirms it; None: not known yet)."""
        if not steady:
            return
        if not self.on:
            self.on.append([idx, None])
        if self.mode != "periods" or period is None or period < 1:
            return
        if period != self.period and self.counting:  # first known, or the estimate was wrong: start over
            self.period = period
            self.last, self.streak = None, 0
            self._begin_block(idx)
            return
        end = self.next_boundary()
        if idx < end:
            return
        if not self.counting:  # the skipped stretch is over: count one block
            self._switch_on(idx)
            self._begin_block(idx)
            return
        if idx > end:  # the boundary came late (a step not seen: cannot happen with the clock's schedule)
            self._begin_block(idx)
            return
        self._close_block(idx)
        if self.streak >= AGREE - 1:
            if self._pause():
                self.counting = False
                self._skip = self._rng.randint(RECHECK // 2, RECHECK + RECHECK // 2) - 1  # periods before the recheck
                self.paused_ever = True
                self.on[-1][1] = idx - 1
                self.block_start = idx
                return
        self._begin_block(idx)

    def _begin_block(self, idx: int) -> None:
        self.block_start = idx
        self._base = steady_syncs(self._counts())

    def _close_block(self, idx: int) -> None:
        counts: dict[tuple, list] = {}
        for k, (n, segs) in steady_syncs(self._counts()).items():
            n0, segs0 = self._base.get(k, (0, {}))
            if n > n0:
                counts[k] = [n - n0, {sg: m - segs0.get(sg, 0) for sg, m in segs.items() if m > segs0.get(sg, 0)}]
        self.blocks.append((self.block_start, idx - 1))
        self.block_counts.append(counts)
        block = {k: c[0] for k, c in counts.items()}
        agreed = self.last is not None and agree(self.last, block)
        self.block_disagreed.append(None if agreed or self.last is None else differing(self.last, block))
        self.streak = self.streak + 1 if agreed else 0
        self.last = block

    def _switch_on(self, idx: int) -> None:
        self._resume()
        self.counting = True
        self.on.append([idx, None])

    def stop(self) -> None:
        """The session ends: counting is switched back on (the hooks are about to be removed)."""
        if not self.counting:
            self._resume()
            self.counting = True

    def summary(self) -> GateSummary:
        return GateSummary(mode=self.mode, period=self.period, paused=self.paused_ever, blocks=list(self.blocks),
                           block_counts=list(self.block_counts), on=[(a, b) for a, b in self.on],
                           block_disagreed=list(self.block_disagreed))


__all__ = ["AGREE", "RECHECK", "GateSummary", "SyncGate", "agree", "differing", "steady_syncs"]

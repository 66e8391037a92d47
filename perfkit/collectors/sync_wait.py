"""Per-sync wait: how long each real sync blocked the host, and how much host work followed it.

:data:`perfkit.collectors.hub.wait_listeners` report every real (not would-sync) sync on the main
thread with the host time spent inside the call. On steady, timed steps :class:`SyncWaits` keeps, per
site, the calls, the summed wait, and the host time from the end of the sync to the next sync of the
same step — or to the step's end, known once the step has closed. The cost model prices removing one
sync with it (the GPU work it waited for overlaps only with the host work before the next sync).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from perfkit.collectors.steps import StepClock


@dataclass(frozen=True)
class WaitSummary:
    """What :class:`SyncWaits` measured (:meth:`SyncWaits.summary`)."""

    sites: dict[tuple, list] = field(default_factory=dict)  # (file, line) -> [calls, wait_s, gap_s, gaps measured]


class SyncWaits:
    def __init__(self, clock: StepClock, timed: Callable[[int], bool]):
        self.clock = clock
        self.timed = timed
        self.sites: dict[tuple, list] = {}  # (file, line) -> [calls, wait_s, gap_s, gaps measured]
        self._pending: tuple | None = None  # the last timed sync, its gap to the next not yet known

    def on_wait(self, site: tuple, t0: float, t1: float) -> None:
        """A real sync at ``site`` blocked the host from ``t0`` to ``t1``."""
        clock = self.clock
        idx = clock.index
        if self._pending is not None:
            self._resolve_gap(t0, idx)
        if idx <= clock.warmup_steps or not self.timed(idx):
            return
        key = (site[0], site[1])
        acc = self.sites.get(key)
        if acc is None:
            acc = self.sites[key] = [0, 0.0, 0.0, 0]
        acc[0] += 1
        acc[1] += t1 - t0
        self._pending = (key, t1, idx, clock.begin_t, len(clock.times))

    def _resolve_gap(self, t_next: float | None, idx_now: int) -> None:
        """The host time from the end of the pending sync to the next sync in its step, else to its step's
        end (its duration is ``clock.times[k]`` once the step closed); unknown (dropped) otherwise."""
        key, t_end, idx, t_begin, k = self._pending
        self._pending = None
        times = self.clock.times
        if t_next is not None and idx_now == idx:
            gap = t_next - t_end
        elif len(times) > k:
            gap = t_begin + times[k] - t_end
        else:
            return
        acc = self.sites[key]
        acc[2] += max(0.0, gap)
        acc[3] += 1

    def finish(self) -> dict[tuple, list]:
        """Resolve the last pending gap (if its step closed) and return the per-site sums."""
        if self._pending is not None:
            self._resolve_gap(None, -1)
        return self.sites

    def summary(self) -> WaitSummary:
        return WaitSummary(sites=dict(self.finish()))

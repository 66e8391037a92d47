"""Per-sync wait: how long each real sync blocked the host, and how much host work followed it.

:data:`perfkit.collectors.hub.wait_listeners` report every real (not would-sync) sync on the main
thread with the host time spent inside the call. On steady, timed steps :class:`SyncWaits` keeps, per
site, the calls, the summed wait, and the host time from the end of the sync to the next sync of the
same step — or to the step's end, known once the step has closed. The cost model prices removing one
sync with it (the GPU work it waited for overlaps only with the host work before the next sync).

Fixing a finding removes every call at its site, so the unit of saving is a *burst*: a run of
consecutive timed syncs at one site within one step, no other sync between. The queued GPU work any of
its calls waited for can overlap with all the host work up to the next sync of another site (or the
step's end), and with nothing after it, so a burst saves at most ``min(W, G + n * overhead)`` (``W``
its summed waits, ``G`` its summed gaps after, ``n`` its calls, ``overhead`` the fixed part of a call:
the round trip, a copy; known only to the cost model). Averaging over the whole site instead lets the
host work after one burst hide the wait of another (a site that waits for the physics once a step
and a round trip elsewhere). The burst's minimum needs the overhead, so each closed burst is added to
one of two classes, by whether its waits fit in its gaps (``W <= G``: it saves ``W`` whatever the
overhead) or not: per site ``[W, G, n]`` of each class (:data:`SITE_FIELDS`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from perfkit.collectors.steps import StepClock


# one site's sums (seconds): all its timed calls, then its closed bursts in two classes (module doc)
SITE_FIELDS = ("calls", "wait_s", "gap_s", "gaps",  # every timed call; the gaps that were measured
               "fit_wait_s", "fit_gap_s", "fit_calls",  # bursts whose waits fit in their gaps (W <= G)
               "over_wait_s", "over_gap_s", "over_calls",  # bursts that waited longer than their gaps
               "bursts")  # closed bursts (a burst whose last gap was never measured is dropped)


# where each class of bursts starts in a site's sums (its wait_s, gap_s, calls follow), and the bursts' count
FIT, OVER, BURSTS = SITE_FIELDS.index("fit_wait_s"), SITE_FIELDS.index("over_wait_s"), SITE_FIELDS.index("bursts")


def _new_site() -> list:
    return [0.0 if name.endswith("_s") else 0 for name in SITE_FIELDS]


@dataclass(frozen=True)
class WaitSummary:
    """What :class:`SyncWaits` measured (:meth:`SyncWaits.summary`)."""

    sites: dict[tuple, list] = field(default_factory=dict)  # (file, line) -> sums in SITE_FIELDS order


class SyncWaits:
    def __init__(self, clock: StepClock, timed: Callable[[int], bool]):
        self.clock = clock
        self.timed = timed
        self.sites: dict[tuple, list] = {}  # (file, line) -> sums in SITE_FIELDS order
        self._pending: tuple | None = None  # the last timed sync, its gap to the next not yet known
        self._burst: list | None = None  # the open burst: [site, step index, wait_s, gap_s, calls, complete]

    def on_wait(self, site: tuple, t0: float, t1: float) -> None:
        """A real sync at ``site`` blocked the host from ``t0`` to ``t1``."""
        clock = self.clock
        idx = clock.index
        if self._pending is not None:
            self._resolve_gap(t0, idx)
        key = (site[0], site[1])
        burst = self._burst
        if burst is not None and (burst[0] != key or burst[1] != idx):
            self._close_burst()
        if idx <= clock.warmup_steps or not self.timed(idx):
            return
        acc = self.sites.get(key)
        if acc is None:
            acc = self.sites[key] = _new_site()
        acc[0] += 1
        acc[1] += t1 - t0
        if self._burst is None:
            self._burst = [key, idx, 0.0, 0.0, 0, True]
        self._burst[2] += t1 - t0
        self._burst[4] += 1
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
            if self._burst is not None:
                self._burst[5] = False  # its last gap is unknown: the burst cannot be priced
            return
        acc = self.sites[key]
        acc[2] += max(0.0, gap)
        acc[3] += 1
        if self._burst is not None:
            self._burst[3] += max(0.0, gap)

    def _close_burst(self) -> None:
        """Add the open burst (every gap of it measured) to its site's class (module doc)."""
        key, _, wait, gap, calls, complete = self._burst
        self._burst = None
        if not complete:
            return
        acc = self.sites[key]
        i = FIT if wait <= gap else OVER
        acc[i] += wait
        acc[i + 1] += gap
        acc[i + 2] += calls
        acc[BURSTS] += 1

    def finish(self) -> dict[tuple, list]:
        """Resolve the last pending gap (if its step closed), close the open burst and return the per-site sums."""
        if self._pending is not None:
            self._resolve_gap(None, -1)
        if self._burst is not None:
            self._close_burst()
        return self.sites

    def summary(self) -> WaitSummary:
        return WaitSummary(sites=dict(self.finish()))

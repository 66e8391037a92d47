"""Sampled steps: where the costly collectors run, and when.

Counting every allocation (a ``TorchFunctionMode`` on every torch call), tracing lines for per-env
loops and checking Warp launch streams cost far too much to leave on; :class:`Sampler` turns them on
for the steps the session samples and off again, and keeps which steps those were;
:class:`SampleSchedule` says which steps those are (and prices its stride).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perfkit.collectors.loops import LineSampler
from perfkit.collectors.streams import StreamMonitor


@dataclass(frozen=True)
class SampleSummary:
    """What the :class:`Sampler` counted on the sampled steps (:meth:`Sampler.summary`)."""

    steps: list[int] = field(default_factory=list)  # the steps sampled, in order
    counted: int = 0  # of them, the steps the aggregate counts below are over
    hooked_calls: int = 0  # calls of torch functions the sync hooks wrap
    cuda_alloc: list[int] = field(default_factory=list)  # the CUDA allocator's allocations on each sampled step
    op_counts: dict[tuple[str, int], int] = field(default_factory=dict)  # (file, line) -> torch calls
    line_counts: dict[tuple, list] = field(default_factory=dict)  # (code, line) -> [n, {segment: n}]
    line_entries: dict[tuple, int] = field(default_factory=dict)  # (code, loop header) -> entries
    line_steps: int = 0  # steps the line counts are over
    line_trips: dict[tuple, set] = field(default_factory=dict)  # (code, loop header) -> distinct trip counts per entry
    interop_sites: dict[tuple, int] = field(default_factory=dict)  # Warp/torch interop calls on other streams
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ScheduleSummary:
    """Which steps the :class:`SampleSchedule` sampled and what for (:meth:`SampleSchedule.summary`)."""

    weights: dict[int, int] = field(default_factory=dict)  # sampled step -> the steps it stands for
    blocks: list[tuple[int, int]] = field(default_factory=list)  # whole periods sampled: (first, last step)
    every: int | None = None  # the stride at the end (None: explicit sampled steps)
    extra_s: float = 0.0  # seconds the sampled steps took beyond a typical timed step


class Sampler:
    def __init__(self, torch: Any, lines: LineSampler, streams: StreamMonitor):
        self.torch = torch
        self.lines = lines
        self.streams = streams
        self.active = False
        self.done: list[int] = []  # the steps sampled so far
        self.counted = 0  # of them, the steps the counts below are over (since the last forget())
        self.op_counts: dict[tuple[str, int], int] = {}  # (file, line) -> torch calls on sampled steps
        self.cuda_alloc: list[int] = []  # the CUDA allocator's allocations on each sampled step
        self.hooked_calls = 0  # calls of torch functions perfkit's sync hooks wrap, over the sampled steps
        self._hooked_names: frozenset[str] | None = None
        self.notes: list[str] = []
        self._index = 0
        self._mode: Any = None
        self._cuda_start: int | None = None

    def use_torch(self, torch: Any) -> None:
        """The torch module to count allocations with (None: torch is not installed)."""
        self.torch = torch

    def start(self, frame: Any, index: int) -> None:
        if self.active:
            return
        self.active = True
        self._index = index
        self._cuda_start = None
        if self.torch is not None:
            from perfkit.collectors.alloc import alloc_mode, cuda_alloc_counter

            self._cuda_start = cuda_alloc_counter()
            self._mode = alloc_mode(self.op_counts, exact=False)  # results only: the allocator is read per step
            if self._hooked_names is None:
                from perfkit.collectors.torch_sync import PATCHES

                self._hooked_names = frozenset(p.name for p in PATCHES)
            self._mode.hooked_names = self._hooked_names
            self._mode.__enter__()
        self.lines.start(frame)
        self.streams.start()

    def forget(self) -> None:
        """Drop what the steps sampled so far counted in aggregate (line counts, torch calls per line,
        the CUDA allocator's counts, hooked calls): the samples from here on stand for the run (the
        first whole period of the loop begins; events kept per step are weighted by the schedule)."""
        lines = self.lines
        lines.counts.clear()
        lines.entries.clear()
        lines.trips.clear()
        lines.steps = 0
        self.op_counts.clear()
        self.cuda_alloc.clear()
        self.hooked_calls = 0
        self.counted = 0

    def stop(self) -> None:
        if not self.active:
            return
        self.lines.stop()
        self.streams.stop()
        if self._mode is not None:
            try:
                self._mode.__exit__(None, None, None)
            except Exception as e:  # another mode was pushed on top and not popped
                self.notes.append(f"allocation sampling could not be closed cleanly: {e}")
            self.hooked_calls += self._mode.hooked
            self._mode = None
            from perfkit.collectors.alloc import cuda_alloc_counter

            end = cuda_alloc_counter()
            if end is not None and self._cuda_start is not None:
                self.cuda_alloc.append(end - self._cuda_start)
        self.done.append(self._index)
        self.counted += 1
        self.active = False

    def summary(self) -> SampleSummary:
        lines = self.lines
        notes = list(self.notes)
        if lines.skipped_reason:
            notes.append(f"per-env loop sampling skipped: {lines.skipped_reason}")
        return SampleSummary(
            steps=list(self.done), counted=self.counted, hooked_calls=self.hooked_calls, cuda_alloc=list(self.cuda_alloc),
            op_counts=dict(self.op_counts), line_counts=lines.counts, line_entries=lines.entries, line_steps=lines.steps,
            line_trips=lines.trips, interop_sites=dict(self.streams.interop_sites), notes=notes)


class SampleSchedule:
    """Which steady steps are sampled, and the steps each stands for.

    Spread mode (``explicit`` None): the first steady step (``first``), then every ``every``-th step
    while the loop's period is not known; once it is (``period``: env steps from one learner update to
    the next, which the session sets), a sample is a *block* of ``period`` consecutive steps — the
    rollout steps and the update — and blocks start ``every * period`` steps apart, so each sampled
    step stands for ``every`` steps and work done once per period is sampled at its exact share. Once
    a whole block was sampled, the single steps sampled before the period was known stand for nothing
    (:meth:`weights`). The stride widens while sampling costs more than ``budget`` of the run: the
    median of what a sampled step costs beyond a typical timed step, the very first sampled step left
    out (it pays the one-off costs: first calls, code analysed once), so no one-off cost prices the
    stride. Where something cheaper counts whole periods exactly (on CUDA, the caching allocator's count
    at each learner update: :attr:`whole_periods` False), samples stay single steps and attribute what
    that count totals; the first sample's cost then prices the stride too, so that sampling costs no more
    than ``budget`` of even a short run. Explicit mode: exactly the ``explicit`` steps, each standing for itself. The session tells
    it each timed step's duration (:meth:`timed_step`), each sampled step's (:meth:`sample_done`) and
    the steps the learner ran in (:meth:`learn_period`); it never reads a clock."""

    RECENT = 64  # timed steps kept for the typical step time

    def __init__(self, first: int, every: int, budget: float, explicit: tuple[int, ...] | None = None):
        self.explicit = explicit
        self.every = max(1, int(every))
        self.budget = budget
        self.first = first
        self.next = min(explicit, default=0) if explicit is not None else first
        self.period: int | None = None  # env steps per period of the loop, once known
        self.sampled: dict[int, int] = {}  # sampled step -> the steps it stands for (the stride then)
        self.blocks: list[tuple[int, int]] = []  # whole periods sampled: (first step, last step)
        self._block: tuple[int, int, int] | None = None  # the block being sampled: (first, last, weight)
        self._costs: list[float] = []  # seconds each sampled step took beyond a typical step, in order
        self._pending: list[float] = []  # durations of samples taken before a typical step was known
        self._recent: list[float] = []  # the last timed steps (for the typical step time)
        self._learner_seen = 0  # learner steps the period was computed from
        self.whole_periods = True  # False: whole periods are counted elsewhere, samples are single steps

    def learn_period(self, learner_steps: list[int]) -> None:
        """The steps the learner ran in so far: the loop's period, read from the first 16 of them (it
        settles early)."""
        if len(learner_steps) != self._learner_seen and self._learner_seen < 16:
            self._learner_seen = len(learner_steps)
            self.period = loop_period(learner_steps, confirmed=False)

    @property
    def stride(self) -> int | None:
        """The stride at the end, in sampled steps per step (None: explicit sampled steps)."""
        return None if self.explicit is not None else self.every

    def starts_first_block(self, idx: int) -> bool:
        """Whether step ``idx`` (just begun, sampled) starts the first whole period sampled."""
        return not self.blocks and self._block is not None and self._block[0] == idx

    def is_sampled(self, idx: int) -> bool:
        return idx in self.sampled or idx == self.next

    def begin(self, idx: int) -> bool:
        """Step ``idx`` begins: whether it is sampled (and if so, it is recorded with its weight)."""
        if idx == self.next and self._pending and self._block is None:
            self._restride()  # a sample taken before any timed step: price it now, maybe postpone this one
        if idx != self.next:
            return False
        if self.explicit is not None:
            self.sampled[idx] = 1
            return True
        if self._block is None and self.whole_periods and self.period is not None and self.period > 1:
            self._block = (idx, idx + self.period - 1, self.every)
        self.sampled[idx] = self._block[2] if self._block is not None else self.every
        return True

    def timed_step(self, took: float) -> None:
        recent = self._recent
        recent.append(took)
        if len(recent) > self.RECENT:
            del recent[0]

    def sample_done(self, idx: int, took: float) -> None:
        """Sampled step ``idx`` took ``took`` seconds: when is the next one."""
        if self.explicit is not None:
            later = [i for i in self.explicit if i > idx]
            self.next = min(later) if later else 0
            return
        self._pending.append(took)
        block = self._block
        if block is not None and idx < block[1]:
            self._restride()
            self.next = idx + 1
            return
        if block is not None:
            self.blocks.append((block[0], idx))
            self._block = None
        self._restride()
        self._stands_for_the_gap(idx)
        self.next = self._after(idx)

    def _stands_for_the_gap(self, last: int) -> None:
        """The sample that ended at step ``last`` (a single step, or the block ending there) stands for the
        steps until the next one: the stride as it is now, which may have widened while it was taken or
        since (a sample taken before any timed step is priced at the next sample's start)."""
        first = self.blocks[-1][0] if self.blocks and self.blocks[-1][1] == last else last
        for i in range(first, last + 1):
            self.sampled[i] = self.every

    def _after(self, idx: int) -> int:
        """The next sample after the last one, which ended at step ``idx``."""
        if self.blocks and self.blocks[-1][1] == idx:
            first, last = self.blocks[-1]
            return first + self.every * (last - first + 1)
        return idx + self.every

    def _restride(self) -> None:
        """Widen the stride so that sampling costs at most ``budget`` of the run. Samples taken before
        any timed step wait until one is known (and the next sample waits with them). A budget of 1
        (the whole run) never widens the stride."""
        if not self._recent:
            return
        typical = sorted(self._recent)[len(self._recent) // 2]
        self._costs.extend(max(0.0, took - typical) for took in self._pending)
        self._pending.clear()
        if self.budget >= 1 or typical <= 0:
            return
        # the first sampled step paid the one-off costs: it prices the stride only where the samples'
        # counts are not what the run's totals rest on (whole periods counted elsewhere)
        costs = sorted(self._costs[1:] if self.whole_periods else self._costs)
        if not costs:
            return
        need = costs[len(costs) // 2] / (self.budget * typical)
        if need > self.every:
            self.every = next_prime(int(need) + 1)
            if self._block is None:
                last = max(self.sampled) if self.sampled else self.first - 1
                self.next = max(self.next, self._after(last) if self.sampled else last + self.every)
                if self.sampled:
                    self._stands_for_the_gap(last)

    @property
    def extra_s(self) -> float:
        """Seconds the sampled steps took beyond a typical timed step."""
        pending = 0.0
        if self._pending and self._recent:
            typical = sorted(self._recent)[len(self._recent) // 2]
            pending = sum(max(0.0, took - typical) for took in self._pending)
        return sum(self._costs) + pending

    def summary(self) -> ScheduleSummary:
        return ScheduleSummary(weights=self.weights(), blocks=list(self.blocks), every=self.stride, extra_s=self.extra_s)

    def weights(self) -> dict[int, int]:
        """``{sampled step: the steps it stands for}``: once a whole period was sampled, only the steps
        of whole periods stand for any (single steps sampled before the period was known, and a block
        the run's end cut short, stand for none)."""
        if not self.blocks:
            return dict(self.sampled)
        inside = {i for a, b in self.blocks for i in range(a, b + 1)}
        return {i: (w if i in inside else 0) for i, w in self.sampled.items()}


def next_prime(n: int) -> int:
    """The smallest prime >= n: sampling strides stay coprime with the periods programs have (2, 10, 32)."""
    n = max(2, n)
    while any(n % d == 0 for d in range(2, int(n ** 0.5) + 1)):
        n += 1
    return n


def loop_period(learner_steps: list[int], confirmed: bool = True) -> int | None:
    """Env steps per period of the training loop, from the steps during which the learner ran: the
    most common gap between consecutive learner steps when it accounts for at least 3/4 of the gaps.
    With ``confirmed=False`` a single learner step ``s`` also gives an estimate, ``s`` (a loop that
    starts with its rollout updates first after ``s`` steps). None: no period known."""
    if not learner_steps:
        return None
    gaps = [b - a for a, b in zip(learner_steps, learner_steps[1:])]
    if not gaps:
        return None if confirmed else max(1, learner_steps[0])
    best = max(set(gaps), key=gaps.count)
    return best if gaps.count(best) * 4 >= len(gaps) * 3 else None

"""The step scheduler: what every special step boundary does.

The :class:`~perfkit.collectors.steps.StepClock` takes a plain steady step's boundary itself (its fast
path) and hands every other one — warm-up, closing the discovery window, a sampled step, a GPU-timed
or timeline step, ``--verify``, the periodic check for newly imported libraries — to
:meth:`StepScheduler.on_boundary`. The scheduler closes the step that ends there (its time, its sample,
its GPU events, its timeline spans), starts what the new step does and returns its decision
(:class:`~perfkit.collectors.steps.Boundary`): the closing step's time and whether it counts as timed,
the next boundary it must see and when the new step begins — after perfkit's own work here, so that
work is in no step's time. The clock applies the decision: only the clock writes its fields.
"""

from __future__ import annotations

import sys
from time import perf_counter
from typing import Any, Callable

from perfkit.collectors import hub
from perfkit.collectors.gpu_steps import GpuSteps
from perfkit.collectors.patches import Patcher
from perfkit.collectors.sampling import SampleSchedule, Sampler
from perfkit.collectors.segment_rules import SegmentRules
from perfkit.collectors.self_cost import SelfMeter, device_sync_event_us
from perfkit.collectors.steps import Boundary, Discovery, StepClock
from perfkit.collectors.sync_gate import SyncGate
from perfkit.collectors.timing import SegmentClock

POLL_EVERY = 128  # steady-state steps between checks for newly imported libraries to hook


class StepScheduler:
    """Decides each special boundary of ``clock`` (it registers itself as the clock's ``on_boundary``).

    ``config`` is the session's (warm-up, timing stride, timeline steps, segment names); ``on_env`` is
    told the env object of every boundary that has one; ``notes`` collects what the record should say."""

    def __init__(self, config: Any, clock: StepClock, segclock: SegmentClock, schedule: SampleSchedule,
                 sampler: Sampler, gpu: GpuSteps, discovery: Discovery, rules: SegmentRules, patcher: Patcher,
                 meter: SelfMeter, gate: SyncGate, on_env: Callable[[Any], None], notes: list[str]):
        self.config = config
        self.clock = clock
        self.segclock = segclock
        self.schedule = schedule
        self.sampler = sampler
        self.gpu = gpu
        self.discovery = discovery
        self.rules = rules
        self.patcher = patcher
        self.meter = meter
        self.gate = gate
        self.on_env = on_env
        self.notes = notes
        clock.on_boundary = self.on_boundary

    def timed(self, idx: int) -> bool:
        """Whether step ``idx`` counts in the steady-state timing (not warm-up, sampled or --verify)."""
        warmup = self.config.warmup_steps
        return not (idx <= warmup or self.schedule.is_sampled(idx) or self.gpu.verify_holds(idx, warmup))

    def on_boundary(self, now: float, idx: int, obj: Any) -> Boundary:
        """Step ``idx`` begins at ``now``: close the last one, start what this one does, and decide."""
        took, took_timed = self.close_step(now)
        if obj is not None:
            self.on_env(obj)
        closes = not self.discovery.closed and idx > max(self.config.warmup_steps, 1)
        if closes:
            with self.patcher.batch():  # the functions found are wrapped where they are imported in one pass
                self._close_discovery()
        hub.install_available()
        self.rules.poll()
        if not self.sampler.streams.installed:
            self.sampler.streams.install(self.patcher)
        schedule = self.schedule
        schedule.learn_period(self.segclock.learner_steps)
        if self.segclock.learner_allocs:  # the allocator counts whole periods: samples stay single steps
            schedule.whole_periods = False
        sampled = schedule.begin(idx)
        special = self._steady(now, idx, sampled)
        if schedule.next > idx:
            special = min(special, schedule.next)
        gate = self.gate  # counting syncs on whole periods: where the next one begins or ends
        gate.at(idx, idx > self.config.warmup_steps, schedule.period)  # (from the first learner update on)
        gate_next = gate.next_boundary()
        if gate_next is not None and gate_next > idx:
            special = min(special, gate_next)
        if sampled or not self.timed(idx) or not self.timed(idx + 1):
            special = idx + 1
        self.segclock.time_span(self.timed(idx))
        if sampled:  # last: the sampler's tracer must not see perfkit's own work
            if schedule.starts_first_block(idx):
                self.sampler.forget()  # the single steps sampled before stand for nothing from here on
            self.sampler.start(sys._getframe(3), idx)  # the program's frame: here <- clock <- step wrapper <- it
        # the step begins now, after perfkit's own work at this boundary
        t = perf_counter()
        self.segclock.begin_step(t)
        gpu_timed = self.gpu.begin(t)
        kind = ("discovery_close" if closes else "warmup" if idx <= self.config.warmup_steps
                else "verify" if self.gpu.verifying else "sample" if sampled else "gpu_timed" if gpu_timed else "poll")
        self.meter.special(kind, t - now)
        return Boundary(took, took_timed, max(special, idx + 1), t)

    def _steady(self, now: float, idx: int, sampled: bool) -> int:
        """Start what steady step ``idx`` does (GPU timing, timeline, verify); returns the next step the
        scheduler must see."""
        cfg = self.config
        steady_i = idx - cfg.warmup_steps
        if steady_i < 1:
            return idx + 1
        every = cfg.timing_every
        # the next periodic check, and the next GPU-timed (and timeline-traced) step
        special = min(idx + POLL_EVERY - (idx % POLL_EVERY), idx + every - ((steady_i - 1) % every))
        gpu_next = self.gpu.boundary(idx, steady_i, sampled, self.schedule.period)
        # the timeline: the first timeline_steps steady steps, then the GPU-timed ones
        traced = self.segclock.start_trace(now, steady_i <= cfg.timeline_steps or (steady_i - 1) % every == 0)
        return idx + 1 if gpu_next or traced else special

    def close_step(self, now: float, final: bool = False) -> tuple[float | None, bool]:
        """Account the step that runs from the last boundary to ``now`` (a special boundary, or the end
        with ``final``); returns its time (None before the first step) and whether it counts as timed."""
        clock, segclock = self.clock, self.segclock
        idx = clock.index
        if idx == 0:
            segclock.tick(now)
            return None, False
        rewound = False
        if final and not clock.manual and clock.last_end is not None and clock.last_end >= clock.begin_t:
            now = clock.last_end  # auto steps: the last step ends when its call returns
            rewound = segclock.rewind_to_end()
        if not rewound:
            segclock.tick(now)
        segclock.end_trace(idx, now)
        self.gpu.close(rewound, now)  # rewound: its events ran on past the step's end, into the program's teardown
        took = now - clock.begin_t
        if idx in self.schedule.sampled and self.sampler.active:
            self.sampler.stop()
            self.schedule.sample_done(idx, took)
        timed = self.timed(idx)
        if timed:
            self.schedule.timed_step(took)
        if final and segclock.span_open:
            segclock.close_span()
        return took, timed

    def _close_discovery(self) -> None:
        self.discovery.stop()
        try:
            self.rules.wrap_named(self.config.segment_names, sys._getframe(1), modules=self.discovery.modules_seen,
                                  skip=self.discovery.disqualified)
        except Exception as e:  # pragma: no cover - a scan error must not break the program
            self.notes.append(f"name-rule segments could not be applied: {type(e).__name__}: {e}")
        self.rules.finish_policy_discovery()  # (none found without torch)
        # the program has made its device ready by now: price its runtime-reported syncs on the device
        device_price = device_sync_event_us(sys.modules.get("torch"))
        if device_price is not None:
            self.meter.per_call_us["sync_event"] = device_price

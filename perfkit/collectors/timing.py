"""Segment timing: CPU time per segment on every step, GPU time per segment from CUDA events on
sampled steps (resolved lazily), NVTX ranges per segment.

* :class:`SegmentClock` is called on every segment transition (enter/leave) in the main thread and,
  on the steps the session times, charges the elapsed time to the segment that was innermost: a
  ``perf_counter`` read and a dict update, nothing else (on other steps — setup, warm-up, sampled —
  it only notes the segment).
* :class:`CudaEventTimer` records a CUDA event at every transition of a *timed* step (every k-th
  steady step) on torch's current stream; the GPU time between two consecutive events goes to the
  segment that was innermost at the first. Events are read back only once ``event.query()`` says the
  step's last event has completed (polled at later step boundaries), or at the end of the session:
  the profiler never adds a sync to the hot path.
* NVTX: one range per innermost segment (``domain="perfkit"``), so Nsight Systems shows the same
  segments. NVTX calls are no-ops unless a tool is attached; perfkit emits them on every step only
  when one is (``NVTX_INJECTION64_PATH`` set, as ``nsys`` does) or when asked to (``nvtx = "always"``),
  and otherwise only on timed steps.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

NVTX_DOMAIN = "perfkit"
_COLORS = {"physics": "green", "policy": "blue", "reward": "yellow", "learner": "red", "comm": "orange", "logging": "purple", "other": "grey"}


def nvtx_wanted(setting: str | bool | None) -> str:
    """'always', 'sampled' or 'off' from the config value (``auto`` = always under a profiler tool)."""
    if setting in (False, "off", "never"):
        return "off"
    if setting in (True, "always", "on"):
        return "always"
    return "always" if os.environ.get("NVTX_INJECTION64_PATH") else "sampled"


@dataclass(frozen=True)
class GpuSummary:
    """What the :class:`CudaEventTimer` measured (:meth:`CudaEventTimer.summary`)."""

    totals: dict[str, float] = field(default_factory=dict)  # GPU ms per segment over the GPU-timed steps
    steps: int = 0  # GPU-timed steps resolved
    cpu_totals: dict[str, float] = field(default_factory=dict)  # host ms per segment over the same spans
    steps_with: dict[str, int] = field(default_factory=dict)  # GPU-timed steps in which each segment ran
    step_ms: list[float] = field(default_factory=list)  # GPU time of each (first event to last)
    timeline: list[dict] = field(default_factory=list)  # GPU segment spans


@dataclass(frozen=True)
class SegmentSummary:
    """What the :class:`SegmentClock` measured (:meth:`SegmentClock.summary`)."""

    totals: dict[str, float] = field(default_factory=dict)  # CPU seconds per segment over the timed steps
    calls: dict[str, int] = field(default_factory=dict)  # entries per segment over the timed steps
    learner_steps: list[int] = field(default_factory=list)  # the steps during which the learner segment was entered
    timeline: list[dict] = field(default_factory=list)  # CPU segment spans of the traced steps
    # the CUDA caching allocator's request count where the learner was entered and left, once per step:
    # [(step, count at the first entry, count at the last exit or None)] (empty without CUDA)
    learner_allocs: list[tuple[int, int, int | None]] = field(default_factory=list)


class CudaEventTimer:
    """GPU time per segment of sampled steps from CUDA events, read back lazily."""

    def __init__(self, torch: Any):
        self.torch = torch
        self._pool: list[Any] = []
        self._cur: list | None = None  # [step index, t_cpu_begin, [(event, segment or None, t_cpu)]]
        self._pending: deque = deque()
        self.totals: dict[str, float] = {}
        self.cpu_totals: dict[str, float] = {}  # host ms between the same marks
        self.steps_with: dict[str, int] = {}
        self.steps = 0
        self.step_ms: list[float] = []  # GPU time of each timed step (first event to last)
        self.timeline: list[dict] = []
        self.timeline_limit = 50_000  # GPU spans kept for the timeline (every timed step until then)
        self.t0 = 0.0

    def _event(self) -> Any:
        ev = self._pool.pop() if self._pool else self.torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def _capturing(self) -> bool:
        """Recording an event into a stream that is being captured (a CUDA graph) would break the capture."""
        try:
            return bool(self.torch.cuda.is_current_stream_capturing())
        except Exception:
            return True

    @property
    def active(self) -> bool:
        return self._cur is not None

    def begin_step(self, index: int, segment: str, t_cpu: float) -> None:
        if self._capturing():
            return
        self._cur = [index, t_cpu, [(self._event(), segment, t_cpu)]]

    def mark(self, segment: str, t_cpu: float | None = None) -> None:
        cur = self._cur
        if cur is not None:
            if self._capturing():  # a capture began inside the timed step: give this step up
                self._pool.extend(e for e, _, _ in cur[2])
                self._cur = None
                return
            cur[2].append((self._event(), segment, perf_counter() if t_cpu is None else t_cpu))

    def drop_step(self) -> None:
        """Give up the step being timed (its events span more than the step)."""
        cur = self._cur
        if cur is not None:
            self._pool.extend(e for e, _, _ in cur[2])
            self._cur = None

    def end_step(self, t_cpu: float | None = None) -> None:
        cur = self._cur
        if cur is None:
            return
        if self._capturing():
            self._pool.extend(e for e, _, _ in cur[2])
            self._cur = None
            return
        cur[2].append((self._event(), None, perf_counter() if t_cpu is None else t_cpu))
        self._pending.append(cur)
        self._cur = None

    def poll(self, final: bool = False) -> None:
        """Resolve every finished step (all of them, waiting, when ``final``)."""
        while self._pending:
            index, t_cpu, evs = self._pending[0]
            last = evs[-1][0]
            if not last.query():
                if not final:
                    return
                last.synchronize()
            self._pending.popleft()
            first = evs[0][0]
            off = 0.0
            for seg in {seg for _, seg, _ in evs[:-1]}:
                self.steps_with[seg] = self.steps_with.get(seg, 0) + 1
            for (a, seg, ta), (b, _, tb) in zip(evs, evs[1:]):
                ms = a.elapsed_time(b)
                self.totals[seg] = self.totals.get(seg, 0.0) + ms
                self.cpu_totals[seg] = self.cpu_totals.get(seg, 0.0) + max(0.0, tb - ta) * 1e3
                if len(self.timeline) < self.timeline_limit:
                    self.timeline.append({"step": index, "segment": seg, "start_ms": round((t_cpu - self.t0) * 1e3 + off, 4),
                                          "dur_ms": round(ms, 4), "gpu": True})
                off += ms
            self.step_ms.append(first.elapsed_time(last))
            self.steps += 1
            self._pool.extend(e for e, _, _ in evs)

    def summary(self) -> GpuSummary:
        """Every timed step resolved (waiting for the last ones) and what they measured."""
        self.poll(final=True)
        return GpuSummary(totals=dict(self.totals), steps=self.steps, cpu_totals=dict(self.cpu_totals),
                          steps_with=dict(self.steps_with), step_ms=list(self.step_ms), timeline=list(self.timeline))


class SegmentClock:
    """Cumulative exclusive CPU time per segment; also drives the CUDA-event timer, NVTX and the
    timeline trace on the steps that use them (``refresh()`` after switching any of those)."""

    def __init__(self, steps: Any = None, t0: float = 0.0, timeline_limit: int = 50_000) -> None:
        self.cur = "other"
        self.t = perf_counter()
        self.t0 = t0  # the session's start: the origin of the timeline's ms
        self.timeline: list[dict] = []  # CPU spans of the traced steps (export-trace)
        self.timeline_limit = timeline_limit
        self.acc: dict[str, float] = {}  # cumulative seconds per segment
        self.calls: dict[str, int] = {}  # cumulative entries per segment
        self.gpu: CudaEventTimer | None = None
        self.nvtx: Any = None  # the nvtx module while ranges are emitted
        self._nvtx_open = False
        self._trace: list | None = None  # [(segment, t)] while recording a timeline step
        self._slow = False
        # the timed span: cumulative time and entries per segment over the steps the session times
        self.span_totals: dict[str, float] = {}
        self.span_calls: dict[str, int] = {}
        self.span_open = False
        self._base_acc: dict[str, float] = {}
        self._base_calls: dict[str, int] = {}
        self.steps: Any = steps  # the session's StepClock: its index says which step the learner ran in
        self.learner_steps: list[int] = []  # the steps during which the learner segment was entered
        # the CUDA allocator's count at the learner's entries and exits (see SegmentSummary); the
        # session sets ``alloc_counter`` (a callable returning the count, or None without CUDA)
        self.alloc_counter: Any = None
        self.learner_allocs: list[list] = []

    def refresh(self) -> None:
        self._slow = bool((self.gpu is not None and self.gpu._cur is not None) or self.nvtx is not None or self._trace is not None)

    @property
    def trace(self) -> list | None:
        return self._trace

    @trace.setter
    def trace(self, value: list | None) -> None:
        self._trace = value
        self.refresh()

    def start(self, t0: float) -> None:
        """The session starts at ``t0``: segment time and the timeline's ms count from there."""
        self.t0 = self.t = t0

    @property
    def timeline_full(self) -> bool:
        return len(self.timeline) >= self.timeline_limit

    def end_trace(self, step: int, end: float) -> None:
        """The traced step ``step`` ended at ``end``: its segment spans go to the timeline."""
        trace = self._trace
        if trace is None:
            return
        trace = trace + [(None, end)]
        for (seg, t0), (_, t1) in zip(trace, trace[1:]):
            if t1 > t0:
                self.timeline.append({"step": step, "segment": seg, "start_ms": round((t0 - self.t0) * 1e3, 4),
                                      "dur_ms": round((t1 - t0) * 1e3, 4), "gpu": False})
        self.trace = None

    def summary(self) -> SegmentSummary:
        return SegmentSummary(totals=dict(self.span_totals), calls=dict(self.span_calls),
                              learner_steps=list(self.learner_steps), timeline=list(self.timeline),
                              learner_allocs=[tuple(r) for r in self.learner_allocs])

    def transition(self, name: str) -> None:
        if not self.span_open and not self._slow:  # a step not timed (setup, warm-up, sampled): no clock read
            if name != self.cur:
                if self.cur == "learner":
                    self._learner_left()
                self.cur = name
                if name == "learner":
                    self._learner()
            return
        now = perf_counter()
        cur = self.cur
        acc = self.acc
        acc[cur] = acc.get(cur, 0.0) + (now - self.t)
        self.t = now
        if name != cur:
            calls = self.calls
            calls[name] = calls.get(name, 0) + 1
            if cur == "learner":
                self._learner_left()
            self.cur = name
            if name == "learner":
                self._learner()
        if self._slow:
            self._extras(name, now)

    def _learner(self) -> None:
        """The learner segment was entered: note the step (the loop's period is read from these) and,
        on CUDA, the allocator's count at the step's first entry (once per period: the allocations of
        whole periods are counted from these, see :func:`perfkit.profile.snapshot.allocator_rates`)."""
        if self.steps is not None:
            i, ls = self.steps.index, self.learner_steps
            if i and (not ls or ls[-1] != i):
                ls.append(i)
                if self.alloc_counter is not None:
                    n = self.alloc_counter()
                    if n is not None:
                        self.learner_allocs.append([i, n, None])

    def _learner_left(self) -> None:
        """The learner segment was left: on CUDA, the allocator's count (the last exit before the next
        update's entry stands: an update may leave and re-enter the learner)."""
        reads = self.learner_allocs
        if reads and self.alloc_counter is not None:
            n = self.alloc_counter()
            if n is not None:
                reads[-1][2] = n

    def _extras(self, name: str, now: float) -> None:
        gpu = self.gpu
        if gpu is not None and gpu._cur is not None:
            gpu.mark(name, now)
        if self.nvtx is not None:
            if self._nvtx_open:
                self.nvtx.pop_range(domain=NVTX_DOMAIN)
            self.nvtx.push_range(name, color=_COLORS.get(name, "grey"), domain=NVTX_DOMAIN)
            self._nvtx_open = True
        if self._trace is not None:
            self._trace.append((name, now))

    def tick(self, now: float) -> None:
        """Bring the cumulative per-segment time up to ``now`` (a ``now`` before the last transition —
        the last step's end, when work ran after it returned — charges nothing: no segment time is
        ever negative)."""
        if now <= self.t:
            return
        cur = self.cur
        self.acc[cur] = self.acc.get(cur, 0.0) + (now - self.t)
        self.t = now

    def mark_end(self, now: float) -> None:
        """An env step call returned at ``now``: remember the per-segment time so far, so that the run's
        last step can end here, not at the session's end (:meth:`rewind_to_end`)."""
        acc = dict(self.acc)
        acc[self.cur] = acc.get(self.cur, 0.0) + (now - self.t)
        self._end = (acc, now, dict(self.calls))

    def rewind_to_end(self) -> bool:
        """Drop the time charged, and the segment entries counted, since the last :meth:`mark_end`
        (work after the last step returned)."""
        end = getattr(self, "_end", None)
        if end is None:
            return False
        self.acc, self.t, self.calls = dict(end[0]), end[1], dict(end[2])
        return True

    def skip(self, now: float) -> None:
        """Charge nothing for the time up to ``now`` (perfkit's own work at a step boundary)."""
        self.t = now

    def time_span(self, timed: bool) -> None:
        """The step beginning is ``timed`` or not: open or close the timed span where that changes (segment
        time is cumulative here; the span totals are what accumulated while it was open)."""
        if timed and not self.span_open:
            self.open_span()
        elif not timed and self.span_open:
            self.close_span()

    def start_trace(self, now: float, wanted: bool) -> bool:
        """Record the step beginning at ``now`` in the timeline when ``wanted`` and it has room."""
        if not wanted or self.timeline_full:
            return False
        self.trace = [(self.cur, now)]
        return True

    def begin_step(self, t: float) -> None:
        """The step begins at ``t``, after perfkit's own work at its boundary: nothing before is charged."""
        self.t = t
        if self._trace is not None:
            self.trace = [(self.cur, t)]

    def open_span(self) -> None:
        """Timed steps begin: later :meth:`close_span` adds what accumulated since to the span totals."""
        self._base_acc, self._base_calls = dict(self.acc), dict(self.calls)
        self.span_open = True

    def close_span(self) -> None:
        for k, v in self.acc.items():
            d = v - self._base_acc.get(k, 0.0)
            if d:
                self.span_totals[k] = self.span_totals.get(k, 0.0) + d
        for k, v in self.calls.items():
            d = v - self._base_calls.get(k, 0)
            if d:
                self.span_calls[k] = self.span_calls.get(k, 0) + d
        self.span_open = False

    def nvtx_on(self, module: Any) -> None:
        if self.nvtx is None and module is not None:
            self.nvtx = module
            module.push_range(self.cur, color=_COLORS.get(self.cur, "grey"), domain=NVTX_DOMAIN)
            self._nvtx_open = True
        self.refresh()

    def nvtx_off(self) -> None:
        if self.nvtx is not None and self._nvtx_open:
            self.nvtx.pop_range(domain=NVTX_DOMAIN)
        self.nvtx = None
        self._nvtx_open = False
        self.refresh()

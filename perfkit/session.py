"""One profiling session: builds the collectors, installs them on enter, schedules what each special
step does, removes every hook on exit, and builds the run record (``session.run``).

    with Session(command=["train.py"]) as s:
        for _ in range(1000):
            env.step(actions)        # auto-detected: `step` on an object with an integer `num_envs`
    run = s.run

A run is setup (before the first step), warm-up (``warmup_steps``: the discovery window finds the step,
the segments and the policy; nothing counts as a per-step cost) and steady state (wrappers only; GPU
timing, the timeline and ``--verify`` on some steps, the costly collectors on sampled steps). The
:class:`~perfkit.collectors.steps.StepClock` marks boundaries and times steps (its fast path is all a
plain steady step costs) and hands every other boundary to :meth:`Session._on_boundary`, the
scheduler, whose decision (:class:`~perfkit.collectors.steps.Boundary`) it applies. perfkit's work at
a boundary happens between steps: the next step is timed from its end. Which steps are sampled is the
:class:`~perfkit.collectors.sampling.SampleSchedule`'s call; the GPU side is
:class:`~perfkit.collectors.gpu_steps.GpuSteps`. At the end each collector gives its frozen summary,
the :class:`~perfkit.snapshot.Snapshot` composes them and :func:`~perfkit.snapshot.build_run` turns it
into the record, which the cost model then prices. docs/design.md tells the whole timeline.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from time import perf_counter
from typing import Any

from perfkit import segments as _segments
from perfkit.batched_env import describe_env, num_envs_of
from perfkit.collectors import alloc, hub, loops, sites, steps as _steps, streams
from perfkit.collectors.comm import CommCollector
from perfkit.collectors.compiled import torchscript_names, torchscript_note
from perfkit.collectors.gpu_steps import GpuSteps
from perfkit.collectors.hub import tls
from perfkit.collectors.loops import LineSampler
from perfkit.collectors.patches import Patcher
from perfkit.collectors.sampling import SampleSchedule, Sampler
from perfkit.collectors.segment_rules import SegmentRules
from perfkit.collectors.self_cost import SelfMeter, calibrate
from perfkit.collectors.streams import StreamMonitor
from perfkit.collectors.sync_wait import SyncWaits
from perfkit.collectors.timing import SegmentClock
from perfkit.config import Config
from perfkit.machine import describe, process_memory
from perfkit.record import EXTRA_NOTES, EXTRA_TRACEBACK, Run
from perfkit.snapshot import Snapshot, build_run

_active: "Session | None" = None
POLL_EVERY = 128  # steady-state steps between checks for newly imported libraries to hook
MAX_TIMELINE = 50_000  # segment spans kept for export-trace (CPU and GPU each)


def active() -> "Session | None":
    return _active


def step(num_envs: int | None = None) -> None:
    """Mark a step boundary by hand (call it once per iteration, at the top of the loop body).

    ``num_envs`` says how many envs one step advances (for env-steps/s and per-env loop detection) when
    no env object says it. Once called, automatic step detection is off for the session. No-op outside
    a session."""
    s = _active
    if s is not None:
        if num_envs is not None and s.num_envs is None:
            s.given_num_envs = s.num_envs = _positive_int(num_envs, "perfkit.step(num_envs=...)")
        s.clock.mark()


def _positive_int(value: Any, what: str) -> Any:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{what} needs a positive int, got {value!r}")
    return value


class Session:
    """A profiling session (see module doc). Re-entrant use is refused: one session at a time."""

    def __init__(
        self,
        command: list[str] | None = None,
        step_fn: str | None = None,
        warmup_steps: int | None = None,
        config: Config | None = None,
        *,
        verify: bool = False,
        count_cpu_tensors: bool | None = None,
        sample_steps: tuple[int, ...] | None = None,
        timing_every: int | None = None,
        nvtx: str | None = None,
        num_envs: int | None = None,
    ):
        cfg = config if config is not None else Config()
        warmup = cfg.warmup_steps if warmup_steps is None else int(warmup_steps)
        if warmup < 0:
            raise ValueError("warmup_steps must be >= 0")
        _positive_int(num_envs, "num_envs")
        explicit = sample_steps if sample_steps is not None else cfg.sample_steps
        # the session's own settings: the arguments over the config's
        self.config = cfg = replace(cfg, step_fn=step_fn or cfg.step_fn, warmup_steps=warmup, nvtx=nvtx or cfg.nvtx,
                                    sample_steps=tuple(explicit) if explicit is not None else None,
                                    timing_every=max(1, int(timing_every or cfg.timing_every)))
        self.command = list(command or [])
        self._count_cpu = count_cpu_tensors
        self.run: Run | None = None
        self.given_num_envs = num_envs  # the user's word when the env object has none (or there is none)
        self.num_envs: int | None = num_envs
        self.env_info: dict[str, Any] = {}
        self.notes: list[str] = []
        self.t_start = 0.0
        self._torch: Any = None  # imported on enter (as the program's sys.path finds it)
        self._torchscript_before: set[str] = set()
        # the collectors: built here, installed on enter
        self.patcher = Patcher()
        self.clock = _steps.StepClock(warmup, self._on_boundary)
        self.segclock = SegmentClock(self.clock, timeline_limit=MAX_TIMELINE)
        self.schedule = SampleSchedule(warmup + 1, cfg.sample_every, cfg.sample_budget, cfg.sample_steps)
        self.sampler = Sampler(None, LineSampler(), StreamMonitor())
        self.sync_waits = SyncWaits(self.clock, self._timed)
        self.rules = SegmentRules(self.patcher, cfg.segment_targets)
        self.comm = CommCollector(self.clock, self._timed)  # torch.distributed: segment comm, ranks
        self.discovery = _steps.Discovery(self.clock, self.patcher, find_steps=not cfg.step_fn,
                                          name_segments=cfg.segment_names, step_methods=tuple(cfg.step_methods))
        self.gpu = GpuSteps(self.segclock, timing_every=cfg.timing_every, nvtx=cfg.nvtx, verify=verify,
                            verify_steps=cfg.verify_steps, timeline_limit=MAX_TIMELINE)
        self.sink = _steps.PhaseSink(self.clock, lambda: self.sampler.active, self.gpu.note_sync)
        self.meter = SelfMeter()  # perfkit's own cost (the record's self block)

    # ---- enter / exit ---------------------------------------------------------------------------
    def __enter__(self) -> "Session":
        global _active
        if _active is not None:
            raise RuntimeError("a perfkit Session is already active; sessions do not nest")
        try:
            import torch  # the hooks need it; importing it here keeps it out of the steps
        except ImportError:  # a program without torch: steps, segments and timing still work
            torch = None  # type: ignore[assignment]
        self._torch = torch
        self.sampler.use_torch(torch)
        t_enter = perf_counter()
        self._torchscript_before = set(torchscript_names())
        self.t_start = perf_counter()
        self.segclock.start(self.t_start)
        sites.set_runtime(tuple(self.config.runtime))
        sites.user_code_only = bool(self.config.user_code_only)
        _active = self
        _steps.current = self.clock
        if not hub.sinks:  # the first sink decides how syncs are counted (hub.sync_source)
            hub.sync_source = self.config.sync_source
        hub.acquire(self.sink, self._count_cpu)
        hub.wait_listeners.append(self.sync_waits.on_wait)
        try:
            self.rules.install()
            self.notes.extend(self.rules.errors)
            self.comm.install(self.patcher)
            if self.config.step_fn:
                _steps.install_step_fn(self.patcher, self.config.step_fn)
            if not self.discovery.start():
                self.notes.append("another profiler was active: steps and name-ruled segments were not auto-detected")
            if self._torch is not None:
                self.rules.start_policy_discovery(self.discovery)
            self.sampler.streams.install(self.patcher)
            self.notes.extend(self.gpu.setup(torch, self.t_start))
            _segments.on_transition = self.segclock.transition
            self.clock.on_end = self.segclock.mark_end
            self.meter.per_call_us = calibrate(self._torch)
        except BaseException:
            self._teardown()
            raise
        self.meter.startup_s = perf_counter() - t_enter
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        ok = exc_type is None or (issubclass(exc_type, SystemExit) and exc.code in (None, 0))
        self.finish("complete" if ok else "partial")
        return False

    def finish(self, status: str = "complete") -> Run:
        """Remove every hook and build ``self.run`` (idempotent)."""
        if self.run is not None:
            return self.run
        t_end = perf_counter()
        tls.depth += 1  # perfkit's own calls from here on are not the user's
        try:
            try:
                self.clock.close(*self._close_step(t_end, final=True))
            finally:
                self._teardown()
            try:
                t_record = perf_counter()
                self.run = self._record(status, t_end)
                if self.run.self is not None:
                    self.run.self.record_s = round(perf_counter() - t_record, 6)
            except Exception as e:  # never lose the program's outcome over a bug in the record
                import traceback

                self.run = Run(command=self.command, status="partial")
                self.run.extra[EXTRA_NOTES] = [f"perfkit could not build the full record: {type(e).__name__}: {e}"]
                self.run.extra[EXTRA_TRACEBACK] = traceback.format_exc()
        finally:
            tls.depth -= 1
        return self.run

    def _teardown(self) -> None:
        global _active
        _segments.on_transition = None
        self.clock.on_end = None
        try:
            self.sampler.stop()
        except Exception:
            pass
        if not self.discovery.closed:
            self.discovery.stop(wrap_found=False)  # ended during warm-up: nothing is wrapped after the end
        self.rules.remove()
        self.segclock.nvtx_off()
        self.gpu.stop()
        self.patcher.undo()
        if self.sync_waits.on_wait in hub.wait_listeners:
            hub.wait_listeners.remove(self.sync_waits.on_wait)
        if _steps.current is self.clock:
            _steps.current = None
        sites.user_code_only = False
        if self.config.runtime:
            sites.set_runtime()
        if _active is self:
            hub.release(self.sink)
            _active = None

    # ---- the scheduler: every step boundary that is not a plain steady step --------------------------
    def _timed(self, idx: int) -> bool:
        """Whether step ``idx`` counts in the steady-state timing (not warm-up, sampled or --verify)."""
        warmup = self.config.warmup_steps
        return not (idx <= warmup or self.schedule.is_sampled(idx) or self.gpu.verify_holds(idx, warmup))

    def _on_boundary(self, now: float, idx: int, obj: Any) -> _steps.Boundary:
        """Step ``idx`` begins at ``now``: close the last one, start what this one does; the clock applies
        the returned decision (the closing step's time, whether it was timed, the next boundary to see,
        when the new step begins)."""
        took, took_timed = self._close_step(now)
        if obj is not None and not self.env_info:
            self.num_envs = num_envs_of(obj) or self.given_num_envs
            self.env_info = describe_env(obj)
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
        sampled = schedule.begin(idx)
        special = self._schedule_steady(now, idx, sampled)
        if schedule.next > idx:
            special = min(special, schedule.next)
        if sampled or not self._timed(idx) or not self._timed(idx + 1):
            special = idx + 1
        self.segclock.time_span(self._timed(idx))
        if sampled:  # last: the sampler's tracer must not see perfkit's own work
            if schedule.starts_first_block(idx):
                self.sampler.forget()  # the single steps sampled before stand for nothing from here on
            self.sampler.start(sys._getframe(3), idx)
        # the step begins now, after perfkit's own work at this boundary
        t = perf_counter()
        self.segclock.begin_step(t)
        gpu_timed = self.gpu.begin(t)
        kind = ("discovery_close" if closes else "warmup" if idx <= self.config.warmup_steps
                else "verify" if self.gpu.verifying else "sample" if sampled else "gpu_timed" if gpu_timed else "poll")
        self.meter.special(kind, t - now)
        return _steps.Boundary(took, took_timed, max(special, idx + 1), t)

    def _schedule_steady(self, now: float, idx: int, sampled: bool) -> int:
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

    def _close_step(self, now: float, final: bool = False) -> tuple[float | None, bool]:
        """Account the step that runs from the last boundary to ``now`` (slow path and the end); returns
        its time (None before the first step) and whether it counts as timed."""
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
        self.gpu.close(rewound)  # its events ran on past the step's end, into the program's teardown
        took = now - clock.begin_t
        if idx in self.schedule.sampled and self.sampler.active:
            self.sampler.stop()
            self.schedule.sample_done(idx, took)
        timed = self._timed(idx)
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
        if self._torch is not None:
            self.rules.finish_policy_discovery()

    # ---- the record -----------------------------------------------------------------------------------
    def snapshot(self, status: str, t_end: float) -> Snapshot:
        """What this session saw: each collector's summary and the session's own facts (the session's
        hooks must be off)."""
        ts = torchscript_note(self._torchscript_before)
        step_fn = self.config.step_fn
        detection = ("manual" if self.clock.manual else f"--step-fn {step_fn}" if step_fn
                     else "auto" if self.clock.index else "none")
        sampling = self.sampler.summary()
        schedule = self.schedule.summary()
        return Snapshot(
            command=self.command, status=status, t_start=self.t_start, t_end=t_end,
            warmup_steps=self.config.warmup_steps, step_detection=detection, num_envs=self.num_envs,
            env=dict(self.env_info), clock=self.clock.summary(self.t_start), syncs=self.sink.summary(),
            segments=self.segclock.summary(), gpu=self.gpu.summary(), sampling=sampling, schedule=schedule,
            waits=self.sync_waits.summary(), notes=self.notes + ([ts] if ts else []),
            step_classes=[f"{c.__module__}.{c.__qualname__}" for c in self.discovery.step_classes],
            policy_classes=[f"{c.__module__}.{c.__qualname__}" for c in self.rules.policy_classes],
            count_cpu_tensors=hub.count_cpu if self._count_cpu is None else bool(self._count_cpu),
            sync_source=hub.installed_sync_source, verify=self.gpu.verify_result(),
            machine=describe(), memory=process_memory(self._torch), fixes=hub.fixes(), alloc_fix=alloc.FIX,
            stream_fix=streams.FIX, loop_fix=loops.FIX, dist=self.comm.snapshot(),
            self_meter=self.meter.snapshot(schedule.extra_s, sampling.counted, sampling.hooked_calls),
        )

    def _record(self, status: str, t_end: float) -> Run:
        run = build_run(self.snapshot(status, t_end))
        try:
            from perfkit.analysis.cost import price_run
        except ImportError:
            price_run = None
        if price_run is not None:
            try:
                price_run(run)
            except Exception as e:  # pricing is an annotation: never lose the record over it
                run.extra.setdefault(EXTRA_NOTES, []).append(f"pricing failed: {type(e).__name__}: {e}")
        return run

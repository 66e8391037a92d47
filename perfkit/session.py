"""One profiling session: installs every collector on enter, schedules what each step does, removes
every hook on exit, and builds the run record (``session.run``).

    with Session(command=["train.py"]) as s:
        for _ in range(1000):
            env.step(actions)        # auto-detected: `step` on an object with an integer `num_envs`
    run = s.run

Timeline of a session (step index k = 1, 2, ...; a step runs from one step boundary to the next):

* setup (before the first step): nothing is timed; syncs seen there are kept apart.
* warm-up (k <= ``warmup_steps``): the discovery window (:mod:`perfkit.collectors.steps`) finds the
  step and the name-ruled functions; the policy is found by the same window. Nothing is counted as a
  per-step cost: what happens only while a program warms up is not what its steps cost.
* steady state: wrappers only. CPU time per segment on every step, GPU time per segment from CUDA
  events on every ``timing_every``-th step (resolved lazily), optionally ``--verify``. Allocations,
  per-env loops and stream hazards are counted on *sampled* steps spread over the whole steady state
  (:mod:`perfkit.collectors.sampling`): the first steady step and every ``sample_every``-th after it,
  the stride widened while sampling costs more than ``sample_budget`` of the run; the record lists
  them with the number of steps each stands for.

perfkit's own work at a boundary (closing the discovery window, resolving CUDA events, starting a
sampled step) happens between steps: a step is timed from the end of that work to the next boundary,
so it is never part of a step's time or of the steady wall time.

Who does what: the :class:`~perfkit.collectors.steps.StepClock` marks boundaries and times steps
(its fast path is all a plain steady step costs); :meth:`Session._on_boundary` is the scheduler for
every other step (close the discovery window, sample, time on the GPU, record the timeline, verify)
and returns its decision (:class:`~perfkit.collectors.steps.Boundary`), which the clock applies; the
:class:`~perfkit.collectors.sampling.SampleSchedule` says which steps are sampled;
:class:`~perfkit.collectors.self_cost.SelfMeter` keeps perfkit's own cost;
:class:`~perfkit.collectors.sync_wait.SyncWaits` keeps the per-sync waits; at the end the session
takes a :class:`~perfkit.snapshot.Snapshot` and :func:`~perfkit.snapshot.build_run` turns it into the
record, which the cost model then prices.
"""

from __future__ import annotations

import sys
from time import perf_counter
from typing import Any

from perfkit import segments as _segments
from perfkit.collectors import hub, steps as _steps
from perfkit.collectors.hub import tls
from perfkit.collectors.patches import Patcher
from perfkit.config import Config
from perfkit.record import EXTRA_NOTES, EXTRA_TRACEBACK, Run

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
            if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
                raise ValueError(f"perfkit.step(num_envs=...) needs a positive int, got {num_envs!r}")
            s.given_num_envs = s.num_envs = num_envs
        s.clock.mark()


PERIOD_WAIT = 16  # steady steps --verify waits for the loop's period before it takes a plain window


def verify_window(steps: int, period: int | None, steady_i: int) -> int | None:
    """The length of the ``--verify`` window to start at steady step ``steady_i``, None to wait: a whole
    number of the loop's periods (at least ``steps``), so once-per-iteration work (the update, the
    logger) is in it at the rate the record gives it, whatever step it starts at; ``steps`` alone when no
    period shows within :data:`PERIOD_WAIT` steady steps (an env loop with no learner)."""
    if period and period > 1:
        return -(-steps // period) * period
    return steps if steady_i > PERIOD_WAIT or period == 1 else None


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
        self.config = cfg
        self.command = list(command or [])
        self.step_fn = step_fn or cfg.step_fn
        self.warmup_steps = cfg.warmup_steps if warmup_steps is None else int(warmup_steps)
        if self.warmup_steps < 0:
            raise ValueError("warmup_steps must be >= 0")
        explicit = sample_steps if sample_steps is not None else cfg.sample_steps
        self.sample_steps: tuple[int, ...] | None = tuple(explicit) if explicit is not None else None
        self.timing_every = max(1, int(timing_every or cfg.timing_every))
        self.nvtx_setting = nvtx or cfg.nvtx
        self.verify = verify
        self._count_cpu = count_cpu_tensors
        self.run: Run | None = None
        self.patcher = Patcher()
        self.clock = _steps.StepClock(self.warmup_steps, self._on_boundary)
        if num_envs is not None and (isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1):
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        self.given_num_envs = num_envs  # the user's word when the env object has none (or there is none)
        self.num_envs: int | None = num_envs
        self.env_info: dict[str, Any] = {}
        from perfkit.collectors.sampling import SampleSchedule

        self.schedule = SampleSchedule(self.warmup_steps + 1, cfg.sample_every, cfg.sample_budget, self.sample_steps)
        self._learner_seen = 0  # learner steps the schedule's period was computed from
        self.notes: list[str] = []
        self.untimed_steady: list[float] = []  # seconds, steady steps not timed (sampled): a short run's fallback
        self._entered = False
        from perfkit.collectors.self_cost import SelfMeter

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
        t_enter = perf_counter()
        from perfkit.collectors.loops import LineSampler
        from perfkit.collectors.sampling import Sampler
        from perfkit.collectors.segment_rules import SegmentRules
        from perfkit.collectors.streams import StreamMonitor
        from perfkit.collectors.sync_wait import SyncWaits
        from perfkit.collectors.compiled import torchscript_names
        from perfkit.collectors.timing import SegmentClock

        self._torchscript_before = set(torchscript_names())
        self.t_start = perf_counter()
        self.t_steady0: float | None = None
        self.segclock = SegmentClock()
        self.segclock.steps = self.clock
        self.sampler = Sampler(torch, LineSampler(), StreamMonitor())
        self.streams = self.sampler.streams
        self._streams_installed = False
        from perfkit.collectors import sites

        sites.set_runtime(tuple(self.config.runtime))
        sites.user_code_only = bool(self.config.user_code_only)
        self.rules = SegmentRules(self.patcher, self.config.segment_targets)
        self.sync_waits = SyncWaits(self.clock, self._timed)
        self.timeline: list[dict] = []
        self._verify: Any = None
        self._gpu: Any = None
        self.sink = _steps.PhaseSink(self.clock, lambda: self.sampler.active, self._note_sync)
        _active = self
        _steps.current = self.clock
        self._entered = True
        if not hub.sinks:  # the first sink decides how syncs are counted (hub.sync_source)
            hub.sync_source = self.config.sync_source
        hub.acquire(self.sink, self._count_cpu)
        hub.wait_listeners.append(self.sync_waits.on_wait)
        try:
            self.rules.install()
            self.notes.extend(self.rules.errors)
            from perfkit.collectors.comm import CommCollector

            self.comm = CommCollector(self.clock, self._timed)  # torch.distributed: segment comm, ranks
            self.comm.install(self.patcher)
            if self.step_fn:
                _steps.install_step_fn(self.patcher, self.step_fn)
            self.discovery = _steps.Discovery(self.clock, self.patcher, find_steps=not self.step_fn,
                                              name_segments=self.config.segment_names,
                                              step_methods=tuple(self.config.step_methods))
            if not self.discovery.start():
                self.notes.append("another profiler was active: steps and name-ruled segments were not auto-detected")
            self._discovery_open = True
            if torch is not None:
                self.rules.start_policy_discovery(self.discovery)
            self._streams_installed = self.streams.install(self.patcher)
            self._setup_gpu()
            _segments.on_transition = self.segclock.transition
            self.clock.on_end = self.segclock.mark_end
            from perfkit.collectors.self_cost import calibrate

            self.meter.per_call_us = calibrate(torch)
        except BaseException:
            self._teardown()
            raise
        self.meter.startup_s = perf_counter() - t_enter
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            status = "complete"
        elif issubclass(exc_type, SystemExit) and exc.code in (None, 0):
            status = "complete"
        else:
            status = "partial"
        self.finish(status)
        return False

    def finish(self, status: str = "complete") -> Run:
        """Remove every hook and build ``self.run`` (idempotent)."""
        if self.run is not None:
            return self.run
        t_end = perf_counter()
        tls.depth += 1  # perfkit's own calls from here on are not the user's
        try:
            try:
                self.clock.close(self._close_step(t_end, final=True))
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
        if getattr(self, "_discovery_open", False):
            self.discovery.stop(wrap_found=False)  # ended during warm-up: nothing is wrapped after the end
            self._discovery_open = False
        if hasattr(self, "rules"):
            self.rules.remove()
        if hasattr(self, "segclock"):
            self.segclock.nvtx_off()
        if self._verify is not None:
            self._verify.stop()
        self.patcher.undo()
        try:
            hub.wait_listeners.remove(self.sync_waits.on_wait)
        except (ValueError, AttributeError):
            pass
        if self._entered:
            hub.release(self.sink)
            self._entered = False
        if _steps.current is self.clock:
            _steps.current = None
        from perfkit.collectors import sites

        sites.user_code_only = False
        if self.config.runtime:
            sites.set_runtime()
        if _active is self:
            _active = None

    # ---- the scheduler: every step boundary that is not a plain steady step --------------------------
    def _timed(self, idx: int) -> bool:
        """Whether step ``idx`` counts in the steady-state timing (not warm-up, sampled or --verify)."""
        if idx <= self.warmup_steps or self.schedule.is_sampled(idx):
            return False
        if self.verify and self._gpu is not None:
            start = self.warmup_steps + 1
            if start <= idx < start + self.config.verify_steps + 1:
                return False
        return True

    def _on_boundary(self, now: float, idx: int, obj: Any) -> "_steps.Boundary":
        """Step ``idx`` begins at ``now``: close the last one, start what this one does; the clock applies
        the returned decision (the closing step's time, the next boundary to see, when the step begins)."""
        took = self._close_step(now)
        if obj is not None and not self.env_info:
            self._describe_env(obj)
        if idx == self.warmup_steps + 1:
            self.t_steady0 = now
        closes = self._discovery_open and idx > max(self.warmup_steps, 1)
        if closes:
            with self.patcher.batch():  # the functions found are wrapped where they are imported in one pass
                self._close_discovery()
        hub.install_available()
        self.rules.poll()
        if not self._streams_installed:
            self._streams_installed = self.streams.install(self.patcher)
        schedule = self.schedule
        learner = self.segclock.learner_steps
        if len(learner) != self._learner_seen and self._learner_seen < 16:  # the loop's period (settles early)
            from perfkit.collectors.sampling import loop_period

            self._learner_seen = len(learner)
            schedule.period = loop_period(learner, confirmed=False)
        sampled = schedule.begin(idx)
        special = self._schedule_steady(now, idx, sampled)
        if schedule.next > idx:
            special = min(special, schedule.next)
        if sampled or not self._timed(idx) or not self._timed(idx + 1):
            special = idx + 1
        next_special = max(special, idx + 1)
        # segment time is cumulative in the clock: open / close the timed span on changes of timed-ness
        timed = self._timed(idx)
        segclock = self.segclock
        if timed and not segclock.span_open:
            segclock.open_span()
        elif not timed and segclock.span_open:
            segclock.close_span()
        if sampled:  # last: the sampler's tracer must not see perfkit's own work
            if schedule.starts_first_block(idx):
                self.sampler.forget()  # the single steps sampled before stand for nothing from here on
            self.sampler.start(sys._getframe(3), idx)
        # the step begins now, after perfkit's own work at this boundary
        t = perf_counter()
        segclock.skip(t)
        if segclock.trace is not None:
            segclock.trace = [(segclock.cur, t)]
        gpu = self._gpu
        gpu_timed = gpu is not None and self._gpu_pending is not None
        if gpu_timed:
            gpu.begin_step(self._gpu_pending, segclock.cur, t)
            segclock.refresh()
            self._gpu_pending = None
        kind = ("discovery_close" if closes else "warmup" if idx <= self.warmup_steps
                else "verify" if self._verify is not None and self._verify.prof is not None
                else "sample" if sampled else "gpu_timed" if gpu_timed else "poll")
        self.meter.special(kind, t - now)
        return _steps.Boundary(took, next_special, t)

    def _schedule_steady(self, now: float, idx: int, sampled: bool) -> int:
        """Start what steady step ``idx`` does (GPU timing, timeline, verify); returns the next step the
        scheduler must see."""
        steady_i = idx - self.warmup_steps
        special = idx + POLL_EVERY - (idx % POLL_EVERY)  # the next periodic check
        if steady_i < 1:
            return idx + 1
        # the next GPU-timed (and timeline-traced) step: every timing_every-th steady step
        special = min(special, idx + self.timing_every - ((steady_i - 1) % self.timing_every))
        gpu = self._gpu
        if gpu is not None and self._torch.cuda.is_initialized():  # else creating events would initialize CUDA
            gpu.poll()
            if (steady_i - 1) % self.timing_every == 0 and not sampled:
                self._gpu_pending = idx  # its first event is recorded once perfkit's work here is done
                if self._nvtx_mode == "sampled" and self._nvtx is not None:
                    self.segclock.nvtx_on(self._nvtx)
                special = idx + 1  # close the timed step at the next boundary
        if self._traced(steady_i):
            self.segclock.trace = [(self.segclock.cur, now)]
            special = idx + 1
        if self.verify and self._verify is None and gpu is not None and self._torch.cuda.is_initialized():
            window = verify_window(self.config.verify_steps, self.schedule.period, steady_i)
            if window:
                self._start_verify(idx, window)
            else:
                special = idx + 1  # waiting for the loop's period
        if self._verify is not None:
            self._verify.boundary(idx)
            if self._verify.prof is not None:
                special = idx + 1
        return special

    def _traced(self, steady_i: int) -> bool:
        """Whether steady step ``steady_i`` records its segment timeline: the first ``timeline_steps``, then
        every ``timing_every``-th (the GPU-timed ones), until the timeline holds :data:`MAX_TIMELINE` spans."""
        if len(self.timeline) >= MAX_TIMELINE:
            return False
        return steady_i <= self.config.timeline_steps or (steady_i - 1) % self.timing_every == 0

    def _close_step(self, now: float, final: bool = False) -> float | None:
        """Account the step that runs from the last boundary to ``now`` (slow path and the end); returns
        its time when it counts as timed (the clock records it)."""
        clock = self.clock
        idx = clock.index
        segclock = self.segclock
        if idx == 0:
            segclock.tick(now)
            return None
        rewound = False
        if final and not clock.manual and clock.last_end is not None and clock.last_end >= clock.begin_t:
            now_step = clock.last_end  # auto steps: the last step ends when its call returns
            rewound = segclock.rewind_to_end()
            if not rewound:
                segclock.tick(now_step)
        else:
            now_step = now
            segclock.tick(now_step)
        if segclock.trace is not None:
            trace = segclock.trace + [(None, now_step)]
            for (seg, t0), (_, t1) in zip(trace, trace[1:]):
                if t1 > t0:
                    self.timeline.append({"step": idx, "segment": seg, "start_ms": round((t0 - self.t_start) * 1e3, 4),
                                          "dur_ms": round((t1 - t0) * 1e3, 4), "gpu": False})
            segclock.trace = None
        if self._gpu is not None and self._gpu.active:
            if rewound:  # its events ran on past the step's end, into the program's teardown
                self._gpu.drop_step()
            else:
                self._gpu.end_step()
            segclock.refresh()
            if self._nvtx_mode == "sampled":
                segclock.nvtx_off()
        if idx in self.schedule.sampled and self.sampler.active:
            self.sampler.stop()
            self.schedule.sample_done(idx, now_step - clock.begin_t)
        took = None
        if self._timed(idx):
            took = now_step - clock.begin_t
            self.schedule.timed_step(took)
        elif idx > self.warmup_steps:  # a steady step perfkit worked in: its time stands in only if no other has one
            self.untimed_steady.append(now_step - clock.begin_t)
        if final and segclock.span_open:
            segclock.close_span()
        return took

    def _note_sync(self) -> None:
        if self._verify is not None:
            self._verify.note_sync()

    def _describe_env(self, obj: Any) -> None:
        from perfkit.batched_env import describe_env, num_envs_of

        self.num_envs = num_envs_of(obj) or self.given_num_envs
        self.env_info = describe_env(obj)

    def _close_discovery(self) -> None:
        self.discovery.stop()
        self._discovery_open = False
        try:
            self.rules.wrap_named(self.config.segment_names, sys._getframe(1), modules=self.discovery.modules_seen,
                                  skip=self.discovery.disqualified)
        except Exception as e:  # pragma: no cover - a scan error must not break the program
            self.notes.append(f"name-rule segments could not be applied: {type(e).__name__}: {e}")
        if self._torch is not None:
            self.rules.finish_policy_discovery()

    # ---- GPU ----------------------------------------------------------------------------------------
    def _setup_gpu(self) -> None:
        from perfkit.collectors.timing import CudaEventTimer, nvtx_wanted

        self._gpu = None
        self._gpu_pending: int | None = None
        self._nvtx = None
        self._nvtx_mode = nvtx_wanted(self.nvtx_setting)
        torch = self._torch
        if torch is not None and torch.cuda.is_available():
            self._gpu = CudaEventTimer(torch)
            self._gpu.t0 = self.t_start
            self._gpu.timeline_limit = MAX_TIMELINE
            if self._nvtx_mode != "off":
                try:
                    import nvtx

                    self._nvtx = nvtx
                except ImportError:
                    self.notes.append("nvtx is not installed: no NVTX ranges")
            if self._nvtx_mode == "always" and self._nvtx is not None:
                self.segclock.nvtx_on(self._nvtx)
        elif self.verify:
            self.notes.append("--verify needs CUDA; skipped on this machine")
        if self._gpu is not None:
            self.segclock.gpu = self._gpu

    def _start_verify(self, idx: int, steps: int) -> None:
        from perfkit.collectors.verify import Verifier

        self._verify = Verifier(self._torch, steps=steps)
        self._verify.start(idx)

    # ---- the record -----------------------------------------------------------------------------------
    def snapshot(self, status: str, t_end: float):
        """What this session saw, as plain data (the session's hooks must be off)."""
        from perfkit.collectors import alloc, loops, streams
        from perfkit.collectors.compiled import torchscript_note
        from perfkit.machine import describe, process_memory
        from perfkit.snapshot import Snapshot

        gpu = self._gpu
        if gpu is not None:
            gpu.poll(final=True)
        clock = self.clock
        lines = self.sampler.lines
        notes = list(self.notes) + self.sampler.notes
        ts = torchscript_note(self._torchscript_before)
        if ts:
            notes.append(ts)
        if lines.skipped_reason:
            notes.append(f"per-env loop sampling skipped: {lines.skipped_reason}")
        step_detection = ("manual" if clock.manual else f"--step-fn {self.step_fn}" if self.step_fn
                          else "auto" if clock.index else "none")
        return Snapshot(
            command=self.command, status=status, t_start=self.t_start, t_end=t_end, t_steady0=self.t_steady0,
            warmup_steps=self.warmup_steps, total_steps=clock.index, step_detection=step_detection,
            step_times=list(clock.times), untimed_step_times=list(self.untimed_steady), num_envs=self.num_envs, env=dict(self.env_info),
            seg_totals=dict(self.segclock.span_totals), seg_calls=dict(self.segclock.span_calls),
            gpu_totals=dict(gpu.totals) if gpu is not None else None, gpu_steps=gpu.steps if gpu is not None else 0,
            gpu_step_ms=list(gpu.step_ms) if gpu is not None else [],
            counts=self.sink.counts, trail=dict(clock.trail), kept_trails=clock.kept,
            learner_steps=list(self.segclock.learner_steps), sampled_steps=list(self.sampler.done),
            cuda_alloc=list(self.sampler.cuda_alloc), op_counts=dict(self.sampler.op_counts),
            line_counts=lines.counts, line_entries=lines.entries, line_steps=lines.steps, line_trips=lines.trips,
            sync_waits=self.sync_waits.finish(), sampled=self.schedule.weights(), sample_blocks=list(self.schedule.blocks),
            sample_every=self.schedule.stride,
            per_sample=self.sink.per_sample, chains=self.sink.chains, other_envs=dict(clock.others),
            timeline=self.timeline + (gpu.timeline if gpu is not None else []), notes=notes,
            step_starts=[round((t - self.t_start) * 1e3, 3) for t in clock.starts],
            last_step_end=round((clock.last_end - self.t_start) * 1e3, 3) if clock.last_end else None,
            step_classes=[f"{c.__module__}.{c.__qualname__}" for c in self.discovery.step_classes],
            policy_classes=[f"{c.__module__}.{c.__qualname__}" for c in self.rules.policy_classes],
            count_cpu_tensors=hub.count_cpu if self._count_cpu is None else bool(self._count_cpu),
            sync_source=hub.installed_sync_source,
            verify=self._verify.result() if self._verify is not None else None,
            interop_sites=dict(self.streams.interop_sites), machine=describe(), memory=process_memory(self._torch),
            fixes=hub.fixes(), alloc_fix=alloc.FIX, stream_fix=streams.FIX, loop_fix=loops.FIX,
            dist=self.comm.snapshot() if getattr(self, "comm", None) is not None else None,
            self_meter=self.meter.snapshot(self.schedule.extra_s, self.sampler.counted, self.sampler.hooked_calls),
        )

    def _record(self, status: str, t_end: float) -> Run:
        from perfkit.snapshot import build_run

        run = build_run(self.snapshot(status, t_end))
        try:
            from perfkit.analysis.cost import price_run
        except ImportError:
            price_run = None
        if price_run is not None:
            try:
                run = price_run(run)
            except Exception as e:  # pricing is an annotation: never lose the record over it
                run.extra.setdefault(EXTRA_NOTES, []).append(f"pricing failed: {type(e).__name__}: {e}")
        return run


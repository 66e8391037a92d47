"""One profiling session: builds the collectors, installs them on enter, removes every hook on exit,
and builds the run record (``session.run``).

    with Session(command=["train.py"]) as s:
        for _ in range(1000):
            env.step(actions)        # auto-detected: `step` on an object with an integer `num_envs`
    run = s.run

A run is setup (before the first step), warm-up (``warmup_steps``: the discovery window finds the step,
the segments and the policy; nothing counts as a per-step cost) and steady state (wrappers only; GPU
timing, the timeline and ``--verify`` on some steps, the costly collectors on sampled steps). The
session builds the collectors, installs them on enter and removes them on exit; while the program
runs, the :class:`~perfkit.collectors.steps.StepClock` marks boundaries and times steps (its fast path
is all a plain steady step costs) and hands every other boundary to the
:class:`~perfkit.collectors.scheduler.StepScheduler`, whose decision it applies. At the end each
collector gives its frozen summary, the :class:`~perfkit.profile.snapshot.Snapshot` composes them and
:func:`~perfkit.profile.snapshot.build_run` turns it into the record, which the cost model then prices.
docs/design.md tells the whole timeline.
"""

from __future__ import annotations

from dataclasses import replace
from time import perf_counter
from typing import Any

from perfkit.batched_env import describe_env, num_envs_of
from perfkit.collectors import alloc, hub, loops, sites, steps as _steps, streams
from perfkit.collectors import segments as _segments
from perfkit.collectors.comm import CommCollector
from perfkit.collectors.compiled import torchscript_names, torchscript_note
from perfkit.collectors.gpu_steps import GpuSteps
from perfkit.collectors.hub import tls
from perfkit.collectors.loops import LineSampler
from perfkit.collectors.patches import Patcher
from perfkit.collectors.sampling import SampleSchedule, Sampler
from perfkit.collectors.scheduler import StepScheduler
from perfkit.collectors.segment_rules import SegmentRules
from perfkit.collectors import self_cost
from perfkit.collectors.self_cost import SelfMeter
from perfkit.collectors.streams import StreamMonitor
from perfkit.collectors.sync_gate import SyncGate
from perfkit.collectors.sync_wait import SyncWaits
from perfkit.collectors.timing import SegmentClock
from perfkit.config import Config
from perfkit.machine import describe, process_memory
from perfkit.record import EXTRA_NOTES, EXTRA_TRACEBACK, Run
from perfkit.profile.snapshot import Snapshot, build_run

_active: "Session | None" = None
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

    launched_at: float | None = None  # perf_counter() when perfkit started the program (the runner sets it)

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
        self.clock = _steps.StepClock(warmup)
        self.segclock = SegmentClock(self.clock, timeline_limit=MAX_TIMELINE)
        self.schedule = SampleSchedule(warmup + 1, cfg.sample_every, cfg.sample_budget, cfg.sample_steps)
        self.sampler = Sampler(None, LineSampler(), StreamMonitor())
        self.rules = SegmentRules(self.patcher, cfg.segment_targets)
        self.discovery = _steps.Discovery(self.clock, self.patcher, find_steps=not cfg.step_fn,
                                          name_segments=cfg.segment_names, step_methods=tuple(cfg.step_methods))
        self.gpu = GpuSteps(self.segclock, timing_every=cfg.timing_every, nvtx=cfg.nvtx, verify=verify,
                            verify_steps=cfg.verify_steps, timeline_limit=MAX_TIMELINE)
        self.sink = _steps.PhaseSink(self.clock, lambda: self.sampler.active)
        self.meter = SelfMeter()  # perfkit's own cost (the record's self block)
        # which steady steps count syncs (the mode is decided on enter, once the hooks say how syncs are seen)
        self.gate = SyncGate("every-step", lambda: self.sink.counts, hub.pause_syncs, hub.resume_syncs)
        self.scheduler = StepScheduler(cfg, self.clock, self.segclock, self.schedule, self.sampler, self.gpu,
                                       self.discovery, self.rules, self.patcher, self.meter, self.gate, self._see_env,
                                       self.notes)
        self.sync_waits = SyncWaits(self.clock, self.scheduler.timed)
        self.comm = CommCollector(self.clock, self.scheduler.timed)  # torch.distributed: segment comm, ranks

    # ---- enter / exit ---------------------------------------------------------------------------
    def __enter__(self) -> "Session":
        global _active
        if _active is not None:
            raise RuntimeError("a perfkit Session is already active; sessions do not nest")
        t_torch = perf_counter()  # (the program imports torch too: its import is not perfkit's start-up)
        try:
            import torch  # the hooks need it; importing it here keeps it out of the steps
        except ImportError:  # a program without torch: steps, segments and timing still work
            torch = None  # type: ignore[assignment]
        self._torch = torch
        self.sampler.use_torch(torch)
        if torch is not None:  # on CUDA the allocator counts whole periods at the learner's entries
            self.segclock.alloc_counter = alloc.cuda_alloc_counter
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
        self.gate.mode = self._sync_counting()
        hub.wait_listeners.append(self.sync_waits.on_wait)
        try:
            self.rules.install()
            self.notes.extend(self.rules.errors)
            self.comm.install(self.patcher)
            if self.config.step_fn:
                _steps.install_step_fn(self.patcher, self.config.step_fn)
            # before the discovery window opens: its profile function would be timed with every call
            self.meter.per_call_us = self_cost.calibrate(self._torch)
            self.meter.emit_base = tuple(hub.emit_time)  # the run's own sync events are counted from here
            if not self.discovery.start():
                self.notes.append("another profiler was active: steps and name-ruled segments were not auto-detected")
            if self._torch is not None:
                self.rules.start_policy_discovery(self.discovery)
            self.sampler.streams.install(self.patcher)
            self.notes.extend(self.gpu.setup(torch, self.t_start))
            _segments.on_transition = self.segclock.transition
            self.clock.on_end = self.segclock.mark_end
        except BaseException:
            self._teardown()
            raise
        # and from perfkit's own import to here when it launched the program (``perfkit profile``)
        before = 0.0 if self.launched_at is None else max(0.0, t_torch - self.launched_at)
        self.meter.startup_s = before + perf_counter() - t_enter
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
                self.clock.close(*self.scheduler.close_step(t_end, final=True))
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

    def _sync_counting(self) -> str:
        """The gate's mode: the config's, "auto" being whole periods where the CUDA runtime reports the
        syncs; every step under --verify (it compares each step's count with the runtime's)."""
        mode = self.config.sync_counting
        if self.gpu.verify_wanted:
            return "every-step"
        if mode == "auto":
            return "periods" if hub.installed_sync_source == "runtime" else "every-step"
        return mode

    def _teardown(self) -> None:
        global _active
        self.gate.stop()
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

    def _see_env(self, obj: Any) -> None:
        """The env object of a step boundary: the first one describes the run's env."""
        if not self.env_info:
            self.num_envs = num_envs_of(obj) or self.given_num_envs
            self.env_info = describe_env(obj)

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
            waits=self.sync_waits.summary(), gate=self.gate.summary(), notes=self.notes + ([ts] if ts else []),
            step_classes=[f"{c.__module__}.{c.__qualname__}" for c in self.discovery.step_classes],
            policy_classes=[f"{c.__module__}.{c.__qualname__}" for c in self.rules.policy_classes],
            sync_source=hub.installed_sync_source, verify=self.gpu.verify_result(),
            machine=describe(), memory=process_memory(self._torch), fixes=hub.fixes(), alloc_fix=alloc.FIX,
            stream_fix=streams.FIX, loop_fix=loops.FIX, dist=self.comm.snapshot(),
            self_meter=self.meter.snapshot(schedule.extra_s, sampling.counted, sampling.hooked_calls, tuple(hub.emit_time)),
        )

    def _record(self, status: str, t_end: float) -> Run:
        run = build_run(self.snapshot(status, t_end))
        try:
            from perfkit.pricing.cost import price_run
        except ImportError:
            price_run = None
        if price_run is not None:
            try:
                run = price_run(run)
            except Exception as e:  # pricing is an annotation: never lose the record over it
                run.extra.setdefault(EXTRA_NOTES, []).append(f"pricing failed: {type(e).__name__}: {e}")
        return run

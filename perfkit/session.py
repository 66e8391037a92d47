"""One profiling session: installs every collector on enter, removes them all on exit, and turns what
they saw into a :class:`perfkit.record.Run` (``session.run``).

    with Session(command=["train.py"]) as s:
        for _ in range(1000):
            env.step(actions)        # auto-detected: `step` on an object with an integer `num_envs`
    run = s.run

Timeline of a session (step index k = 1, 2, ...; a step runs from one step boundary to the next):

* setup (before the first step): nothing is timed; syncs seen there are kept apart (``extra``).
* warm-up (k <= ``warmup_steps``): the discovery window (:mod:`perfkit.collectors.steps`) finds the
  step and the name-ruled functions; the policy is found with torch's global module hooks; on the
  sampled steps (default 2 and 3) allocations, per-env loops and stream hazards are sampled.
* steady state: wrappers only. CPU time per segment on every step, GPU time per segment from CUDA
  events on every ``timing_every``-th step (resolved lazily), optionally ``--verify``.

Sync counts are exact (every call is seen); allocation, loop and stream counts come from the sampled
steps and are scaled to per step.
"""

from __future__ import annotations

import sys
from time import perf_counter
from typing import Any

from perfkit import segments as _segments
from perfkit.source import relpath, source_line
from perfkit.collectors import hub
from perfkit.collectors.hub import Sink, tls
from perfkit.collectors.patches import Patcher
from perfkit.config import Config
from perfkit.record import Finding, Run, SegmentStats

_active: "Session | None" = None
POLL_EVERY = 128  # steady-state steps between checks for newly imported libraries to hook


def active() -> "Session | None":
    return _active


def step() -> None:
    """Mark a step boundary by hand (call it once per iteration, at the top of the loop body).

    Once called, automatic step detection is off for the session. No-op outside a session."""
    s = _active
    if s is not None:
        s.mark_step()


class _SessionSink(Sink):
    """Events keyed by phase; allocation/stream events only count while their sampling is on."""

    def __init__(self, session: "Session"):
        super().__init__()
        self.session = session

    def add(self, kind, op, site, segment, thread, nbytes, would, n=1) -> None:
        s = self.session
        if kind in ("alloc", "stream"):
            if not s._sampling:
                return
            phase = "sampled"
        else:
            phase = s.phase
        key = (kind, op, site[0], site[1], site[2], thread, would, phase)
        self.count(key, segment, nbytes, n)
        if phase == "steady" and kind == "sync":
            s._trail[key] = s._trail.get(key, 0) + n
        if s._verify is not None and kind == "sync":
            s._verify.note_sync()


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
    ):
        cfg = config if config is not None else Config()
        self.config = cfg
        self.command = list(command or [])
        self.step_fn = step_fn or cfg.step_fn
        self.warmup_steps = cfg.warmup_steps if warmup_steps is None else int(warmup_steps)
        if self.warmup_steps < 0:
            raise ValueError("warmup_steps must be >= 0")
        self.sample_steps = tuple(sample_steps if sample_steps is not None else cfg.sample_steps)
        self.timing_every = max(1, int(timing_every or cfg.timing_every))
        self.nvtx_setting = nvtx or cfg.nvtx
        self.verify = verify
        self._count_cpu = count_cpu_tensors
        self.run: Run | None = None
        # state
        self.patcher = Patcher()
        self.sink = _SessionSink(self)
        self.step_index = 0
        # syncs since the last step boundary: once the program stops stepping they are teardown, as
        # those before the first step are setup (neither is a per-step cost)
        self._trail: dict[tuple, int] = {}
        self.manual_steps = False
        self._in_step = False
        self._sampling = False
        self._verify: Any = None
        self.num_envs: int | None = None
        self.env_info: dict[str, Any] = {}
        self._getter = active
        self._entered = False
        self._exc_status: str | None = None

    # ---- phases ---------------------------------------------------------------------------------
    @property
    def phase(self) -> str:
        i = self.step_index
        if i == 0:
            return "setup"
        return "warmup" if i <= self.warmup_steps else "steady"

    # ---- enter / exit ---------------------------------------------------------------------------
    def __enter__(self) -> "Session":
        global _active
        if _active is not None:
            raise RuntimeError("a perfkit Session is already active; sessions do not nest")
        try:
            import torch  # the hooks need it; importing it here keeps it out of the steps
        except ImportError:  # pragma: no cover - torch is a dependency
            torch = None  # type: ignore[assignment]
        self._torch = torch
        from perfkit.collectors.loops import LineSampler
        from perfkit.collectors.segment_rules import SegmentRules
        from perfkit.collectors.steps import Discovery
        from perfkit.collectors.streams import StreamMonitor
        from perfkit.collectors.timing import SegmentClock

        self.t_start = perf_counter()
        self.clock = SegmentClock()
        self.lines = LineSampler()
        self.streams = StreamMonitor()
        self._streams_installed = False
        self.rules = SegmentRules(self.patcher, self.config.segment_targets)
        self.notes: list[str] = []
        self.step_times: list[float] = []
        self.seg_totals: dict[str, float] = {}
        self.seg_calls: dict[str, int] = {}
        self._next_special = 1
        self._timed_open = False
        self._base_acc: dict[str, float] = {}
        self._base_calls: dict[str, int] = {}
        self.sampled_done: list[int] = []
        self.t_steady0: float | None = None
        self.t_last_end: float | None = None
        self.t_step_begin = 0.0
        self.cuda_alloc: list[int] = []
        self._cuda_alloc_start: int | None = None
        self.timeline: list[dict] = []
        self._timeline_steps = self.config.timeline_steps
        self._alloc_mode = None
        self.op_counts: dict[tuple[str, int], int] = {}
        self.loop_ops: dict[str, float] = {}
        _active = self
        self._entered = True
        self._sync_waits: dict[tuple, list] = {}  # (file, line) -> [calls, wait_s, gap_s, gaps measured]
        self._sync_pending: tuple | None = None  # the last timed sync, its gap to the next not yet known
        hub.acquire(self.sink, self._count_cpu)
        hub.wait_listeners.append(self._on_sync_wait)
        try:
            self.rules.install()
            self.notes.extend(self.rules.errors)
            if self.step_fn:
                self._install_step_fn(self.step_fn)
            self.discovery = Discovery(self, find_steps=not self.step_fn, name_segments=self.config.segment_names)
            if not self.discovery.start():
                self.notes.append("another profiler was active: steps and name-ruled segments were not auto-detected")
            self._discovery_open = True
            if self._torch is not None:
                self.rules.start_policy_discovery(self.discovery)
            self._streams_installed = self.streams.install(self.patcher)
            self._setup_gpu()
            _segments.on_transition = self.clock.transition
        except BaseException:
            self._teardown()
            raise
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
                self._close_step(t_end, final=True)
            finally:
                self._teardown()
            try:
                self.run = self._build_run(status, t_end)
            except Exception as e:  # never lose the program's outcome over a bug in the record
                import traceback

                self.run = Run(command=self.command, status="partial")
                self.run.extra["notes"] = [f"perfkit could not build the full record: {type(e).__name__}: {e}"]
                self.run.extra["traceback"] = traceback.format_exc()
        finally:
            tls.depth -= 1
        return self.run

    def _teardown(self) -> None:
        global _active
        _segments.on_transition = None
        try:
            self._stop_sampling()
        except Exception:
            pass
        if getattr(self, "_discovery_open", False):
            self.discovery.stop(Patcher())  # nothing is wrapped after the end
            self._discovery_open = False
        if hasattr(self, "rules"):
            self.rules.remove()
        if hasattr(self, "clock"):
            self.clock.nvtx_off()
        if self._verify is not None:
            self._verify.stop()
        self.patcher.undo()
        try:
            hub.wait_listeners.remove(self._on_sync_wait)
        except ValueError:
            pass
        if self._entered:
            hub.release(self.sink)
            self._entered = False
        if _active is self:
            _active = None

    # ---- steps ------------------------------------------------------------------------------------
    def _install_step_fn(self, spec: str) -> None:
        from perfkit import targets
        from perfkit.collectors.steps import step_wrapper

        try:
            mod, dotted = targets.parse(spec, "--step-fn")
            targets.cwd_on_path()
            owner, name, value = targets.resolve(mod, dotted)
        except targets.TargetError as e:
            raise ValueError(str(e) if "must look like" in str(e) else f"--step-fn {spec}: {e}") from None
        if not callable(value):
            raise ValueError(f"--step-fn {spec}: {type(value).__name__} is not callable")
        raw = vars(owner).get(name, value) if isinstance(owner, type) else value
        if isinstance(owner, type):
            self.patcher.set(owner, name, step_wrapper(raw))
        else:
            self.patcher.set_everywhere(owner, name, step_wrapper(raw))

    def mark_step(self) -> None:
        self.manual_steps = True
        self.begin_step(None)

    def begin_step(self, obj: Any, now: float | None = None) -> None:
        """A step boundary (entering the outermost env ``step``, or ``perfkit.step()``).

        Steady-state steps with nothing scheduled take the fast path: one list append. Everything else
        (warm-up, sampled steps, CUDA-timed steps, timeline steps, verify, the periodic check for newly
        imported libraries) goes through :meth:`_slow_boundary`."""
        if now is None:
            now = perf_counter()
        if self._trail:
            self._trail = {}
        idx = self.step_index + 1
        if idx < self._next_special:
            self.step_times.append(now - self.t_step_begin)
            self.step_index = idx
            self.t_step_begin = now
            return
        tls.depth += 1
        try:
            self._slow_boundary(now, idx, obj)
        finally:
            tls.depth -= 1

    def _timed(self, idx: int) -> bool:
        """Whether step ``idx`` counts in the steady-state timing (not warm-up, sampled or --verify)."""
        if idx <= self.warmup_steps or idx in self.sample_steps:
            return False
        if self.verify and self._gpu is not None:
            start = self.warmup_steps + 1
            if start <= idx < start + self.config.verify_steps + 1:
                return False
        return True

    def _slow_boundary(self, now: float, idx: int, obj: Any) -> None:
        self._close_step(now)
        self.step_index = idx
        self.t_step_begin = now
        if obj is not None and self.num_envs is None:
            self._describe_env(obj)
        if idx == self.warmup_steps + 1:
            self.t_steady0 = now
        if self._discovery_open and idx > max(self.warmup_steps, 1):
            self._close_discovery()
        hub.install_available()
        self.rules.poll()
        if not self._streams_installed:
            self._streams_installed = self.streams.install(self.patcher)
        if idx in self.sample_steps:
            self._start_sampling(sys._getframe(2))
        steady_i = idx - self.warmup_steps
        special = idx + POLL_EVERY - (idx % POLL_EVERY)  # the next periodic check
        if steady_i < 1:
            special = idx + 1
        else:
            if self._gpu is not None and not self._torch.cuda.is_initialized():
                pass  # the program has not touched CUDA (yet): creating events would initialize it
            elif self._gpu is not None:
                self._gpu.poll()
                if (steady_i - 1) % self.timing_every == 0 and idx not in self.sample_steps:
                    self._gpu.begin_step(idx, self.clock.cur, now)
                    self.clock.refresh()
                    if self._nvtx_mode == "sampled" and self._nvtx is not None:
                        self.clock.nvtx_on(self._nvtx)
                special = min(special, idx + self.timing_every - ((steady_i - 1) % self.timing_every))
                if self._gpu.active:
                    special = idx + 1  # close the timed step at the next boundary
            if steady_i <= self._timeline_steps:
                self.clock.trace = [(self.clock.cur, now)]
                special = idx + 1
            if self.verify and self._verify is None and self._gpu is not None and self._torch.cuda.is_initialized():
                self._start_verify(idx)
            if self._verify is not None:
                self._verify.boundary(idx)
                if self._verify.prof is not None:
                    special = idx + 1
        later_samples = [i for i in self.sample_steps if i >= idx]
        if later_samples:
            special = min(special, later_samples[0])
        if idx in self.sample_steps or not self._timed(idx) or not self._timed(idx + 1):
            special = idx + 1
        self._next_special = max(special, idx + 1)
        # segment time is cumulative in the clock: open / close the timed span on changes of timed-ness
        timed = self._timed(idx)
        if timed and not self._timed_open:
            self._base_acc, self._base_calls = dict(self.clock.acc), dict(self.clock.calls)
            self._timed_open = True
        elif not timed and self._timed_open:
            self._fold_timed_span()

    def _fold_timed_span(self) -> None:
        acc, calls = self.clock.acc, self.clock.calls
        for k, v in acc.items():
            d = v - self._base_acc.get(k, 0.0)
            if d:
                self.seg_totals[k] = self.seg_totals.get(k, 0.0) + d
        for k, v in calls.items():
            d = v - self._base_calls.get(k, 0)
            if d:
                self.seg_calls[k] = self.seg_calls.get(k, 0) + d
        self._timed_open = False

    def end_step(self) -> None:
        self.t_last_end = perf_counter()

    def _close_step(self, now: float, final: bool = False) -> None:
        """Account the step that runs from the last boundary to ``now`` (slow path and the end)."""
        idx = self.step_index
        if idx == 0:
            self.clock.tick(now)
            return
        if final and not self.manual_steps and self.t_last_end is not None and self.t_last_end >= self.t_step_begin:
            now_step = self.t_last_end  # auto steps: the last step ends when its call returns
        else:
            now_step = now
        self.clock.tick(now_step)
        if self.clock.trace is not None:
            trace = self.clock.trace + [(None, now_step)]
            for (seg, t0), (_, t1) in zip(trace, trace[1:]):
                if t1 > t0:
                    self.timeline.append({"step": idx, "segment": seg, "start_ms": round((t0 - self.t_start) * 1e3, 4),
                                          "dur_ms": round((t1 - t0) * 1e3, 4), "gpu": False})
            self.clock.trace = None
        if self._gpu is not None and self._gpu.active:
            self._gpu.end_step()
            self.clock.refresh()
            if self._nvtx_mode == "sampled":
                self.clock.nvtx_off()
        if idx in self.sample_steps:
            self._stop_sampling()
        if self._timed(idx):
            self.step_times.append(now_step - self.t_step_begin)
        if final and self._timed_open:
            self._fold_timed_span()

    # ---- per-sync wait and the host work after it ------------------------------------------------
    def _on_sync_wait(self, site: tuple, t0: float, t1: float) -> None:
        """A real sync at ``site`` blocked the host from ``t0`` to ``t1`` (see :data:`hub.wait_listeners`).
        Steady timed steps only; the gap after it is resolved at the next sync or when its step ends."""
        idx = self.step_index
        if self._sync_pending is not None:
            self._resolve_gap(t0, idx)
        if idx <= self.warmup_steps or not self._timed(idx):
            return
        key = (site[0], site[1])
        acc = self._sync_waits.get(key)
        if acc is None:
            acc = self._sync_waits[key] = [0, 0.0, 0.0, 0]
        acc[0] += 1
        acc[1] += t1 - t0
        self._sync_pending = (key, t1, idx, self.t_step_begin, len(self.step_times))

    def _resolve_gap(self, t_next: float | None, idx_now: int) -> None:
        """The host time from the end of the pending sync to the next sync in its step, else to its step's
        end (its duration is ``step_times[k]`` once the step closed); unknown (dropped) otherwise."""
        key, t_end, idx, t_begin, k = self._sync_pending
        self._sync_pending = None
        if t_next is not None and idx_now == idx:
            gap = t_next - t_end
        elif len(self.step_times) > k:
            gap = t_begin + self.step_times[k] - t_end
        else:
            return
        acc = self._sync_waits[key]
        acc[2] += max(0.0, gap)
        acc[3] += 1

    def _sync_wait_record(self) -> dict[str, dict[str, float | None]]:
        """``{"path:line": {wait_ms_per_step, gap_ms_per_step_after, calls_per_step}}`` over the steady
        timed steps; the gap is the mean measured gap per call times the calls per step."""
        if self._sync_pending is not None:
            self._resolve_gap(None, -1)
        n = len(self.step_times)
        out: dict[str, dict[str, float | None]] = {}
        if not n:
            return out
        for (fn, line), (calls, wait, gap, n_gap) in self._sync_waits.items():
            per_step = calls / n
            out[f"{relpath(fn)}:{line}"] = {
                "wait_ms_per_step": round(wait * 1e3 / n, 6),
                "gap_ms_per_step_after": round(gap / n_gap * per_step * 1e3, 6) if n_gap else None,
                "calls_per_step": round(per_step, 6),
            }
        return out

    def _describe_env(self, obj: Any) -> None:
        from perfkit.batched_env import describe_env, num_envs_of

        self.num_envs = num_envs_of(obj)
        self.env_info = describe_env(obj)

    def _close_discovery(self) -> None:
        self.discovery.stop(self.patcher)
        self._discovery_open = False
        try:
            self.rules.wrap_named(self.config.segment_names, sys._getframe(1))
        except Exception as e:  # pragma: no cover - a scan error must not break the program
            self.notes.append(f"name-rule segments could not be applied: {type(e).__name__}: {e}")
        if self._torch is not None:
            self.rules.finish_policy_discovery()

    # ---- sampling -----------------------------------------------------------------------------------
    def _start_sampling(self, frame) -> None:
        if self._sampling:
            return
        self._sampling = True
        self._sample_index = self.step_index
        self._cuda_alloc_start = None
        if self._torch is not None:
            from perfkit.collectors.alloc import alloc_mode, cuda_alloc_counter

            self._cuda_alloc_start = cuda_alloc_counter()
            self._alloc_mode = alloc_mode(self.op_counts)
            self._alloc_mode.__enter__()
        self.lines.start(frame)
        self.streams.start()

    def _stop_sampling(self) -> None:
        if not self._sampling:
            return
        self.lines.stop()
        self.streams.stop()
        if self._alloc_mode is not None:
            try:
                self._alloc_mode.__exit__(None, None, None)
            except Exception as e:  # another mode was pushed on top and not popped
                self.notes.append(f"allocation sampling could not be closed cleanly: {e}")
            self._alloc_mode = None
            from perfkit.collectors.alloc import cuda_alloc_counter

            end = cuda_alloc_counter()
            if end is not None and self._cuda_alloc_start is not None:
                self.cuda_alloc.append(end - self._cuda_alloc_start)
        self.sampled_done.append(self._sample_index)
        self._sampling = False

    # ---- GPU ----------------------------------------------------------------------------------------
    def _setup_gpu(self) -> None:
        from perfkit.collectors.timing import CudaEventTimer, nvtx_wanted

        self._gpu = None
        self._nvtx = None
        self._nvtx_mode = nvtx_wanted(self.nvtx_setting)
        torch = self._torch
        if torch is not None and torch.cuda.is_available():
            self._gpu = CudaEventTimer(torch)
            self._gpu.t0 = self.t_start
            self._gpu.timeline_steps = self._timeline_steps
            if self._nvtx_mode != "off":
                try:
                    import nvtx

                    self._nvtx = nvtx
                except ImportError:
                    self.notes.append("nvtx is not installed: no NVTX ranges")
            if self._nvtx_mode == "always" and self._nvtx is not None:
                self.clock.nvtx_on(self._nvtx)
        elif self.verify:
            self.notes.append("--verify needs CUDA; skipped on this machine")
        if self._gpu is not None:
            self.clock.gpu = self._gpu

    def _start_verify(self, idx: int) -> None:
        from perfkit.collectors.verify import Verifier

        self._verify = Verifier(self._torch, steps=self.config.verify_steps)
        self._verify.start(idx)

    # ---- the record -----------------------------------------------------------------------------------
    def _build_run(self, status: str, t_end: float) -> Run:
        from perfkit.machine import describe, process_memory

        run = Run(command=self.command, status=status)
        n_steps = self.step_index
        steady = max(0, n_steps - self.warmup_steps)
        run.num_envs = self.num_envs
        run.env = dict(self.env_info)
        if self.num_envs is not None:
            run.env.setdefault("num_envs", self.num_envs)
        times = self.step_times
        run.steps = steady
        run.step_times_ms = [round(t * 1e3, 4) for t in times]
        timed = sum(times)
        run.wall_s = round(timed, 6)
        if self.t_steady0 is not None:
            run.warmup_s = round(self.t_steady0 - self.t_start, 6)
        else:
            run.warmup_s = round(t_end - self.t_start, 6)
        if times and timed > 0:
            run.sps = round(len(times) * (self.num_envs or 1) / timed, 3)
            import numpy as np

            p50, p99 = np.percentile(times, [50, 99])  # linear interpolation between closest ranks
            run.step_ms = {"p50": round(float(p50) * 1e3, 4), "p99": round(float(p99) * 1e3, 4),
                           "mean": round(timed / len(times) * 1e3, 4)}
        if self._gpu is not None:
            tls.depth += 1
            try:
                self._gpu.poll(final=True)
            finally:
                tls.depth -= 1
        run.segments = self._segment_stats(steady, n_steps)
        run.findings = self._findings(steady, n_steps)
        if self._setup_syncs:
            run.extra["setup_syncs"] = self._setup_syncs
        if self._teardown_syncs:
            run.extra["teardown_syncs"] = self._teardown_syncs  # after the last step's start
        sync_wait = self._sync_wait_record()
        if sync_wait:
            run.extra["sync_wait"] = sync_wait  # host time in each real sync, and the host work after it
        if self.loop_ops:
            run.extra["loop_ops"] = dict(self.loop_ops)  # torch ops per loop iteration (the cost model reads it)
        run.machine = describe()
        run.memory = process_memory(self._torch)
        run.extra["total_steps"] = n_steps
        run.extra["warmup_steps"] = min(self.warmup_steps, n_steps)
        run.extra["step_detection"] = ("manual" if self.manual_steps else f"--step-fn {self.step_fn}" if self.step_fn
                                       else "auto" if n_steps else "none")
        if self.discovery.step_classes:
            run.extra["step_classes"] = [f"{c.__module__}.{c.__qualname__}" for c in self.discovery.step_classes]
        run.extra["sampled_steps"] = list(self.sampled_done)
        if self.rules.policy_classes:
            run.extra["policy_classes"] = [f"{c.__module__}.{c.__qualname__}" for c in self.rules.policy_classes]
        if self.cuda_alloc:
            run.extra["cuda_allocator_allocs_per_step"] = sum(self.cuda_alloc) / len(self.cuda_alloc)
        run.extra["timeline"] = self.timeline + (self._gpu.timeline if self._gpu is not None else [])
        run.extra["count_cpu_tensors"] = hub.count_cpu if self._count_cpu is None else bool(self._count_cpu)
        if self._gpu is not None:
            run.extra["gpu_timed_steps"] = self._gpu.steps
            if self._gpu.step_ms:
                run.extra["gpu_step_ms_mean"] = sum(self._gpu.step_ms) / len(self._gpu.step_ms)
        if self._verify is not None:
            run.extra["verify"] = self._verify.result()
        if self.streams.interop_sites:
            run.extra["warp_torch_interop"] = [
                {"call": k[0], "path": relpath(k[1]), "line": k[2], "count": v} for k, v in self.streams.interop_sites.items()
            ]
        if self.lines.skipped_reason:
            self.notes.append(f"per-env loop sampling skipped: {self.lines.skipped_reason}")
        if n_steps == 0:
            self.notes.append("no env step was detected: no `step` method on an object with an integer `num_envs` "
                              "was called; use perfkit.step(), --step-fn or [tool.perfkit] step_fn")
        if self.notes:
            run.extra["notes"] = list(self.notes)
        try:
            from perfkit.analysis.cost import price_run
        except ImportError:
            price_run = None
        if price_run is not None:
            try:
                price_run(run)
            except Exception as e:  # pricing is an annotation: never lose the record over it
                run.extra.setdefault("notes", []).append(f"pricing failed: {type(e).__name__}: {e}")
        return run

    def _segment_stats(self, steady: int, n_steps: int) -> dict[str, SegmentStats]:
        stats: dict[str, SegmentStats] = {}

        def get(name: str) -> SegmentStats:
            if name not in stats:
                stats[name] = SegmentStats()
            return stats[name]

        n = len(self.step_times)
        for seg, secs in self.seg_totals.items():
            get(seg).cpu_ms_per_step = round(secs * 1e3 / n, 6) if n else 0.0
        for seg, c in self.seg_calls.items():
            get(seg).calls_per_step = round(c / n, 4) if n else 0.0
        if self._gpu is not None and self._gpu.steps:
            for seg, ms in self._gpu.totals.items():
                get(seg).gpu_ms_per_step = round(ms / self._gpu.steps, 6)
        denom = steady or n_steps
        n_sampled = len(self.sampled_done)
        for key, (cnt, nbytes, segs) in self.sink.counts.items():
            kind, phase = key[0], key[7]
            if kind == "sync" and denom:
                if steady and phase != "steady":
                    continue
                if not steady and phase == "setup":
                    continue
                for seg, k in segs.items():
                    get(seg).syncs_per_step += k / denom
            elif kind == "alloc" and n_sampled:
                for seg, k in segs.items():
                    s = get(seg)
                    s.allocs_per_step += k / n_sampled
                    s.alloc_bytes_per_step += (nbytes * k / cnt) / n_sampled if cnt else 0
        for s in stats.values():
            s.syncs_per_step = round(s.syncs_per_step, 6)
            s.allocs_per_step = round(s.allocs_per_step, 6)
            s.alloc_bytes_per_step = round(s.alloc_bytes_per_step, 3)
        from perfkit.record import SEGMENTS

        order = [s for s in SEGMENTS if s in stats] + sorted(s for s in stats if s not in SEGMENTS)
        return {k: stats[k] for k in order}

    def _findings(self, steady: int, n_steps: int) -> list[Finding]:
        from perfkit.collectors import alloc as alloc_mod, loops as loops_mod, streams as streams_mod
        from perfkit.collectors.torch_sync import FIXES as TORCH_FIXES
        from perfkit.collectors.warp_sync import FIXES as WARP_FIXES

        fixes = {**TORCH_FIXES, **WARP_FIXES}
        agg: dict[tuple, dict] = {}
        setup: list[dict] = []
        teardown: list[dict] = []
        # the steady steps' syncs are counted over their closed intervals (step start to next step start),
        # the same intervals as step_times; what follows the last step start is teardown
        trail = self._trail if steady > 1 else {}
        intervals = steady - 1 if trail else steady
        n_sampled = len(self.sampled_done)
        for key, (cnt, nbytes, segs) in self.sink.counts.items():
            kind, op, fn, line, func, thread, would, phase = key
            if kind == "sync" and phase == "setup" and n_steps:
                setup.append({"op": op, "path": relpath(fn), "line": line, "count": cnt})
                continue
            tail = trail.get(key, 0)
            if tail and tail == cnt:  # this site synced only after the last step started: teardown
                teardown.append({"op": op, "path": relpath(fn), "line": line, "count": tail})
                continue
            if kind in ("alloc", "stream") and not n_sampled:
                continue
            k = (kind, op, fn, line, func, thread, would)
            a = agg.setdefault(k, {"count": 0, "steady": 0, "bytes": 0, "segs": {}})
            a["count"] += cnt
            a["bytes"] += nbytes
            if phase in ("steady", "sampled"):
                a["steady"] += cnt - tail  # over the closed intervals only
            for s, m in segs.items():
                a["segs"][s] = a["segs"].get(s, 0) + m
        out: list[Finding] = []
        for (kind, op, fn, line, func, thread, would), a in agg.items():
            seg = max(a["segs"], key=a["segs"].get) if a["segs"] else "other"
            f = Finding(kind=kind, op=op, path=relpath(fn), line=line, function=func, segment=seg,
                        thread=thread, would_sync_on_gpu=bool(would), code=source_line(fn, line))
            if kind == "sync":
                f.count = a["count"]
                if intervals:
                    f.per_step = round(a["steady"] / intervals, 6)
                elif n_steps:
                    f.per_step = round(a["count"] / n_steps, 6)
                f.message = fixes.get(op, "")
            else:  # sampled kinds: scale the sampled steps to the run
                per = a["count"] / n_sampled
                f.per_step = round(per, 6)
                f.count = int(round(per * max(n_steps, 1)))
                if kind == "alloc":
                    f.bytes = int(round(a["bytes"] / n_sampled * max(n_steps, 1)))
                    f.message = alloc_mod.FIX
                else:
                    f.message = streams_mod.FIX
            out.append(f)
        num_envs = self.num_envs
        for lp in loops_mod.hot_loops(self.lines.counts, self.lines.steps, num_envs, self.lines.calls):
            lo, hi = lp["span"]
            ops = sum(n for (fn_, ln), n in self.op_counts.items() if fn_ == lp["filename"] and lo <= ln <= hi)
            if ops and n_sampled and lp["per_step"]:
                self.loop_ops[f"{relpath(lp['filename'])}:{lp['line']}"] = round(ops / n_sampled / lp["per_step"], 3)
            out.append(Finding(kind="loop", op=lp["kind"], path=relpath(lp["filename"]), line=lp["line"],
                               function=lp["function"], segment=lp["segment"], per_step=round(lp["per_step"], 3),
                               count=int(round(lp["per_step"] * max(n_steps, 1))), message=loops_mod.FIX,
                               code=source_line(lp["filename"], lp["line"])))
        # kept apart: syncs before the first step (construction, reset) are not per-step costs
        self._setup_syncs = sorted(setup, key=lambda d: -d["count"])
        self._teardown_syncs = sorted(teardown, key=lambda d: -d["count"])
        out.sort(key=lambda f: (-f.per_step, f.kind, f.path, f.line))
        return out


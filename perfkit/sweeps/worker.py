"""One point of an env-count sweep, run in its own fresh process (``python -m perfkit.sweeps.worker``).

Builds the env from a ``module:callable`` factory called with ``num_envs=N``, warms it up (kernel
compilation, CUDA-graph capture) and times that apart, then drives ``env.step`` with zero or random
actions for the steady state and writes a :class:`perfkit.record.Run`.

How it measures, so the numbers are honest:

* steady-state wall time is taken between two device synchronisations, one before the first timed
  step and one after the last — never a sync inside the loop;
* per-step times on CUDA come from CUDA events recorded between steps (created up front, resolved
  after the final sync), so the step-time distribution costs no sync either; on the CPU, where
  every op is synchronous, from ``perf_counter``;
* actions are preallocated (random ones as a small pool drawn before timing), so the loop times
  the env, not an RNG or an allocator;
* with ``session_steps`` a *separate*, shorter instrumented pass under ``perfkit.profile.session.Session``
  after the timed one supplies per-segment times and findings — instrumentation never touches the
  headline SPS.

An out-of-memory error (``torch.cuda.OutOfMemoryError``, ``MemoryError``, Warp's "Failed to
allocate") writes a record with ``status="oom"`` and exits with :data:`EXIT_OOM`; any other error
writes ``status="error"`` and exits 1. The parent sweep keeps going either way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfkit.batched_env import describe_env
from perfkit.machine import process_memory
from perfkit.sweeps.oom import is_oom
from perfkit.record import (
    EXTRA_BUILD_S, EXTRA_CUDA_VISIBLE_DEVICES, EXTRA_ERROR, EXTRA_FIRST_STEP_S, EXTRA_GPU_INDEX, EXTRA_HOST_MS_PER_STEP,
    EXTRA_PHYSICS_SPS, EXTRA_SEGMENTS_SOURCE, EXTRA_SESSION, EXTRA_TIMING, EXTRA_TRACEBACK, EXTRA_WARMUP_STEPS_S, Run,
    SegmentStats,
)

EXIT_OOM = 3
MAX_STEPS = 100_000
ENV_STEP_SEGMENT = "env.step"  # the whole env.step, when no session is there to break it down

@dataclass
class PointConfig:
    target: str  # "module:callable"
    num_envs: int
    steps: int = 200  # steady-state steps (upper bound when max_seconds cuts it short)
    warmup_steps: int = 20
    actions: str = "random"  # "random" | "zero"
    seed: int = 0
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    max_seconds: float | None = None  # stop the steady state early once this much time has passed
    min_steps: int = 10  # ... but never before this many steps
    session_steps: int = 0  # instrumented steps under perfkit.profile.session (0: skip)
    command: list[str] = field(default_factory=list)  # recorded as the run's command

    def validate(self) -> None:
        if ":" not in self.target:
            raise ValueError(f"target {self.target!r} is not 'module:callable'")
        if self.num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {self.num_envs}")
        if not 1 <= self.steps <= MAX_STEPS or self.warmup_steps < 0:
            # one CUDA event per step is created up front: bound them
            raise ValueError(f"steps must be in 1..{MAX_STEPS} and warmup_steps >= 0")
        if self.actions not in ("random", "zero"):
            raise ValueError(f"actions must be 'random' or 'zero', got {self.actions!r}")


def load_factory(target: str):
    """The env factory ``module:callable`` names (dotted attribute paths allowed after the colon)."""
    from perfkit import targets

    return targets.load(target, "sweep target")


class _Point:
    """State of one point in progress, so an error at any stage still leaves a record behind."""

    def __init__(self, cfg: PointConfig):
        self.cfg = cfg
        self.run = Run(command=list(cfg.command) or ["perfkit.sweeps.worker", cfg.target, "--num-envs", str(cfg.num_envs)],
                       num_envs=cfg.num_envs, status="partial")
        self.run.extra[EXTRA_CUDA_VISIBLE_DEVICES] = os.environ.get("CUDA_VISIBLE_DEVICES")
        self.torch = None
        self.cuda = False
        self.free_baseline: int | None = None
        self.gpu_used = 0

    # ---- device helpers -------------------------------------------------------------------------
    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()  # perfkit: ignore[PK110] the sync at a measurement boundary

    def sample_gpu_used(self) -> None:
        if self.cuda and self.free_baseline is not None:
            free, _total = self.torch.cuda.mem_get_info()
            self.gpu_used = max(self.gpu_used, self.free_baseline - free)

    # ---- stages -------------------------------------------------------------------------------
    def measure(self) -> Run:
        cfg, run = self.cfg, self.run
        factory = load_factory(cfg.target)  # first: a wrong target fails before paying for torch
        import torch

        self.torch = torch

        if torch.cuda.is_available():
            # device memory the env takes (Warp's allocations included, which torch's allocator
            # statistics never see) is measured against what was free before it was built
            torch.cuda.init()
            torch.cuda.reset_peak_memory_stats()
            self.free_baseline = torch.cuda.mem_get_info()[0]
        t0 = time.perf_counter()
        env = factory(num_envs=cfg.num_envs, **cfg.env_kwargs)
        device = torch.device(str(getattr(env, "device", "cpu")))
        self.cuda = device.type == "cuda"
        if self.cuda and device.index is not None:
            torch.cuda.set_device(device)
        build_s = time.perf_counter() - t0
        run.env = describe_env(env)
        if self.cuda:
            run.extra[EXTRA_GPU_INDEX] = device.index if device.index is not None else torch.cuda.current_device()
        self.sample_gpu_used()

        actions = make_actions(torch, env, cfg)

        # ---- warm-up: compile kernels, capture graphs; timed apart ----
        t1 = time.perf_counter()
        env.reset()
        self.sync()
        first_step_s = None
        for i in range(cfg.warmup_steps):
            env.step(actions[i % len(actions)])
            if i == 0:
                self.sync()
                first_step_s = time.perf_counter() - t1
        self.sync()
        warm_s = time.perf_counter() - t1
        self.sample_gpu_used()
        run.warmup_s = build_s + warm_s
        run.extra.update({EXTRA_BUILD_S: build_s, EXTRA_WARMUP_STEPS_S: warm_s, EXTRA_FIRST_STEP_S: first_step_s})

        # ---- steady state ----
        steps, wall_s, host_s, step_ms, gpu_ms = self.steady_state(env, actions)
        self.sample_gpu_used()
        run.steps = steps
        run.wall_s = wall_s
        run.sps = steps * cfg.num_envs / wall_s if wall_s > 0 else 0.0
        decimation = run.env.get("decimation") or 1
        run.extra[EXTRA_PHYSICS_SPS] = run.sps * decimation
        run.extra[EXTRA_HOST_MS_PER_STEP] = 1e3 * host_s / steps  # enqueue time: close to step time = launch-bound
        run.step_times_ms = [round(x, 6) for x in step_ms]
        run.step_ms = percentiles(step_ms)
        run.extra[EXTRA_TIMING] = "cuda-events" if self.cuda else "perf_counter"
        run.segments = {
            ENV_STEP_SEGMENT: SegmentStats(
                gpu_ms_per_step=(sum(gpu_ms) / len(gpu_ms)) if gpu_ms else None,
                cpu_ms_per_step=1e3 * host_s / steps,
                calls_per_step=1.0,
            )
        }
        run.extra[EXTRA_SEGMENTS_SOURCE] = "sweep worker: whole env.step (no perfkit.profile.session breakdown)"

        # ---- optional instrumented pass (segments and findings), never part of the headline ----
        if cfg.session_steps > 0:
            self.session_pass(env, actions)

        run.memory = self.memory()
        run.status = "complete"
        return run

    def steady_state(self, env, actions):
        cfg, torch = self.cfg, self.torch
        n = cfg.steps
        k = len(actions)
        deadline = None
        if self.cuda:
            events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
            self.sync()
            t0 = time.perf_counter()
            if cfg.max_seconds:
                deadline = t0 + cfg.max_seconds
            done = 0
            for i in range(n):
                events[i].record()
                env.step(actions[i % k])
                done = i + 1
                if deadline is not None and done >= cfg.min_steps and time.perf_counter() > deadline:
                    break
            events[done].record()
            t_enqueued = time.perf_counter()  # perfkit: ignore[PK401] the enqueue time, on purpose
            torch.cuda.synchronize()
            wall = time.perf_counter() - t0
            step_ms = [events[i].elapsed_time(events[i + 1]) for i in range(done)]
            return done, wall, t_enqueued - t0, step_ms, step_ms
        marks = [0.0] * (n + 1)
        t0 = time.perf_counter()
        if cfg.max_seconds:
            deadline = t0 + cfg.max_seconds
        marks[0] = t0
        done = 0
        for i in range(n):
            env.step(actions[i % k])
            marks[i + 1] = time.perf_counter()  # perfkit: ignore[PK401] the CPU path: no device work to wait for
            done = i + 1
            if deadline is not None and done >= cfg.min_steps and marks[done] > deadline:
                break
        wall = marks[done] - t0
        step_ms = [1e3 * (marks[i + 1] - marks[i]) for i in range(done)]
        return done, wall, wall, step_ms, []

    def session_pass(self, env, actions) -> None:
        from perfkit.profile.session import Session

        run, cfg = self.run, self.cfg
        try:
            t0 = time.perf_counter()
            # the env is warm already; a couple of session warm-up steps absorb the hooks' first calls
            # a separate pass for the per-segment split: time every step's segments with CUDA events
            # (the default, every 8th step, would leave a 10-step pass with none after sampling)
            with Session(command=list(run.command), warmup_steps=2 if cfg.session_steps > 4 else 0,
                         timing_every=1) as s:
                for i in range(cfg.session_steps):
                    env.step(actions[i % len(actions)])
            self.sync()
            elapsed = time.perf_counter() - t0
            srun = s.run
        except Exception as e:
            run.extra[EXTRA_SESSION] = {"used": False, "reason": f"session pass failed: {type(e).__name__}: {e}"}
            return
        run.extra[EXTRA_SESSION] = {
            "used": True,
            "steps": cfg.session_steps,
            "sps_under_session": cfg.session_steps * cfg.num_envs / elapsed if elapsed > 0 else None,
            "session_steps_detected": srun.steps,
        }
        if srun.segments:
            run.segments = dict(srun.segments)
            run.extra[EXTRA_SEGMENTS_SOURCE] = "perfkit.profile.session (instrumented pass after the timed steady state)"
        run.findings = list(srun.findings)
        if srun.timeline.spans:
            run.timeline.spans = srun.timeline.spans

    def memory(self) -> dict[str, Any]:
        # an OOM while building (before self.cuda is known): how far the allocations got is the useful number
        oom_building = self.free_baseline is not None and self.run.status == "oom"
        mem: dict[str, Any] = process_memory(self.torch if self.cuda or oom_building else None)
        if self.free_baseline is not None and self.cuda:
            mem["gpu_used_bytes"] = int(self.gpu_used)
        return mem


def make_actions(torch, env, cfg: PointConfig) -> list:
    act_dim = getattr(env, "act_dim", None)
    if act_dim is None:
        space = getattr(env, "action_space", None)
        shape = getattr(space, "shape", None)
        if not shape:
            raise TypeError("env has neither act_dim nor action_space.shape: cannot build actions")
        act_dim = int(shape[-1])
    device = torch.device(str(getattr(env, "device", "cpu")))
    shape = (cfg.num_envs, int(act_dim))
    if cfg.actions == "zero":
        return [torch.zeros(shape, device=device)]
    g = torch.Generator(device="cpu").manual_seed(cfg.seed)
    # a small pool drawn before timing; cycling it keeps the RNG out of the timed loop
    return [(torch.rand(shape, generator=g) * 2 - 1).to(device) for _ in range(8)]


def percentiles(values_ms: list[float]) -> dict[str, float]:
    if not values_ms:
        return {}
    import numpy as np

    p50, p90, p99 = (float(v) for v in np.percentile(values_ms, [50, 90, 99]))  # linear interpolation
    return {"p50": p50, "p90": p90, "p99": p99, "mean": sum(values_ms) / len(values_ms),
            "min": min(values_ms), "max": max(values_ms)}


def run_point(cfg: PointConfig, out: str | os.PathLike) -> int:
    """Measure one point and write its record to ``out``; returns the process exit code."""
    cfg.validate()
    point = _Point(cfg)
    code = 0
    try:
        point.measure()
    except BaseException as e:  # noqa: BLE001 - every failure must still leave a record
        if isinstance(e, KeyboardInterrupt):
            point.run.status, code = "partial", 130
        elif is_oom(e):
            point.run.status, code = "oom", EXIT_OOM
        else:
            point.run.status, code = "error", 1
        point.run.extra[EXTRA_ERROR] = f"{type(e).__name__}: {e}"
        point.run.extra[EXTRA_TRACEBACK] = traceback.format_exc(limit=12)[-4000:]
        try:
            point.run.memory = point.memory()
        except Exception:
            pass
        print(f"perfkit sweep point num_envs={cfg.num_envs}: {point.run.status}: {type(e).__name__}: {e}",
              file=sys.stderr)
    point.run.exit_code = code
    try:
        if "torch" in sys.modules:
            from perfkit import machine

            point.run.machine = machine.describe()
        else:  # failed before the env was built: not worth seconds of importing torch to say so
            import platform

            point.run.machine = {"host": platform.node(), "python": platform.python_version(),
                                 "note": "point failed before torch was imported"}
    except Exception as e:
        point.run.machine = {"error": str(e)}
    try:  # which process this was: rank 0 of 1, on the device it saw (dist.physical_gpu: the machine's)
        from perfkit.collectors.comm import dist_record
        from perfkit.dist import launch_info

        point.run.dist = dist_record({"launch": launch_info()}, 0, point.run.env.get("device"), point.run.machine.get("host"))
    except Exception:  # pragma: no cover - a record without it is still a record
        pass
    point.run.save(out)
    return code


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m perfkit.sweeps.worker",
                                 description="Measure one env-count sweep point (used by `perfkit sweep`).")
    ap.add_argument("--config", required=True, help="PointConfig as JSON")
    ap.add_argument("--out", required=True, help="where to write the run record")
    a = ap.parse_args(argv)
    cfg = PointConfig(**json.loads(a.config))
    return run_point(cfg, Path(a.out))


if __name__ == "__main__":
    sys.exit(main())

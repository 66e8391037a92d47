"""On a GPU: a point is timed with CUDA events (no sync inside the loop) and reports device memory."""

import pytest

from perfkit.record import Run
from perfkit.sweeps.worker import PointConfig, run_point

pytestmark = pytest.mark.gpu


def test_cuda_point_uses_events_and_reports_memory(tmp_path, toy_on_path):
    out = tmp_path / "p.json"
    cfg = PointConfig(target="sweep_toy_env:make_toy_env", num_envs=65536, steps=50, warmup_steps=5,
                      env_kwargs={"device": "cuda"})
    assert run_point(cfg, out) == 0
    run = Run.load(out)
    assert run.extra["timing"] == "cuda-events"
    assert len(run.step_times_ms) == 50 and all(t > 0 for t in run.step_times_ms)
    # event-timed steps tile the steady state: their sum cannot exceed the synced wall time
    assert sum(run.step_times_ms) / 1e3 <= run.wall_s * 1.01
    assert run.segments["env.step"].gpu_ms_per_step > 0
    assert run.memory["peak_gpu_bytes"] > 65536 * 4 * 4  # at least the state buffers
    assert run.memory["gpu_used_bytes"] >= 0
    assert run.machine["device"] != "cpu"


def test_cuda_oom_is_recorded(tmp_path, toy_on_path):
    import torch

    free, _ = torch.cuda.mem_get_info()
    out = tmp_path / "p.json"
    # a per-env state buffer the device cannot hold
    n = int(free // (4 * 4)) * 4
    cfg = PointConfig(target="sweep_toy_env:make_toy_env", num_envs=n, steps=2, env_kwargs={"device": "cuda", "act_dim": 4})
    assert run_point(cfg, out) == 3
    assert Run.load(out).status == "oom"


def test_cuda_point_session_pass_times_segments_on_the_gpu(tmp_path, toy_on_path):
    """The short instrumented pass (--session-steps) must come back with CUDA-event segment times:
    on the H200 a 10-step pass timed with the session's default (every 8th step) had none."""
    out = tmp_path / "p.json"
    cfg = PointConfig(target="sweep_toy_env:make_toy_env", num_envs=4096, steps=20, warmup_steps=3,
                      session_steps=10, env_kwargs={"device": "cuda"})
    assert run_point(cfg, out) == 0
    run = Run.load(out)
    assert run.extra["session"]["used"], run.extra["session"]
    timed = {k: v.gpu_ms_per_step for k, v in run.segments.items() if v.gpu_ms_per_step}
    assert timed, run.segments

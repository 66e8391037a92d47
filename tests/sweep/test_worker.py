"""The point measurement itself, in-process (the sweep runs the same code in a subprocess)."""

import json

import pytest

from perfkit.record import Run
from perfkit.sweeps.worker import EXIT_OOM, PointConfig, is_oom, main, percentiles, run_point


def test_point_measures_steady_state_and_writes_record(tmp_path, toy_on_path):
    out = tmp_path / "p.json"
    cfg = PointConfig(target="sweep_toy_env:make_toy_env", num_envs=128, steps=40, warmup_steps=3,
                      env_kwargs={"decimation": 3, "act_dim": 5})
    assert run_point(cfg, out) == 0
    run = Run.load(out)
    assert run.status == "complete" and run.exit_code == 0
    assert run.num_envs == 128 and run.steps == 40
    assert len(run.step_times_ms) == 40
    # SPS is steps x envs over the steady-state wall time, which is the sum of the step times on CPU
    assert run.sps == pytest.approx(40 * 128 / run.wall_s)
    assert sum(run.step_times_ms) / 1e3 == pytest.approx(run.wall_s, rel=1e-3)
    assert run.extra["physics_sps"] == pytest.approx(3 * run.sps)
    assert run.step_ms["p50"] <= run.step_ms["p99"] <= run.step_ms["max"]
    assert run.warmup_s >= run.extra["build_s"] > 0
    assert run.env["decimation"] == 3 and run.env["act_dim"] == 5 and run.env["obs_dim"] == 12
    assert run.env["policy_dt"] == pytest.approx(0.015) and run.env["rendering"] is False
    assert run.env["backend"] == "torch" and run.env["device"] == "cpu"
    assert run.memory["host_rss_bytes"] > 10 * 2**20
    # the same memory block as a profile's (machine.process_memory): peak and current host RSS
    assert run.memory["host_peak_rss_bytes"] > 10 * 2**20
    assert run.peak_memory() == (run.memory["host_peak_rss_bytes"], "peak host RSS")
    assert run.segments["env.step"].cpu_ms_per_step > 0
    assert run.machine["torch"]


def test_max_seconds_cuts_the_steady_state_short_but_not_below_min_steps(tmp_path, toy_on_path):
    out = tmp_path / "p.json"
    cfg = PointConfig(target="sweep_toy_env:make_toy_env", num_envs=8, steps=100_000, warmup_steps=0,
                      max_seconds=0.05, min_steps=10, actions="zero")
    assert run_point(cfg, out) == 0
    run = Run.load(out)
    assert 10 <= run.steps < 100_000
    assert run.wall_s >= 0.05
    assert len(run.step_times_ms) == run.steps


def test_oom_point_writes_oom_record_and_exit_code(tmp_path, toy_on_path):
    out = tmp_path / "p.json"
    cfg = PointConfig(target="sweep_toy_env:make_toy_env", num_envs=64, steps=5, env_kwargs={"oom_at": [64]})
    assert run_point(cfg, out) == EXIT_OOM
    run = Run.load(out)
    assert run.status == "oom" and run.exit_code == EXIT_OOM
    assert "allocate" in run.extra["error"]
    assert run.steps == 0 and run.sps == 0


def test_other_errors_are_recorded_as_error(tmp_path, toy_on_path):
    out = tmp_path / "p.json"
    cfg = PointConfig(target="sweep_toy_env:make_toy_env", num_envs=4, steps=5, env_kwargs={"no_such_kwarg": 1})
    assert run_point(cfg, out) == 1
    run = Run.load(out)
    assert run.status == "error" and "no_such_kwarg" in run.extra["error"]


def test_worker_main_parses_config(tmp_path, toy_on_path):
    out = tmp_path / "p.json"
    cfg = {"target": "sweep_toy_env:make_toy_env", "num_envs": 4, "steps": 3, "warmup_steps": 1}
    assert main(["--config", json.dumps(cfg), "--out", str(out)]) == 0
    assert Run.load(out).steps == 3


def test_bad_config_is_rejected():
    with pytest.raises(ValueError, match="module:callable"):
        run_point(PointConfig(target="nocolon", num_envs=4), "unused.json")
    with pytest.raises(ValueError, match="actions"):
        run_point(PointConfig(target="a:b", num_envs=4, actions="sideways"), "unused.json")


def test_is_oom_recognises_torch_python_and_warp_errors():
    import torch

    assert is_oom(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert is_oom(MemoryError())
    assert is_oom(RuntimeError("Failed to allocate 1073741824 bytes on device 'cuda:0'"))
    assert not is_oom(RuntimeError("shape mismatch"))
    assert not is_oom(ValueError("out of memory"))  # only runtime errors carry allocator messages


def test_percentiles_interpolate_like_numpy():
    import numpy as np

    xs = [5.0, 1.0, 3.0, 2.0, 4.0, 10.0]
    p = percentiles(xs)
    assert p["p50"] == pytest.approx(np.percentile(xs, 50))
    assert p["p99"] == pytest.approx(np.percentile(xs, 99))
    assert p["mean"] == pytest.approx(np.mean(xs))
    assert percentiles([]) == {}

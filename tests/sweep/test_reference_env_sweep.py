"""A real sweep of the reference env on its CPU backend (MuJoCo C): two tiny points, few steps."""

import json

import pytest
from click.testing import CliRunner

from perfkit.cli import main
from perfkit.record import Run

pytest.importorskip("mujoco")
pytest.importorskip("perfkit.envs")


def test_reference_env_cpu_sweep_with_session_breakdown(tmp_path):
    out = tmp_path / "sweep"
    res = CliRunner().invoke(main, [
        "sweep", "perfkit.envs:make_env", "--num-envs", "2,8", "--env-kwarg", "name=ant",
        "--env-kwarg", "backend=mujoco", "--steps", "10", "--warmup-steps", "2", "--session-steps", "8",
        "-o", str(out), "--no-progress"])
    assert res.exit_code == 0, res.output
    manifest = json.loads((out / "sweep.json").read_text())
    assert [p["status"] for p in manifest["points"]] == ["complete", "complete"], manifest["points"]
    run = Run.load(out / "points" / "8.json")
    assert run.env["name"] == "ant" and run.env["backend"] == "mujoco" and run.num_envs == 8
    assert run.env["decimation"] >= 1 and run.env["obs_dim"] > 0 and run.env["act_dim"] == 8
    assert run.extra["physics_sps"] == pytest.approx(run.sps * run.env["decimation"])
    assert run.steps == 10 and run.sps > 0
    # the instrumented pass ran under perfkit's session and broke the step into segments
    assert run.extra["session"]["used"] is True, run.extra["session"]
    assert "physics" in run.segments and run.segments["physics"].cpu_ms_per_step > 0
    # the reference env's step is sync-free and allocation-free, and the session agrees
    assert sum(s.syncs_per_step for s in run.segments.values()) == 0

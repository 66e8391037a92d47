"""`perfkit sweep` end to end on the CPU: fresh subprocess per point, OOM recorded, outputs on disk."""

import json
import os
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from perfkit.cli import main
from perfkit.record import Run
from perfkit.sweeps.runner import SweepError, parse_env_kwargs, parse_num_envs
from perfkit.sweeps.record import load_sweep

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """One small sweep shared by the tests below: 3 points over 2 "GPUs", the middle one out of memory."""
    out = tmp_path_factory.mktemp("sweep") / "out"
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(HERE))
        mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])))
        res = CliRunner().invoke(main, [
            "sweep", "sweep_toy_env:make_toy_env", "--num-envs", "16,64,256", "-o", str(out),
            "--steps", "30", "--warmup-steps", "2", "--env-kwarg", "oom_at=[64]", "--env-kwarg", "decimation=2",
            "--gpus", "0,1", "--no-progress", "--report", str(out / "report"),
        ])
    assert res.exit_code == 0, res.output + repr(res.exception)
    return out, res.output


def test_parse_num_envs():
    assert parse_num_envs("256..32768") == [256, 512, 1024, 2048, 4096, 8192, 16384, 32768]
    assert parse_num_envs("256..4096x4") == [256, 1024, 4096]
    assert parse_num_envs("256..3000") == [256, 512, 1024, 2048, 3000]  # the end is always measured
    assert parse_num_envs("4096,256, 1024") == [256, 1024, 4096]
    assert parse_num_envs("64") == [64]
    for bad in ("", "0..8", "8..4", "a,b", "256..1024x1", "1..1180591620717411303424", "-4"):
        with pytest.raises(SweepError):
            parse_num_envs(bad)


def test_parse_env_kwargs():
    assert parse_env_kwargs(["name=humanoid", "seed=3", "flags=[1,2]", "on=true"]) == {
        "name": "humanoid", "seed": 3, "flags": [1, 2], "on": True}
    for bad in (["novalue"], ["1x=2"], ["num_envs=4"]):
        with pytest.raises(SweepError):
            parse_env_kwargs(bad)


@pytest.mark.parametrize("args, message", [
    (["sweep_toy_env:make_toy_env", "--num-envs", "8..4"], "start <= end"),
    (["not_a_target", "--num-envs", "8"], "module:callable"),
    (["missing_script.py", "--num-envs", "8", "--num-envs-arg", "--n"], "does not exist"),
    (["sweep_toy_env:make_toy_env", "--env-kwarg", "oops"], "NAME=VALUE"),
    (["sweep_toy_env:make_toy_env", "--gpus", ","], "--gpus"),
    (["sweep_toy_env:make_toy_env", "--knee-threshold", "lots"], "threshold"),
    (["sweep_toy_env:make_toy_env", "stray", "args"], "only script targets"),
])
def test_usage_errors_exit_2_and_write_nothing(tmp_path, args, message):
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["sweep", *args, "-o", str(out), "--no-progress"])
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert not out.exists()


def test_sweep_writes_csv_records_and_manifest(sweep_dir):
    out, output = sweep_dir
    df = pd.read_csv(out / "sweep.csv")
    assert list(df["num_envs"]) == [16, 64, 256]
    assert list(df["status"]) == ["complete", "oom", "complete"]
    done = df[df.status == "complete"]
    assert (done["sps"] > 0).all() and (done["steps"] == 30).all()
    assert list(done["physics_sps"]) == pytest.approx(list(2 * done["sps"]))
    assert df.loc[df.num_envs == 64, "sps"].isna().all()  # an OOM point has no throughput
    for n in (16, 64, 256):
        run = Run.load(out / "points" / f"{n}.json")
        assert run.num_envs == n
        assert (out / "points" / f"{n}.log").exists()
    oom = Run.load(out / "points" / "64.json")
    assert oom.status == "oom" and oom.exit_code == 3 and "allocate" in oom.extra["error"]
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["schema"] == "perfkit.sweep/1"
    assert manifest["target"] == "sweep_toy_env:make_toy_env" and manifest["kind"] == "factory"
    assert manifest["options"]["env_kwargs"] == {"oom_at": [64], "decimation": 2}
    assert [p["status"] for p in manifest["points"]] == ["complete", "oom", "complete"]
    assert manifest["knee"]["threshold"] == pytest.approx(0.10)
    assert manifest["command"] == ["perfkit", "sweep", "sweep_toy_env:make_toy_env", "--num-envs", "16,64,256",
                                   "--env-kwarg", "oom_at=[64]", "--env-kwarg", "decimation=2", "--steps", "30",
                                   "--warmup-steps", "2", "--actions", "random", "--gpus", "0,1", "-o", str(out)]
    assert "knee" in output.lower() and "oom" in output


def test_points_ran_in_fresh_processes_pinned_to_their_gpu(sweep_dir):
    out, _ = sweep_dir
    manifest = json.loads((out / "sweep.json").read_text())
    gpus = {p["num_envs"]: p["gpu"] for p in manifest["points"]}
    assert set(gpus.values()) <= {"0", "1"}
    for n, gpu in gpus.items():
        run = Run.load(out / "points" / f"{n}.json")
        if run.status == "complete":
            # the subprocess saw the CUDA_VISIBLE_DEVICES its GPU worker set
            assert run.extra["cuda_visible_devices"] == gpu


def test_load_sweep_and_knee_agree_with_the_csv(sweep_dir):
    out, _ = sweep_dir
    sw = load_sweep(out)
    assert [p.num_envs for p in sw.points] == [16, 64, 256]
    assert [r.num_envs for r in sw.completed()] == [16, 256]
    knee = sw.knee()
    df = sw.frame()
    assert list(df["status"]) == ["complete", "oom", "complete"]
    assert knee.gains and knee.gains[0][:2] == (16, 256)


def test_sweep_report_has_plots(sweep_dir):
    out, output = sweep_dir
    rep = out / "report"
    for name in ("index.html", "report.md", "sps_memory.png", "segments.png", "step_times.png"):
        assert (rep / name).stat().st_size > 0, name
    assert (rep / "sps_memory.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (rep / "report.md").read_text()
    assert "| 64 | oom |" in md
    assert "![Throughput and memory vs num\\_envs](sps_memory.png)" in md


def test_sweep_with_no_completed_point_exits_1_and_records_the_error(tmp_path, toy_on_path):
    # an unimportable target is refused before any point runs (tests/sweep/test_sweep_checks.py);
    # a target that imports but fails to build runs its point and records why
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["sweep", "sweep_toy_env:make_toy_env", "--num-envs", "8", "-o", str(out),
                                    "--steps", "2", "--env-kwarg", "no_such_kwarg=1", "--no-progress"])
    assert res.exit_code == 1, res.output
    points = json.loads((out / "sweep.json").read_text())["points"]
    assert [p["status"] for p in points] == ["error"]
    assert "unexpected keyword argument 'no_such_kwarg'" in points[0]["error"]
    assert Run.load(out / "points" / "8.json").status == "error"
    text = " ".join(res.output.split())  # the reason is shown, with the point's log
    assert "n=8 error: TypeError:" in text and "unexpected keyword argument 'no_such_kwarg'" in text
    assert str(out / "points" / "8.log") in text


def test_script_target_runs_each_point_under_perfkit_profile(tmp_path, toy_on_path):
    pytest.importorskip("perfkit.cli.profile")
    out = tmp_path / "out"
    script = HERE / "toy_script.py"
    res = CliRunner().invoke(main, ["sweep", str(script), "--num-envs-arg", "--n", "--num-envs", "24", "-o", str(out),
                                    "--warmup-steps", "3", "--no-progress", "--", "--iters", "15"])
    assert res.exit_code == 0, res.output
    run = Run.load(out / "points" / "24.json")
    assert run.status == "complete"
    assert run.command[-4:] == ["--n", "24", "--iters", "15"]  # the env count and the script's own arguments
    assert run.num_envs == 24 and run.steps == 12 and run.sps > 0  # 15 steps, 3 of them warm-up
    assert json.loads((out / "sweep.json").read_text())["kind"] == "script"
    # the recorded command holds only options that apply to a script (no --steps, --actions, --seed)
    assert json.loads((out / "sweep.json").read_text())["command"] == [
        "perfkit", "sweep", str(script), "--num-envs", "24", "--num-envs-arg", "--n", "--warmup-steps", "3",
        "-o", str(out), "--", "--iters", "15"]


def test_hung_point_times_out_and_is_recorded(tmp_path, toy_on_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["sweep", "hanging_target:make", "--num-envs", "4", "-o", str(out),
                                    "--timeout", "1", "--no-progress"])
    assert res.exit_code == 1, res.output
    point = json.loads((out / "sweep.json").read_text())["points"][0]
    assert point["status"] == "timeout" and "longer than 1 s" in point["error"]
    assert point["elapsed_s"] < 30
    assert Run.load(out / "points" / "4.json").status == "timeout"


def test_budget_spent_records_the_remaining_points_as_skipped(tmp_path, toy_on_path):
    out = tmp_path / "out"
    # the first point hangs until its 1 s timeout, which spends the 0.5 s budget: 8 and 16 never start
    res = CliRunner().invoke(main, ["sweep", "hanging_target:make", "--num-envs", "4,8,16", "-o", str(out),
                                    "--timeout", "1", "--budget", "0.5", "--no-progress"])
    assert res.exit_code == 1, res.output
    points = json.loads((out / "sweep.json").read_text())["points"]
    assert [p["status"] for p in points] == ["timeout", "skipped", "skipped"]
    assert "budget of 0.5 s was spent" in points[1]["error"]


def test_a_misspelled_option_is_no_such_option(tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["sweep", "--num-env", "8", "sweep_toy_env:make_toy_env", "-o", str(out)])
    assert res.exit_code == 2 and "No such option" in res.output and "--num-envs" in res.output, res.output
    res = CliRunner().invoke(main, ["sweep", str(HERE / "toy_script.py"), "--num-envs-arg", "--n", "--iters", "3",
                                    "-o", str(out)])
    assert res.exit_code == 2 and "No such option" in res.output and "after `--`" in res.output, res.output
    assert not out.exists()

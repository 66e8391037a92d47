"""Sweeps (issue 13, item 7): targets checked before the first point, the failed point's reason shown,
Ctrl-C exits 130 and --resume runs only the rest, script commands hold script options, a default
per-point timeout, and an unwritable output refused up front."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from perfkit.cli import main
from perfkit.record import Run
from perfkit.sweeps.runner import DEFAULT_TIMEOUT_S, SweepConfig

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


def sweep(*args):
    return CliRunner().invoke(main, ["sweep", "--no-progress", *map(str, args)])


@pytest.mark.parametrize("target, says", [
    ("no_such_module_for_perfkit:make", "no module named 'no_such_module_for_perfkit'"),
    ("sweep_toy_env:no_such_factory", "defines no 'no_such_factory'"),
    ("hanging_target:nope", "defines no 'nope'"),  # found without importing it (its import hangs)
])
def test_a_target_that_cannot_run_is_refused_before_the_first_point(tmp_path, toy_on_path, target, says):
    out = tmp_path / "out"
    t0 = time.perf_counter()
    res = sweep(target, "--num-envs", "8,16", "-o", out)
    assert res.exit_code == 2, res.output
    assert res.output.startswith("Error: ") and says in res.output and len(res.output.strip().splitlines()) == 1
    assert not out.exists()  # no point ran, nothing written
    assert time.perf_counter() - t0 < 20


def test_a_script_with_a_syntax_error_is_refused_before_the_first_point(tmp_path):
    bad = tmp_path / "train.py"
    bad.write_text("def f(:\n")
    res = sweep(bad, "--num-envs-arg", "--n", "--num-envs", "8", "-o", tmp_path / "out")
    assert res.exit_code == 2 and "does not compile" in res.output and "SyntaxError" in res.output
    assert not (tmp_path / "out").exists()


def test_a_failed_script_points_reason_is_its_exception(tmp_path, toy_on_path):
    script = tmp_path / "crash.py"
    script.write_text("import sys\nprint('starting', sys.argv)\nraise RuntimeError('planted crash')\n")
    out = tmp_path / "out"
    res = sweep(script, "--num-envs-arg", "--n", "--num-envs", "4", "-o", out)
    assert res.exit_code == 1
    point = json.loads((out / "sweep.json").read_text())["points"][0]
    # the record names the exception itself (the runner keeps it in extra["error"]), not the log's last line
    assert point["status"] == "partial" and point["error"] == "RuntimeError: planted crash"
    assert "RuntimeError: planted crash" in " ".join(res.output.split())


def test_factory_only_options_are_refused_for_a_script_target(tmp_path):
    # what a script target's command does hold: tests/sweep/test_sweep_cli.py (script target test)
    res = sweep(HERE / "toy_script.py", "--num-envs-arg", "--n", "--num-envs", "8", "-o", tmp_path / "o2",
                "--steps", "50", "--seed", "3")
    assert res.exit_code == 2 and "--steps, --seed apply to factory targets" in res.output
    assert not (tmp_path / "o2").exists()


def test_points_have_a_default_timeout():
    cfg = SweepConfig(target="a:b", num_envs=[8], out_dir=Path("x"))
    assert cfg.timeout_s == DEFAULT_TIMEOUT_S > 0
    res = CliRunner().invoke(main, ["sweep", "--help"])
    assert "--timeout" in res.output and f"{DEFAULT_TIMEOUT_S:g}" in res.output


def test_an_unwritable_output_is_refused_before_the_first_point(tmp_path, toy_on_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    res = sweep("sweep_toy_env:make_toy_env", "--num-envs", "8", "-o", blocker)
    assert res.exit_code == 2 and res.output.startswith("Error: cannot write ")
    res = sweep("sweep_toy_env:make_toy_env", "--num-envs", "8", "-o", tmp_path / "ok", "--report", blocker / "r")
    assert res.exit_code == 2 and "cannot write" in res.output and not (tmp_path / "ok").exists()


def _wait_for(pred, timeout=120):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return True
        time.sleep(0.2)
    return False


def test_ctrl_c_exits_130_and_resume_runs_only_the_rest(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)]), "PERFKIT_TEST_SLOW_AT": "16"}
    cmd = [sys.executable, "-m", "perfkit", "sweep", "slow_target:make", "--num-envs", "8,16", "-o", str(out),
           "--steps", "5", "--warmup-steps", "1", "--no-progress"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        def first_done():
            try:
                return json.loads((out / "sweep.json").read_text())["points"][0]["status"] == "complete"
            except (OSError, ValueError, KeyError, IndexError):
                return False
        assert _wait_for(first_done), "the first point never completed"
        assert _wait_for(lambda: (out / "points" / "16.log").exists())  # the slow point is under way
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "interrupted: 1 of 2 points finished" in stderr and "--resume" in stderr
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["interrupted"] is True
    assert [p["status"] for p in manifest["points"]] == ["complete", "pending"]
    first = (out / "points" / "8.json").read_bytes()

    env.pop("PERFKIT_TEST_SLOW_AT")
    resumed = subprocess.run([*cmd, "--resume"], env=env, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    manifest = json.loads((out / "sweep.json").read_text())
    assert [p["status"] for p in manifest["points"]] == ["complete", "complete"]
    assert manifest["interrupted"] is False
    assert (out / "points" / "8.json").read_bytes() == first  # the finished point was not redone
    assert Run.load(out / "points" / "16.json").steps == 5


def test_resume_refuses_a_sweep_measured_otherwise(tmp_path, toy_on_path):
    from perfkit.sweeps.runner import write_outputs
    from perfkit.sweeps.record import PointResult

    out = tmp_path / "out"
    out.mkdir()
    earlier = SweepConfig(target="sweep_toy_env:make_toy_env", num_envs=[8], out_dir=out, steps=3)
    write_outputs(earlier, [PointResult(num_envs=8, status="pending")], {}, "2026-12-01T00:00:00+00:00")
    res = sweep("sweep_toy_env:make_toy_env", "--num-envs", "8,16", "-o", out, "--steps", "4", "--resume")
    assert res.exit_code == 2 and "other options" in res.output and "steps 3 there, 4 here" in res.output
    assert sorted(p.name for p in out.iterdir()) == ["sweep.csv", "sweep.json"]  # nothing ran


# ---- an output folder that holds a sweep or other files (issue 18, item 6) -------------------------------

def _old_sweep(out: Path, ns=(8, 16)) -> dict[str, bytes]:
    """A finished sweep in ``out`` as the sweep writes one; returns its files' contents."""
    from perfkit.sweeps.runner import write_outputs
    from perfkit.sweeps.record import PointResult

    cfg = SweepConfig(target="sweep_toy_env:make_toy_env", num_envs=list(ns), out_dir=out, steps=3)
    points, runs = [], {}
    for n in ns:
        run = Run(command=["old"], steps=3, num_envs=n, sps=100.0 * n)
        (out / "points").mkdir(parents=True, exist_ok=True)
        run.save(out / "points" / f"{n}.json")
        (out / "points" / f"{n}.log").write_text("old log\n")
        points.append(PointResult(num_envs=n, status="complete", record=f"points/{n}.json", log=f"points/{n}.log"))
        runs[n] = run
    write_outputs(cfg, points, runs, "2026-12-01T00:00:00+00:00")
    return {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}


def _contents(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}


def test_a_folder_holding_a_sweep_is_refused_without_resume_or_overwrite(tmp_path, toy_on_path, monkeypatch):
    out = tmp_path / "out"
    before = _old_sweep(out)
    res = sweep("sweep_toy_env:make_toy_env", "--num-envs", "8", "--steps", "3", "-o", out)
    assert res.exit_code == 2, res.output
    assert "already holds a sweep" in res.output and "--resume" in res.output and "--overwrite" in res.output
    assert _contents(out) == before
    # the default folder too
    monkeypatch.chdir(tmp_path)
    default = tmp_path / "runs" / "sweep"
    before = _old_sweep(default)
    res = sweep("sweep_toy_env:make_toy_env", "--num-envs", "8", "--steps", "3")
    assert res.exit_code == 2 and "already holds a sweep" in res.output, res.output
    assert _contents(default) == before
    res = sweep("sweep_toy_env:make_toy_env", "--num-envs", "8", "--resume", "--overwrite")
    assert res.exit_code == 2 and "give one of them" in res.output, res.output
    # the library refuses as the command does
    from perfkit.sweeps.runner import SweepError, run_sweep

    with pytest.raises(SweepError, match="already holds a sweep"):
        run_sweep(SweepConfig(target="sweep_toy_env:make_toy_env", num_envs=[8], out_dir=out), progress=False)
    assert _contents(default) == before


def test_a_folder_of_other_files_is_refused_and_a_foreign_sweep_json_is_never_replaced(tmp_path, toy_on_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    res = sweep("sweep_toy_env:make_toy_env", "--num-envs", "8", "-o", out)
    assert res.exit_code == 2 and "not empty" in res.output and "--overwrite" in res.output, res.output
    (out / "sweep.json").write_text('{"my": "own file"}')
    for flags in ((), ("--overwrite",), ("--resume",)):
        res = sweep("sweep_toy_env:make_toy_env", "--num-envs", "8", "-o", out, *flags)
        assert res.exit_code == 2 and "not a sweep perfkit can read" in res.output, res.output
    assert _contents(out) == {"notes.txt": b"mine", "sweep.json": b'{"my": "own file"}'}


def test_overwrite_removes_only_what_the_old_sweep_wrote(tmp_path, toy_on_path):
    out = tmp_path / "out"
    _old_sweep(out, ns=(8, 16))
    (out / "notes.txt").write_text("mine")
    (out / "points" / "mine.txt").write_text("mine too")
    res = sweep("sweep_toy_env:make_toy_env", "--num-envs", "8", "--steps", "3", "--warmup-steps", "1", "-o", out,
                "--overwrite")
    assert res.exit_code == 0, res.output
    files = sorted(_contents(out))
    assert files == ["notes.txt", "points/8.json", "points/8.log", "points/mine.txt", "sweep.csv", "sweep.json"]
    manifest = json.loads((out / "sweep.json").read_text())
    assert [p["num_envs"] for p in manifest["points"]] == [8] and Run.load(out / "points" / "8.json").command != ["old"]

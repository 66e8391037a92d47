"""`perfkit compare` on two sweeps: SPS per env count, and points that newly fail."""

import json

from click.testing import CliRunner

from perfkit.cli import main
from perfkit.record import Run
from perfkit.sweeps.runner import SweepConfig, write_outputs
from perfkit.sweeps.record import PointResult


def write_sweep(d, curve, failed=()):
    ns = sorted(curve) + sorted(failed)
    cfg = SweepConfig(target="perfkit.envs:make_env", num_envs=sorted(ns), out_dir=d)
    points, runs = [], {}
    for n in sorted(ns):
        status = failed[n] if n in failed else "complete"
        run = Run(num_envs=n, steps=10, sps=curve.get(n, 0.0), status=status)
        run.save(d / "points" / f"{n}.json")
        points.append(PointResult(num_envs=n, status=status, record=f"points/{n}.json"))
        runs[n] = run
    write_outputs(cfg, points, runs, "2026-01-01T00:00:00+00:00")
    return str(d)


BASE = {256: 1e5, 1024: 4e5, 4096: 1.2e6, 16384: 1.5e6}


def compare(*args):
    return CliRunner().invoke(main, ["compare", *args])


def test_same_curve_passes_and_slower_point_fails(tmp_path):
    base = write_sweep(tmp_path / "base", BASE)
    same = write_sweep(tmp_path / "same", {n: s * 0.98 for n, s in BASE.items()})
    slow = write_sweep(tmp_path / "slow", {**BASE, 4096: 1.0e6})
    res = compare(base, same, "--fail-on-regression", "5%")
    assert res.exit_code == 0, res.output
    assert "no regression" in res.output
    res = compare(base, slow, "--fail-on-regression", "5%")
    assert res.exit_code == 1, res.output
    assert "num_envs=4096: sps 1,200,000 -> 1,000,000 (-16.7%)" in res.output


def test_point_that_newly_runs_out_of_memory_is_a_regression(tmp_path):
    base = write_sweep(tmp_path / "base", BASE)
    new = write_sweep(tmp_path / "new", {n: s for n, s in BASE.items() if n != 16384}, failed={16384: "oom"})
    res = compare(base, new, "--fail-on-regression", "5%", "--format", "json")
    assert res.exit_code == 1
    data = json.loads(res.output)
    assert data["regressions"] == ["num_envs=16384: completed in base, oom in new"]
    assert [p["new_status"] for p in data["points"]] == ["complete", "complete", "complete", "oom"]


def test_points_on_one_side_only_are_noted_not_judged(tmp_path):
    base = write_sweep(tmp_path / "base", BASE)
    new = write_sweep(tmp_path / "new", {**BASE, 32768: 1.6e6})
    res = compare(base, new, "--fail-on-regression", "5%")
    assert res.exit_code == 0 and "num_envs=32768 measured only in new" in res.output


def test_sweep_against_run_is_a_usage_error(tmp_path):
    base = write_sweep(tmp_path / "base", BASE)
    run = Run(num_envs=4, sps=1.0).save(tmp_path / "run.json")
    res = compare(base, str(run))
    assert res.exit_code == 2 and "cannot compare a sweep with a single run" in res.output

"""The time gate tests between runs (issue 18, item 2): several records a side, each run's value one
observation; counts per step and per site gate on any run; a crashed candidate fails; the interval
column is the change column's own quantity. Synthetic records: deterministic, no timing."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from perfkit.analysis.diff import diff_groups, diff_runs
from perfkit.analysis.stats import MIN_RUNS, between_runs, t_quantile, t_sf
from perfkit.cli import main
from perfkit.cli.compare import _spread
from perfkit.record import Finding, Run, SegmentStats

BASE_SPS = [1.00e6, 0.93e6, 1.06e6, 0.98e6, 1.03e6]  # +-7 % run to run, as a shared machine gives


def run(sps=1e6, scale=1.0, syncs=0.0, findings=(), status="complete", jitter=(1.0, 30.0)):
    """A record whose step times are ``scale`` x a fixed shape; ``jitter`` spreads them within the run
    (a learner update every few steps), which must not matter to a between-run test."""
    steps = [scale * (jitter[1] if i % 8 == 7 else jitter[0]) for i in range(80)]
    return Run(command=["train.py"], steps=80, num_envs=64, wall_s=1.0, warmup_s=1.0, sps=sps, status=status,
               step_ms={"p50": 1.0 * scale, "p99": 30.0 * scale}, step_times_ms=steps,
               segments={"physics": SegmentStats(cpu_ms_per_step=2.0 * scale, syncs_per_step=syncs)},
               findings=list(findings), machine={"device": "cpu"})


def group(factors, sps=BASE_SPS, **kw):
    return [run(sps=s / f, scale=f, **kw) for s, f in zip(sps, factors)]


def metric(d, name):
    return next(m for m in d.metrics if m.metric == name)


UNCHANGED = [1.00, 1.04, 0.97, 1.02, 0.99]
SLOWER = [1.10, 1.14, 1.07, 1.12, 1.09]  # +10 % in every run


def test_ten_percent_slower_in_every_run_fails_between_runs():
    d = diff_groups(group(UNCHANGED), group(SLOWER, sps=list(reversed(BASE_SPS))), threshold=0.05)
    assert d.regressed and d.n_base == d.n_new == 5
    for name in ("step_ms.p25", "step_ms.p50"):
        m = metric(d, name)
        assert m.regression and m.runs is not None and m.runs.lo > 0, (name, m.runs)
    # where the time went: tested and shown, not gated (each gated metric is one more chance of a false alarm)
    for name in ("step_ms.p99", "segment.physics.cpu_ms"):
        m = metric(d, name)
        assert m.runs.lo > 0 and not m.regression and m.verdict == "worse (not gated)", name


def test_unchanged_runs_pass_though_each_run_is_noisy_inside():
    wild = group(UNCHANGED, jitter=(0.5, 90.0))  # within-run spread changes; the runs' values do not
    d = diff_groups(group(UNCHANGED), wild)
    assert not any(m.regression for m in d.metrics if m.metric in ("sps", "step_ms.p50", "segment.physics.cpu_ms"))
    d = diff_groups(group(UNCHANGED), group(list(reversed(UNCHANGED)), sps=list(reversed(BASE_SPS))))
    assert not d.regressed, d.regressions


def test_a_change_inside_the_runs_spread_is_within_noise():
    noisy = [0.80, 1.30, 0.95, 1.25, 1.00]  # mean +6 %, but the runs disagree
    m = metric(diff_groups(group(UNCHANGED), group(noisy)), "step_ms.p50")
    assert m.worse and not m.regression and m.verdict == "worse (within noise)"
    assert m.runs.lo < 0 < m.runs.hi


def test_the_interval_column_is_the_change_columns_quantity():
    d = diff_groups(group(UNCHANGED), group(SLOWER))
    for m in d.metrics:
        if m.runs is not None:
            assert m.runs.change == pytest.approx(m.delta_pct)
            assert m.runs.lo <= m.delta_pct <= m.runs.hi
            lo, hi = (float(x.rstrip("%")) / 100 for x in _spread(m).split(" .. "))
            assert lo == pytest.approx(m.runs.lo, abs=5e-4) and hi == pytest.approx(m.runs.hi, abs=5e-4)
        elif m.timed:
            assert _spread(m) == "" or "untested" in _spread(m)


def test_a_crashed_candidate_fails_and_a_crashed_base_is_noted():
    d = diff_runs(run(), run(status="partial"))
    assert d.regressed and any("'partial'" in r and "crashed" in r for r in d.regressions)
    d = diff_runs(run(status="partial"), run())
    assert not d.regressed and any("'partial'" in n for n in d.notes)


ITEM = Finding(kind="sync", op=".item()", path="train.py", line=42, function="step", segment="logging",
               count=80, per_step=1.0, code="r = x.item()")
LOOP = Finding(kind="loop", op="for-loop over envs", path="env.py", line=9, function="step", segment="other",
               count=80 * 64, per_step=64.0)


def test_counts_per_step_and_per_site_gate_on_one_run():
    twice = Finding(**{**ITEM.__dict__, "per_step": 2.0, "count": 160})
    d = diff_runs(run(syncs=1.0, findings=[ITEM]), run(syncs=2.0, findings=[twice]))
    assert d.regressed and [c.new for c in d.site_changes] == [2.0]
    assert any(r.startswith("sync at train.py:42 (.item()): 1 -> 2/step") for r in d.regressions)
    d = diff_runs(run(), run(findings=[LOOP]))
    assert metric(d, "loops_per_step").regression and d.new_findings == [LOOP]
    assert not diff_runs(run(findings=[LOOP]), run(findings=[LOOP])).regressed


def test_between_runs_is_welchs_test():
    assert t_quantile(0.975, 4) == pytest.approx(2.7764, abs=1e-4)
    assert t_sf(2.0, 10) == pytest.approx(0.03669, abs=1e-5)
    e = between_runs([10, 11, 9, 10.5, 9.5], [11, 12, 10, 11.5, 10.5])
    # Welch: diff 1.0, se sqrt(0.625/5 * 2) = 0.5, df 8, t(0.975, 8) = 2.306
    assert e.change == pytest.approx(0.1) and e.lo == pytest.approx((1 - 2.306 * 0.5) / 10, abs=1e-4)
    assert e.p_not_worse == pytest.approx(t_sf(2.0, 8)) and not e.worse
    assert between_runs([1.0] * (MIN_RUNS - 1), [2.0] * 5) is None


def _write(tmp_path, name, runs):
    for i, r in enumerate(runs):
        r.save(tmp_path / f"{name}-{i}.json")


def test_cli_takes_a_quoted_glob_a_side_and_gates_between_runs(tmp_path):
    _write(tmp_path, "base", group(UNCHANGED))
    _write(tmp_path, "new", group(SLOWER))
    _write(tmp_path, "same", group(list(reversed(UNCHANGED)), sps=list(reversed(BASE_SPS))))
    cli = CliRunner()
    res = cli.invoke(main, ["compare", str(tmp_path / "base-*.json"), str(tmp_path / "new-*.json"),
                            "--fail-on-regression", "5%", "--format", "json"])
    assert res.exit_code == 1, res.output
    d = json.loads(res.output)
    assert d["runs"] == {"base": 5, "new": 5} and any(r.startswith("step_ms.p50:") for r in d["regressions"])
    res = cli.invoke(main, ["compare", str(tmp_path / "base-*.json"), str(tmp_path / "same-*.json"),
                            "--fail-on-regression", "5%"])
    assert res.exit_code == 0, res.output
    assert "5 vs 5 runs" in res.output
    # BASE NEW, one record each, still works; several unquoted paths get told what to do
    res = cli.invoke(main, ["compare", str(tmp_path / "base-0.json"), str(tmp_path / "new-0.json"),
                            "--fail-on-regression", "5%"])
    assert res.exit_code == 0 and "cannot tell" in " ".join(res.output.split()), res.output
    res = cli.invoke(main, ["compare", *(str(tmp_path / f"base-{i}.json") for i in range(3))])
    assert res.exit_code == 2 and "quote each side's glob" in " ".join(res.output.split())
    res = cli.invoke(main, ["compare", str(tmp_path / "nope-*.json"), str(tmp_path / "new-0.json")])
    assert res.exit_code == 2 and "no record matches" in res.output


def test_strict_gates_one_run_a_side_on_the_threshold(tmp_path):
    run().save(tmp_path / "a.json")
    run(sps=0.5e6, scale=2.0).save(tmp_path / "b.json")
    args = ["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--fail-on-regression", "5%"]
    assert CliRunner().invoke(main, args).exit_code == 0
    assert CliRunner().invoke(main, args + ["--strict"]).exit_code == 1

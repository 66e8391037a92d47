"""`perfkit compare`: the deltas, the verdicts, and the exit codes a CI gate relies on."""

import json

import pytest
from click.testing import CliRunner

from perfkit.analysis.diff import diff_runs, parse_threshold
from perfkit.cli import main
from perfkit.record import Finding, Run, SegmentStats


def run(sps=1e6, p50=4.0, p99=5.0, physics=2.0, reward=0.5, syncs=0.0, allocs=0.0, findings=(), mem=2**30):
    return Run(command=["train.py"], steps=100, num_envs=4096, wall_s=0.4, warmup_s=10.0, sps=sps,
               step_ms={"p50": p50, "p99": p99},
               segments={"physics": SegmentStats(gpu_ms_per_step=physics, cpu_ms_per_step=0.1),
                         "reward": SegmentStats(gpu_ms_per_step=reward, cpu_ms_per_step=0.05, syncs_per_step=syncs,
                                                allocs_per_step=allocs)},
               findings=list(findings), machine={"device": "NVIDIA H200"}, memory={"peak_gpu_bytes": mem})


ITEM = Finding(kind="sync", op=".item()", path="train.py", line=42, function="step", segment="logging",
               count=100, per_step=1.0, code="r = x.item()")


def metric(d, name):
    return next(m for m in d.metrics if m.metric == name)


def test_identical_runs_do_not_regress():
    d = diff_runs(run(), run())
    assert not d.regressed and d.regressions == []
    assert all(m.verdict == "ok" for m in d.metrics)


def test_one_run_a_side_shows_a_time_change_but_cannot_tell_it_from_noise():
    m = metric(diff_runs(run(), run(sps=0.5e6), threshold=0.05), "sps")
    assert m.worse and not m.regression and m.verdict == "worse (cannot tell from noise)"
    assert "cannot be told from noise" in m.sureness
    d = diff_runs(run(), run(sps=0.5e6, physics=4.0))
    assert not d.regressed and any("one run cannot tell a change from the machine's noise" in n for n in d.notes)
    # --strict: the threshold alone decides
    assert metric(diff_runs(run(), run(sps=0.94e6), strict=True), "sps").regression
    assert not metric(diff_runs(run(), run(sps=0.96e6), strict=True), "sps").regression
    m = metric(diff_runs(run(), run(sps=1.2e6)), "sps")
    assert m.delta_pct == pytest.approx(0.2) and not m.improvement  # untested either way


def test_segment_times_are_shown_not_gated_and_the_noise_floor_holds():
    d = diff_runs(run(), run(physics=2.3), strict=True)
    m = metric(d, "segment.physics.gpu_ms")
    assert m.worse and not m.regression and m.verdict == "worse (not gated)" and m.delta == pytest.approx(0.3)
    assert not d.regressed
    # +100 % of a 0.004 ms segment is below the 0.01 ms noise floor
    assert not metric(diff_runs(run(reward=0.004), run(reward=0.008), strict=True), "segment.reward.gpu_ms").worse
    # the step's p50 is gated (strict: the threshold alone)
    assert metric(diff_runs(run(), run(p50=4.4), strict=True), "step_ms.p50").regression


def test_syncs_and_allocs_from_zero_regress_and_new_findings_are_listed():
    d = diff_runs(run(), run(syncs=1.0, allocs=3.0, findings=[ITEM]))
    assert metric(d, "syncs_per_step").regression and metric(d, "allocs_per_step").regression
    assert [f.op for f in d.new_findings] == [".item()"]
    assert any(r.startswith("new sync finding: .item() at train.py:42") for r in d.regressions)


def test_moved_line_is_the_same_finding_and_fixed_one_is_resolved():
    moved = Finding(**{**ITEM.__dict__, "line": 57})
    d = diff_runs(run(findings=[ITEM]), run(findings=[moved]))
    assert d.new_findings == [] and d.resolved_findings == []
    d = diff_runs(run(syncs=1.0, findings=[ITEM]), run())
    assert [f.line for f in d.resolved_findings] == [42] and not d.regressed


def test_warmup_is_shown_but_never_gates():
    a, b = run(), run()
    b.warmup_s = 100.0
    m = metric(diff_runs(a, b), "warmup_s")
    assert not m.regression and m.gate is False
    assert m.verdict == "worse (not gated)"


def test_notes_for_unlike_runs():
    b = run()
    b.num_envs = 1024
    assert any("num_envs differs" in n for n in diff_runs(run(), b).notes)


@pytest.mark.parametrize("text, value", [("5%", 0.05), ("0.05", 0.05), ("5", 0.05), ("12.5%", 0.125), ("0", 0.0)])
def test_parse_threshold(text, value):
    assert parse_threshold(text) == pytest.approx(value)


@pytest.mark.parametrize("bad", ["", "five", "-3%", "nan"])
def test_parse_threshold_rejects(bad):
    with pytest.raises(ValueError):
        parse_threshold(bad)


@pytest.fixture
def files(tmp_path):
    paths = {}
    for name, r in {"base": run(), "same": run(sps=0.99e6), "slow": run(sps=0.8e6, physics=2.6),
                    "syncs": run(syncs=1.0, findings=[ITEM])}.items():
        paths[name] = str(r.save(tmp_path / f"{name}.json"))
    return paths


def compare(*args):
    return CliRunner().invoke(main, ["compare", *args])


def test_cli_exit_0_without_regression(files):
    res = compare(files["base"], files["same"], "--fail-on-regression", "5%")
    assert res.exit_code == 0, res.output
    assert "no regression" in res.output and "sps" in res.output


def test_cli_exit_1_on_regression(files):
    res = compare(files["base"], files["slow"], "--fail-on-regression", "5%")
    assert res.exit_code == 0, res.output  # a time change, one run a side: reported, not failed
    res = compare(files["base"], files["slow"], "--fail-on-regression", "5%", "--strict")
    assert res.exit_code == 1, res.output
    assert "REGRESSION" in res.output and "regression(s)" in res.output
    res = compare(files["base"], files["syncs"], "--fail-on-regression", "50%")
    assert res.exit_code == 1 and "new finding" in res.output and "train.py:42" in res.output


def test_cli_reports_but_does_not_fail_without_the_flag(files):
    res = compare(files["base"], files["slow"], "--strict")
    assert res.exit_code == 0 and "REGRESSION" in res.output


def test_cli_threshold_decides(files):
    assert compare(files["base"], files["slow"], "--fail-on-regression", "40%", "--strict").exit_code == 0
    assert compare(files["base"], files["slow"], "--fail-on-regression", "10%", "--strict").exit_code == 1


def test_cli_json_and_markdown(files):
    res = compare(files["base"], files["slow"], "--format", "json", "--fail-on-regression", "5%", "--strict")
    assert res.exit_code == 1
    data = json.loads(res.output)
    assert data["regressed"] is True
    sps = next(m for m in data["metrics"] if m["metric"] == "sps")
    assert sps["verdict"] == "REGRESSION" and sps["delta_pct"] == pytest.approx(-0.2)
    res = compare(files["base"], files["slow"], "--format", "markdown", "--strict")
    assert "| sps | 1,000,000 | 800,000 |" in res.output and "**REGRESSION**" in res.output


@pytest.mark.parametrize("content, message", [
    (None, "no such run record"),
    ("{", "not JSON"),
    (json.dumps({"schema": "other/1"}), "schema 'other/1'"),
])
def test_cli_exit_2_on_bad_files(files, tmp_path, content, message):
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    res = compare(files["base"], str(bad), "--fail-on-regression", "5%")
    assert res.exit_code == 2, res.output
    assert str(bad) in res.output and message in res.output


def test_cli_exit_2_on_bad_threshold(files):
    res = compare(files["base"], files["same"], "--fail-on-regression", "lots")
    assert res.exit_code == 2 and "threshold" in res.output

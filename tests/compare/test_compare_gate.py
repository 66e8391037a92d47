"""The compare gate on real runs (issue 13, item 6; issue 18, item 2): two runs of unchanged
examples/train.py pass it, a real slowdown with planted syncs (train_naive.py) fails it on its counts,
and a record missing what the gate needs fails it."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from perfkit.cli import main
from perfkit.record import Run

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


@pytest.fixture(scope="module")
def runs():
    """Real records (tests/compare/data/make_records.sh made them on this project's CPU machine, each in
    a fresh process): two runs of unchanged train.py, 187 steady steps each with 6 learner updates among
    them, and one of train_naive.py (the same loop with syncs, allocations and a per-env loop planted).
    Timing live in a test would be at the mercy of whatever else the machine runs; the gate's
    arithmetic on real records is deterministic."""
    return {name: os.path.join(DATA, f"{name}.json") for name in ("train-a", "train-b", "train_naive")}


def compare(*args):
    return CliRunner().invoke(main, ["compare", *map(str, args)])


def test_two_runs_of_unchanged_train_py_pass(runs):
    res = compare(runs["train-a"], runs["train-b"], "--fail-on-regression", "5%", "--format", "json")
    d = json.loads(res.output)
    assert res.exit_code == 0, d["regressions"]
    assert d["regressed"] is False and d["regressions"] == []
    sps = next(m for m in d["metrics"] if m["metric"] == "sps")
    assert sps["runs"] is None and "cannot be told from noise" in sps["sureness"]


def test_a_real_slowdown_fails_on_its_counts(runs):
    """train_naive.py's syncs, allocations and per-env loop fail the gate deterministically; its time
    change, one run a side, is reported as not told from noise."""
    res = compare(runs["train-a"], runs["train_naive"], "--fail-on-regression", "5%")
    assert res.exit_code == 1, res.output
    text = " ".join(res.output.split())  # the console wraps long lines
    assert "syncs_per_step:" in text and "loops_per_step:" in text and "new sync finding" in text
    d = json.loads(compare(runs["train-a"], runs["train_naive"], "--format", "json").output)
    sps = next(m for m in d["metrics"] if m["metric"] == "sps")
    assert sps["verdict"] == "worse (cannot tell from noise)", sps


@pytest.mark.parametrize("damage, says", [
    (lambda d: d.update(sps=None), "sps: not measured in NEW"),
    (lambda d: d.update(steps=0, step_times_ms=[], step_ms={}), "sps: not measured in NEW"),
    (lambda d: d.update(segments={}), "segments: not measured in NEW"),
    (lambda d: d["step_ms"].pop("p50"), "step_ms.p50: not measured in NEW"),
])
def test_missing_metrics_fail_the_gate(runs, tmp_path, damage, says):
    with open(runs["train-b"]) as f:
        d = json.load(f)
    damage(d)
    new = tmp_path / "new.json"
    new.write_text(json.dumps(d))
    res = compare(runs["train-a"], new, "--fail-on-regression", "5%")
    assert res.exit_code == 1, res.output
    assert says in " ".join(res.output.split()) and "MISSING" in res.output


def test_a_worse_segment_is_shown_not_gated(runs, tmp_path):
    base = Run.load(runs["train-a"])
    new = Run.load(runs["train-b"])
    seg = new.segments["reward"]
    seg.cpu_ms_per_step = base.segments["reward"].cpu_ms_per_step * 1.5 + 0.02  # +50 %, a few hundredths of a ms
    path = new.save(tmp_path / "new.json")
    d = json.loads(compare(runs["train-a"], path, "--fail-on-regression", "5%", "--format", "json").output)
    m = next(m for m in d["metrics"] if m["metric"] == "segment.reward.cpu_ms")
    assert m["verdict"] == "worse (not gated)" and m["runs"] is None and not d["regressed"]

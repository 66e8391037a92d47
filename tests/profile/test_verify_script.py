"""scripts/gpu/verify.py (the H200 check of --verify) on the CPU: its reading of a record of today's
schema — the verify block, the findings' per-step syncs, the per-site table — so that a schema change
shows here, not after device time was spent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfkit.record import Finding, Run

from _helpers import load_file

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu" / "verify.py"


@pytest.fixture(scope="module")
def vs():
    return load_file(SCRIPT, "verify_script")


def _record() -> dict:
    run = Run(command=["t.py"], steps=20, num_envs=8)
    run.findings = [Finding(kind="sync", op=".item()", path="t.py", line=7, per_step=1.0),
                    Finding(kind="sync", op="t[list]", path="t.py", line=9, per_step=0.5),
                    Finding(kind="alloc", op="torch.zeros", path="t.py", line=9, per_step=3.0)]
    run.extra["verify"] = {"steps": 20, "runtime_syncs": 31,
                           "sites": [{"site": "t.py:7", "runtime_syncs": 20}],
                           "reported_sites": [{"site": "t.py:9", "runtime_syncs": 10}],
                           "unattributed_sites": [{"site": "lib.py:3", "count": 1}]}
    return json.loads(json.dumps(run.to_dict()))  # as written to disk


def test_per_site_reads_runtime_and_record_per_step_from_todays_record(vs):
    rec = _record()
    rows = {r["site"]: r for r in vs.per_site(rec["extra"]["verify"], rec)}
    assert rows["t.py:7"] == {"site": "t.py:7", "runtime_per_step": 1.0, "record_per_step": 1.0, "ratio": 1.0}
    assert rows["t.py:9"]["ratio"] == 1.0  # a reported sync outside the hooks, counted at its site
    assert rows["lib.py:3"] == {"site": "lib.py:3", "runtime_per_step": 0.05, "record_per_step": 0.0, "ratio": 0.0}


def test_run_one_on_the_cpu_collects_the_row_of_a_real_record(vs, tmp_path):
    row = vs.run_one("examples/train.py", 8, 2, tmp_path, "mujoco", 300)
    assert row["exit"] == 0, (tmp_path / "train-8.txt").read_text()[-2000:]
    rec = Run.load(tmp_path / "train-8.json")
    assert rec.steps > 0 and row["sps"] == rec.sps
    assert row["syncs_per_step"] == 0  # train.py makes none
    vs.write(tmp_path, [row], "cpu")
    assert "| `examples/train.py` | 8 |" in (tmp_path / "verify.md").read_text()

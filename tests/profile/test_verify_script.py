"""scripts/gpu/verify.py (the H200 check of --verify) on the CPU: its reading of a record of today's
schema — the verify block, the findings' per-step syncs, the per-site table — so that a schema change
shows here, not after device time was spent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfkit.record import Run

from _helpers import load_file

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu" / "verify.py"


@pytest.fixture(scope="module")
def vs():
    return load_file(SCRIPT, "verify_script")


def test_write_reads_the_blocks_agreement_per_site(vs, tmp_path):
    row = {"script": "t.py", "num_envs": 8, "exit": 0, "steps": 20, "runtime_syncs": 31, "unattributed": 0,
           "agreement": {"window": "the record's steady state", "steps": 20, "runtime_per_step": 1.5,
                         "record_per_step": 1.5, "ratio": 1.0, "sites_outside_tolerance": 0},
           "per_site": [{"site": "t.py:7", "runtime_per_step": 1.0, "record_per_step": 1.0, "ratio": 1.0}]}
    vs.write(tmp_path, [row], "cpu")
    md = (tmp_path / "verify.md").read_text()
    assert "over 20 steps (the record's steady state)" in md and "| `t.py:7` | 1.0 | 1.0 | 1.0 |" in md


def test_run_one_on_the_cpu_collects_the_row_of_a_real_record(vs, tmp_path):
    row = vs.run_one("examples/train.py", 8, 2, tmp_path, "mujoco", 300)
    assert row["exit"] == 0, (tmp_path / "train-8.txt").read_text()[-2000:]
    rec = Run.load(tmp_path / "train-8.json")
    assert rec.steps > 0 and row["sps"] == rec.sps
    assert row["syncs_per_step"] == 0  # train.py makes none
    vs.write(tmp_path, [row], "cpu")
    assert "| `examples/train.py` | 8 |" in (tmp_path / "verify.md").read_text()

"""scripts/gpu/gated_counts.py (the H200 check of the sync gate against the runtime) on the CPU: its
per-site table reads the verify run's own agreement over its window, so a one-off site (rsl_rl's first
checkpoint save: 59 syncs once) is judged in the steps the runtime counted, not against the whole
record's rate."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from _helpers import load_file

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu" / "gated_counts.py"


@pytest.fixture(scope="module")
def gc():
    sys.path.insert(0, str(SCRIPT.parent))  # it imports verify.py from its own folder
    try:
        return load_file(SCRIPT, "gated_counts_script")
    finally:
        sys.path.remove(str(SCRIPT.parent))


AGREEMENT = {"window": "the verify window", "steps": 72, "runtime_per_step": 2.8194, "record_per_step": 2.8194,
             "ratio": 1.0, "sites_outside_tolerance": 0,
             "sites": [{"site": "runner.py:141", "runtime_per_step": 0.8194, "record_per_step": 0.8194, "ratio": 1.0},
                       {"site": "managers.py:296", "runtime_per_step": 2.0, "record_per_step": 2.0, "ratio": 1.0}]}


def test_a_one_off_site_reads_the_same_in_the_verify_window_and_lower_over_the_whole_record(gc, tmp_path):
    verify: dict = {"exit": 0, "rates": {"runner.py:141": 0.3278, "managers.py:296": 2.0}}
    gc.read_agreement(verify, AGREEMENT)
    assert verify["window_record"] == {"runner.py:141": 0.8194, "managers.py:296": 2.0}
    assert verify["window"]["record_per_step"] == 2.8194 and verify["window"]["steps"] == 72
    c = gc.compare({"runner.py:141": 0.1639, "managers.py:296": 2.0, "extra.py:9": 1.0}, verify["runtime"],
                   verify["rates"], verify["window_record"])
    by_site = {s["site"]: s for s in c["sites"]}
    assert by_site["runner.py:141"]["window_record"] == 0.8194 and by_site["runner.py:141"]["every_step"] == 0.3278
    assert c["false"] == ["extra.py:9"] and c["missed"] == []  # a site only the gated run counted is a false one
    row = {"name": "loop", "gated": {"exit": 0, "sync_counting": {}}, "verify": verify, "compare": c}
    gc.write(tmp_path, [row], ["--out", "x"])
    md = (tmp_path / "gated-counts.md").read_text()
    assert "| `runner.py:141` | 0.8194 | 0.8194 | 0.3278 | 0.1639 | 0.2 |" in md
    assert "perfkit counted 2.8194 syncs/step and the runtime made 2.8194" in md


def test_rerender_reads_the_verify_record_again(gc, tmp_path):
    rows = [{"name": "loop a", "gated": {"exit": 0, "rates": {"managers.py:296": 2.0}},
             "verify": {"exit": 0, "rates": {"managers.py:296": 2.0}, "runtime": {"managers.py:296": 2.0}}}]
    (tmp_path / "gated-counts.json").write_text(json.dumps(rows))
    (tmp_path / "gated-counts.md").write_text("# t\n\n`python3 scripts/gpu/gated_counts.py --out /x --iterations 4`\n")
    (tmp_path / "loop-a-verify.json").write_text(json.dumps({"extra": {"verify": {"agreement": AGREEMENT}}}))
    assert gc.main(["--out", str(tmp_path), "--rerender"]) == 0
    md = (tmp_path / "gated-counts.md").read_text()
    assert "`python3 scripts/gpu/gated_counts.py --out /x --iterations 4`" in md
    assert "| `runner.py:141` | 0.8194 | 0.8194 | 0.0 | 0.0 | 0.0 |" in md  # the gated run never counted it: missed
    assert json.loads((tmp_path / "gated-counts.json").read_text())[0]["compare"]["missed"] == ["runner.py:141"]

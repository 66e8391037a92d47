"""Issue 21.3: DDP's communication is measured on the steady steps, not averaged over DDP's first
iterations (perfkit's warm-up among them): each rank's comm share agrees within 10 % with the one the
script's own timers give on the same steps."""

from __future__ import annotations

import json

import pytest
from _dist_helpers import SCRIPTS, torchrun

from perfkit.analysis.ranks import merge_ranks
from perfkit.record import Run

STEPS, WARMUP, SLOW = 30, 5, 1


def test_ddp_comm_share_matches_the_scripts_own_timers_on_steady_steps(tmp_path):
    proc = torchrun(2, ["-m", "perfkit", "profile", "-q", "-o", "rec/", str(SCRIPTS / "ddp_timers.py"),
                        "--steps", str(STEPS), "--slow-rank", str(SLOW), "--timers", "timers"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    runs = [Run.load(tmp_path / "rec" / f"run.rank{r}.json") for r in (0, 1)]
    s = merge_ranks(runs)
    for run, row in zip(runs, s.ranks):
        ddp = run.dist["ddp"]
        assert ddp["source"] == "steady iterations" and ddp["steady_iterations"] >= 3
        t = json.loads((tmp_path / f"timers.rank{row.rank}.json").read_text())
        # steady steps: after the warm-up and the first steady one (perfkit samples it), but the last
        steady = range(WARMUP + 1, STEPS - 1)
        step_s = sum(t["starts"][k + 1] - t["starts"][k] for k in steady)
        backward_s = sum(t["backwards"][k] for k in steady)  # the wait for the other rank is in here
        own = backward_s / step_s
        print(f"rank {row.rank}: perfkit {row.comm_share:.3f} ({row.comm_source}), script {own:.3f}")
        assert row.comm_source == "ddp"
        if row.rank == SLOW:
            assert row.comm_share == pytest.approx(own, abs=0.05)  # little to wait for
        else:
            assert row.comm_share == pytest.approx(own, rel=0.10)
    assert s.straggler == SLOW

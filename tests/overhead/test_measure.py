"""perfkit.overhead.measure end to end on a stand-in script (fake_train.py) that knows which arm runs
it: the three real arm commands run, the rounds interleave in a rotating order, the figures come
from the runs' own SPS lines, and a failed run is reported with its stderr and kept out of the ratios."""

from __future__ import annotations

import json
import time

import pytest
from _overhead_helpers import FAKE, Fake, child_env

from perfkit.overhead import measure as overhead

# plain prints 100 then 110 then 90; perfkit 98, 99, then fails; torch.profiler 40, then exits 4
PLAN = {
    "plain": [{"sps": 100.0}, {"sps": 100.0}, {"sps": 110.0}, {"sps": 90.0}],  # the first is the warm-up
    "perfkit": [{"sps": 98.0}, {"sps": 99.0}, {"exit": 3, "stderr": "perfkit-arm boom"}],
    "torch-profiler": [{"sps": 40.0}, {"sps": 44.0, "exit": 4}],
}


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("measure")
    fake = Fake(tmp, PLAN)
    env = child_env()
    seen_runs, seen_rounds = [], []
    result = overhead.measure(
        overhead.Target(fake.script, fake.args + ["--extra", "x y"]), rounds=3, arm_rounds={"torch-profiler": 2},
        warmup_runs=1, env=env, cwd=tmp, log_dir=tmp / "logs", machine=False, timeout=120,
        on_run=lambda r: seen_runs.append((r["round"], r["arm"])),
        on_round=lambda res: seen_rounds.append(json.loads(json.dumps(res))))
    return result, fake, seen_runs, seen_rounds, tmp


def test_the_arms_run_in_fresh_processes_in_a_rotating_order(measured):
    result, fake, seen_runs, _, _ = measured
    # torch.profiler in the last 2 of 3 rounds; round i starts at arm i of its arms
    assert [r["order"] for r in result["rounds"]] == [
        ["plain", "perfkit"],
        ["perfkit", "torch-profiler", "plain"],
        ["torch-profiler", "plain", "perfkit"],
    ]
    # what each run found itself to be, in the order they ran: the commands are the real arms
    assert fake.order() == ["plain", "plain", "perfkit", "perfkit", "torch-profiler", "plain", "torch-profiler",
                            "plain", "perfkit"]
    assert seen_runs == [(0, "plain"), (1, "plain"), (1, "perfkit"), (2, "perfkit"), (2, "torch-profiler"), (2, "plain"),
                         (3, "torch-profiler"), (3, "plain"), (3, "perfkit")]
    r1 = result["rounds"][0]["runs"]
    assert r1["perfkit"]["cmd"][1:6] == ["-m", "perfkit", "profile", "-q", "-o"]
    assert r1["perfkit"]["cmd"][-4:] == [str(FAKE), *fake.args, "--extra", "x y"][-4:]
    assert result["rounds"][1]["runs"]["torch-profiler"]["cmd"][1:3] == ["-m", "perfkit.overhead.profiler_arm"]


def test_the_figures_come_from_each_runs_own_sps_line(measured):
    result, *_ = measured
    runs = {(r["round"], a): x["metric"] for r in result["rounds"] for a, x in r["runs"].items()}
    assert runs == {(1, "plain"): 100.0, (1, "perfkit"): 98.0, (2, "perfkit"): 99.0, (2, "torch-profiler"): 40.0,
                    (2, "plain"): 110.0, (3, "torch-profiler"): 44.0, (3, "plain"): 90.0, (3, "perfkit"): None}
    s = result["summary"]["arms"]
    assert s["torch-profiler"]["runs"] == 2 and s["torch-profiler"]["ok"] == 1
    assert [(x["round"], x["ratio"]) for x in s["perfkit"]["ratios"]] == [(1, pytest.approx(0.98)), (2, pytest.approx(0.9))]
    assert s["perfkit"]["median_ratio"] == pytest.approx(0.94)
    assert s["perfkit"]["overhead_pct"] == pytest.approx(6.0)
    assert [x["ratio"] for x in s["torch-profiler"]["ratios"]] == pytest.approx([40 / 110])  # round 3's exited 4
    assert s["plain"]["median_metric"] == 100.0 and s["plain"]["ok"] == 3
    assert s["perfkit"]["runs"] == 3 and s["perfkit"]["ok"] == 2
    # wall times are the runs' own, and the added wall time is the median of the arm's minus plain's
    walls = {a: [r["runs"][a]["wall_s"] for r in result["rounds"] if r["runs"].get(a, {}).get("ok")] for a in overhead.ARMS}
    assert all(w > 0 for ws in walls.values() for w in ws)
    import statistics

    assert s["perfkit"]["added_wall_s"] == pytest.approx(statistics.median(walls["perfkit"]) - statistics.median(walls["plain"]))
    # the torch.profiler arm reports its own event count and trace-processing time
    prof = result["rounds"][1]["runs"]["torch-profiler"]["profiler"]
    assert prof["events"] > 0 and prof["processing_s"] >= 0


def test_the_perfkit_arms_own_estimate_is_read_from_its_records_and_set_beside_the_measured_cost(measured):
    result, *_ = measured
    from perfkit.record import Run

    runs = [(r["round"], r["runs"]["perfkit"]) for r in result["rounds"] if "perfkit" in r["runs"]]
    logs = measured[-1] / "logs"
    for rnd, run in runs:
        if run["ok"]:
            rec = Run.load(logs / f"r{rnd}-perfkit.json")
            plain_steps = rec.steps - len(rec.sampling.get("steps") or [])
            assert run["self_estimate_s"] == pytest.approx(rec.self.added_s(plain_steps), abs=1e-6) and run["self_estimate_s"] > 0
    s = result["summary"]["arms"]["perfkit"]
    ok = [run["self_estimate_s"] for _, run in runs if run["ok"]]
    assert s["self_estimate_s"] == pytest.approx(sorted(ok)[len(ok) // 2] if len(ok) % 2 else sum(sorted(ok)[len(ok) // 2 - 1:len(ok) // 2 + 1]) / 2)
    assert s["self_estimate_error"] == pytest.approx((s["self_estimate_s"] - s["added_wall_s"]) / s["added_wall_s"])
    assert "perfkit's own estimate (its records' self blocks, median)" in overhead.table(result)
    assert "perfkit's own estimate" in overhead.markdown(result)


def test_a_failed_run_is_reported_with_its_stderr_and_left_out(measured):
    result, *_ = measured
    fails = result["summary"]["failures"]
    # the script's exit status passes through each arm: sys.exit(3) under perfkit profile, 4 under torch.profiler
    assert [(f["round"], f["arm"], f["reason"]) for f in fails] == [(3, "torch-profiler", "exit 4"), (3, "perfkit", "exit 3")]
    assert "perfkit-arm boom" in fails[1]["stderr_tail"]
    assert fails[0]["stderr_tail"][-1].startswith("torch.profiler: ")  # the arm stopped the profiler before exiting
    text = overhead.table(result)
    assert "round 3 perfkit: exit 3" in text and "perfkit-arm boom" in text and "round 3 torch-profiler: exit 4" in text
    row3 = [ln for ln in text.splitlines() if ln.startswith("3  ")]
    assert len(row3) == 1 and "failed" in row3[0]  # round 3's row shows the failed run


def test_partial_results_after_every_round_and_logs_kept(measured):
    result, _, _, seen_rounds, tmp = measured
    assert [len(r["rounds"]) for r in seen_rounds] == [1, 2, 3]
    assert seen_rounds[0]["summary"]["arms"]["perfkit"]["median_ratio"] == pytest.approx(0.98)
    assert result["warmup"][0]["ok"] and result["warmup"][0]["metric"] == 100.0
    assert "torch.profiler: " in (tmp / "logs" / "r2-torch-profiler.err").read_text()
    assert "fake_train: arm perfkit, run 1" in (tmp / "logs" / "r1-perfkit.out").read_text()
    assert (tmp / "logs" / "r1-perfkit.json").exists()  # the perfkit arm's record, as a user's run writes it
    assert json.loads(json.dumps(result)) == result  # plain data


def test_markdown_shows_per_round_ratios_and_the_summary(measured):
    result, *_ = measured
    md = overhead.markdown(result)
    assert "* perfkit/plain per round: 0.9800, 0.9000" in md
    assert "| perfkit | 2/3 | 98.5 | 0.9400 | 6.0 % |" in md
    assert "2 of 3 rounds" not in md and "3 of 3 rounds (torch-profiler in the last 2)" in md


def test_the_warm_up_failing_stops_before_any_round(fake, child_env, tmp_path):
    f = fake({"plain": [{"exit": 2, "stderr": "no such env"}]})
    res = overhead.measure(overhead.Target(f.script, f.args), arms=["plain", "perfkit"], rounds=3, env=child_env,
                           machine=False)
    assert res["rounds"] == [] and "warm-up run failed (exit 2)" in res["stopped"]
    assert f.order() == ["plain"]
    assert res["summary"]["failures"][0]["stderr_tail"] == ["no such env"]
    assert res["logs"] is None and res["warmup"][0]["stdout"] is None  # the temporary logs are gone


def test_a_time_budget_drops_the_limited_arm_first_then_stops(fake, child_env):
    f = fake({"plain": [{"sps": 10.0}]})
    t = overhead.Target(f.script, f.args)
    res = overhead.measure(t, arms=["plain", "torch-profiler"], rounds=2, arm_rounds={"torch-profiler": 1},
                           warmup_runs=0, env=child_env, machine=False, deadline=time.perf_counter() + 60,
                           estimates={"plain": 1.0, "torch-profiler": 120.0})
    assert [r["order"] for r in res["rounds"]] == [["plain"], ["plain"]]
    assert res["rounds"][1]["dropped"] == {"torch-profiler": "time budget"}
    assert f.order() == ["plain", "plain"] and res["stopped"] is None
    res = overhead.measure(t, arms=["plain", "torch-profiler"], rounds=2, warmup_runs=0, env=child_env, machine=False,
                           deadline=time.perf_counter() + 60, estimates={"plain": 1.0, "torch-profiler": 120.0})
    assert res["rounds"] == [] and res["stopped"].startswith("time budget: round 1")
    assert f.order() == ["plain", "plain"]  # nothing more ran


def test_line_times_split_a_run_into_its_start_run_and_end(tmp_path):
    """With ``line_times`` the child's stdout is unbuffered and timed line by line: a program that sleeps
    0.6 s before its first line, 0.3 s between its lines and 0.4 s after its last (its stdout a pipe,
    which Python would otherwise buffer to the end) shows those parts, and the summary sets each arm's
    parts beside plain's."""
    script = tmp_path / "slow_lines.py"
    script.write_text("import sys, time\ntime.sleep(float(sys.argv[1]))\nprint('first')\ntime.sleep(0.3)\n"
                      "print('SPS: 10')\ntime.sleep(0.4)\n")
    run = overhead.run_once([overhead.sys.executable, str(script), "0.6"], name="r", log_dir=tmp_path / "logs",
                            metric=overhead.compile_metric(overhead.DEFAULT_METRIC), line_times=True, timeout=60)
    assert run["ok"] and run["metric"] == 10.0
    assert 0.6 <= run["first_line_s"] < run["last_line_s"] - 0.25
    assert run["wall_s"] - run["last_line_s"] >= 0.35
    assert (tmp_path / "logs" / "r.out").read_text() == "first\nSPS: 10\n"  # the output is kept whole
    plain = overhead.run_once([overhead.sys.executable, str(script), "0.6"], name="p", log_dir=tmp_path / "logs",
                              metric=None)
    assert "first_line_s" not in plain  # not line-timed unless asked

    def row(first: float, last: float, wall: float) -> dict:
        return {"ok": True, "metric": 10.0, "wall_s": wall, "first_line_s": first, "last_line_s": last}

    result = {"arms": ["plain", "perfkit"], "metric_regex": overhead.DEFAULT_METRIC,
              "rounds": [{"round": 1, "order": ["plain", "perfkit"],
                          "runs": {"plain": row(2.0, 5.0, 5.5), "perfkit": row(3.0, 6.5, 7.5)}}]}
    s = overhead.summarize(result)["arms"]
    assert s["plain"]["wall_parts_s"] == {"start": 2.0, "run": 3.0, "end": 0.5}
    assert s["perfkit"]["added_wall_parts_s"] == pytest.approx({"start": 1.0, "run": 0.5, "end": 0.5})
    result["summary"] = overhead.summarize(result)
    assert "perfkit wall (median): start 3.00 s (+1.00), run 3.50 s (+0.50), end 1.00 s (+0.50)" \
        in overhead._wall_parts_lines(result)

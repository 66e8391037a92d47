"""The pieces of perfkit.overhead.measure: arms and their commands, the schedule, the metric, one run (its
timeout kills the whole process group), the figures from a set of runs, the gates."""

from __future__ import annotations

import time

import statistics

import pytest
from _overhead_helpers import PY

from perfkit.overhead import measure as overhead
from perfkit.overhead.measure import OverheadError, Target


def test_arms_are_checked():
    assert overhead.check_arms(["plain", " perfkit"]) == ["plain", "perfkit"]
    for bad, says in ((["plain", "nvprof"], "unknown arm 'nvprof'"), (["perfkit", "torch-profiler"], "must include plain"),
                      (["plain"], "at least one other"), (["plain", "perfkit", "plain"], "named twice")):
        with pytest.raises(OverheadError, match=says):
            overhead.check_arms(bad)


def test_commands_of_the_arms():
    t = Target("train.py", ["--num-envs", "8"])
    assert overhead.arm_command("plain", t, python="py") == ["py", "train.py", "--num-envs", "8"]
    assert overhead.arm_command("perfkit", t, python="py", record="r.json", profile_args=["--warmup-steps", "24"]) == [
        "py", "-m", "perfkit", "profile", "-q", "-o", "r.json", "--warmup-steps", "24", "train.py", "--num-envs", "8"]
    assert overhead.arm_command("torch-profiler", t, python="py", args=["--iterations", "3"]) == [
        "py", "-m", "perfkit.overhead.profiler_arm", "train.py", "--iterations", "3"]
    m = Target("pkg.train", ["a"], module=True)
    assert overhead.arm_command("plain", m, python="py") == ["py", "-m", "pkg.train", "a"]
    assert overhead.arm_command("perfkit", m, python="py", record="r")[-3:] == ["-m", "pkg.train", "a"]
    assert overhead.arm_command("torch-profiler", m, python="py")[-3:] == ["-m", "pkg.train", "a"]
    with pytest.raises(ValueError):
        overhead.arm_command("perfkit", t)  # no record path


def test_rounds_rotate_and_a_limited_arm_takes_the_last_rounds():
    arms = ["plain", "perfkit", "torch-profiler"]
    assert [overhead.rotation(arms, i) for i in range(4)] == [
        ["plain", "perfkit", "torch-profiler"], ["perfkit", "torch-profiler", "plain"],
        ["torch-profiler", "plain", "perfkit"], ["plain", "perfkit", "torch-profiler"]]
    lim = {"torch-profiler": 2}
    assert [overhead.arms_of_round(arms, i, 5, lim) for i in range(5)] == [arms[:2]] * 3 + [arms] * 2
    assert [overhead.arms_of_round(arms, i, 2, None) for i in range(2)] == [arms, arms]


def test_the_metric_is_the_last_matching_line():
    pat = overhead.compile_metric(overhead.DEFAULT_METRIC)
    text = "iter 1  SPS 9,380\nSPS: 12.5\nnoise SPS: 3\nSPS: 1,234.5\nSPS: 9e3 trailing\n"
    assert overhead.parse_metric(text, pat) == 1234.5
    assert overhead.parse_metric("no metric here\n", pat) is None
    custom = overhead.compile_metric(r"throughput=(\S+) steps/s")
    assert overhead.parse_metric("throughput=10 steps/s\nthroughput=20 steps/s\n", custom) == 20.0
    assert overhead.parse_metric("throughput=fast steps/s\n", custom) is None
    with pytest.raises(OverheadError, match="no group"):
        overhead.compile_metric("SPS: [0-9]+")
    with pytest.raises(OverheadError, match="does not compile"):
        overhead.compile_metric("SPS: ([0-9]+")
    assert overhead.compile_metric(None) is None


def test_run_once_reads_the_metric_and_says_why_a_run_failed(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import sys\nprint('SPS: 42.0')\nprint('oops', file=sys.stderr)\nsys.exit(int(sys.argv[1]))\n")
    pat = overhead.compile_metric(overhead.DEFAULT_METRIC)
    ok = overhead.run_once([PY, str(script), "0"], name="ok", log_dir=tmp_path / "logs", metric=pat)
    assert ok["ok"] and ok["metric"] == 42.0 and ok["reason"] is None and "stderr_tail" not in ok
    assert (tmp_path / "logs" / "ok.out").read_text() == "SPS: 42.0\n"
    bad = overhead.run_once([PY, str(script), "5"], name="bad", log_dir=tmp_path / "logs", metric=pat)
    assert not bad["ok"] and bad["reason"] == "exit 5" and bad["stderr_tail"] == ["oops"]
    quiet = tmp_path / "q.py"
    quiet.write_text("print('done')\n")
    r = overhead.run_once([PY, str(quiet)], name="q", log_dir=tmp_path / "logs", metric=pat)
    assert not r["ok"] and r["reason"].startswith("no line of its stdout matched")
    r = overhead.run_once([PY, str(quiet)], name="q", log_dir=tmp_path / "logs", metric=None)  # wall time only
    assert r["ok"] and r["metric"] is None and r["wall_s"] > 0


def test_a_run_past_its_timeout_is_killed_with_its_children(tmp_path):
    script = tmp_path / "slow.py"
    pidfile = tmp_path / "child.pid"
    script.write_text(
        "import subprocess, sys, time\n"
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(c.pid))\n"
        "print('SPS: 1.0', flush=True)\ntime.sleep(120)\n")
    t0 = time.perf_counter()
    r = overhead.run_once([PY, str(script)], name="slow", log_dir=tmp_path, metric=overhead.compile_metric(overhead.DEFAULT_METRIC),
                          timeout=2)
    assert time.perf_counter() - t0 < 60
    assert r["timed_out"] and not r["ok"] and r["reason"] == "timed out after 2 s"
    child = int(pidfile.read_text())
    for _ in range(100):  # the grandchild got the group's SIGKILL too: gone, or a zombie until init reaps it
        try:
            with open(f"/proc/{child}/stat") as f:
                if f.read().rsplit(") ", 1)[1].startswith("Z"):
                    break
        except FileNotFoundError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the run's child {child} outlived the timeout")


def _run(arm, rnd, metric, wall, ok=True):
    return {"arm": arm, "round": rnd, "metric": metric, "wall_s": wall, "ok": ok, "rc": 0 if ok else 1,
            "reason": None if ok else "exit 1", "stderr_tail": [] if ok else ["boom"]}


def _result(rows, arms=("plain", "perfkit"), metric_regex=overhead.DEFAULT_METRIC, arm_args=None):
    res = {"target": "t.py", "rounds_requested": len(rows), "arm_rounds": {a: len(rows) for a in arms}, "machine": None,
           "stopped": None, "arms": list(arms), "metric_regex": metric_regex, "metric_name": overhead.metric_name(metric_regex),
           "arm_args": arm_args or {}, "warmup": [],
           "rounds": [{"round": i + 1, "order": list(r), "runs": r} for i, r in enumerate(rows)]}
    res["summary"] = overhead.summarize(res)
    return res


def test_summary_medians_of_the_per_round_ratios_and_the_added_wall():
    rows = [{"plain": _run("plain", 1, 100.0, 10.0), "perfkit": _run("perfkit", 1, 98.0, 11.0)},
            {"plain": _run("plain", 2, 110.0, 12.0), "perfkit": _run("perfkit", 2, 99.0, 15.0)},
            {"plain": _run("plain", 3, 90.0, 11.0), "perfkit": _run("perfkit", 3, 90.0, 12.5)},
            {"plain": _run("plain", 4, 95.0, 11.0, ok=False), "perfkit": _run("perfkit", 4, 50.0, 30.0)}]
    s = _result(rows)["summary"]
    pk = s["arms"]["perfkit"]
    assert [x["ratio"] for x in pk["ratios"]] == pytest.approx([0.98, 0.9, 1.0])  # round 4's plain failed
    assert pk["median_ratio"] == pytest.approx(0.98) and pk["overhead_pct"] == pytest.approx(2.0)
    # median wall of perfkit's ok runs (11, 15, 12.5, 30 -> 13.75) minus plain's (10, 12, 11 -> 11)
    assert pk["added_wall_s"] == pytest.approx(2.75)
    assert [x["added_wall_s"] for x in pk["added_wall_per_round_s"]] == pytest.approx([1.0, 3.0, 1.5])
    # the rounds' own differences (1, 3, 1.5): mean 1.833, sd 1.041, 95 % half-width t(0.975, 2) = 4.302653 x 1.041 / sqrt 3
    pair = pk["added_wall_paired_s"]
    assert pair["median"] == pytest.approx(1.5) and pair["mean"] == pytest.approx(11 / 6) and pair["rounds"] == 3
    assert pair["high"] - pair["mean"] == pytest.approx(4.302653 * statistics.stdev([1.0, 3.0, 1.5]) / 3 ** 0.5)
    assert s["arms"]["plain"]["median_metric"] == 100.0 and s["arms"]["plain"]["ok"] == 3
    assert [(f["round"], f["arm"]) for f in s["failures"]] == [(4, "plain")]


def test_the_estimate_is_read_against_what_the_rounds_can_resolve():
    """An estimate of +0.9 s against rounds whose differences spread -3..+2 s: the run cannot tell it from
    none, and says so; against rounds that agree to 0.1 s it is outside their interval."""
    def rows(diffs):
        return [{"plain": _run("plain", i + 1, 100.0, 20.0),
                 "perfkit": {**_run("perfkit", i + 1, 99.0, 20.0 + d), "self_estimate_s": 0.9}} for i, d in enumerate(diffs)]

    noisy = _result(rows([-3.0, 2.0, 1.0, -2.0, 1.5]))
    line = overhead.table(noisy)
    assert "the estimate lies inside it" in line and "cannot tell a cost of this size from none" in line
    tight = _result(rows([2.0, 2.1, 1.9, 2.05, 1.95]))
    line = overhead.table(tight)
    assert "the estimate lies outside it" in line and "cannot tell" not in line
    assert tight["summary"]["arms"]["perfkit"]["added_wall_paired_s"]["low"] > 1.8
    assert _result(rows([1.0]))["summary"]["arms"]["perfkit"].get("added_wall_paired_s") is None  # one round
    assert "perfkit added wall per round: mean +2.00 s" in overhead.table(tight)  # its own line, apart from the estimate's
    assert "perfkit added wall per round: mean +2.00 s" in overhead.markdown(tight)


def test_wall_only_ratios_and_an_arm_with_other_arguments():
    rows = [{"plain": _run("plain", 1, None, 10.0), "perfkit": _run("perfkit", 1, None, 12.5)}]
    pk = _result(rows, metric_regex=None)["summary"]["arms"]["perfkit"]
    assert pk["median_ratio"] == pytest.approx(0.8) and pk["added_wall_s"] == pytest.approx(2.5)
    rows = [{"plain": _run("plain", 1, 100.0, 10.0), "torch-profiler": _run("torch-profiler", 1, 40.0, 20.0)}]
    res = _result(rows, arms=("plain", "torch-profiler"), arm_args={"torch-profiler": ["--iterations", "3"]})
    tp = res["summary"]["arms"]["torch-profiler"]
    assert tp["median_ratio"] == pytest.approx(0.4)
    assert tp["wall_comparable"] is False and tp["added_wall_s"] is None  # a shorter run: its wall time says nothing
    assert "n/a (other args)" in overhead.table(res)


def test_gates():
    rows = [{"plain": _run("plain", 1, 100.0, 10.0), "perfkit": _run("perfkit", 1, 97.0, 13.0)}]
    res = _result(rows)
    assert overhead.check_gates(res, max_overhead=0.03) == []  # exactly 0.97 passes
    assert overhead.check_gates(res, max_added_wall_s=3.0) == []
    p = overhead.check_gates(res, max_overhead=0.02, max_added_wall_s=2.0)
    assert len(p) == 2 and "0.9700, below 0.9800" in p[0] and "adds 3.00 s" in p[1]
    none = _result([{"plain": _run("plain", 1, 100.0, 10.0), "perfkit": _run("perfkit", 1, None, 1.0, ok=False)}])
    assert overhead.check_gates(none, max_overhead=0.03) == ["--max-overhead: no perfkit/plain ratio was measured"]

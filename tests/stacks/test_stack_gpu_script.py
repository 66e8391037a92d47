"""scripts/gpu/stacks.py (the H200 run of the manager env) on the CPU: its parts, so that the GPU run is
a single shot. The whole pipeline on the CPU (``--device cpu --num-envs 64 --iterations 3 --num-steps
8 --rounds 1``) takes ~30 s and is run by hand; here the pieces it is made of. Its overhead part (b)
is :func:`perfkit.overhead.measure` (tested in tests/overhead/); here, that stacks.py drives it."""

from __future__ import annotations

import importlib.util
import json
import os
import sys

import pytest

from _stacks_helpers import ROOT

from perfkit.overhead import measure as overhead


@pytest.fixture(scope="module")
def stacks():
    spec = importlib.util.spec_from_file_location("gpu_stacks", ROOT / "scripts" / "gpu" / "stacks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(arm, rnd, sps, wall, ok=True):
    return {"arm": arm, "round": rnd, "metric": sps, "wall_s": wall, "ok": ok, "rc": 0 if ok else 1, "timed_out": False,
            "reason": None if ok else "exit 1", "stderr_tail": [] if ok else ["Traceback", "RuntimeError: boom"]}


def _overhead_result(rows):
    res = {"target": "examples/manager_env/train_rsl_rl.py --num-envs 8", "label": "manager env", "arms": list(overhead.ARMS),
           "rounds_requested": len(rows), "arm_rounds": {a: len(rows) for a in overhead.ARMS}, "arm_args": {},
           "metric_regex": overhead.DEFAULT_METRIC, "metric_name": "SPS", "machine": None, "warmup": [], "stopped": None,
           "rounds": [{"round": i + 1, "order": list(r), "runs": r} for i, r in enumerate(rows)]}
    res["summary"] = overhead.summarize(res)
    return res


def test_the_report_shows_the_overhead_rounds_and_a_failed_run(stacks, tmp_path):
    rows = [{"plain": _run("plain", 1, 100.0, 10.0), "perfkit": _run("perfkit", 1, 97.0, 11.0),
             "torch-profiler": _run("torch-profiler", 1, 40.0, 30.0)},
            {"plain": _run("plain", 2, 100.0, 10.0), "perfkit": _run("perfkit", 2, None, 2.0, ok=False),
             "torch-profiler": _run("torch-profiler", 2, 50.0, 30.0)}]
    ov = _overhead_result(rows)
    results = {"command": "stacks.py --out x", "args": {"device": "cpu", "results": str(tmp_path / "device-out")},
               "started": "now", "versions": {}, "overhead": ov}
    md = stacks.markdown(results)
    assert "## perfkit overhead: manager env" in md
    assert "round 2 perfkit: exit 1" in md and "RuntimeError: boom" in md
    assert "| 2 | plain perfkit torch-profiler | 100 | failed | 50 |" in md
    assert "* perfkit/plain per round: 0.9700" in md
    assert not stacks.all_ok(results)
    stacks.write_reports(tmp_path / "out", results)  # and a copy where the device tool collects files
    for d in ("out", "device-out"):
        assert (tmp_path / d / "summary.md").read_text() == md
        saved = json.loads((tmp_path / d / "stacks.json").read_text())
        assert [x["ratio"] for x in saved["overhead"]["summary"]["arms"]["perfkit"]["ratios"]] == [0.97]
    rows[1]["perfkit"] = _run("perfkit", 2, 98.0, 11.0)
    assert stacks.all_ok({**results, "overhead": _overhead_result(rows)})
    assert not stacks.all_ok({**results, "overhead": _overhead_result([])})  # nothing ran


def test_the_profile_command(stacks, tmp_path):
    args = stacks.parse_args(["--out", str(tmp_path), "--device", "cpu", "--num-envs", "8", "--iterations", "3", "--num-steps", "4"])
    train = ["--device", "cpu", "--backend", "auto", "--num-envs", "8", "--iterations", "3", "--num-steps", "4"]
    rec = tmp_path / "r.json"
    assert stacks.profile_command(args, rec) == [sys.executable, "-m", "perfkit", "profile", "-o", str(rec),
                                                 "--warmup-steps", "4", str(stacks.SCRIPT), *train]
    assert "--verify" in stacks.profile_command(args, rec, verify=True)
    with pytest.raises(SystemExit):
        stacks.parse_args(["--out", str(tmp_path), "--iterations", "1"])


def test_run_one_reads_the_sps_line_and_kills_a_run_past_its_timeout(stacks, tmp_path):
    ok = tmp_path / "ok.py"
    ok.write_text("print('iter 1')\nprint('SPS: 1234.5')\n")
    r = stacks.run_one([sys.executable, str(ok)], {"PATH": "/usr/bin:/bin"}, tmp_path / "logs", "ok", timeout=60)
    assert r["rc"] == 0 and r["sps"] == 1234.5 and not r["timed_out"]
    slow = tmp_path / "slow.py"
    slow.write_text("import time\nprint('SPS: 1.0', flush=True)\ntime.sleep(60)\n")
    r = stacks.run_one([sys.executable, str(slow)], {"PATH": "/usr/bin:/bin"}, tmp_path / "logs", "slow", timeout=1)
    assert r["timed_out"] and r["rc"] != 0 and r["wall_s"] < 30
    assert (tmp_path / "logs" / "slow.out").read_text() == "SPS: 1.0\n"


def test_the_overhead_stage_measures_with_perfkit_overhead(stacks, tmp_path, monkeypatch):
    """(b) on a stand-in for the manager env's script: the three arms, perfkit's warm-up one iteration,
    the logs under DIR/overhead, the reports rewritten after the round."""
    fake = tmp_path / "fake.py"
    fake.write_text("import sys\nprint('argv', sys.argv[1:])\n"
                    "print('SPS: 200.0' if 'perfkit.profile.session' in sys.modules else 'SPS: 100.0')\n")
    monkeypatch.setattr(stacks, "SCRIPT", fake)
    args = stacks.parse_args(["--out", str(tmp_path / "out"), "--device", "cpu", "--num-envs", "8", "--iterations", "2",
                              "--num-steps", "4", "--rounds", "1"])
    env = stacks.child_env(args, [])
    results = {"command": "stacks.py", "args": vars(args), "started": "now", "versions": {}}
    import time

    stacks.overhead_stage(args, env, tmp_path / "out", results, time.perf_counter())
    ov = results["overhead"]
    assert ov["rounds"][0]["order"] == ["plain", "perfkit", "torch-profiler"]
    pk = ov["rounds"][0]["runs"]["perfkit"]
    assert pk["cmd"][pk["cmd"].index("--warmup-steps") + 1] == "4"
    assert ov["summary"]["arms"]["perfkit"]["median_ratio"] == 2.0
    assert ov["summary"]["arms"]["torch-profiler"]["median_ratio"] == 1.0
    assert sorted(p for p in os.listdir(tmp_path / "out" / "overhead") if p.endswith(".out")) == [
        "r1-perfkit.out", "r1-plain.out", "r1-torch-profiler.out"]
    assert "perfkit/plain per round: 2.0000" in (tmp_path / "out" / "summary.md").read_text()
    assert stacks.all_ok(results)

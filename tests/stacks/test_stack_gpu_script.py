"""scripts/gpu/stacks.py (the H200 run of the manager env) on the CPU: its parts, so that the GPU run is
a single shot. The whole pipeline on the CPU (``--device cpu --num-envs 64 --iterations 3 --num-steps
8 --rounds 1``) takes ~30 s and is run by hand; here the pieces it is made of."""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap

import pytest

from _stacks_helpers import ROOT


@pytest.fixture(scope="module")
def stacks():
    spec = importlib.util.spec_from_file_location("gpu_stacks", ROOT / "scripts" / "gpu" / "stacks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _row(i, plain, perfkit, torchprof, walls=(10.0, 11.0, 30.0)):
    r = {"round": i, "plain": {"sps": plain, "wall_s": walls[0], "rc": 0, "timed_out": False},
         "perfkit": {"sps": perfkit, "wall_s": walls[1], "rc": 0 if perfkit else 1, "timed_out": False},
         "torch_profiler": {"sps": torchprof, "wall_s": walls[2], "rc": 0, "timed_out": False}}
    r["perfkit/plain"] = perfkit / plain if perfkit else None
    r["torch_profiler/plain"] = torchprof / plain
    return r


def test_overhead_summary_takes_medians_of_per_round_ratios(stacks):
    rounds = [_row(1, 100.0, 98.0, 40.0), _row(2, 110.0, 99.0, 44.0), _row(3, 90.0, 90.0, 30.0)]
    s = stacks.overhead_summary(rounds)
    assert s["perfkit"]["ratios"] == pytest.approx([0.98, 0.9, 1.0])
    assert s["perfkit"]["median_sps_ratio"] == pytest.approx(0.98)
    assert s["perfkit"]["overhead_pct"] == pytest.approx(2.0)
    assert s["torch_profiler"]["median_sps_ratio"] == pytest.approx(0.4)
    assert s["perfkit"]["median_added_wall_s"] == pytest.approx(1.0)
    assert s["median_sps"] == {"plain": 100.0, "perfkit": 98.0, "torch_profiler": 40.0}


def test_a_failed_run_is_left_out_of_the_ratios_and_listed_in_the_report(stacks, tmp_path):
    rounds = [_row(1, 100.0, 97.0, 40.0), _row(2, 100.0, None, 50.0)]
    s = stacks.overhead_summary(rounds)
    assert s["perfkit"]["ratios"] == pytest.approx([0.97])
    results = {"command": "stacks.py --out x", "args": {"device": "cpu", "results": str(tmp_path / "device-out")},
               "started": "now", "versions": {},
               "overhead": {"rounds": rounds, "summary": s, "config": {"num_envs": 8, "iterations": 2, "num_steps": 4}}}
    md = stacks.markdown(results)
    assert "round 2 perfkit: exit 1" in md
    assert "| 2 | 100 | — | 50 |" in md
    assert "overhead 3.0 %" in md
    assert not stacks.all_ok(results)
    stacks.write_reports(tmp_path / "out", results)  # and a copy where the device tool collects files
    for d in ("out", "device-out"):
        assert (tmp_path / d / "summary.md").read_text() == md
        assert json.loads((tmp_path / d / "stacks.json").read_text())["overhead"]["summary"]["perfkit"]["ratios"] == [0.97]


def test_commands_of_the_three_modes(stacks, tmp_path):
    args = stacks.parse_args(["--out", str(tmp_path), "--device", "cpu", "--num-envs", "8", "--iterations", "3", "--num-steps", "4"])
    train = ["--device", "cpu", "--backend", "auto", "--num-envs", "8", "--iterations", "3", "--num-steps", "4"]
    script = str(stacks.SCRIPT)
    assert stacks.command("plain", args) == [sys.executable, script, *train]
    rec = tmp_path / "r.json"
    assert stacks.command("perfkit", args, rec) == [sys.executable, "-m", "perfkit", "profile", "-o", str(rec),
                                                    "--warmup-steps", "4", script, *train]
    assert "--verify" in stacks.command("perfkit", args, rec, verify=True)
    tp = stacks.command("torch_profiler", args)
    assert tp[2] == stacks.CHILD_FLAG and tp[3:] == [script, *train]
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
    assert (tmp_path / "logs" / "slow.out").read_text().startswith("$ ")


def test_the_torch_profiler_child_runs_a_script_as_main_and_passes_its_exit_status(stacks, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import sys, torch
        x = torch.ones(8)
        for _ in range(3):
            x = x * 2
        print(f"SPS: {float(x.sum()):.1f}")
        sys.exit(int(sys.argv[1]))
    """))
    env = stacks.child_env(stacks.parse_args(["--out", str(tmp_path)]), [])
    cmd = [sys.executable, str(ROOT / "scripts" / "gpu" / "stacks.py"), stacks.CHILD_FLAG, str(script), "3"]
    r = stacks.run_one(cmd, env, tmp_path / "logs", "tp", timeout=120)
    assert r["rc"] == 3 and r["sps"] == 64.0
    assert "torch.profiler:" in (tmp_path / "logs" / "tp.err").read_text()

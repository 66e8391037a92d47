"""scripts/gpu/dist.py in its CPU form (gloo, MuJoCo C, tiny sizes): the four launches, the merged
report beside the 1-rank record, and a summary whose efficiencies follow from the SPS it read."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from _dist_helpers import ROOT, env

SCRIPT = ROOT / "scripts" / "gpu" / "dist.py"
CPU = ["--backend", "gloo", "--device", "cpu", "--num-envs", "8", "--iterations", "3", "--num-steps", "8", "--timeout", "150"]


def _run(args, timeout=400):
    return subprocess.run([sys.executable, str(SCRIPT), *args], env=env(), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_cpu_form_end_to_end(tmp_path):
    out = tmp_path / "dist"
    proc = _run(["--out", str(out), *CPU])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = json.loads((out / "summary.json").read_text())
    for kind in ("plain", "perfkit"):
        one, multi = res[kind]["one"], res[kind]["multi"]
        assert one["nproc"] == 1 and multi["nproc"] == 2 and len(multi["per_rank"]) == 2
        assert multi["total_sps"] == pytest.approx(sum(multi["per_rank"]), abs=0.2)
        assert res[kind]["scaling_efficiency"] == pytest.approx(multi["total_sps"] / (2 * one["total_sps"]))
    rec = res["perfkit"]["recorded"]
    assert rec["scaling_efficiency"] == pytest.approx(rec["total_sps"] / (2 * rec["single_sps"]))
    assert res["straggler"] in (0, 1) and res["comm_share"] > 0
    assert res["environment"] == {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
    for name in ("one/run.json", "multi/run.rank0.json", "multi/run.rank1.json", "report/index.html", "report/report.md",
                 "summary.md", "plain-1.log", "plain-2.log", "perfkit-1.log", "perfkit-2.log"):
        assert (out / name).stat().st_size > 0, name
    md = (out / "report" / "report.md").read_text()
    assert "## Data-parallel job: train\\_ddp.py, 2 of 2 ranks (gloo)" in md and "Scaling efficiency" in md
    assert "scaling efficiency" in proc.stdout and "of the step" in proc.stdout
    assert (out / "plain-2.log").read_text().startswith(sys.executable)  # each log names its command


def test_rounds_interleave_the_four_launches_and_give_perfkits_overhead_per_rank(tmp_path):
    out = tmp_path / "dist"
    proc = _run(["--out", str(out), *CPU, "--rounds", "2"], timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = json.loads((out / "summary.json").read_text())
    r1, r2 = res["rounds"]
    assert r1["order"] == ["plain-1", "plain-2", "perfkit-1", "perfkit-2"]
    assert r2["order"] == ["plain-2", "perfkit-1", "perfkit-2", "plain-1"]  # the order rotates by round
    for name in ("plain-1.r1", "perfkit-2.r1", "plain-1.r2", "perfkit-2.r2"):
        assert (out / f"{name}.log").stat().st_size > 0, name
    # the ratios are the logs' SPS over each other, the overhead their median over the rounds
    last = r2["perfkit_over_plain"]
    assert last["one"] == pytest.approx(res["perfkit"]["one"]["total_sps"] / res["plain"]["one"]["total_sps"])
    assert last["per_rank"] == pytest.approx([a / b for a, b in zip(res["perfkit"]["multi"]["per_rank"],
                                                                      res["plain"]["multi"]["per_rank"])])
    both = [r1["perfkit_over_plain"]["one"], r2["perfkit_over_plain"]["one"]]
    assert res["overhead"]["one"] == pytest.approx(sum(both) / 2) and len(res["overhead"]["per_rank"]) == 2
    assert "perfkit / plain SPS (median of 2 rounds" in (out / "summary.md").read_text()


def test_a_failed_launch_exits_1_naming_its_log(tmp_path):
    proc = _run(["--out", str(tmp_path / "d"), *CPU, "--env", "no-such-env"], timeout=120)
    assert proc.returncode == 1 and "FAILED: plain-1" in proc.stdout and "plain-1.log" in proc.stdout


def test_a_spent_budget_launches_nothing(tmp_path):
    proc = _run(["--out", str(tmp_path / "d"), *CPU, "--budget", "5"], timeout=60)
    assert proc.returncode == 1 and "budget of 5 s is spent" in proc.stdout
    assert not list((tmp_path / "d").glob("*.log"))


def test_too_few_gpus_is_said_before_anything_runs(tmp_path):
    proc = _run(["--out", str(tmp_path / "d"), "--num-envs", "8"], timeout=60)  # the GPU form on this CPU machine
    assert proc.returncode == 1 and "2 GPUs needed, this machine shows 0" in proc.stdout
    assert not (tmp_path / "d").exists()


def test_same_gpu_says_what_it_shows_and_needs_one_gpu(tmp_path):
    proc = _run(["--out", str(tmp_path / "d"), "--same-gpu", "--num-envs", "8"], timeout=60)
    assert proc.returncode == 1 and "1 GPU needed, this machine shows 0" in proc.stdout
    assert "2 ranks share cuda:0 with gloo" in proc.stdout and "does NOT show data-parallel scaling" in proc.stdout
    assert not (tmp_path / "d").exists()
    proc = _run(["--out", str(tmp_path / "d"), "--same-gpu", "--backend", "nccl"], timeout=60)
    assert proc.returncode == 2 and "leave --backend and --device out" in proc.stderr

"""scripts/gpu/overhead.py (issue 12's H200 table in one command) on the CPU: its plan and time
estimate, the commands it runs (accepted by the scripts they run), its report, and the whole path on
a tiny configuration (--device cpu --backend mujoco, one round)."""

from __future__ import annotations

import json
import re
import subprocess
import tarfile

import pytest
from _overhead_helpers import PY, ROOT, load_script

SCRIPT = ROOT / "scripts" / "gpu" / "overhead.py"


@pytest.fixture(scope="module")
def gpu():
    return load_script(SCRIPT, "gpu_overhead", register=True)


def test_the_default_plan_is_the_issues_table(gpu, tmp_path):
    a = gpu.parse_args(["--out", str(tmp_path)])
    cs = gpu.configs(a)
    assert [(c.name, c.args) for c in cs] == [
        ("train.py 256 envs", ["--backend", "mjwarp", "--device", "cuda", "--num-envs", "256", "--iterations", "60"]),
        ("train.py 4096 envs", ["--backend", "mjwarp", "--device", "cuda", "--num-envs", "4096", "--iterations", "40"]),
        ("manager env 4096 envs", ["--backend", "mjwarp", "--device", "cuda", "--num-envs", "4096", "--iterations", "16",
                                   "--num-steps", "24"]),
    ]
    # torch.profiler: 0.2 of the iterations (at least 3), the rest of its arguments the same
    assert [c.profiler_iterations for c in cs] == [12, 8, 3]
    assert cs[0].profiler_args == _with(cs[0].args, "12") and cs[2].profiler_args == _with(cs[2].args, "3")
    assert [c.warmup for c in cs] == [True, False, True]  # Warp kernels once per script
    assert cs[2].warmup_args() == _with(cs[2].args, "2")
    same = gpu.configs(gpu.parse_args(["--out", str(tmp_path), "--profiler-fraction", "1"]))
    assert [c.profiler_args for c in same] == [None, None, None] and [c.profiler_iterations for c in same] == [60, 40, 16]


def _with(args, iterations):
    out = list(args)
    out[out.index("--iterations") + 1] = iterations
    return out


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")  # the manager env's helpers
def test_the_commands_are_accepted_by_the_scripts_they_run(gpu, tmp_path):
    train = load_script(ROOT / "examples" / "train.py", "example_train_for_overhead", register=True)
    manager = load_script(ROOT / "examples" / "manager_env" / "train_rsl_rl.py", "example_manager_for_overhead", register=True)
    cs = gpu.configs(gpu.parse_args(["--out", str(tmp_path)]))
    for c in cs:
        parse = train.parse_args if c.script.name == "train.py" else manager.parse_args
        for args in (c.args, c.profiler_args, c.warmup_args()):
            ns = parse(args)
            assert (ns.num_envs, ns.device, ns.backend) == (int(args[args.index("--num-envs") + 1]), "cuda", "mjwarp")
            assert ns.iterations == int(args[args.index("--iterations") + 1])


def test_the_plan_and_its_estimate_are_printed_first(tmp_path):
    p = subprocess.run([PY, str(SCRIPT), "--out", str(tmp_path / "o"), "--dry-run"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "plan (5 rounds; torch.profiler in the last 1, at 0.2 of the iterations):"
    assert lines[1].startswith("  train.py 256 envs: examples/train.py --backend mjwarp --device cuda --num-envs 256 "
                               "--iterations 60; per run ~18 s plain, ~26 s perfkit")
    assert lines[4].startswith("  env-only: benchmarks/overhead.py --env factory --num-envs 256 4096 --device cuda")
    per_part = [int(ln.rsplit("~", 1)[1].split()[0]) for ln in lines[1:5]]
    total = int(lines[5].split("~")[1].split()[0])
    assert abs(total - (sum(per_part) + 15)) <= 3  # the parts plus set-up, rounded
    split = re.search(r"--parts train \(~(\d+) s\), then --parts manager,env-only \(~(\d+) s\)", p.stdout)
    assert "over budget" in p.stdout and split, p.stdout
    assert abs(int(split[1]) + int(split[2]) - 15 - total) <= 3  # each call has its own set-up
    assert not (tmp_path / "o").exists()  # a dry run writes nothing
    p = subprocess.run([PY, str(SCRIPT), "--out", str(tmp_path / "o"), "--dry-run", "--parts", "train",
                        "--budget-s", "600"], capture_output=True, text=True, timeout=60)
    assert "manager" not in p.stdout and "over budget" not in p.stdout


@pytest.mark.parametrize("bad", [["--parts", "train,gym"], ["--train-envs", "256", "--train-iterations", "60", "40"],
                                 ["--profiler-rounds", "6"], ["--profiler-fraction", "0"], ["--manager-iterations", "1"]])
def test_bad_settings_are_refused(gpu, tmp_path, bad):
    with pytest.raises(SystemExit):
        gpu.parse_args(["--out", str(tmp_path), *bad])


def _cfg(name, kind, ratios, walls, tp_ratio=0.3):
    rows = []
    for i, (r, (wp, wk)) in enumerate(zip(ratios, walls)):
        rows.append({"round": i + 1, "order": ["plain", "perfkit", "torch-profiler"], "runs": {
            "plain": {"arm": "plain", "round": i + 1, "ok": True, "metric": 1000.0, "wall_s": wp, "reason": None},
            "perfkit": {"arm": "perfkit", "round": i + 1, "ok": True, "metric": 1000.0 * r, "wall_s": wk, "reason": None},
            "torch-profiler": {"arm": "torch-profiler", "round": i + 1, "ok": True, "metric": 1000.0 * tp_ratio,
                               "wall_s": 20.0, "reason": None}}})
    from perfkit.overhead import measure as overhead

    res = {"arms": list(overhead.ARMS), "metric_regex": overhead.DEFAULT_METRIC, "metric_name": "SPS",
           "arm_args": {"torch-profiler": ["--iterations", "3"]}, "warmup": [], "rounds": rows}
    res["summary"] = overhead.summarize(res)
    return {"name": name, "kind": kind, "profiler_iterations": 3, "result": res}


def test_the_headline_reads_the_targets_from_the_rounds(gpu):
    results = {"configs": [
        _cfg("train.py 256 envs", "train", [0.99, 0.98, 0.97, 0.99, 0.985], [(18, 21)] * 5),  # ratio ok, +3 s
        _cfg("train.py 4096 envs", "train", [0.99, 0.96, 0.99, 0.995, 0.99], [(13, 13.5)] * 5),
        _cfg("manager env 4096 envs", "manager", [0.9, 0.95, 0.96, 0.99, 0.97], [(15, 16)] * 5)]}
    rows = gpu.headline(results)[2:]
    assert rows[0].startswith("| train.py 256 envs | 5 | 1,000 | 0.9850 | 0.990, 0.980, 0.970, 0.990, 0.985 | +3.00 | 0.3000 |")
    assert rows[0].endswith("| >= 0.98, <= 1 s: NOT met |")  # issue 23's targets: the added wall time
    assert "| 13.0 / 13.5 / 20.0 (3 it.) |" in rows[1] and rows[1].endswith("| >= 0.99, <= 1 s: met |")
    assert "| 0.9600 |" in rows[2] and rows[2].endswith("| >= 0.97, <= 1 s: NOT met |")
    assert gpu.all_ok(results)  # targets are reported, not run failures
    results["configs"][2]["result"]["stopped"] = "time budget: round 5 ..."
    assert not gpu.all_ok(results)  # rounds cut by the budget
    del results["configs"][2]["result"]["stopped"]
    results["configs"][1]["result"]["summary"]["failures"] = [{"round": 1, "arm": "perfkit", "reason": "exit 1"}]
    assert not gpu.all_ok(results)


def test_the_whole_script_on_the_cpu(tmp_path):
    out, res_dir = tmp_path / "out", tmp_path / "results"
    p = subprocess.run([PY, str(SCRIPT), "--out", str(out), "--results", str(res_dir), "--parts", "train,env-only",
                        "--device", "cpu", "--backend", "mujoco", "--train-envs", "8", "--train-iterations", "2",
                        "--rounds", "1", "--profiler-rounds", "0", "--env-only-rounds", "1", "--env-only-steps", "10",
                        "--no-warmup"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    results = json.loads((out / "overhead.json").read_text())
    [cfg] = results["configs"]
    r = cfg["result"]
    assert r["rounds"][0]["order"] == ["plain", "perfkit"]  # the torch.profiler arm is tested in test_measure.py
    assert all(x["ok"] and x["metric"] > 0 for x in r["rounds"][0]["runs"].values())
    assert r["rounds"][0]["runs"]["perfkit"]["cmd"][-9:] == ["examples/train.py", "--backend", "mujoco", "--device", "cpu",
                                                             "--num-envs", "8", "--iterations", "2"]
    assert results["machine"]["device"] == "cpu"
    [env_only] = results["env_only"]["results"]
    assert env_only["num_envs"] == 8 and env_only["ratio_median"] > 0
    md = (out / "overhead.md").read_text()
    assert "| train.py 8 envs | 1 |" in md and "## Env-only, in-process (benchmarks/overhead.py)" in md
    assert "## perfkit overhead: train.py 8 envs" in md
    assert sorted(x.name for x in res_dir.iterdir()) == ["overhead-results.tgz", "overhead.json", "overhead.md"]
    with tarfile.open(res_dir / "overhead-results.tgz") as tar:
        names = tar.getnames()
    assert "overhead.md" in names and "logs/train_py-8-envs/r1-perfkit.err" in names
    assert p.stdout.splitlines()[0] == "plan (1 round; no torch.profiler arm):"
    assert "No torch.profiler arm." in md

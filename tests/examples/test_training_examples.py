"""examples/train.py and examples/train_naive.py: flags, output contract, and that perfkit's linter
and profiler find every planted anti-pattern in the naive loop (and nothing in the clean one)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
NAIVE = os.path.join(EXAMPLES, "train_naive.py")

# anti-pattern -> finding kind (profile) and lint category
EXPECTED = {
    "item_log": ("sync", "sync"),
    "nonzero_reset": ("sync", "sync"),
    "env_loop": ("loop", "loop"),
    "fresh_tensors": ("alloc", "alloc"),
    "print_tensor": ("sync", "sync"),
    "cpu_numpy": ("sync", "sync"),
    "list_gather": ("sync", "sync"),
}


def _load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", os.path.join(EXAMPLES, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _planted_lines() -> dict[str, int]:
    lines = {}
    with open(NAIVE) as f:
        for no, text in enumerate(f, 1):
            m = re.search(r"# ANTI-PATTERN (\w+)", text)
            if m:
                assert m.group(1) not in lines, f"{m.group(1)} planted twice"
                lines[m.group(1)] = no
    return lines


def test_every_named_anti_pattern_is_planted_once_on_its_own_line():
    naive = _load("train_naive")
    assert set(_planted_lines()) == set(naive.ANTI_PATTERNS) == set(EXPECTED)
    assert naive.WATCHED_ENVS == [0, 1, 2, 3]  # the literal list the list_gather line indexes with


def test_fix_names_parse_and_unknown_ones_are_a_usage_error(capsys):
    naive = _load("train_naive")
    assert naive.parse_args(["--fix", "item_log,env_loop"]).fix == {"item_log", "env_loop"}
    assert naive.parse_args(["--fix", "all"]).fix == set(naive.ANTI_PATTERNS)
    assert naive.parse_args([]).fix == set()
    with pytest.raises(SystemExit) as exc:
        naive.parse_args(["--fix", "item_log,bogus"])
    assert exc.value.code == 2 and "bogus" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        naive.parse_args(["--num-envs", "2"])  # fewer envs than the watched ones


def test_train_prints_a_metrics_line_per_iteration_and_a_final_sps(capsys):
    train = _load("train")
    history = train.main(["--num-envs", "8", "--iterations", "2", "--num-steps", "8", "--backend", "mujoco"])
    out = capsys.readouterr().out.splitlines()
    assert len(history) == 2 and {"reward_per_step", "episode_return", "sps"} <= set(history[0])
    assert sum(line.startswith("iter ") and "mean episode reward" in line for line in out) == 2
    assert re.fullmatch(r"SPS: \d+\.\d", out[-1]) and float(out[-1].split()[1]) > 0


@pytest.mark.parametrize("fix", ["", "all"])
def test_train_naive_runs_and_prints_sps(capsys, fix):
    naive = _load("train_naive")
    args = ["--num-envs", "4", "--iterations", "2", "--num-steps", "4", "--backend", "mujoco"] + (["--fix", fix] if fix else [])
    sps = naive.main(args)
    out = capsys.readouterr().out
    assert sps > 0 and out.rstrip().splitlines()[-1] == f"SPS: {sps:.1f}"
    assert ("watched envs' torso height: tensor(" in out) == (fix == "")


def test_train_naive_ab_alternates_the_fix_by_iteration_and_prints_each_arms_sps(capsys):
    """--ab-fix: iterations A B (warm-ups), then A B B A ...; the B iterations run the fix. The print
    after an iteration is timed in the next one, so it runs as that iteration's arm."""
    naive = _load("train_naive")
    args = ["--num-envs", "4", "--iterations", "6", "--num-steps", "2", "--backend", "mujoco", "--fix", "env_loop",
            "--ab-fix", "print_tensor", "--plant-scale", "2"]
    sps = naive.main(args)
    out = capsys.readouterr().out.rstrip().splitlines()
    assert re.fullmatch(r"SPS\[A\]: \d+\.\d", out[-2]) and re.fullmatch(r"SPS\[B\]: \d+\.\d", out[-1])
    assert sps == pytest.approx(float(out[-2].split()[1]), abs=0.05)
    arms = [naive.ab_arm(i) for i in range(7)]
    assert arms == ["A", "B", "A", "B", "B", "A", "A"]
    # the lines printed after iteration i: the planted print (both terms) when iteration i + 1 is arm A
    after = {}
    for line in out:
        if line.startswith("iter "):
            it = int(line.split()[1])
            after[it] = []
        elif line.startswith("  watched envs'"):
            after[it].append(line.split(":")[0].strip())
    assert after == {i: (["watched envs' torso height", "watched envs' term 1"] if arms[i + 1] == "A" else [])
                     for i in range(6)}
    with pytest.raises(SystemExit):
        naive.parse_args(["--ab-fix", "item_log", "--fix", "item_log"])  # B would equal A
    with pytest.raises(SystemExit):
        naive.parse_args(["--ab-fix", "item_log", "--iterations", "3"])  # no steady iteration for B


def test_lint_is_quiet_on_the_clean_code_and_finds_each_planted_line():
    def lint(*paths):
        r = subprocess.run([sys.executable, "-m", "perfkit", "lint", "--format", "json", *paths], cwd=ROOT, capture_output=True, text=True)
        return r.returncode, json.loads(r.stdout or "[]")

    rc, findings = lint("perfkit/envs", "perfkit/rl", "examples/train.py")
    assert rc == 0 and findings == []
    rc, findings = lint("examples/train_naive.py")
    assert rc == 1
    found = {(f["line"], f["category"]) for f in findings}
    for name, line in _planted_lines().items():
        assert (line, EXPECTED[name][1]) in found, f"lint missed {name} at line {line}"
    # nonzero_reset syncs twice, as the profiler counts it: .nonzero() and the scalar write through its ids
    second = (_planted_lines()["nonzero_reset"] + 1, "PK113")
    assert second in {(f["line"], f["rule"]) for f in findings}
    assert len(findings) == len(EXPECTED) + 1, "no findings beyond the planted ones"


@pytest.fixture(scope="module")
def naive_findings(tmp_path_factory):
    """``perfkit profile`` of train_naive.py (CPU, MuJoCo, 8 envs) with the given extra args, once each:
    its findings in the script."""
    cache: dict[tuple[str, ...], list[dict]] = {}

    def profile(*extra: str) -> list[dict]:
        if extra not in cache:
            record = tmp_path_factory.mktemp("naive") / "naive.json"
            r = subprocess.run(
                [sys.executable, "-m", "perfkit", "profile", "-o", str(record), "examples/train_naive.py",
                 "--num-envs", "8", "--iterations", "2", "--num-steps", "4", "--backend", "mujoco", *extra],
                cwd=ROOT, capture_output=True, text=True, timeout=240,
            )
            assert r.returncode == 0, r.stderr[-2000:]
            cache[extra] = [f for f in json.loads(record.read_text())["findings"]
                            if f["path"].endswith("examples/train_naive.py")]
        return cache[extra]

    return profile


def test_profile_finds_each_planted_anti_pattern_with_its_line(naive_findings):
    found = {(f["line"], f["kind"]) for f in naive_findings()}
    for name, line in _planted_lines().items():
        assert (line, EXPECTED[name][0]) in found, f"profile missed {name} at line {line}: {sorted(found)}"


def test_plant_scale_multiplies_what_perfkit_counts_and_the_fixes_stay_clean(naive_findings):
    """--plant-scale 3: three times the syncs and allocations a step at every planted site but the
    per-env loop's (CPU would-sync counting: counts, not timings); fixed at that scale, the script
    does the same device work with no sync or allocation of its own."""
    def per_step(findings):
        return {(f["line"], f["kind"], f["op"]): f["per_step"] for f in findings}

    plain, scaled = per_step(naive_findings()), per_step(naive_findings("--plant-scale", "3"))
    loop = _planted_lines()["env_loop"]
    planted = {k: v for k, v in plain.items() if k[0] != loop}
    assert {k[2] for k in planted} >= {".item()", ".nonzero()", "t[idx] = scalar", ".cpu()", "t[list]", "print(t)",
                                       "torch.zeros"}
    assert set(scaled) == set(plain)
    for key, n in planted.items():
        assert scaled[key] == pytest.approx(3 * n, rel=1e-4), key  # per_step is written to 6 decimals
    assert scaled[(loop, "loop", "for-loop over envs")] == pytest.approx(plain[(loop, "loop", "for-loop over envs")])
    assert naive_findings("--plant-scale", "3", "--fix", "all") == []


def test_train_passes_a_zero_sync_budget_under_perfkit_profile(tmp_path):
    """train.py is the sync-free example: no per-step sync, so --max-syncs-per-step 0 passes (exit 0)."""
    record = tmp_path / "train.json"
    r = subprocess.run(
        [sys.executable, "-m", "perfkit", "profile", "--max-syncs-per-step", "0", "-o", str(record),
         "examples/train.py", "--num-envs", "8", "--iterations", "3", "--num-steps", "4", "--backend", "mujoco"],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    run = json.loads(record.read_text())
    assert [f for f in run["findings"] if f["kind"] == "sync"] == []
    assert len(re.findall(r"^iter ", r.stdout, re.M)) == 3


@pytest.mark.gpu
def test_train_on_the_gpu_makes_no_per_step_sync(tmp_path):
    record = tmp_path / "train.json"
    r = subprocess.run(
        [sys.executable, "-m", "perfkit", "profile", "-o", str(record), "examples/train.py",
         "--num-envs", "1024", "--iterations", "3", "--backend", "mjwarp"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    run = json.loads(record.read_text())
    # the metrics are copied to pinned memory without waiting; the only wait is drain_metrics()
    # after the loop, which is teardown, not a per-step cost
    syncs = [f for f in run["findings"] if f["kind"] == "sync"]
    assert syncs == [], syncs
    teardown = run["outside_steps"]["teardown"]
    assert all(d["path"].endswith("perfkit/rl/ppo.py") for d in teardown), teardown

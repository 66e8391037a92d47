"""examples/custom_env.py (a user's own torch env) and the CI examples in examples/ci/."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys

import pytest
import torch
import yaml

import perfkit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CI = os.path.join(ROOT, "examples", "ci")


def _load_custom_env():
    spec = importlib.util.spec_from_file_location("example_custom_env", os.path.join(ROOT, "examples", "custom_env.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_custom_env_step_is_sync_and_allocation_free_and_resets_by_mask():
    ce = _load_custom_env()
    env = ce.PointReach(16, max_episode_steps=3)
    env.reset()
    goal0 = env.goal.clone()
    actions = torch.zeros(16, 2)
    with perfkit.budget(syncs=0, allocs=0):
        env.step(actions)
        env.step(actions)
    assert torch.equal(env.goal, goal0), "no world finished yet: goals untouched"
    _, _, done, _ = env.step(actions)
    assert done.all() and not torch.equal(env.goal, goal0) and (env.pos == 0).all()


def test_custom_env_controller_reaches_goals():
    ce = _load_custom_env()
    env = ce.PointReach(64)
    assert ce.run(env, 150) > -0.3  # a random walk stays near -0.75 (mean distance to the goal)


def test_custom_env_bad_num_envs():
    ce = _load_custom_env()
    with pytest.raises(ValueError, match="num_envs"):
        ce.PointReach(0)


def _perfkit_help(cmd: str) -> str:
    r = subprocess.run([sys.executable, "-m", "perfkit", cmd, "--help"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, f"perfkit {cmd} --help failed: {r.stderr}"
    return r.stdout


def _perfkit_calls(text: str):
    for line in text.splitlines():
        for m in re.finditer(r"(?:^\s*|&&\s*|\(\s*)perfkit ([a-z-]+)((?: [^|;&)>]*)?)", line):
            yield m.group(1), shlex.split(m.group(2).strip()) if m.group(2) else []


def test_ci_workflow_is_valid_yaml_and_uses_real_perfkit_options():
    with open(os.path.join(CI, "perfkit.yml")) as f:
        wf = yaml.safe_load(f)
    assert {"lint", "budget", "regression"} <= set(wf["jobs"])
    runs = "\n".join(step.get("run", "") for job in wf["jobs"].values() for step in job["steps"])
    calls = list(_perfkit_calls(runs))
    used = {cmd for cmd, _ in calls}
    assert {"lint", "profile", "compare"} <= used
    assert any(cmd == "compare" and "--fail-on-regression" in args for cmd, args in calls)
    helps = {cmd: _perfkit_help(cmd) for cmd in used}
    for cmd, args in calls:
        for a in args:
            if cmd == "profile" and a.endswith(".py"):
                break  # what follows is the profiled script's own arguments
            if a.startswith("--"):
                assert a.split("=")[0] in helps[cmd], f"perfkit {cmd} has no option {a}"


def test_pre_commit_example_runs_perfkit_lint():
    with open(os.path.join(CI, "pre-commit-config.yaml")) as f:
        cfg = yaml.safe_load(f)
    hooks = [h for repo in cfg["repos"] for h in repo["hooks"]]
    assert any(h["entry"] == "perfkit lint" and "python" in h["types_or"] for h in hooks)

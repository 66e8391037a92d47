"""``perfkit lint --profile run.json``: static findings ranked by what a profile measured at their lines, and
the runtime findings no static finding matches (issue 20, item 4)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from perfkit.cli.lint import lint
from perfkit.lint import lint_paths, measured
from perfkit.record import Finding, Run

ROOT = Path(__file__).resolve().parents[2]

SRC = textwrap.dedent('''\
    import torch

    class Env:
        def __init__(self, n):
            self.x = torch.zeros(n, device="cuda")
            self.done = torch.zeros(n, dtype=torch.bool, device="cuda")

        def step(self, a: torch.Tensor):
            v = self.x.sum().item()
            ids = self.done.nonzero().squeeze(-1)
            for i in range(self.num_envs):
                self.x[i].add_(1.0)
            return v

        def compute_stats(self, a: torch.Tensor):
            return self.x.mean().item()
''')


def _run(path, findings, steps=100):
    return Run(command=["python", str(path)], steps=steps, findings=findings)


def _sync(path, line, op, per_step, ms, **kw):
    return Finding(kind="sync", op=op, path=str(path), line=line, count=int(per_step * 100), per_step=per_step,
                   est_ms_per_step=ms, **kw)


@pytest.fixture
def env_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "env.py").write_text(SRC)
    return tmp_path / "env.py"


def test_static_findings_take_the_price_the_profile_measured_at_their_line(env_file):
    run = _run(env_file, [
        _sync(env_file, 9, ".item()", 1.0, 0.01),
        _sync(env_file, 10, ".nonzero()", 1.0, 0.02),
        Finding(kind="loop", op="for-loop over envs", path=str(env_file), line=11, count=1600, per_step=16.0,
                est_ms_per_step=0.19),
    ])
    result = lint_paths(["env.py"])
    joined = measured.join(result.violations, run, result.checked)
    got = [(r.violation.line, r.violation.rule, r.status, r.ms_per_step) for r in joined.ranked]
    assert got == [(11, "PK301", "priced", 0.19), (10, "PK106", "priced", 0.02), (9, "PK101", "priced", 0.01),
                   (16, "PK101", "not hot in this run", None)]
    assert joined.runtime_only == []


def test_runtime_findings_without_a_static_finding_are_runtime_only(env_file, tmp_path):
    lib = tmp_path / "lib.py"
    lib.write_text("x = 1\n")
    run = _run(env_file, [
        _sync(env_file, 9, ".item()", 1.0, 0.01),
        _sync(env_file, 13, "print(t)", 0.5, 0.03, would_sync_on_gpu=True),  # a line the linter is quiet on
        Finding(kind="alloc", op="torch.zeros", path=str(env_file), line=9, count=100, per_step=1.0,
                est_ms_per_step=0.004),  # same line, another kind than the static PK101
        _sync(lib, 1, ".cpu()", 2.0, 0.05),
    ])
    result = lint_paths(["env.py"])
    joined = measured.join(result.violations, run, result.checked)
    only = [(Path(r.finding.path).name, r.finding.line, r.finding.kind, r.linted) for r in joined.runtime_only]
    assert only == [("lib.py", 1, "sync", False), ("env.py", 13, "sync", True), ("env.py", 9, "alloc", True)]
    statuses = {(r.violation.line, r.status) for r in joined.ranked}
    assert (10, "not hot in this run") in statuses and (9, "priced") in statuses


def test_a_runtime_finding_naming_its_rule_matches_that_rule_only(env_file):
    run = _run(env_file, [_sync(env_file, 9, ".item()", 1.0, 0.01, )])
    run.findings[0].lint_rule = "PK105"  # another helper adds the field to the record; honoured when present
    result = lint_paths(["env.py"])
    joined = measured.join(result.violations, run, result.checked)
    assert [r.status for r in joined.ranked if r.violation.line == 9] == ["not hot in this run"]
    assert [r.finding.line for r in joined.runtime_only] == [9]


def test_a_file_the_profile_never_ran_is_not_run_and_paths_from_elsewhere_match_by_suffix(env_file):
    other = Path("/elsewhere/checkout/env.py")  # the record was made in another folder or machine
    run = _run(other, [_sync(other, 9, ".item()", 1.0, 0.01)])
    result = lint_paths(["env.py"])
    joined = measured.join(result.violations, run, result.checked)
    assert [(r.violation.line, r.status) for r in joined.ranked][0] == (9, "priced")
    run = _run(other, [_sync("/elsewhere/other.py", 3, ".item()", 1.0, 0.01)])
    assert {r.status for r in measured.join(result.violations, run, result.checked).ranked} == {"not run in this profile"}


def test_cli_text_and_json(env_file):
    run = _run(env_file, [_sync(env_file, 10, ".nonzero()", 1.0, 0.02), _sync(env_file, 13, "print(t)", 0.5, 0.03)])
    run.save(env_file.parent / "run.json")
    r = CliRunner().invoke(lint, ["env.py", "--profile", "run.json"])
    assert r.exit_code == 1
    lines = r.output.splitlines()
    assert lines[0].startswith("Ranked by the cost measured in run.json")
    assert "0.02" in lines[2] and "env.py:10:" in lines[2] and "PK106" in lines[2]
    assert any("env.py:13: runtime-only sync `print(t)`" in ln for ln in lines)
    doc = json.loads(CliRunner().invoke(lint, ["env.py", "--profile", "run.json", "--format", "json"]).stdout)
    assert doc["ranked"][0]["measured"] == {"status": "priced", "ms_per_step": 0.02, "per_step": 1.0, "count": 100,
                                            "ops": [".nonzero()"]}
    assert [(d["line"], d["in_linted_files"]) for d in doc["runtime_only"]] == [(13, True)]
    for bad, code in ((["env.py", "--profile", "missing.json"], 2), (["env.py", "--profile", "env.py"], 2),
                      (["env.py", "--profile", "run.json", "--format", "sarif"], 2)):
        r = CliRunner().invoke(lint, bad)
        assert r.exit_code == code and r.output.startswith(("Error", "Usage")), r.output


def test_the_naive_example_profiled_on_cpu_ranks_its_per_env_loop_first(tmp_path):
    """The acceptance: the real CPU profile of examples/train_naive.py (small args), joined with its lint."""
    record = tmp_path / "naive.json"
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-m", "perfkit", "profile", "-o", str(record), str(ROOT / "examples/train_naive.py"),
                    "--num-envs", "8", "--iterations", "3", "--num-steps", "8"], check=True, env=env, cwd=tmp_path,
                   capture_output=True, timeout=300)
    out = subprocess.run([sys.executable, "-m", "perfkit", "lint", "--profile", str(record), "--format", "json",
                          str(ROOT / "examples/train_naive.py")], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    doc = json.loads(out.stdout)
    first = doc["ranked"][0]
    assert (first["rule"], first["measured"]["status"]) == ("PK301", "priced")
    assert first["measured"]["per_step"] == 8.0
    assert all(d["measured"]["status"] == "priced" for d in doc["ranked"])  # every planted pattern ran and cost
    only = {(Path(d["path"]).name, d["kind"], d["op"]) for d in doc["runtime_only"]}
    assert ("networks.py", "alloc", "F.linear") in only  # the policy's activations: code the lint did not read
    assert all(not d["in_linted_files"] or d["kind"] != "sync" for d in doc["runtime_only"])  # no sync gap here

"""The acceptance gate on the project's own code: the sync-free code lints clean, and every planted
anti-pattern of examples/train_naive.py (each marked ``# ANTI-PATTERN <name>``) is found on its line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from perfkit.lint import lint_paths

ROOT = Path(__file__).resolve().parents[2]
CLEAN = ["perfkit/envs", "perfkit/rl", "examples/train.py"]


@pytest.mark.parametrize("rel", CLEAN)
def test_sync_free_project_code_lints_clean(rel):
    path = ROOT / rel
    if not path.exists():
        pytest.skip(f"{rel} not in this tree")
    result = lint_paths([str(path)])
    assert not result.errors, result.errors
    assert result.violations == [], "\n".join(f"{v.path}:{v.line} {v.rule} {v.message}" for v in result.violations)


def test_every_planted_anti_pattern_in_train_naive_is_found():
    path = ROOT / "examples" / "train_naive.py"
    if not path.exists():
        pytest.skip("examples/train_naive.py not in this tree")
    text = path.read_text()
    planted = {i for i, line in enumerate(text.splitlines(), 1) if re.search(r"#\s*ANTI-PATTERN\s+[a-z_]+", line)}
    assert planted, "no '# ANTI-PATTERN' markers found"
    result = lint_paths([str(path)])
    found = {v.line for v in result.violations}
    assert planted <= found, f"missed planted lines {sorted(planted - found)}"
    # the nonzero_reset pattern syncs twice, as the profiler counts it: at .nonzero() and at the scalar write
    # through its ids on the next line (`ep_return[finished] = 0.0`, PK113)
    lines = text.splitlines()
    nonzero = next(i for i in planted if "ANTI-PATTERN nonzero_reset" in lines[i - 1])
    assert "[finished] = 0.0" in lines[nonzero]
    second = {nonzero + 1}
    assert {(v.line, v.rule) for v in result.violations if v.line in second} == {(nonzero + 1, "PK113")}
    assert found <= planted | second, f"reported unplanted lines {sorted(found - planted - second)}"

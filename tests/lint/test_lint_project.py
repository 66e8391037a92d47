"""The acceptance gate on the project's own code: the sync-free code lints clean, and every planted
anti-pattern of examples/train_naive.py (each marked ``# ANTI-PATTERN <name>``) is found on its line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from perfkit.lint import lint_paths

ROOT = Path(__file__).resolve().parents[2]
CLEAN = ["perfkit/envs", "perfkit/rl", "examples/train.py"]
# Findings on unplanted lines of train_naive.py that are real syncs, by source text: each must still be reported
# while the line is there. `ep_return[finished] = 0.0` writes a Python scalar through an index tensor, which
# synchronizes on CUDA (measured on an H200, benchmarks/lint_real/sync_probe_h200.txt): PK113. Suggested fix in
# examples/train_naive.py: `ep_return.index_fill_(0, finished, 0.0)`, which keeps the planted nonzero sync only.
KNOWN_UNPLANTED = {"ep_return[finished] = 0.0": "PK113"}


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
    extra = {(v.source, v.rule) for v in result.violations if v.line not in planted}
    known = {(src, rule) for src, rule in KNOWN_UNPLANTED.items() if src in text}
    assert extra == known, f"unplanted findings {sorted(extra - known)}; known ones not reported {sorted(known - extra)}"

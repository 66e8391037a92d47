"""Nothing in the repository points outside it: a clone has no ../shared/ (issue 10, item 7)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREES = ["README.md", "docs", "perfkit", "examples", "scripts", "probes", "benchmarks", "tests", "pyproject.toml",
         ".pre-commit-hooks.yaml"]
OUTSIDE = re.compile(r"\.\./shared|shared/device|shared/DESIGN|DESIGN\.md")
THIS = Path(__file__).resolve().relative_to(ROOT).as_posix()


def files():
    for t in TREES:
        p = ROOT / t
        yield from ([p] if p.is_file() else (f for f in p.rglob("*") if f.is_file() and "__pycache__" not in f.parts))


def test_no_pointer_outside_the_repository():
    found = {}
    for f in files():
        rel = f.relative_to(ROOT).as_posix()
        if rel == THIS or f.suffix in (".png", ".pyc"):
            continue
        hits = [i for i, line in enumerate(f.read_text(errors="replace").splitlines(), 1) if OUTSIDE.search(line)]
        if hits:
            found[rel] = hits
    assert found == {}, found

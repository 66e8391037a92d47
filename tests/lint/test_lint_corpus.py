"""The realistic corpus: expected findings are ``# expect: PKxxx`` comments on their lines.

Reports recall and precision (``-s`` shows them); both must be perfect, and the clean env clean.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from perfkit.lint import Options, lint_paths
from .helpers import expected_in

CORPUS = Path(__file__).parent / "corpus"
FILES = sorted(CORPUS.glob("*.py"))


def _score():
    result = lint_paths([str(CORPUS)])
    assert not result.errors
    got = {(Path(v.path).name, v.line, v.rule) for v in result.violations}
    want = set()
    for f in FILES:
        want |= {(f.name, line, rule) for line, rule in expected_in(f.read_text())}
    return got, want


def test_corpus_has_the_required_kinds_of_code():
    names = {f.stem for f in FILES}
    assert {"naive_env", "rewards", "runner", "warp_env", "clean_env"} <= names
    _, want = _score()
    # every rule family is exercised
    assert {rule[:3] for _, _, rule in want} >= {"PK1", "PK2", "PK3", "PK4", "PK5"}
    assert len(want) >= 40


def test_recall_and_precision_on_the_corpus(capsys):
    got, want = _score()
    tp = got & want
    recall = len(tp) / len(want)
    precision = len(tp) / len(got) if got else 1.0
    with capsys.disabled():
        print(f"\nlint corpus: {len(want)} expected, {len(got)} found, recall {recall:.3f}, precision {precision:.3f}")
    missed = sorted(want - got)
    extra = sorted(got - want)
    assert not missed, f"missed: {missed}"
    assert not extra, f"false positives: {extra}"


@pytest.mark.parametrize("name", ["clean_env.py"])
def test_clean_env_lints_clean_even_with_all(name):
    result = lint_paths([str(CORPUS / name)])
    assert result.violations == [] and result.files == 1
    # --all widens to every function: only the deliberately cold ones (log_stats, run) speak up
    wide = lint_paths([str(CORPUS / name)], options=Options(all_functions=True))
    tree = ast.parse((CORPUS / name).read_text())
    cold = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name in ("log_stats", "run")]
    assert wide.violations
    for v in wide.violations:
        assert any(f.lineno <= v.line <= f.end_lineno for f in cold), v

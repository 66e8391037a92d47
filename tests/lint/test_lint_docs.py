"""Rule docs: docs/lint-rules.md and ``--explain`` come from the one registry, and the page is current."""

from __future__ import annotations

from pathlib import Path

from perfkit.lint import all_rules
from perfkit.lint.docs import explain_text, render_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "lint-rules.md"


def test_docs_page_is_generated_from_the_registry():
    assert DOC.read_text() == render_markdown(), (
        "docs/lint-rules.md is stale: run `python -m perfkit.lint.docs > docs/lint-rules.md`")


def test_every_rule_is_documented_with_why_fix_and_examples():
    page = DOC.read_text()
    ids = [r.id for r in all_rules()]
    assert len(ids) == len(set(ids)) >= 20
    for r in all_rules():
        assert f"### {r.id} `{r.name}`" in page
        assert r.rationale in page and r.fix in page
        assert r.bad and r.good
        text = explain_text(r)
        assert text.startswith(r.id) and r.rationale in text and r.fix in text
    families = {r.id[:3] for r in all_rules()}
    assert families == {"PK1", "PK2", "PK3", "PK4", "PK5"}

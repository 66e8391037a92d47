"""Rule docs: docs/lint-rules.md and ``--explain`` come from the one registry, and the page is current."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from perfkit.lint import all_rules, lint_source
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


# -- each rule's documented examples, run through the linter -------------------------------------

_MODULES = {"np", "torch", "wp", "math", "time", "self"}


def harness(snippet: str, hot: bool = True) -> str:
    """The snippet as the body of a hot ``step`` method (``measure``, a cold one, for the rules that apply
    everywhere): ``self.<attr>`` it reads are CUDA tensors made in
    ``__init__`` (``*_wp``: Warp arrays; mask-like names: bool tensors; ``num_envs``: an int), names it reads
    without binding are ``torch.Tensor`` parameters."""
    import ast
    import builtins

    tree = ast.parse(snippet)
    stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    loaded = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    free = sorted({n for n in loaded if n not in stored and n not in _MODULES and not hasattr(builtins, n)})
    called = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
              and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"}
    attrs = sorted({n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                    and n.value.id == "self" and n.attr not in called})
    init = []
    for a in attrs:
        if a.endswith("_wp"):
            init.append(f"self.{a} = wp.zeros(8, dtype=float)")
        elif a == "num_envs":
            init.append(f"self.{a} = 8")
        elif a in ("fallen", "done", "mask"):
            init.append(f"self.{a} = torch.zeros(8, dtype=torch.bool, device='cuda')")
        else:
            init.append(f"self.{a} = torch.zeros(8, device='cuda')")
    params = "".join(f", {n}: torch.Tensor" for n in free)
    body = textwrap.indent(snippet, " " * 8)
    return ("import math\nimport time\nimport numpy as np\nimport torch\nimport warp as wp\n\n\nclass Env:\n"
            "    def __init__(self):\n" + "".join(f"        {ln}\n" for ln in init or ["pass"]) +
            f"\n    def {'step' if hot else 'measure'}(self{params}):\n{body}\n")


@pytest.mark.parametrize("rule", [r.id for r in all_rules()])
def test_each_rules_bad_example_is_reported_by_it_and_its_good_example_is_quiet(rule):
    r = [x for x in all_rules() if x.id == rule][0]
    bad = [v.rule for v in lint_source(harness(r.bad, r.hot_only), "bad.py")]
    assert rule in bad, f"{rule}'s bad example is not reported by it:\n{harness(r.bad, r.hot_only)}\n{bad}"
    good = [(v.line, v.rule) for v in lint_source(harness(r.good, r.hot_only), "good.py")]
    assert good == [], f"{rule}'s good example is reported:\n{harness(r.good, r.hot_only)}\n{good}"

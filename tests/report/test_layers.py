"""Layers: renderers format what they are given; post-hoc analyses read records, never the machinery
that makes them (the profiler, the sweep runner, the CLI) or the renderers."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "perfkit"


def perfkit_imports(path: Path) -> set[str]:
    """Every perfkit module ``path`` imports, at the top or inside functions."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "perfkit"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "perfkit":
            # ``from perfkit.renderers import html`` imports perfkit.renderers.html
            out |= {f"{node.module}.{a.name}" if node.module in ("perfkit", "perfkit.renderers") else node.module
                    for a in node.names}
    return out


RENDERER_MAY_IMPORT = ("perfkit.record", "perfkit.outputs", "perfkit.formatting", "perfkit.__version__", "perfkit.renderers.")
RENDERERS = sorted((PKG / "renderers").glob("*.py"))


@pytest.mark.parametrize("path", RENDERERS, ids=lambda p: p.name)
def test_renderers_import_only_the_record_and_each_other(path):
    bad = {m for m in perfkit_imports(path) if not m.startswith(RENDERER_MAY_IMPORT)}
    assert not bad, f"{path.name} imports {bad}"


POST_HOC = ["analysis/report_model.py", "analysis/diff.py", "sweeps/knee.py", "analysis/stats.py", "analysis/ranks.py",
            "sweeps/record.py"]
MACHINERY = ("perfkit.sweeps.runner", "perfkit.sweeps.worker", "perfkit.profile.session", "perfkit.profile.runner", "perfkit.collectors",
             "perfkit.cli", "perfkit.renderers")


@pytest.mark.parametrize("name", POST_HOC)
def test_post_hoc_analyses_do_not_import_the_machinery(name):
    path = PKG / name
    if not path.exists():
        pytest.skip(f"{name} not in this tree")
    imported = perfkit_imports(path)
    bad = {m for m in imported if any(m == x or m.startswith(x + ".") for x in MACHINERY)}
    assert not bad, f"{name} imports {bad}"


def test_the_check_sees_imports():
    # a renderer that imported the sweep runner would be caught
    assert "perfkit.sweeps.record" in perfkit_imports(PKG / "analysis" / "report_model.py")
    assert "perfkit.renderers.plots" in perfkit_imports(PKG / "renderers" / "__init__.py")

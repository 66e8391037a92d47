"""The session's shape (issue 19): its attributes are all made in ``__init__`` (none appear later), there
are few of them, and it writes none of the step clock's own fields (the clock applies the scheduler's
decision itself)."""

from __future__ import annotations

import ast
from pathlib import Path

import perfkit.profile.session

SOURCE = Path(perfkit.profile.session.__file__).read_text()
MAX_ATTRIBUTES = 25


def _session_class() -> ast.ClassDef:
    return next(n for n in ast.parse(SOURCE).body if isinstance(n, ast.ClassDef) and n.name == "Session")


def _assigned(node: ast.AST, base: str = "self") -> set[str]:
    """Attributes ``base.X`` assigned (``=``, ``+=``, annotated) anywhere in ``node``."""
    names = set()
    for n in ast.walk(node):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == base:
                    names.add(sub.attr)
    return names


def test_every_session_attribute_is_made_in_init_and_there_are_few():
    methods = {f.name: f for f in _session_class().body if isinstance(f, ast.FunctionDef)}
    made = _assigned(methods["__init__"])
    later = {name: _assigned(f) - made for name, f in methods.items() if name != "__init__"}
    assert not any(later.values()), f"attributes first set outside __init__: {later}"
    assert len(made) <= MAX_ATTRIBUTES, sorted(made)


def test_the_session_writes_no_field_of_the_step_clock():
    written = set()
    for n in ast.walk(_session_class()):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Attribute) and t.value.attr == "clock"
                    and isinstance(t.value.value, ast.Name) and t.value.value.id == "self"):
                written.add(t.attr)
    assert written <= {"on_end"}, written  # on_end: the hook the segment clock is told step ends by, set and removed

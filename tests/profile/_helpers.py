"""Helpers for the profile tests: load the fixture scripts, find `# <- op` marked lines."""
from __future__ import annotations

import importlib.util
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "scripts")
_MARK = re.compile(r"#\s*<-\s*(.+?)\s*$")


def load(name: str):
    """Import tests/profile/scripts/<name>.py as a fresh module."""
    return load_file(os.path.join(SCRIPTS, name + ".py"), f"_pk_{name}")


def load_file(path, module_name: str):
    """Import the Python file at ``path`` as a fresh module named ``module_name`` (not put in sys.modules)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def marked_line(fn) -> tuple[int, str]:
    """(line, op) of the `# <- op` marker inside function ``fn``."""
    import inspect

    lines, start = inspect.getsourcelines(fn)
    for i, text in enumerate(lines):
        m = _MARK.search(text)
        if m:
            return start + i, m.group(1)
    raise AssertionError(f"{fn.__name__} has no `# <- op` marker")


def line_of(path: str, needle: str) -> int:
    with open(path) as f:
        for i, text in enumerate(f, 1):
            if needle in text:
                return i
    raise AssertionError(f"{needle!r} not in {path}")


def script(name: str) -> str:
    return os.path.join(SCRIPTS, name)


PY = sys.executable


class AddEnv:
    """A batched env of ``num_envs`` counters whose step is one in-place add: no sync, no allocation."""

    def __init__(self, num_envs: int = 8):
        import torch

        self.num_envs = num_envs
        self.x = torch.zeros(num_envs)

    def step(self, a):
        self.x.add_(a)
        return self.x

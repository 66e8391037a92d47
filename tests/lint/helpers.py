"""Shared helpers for the linter tests."""

from __future__ import annotations

import re
import textwrap

from perfkit.lint import Options, lint_paths, lint_source

# An env class whose `step` is a hot path; snippets are pasted into its body.
ENV_HEADER = '''\
import math
import time
import numpy as np
import torch
import warp as wp

class Env:
    def __init__(self, n):
        self.num_envs = n
        self.x = torch.zeros(n, 3, device="cuda")
        self.m = torch.zeros(n, dtype=torch.bool, device="cuda")
        self.count = torch.zeros(n, dtype=torch.long, device="cuda")
        self.idx = torch.tensor([0, 2], device="cuda")
        self.arr = wp.zeros(n, dtype=float)
        self.envs = [None] * n
        self.scale = 2.0
        self.decimation = 4

    def step(self, a: torch.Tensor):
'''


def in_step(snippet: str) -> str:
    return ENV_HEADER + textwrap.indent(textwrap.dedent(snippet).strip("\n"), " " * 8) + "\n"


def rules_of(src: str, **options) -> list:
    return [v.rule for v in lint_source(textwrap.dedent(src), "t.py", Options(**options))]


def findings(src: str, **options) -> list:
    return [(v.line, v.rule) for v in lint_source(textwrap.dedent(src), "t.py", Options(**options))]


_EXPECT = re.compile(r"#\s*expect:\s*((?:PK\d{3}[ ,]*)+)")


def expected_in(text: str) -> set:
    """{(line, rule)} from ``# expect: PK101 PK105`` comments."""
    out = set()
    for lineno, line in enumerate(text.splitlines(), 1):
        m = _EXPECT.search(line)
        if m:
            out.update((lineno, code) for code in re.findall(r"PK\d{3}", m.group(1)))
    return out


def lint_project(tmp_path, files: dict, **options) -> list:
    """The violations of a project written from ``files`` ({relative path: source}) under ``tmp_path``,
    sorted by (file name, line, rule, confidence)."""
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    result = lint_paths([str(tmp_path)], Options(**options))
    assert not result.errors, result.errors
    return sorted(result.violations, key=lambda v: (v.path.rsplit("/", 1)[-1], v.line, v.rule, v.confidence))

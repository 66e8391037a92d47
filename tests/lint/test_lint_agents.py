"""The error classes of the fourth blind sample (`benchmarks/lint_blind4/`: autonomous-learning-library, mushroom-rl,
machin): an RL library's algorithm classes whose per-update / per-action methods no loop of the library calls (the
user's script does), modules that get torch through `from .base import *`, and a library loop that steps its env
through a helper (`self._step()`). One small project each; every positive case fails on the linter before these
fixes (the `lint-reach2` branch point), and each has its negative twin."""

from __future__ import annotations

from tests.lint.test_lint_reach import findings

# -- `from .x import *` of a project module ------------------------------------------------------------------

_BASE = """
    import torch as t
    import torch.nn as nn

    class Base:
        def __init__(self, net: nn.Module):
            self.net = net
            self.optim = t.optim.Adam(net.parameters())
    """

_STAR = """
    from .base import *

    class Algo(Base):
        def update(self, batch):
            loss = self.net(batch).mean()
            self.optim.zero_grad()
            loss.backward()
            self.optim.step()
            if t.allclose(loss, t.zeros_like(loss)):
                pass
            return loss.item()
    """


def test_a_star_import_of_a_project_module_brings_its_torch_alias(tmp_path):
    # machin: `from .dqn import *` is how dqn_per / rainbow / ppo / td3 / trpo get `t` (torch) and `nn`
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/base.py": _BASE, "pkg/algo.py": _STAR})
    assert ("algo.py", 12, "PK101", "high") in got  # loss.item() in a learner's update
    assert ("algo.py", 10, "PK202", "high") in got  # t.zeros_like: t is torch


def test_a_star_import_honours_all_and_the_importers_own_names(tmp_path):
    base = _BASE + "\n    __all__ = ['Base']\n"
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/base.py": base, "pkg/algo.py": _STAR})
    assert not [f for f in got if f[0] == "algo.py"]  # `t` is not exported: not torch, the module uses no torch
    own = _STAR.replace("from .base import *", "from .base import *\n    import numpy as t")
    got = findings(tmp_path, {"pkg/__init__.py": "", "pkg/base.py": _BASE, "pkg/algo.py": own})
    assert not [f for f in got if f[0] == "algo.py" and f[2] == "PK202"]  # its own `t` is numpy

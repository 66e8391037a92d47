"""Shared by the overhead tests: paths, the runs' environment, the stand-in script (fake_train.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
FAKE = Path(__file__).resolve().parent / "fake_train.py"
PY = sys.executable


def load_script(path: Path, name: str, register: bool = False) -> ModuleType:
    """The Python file at ``path`` (a script of scripts/ or benchmarks/) imported as module ``name``;
    ``register``: put in ``sys.modules`` first (a script whose dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def child_env() -> dict[str, str]:
    """The runs' environment: this checkout first on PYTHONPATH (``-m perfkit`` in a child is this perfkit)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


class Fake:
    """``fake_train.py PLAN LOG``: a plan per arm, and the order the runs came in."""

    def __init__(self, tmp: Path, plan: dict):
        self.plan_path, self.log_path = tmp / "plan.json", tmp / "runs.log"
        self.plan_path.write_text(json.dumps(plan))
        self.args = [str(self.plan_path), str(self.log_path)]
        self.script = str(FAKE)

    def order(self) -> list[str]:
        return self.log_path.read_text().split() if self.log_path.exists() else []

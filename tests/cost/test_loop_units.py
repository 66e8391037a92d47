"""The loop price's units: the pyloop probe's iteration time is split by the count of the same kind
as the count it multiplies — torch calls as a session counts them, or ops as read from source.

On the H200 the mismatch (session-counted calls priced per source-read op) over-predicted the saving
of train_naive.py's env loop by 1.5-2.9x (reports/probes-h200/)."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import sys

from perfkit.pricing import cost
from perfkit.profile.session import Session

import perfkit.probes.pyloop as pyloop_probe

BODY = "out[i] = a[i] * 2.0 + b[i]"


def test_the_probe_body_is_the_one_the_constants_describe():
    src = inspect.getsource(pyloop_probe)
    assert BODY in src
    assert pyloop_probe.OPS_PER_ITERATION == cost.PYLOOP_OPS
    assert cost._body_ops([ast.parse(BODY)]) == cost.PYLOOP_OPS


def test_a_session_counts_the_probe_body_as_pyloop_calls_torch_calls(tmp_path):
    path = tmp_path / "pk_pyloop_units.py"
    path.write_text(f'''
import torch

class Env:
    num_envs = 16

    def __init__(self):
        self.a, self.b = torch.rand(16, 8), torch.rand(16, 8)
        self.out = torch.empty_like(self.a)

    def step(self, actions):
        a, b, out = self.a, self.b, self.out
        for i in range(self.num_envs):
            {BODY}
        return out


def main(steps):
    env = Env()
    for _ in range(steps):
        env.step(None)
''')
    spec = importlib.util.spec_from_file_location("pk_pyloop_units", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["pk_pyloop_units"] = mod
    try:
        spec.loader.exec_module(mod)
        with Session(warmup_steps=1, step_fn="pk_pyloop_units:Env.step") as s:
            mod.main(6)
    finally:
        del sys.modules["pk_pyloop_units"]
    assert list(s.run.extra["loop_ops"].values()) == [float(cost.PYLOOP_CALLS)]

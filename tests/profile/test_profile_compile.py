"""torch.compile inside a session: every perfkit wrapper steps aside while Dynamo traces (fullgraph works),
so the compiled program is the program's own."""
from __future__ import annotations

import pytest
import torch

from perfkit.profile.session import Session


class Env:
    num_envs = 8

    def __init__(self):
        self.x = torch.zeros(8, 4)

    def compute_reward(self):
        return self.x.sum(1)

    def step(self, a):
        self.x.add_(a)
        y = self.x[:, :2]
        self.x[:, 2:].copy_(torch.where(self.x[:, 2:] > 1, 0.0, self.x[:, 2:]))
        return y.to(torch.float64), self.compute_reward()


def test_fullgraph_compile_of_policy_and_step_inside_a_session():
    pol = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    env = Env()
    # compiled during warm-up, while the discovery window's global module hooks are still on
    cpol = torch.compile(pol, backend="eager", fullgraph=True)
    with Session(warmup_steps=4) as s:
        for i in range(10):
            with torch.no_grad():
                a = cpol(env.x) * 0.01
            env.step(a)
        cstep = torch.compile(env.step, backend="eager", fullgraph=True)
        cstep(a)
    assert s.run.total_steps >= 10


# ---- TorchScript: hooked torch functions must stay scriptable ------------------------------------------

def _hooked_ops(a: torch.Tensor) -> torch.Tensor:
    pos = torch.where(a > 0, a, -a)  # the three-argument where (hooked: its one-argument form syncs)
    idx = torch.nonzero(a > 0)
    u = torch.unique(a)
    uc = torch.unique_consecutive(a)
    ms = torch.masked_select(a, a > 0)
    aw = torch.argwhere(a)
    r = torch.repeat_interleave(a, 2)
    t = torch.tensor([1.0, 2.0])
    same = torch.equal(a, a) and torch.allclose(a, a)
    return pos.sum() + idx.sum() + u.sum() + uc.sum() + ms.sum() + aw.sum() + r.sum() + t.sum() + float(same)


class _ScriptedModule(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        (i,) = torch.where(x > 0)
        return x[i].sum() + torch.unique(x).sum()


class _ScriptEnv:
    num_envs = 8

    def __init__(self, fn):
        self.fn = fn
        self.x = torch.linspace(-1.0, 1.0, 8)

    def step(self, a):
        return self.fn(self.x + a)


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
def test_torchscript_functions_and_modules_calling_hooked_ops_compile_and_run_in_a_session():
    from torch.jit import _builtins

    table_before = len(_builtins._get_builtin_table())
    a = torch.full((8,), 0.25)
    plain_f, plain_m = torch.jit.script(_hooked_ops), torch.jit.script(_ScriptedModule())
    expected = (plain_f(torch.linspace(-1.0, 1.0, 8) + a).item(), plain_m(a).item())
    with Session(warmup_steps=1) as s:
        f = torch.jit.script(_hooked_ops)  # compiled while the hooks are in: they must look like the builtins
        m = torch.jit.script(_ScriptedModule())
        env = _ScriptEnv(f)
        got = []
        for _ in range(4):
            got.append((env.step(a), m(a)))
            float(got[-1][0])  # a Python-side sync around the scripted code is still seen
    assert all((x.item(), y.item()) == expected for x, y in got)
    assert s.run.steps == 3
    assert [f.op for f in s.run.findings_of("sync")] == ["float(t)"]
    # the registrations that made the hooks scriptable left with the hooks
    assert len(_builtins._get_builtin_table()) == table_before
    assert torch.jit.script(_hooked_ops)(torch.linspace(-1.0, 1.0, 8) + a).item() == expected[0]
    from perfkit.collectors.compiled import torchscript_names

    notes = " ".join(s.run.extra.get("notes", []))
    assert "TorchScript compiled in this process" in notes
    assert any(n.endswith("._hooked_ops") for n in torchscript_names())


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
def test_module_level_torchscript_helper_imported_inside_a_session(tmp_path):
    """The Isaac-Lab shape: a math module with @torch.jit.script helpers imported after perfkit's hooks."""
    import importlib.util

    (tmp_path / "pk_ts_math.py").write_text(
        "import torch\n\n"
        "@torch.jit.script\n"
        "def wrap_to_pi(a: torch.Tensor) -> torch.Tensor:\n"
        "    return torch.where(a > 3.14159, a - 6.28318, a)\n"
    )
    with Session(warmup_steps=0):
        spec = importlib.util.spec_from_file_location("pk_ts_math", tmp_path / "pk_ts_math.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        out = mod.wrap_to_pi(torch.tensor([4.0, 1.0]))
    assert torch.allclose(out, torch.tensor([4.0 - 6.28318, 1.0]))


def test_dynamo_learning_its_torch_functions_inside_a_session_still_knows_them_after_it():
    """Dynamo reads ``torch.where`` & co. once per process into its table of in-graph functions. Read while
    a session's hooks stood there, the table held the hooks (gone with the session), not the ops, and every
    later compile of ``torch.where`` failed ("marked as skipped") — a second session's, or the program's
    own after perfkit. The hooks point Dynamo to the op they stand for (``_torchdynamo_inline``)."""
    from torch._dynamo import trace_rules

    def f(x):
        return torch.where(x > 1, 0.0, x)

    x = torch.ones(4, 4) * 2
    trace_rules.get_torch_obj_rule_map.cache_clear()
    try:
        with Session(warmup_steps=1):
            trace_rules.get_torch_obj_rule_map()  # learnt while the hooks are in place
            assert torch.where.__perfkit_wrapped__ in trace_rules.get_torch_obj_rule_map()
        torch._dynamo.reset()
        assert torch.compile(f, backend="eager", fullgraph=True)(x).sum() == 0
        with Session(warmup_steps=1):  # a second session's hooks (new objects) compile too
            torch._dynamo.reset()
            assert torch.compile(f, backend="eager", fullgraph=True)(x).sum() == 0
    finally:
        trace_rules.get_torch_obj_rule_map.cache_clear()
        torch._dynamo.reset()

"""A policy behind a wrapper module keeps its policy segment: ``DistributedDataParallel`` (whose
``forward`` perfkit's comm collector wraps too) and ``torch.compile``'s ``OptimizedModule``."""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from perfkit.profile.session import Session

STEPS, WARMUP = 12, 3


class Env:
    num_envs = 8

    def __init__(self):
        self.x = torch.zeros(8, 4)

    def step(self, a):
        self.x.add_(a).clamp_(-1, 1)
        return self.x


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def _train(policy, learn: bool):
    env = Env()
    opt = torch.optim.SGD(policy.parameters(), lr=0.01) if learn else None
    with Session(warmup_steps=WARMUP) as s:
        for _ in range(STEPS):
            with torch.no_grad():
                a = policy(env.x) * 0.01
            x = env.step(a)
            if opt is not None:  # the same module with autograd on: learner/other, never policy
                loss = policy(x).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
    return s.run


def _assert_policy_kept(run, wrapper: str):
    assert run.status == "complete"
    assert any(c.endswith(wrapper) for c in run.extra["policy_classes"]), run.extra["policy_classes"]
    pol = run.segments.get("policy")
    assert pol is not None, f"no policy segment in steady state: {sorted(run.segments)}"
    # one no-grad call per step: each in the step before the env step it feeds, so the last step has none
    assert pol.calls_per_step == pytest.approx(1.0, abs=2.0 / run.steps)
    assert pol.cpu_ms_per_step > 0


@pytest.fixture
def gloo_world_of_one():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_a_ddp_wrapped_policy_stays_in_policy(gloo_world_of_one):
    ddp = DDP(_mlp())
    run = _train(ddp, learn=True)
    _assert_policy_kept(run, "DistributedDataParallel")
    assert run.segments["learner"].calls_per_step > 0
    # the comm collector still saw DDP's forwards with autograd on (its wrapper is under the policy's)
    assert run.dist is not None and run.dist["ddp"]["forwards_per_step"] > 0


def test_a_torch_compiled_policy_stays_in_policy():
    compiled = torch.compile(_mlp(), backend="eager")  # Dynamo as on a GPU, without a C++ toolchain
    run = _train(compiled, learn=False)
    _assert_policy_kept(run, "OptimizedModule")

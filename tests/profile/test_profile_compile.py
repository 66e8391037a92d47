"""torch.compile inside a session: every perfkit wrapper steps aside while Dynamo traces (fullgraph works),
so the compiled program is the program's own."""
from __future__ import annotations

import torch

from perfkit.session import Session


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
    assert s.run.extra["total_steps"] >= 10

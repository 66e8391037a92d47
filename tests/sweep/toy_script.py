"""A training-loop-shaped script for script-target sweeps: takes its env count from --n."""

import argparse

import torch
from sweep_toy_env import ToyEnv

p = argparse.ArgumentParser()
p.add_argument("--n", type=int, required=True)
p.add_argument("--iters", type=int, default=30)
a = p.parse_args()
env = ToyEnv(a.n)
env.reset()
actions = torch.zeros(a.n, env.act_dim)
for _ in range(a.iters):
    env.step(actions)
print(f"done {a.n}")

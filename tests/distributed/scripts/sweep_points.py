"""A sweep target both ways: ``sweep_points:make`` (an env factory) and ``python sweep_points.py --n N``
(a script stepping it)."""

import argparse

import torch


class PointEnv:
    act_dim = 2

    def __init__(self, num_envs):
        self.num_envs = num_envs
        self.device = torch.device("cpu")
        self.obs = torch.zeros(num_envs, 2)

    def reset(self):
        self.obs.zero_()
        return self.obs

    def step(self, actions):
        self.obs.add_(actions)
        return self.obs


def make(num_envs=4):
    return PointEnv(num_envs)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, required=True)
    a = p.parse_args()
    env = make(a.n)
    actions = torch.zeros(a.n, 2)
    for _ in range(12):
        env.step(actions)

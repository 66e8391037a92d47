"""A tiny batched env on CPU tensors with planted syncs, an allocation and a per-env loop."""
import sys

import torch


class ToyEnv:
    def __init__(self, num_envs=16, obs_dim=4):
        self.num_envs = num_envs
        self.obs_dim = obs_dim
        self.act_dim = 2
        self.obs = torch.zeros(num_envs, obs_dim)
        self.sim_dt = 0.01
        self.decimation = 2

    def compute_reward(self):
        return self.obs.sum(dim=1)

    def step(self, actions):
        self.obs.add_(0.1)
        r = self.compute_reward()
        done = self.obs[:, 0] > 1.0
        if done.any():                       # bool(t): one sync per step
            self.obs[done] = 0.0
        for i in range(self.num_envs):       # per-env loop
            self.obs[i, 1] = 0.5
        extra = torch.zeros(self.num_envs)   # one allocation per step
        return self.obs, r + extra, done, {}


def main(steps):
    env = ToyEnv()
    a = torch.zeros(env.num_envs, 2)
    total = 0.0
    for _ in range(steps):
        obs, r, done, _ = env.step(a)
        total += r.mean().item()             # .item(): one sync per step
    print("total", round(total, 3))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)

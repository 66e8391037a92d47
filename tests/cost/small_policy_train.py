"""A small CPU training loop whose policy segment is a few hundredths of a millisecond and whose env
step holds the per-step anti-patterns (element writes in a per-env loop, scalar reads, a print of a
tensor): priced with the H200 reference profile on a CPU-only machine, the old what-if claimed a ~49x
speed-up for a step like this one (issue 12). ``main(steps)`` runs it."""
import sys

import torch


class Policy(torch.nn.Module):
    def __init__(self, obs_dim=4, act_dim=2):
        super().__init__()
        self.net = torch.nn.Linear(obs_dim, act_dim)

    def forward(self, obs):
        return self.net(obs)


class SmallEnv:
    def __init__(self, num_envs=16, obs_dim=4):
        self.num_envs = num_envs
        self.obs = torch.zeros(num_envs, obs_dim)
        self.t = 0

    def step(self, actions):
        self.obs.add_(0.01)
        done = self.obs[:, 0] > 1.0
        if done.any():                        # bool(t): a sync on the GPU
            self.obs.masked_fill_(done.unsqueeze(1), 0.0)
        for i in range(self.num_envs):        # per-env loop of element writes
            self.obs[i, 1] = 0.5
        self.t += 1
        if self.t % 8 == 0:
            print("obs[0]:", self.obs[0, 0])  # print of a tensor: a sync and a repr
        return self.obs, self.obs[:, 2], done, {}


def main(steps=200):
    torch.manual_seed(0)
    env = SmallEnv()
    policy = Policy()
    total = 0.0
    for _ in range(steps):
        with torch.no_grad():
            actions = policy(env.obs)
        obs, reward, done, _ = env.step(actions)
        total += float(reward.mean().item())  # .item(): a sync on the GPU
    return total


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)

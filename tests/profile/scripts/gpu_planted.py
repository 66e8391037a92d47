"""A CUDA loop whose every sync is planted (the --verify check: zero unattributed runtime syncs)."""
import sys

import torch


class PlantedEnv:
    def __init__(self, num_envs=1024):
        self.num_envs = num_envs
        self.x = torch.rand(num_envs, 16, device="cuda")
        self.w = torch.rand(16, 16, device="cuda")

    def step(self, actions):
        self.x = torch.tanh(self.x @ self.w + actions)
        done = self.x[:, 0] > 0.9
        if done.any():  # <- bool(t)
            self.x.masked_fill_(done.unsqueeze(1), 0.0)
        live = self.x[self.x[:, 1] > 0.5]  # <- t[bool_mask]
        idx = torch.nonzero(done)  # <- .nonzero()
        s = self.x.sum().item()  # <- .item()
        host = self.x[:4].cpu()  # <- .cpu()
        torch.cuda.synchronize()  # <- torch.cuda.synchronize()
        return self.x, s + float(live.shape[0]) + idx.shape[0] + float(host[0, 0])


def main(steps=60):
    env = PlantedEnv()
    a = torch.zeros(env.num_envs, 16, device="cuda")
    for _ in range(steps):
        env.step(a)
    print("ok")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)

"""A GPU-bound, sync-free CUDA loop: CUDA-event segment times must add up to the wall time per step."""
import sys

import torch


class HeavyEnv:
    def __init__(self, num_envs=4096, width=2048):
        self.num_envs = num_envs
        self.state = torch.rand(num_envs, width, device="cuda")
        self.w = torch.rand(width, width, device="cuda") / width
        self.out = torch.empty_like(self.state)

    def simulate(self):
        for _ in range(4):
            torch.matmul(self.state, self.w, out=self.out)
            torch.tanh(self.out, out=self.state)

    def compute_reward(self):
        return self.state.mean(dim=1)

    def step(self, actions):
        self.simulate()
        return self.state, self.compute_reward()


def main(steps=120):
    env = HeavyEnv()
    pol = torch.nn.Sequential(torch.nn.Linear(2048, 1024), torch.nn.ELU(), torch.nn.Linear(1024, 2048)).cuda()
    obs = env.state
    for _ in range(steps):
        with torch.no_grad():
            a = pol(obs)
        obs, r = env.step(a)
    torch.cuda.synchronize()
    print("ok")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 120)

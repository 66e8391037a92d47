"""A sync-free CUDA loop whose learner runs every ``PERIOD``-th step only (as an update once a rollout):
its GPU time per step must be its device time per update over ``PERIOD``, however few timed steps hold one."""
import sys

import torch

import perfkit

PERIOD = 4


class PeriodicEnv:
    def __init__(self, num_envs=4096, width=2048):
        torch.manual_seed(0)
        self.num_envs = num_envs
        self.i = 0
        self.state = torch.rand(4096, width, device="cuda")
        self.w = torch.rand(width, width, device="cuda") / width
        self.out = torch.empty_like(self.state)

    def simulate(self):
        torch.matmul(self.state, self.w, out=self.out)
        torch.tanh(self.out, out=self.state)

    def learn(self):
        """What the learner segment of :meth:`step` runs (for the unprofiled reference)."""
        for _ in range(12):
            torch.matmul(self.state, self.w, out=self.out)
            torch.sigmoid(self.out, out=self.state)

    def step(self, actions):
        self.simulate()
        self.i += 1
        if self.i % PERIOD == 0:
            with perfkit.segment("learner"):  # inline: a method called here would be its own part of "other"
                for _ in range(12):
                    torch.matmul(self.state, self.w, out=self.out)
                    torch.sigmoid(self.out, out=self.state)
        return self.state


def main(steps=200):
    env = PeriodicEnv()
    for _ in range(steps):
        env.step(None)
    torch.cuda.synchronize()
    print("ok")


def learn_ms(reps=20):
    """One update's device time, unprofiled: events around ``reps`` of them (the host far ahead)."""
    loop = PeriodicEnv()
    loop.learn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        loop.learn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / reps


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)

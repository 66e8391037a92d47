"""Run with `perfkit profile -m pkmod_demo.run --steps N`."""
import argparse

import torch


class Env:
    num_envs = 8

    def __init__(self):
        self.x = torch.ones(8)

    def step(self):
        return self.x[self.x > 0]  # boolean-mask read: one sync per step


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=3)
    a = p.parse_args()
    env = Env()
    for _ in range(a.steps):
        env.step()
    print("module ran", a.steps, __name__)


if __name__ == "__main__":
    main()

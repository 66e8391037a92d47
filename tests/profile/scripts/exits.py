"""Ends the way argv[1] says, after a few env steps: ok | exit3 | raise | interrupt."""
import sys

import torch


class Env:
    def __init__(self):
        self.num_envs = 8
        self.x = torch.zeros(8)

    def step(self):
        self.x.add_(1)
        return self.x.sum().item()


def main():
    mode = sys.argv[1]
    print("argv", sys.argv[1:])
    print("to-stderr", file=sys.stderr)
    env = Env()
    for _ in range(4):
        env.step()
    if mode == "exit3":
        sys.exit(3)
    if mode == "raise":
        raise ValueError("planted failure")
    if mode == "interrupt":
        raise KeyboardInterrupt
    print("done", __name__)


if __name__ == "__main__":
    main()

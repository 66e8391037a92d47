"""An env without a num_envs attribute: steps are marked with --step-fn no_num_envs:Sim.step."""
import torch


class Sim:
    def __init__(self, n=32):
        self.x = torch.zeros(n)

    def step(self):
        self.x.add_(1)
        for i in range(32):  # a per-env loop: its length is the env count the session is told
            self.x[i] += 0


if __name__ == "__main__":
    from no_num_envs import Sim  # the class --step-fn patches (this file imported as a module, not __main__)

    sim = Sim()
    for _ in range(12):
        sim.step()

"""Per-env loops of several shapes, and loops that are not over envs."""
import torch

TERMS = ("alive", "progress", "energy")


def launch(args):
    """A helper that runs often (num_envs times a step here, as a library's kernel launch does), with a
    short loop over its arguments: its lines run ~num_envs times a step, but no one loop entry goes
    over the envs."""
    n = 0
    for a in args:  # <- not per env: 3 iterations per entry
        n += 1
    return n


class LoopEnv:
    def __init__(self, num_envs):
        self.num_envs = num_envs
        self.x = torch.zeros(num_envs)
        self.info = {f"episode/term_{i}": 0.0 for i in range(num_envs)}  # as many keys as envs, by chance
        self.layers = list(range(num_envs // 2 + 1))  # a fixed trip count above num_envs / 2, no fraction of it

    def step(self, a):
        for term in TERMS:  # <- not a per-env loop (3 reward terms)
            self.x.add_(0.0)
        vals = [float(i) for i in range(self.num_envs)]  # <- comprehension
        i = 0
        while i < self.num_envs:  # <- while
            i += 1
        for k in range(self.num_envs):  # <- outer
            for j in range(2):  # inner loop of the same per-env loop: one finding, at the outer line
                pass
        for _ in range(2):
            for _ in range(self.num_envs // 2):  # <- half-batch
                launch(TERMS)
        for key, value in self.info.items():  # <- not per env: a dict's keys
            pass
        for layer in self.layers:  # <- not per env: a fixed trip count
            pass
        return self.x, len(vals)

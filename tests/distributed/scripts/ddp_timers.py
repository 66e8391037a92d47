"""DDP with a slow rank (gloo, CPU), timing itself: every step is an env step (rank ``--slow-rank``
sleeps ``--slow-ms`` in it from step ``--slow-from`` on: its first steps, as a program's often are,
are not like the rest), a forward and a backward of a DistributedDataParallel model, and an
optimizer step. The fast ranks wait for the slow one inside the backward (DDP's bucket all-reduce).
Each rank writes its own timers to ``--timers PREFIX`` + ``.rankR.json``: the start of every env step
and the duration of every backward (perf_counter seconds)."""

import argparse
import json
import time

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=30)
p.add_argument("--slow-rank", type=int, default=1)
p.add_argument("--slow-ms", type=float, default=30.0)
p.add_argument("--slow-from", type=int, default=0, help="the first step (0-based) the slow rank is slow in")
p.add_argument("--timers", required=True)
a = p.parse_args()

torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(rank)


class ToyEnv:
    num_envs = 64

    def __init__(self, slow_s):
        self.slow_s = slow_s
        self.obs = torch.zeros(self.num_envs, 8)
        self.i = 0

    def step(self, actions):
        if self.slow_s and self.i >= a.slow_from:
            time.sleep(self.slow_s)
        self.i += 1
        self.obs.add_(actions.sum(-1, keepdim=True) * 0.01)
        return self.obs


env = ToyEnv(a.slow_ms / 1e3 if rank == a.slow_rank else 0.0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.Tanh(),
                                                                      torch.nn.Linear(64, 4)))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
starts, backwards = [], []
actions = torch.zeros(64, 4)
for i in range(a.steps):
    starts.append(time.perf_counter())
    obs = env.step(actions)
    loss = model(obs).pow(2).mean()
    opt.zero_grad()
    t0 = time.perf_counter()
    loss.backward()
    backwards.append(time.perf_counter() - t0)
    opt.step()
with open(f"{a.timers}.rank{rank}.json", "w") as f:
    json.dump({"starts": starts, "backwards": backwards}, f)
del model
dist.destroy_process_group()

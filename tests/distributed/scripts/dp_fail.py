"""A data-parallel loop (gloo, CPU) in which one rank fails: rank ``--fail-rank`` raises inside its
env step (the call perfkit wraps to mark steps) at step ``--fail-step``; the others are then blocked in the step's ``all_reduce`` until the failed rank's
process is gone (gloo's error) or the launcher terminates them (torchrun's SIGTERM). Without a
launcher (``--alone``) it is one process that raises and receives SIGTERM ``--term-after`` seconds
later, as a surviving rank does."""

import argparse
import os
import subprocess

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=16)
p.add_argument("--fail-rank", type=int, default=1)
p.add_argument("--fail-step", type=int, default=10)
p.add_argument("--alone", action="store_true")
p.add_argument("--term-after", type=float, default=0.0)
a = p.parse_args()

torch.set_num_threads(1)
if a.alone:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
else:
    dist.init_process_group("gloo")
rank = dist.get_rank()


class ToyEnv:
    num_envs = 16

    def __init__(self):
        self.obs = torch.zeros(self.num_envs, 4)
        self.i = 0

    def step(self, actions):
        check(self.i)
        self.i += 1
        self.obs.add_(actions)
        return self.obs


def check(i):
    if rank == a.fail_rank % dist.get_world_size() and i == a.fail_step:
        if a.term_after:  # SIGTERM on its way, as torchrun sends it to the ranks still running
            subprocess.Popen(["sh", "-c", f"sleep {a.term_after}; kill -TERM {os.getpid()}"])
        raise RuntimeError(f"planted failure on rank {rank} at step {i}")


env, t = ToyEnv(), torch.ones(4)
for i in range(a.steps):
    env.step(t)
    dist.all_reduce(t)
dist.destroy_process_group()

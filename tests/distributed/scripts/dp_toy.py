"""A small data-parallel loop for the distributed tests (gloo, CPU), launched by torchrun.

Each step: a policy forward under no_grad, the env step (one rank can be made slow with
``--slow-rank R --slow-ms MS``: it sleeps inside its env step), a synchronous ``all_reduce`` of the
step's reward sum and an ``async_op=True`` ``all_reduce`` waited on at once. Every ``--learn-every``
steps a learner update: with ``--ddp`` a DistributedDataParallel model's backward (its buckets
all-reduced by DDP's reducer), else an explicit ``all_reduce`` of the flattened gradients.
``--sync-in-comm`` reads the all-reduced reward on the host inside ``perfkit.segment("comm")``.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=30)
p.add_argument("--num-envs", type=int, default=32)
p.add_argument("--slow-rank", type=int, default=-1)
p.add_argument("--slow-ms", type=float, default=0.0)
p.add_argument("--learn-every", type=int, default=5)
p.add_argument("--ddp", action="store_true")
p.add_argument("--sync-in-comm", action="store_true")
p.add_argument("--destroy", action="store_true", help="destroy the process group at the end")
a = p.parse_args()

torch.set_num_threads(1)
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(rank)


class ToyEnv:
    def __init__(self, n, slow_s):
        self.num_envs = n
        self.slow_s = slow_s
        self.obs = torch.zeros(n, 8)
        self.reward = torch.zeros(n)

    def step(self, actions):
        if self.slow_s:
            time.sleep(self.slow_s)
        self.obs.add_(actions.sum(-1, keepdim=True) * 0.01)
        torch.tanh(self.obs.sum(-1), out=self.reward)
        return self.obs, self.reward


env = ToyEnv(a.num_envs, a.slow_ms / 1e3 if rank == a.slow_rank else 0.0)
policy = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
model = torch.nn.parallel.DistributedDataParallel(policy) if a.ddp else policy
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
params = list(policy.parameters())
flat = torch.zeros(sum(q.numel() for q in params))
stat = torch.zeros(2)
batch = torch.randn(256, 8)

obs = env.obs
for i in range(a.steps):
    with torch.no_grad():
        actions = policy(obs)
    obs, reward = env.step(actions)
    torch.sum(reward, 0, keepdim=True, out=stat[:1])
    dist.all_reduce(stat)
    work = dist.all_reduce(reward, async_op=True)
    work.wait()
    if a.sync_in_comm:
        import perfkit

        with perfkit.segment("comm"):
            dist.all_reduce(stat)
            total = stat[0].item()
    if (i + 1) % a.learn_every == 0:
        loss = model(batch).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        if not a.ddp:
            torch.cat([q.grad.view(-1) for q in params], out=flat)
            dist.all_reduce(flat)
            flat.div_(world)
            off = 0
            for q in params:
                q.grad.view(-1).copy_(flat[off:off + q.numel()])
                off += q.numel()
        opt.step()

dist.barrier()
print(f"rank {rank} done", flush=True)
if a.destroy:
    del model  # DDP's reducer holds the group: let it go first, so that the group ends here, not at exit
    import gc

    gc.collect()
    dist.destroy_process_group()

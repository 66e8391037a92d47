"""A small batched torch env for sweep tests: point masses on springs, stepped together.

Real batched work (every op is over the whole batch, preallocated buffers, in-place updates, boolean
mask resets) so SPS genuinely depends on ``num_envs``. At the env counts listed in ``oom_at`` the
constructor asks the allocator for a buffer no machine has (1 TiB per env), so that point fails with
the allocator's own out-of-memory error — the real code path a sweep has to survive.
"""

import torch


class ToyEnv:
    name = "toy"
    backend = "torch"

    def __init__(self, num_envs, obs_dim=12, act_dim=4, decimation=4, sim_dt=0.005, device="cpu",
                 oom_at=(), seed=0):
        self.num_envs = int(num_envs)
        self.obs_dim, self.act_dim = obs_dim, act_dim
        self.decimation, self.sim_dt = decimation, sim_dt
        self.policy_dt = sim_dt * decimation
        self.device = torch.device(device)
        self.episode_length = 100
        g = torch.Generator().manual_seed(seed)
        self.pos = torch.zeros(num_envs, act_dim, device=self.device)
        self.vel = torch.zeros(num_envs, act_dim, device=self.device)
        self.t = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self.obs = torch.zeros(num_envs, obs_dim, device=self.device)
        self.reward = torch.zeros(num_envs, device=self.device)
        self.done = torch.zeros(num_envs, dtype=torch.bool, device=self.device)
        self.k = (torch.rand(act_dim, generator=g) + 0.5).to(self.device)
        self.ballast = torch.empty(num_envs * 2**40, dtype=torch.uint8) if num_envs in tuple(oom_at) else None

    def reset(self):
        self.pos.zero_()
        self.vel.zero_()
        self.t.zero_()
        return self._observe()

    def _observe(self):
        a = self.act_dim
        self.obs[:, :a] = self.pos
        self.obs[:, a:2 * a] = self.vel
        self.obs[:, 2 * a:] = 0.0
        return self.obs

    def step(self, actions):
        for _ in range(self.decimation):
            self.vel.add_(self.sim_dt * (actions - self.k * self.pos))
            self.pos.add_(self.sim_dt * self.vel)
        self.t.add_(1)
        torch.sum(self.pos * self.pos, dim=1, out=self.reward)
        self.reward.neg_()
        torch.ge(self.t, self.episode_length, out=self.done)
        self.pos.masked_fill_(self.done.unsqueeze(1), 0.0)
        self.vel.masked_fill_(self.done.unsqueeze(1), 0.0)
        self.t.masked_fill_(self.done, 0)
        return self._observe(), self.reward, self.done, {}


def make_toy_env(num_envs, **kwargs):
    return ToyEnv(num_envs, **kwargs)

"""Rollout storage on the device, filled in place, and GAE computed in place."""

from __future__ import annotations

import torch


class RolloutStorage:
    """``num_steps x num_envs`` transitions, allocated once. Row ``t`` is written with ``copy_``
    (and ``out=``) during the rollout; :meth:`compute_returns` fills advantages and returns."""

    def __init__(self, num_steps: int, num_envs: int, obs_dim: int, act_dim: int, device):
        shape = (num_steps, num_envs)
        self.num_steps, self.num_envs = num_steps, num_envs
        self.obs = torch.zeros((*shape, obs_dim), device=device)
        self.actions = torch.zeros((*shape, act_dim), device=device)
        self.log_probs = torch.zeros(shape, device=device)
        self.values = torch.zeros(shape, device=device)
        self.rewards = torch.zeros(shape, device=device)
        self.not_dones = torch.zeros(shape, device=device)
        self.advantages = torch.zeros(shape, device=device)
        self.returns = torch.zeros(shape, device=device)
        self._next_adv = torch.zeros(num_envs, device=device)
        self._delta = torch.zeros(num_envs, device=device)

    def compute_returns(self, last_values: torch.Tensor, gamma: float, lam: float) -> None:
        """Generalized advantage estimation, backwards over time (a loop over steps, not envs)."""
        self._next_adv.zero_()
        for t in reversed(range(self.num_steps)):
            next_values = last_values if t == self.num_steps - 1 else self.values[t + 1]
            # delta = r + gamma * V(s') * not_done - V(s)
            torch.mul(next_values, self.not_dones[t], out=self._delta)
            self._delta.mul_(gamma).add_(self.rewards[t]).sub_(self.values[t])
            # A_t = delta + gamma * lam * not_done * A_{t+1}
            self._next_adv.mul_(self.not_dones[t]).mul_(gamma * lam).add_(self._delta)
            self.advantages[t].copy_(self._next_adv)
        torch.add(self.advantages, self.values, out=self.returns)

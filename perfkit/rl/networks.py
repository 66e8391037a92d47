"""Actor-critic MLPs and an on-device observation normalizer for the small PPO."""

from __future__ import annotations

import math

import torch
from torch import nn


def mlp(sizes: list[int], activation=nn.ELU, out_gain: float = 1.0) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        lin = nn.Linear(sizes[i], sizes[i + 1])
        last = i == len(sizes) - 2
        nn.init.orthogonal_(lin.weight, gain=out_gain if last else math.sqrt(2))
        nn.init.zeros_(lin.bias)
        layers.append(lin)
        if not last:
            layers.append(activation())
    return nn.Sequential(*layers)


class ActorCritic(nn.Module):
    """Gaussian policy with a state-independent log-std, and a separate value MLP."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...] = (64, 64), init_std: float = 0.6):
        super().__init__()
        self.actor = mlp([obs_dim, *hidden, act_dim], out_gain=0.01)
        self.critic = mlp([obs_dim, *hidden, 1], out_gain=1.0)
        self.log_std = nn.Parameter(torch.full((act_dim,), math.log(init_std)))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Action mean ``[B, act_dim]`` and value ``[B]``."""
        return self.actor(obs), self.critic(obs).squeeze(-1)

    def log_prob(self, mean: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        z = (actions - mean) * torch.exp(-self.log_std)
        return -0.5 * (z * z).sum(-1) - self.log_std.sum() - 0.5 * math.log(2 * math.pi) * actions.shape[-1]

    def entropy(self) -> torch.Tensor:
        return self.log_std.sum() + 0.5 * self.log_std.numel() * (1.0 + math.log(2 * math.pi))


class ObsNormalizer(nn.Module):
    """Running mean/variance of observations, kept on the device and updated from whole rollouts
    (Chan et al.'s parallel update: no host round trip, no per-step work)."""

    def __init__(self, dim: int, clip: float = 5.0, eps: float = 1e-4):
        super().__init__()
        self.clip = clip
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("var", torch.ones(dim))
        self.register_buffer("count", torch.tensor(eps))
        self.register_buffer("scale", torch.ones(dim))  # rsqrt(var + 1e-8), refreshed by update()

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return ((obs - self.mean) * self.scale).clamp_(-self.clip, self.clip)

    def normalize_into(self, obs: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """``forward`` written into a preallocated ``out`` (the rollout's per-step path)."""
        torch.sub(obs, self.mean, out=out)
        out.mul_(self.scale).clamp_(-self.clip, self.clip)
        return out

    @torch.no_grad()
    def update(self, batch: torch.Tensor) -> None:
        """Fold a batch ``[B, dim]`` into the running statistics (in place)."""
        b_var, b_mean = torch.var_mean(batch, dim=0, unbiased=False)
        b_count = batch.shape[0]
        total = self.count + b_count
        delta = b_mean - self.mean
        self.mean.add_(delta * (b_count / total))
        m2 = self.var * self.count + b_var * b_count + delta * delta * (self.count * b_count / total)
        self.var.copy_(m2 / total)
        self.count.copy_(total)
        torch.rsqrt(self.var + 1e-8, out=self.scale)

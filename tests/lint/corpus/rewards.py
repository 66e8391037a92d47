"""Reward functions, legged-gym style: a module of ``compute_*`` helpers plus a reward manager."""

from typing import Dict

import torch
from torch import Tensor


@torch.jit.script
def compute_height_reward(base_height: Tensor, target: float) -> Tensor:
    return torch.exp(-torch.square(base_height - target) / 0.01)


def compute_feet_air_time(air_time: Tensor, contact: Tensor, first_contact: Tensor) -> Tensor:
    rew = torch.sum((air_time - 0.5) * first_contact, dim=1)
    air_time.mul_(~contact)  # in place: not an allocation
    return rew


def compute_collision_penalty(contact_forces: Tensor, penalised: Tensor) -> Tensor:
    hit = torch.norm(contact_forces[:, penalised, :], dim=-1) > 0.1
    return torch.sum(hit.float(), dim=1)


def compute_termination_penalty(terminated: Tensor, timeouts: Tensor) -> Tensor:
    # three-argument where and masked_fill_: no sync
    pen = torch.where(terminated & ~timeouts, -1.0, 0.0)
    pen.masked_fill_(timeouts, 0.0)
    return pen


def compute_tracking_reward(cmd: Tensor, vel: Tensor, sigma: float) -> Tensor:
    err = torch.sum(torch.square(cmd[:, :2] - vel[:, :2]), dim=1)
    if err.max() > 100.0:  # expect: PK103
        err = err.clamp(max=100.0)
    return torch.exp(-err / sigma)


def compute_stand_still(dof_pos: Tensor, default: Tensor, cmd: Tensor) -> Tensor:
    moving = torch.norm(cmd[:, :2], dim=1) > 0.1
    still_ids = torch.where(~moving)  # expect: PK106
    rew = torch.zeros(dof_pos.shape[0], device=dof_pos.device)  # expect: PK201
    rew[still_ids] = torch.sum(torch.abs(dof_pos - default), dim=1)[still_ids]
    return rew


def compute_gait_phase(phase: Tensor, dt: float, out: Tensor) -> Tensor:
    torch.add(phase, dt, out=out)  # out=: no allocation
    torch.remainder(out, 1.0, out=out)
    return out


def compute_contact_stats(contact: Tensor):
    counts = torch.unique(contact.sum(dim=1))  # expect: PK106
    per_env = torch.repeat_interleave(counts, counts)  # expect: PK106
    return counts, per_env


def compute_energy(torques: Tensor, dof_vel: Tensor, clip: Tensor) -> Tensor:
    power = torch.sum(torch.abs(torques * dof_vel), dim=1)
    mean_power = power.mean()
    assert mean_power >= 0  # expect: PK103
    return power.clamp(max=clip)


class RewardManager:
    def __init__(self, num_envs: int, scales: Dict[str, float], device="cuda"):
        self.num_envs = num_envs
        self.scales = scales
        self.total = torch.zeros(num_envs, device=device)
        self.episode_sums = {k: torch.zeros(num_envs, device=device) for k in scales}
        self.log_every = 100

    def compute_rewards(self, terms: Dict[str, Tensor], step: int) -> Tensor:
        self.total.zero_()
        for name, scale in self.scales.items():  # a loop over reward terms, not envs
            rew = terms[name] * scale
            self.total += rew
            self.episode_sums[name] += rew
        if step % self.log_every == 0:
            print(f"step {step}: mean reward {self.total.mean()}")  # expect: PK105
        return self.total

    def reset(self, env_ids: Tensor):
        for k in self.episode_sums:  # a loop over terms
            self.episode_sums[k][env_ids] = 0.0  # expect: PK113
        ep = {k: v[env_ids].mean() for k, v in self.episode_sums.items()}
        summary = {k: v.tolist() for k, v in ep.items()}  # expect: PK102
        return summary

    def log_summary(self):
        # not hot: called from the logging code only
        return {k: v.mean().item() for k, v in self.episode_sums.items()}

"""Termination terms: functions of the env returning boolean ``[num_envs]`` tensors."""

from __future__ import annotations

import torch

from manager_env.managers import SceneEntityCfg


def time_out(env) -> torch.Tensor:
    """The episode reached its length limit (a truncation)."""
    return env.episode_length_buf >= env.max_episode_length


def root_height_below_minimum(env, minimum_height: float, asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> torch.Tensor:
    return env.scene[asset_cfg.name].data.root_pos_w[:, 2] < minimum_height


def bad_orientation(env, limit_angle: float, asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> torch.Tensor:
    """The base tilted more than ``limit_angle`` (radians) from upright."""
    gravity_z = env.scene[asset_cfg.name].data.projected_gravity_b[:, 2]
    return torch.acos((-gravity_z).clamp(-1.0, 1.0)).abs() > limit_angle


def state_diverged(env, max_joint_vel: float, asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> torch.Tensor:
    """The simulation blew up for this world: a non-finite state or a runaway velocity."""
    data = env.scene[asset_cfg.name].data
    finite = torch.isfinite(data.joint_vel).all(dim=1) & torch.isfinite(data.root_lin_vel_w).all(dim=1)
    return ~finite | (data.joint_vel.abs().amax(dim=1) > max_joint_vel)

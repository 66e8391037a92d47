"""Reward terms: functions of the env returning ``[num_envs]`` tensors, weighted and summed by the
:class:`~manager_env.managers.RewardManager` (positive weights reward, negative ones penalize).

``joint_deviation_l1`` is configured with a subset of the joints (the hips): its
``asset_cfg.joint_ids`` is a Python list, and indexing with it copies the list to the device on
every call — the host-device sync Isaac-Lab-style reward terms make."""

from __future__ import annotations

import torch

from manager_env import math_utils
from manager_env.managers import SceneEntityCfg


def track_lin_vel_xy_yaw_frame_exp(env, std: float, command_name: str,
                                   asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> torch.Tensor:
    """Tracking of the commanded xy velocity in the gravity-aligned (yaw) frame, ``exp(-error^2 / std^2)``."""
    data = env.scene[asset_cfg.name].data
    vel_yaw = math_utils.quat_apply_inverse(math_utils.yaw_quat(data.root_quat_w), data.root_lin_vel_w)
    error = torch.sum(torch.square(env.command_manager.get_command(command_name)[:, :2] - vel_yaw[:, :2]), dim=1)
    return torch.exp(-error / std**2)


def track_ang_vel_z_exp(env, std: float, command_name: str, asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> torch.Tensor:
    """Tracking of the commanded yaw rate, ``exp(-error^2 / std^2)``."""
    data = env.scene[asset_cfg.name].data
    error = torch.square(env.command_manager.get_command(command_name)[:, 2] - data.root_ang_vel_b[:, 2])
    return torch.exp(-error / std**2)


def lin_vel_z_l2(env, asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> torch.Tensor:
    """Vertical base velocity, squared."""
    return torch.square(env.scene[asset_cfg.name].data.root_lin_vel_b[:, 2])


def ang_vel_xy_l2(env, asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> torch.Tensor:
    """Roll and pitch rates, squared."""
    return torch.sum(torch.square(env.scene[asset_cfg.name].data.root_ang_vel_b[:, :2]), dim=1)


def flat_orientation_l2(env, asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> torch.Tensor:
    """Base tilt: the xy part of gravity in the base frame, squared."""
    return torch.sum(torch.square(env.scene[asset_cfg.name].data.projected_gravity_b[:, :2]), dim=1)


def base_height_l2(env, target_height: float, asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> torch.Tensor:
    """Squared distance of the base height from ``target_height``."""
    return torch.square(env.scene[asset_cfg.name].data.root_pos_w[:, 2] - target_height)


def joint_torques_l2(env, asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> torch.Tensor:
    """Applied joint torques, squared."""
    return torch.sum(torch.square(env.scene[asset_cfg.name].data.applied_torque[:, asset_cfg.joint_ids]), dim=1)


def joint_acc_l2(env, asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> torch.Tensor:
    """Joint accelerations, squared."""
    return torch.sum(torch.square(env.scene[asset_cfg.name].data.joint_acc[:, asset_cfg.joint_ids]), dim=1)


def joint_pos_limits(env, asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> torch.Tensor:
    """How far joints are past their soft position limits (L1)."""
    data = env.scene[asset_cfg.name].data
    pos = data.joint_pos[:, asset_cfg.joint_ids]
    limits = data.soft_joint_pos_limits[:, asset_cfg.joint_ids]
    below = -(pos - limits[..., 0]).clip(max=0.0)
    above = (pos - limits[..., 1]).clip(min=0.0)
    return torch.sum(below + above, dim=1)


def joint_deviation_l1(env, asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> torch.Tensor:
    """Deviation of the joints from their default positions (L1)."""
    data = env.scene[asset_cfg.name].data
    angle = data.joint_pos[:, asset_cfg.joint_ids] - data.default_joint_pos[:, asset_cfg.joint_ids]
    return torch.sum(torch.abs(angle), dim=1)


def action_rate_l2(env) -> torch.Tensor:
    """Change of the action since the last step, squared."""
    return torch.sum(torch.square(env.action_manager.action - env.action_manager.prev_action), dim=1)


def is_alive(env) -> torch.Tensor:
    """1 for envs that did not terminate this step."""
    return (~env.termination_manager.terminated).float()


def is_terminated(env) -> torch.Tensor:
    """1 for envs that terminated this step (time-outs excluded)."""
    return env.termination_manager.terminated.float()

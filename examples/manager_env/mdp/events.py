"""Event terms: functions of ``(env, env_ids, **params)`` that change the state of the given envs.

As in Isaac Lab's, the sampling ranges are given as dicts of floats and turned into a device tensor
each call (``torch.tensor(range_list, device=...)``): a small blocking host-to-device copy per call."""

from __future__ import annotations

import torch

from manager_env import math_utils
from manager_env.managers import SceneEntityCfg

_POSE_KEYS = ("x", "y", "z", "roll", "pitch", "yaw")


def _ranges(range_dict: dict[str, tuple[float, float]], device) -> torch.Tensor:
    range_list = [range_dict.get(key, (0.0, 0.0)) for key in _POSE_KEYS]
    return torch.tensor(range_list, device=device)


def reset_root_state_uniform(env, env_ids: torch.Tensor, pose_range: dict, velocity_range: dict,
                             asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> None:
    """Default root state plus a uniform offset of the pose (position, roll/pitch/yaw) and velocity."""
    asset = env.scene[asset_cfg.name]
    root_states = asset.data.default_root_state[env_ids].clone()
    ranges = _ranges(pose_range, asset.device)
    rand_samples = math_utils.sample_uniform(ranges[:, 0], ranges[:, 1], (len(env_ids), 6), asset.device)
    positions = root_states[:, 0:3] + env.scene.env_origins[env_ids] + rand_samples[:, 0:3]
    orientations_delta = math_utils.quat_from_euler_xyz(rand_samples[:, 3], rand_samples[:, 4], rand_samples[:, 5])
    orientations = math_utils.quat_unique(math_utils.quat_mul(root_states[:, 3:7], orientations_delta))
    ranges = _ranges(velocity_range, asset.device)
    rand_samples = math_utils.sample_uniform(ranges[:, 0], ranges[:, 1], (len(env_ids), 6), asset.device)
    velocities = root_states[:, 7:13] + rand_samples
    asset.write_root_pose_to_sim(torch.cat([positions, orientations], dim=-1), env_ids=env_ids)
    asset.write_root_velocity_to_sim(velocities, env_ids=env_ids)


def reset_joints_by_offset(env, env_ids: torch.Tensor, position_range: tuple[float, float],
                           velocity_range: tuple[float, float], asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> None:
    """Default joint state plus uniform offsets, positions clamped to the soft limits."""
    asset = env.scene[asset_cfg.name]
    joint_pos = asset.data.default_joint_pos[env_ids].clone()
    joint_vel = asset.data.default_joint_vel[env_ids].clone()
    joint_pos += math_utils.sample_uniform(*position_range, joint_pos.shape, joint_pos.device)
    joint_vel += math_utils.sample_uniform(*velocity_range, joint_vel.shape, joint_vel.device)
    limits = asset.data.soft_joint_pos_limits[env_ids]
    joint_pos = joint_pos.clamp_(limits[..., 0], limits[..., 1])
    asset.write_joint_state_to_sim(joint_pos, joint_vel, env_ids=env_ids)


def push_by_setting_velocity(env, env_ids: torch.Tensor, velocity_range: dict,
                             asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> None:
    """Push the base by adding a random velocity (the ``x, y, z, roll, pitch, yaw`` keys: linear and
    angular, world frame)."""
    asset = env.scene[asset_cfg.name]
    vel_w = asset.data.root_vel_w[env_ids]
    ranges = _ranges(velocity_range, asset.device)
    vel_w += math_utils.sample_uniform(ranges[:, 0], ranges[:, 1], vel_w.shape, asset.device)
    asset.write_root_velocity_to_sim(vel_w, env_ids=env_ids)

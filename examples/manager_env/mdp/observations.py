"""Observation terms: functions of the env returning ``[num_envs, dim]`` tensors (the manager clones,
corrupts, clips and scales them)."""

from __future__ import annotations

import torch

from manager_env.managers import SceneEntityCfg


def base_lin_vel(env, asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> torch.Tensor:
    """Root linear velocity in the base frame."""
    return env.scene[asset_cfg.name].data.root_lin_vel_b


def base_ang_vel(env, asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> torch.Tensor:
    """Root angular velocity in the base frame."""
    return env.scene[asset_cfg.name].data.root_ang_vel_b


def projected_gravity(env, asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> torch.Tensor:
    """Gravity's direction in the base frame (the base's tilt)."""
    return env.scene[asset_cfg.name].data.projected_gravity_b


def base_height(env, asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> torch.Tensor:
    """Root height above the ground plane."""
    return env.scene[asset_cfg.name].data.root_pos_w[:, 2:3]


def generated_commands(env, command_name: str) -> torch.Tensor:
    return env.command_manager.get_command(command_name)


def joint_pos_rel(env, asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> torch.Tensor:
    """Joint positions relative to the defaults."""
    data = env.scene[asset_cfg.name].data
    return data.joint_pos[:, asset_cfg.joint_ids] - data.default_joint_pos[:, asset_cfg.joint_ids]


def joint_vel_rel(env, asset_cfg: SceneEntityCfg = SceneEntityCfg("robot")) -> torch.Tensor:
    """Joint velocities relative to the defaults."""
    data = env.scene[asset_cfg.name].data
    return data.joint_vel[:, asset_cfg.joint_ids] - data.default_joint_vel[:, asset_cfg.joint_ids]


def last_action(env) -> torch.Tensor:
    return env.action_manager.action

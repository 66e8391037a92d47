"""The task: the reference ant tracking base-velocity commands on flat ground, configured term by
term (Isaac Lab's ``LocomotionVelocityEnvCfg`` layout, sized for this robot)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from manager_env import mdp
from manager_env.managers import (
    EventTermCfg,
    JointEffortActionCfg,
    ObservationGroupCfg,
    ObservationTermCfg as ObsTerm,
    RewardTermCfg as RewTerm,
    SceneEntityCfg,
    TerminationTermCfg as DoneTerm,
    UniformNoiseCfg as Unoise,
)
from manager_env.scene import SceneCfg


@dataclass
class ManagerBasedRLEnvCfg:
    scene: SceneCfg = field(default_factory=SceneCfg)
    episode_length_s: float = 20.0
    observations: dict[str, ObservationGroupCfg] = field(default_factory=dict)
    actions: dict[str, JointEffortActionCfg] = field(default_factory=dict)
    commands: dict = field(default_factory=dict)
    rewards: dict[str, RewTerm] = field(default_factory=dict)
    terminations: dict[str, DoneTerm] = field(default_factory=dict)
    events: dict[str, EventTermCfg] = field(default_factory=dict)


def _policy_terms(noise: bool) -> dict[str, ObsTerm]:
    n = (lambda lo, hi: Unoise(lo, hi)) if noise else (lambda lo, hi: None)
    return {
        "base_lin_vel": ObsTerm(func=mdp.base_lin_vel, noise=n(-0.1, 0.1)),
        "base_ang_vel": ObsTerm(func=mdp.base_ang_vel, noise=n(-0.2, 0.2)),
        "projected_gravity": ObsTerm(func=mdp.projected_gravity, noise=n(-0.05, 0.05)),
        "velocity_commands": ObsTerm(func=mdp.generated_commands, params={"command_name": "base_velocity"}),
        "joint_pos": ObsTerm(func=mdp.joint_pos_rel, noise=n(-0.01, 0.01)),
        "joint_vel": ObsTerm(func=mdp.joint_vel_rel, noise=n(-1.5, 1.5), scale=0.05),
        "actions": ObsTerm(func=mdp.last_action),
    }


def ant_velocity_env_cfg(num_envs: int = 64, backend: str = "auto", device: str | None = None, seed: int = 0) -> ManagerBasedRLEnvCfg:
    cfg = ManagerBasedRLEnvCfg(scene=SceneCfg(num_envs=num_envs, model="ant", backend=backend, device=device, seed=seed))
    critic_terms = _policy_terms(noise=False)
    critic_terms["base_height"] = ObsTerm(func=mdp.base_height)
    cfg.observations = {
        "policy": ObservationGroupCfg(terms=_policy_terms(noise=True), enable_corruption=True),
        "critic": ObservationGroupCfg(terms=critic_terms, enable_corruption=False),
    }
    cfg.actions = {"joint_effort": JointEffortActionCfg(asset_name="robot", joint_names=".*", scale=1.0, clip=(-1.0, 1.0))}
    cfg.commands = {
        "base_velocity": mdp.UniformVelocityCommandCfg(
            resampling_time_range=(10.0, 10.0), rel_standing_envs=0.02, rel_heading_envs=1.0, heading_command=True,
            heading_control_stiffness=0.5, lin_vel_x=(-0.5, 1.0), lin_vel_y=(-0.5, 0.5), ang_vel_z=(-1.0, 1.0),
            heading=(-math.pi, math.pi),
        )
    }
    cfg.rewards = {
        "track_lin_vel_xy_exp": RewTerm(func=mdp.track_lin_vel_xy_yaw_frame_exp, weight=1.0,
                                        params={"command_name": "base_velocity", "std": math.sqrt(0.25)}),
        "track_ang_vel_z_exp": RewTerm(func=mdp.track_ang_vel_z_exp, weight=0.5,
                                       params={"command_name": "base_velocity", "std": math.sqrt(0.25)}),
        "lin_vel_z_l2": RewTerm(func=mdp.lin_vel_z_l2, weight=-2.0),
        "ang_vel_xy_l2": RewTerm(func=mdp.ang_vel_xy_l2, weight=-0.05),
        "flat_orientation_l2": RewTerm(func=mdp.flat_orientation_l2, weight=-1.0),
        "base_height_l2": RewTerm(func=mdp.base_height_l2, weight=-1.0, params={"target_height": 0.5}),
        "dof_torques_l2": RewTerm(func=mdp.joint_torques_l2, weight=-1.0e-5),
        "dof_acc_l2": RewTerm(func=mdp.joint_acc_l2, weight=-2.5e-7),
        "dof_pos_limits": RewTerm(func=mdp.joint_pos_limits, weight=-1.0),
        "joint_deviation_hip": RewTerm(func=mdp.joint_deviation_l1, weight=-0.1,
                                       params={"asset_cfg": SceneEntityCfg("robot", joint_names=".*_hip")}),
        "action_rate_l2": RewTerm(func=mdp.action_rate_l2, weight=-0.01),
        "alive": RewTerm(func=mdp.is_alive, weight=0.5),
        "termination_penalty": RewTerm(func=mdp.is_terminated, weight=-2.0),
    }
    cfg.terminations = {
        "time_out": DoneTerm(func=mdp.time_out, time_out=True),
        "base_height": DoneTerm(func=mdp.root_height_below_minimum, params={"minimum_height": 0.26}),
        "bad_orientation": DoneTerm(func=mdp.bad_orientation, params={"limit_angle": 1.2}),
        "diverged": DoneTerm(func=mdp.state_diverged, params={"max_joint_vel": 100.0}),
    }
    cfg.events = {
        "reset_base": EventTermCfg(
            func=mdp.reset_root_state_uniform, mode="reset",
            params={"pose_range": {"x": (-0.5, 0.5), "y": (-0.5, 0.5), "yaw": (-math.pi, math.pi)},
                    "velocity_range": {"x": (-0.1, 0.1), "y": (-0.1, 0.1)}},
        ),
        "reset_robot_joints": EventTermCfg(
            func=mdp.reset_joints_by_offset, mode="reset",
            params={"position_range": (-0.1, 0.1), "velocity_range": (-0.1, 0.1)},
        ),
        "push_robot": EventTermCfg(
            func=mdp.push_by_setting_velocity, mode="interval", interval_range_s=(10.0, 15.0),
            params={"velocity_range": {"x": (-0.5, 0.5), "y": (-0.5, 0.5)}},
        ),
    }
    return cfg

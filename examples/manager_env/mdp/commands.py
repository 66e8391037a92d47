"""Command terms: the goals the policy is asked to track, resampled on a timer (Isaac Lab's
``UniformVelocityCommand``).

Each step, ``CommandTerm.compute`` finds the envs whose timer ran out (``nonzero``) and resamples
their command; ``UniformVelocityCommand._update_command`` then finds the envs that track a heading
and those that stand (``nonzero`` each) and writes their commands by index."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from manager_env import math_utils
from manager_env.managers import CommandTerm


class UniformVelocityCommand(CommandTerm):
    """See :class:`UniformVelocityCommandCfg`. ``command`` is ``[N, 3]``: ``(vx, vy, wz)`` in the base frame."""

    def __init__(self, cfg: UniformVelocityCommandCfg, env):
        super().__init__(cfg, env)
        self.robot = env.scene[cfg.asset_name]
        n, dev = env.num_envs, env.device
        self.vel_command_b = torch.zeros(n, 3, device=dev)
        self.heading_target = torch.zeros(n, device=dev)
        self.is_heading_env = torch.zeros(n, dtype=torch.bool, device=dev)
        self.is_standing_env = torch.zeros(n, dtype=torch.bool, device=dev)
        self.metrics = {"error_vel_xy": torch.zeros(n, device=dev), "error_vel_yaw": torch.zeros(n, device=dev)}

    @property
    def command(self) -> torch.Tensor:
        return self.vel_command_b

    def _resample_command(self, env_ids: torch.Tensor) -> None:
        r = torch.empty(len(env_ids), device=self.device)
        self.vel_command_b[env_ids, 0] = r.uniform_(*self.cfg.lin_vel_x)
        self.vel_command_b[env_ids, 1] = r.uniform_(*self.cfg.lin_vel_y)
        self.vel_command_b[env_ids, 2] = r.uniform_(*self.cfg.ang_vel_z)
        if self.cfg.heading_command:
            self.heading_target[env_ids] = r.uniform_(*self.cfg.heading)
            self.is_heading_env[env_ids] = r.uniform_(0.0, 1.0) <= self.cfg.rel_heading_envs
        self.is_standing_env[env_ids] = r.uniform_(0.0, 1.0) <= self.cfg.rel_standing_envs

    def _update_command(self) -> None:
        if self.cfg.heading_command:
            env_ids = self.is_heading_env.nonzero(as_tuple=False).flatten()
            heading_error = math_utils.wrap_to_pi(self.heading_target[env_ids] - self.robot.data.heading_w[env_ids])
            self.vel_command_b[env_ids, 2] = torch.clip(
                self.cfg.heading_control_stiffness * heading_error, min=self.cfg.ang_vel_z[0], max=self.cfg.ang_vel_z[1]
            )
        standing_env_ids = self.is_standing_env.nonzero(as_tuple=False).flatten()
        self.vel_command_b[standing_env_ids, :] = 0.0

    def _update_metrics(self) -> None:
        max_command_step = self.cfg.resampling_time_range[1] / self._env.step_dt
        data = self.robot.data
        self.metrics["error_vel_xy"] += (
            torch.norm(self.vel_command_b[:, :2] - data.root_lin_vel_b[:, :2], dim=-1) / max_command_step
        )
        self.metrics["error_vel_yaw"] += torch.abs(self.vel_command_b[:, 2] - data.root_ang_vel_b[:, 2]) / max_command_step


@dataclass
class UniformVelocityCommandCfg:
    """Base velocity commands ``(vx, vy, wz)`` in the body frame, resampled every
    ``resampling_time_range`` seconds; a share of envs track a heading instead of a yaw rate, and a
    share stand still."""

    class_type: type = UniformVelocityCommand
    asset_name: str = "robot"
    resampling_time_range: tuple[float, float] = (10.0, 10.0)
    rel_standing_envs: float = 0.02
    rel_heading_envs: float = 1.0
    heading_command: bool = True
    heading_control_stiffness: float = 0.5
    lin_vel_x: tuple[float, float] = (-1.0, 1.0)
    lin_vel_y: tuple[float, float] = (-0.5, 0.5)
    ang_vel_z: tuple[float, float] = (-1.0, 1.0)
    heading: tuple[float, float] = (-3.14159, 3.14159)

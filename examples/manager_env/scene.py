"""The scene: the robot as an articulation over the simulator's state, in the shape of Isaac Lab's
``Articulation`` / ``ArticulationData`` / ``InteractiveScene``.

``Articulation.update(dt)`` copies the simulator's state into the data buffers after each physics
step and derives the body-frame quantities the MDP terms read (body-frame velocities, projected
gravity, heading, joint accelerations); the ``write_*_to_sim`` methods write reset states back for
the given env ids, into the simulator and the data buffers alike.

The robot is the reference ant (a free root and 8 hinge joints driven by motors with ``ctrlrange``
[-1, 1] and gear 60); its root state is ``[pos(3), quat_wxyz(4), lin_vel_w(3), ang_vel_w(3)]``.
MuJoCo keeps a free joint's angular velocity in the body frame: the writes rotate it there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from manager_env import math_utils
from manager_env.physics import make_physics

_ROOT_Q, _ROOT_V = 7, 6  # free joint: qpos [pos, quat], qvel [lin_vel_w, ang_vel_b]


@dataclass
class SceneCfg:
    num_envs: int = 64
    model: str = "ant"
    backend: str = "auto"  # "mjwarp" (MuJoCo Warp), "mujoco" (MuJoCo C) or "auto"
    device: str | None = None
    seed: int = 0


class ArticulationData:
    """Per-env buffers of the articulation, refreshed by :meth:`Articulation.update`."""

    def __init__(self, num_envs: int, num_joints: int, device: torch.device):
        n, j, dev = num_envs, num_joints, device
        z = lambda *shape: torch.zeros(*shape, device=dev)  # noqa: E731
        self.root_pos_w = z(n, 3)
        self.root_quat_w = z(n, 4)
        self.root_lin_vel_w = z(n, 3)
        self.root_ang_vel_w = z(n, 3)
        self.root_lin_vel_b = z(n, 3)
        self.root_ang_vel_b = z(n, 3)
        self.projected_gravity_b = z(n, 3)
        self.heading_w = z(n)
        self.joint_pos = z(n, j)
        self.joint_vel = z(n, j)
        self.joint_acc = z(n, j)
        self.applied_torque = z(n, j)
        self.joint_effort_target = z(n, j)
        self.default_root_state = z(n, 13)
        self.default_joint_pos = z(n, j)
        self.default_joint_vel = z(n, j)
        self.soft_joint_pos_limits = z(n, j, 2)
        self.GRAVITY_VEC_W = torch.tensor([0.0, 0.0, -1.0], device=dev).repeat(n, 1)
        self.FORWARD_VEC_B = torch.tensor([1.0, 0.0, 0.0], device=dev).repeat(n, 1)

    @property
    def root_vel_w(self) -> torch.Tensor:
        return torch.cat((self.root_lin_vel_w, self.root_ang_vel_w), dim=-1)


class Articulation:
    """The robot: joints, actuators and root over the simulator's ``qpos``/``qvel``/``ctrl``."""

    def __init__(self, physics, soft_joint_pos_limit_factor: float = 0.9):
        from perfkit.envs.models import load_mjmodel

        self.physics = physics
        self.num_envs = physics.num_envs
        self.device = physics.device
        mjm = load_mjmodel(physics.name)
        hinges = [i for i in range(mjm.njnt) if int(mjm.jnt_type[i]) == 3]
        self.joint_names = [mjm.joint(i).name for i in hinges]
        self.num_joints = len(self.joint_names)
        self.data = ArticulationData(self.num_envs, self.num_joints, self.device)
        d = self.data
        qpos0 = torch.as_tensor(mjm.qpos0, dtype=torch.float32, device=self.device)
        d.default_root_state[:, 0:7] = qpos0[0:7]
        d.default_joint_pos[:] = qpos0[_ROOT_Q:]
        limits = torch.as_tensor(mjm.jnt_range[hinges], dtype=torch.float32, device=self.device)
        mid, half = limits.mean(dim=1), (limits[:, 1] - limits[:, 0]) / 2 * soft_joint_pos_limit_factor
        d.soft_joint_pos_limits[:, :, 0] = mid - half
        d.soft_joint_pos_limits[:, :, 1] = mid + half
        # motor i drives hinge i (ant.xml lists actuators in joint order); ctrl in [-1, 1] times the gear is the torque
        self.gear = torch.as_tensor(mjm.actuator_gear[:, 0], dtype=torch.float32, device=self.device)
        self.effort_limit = 1.0
        self._qdtype = physics.qpos.dtype

    def find_joints(self, name_keys: str | list[str]) -> tuple[list[int], list[str]]:
        """Indices and names of the joints matching any of the regular expressions ``name_keys``."""
        keys = [name_keys] if isinstance(name_keys, str) else list(name_keys)
        ids = [i for i, name in enumerate(self.joint_names) if any(re.fullmatch(k, name) for k in keys)]
        if not ids:
            raise ValueError(f"no joint matches {keys}; joints: {self.joint_names}")
        return ids, [self.joint_names[i] for i in ids]

    # ------------------------------------------------------------------ sim -> data
    def update(self, dt: float) -> None:
        d, qpos, qvel = self.data, self.physics.qpos, self.physics.qvel
        d.root_pos_w.copy_(qpos[:, 0:3])
        d.root_quat_w.copy_(qpos[:, 3:7])
        d.joint_pos.copy_(qpos[:, _ROOT_Q:])
        d.root_lin_vel_w.copy_(qvel[:, 0:3])
        d.root_ang_vel_b.copy_(qvel[:, 3:6])
        if dt > 0.0:
            torch.sub(qvel[:, _ROOT_V:].to(torch.float32), d.joint_vel, out=d.joint_acc)
            d.joint_acc.div_(dt)
        d.joint_vel.copy_(qvel[:, _ROOT_V:])
        d.root_lin_vel_b[:] = math_utils.quat_apply_inverse(d.root_quat_w, d.root_lin_vel_w)
        d.root_ang_vel_w[:] = math_utils.quat_apply(d.root_quat_w, d.root_ang_vel_b)
        d.projected_gravity_b[:] = math_utils.quat_apply_inverse(d.root_quat_w, d.GRAVITY_VEC_W)
        d.heading_w[:] = math_utils.heading_from_quat(d.root_quat_w, d.FORWARD_VEC_B)

    # ------------------------------------------------------------------ actions -> sim
    def set_joint_effort_target(self, target: torch.Tensor, joint_ids=slice(None)) -> None:
        self.data.joint_effort_target[:, joint_ids] = target

    def write_data_to_sim(self) -> None:
        ctrl = self.physics.ctrl
        torch.clamp(self.data.joint_effort_target, -self.effort_limit, self.effort_limit, out=ctrl)
        torch.mul(ctrl, self.gear, out=self.data.applied_torque)

    # ------------------------------------------------------------------ resets -> sim
    def write_root_pose_to_sim(self, root_pose: torch.Tensor, env_ids: torch.Tensor) -> None:
        self.physics.qpos[env_ids, 0:7] = root_pose.to(self._qdtype)
        self.data.root_pos_w[env_ids] = root_pose[:, 0:3]
        self.data.root_quat_w[env_ids] = root_pose[:, 3:7]

    def write_root_velocity_to_sim(self, root_velocity: torch.Tensor, env_ids: torch.Tensor) -> None:
        quat = self.physics.qpos[env_ids, 3:7].to(torch.float32)
        ang_vel_b = math_utils.quat_apply_inverse(quat, root_velocity[:, 3:6])
        self.physics.qvel[env_ids, 0:3] = root_velocity[:, 0:3].to(self._qdtype)
        self.physics.qvel[env_ids, 3:6] = ang_vel_b.to(self._qdtype)
        self.data.root_lin_vel_w[env_ids] = root_velocity[:, 0:3]
        self.data.root_ang_vel_b[env_ids] = ang_vel_b

    def write_joint_state_to_sim(self, position: torch.Tensor, velocity: torch.Tensor, env_ids: torch.Tensor) -> None:
        self.physics.qpos[env_ids, _ROOT_Q:] = position.to(self._qdtype)
        self.physics.qvel[env_ids, _ROOT_V:] = velocity.to(self._qdtype)
        self.data.joint_pos[env_ids] = position
        self.data.joint_vel[env_ids] = velocity
        self.data.joint_acc[env_ids] = 0.0

    def reset(self, env_ids: torch.Tensor) -> None:
        self.data.joint_effort_target[env_ids] = 0.0
        self.physics.reset_solver(env_ids)


class InteractiveScene:
    """The simulator and what lives in it (here one articulation, ``scene["robot"]``)."""

    def __init__(self, cfg: SceneCfg):
        self.cfg = cfg
        self.physics = make_physics(cfg.model, cfg.num_envs, backend=cfg.backend, device=cfg.device, seed=cfg.seed)
        self.num_envs = cfg.num_envs
        self.device = self.physics.device
        self.physics_dt = self.physics.sim_dt
        self.decimation = self.physics.decimation
        self.robot = Articulation(self.physics)
        self.articulations = {"robot": self.robot}
        # each world is its own MuJoCo model instance: every env's origin is the world origin
        self.env_origins = torch.zeros(self.num_envs, 3, device=self.device)

    def __getitem__(self, name: str) -> Articulation:
        return self.articulations[name]

    def write_data_to_sim(self) -> None:
        for asset in self.articulations.values():
            asset.write_data_to_sim()

    def simulate(self) -> None:
        """``decimation`` physics substeps with the control written last (one CUDA graph on GPU)."""
        self.physics.simulate()

    def update(self, dt: float) -> None:
        for asset in self.articulations.values():
            asset.update(dt)

    def reset(self, env_ids: torch.Tensor) -> None:
        for asset in self.articulations.values():
            asset.reset(env_ids)

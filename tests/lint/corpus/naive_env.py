"""An Isaac-Lab-style locomotion env written the naive way: every classic anti-pattern, planted.

Lines marked ``# expect: PKxxx`` are what a sync-point linter must report; nothing else may be.
"""

import math

import numpy as np
import torch


class NaiveLocomotionEnv:
    def __init__(self, num_envs: int, device: str = "cuda", decimation: int = 4):
        self.num_envs = num_envs
        self.device = device
        self.decimation = decimation
        self.obs_dim, self.act_dim = 48, 12
        # allocation in __init__ is the point: none of these is reported
        self.obs_buf = torch.zeros(num_envs, self.obs_dim, device=device)
        self.rew_buf = torch.zeros(num_envs, device=device)
        self.reset_buf = torch.ones(num_envs, dtype=torch.long, device=device)
        self.episode_length = torch.zeros(num_envs, dtype=torch.long, device=device)
        self.root_pos = torch.zeros(num_envs, 3, device=device)
        self.root_vel = torch.zeros(num_envs, 3, device=device)
        self.dof_pos = torch.zeros(num_envs, self.act_dim, device=device)
        self.dof_vel = torch.zeros(num_envs, self.act_dim, device=device)
        self.default_dof_pos = torch.zeros(self.act_dim, device=device)
        self.actions = torch.zeros(num_envs, self.act_dim, device=device)
        self.last_actions = self.actions.clone()
        self.max_episode_length = 1000
        self.action_scale = 0.25
        self.total_steps = 0
        self.feet_idx = torch.tensor([3, 6, 9, 12], device=device)
        self.envs = [object() for _ in range(num_envs)]
        self.reward_scales = {"lin_vel": 1.0, "torque": -1e-4}
        self.extras = {}

    def step(self, actions):
        self.last_actions = self.actions.clone()  # expect: PK202
        self.actions = actions.clone()  # expect: PK202
        for _ in range(self.decimation):  # substeps: not a loop over envs
            self._physics_substep()
        self.total_steps += 1
        self.episode_length = self.episode_length + 1  # expect: PK203
        self.compute_reward()
        self.check_termination()
        env_ids = self.reset_buf.nonzero(as_tuple=False).flatten()  # expect: PK106
        if len(env_ids) > 0:
            self.reset_idx(env_ids)
        self.compute_observations()
        self.extras["mean_rew"] = self.rew_buf.mean().item()  # expect: PK101
        return self.obs_buf, self.rew_buf, self.reset_buf, self.extras

    def _physics_substep(self):
        torques = self.action_scale * self.actions
        self.dof_vel += torques * 0.005
        self.dof_pos += self.dof_vel * 0.005
        self.root_pos[:, 2].clamp_(min=0.0)

    def compute_reward(self):
        self.rew_buf[:] = 0.0
        for name, scale in self.reward_scales.items():  # reward terms: not a loop over envs
            self.rew_buf += scale * getattr(self, "_reward_" + name)()
        if torch.isnan(self.rew_buf).any():  # expect: PK103
            print("nan reward at step", self.total_steps, self.rew_buf)  # expect: PK105

    def _reward_lin_vel(self):
        err = torch.sum(torch.square(self.root_vel[:, :2]), dim=1)
        return torch.exp(-err / 0.25)

    def _reward_torque(self):
        return torch.sum(torch.square(self.dof_vel), dim=1)

    def check_termination(self):
        fallen = self.root_pos[:, 2] < 0.2
        timeout = self.episode_length >= self.max_episode_length
        self.reset_buf = torch.logical_or(fallen, timeout).long()  # expect: PK203
        n_fallen = int(fallen.sum())  # expect: PK104
        self.extras["fallen_height"] = self.root_pos[fallen][:, 2].mean()  # expect: PK107
        self.extras["n_fallen"] = n_fallen

    def reset_idx(self, env_ids):
        for env_id in env_ids:  # expect: PK302
            self.dof_pos[env_id] = self.default_dof_pos
        noise = torch.rand(len(env_ids), self.act_dim, device=self.device)  # expect: PK201
        self.dof_pos[env_ids] += 0.1 * noise
        self.dof_vel[env_ids] = 0.0  # expect: PK113
        self.episode_length[env_ids] = 0  # expect: PK113
        self.reset_buf[env_ids] = 0  # expect: PK113

    def compute_observations(self):
        feet = self.dof_pos[:, [3, 6, 9, 12]]  # expect: PK108
        self.obs_buf = torch.cat([self.root_vel, self.dof_pos - self.default_dof_pos, self.dof_vel, feet], dim=-1)  # expect: PK203
        for i in range(self.num_envs):  # expect: PK301
            self.obs_buf[i, :3] = self.root_vel[i] * 2.0
        commands = torch.tensor([1.0, 0.0, 0.0], device=self.device)  # expect: PK109
        self.obs_buf[:, 45:48] = commands
        height = float(self.root_pos[:, 2].mean())  # expect: PK104
        self.extras["height"] = math.sqrt(height)

    def get_state_numpy(self):
        # not a hot path: reading values here is fine
        return self.root_pos.cpu().numpy(), self.rew_buf.mean().item()

    def render(self):
        pos = self.root_pos.cpu().numpy()
        return np.round(pos, 3)

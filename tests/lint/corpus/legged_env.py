"""A legged-gym style env: reward terms as ``_reward_*`` methods, helpers at module level, partial resets."""

import numpy as np
import torch


def torch_rand_float(lower, upper, shape, device):
    return (upper - lower) * torch.rand(*shape, device=device) + lower  # expect: PK201


def quat_rotate_inverse(q, v):
    q_w = q[:, -1]
    q_vec = q[:, :3]
    a = v * (2.0 * q_w ** 2 - 1.0).unsqueeze(-1)
    b = torch.cross(q_vec, v, dim=-1) * q_w.unsqueeze(-1) * 2.0
    c = q_vec * torch.bmm(q_vec.view(q.shape[0], 1, 3), v.view(q.shape[0], 3, 1)).squeeze(-1) * 2.0
    return a - b + c


def wrap_to_pi(angles):
    angles %= 2 * np.pi
    angles -= 2 * np.pi * (angles > np.pi)
    return angles


class LeggedRobot:
    def __init__(self, cfg, num_envs, device="cuda"):
        self.cfg = cfg
        self.num_envs = num_envs
        self.device = device
        self.dt = cfg.sim_dt * cfg.decimation
        self.root_states = torch.zeros(num_envs, 13, device=device)
        self.base_quat = self.root_states[:, 3:7]
        self.base_lin_vel = torch.zeros(num_envs, 3, device=device)
        self.base_ang_vel = torch.zeros(num_envs, 3, device=device)
        self.gravity_vec = torch.tensor([0.0, 0.0, -1.0], device=device).repeat(num_envs, 1)
        self.projected_gravity = torch.zeros(num_envs, 3, device=device)
        self.commands = torch.zeros(num_envs, 3, device=device)
        self.torques = torch.zeros(num_envs, 12, device=device)
        self.dof_vel = torch.zeros(num_envs, 12, device=device)
        self.last_dof_vel = torch.zeros_like(self.dof_vel)
        self.feet_air_time = torch.zeros(num_envs, 4, device=device)
        self.contact_forces = torch.zeros(num_envs, 17, 3, device=device)
        self.feet_indices = torch.tensor([4, 8, 12, 16], device=device)
        self.rew_buf = torch.zeros(num_envs, device=device)
        self.reset_buf = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long, device=device)
        self.reward_names = ["tracking_lin_vel", "torques", "feet_air_time", "collision"]
        self.reward_scales = {name: 1.0 for name in self.reward_names}
        self.episode_sums = {name: torch.zeros(num_envs, device=device) for name in self.reward_names}
        self.extras = {"episode": {}}

    def post_physics_step(self):
        self.episode_length_buf += 1
        self.base_lin_vel[:] = quat_rotate_inverse(self.base_quat, self.root_states[:, 7:10])
        self.base_ang_vel[:] = quat_rotate_inverse(self.base_quat, self.root_states[:, 10:13])
        self.projected_gravity[:] = quat_rotate_inverse(self.base_quat, self.gravity_vec)
        self.check_termination()
        self.compute_reward()
        env_ids = self.reset_buf.nonzero(as_tuple=False).flatten()  # expect: PK106
        self.reset_idx(env_ids)
        self.last_dof_vel[:] = self.dof_vel[:]

    def step(self, actions):
        clip = self.cfg.clip_actions
        self.actions = torch.clip(actions, -clip, clip).to(self.device)
        self.post_physics_step()
        return self.rew_buf, self.reset_buf

    def check_termination(self):
        self.reset_buf = torch.any(torch.norm(self.contact_forces[:, [0], :], dim=-1) > 1.0, dim=1)  # expect: PK108 PK203
        self.reset_buf |= self.episode_length_buf > self.cfg.max_episode_length

    def reset_idx(self, env_ids):
        if len(env_ids) == 0:
            return
        self.root_states[env_ids, 7:13] = torch_rand_float(-0.5, 0.5, (len(env_ids), 6), self.device)
        self.feet_air_time[env_ids] = 0.0  # expect: PK113
        self.episode_length_buf[env_ids] = 0  # expect: PK113
        for key in self.episode_sums.keys():  # reward terms
            self.extras["episode"]["rew_" + key] = torch.mean(self.episode_sums[key][env_ids]) / self.dt
            self.episode_sums[key][env_ids] = 0.0  # expect: PK113
        self._resample_commands(env_ids)

    def _resample_commands(self, env_ids):
        self.commands[env_ids, 0] = torch_rand_float(-1.0, 1.0, (len(env_ids), 1), self.device).squeeze(1)
        self.commands[env_ids, 2] = wrap_to_pi(self.commands[env_ids, 2])
        small = torch.norm(self.commands[env_ids, :2], dim=1) > 0.2
        self.commands[env_ids, :2] *= small.unsqueeze(1)

    def compute_reward(self):
        self.rew_buf[:] = 0.0
        for name in self.reward_names:  # reward terms
            rew = getattr(self, "_reward_" + name)() * self.reward_scales[name]
            self.rew_buf += rew
            self.episode_sums[name] += rew
        self.rew_buf[:] = torch.clip(self.rew_buf[:], min=0.0)

    def _reward_tracking_lin_vel(self):
        err = torch.sum(torch.square(self.commands[:, :2] - self.base_lin_vel[:, :2]), dim=1)
        return torch.exp(-err / 0.25)

    def _reward_torques(self):
        return torch.sum(torch.square(self.torques), dim=1)

    def _reward_feet_air_time(self):
        contact = self.contact_forces[:, self.feet_indices, 2] > 1.0
        first_contact = (self.feet_air_time > 0.0) * contact
        self.feet_air_time += self.dt
        rew = torch.sum((self.feet_air_time - 0.5) * first_contact, dim=1)
        rew *= torch.norm(self.commands[:, :2], dim=1) > 0.1
        self.feet_air_time *= ~contact
        return rew

    def _reward_collision(self):
        hits = torch.norm(self.contact_forces[:, self.feet_indices, :], dim=-1) > 0.1
        n_hits = hits.sum(dim=1)
        if n_hits.max() > 2:  # expect: PK103
            self.extras["many_hits"] = n_hits.float().mean()
        return 1.0 * n_hits

"""A batched env written the sync-free way. It must lint clean: no ``# expect`` anywhere."""

import time

import perfkit
import torch


class CleanLocomotionEnv:
    def __init__(self, num_envs: int, device: str = "cuda", decimation: int = 4):
        self.num_envs = num_envs
        self.device = device
        self.decimation = decimation
        self.dt = 0.005
        self.max_episode_length = 1000
        self.obs_buf = torch.zeros(num_envs, 33, device=device)
        self.rew_buf = torch.zeros(num_envs, device=device)
        self.reset_buf = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self.timeouts = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self.episode_length = torch.zeros(num_envs, dtype=torch.long, device=device)
        self.root_pos = torch.zeros(num_envs, 3, device=device)
        self.root_vel = torch.zeros(num_envs, 3, device=device)
        self.dof_pos = torch.zeros(num_envs, 12, device=device)
        self.dof_vel = torch.zeros(num_envs, 12, device=device)
        self.default_dof_pos = torch.zeros(12, device=device)
        self.init_root_pos = torch.tensor([0.0, 0.0, 0.55], device=device).repeat(num_envs, 1)
        self.actions = torch.zeros(num_envs, 12, device=device)
        self.last_actions = torch.zeros_like(self.actions)
        self.noise = torch.empty(num_envs, 12, device=device)
        self.feet_idx = torch.tensor([3, 6, 9, 12], device=device)
        self.rew_sum = torch.zeros((), device=device)
        self.reward_terms = {"alive": (self._reward_alive, 1.0), "torque": (self._reward_torque, -1e-4)}
        self.log_every = 100
        self.step_count = 0

    def step(self, actions: torch.Tensor):
        self.last_actions.copy_(self.actions)
        self.actions.copy_(actions)
        for _ in range(self.decimation):  # substeps
            self._physics_substep()
        self.episode_length += 1
        self.step_count += 1
        self.compute_reward()
        self.check_termination()
        self.reset_where(self.reset_buf)
        self.compute_observations()
        return self.obs_buf, self.rew_buf, self.reset_buf

    def _physics_substep(self):
        self.dof_vel.add_(self.actions, alpha=0.25 * self.dt)
        self.dof_pos.add_(self.dof_vel, alpha=self.dt)
        self.root_pos[:, 2].clamp_(min=0.0)

    def compute_reward(self):
        self.rew_buf.zero_()
        for name, (fn, scale) in self.reward_terms.items():  # reward terms, not envs
            self.rew_buf.add_(fn(), alpha=scale)
        self.rew_sum += self.rew_buf.sum()  # stays on the device

    def _reward_alive(self):
        return (~self.reset_buf).float()

    def _reward_torque(self):
        return torch.sum(torch.square(self.actions), dim=1)

    def check_termination(self):
        fallen = self.root_pos[:, 2] < 0.2
        torch.ge(self.episode_length, self.max_episode_length, out=self.timeouts)
        torch.logical_or(fallen, self.timeouts, out=self.reset_buf)

    def reset_where(self, mask: torch.Tensor):
        # masked fills and three-argument where: no sync, fixed shapes (a tensor written *through* the mask,
        # `x[mask] = y`, would sync: it counts the mask on the host)
        m = mask[:, None]
        self.noise.uniform_(-0.1, 0.1)
        torch.where(m, self.default_dof_pos + self.noise, self.dof_pos, out=self.dof_pos)
        self.dof_vel.masked_fill_(m, 0.0)
        torch.where(m, self.init_root_pos[0], self.root_pos, out=self.root_pos)
        self.episode_length.masked_fill_(mask, 0)

    def compute_observations(self):
        feet = self.dof_pos[:, self.feet_idx]
        torch.cat([self.root_vel, self.dof_pos - self.default_dof_pos, self.dof_vel[:, :6], feet[:, :3]], dim=-1,
                  out=self.obs_buf[:, :33])

    @perfkit.hot
    def apply_command(self, cmd: torch.Tensor):
        self.root_vel[:, :2].copy_(cmd)
        self.root_vel[:, 2].mul_(0.0)

    def log_stats(self) -> dict:
        # not a hot path: the one place values come back to the host, once per log interval
        mean = (self.rew_sum / max(self.step_count, 1)).item()
        self.rew_sum.zero_()
        print(f"mean reward {mean:.3f}")
        return {"mean_reward": mean, "height": self.root_pos[:, 2].mean().cpu().tolist()}


def run(env: CleanLocomotionEnv, steps: int):
    actions = torch.zeros(env.num_envs, 12, device=env.device)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(steps):
        env.step(actions)
        actions.normal_()
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    return steps * env.num_envs / elapsed

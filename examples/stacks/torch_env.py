"""A small batched pure-torch env, written the way RL libraries' users write one: cart-pole.

``CartpoleEnv`` is a ``gymnasium.Env`` in the style of Isaac Lab's direct workflow
(``DirectRLEnv``): ``num_envs`` worlds stepped together on one device, every buffer allocated in
``__init__``, ``step(action)`` returning ``(obs_dict, reward, terminated, truncated, extras)`` with
``obs_dict = {"policy": obs}``, and the worlds that are done reset by index inside ``step``:

    reset_env_ids = self.reset_buf.nonzero(as_tuple=False).squeeze(-1)
    if len(reset_env_ids) > 0:
        self._reset_idx(reset_env_ids)

That ``nonzero`` is the one host-device sync the env itself makes per step (as Isaac Lab's
``DirectRLEnv.step`` does); everything else stays on the device.

Dynamics: the classic cart-pole (Barto, Sutton & Anderson 1983; the equations of Gym's
``CartPole``) with a continuous force ``action * max_force``, integrated with semi-implicit Euler
at ``sim_dt``, ``decimation`` substeps per env step. Reward (as Isaac Lab's cart-pole task): alive
bonus, a penalty on termination, on the pole angle squared and on the cart and pole velocities.
An episode ends when the cart leaves the track or the pole falls past ``max_pole_angle``
(terminated), or after ``max_episode_length`` steps (truncated).

The scripts beside this file train it through rsl_rl (``rsl_rl_torch_env.py``) and
stable-baselines3 (``sb3_torch_env.py``), and step it through gymnasium wrappers
(``gymnasium_wrapped.py``).
"""

from __future__ import annotations

import math

import gymnasium
import numpy as np
import torch


class CartpoleEnv(gymnasium.Env):
    """Batched cart-pole on torch. ``obs = (x, x_dot, theta, theta_dot)``, ``action`` in [-1, 1]."""

    metadata = {"render_modes": []}

    # physics (Gym's CartPole constants)
    gravity = 9.8
    cart_mass = 1.0
    pole_mass = 0.1
    pole_half_length = 0.5
    max_force = 10.0
    # task
    max_cart_pos = 2.4
    max_pole_angle = 12 * math.pi / 180
    reset_noise = 0.05
    rew_alive, rew_terminated, rew_pole_pos, rew_cart_vel, rew_pole_vel = 1.0, -2.0, -1.0, -0.01, -0.005

    def __init__(self, num_envs: int = 64, device="cpu", seed: int = 0, sim_dt: float = 0.01, decimation: int = 2,
                 max_episode_length: int = 250):
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.sim_dt = sim_dt
        self.decimation = decimation
        self.step_dt = sim_dt * decimation
        self.max_episode_length = max_episode_length
        self.num_obs, self.num_actions = 4, 1
        self.single_observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (self.num_obs,), dtype=np.float32)
        self.single_action_space = gymnasium.spaces.Box(-1.0, 1.0, (self.num_actions,), dtype=np.float32)
        self.observation_space = gymnasium.spaces.Dict({"policy": gymnasium.vector.utils.batch_space(self.single_observation_space, num_envs)})
        self.action_space = gymnasium.vector.utils.batch_space(self.single_action_space, num_envs)

        n, dev = num_envs, self.device
        self._gen = torch.Generator(device=dev)
        self._gen.manual_seed(seed)
        self.state = torch.zeros(n, 4, device=dev)  # x, x_dot, theta, theta_dot
        self.actions = torch.zeros(n, self.num_actions, device=dev)
        self.force = torch.zeros(n, device=dev)
        self.obs_buf = torch.zeros(n, self.num_obs, device=dev)
        self.reward_buf = torch.zeros(n, device=dev)
        self.reset_terminated = torch.zeros(n, dtype=torch.bool, device=dev)
        self.reset_time_outs = torch.zeros(n, dtype=torch.bool, device=dev)
        self.reset_buf = torch.zeros(n, dtype=torch.bool, device=dev)
        self.episode_length_buf = torch.zeros(n, dtype=torch.long, device=dev)
        self.episode_return = torch.zeros(n, device=dev)
        self.extras: dict = {}
        self.common_step_counter = 0
        self._x, self._x_dot, self._theta, self._theta_dot = (self.state[:, i] for i in range(4))

    @property
    def unwrapped(self) -> "CartpoleEnv":
        return self

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._gen.manual_seed(seed)
        self._reset_idx(torch.arange(self.num_envs, device=self.device))
        self.extras = {}
        return {"policy": self._get_observations()}, self.extras

    def step(self, action: torch.Tensor):
        self._pre_physics_step(action)
        for _ in range(self.decimation):
            self._apply_action()
            self._sim_step()
        self.episode_length_buf += 1
        self.common_step_counter += 1
        self.reset_terminated[:], self.reset_time_outs[:] = self._get_dones()
        self.reset_buf = self.reset_terminated | self.reset_time_outs
        self.reward_buf = self._get_rewards()
        self.episode_return += self.reward_buf

        self.extras = {}
        reset_env_ids = self.reset_buf.nonzero(as_tuple=False).squeeze(-1)
        if len(reset_env_ids) > 0:
            self._reset_idx(reset_env_ids)
        self.obs_buf = self._get_observations()
        return {"policy": self.obs_buf}, self.reward_buf, self.reset_terminated, self.reset_time_outs, self.extras

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------ task
    def _pre_physics_step(self, action: torch.Tensor) -> None:
        self.actions.copy_(action.clamp(-1.0, 1.0))

    def _apply_action(self) -> None:
        self.force.copy_(self.actions[:, 0] * self.max_force)

    def _sim_step(self) -> None:
        total_mass = self.cart_mass + self.pole_mass
        pml = self.pole_mass * self.pole_half_length
        cos, sin = torch.cos(self._theta), torch.sin(self._theta)
        temp = (self.force + pml * self._theta_dot.square() * sin) / total_mass
        theta_acc = (self.gravity * sin - cos * temp) / (self.pole_half_length * (4.0 / 3.0 - self.pole_mass * cos.square() / total_mass))
        x_acc = temp - pml * theta_acc * cos / total_mass
        self._x_dot.add_(x_acc, alpha=self.sim_dt)
        self._theta_dot.add_(theta_acc, alpha=self.sim_dt)
        self._x.add_(self._x_dot, alpha=self.sim_dt)
        self._theta.add_(self._theta_dot, alpha=self.sim_dt)

    def _get_observations(self) -> torch.Tensor:
        return self.state.clone()

    def _get_rewards(self) -> torch.Tensor:
        alive = self.rew_alive * (1.0 - self.reset_terminated.float())
        terminated = self.rew_terminated * self.reset_terminated.float()
        pole_pos = self.rew_pole_pos * self._theta.square()
        cart_vel = self.rew_cart_vel * self._x_dot.abs()
        pole_vel = self.rew_pole_vel * self._theta_dot.abs()
        return alive + terminated + pole_pos + cart_vel + pole_vel

    def _get_dones(self) -> tuple[torch.Tensor, torch.Tensor]:
        time_out = self.episode_length_buf >= self.max_episode_length
        out_of_bounds = (self._x.abs() > self.max_cart_pos) | (self._theta.abs() > self.max_pole_angle)
        out_of_bounds |= ~torch.isfinite(self.state).all(dim=1)
        return out_of_bounds, time_out

    def _reset_idx(self, env_ids: torch.Tensor) -> None:
        if len(env_ids) < self.num_envs:  # a partial reset: log the episodes that ended
            self.extras["log"] = {
                "/episode/return": self.episode_return[env_ids].mean(),
                "/episode/length": self.episode_length_buf[env_ids].float().mean(),
            }
        noise = torch.rand((len(env_ids), 4), generator=self._gen, device=self.device) * (2 * self.reset_noise) - self.reset_noise
        self.state[env_ids] = noise
        self.episode_length_buf[env_ids] = 0
        self.episode_return[env_ids] = 0.0


class BalanceController:
    """A hand-tuned linear state-feedback controller (for runs that need no learning): pushes the cart
    under the falling pole. Keeps the pole up from the env's reset noise for whole episodes."""

    def __init__(self, device="cpu", gains=(0.1, 0.3, 3.0, 0.6)):
        self.gains = torch.tensor(gains, device=device)

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        return (obs @ self.gains).clamp(-1.0, 1.0).unsqueeze(-1)

"""rsl_rl's ``VecEnv`` over the manager env, in the style of Isaac Lab's ``RslRlVecEnvWrapper``.

``num_envs`` is a property that forwards to the wrapped env (so is ``episode_length_buf``, which the
runner overwrites to randomize the first episodes' lengths); observations are the manager's groups
as a ``TensorDict`` (rsl-rl-lib 5.x); ``step`` returns ``(obs, rewards, dones, extras)`` with
``dones = terminated | truncated`` and the truncations in ``extras["time_outs"]``.
"""

from __future__ import annotations

import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict


class RslRlVecEnvWrapper(VecEnv):
    def __init__(self, env, clip_actions: float | None = None):
        self.env = env
        self.clip_actions = clip_actions
        self.num_actions = self.unwrapped.action_manager.total_action_dim
        self.max_episode_length = self.unwrapped.max_episode_length
        self.device = self.unwrapped.device
        self.cfg = self.unwrapped.cfg
        self.env.reset()

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{self.env!r}>"

    @property
    def unwrapped(self):
        return self.env.unwrapped

    @property
    def num_envs(self) -> int:
        return self.unwrapped.num_envs

    @property
    def episode_length_buf(self) -> torch.Tensor:
        return self.unwrapped.episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.unwrapped.episode_length_buf = value

    def get_observations(self) -> TensorDict:
        obs_dict = self.unwrapped.observation_manager.compute()
        return TensorDict(obs_dict, batch_size=[self.num_envs])

    def step(self, actions: torch.Tensor):
        if self.clip_actions is not None:
            actions = torch.clamp(actions, -self.clip_actions, self.clip_actions)
        obs_dict, rew, terminated, truncated, extras = self.env.step(actions)
        dones = (terminated | truncated).to(dtype=torch.long)
        extras["time_outs"] = truncated
        return TensorDict(obs_dict, batch_size=[self.num_envs]), rew, dones, extras

    def close(self) -> None:
        return self.env.close()

"""Train the batched torch cart-pole (``torch_env.py``) with stable-baselines3's PPO.

    python examples/stacks/sb3_torch_env.py                         # CPU, 32 envs, a few seconds
    perfkit profile examples/stacks/sb3_torch_env.py

stable-baselines3 works on NumPy arrays, one ``VecEnv`` of ``num_envs`` envs: the wrapper below
(written like Isaac Lab's ``Sb3VecEnvWrapper``) moves actions to the env's device and observations,
rewards and dones back to the host every step, and builds SB3's per-env ``infos`` list (episode
statistics of the envs that finished, time-limit truncations) in a Python loop over the envs. The
rollout loop and the PPO update live inside the library (``model.learn``).

The first rollout + update is a warm-up (``model.learn`` for one rollout); the rest is one more
``model.learn(..., reset_num_timesteps=False)`` call, timed. The last line printed is
``SPS: <float>``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecEnv

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_env import CartpoleEnv  # noqa: E402


class Sb3VecEnvWrapper(VecEnv):
    """SB3's ``VecEnv`` over a batched torch env that auto-resets the envs that are done. As in Isaac
    Lab's wrapper, a finished env's ``terminal_observation`` is the observation returned for it (the
    env has already reset it), so time-limit bootstrapping uses the next episode's first state."""

    def __init__(self, env):
        self.env = env
        self.sim_device = self.unwrapped.device
        super().__init__(self.unwrapped.num_envs, self.unwrapped.single_observation_space, self.unwrapped.single_action_space)
        self._ep_rew_buf = torch.zeros(self.num_envs, device=self.sim_device)
        self._ep_len_buf = torch.zeros(self.num_envs, device=self.sim_device)
        self._async_actions: torch.Tensor | None = None

    @property
    def unwrapped(self):
        return self.env.unwrapped

    def reset(self) -> np.ndarray:
        obs_dict, _ = self.env.reset()
        self._ep_rew_buf.zero_()
        self._ep_len_buf.zero_()
        return obs_dict["policy"].detach().cpu().numpy()

    def step_async(self, actions) -> None:
        if not isinstance(actions, torch.Tensor):
            actions = torch.from_numpy(np.asarray(actions)).to(device=self.sim_device, dtype=torch.float32)
        else:
            actions = actions.to(device=self.sim_device, dtype=torch.float32)
        self._async_actions = actions

    def step_wait(self):
        obs_dict, rew, terminated, truncated, extras = self.env.step(self._async_actions)
        dones = terminated | truncated
        self._ep_rew_buf += rew
        self._ep_len_buf += 1
        reset_ids = (dones > 0).nonzero(as_tuple=False)
        obs = obs_dict["policy"].detach().cpu().numpy()
        rew = rew.detach().cpu().numpy()
        terminated = terminated.detach().cpu().numpy()
        truncated = truncated.detach().cpu().numpy()
        dones = dones.detach().cpu().numpy()
        infos = self._process_extras(obs, terminated, truncated, extras, reset_ids)
        self._ep_rew_buf[reset_ids] = 0.0
        self._ep_len_buf[reset_ids] = 0.0
        return obs, rew, dones, infos

    def _process_extras(self, obs, terminated, truncated, extras, reset_ids) -> list[dict[str, Any]]:
        infos: list[dict[str, Any]] = [dict.fromkeys(extras.keys()) for _ in range(self.num_envs)]
        for idx in range(self.num_envs):
            if idx in reset_ids:
                infos[idx]["episode"] = {"r": float(self._ep_rew_buf[idx]), "l": float(self._ep_len_buf[idx])}
                infos[idx]["terminal_observation"] = obs[idx]
            else:
                infos[idx]["episode"] = None
            infos[idx]["TimeLimit.truncated"] = bool(truncated[idx] and not terminated[idx])
        return infos

    def close(self) -> None:
        self.env.close()

    def get_attr(self, attr_name, indices=None):
        return [getattr(self.unwrapped, attr_name)] * len(self._indices(indices))

    def set_attr(self, attr_name, value, indices=None):
        raise NotImplementedError("setting attributes of the batched env is not supported")

    def env_method(self, method_name, *method_args, indices=None, **method_kwargs):
        result = getattr(self.unwrapped, method_name)(*method_args, **method_kwargs)
        return [result] * len(self._indices(indices))

    def env_is_wrapped(self, wrapper_class, indices=None):
        return [False] * len(self._indices(indices))

    def _indices(self, indices) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        return [indices] if isinstance(indices, int) else list(indices)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, default=32)
    p.add_argument("--iterations", type=int, default=6, help="rollouts + updates, the first a warm-up (>= 2)")
    p.add_argument("--num-steps", type=int, default=16, help="n_steps: rollout length per env per iteration")
    p.add_argument("--epochs", type=int, default=2, help="PPO n_epochs")
    p.add_argument("--mini-batches", type=int, default=2, help="mini-batches per epoch (batch_size = rollout size / this)")
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.num_envs < 1 or args.iterations < 2 or args.num_steps < 2 or args.mini_batches < 1:
        p.error("--num-envs, --mini-batches >= 1, --num-steps >= 2, --iterations >= 2")
    if (args.num_envs * args.num_steps) % args.mini_batches:
        p.error("--mini-batches must divide num_envs * num_steps")
    return args


def main(argv=None) -> float:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    if torch.device(args.device).type == "cpu":
        torch.set_num_threads(1)
    env = Sb3VecEnvWrapper(CartpoleEnv(args.num_envs, device=args.device, seed=args.seed))
    rollout = args.num_envs * args.num_steps
    model = PPO("MlpPolicy", env, n_steps=args.num_steps, batch_size=rollout // args.mini_batches, n_epochs=args.epochs,
                learning_rate=1e-3, gamma=0.99, gae_lambda=0.95, ent_coef=0.005,
                policy_kwargs={"net_arch": [args.hidden, args.hidden]}, device=args.device, seed=args.seed, verbose=1)
    model.learn(total_timesteps=rollout)  # warm-up: one rollout and one update
    t0 = time.perf_counter()
    model.learn(total_timesteps=(args.iterations - 1) * rollout, reset_num_timesteps=False)
    elapsed = time.perf_counter() - t0
    returns = [ep["r"] for ep in model.ep_info_buffer]
    print(f"mean episode return (last {len(returns)} episodes): {np.mean(returns) if returns else float('nan'):.4f}")
    env.close()
    sps = (args.iterations - 1) * rollout / elapsed
    print(f"SPS: {sps:.1f}", flush=True)
    return sps


if __name__ == "__main__":
    main()

"""PPO on the CPU reference env improves the reward within a few iterations (fixed seed)."""

from __future__ import annotations

import torch

from perfkit.envs import make_env
from perfkit.rl import PPO, PPOConfig


def test_a_few_iterations_of_ppo_raise_the_reward():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # deterministic and fast for these tiny tensors
    try:
        env = make_env("ant", 32, backend="mujoco", seed=0)
        ppo = PPO(env.obs_dim, env.act_dim, env.num_envs, cfg=PPOConfig(num_steps=32), seed=0)
        curve = []
        obs = env.reset()
        for _ in range(12):
            with torch.inference_mode():
                for _ in range(ppo.cfg.num_steps):
                    obs, r, d, info = env.step(ppo.act(obs))
                    ppo.process_env_step(r, d, info)
            ppo.update(obs)
            curve.append(ppo.log_iteration()["reward_per_step"])
    finally:
        torch.set_num_threads(threads)
    first, last = sum(curve[:3]) / 3, sum(curve[-3:]) / 3
    assert last > first + 0.05, f"reward per step did not rise: {[round(c, 3) for c in curve]}"

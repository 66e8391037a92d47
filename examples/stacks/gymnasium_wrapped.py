"""Step the batched torch cart-pole through gymnasium wrappers, in a plain loop.

    python examples/stacks/gymnasium_wrapped.py                    # CPU, 64 envs, 300 steps
    perfkit profile examples/stacks/gymnasium_wrapped.py

The env is registered with gymnasium and made with ``gymnasium.make`` (so gymnasium wraps it in its
``OrderEnforcing`` wrapper, as it does Isaac Lab's envs), then wrapped twice more by
``gymnasium.Wrapper`` subclasses of this script: ``ActionRepeat`` (each ``step`` steps the env
``--action-repeat`` times with the same action, summing rewards) and ``EpisodeStatistics`` (episode
returns and lengths kept on the device, read back once per report). None of the wrappers has a
``num_envs`` of its own (gymnasium's ``Wrapper`` does not forward attributes): it lives on the
wrapped env, ``env.unwrapped.num_envs``.

A hand-tuned linear controller (``torch_env.BalanceController``) acts; nothing is learned. The
last line printed is ``SPS: <float>``: outer steps (one ``env.step`` of the outermost wrapper)
times ``num_envs`` per second, after ``--warmup`` steps.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import gymnasium
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_env import BalanceController, CartpoleEnv  # noqa: E402

ENV_ID = "PerfkitStacks/TorchCartpole-v0"


class ActionRepeat(gymnasium.Wrapper):
    """Apply each action ``repeat`` times; rewards summed, done if any inner step was done (the
    batched env resets its finished worlds itself, so the remaining repeats act on fresh episodes)."""

    def __init__(self, env, repeat: int):
        super().__init__(env)
        if repeat < 1:
            raise ValueError(f"repeat must be >= 1, got {repeat}")
        self.repeat = repeat

    def step(self, action):
        total_reward = None
        any_terminated = any_truncated = None
        for _ in range(self.repeat):
            obs, reward, terminated, truncated, info = self.env.step(action)
            total_reward = reward.clone() if total_reward is None else total_reward + reward
            any_terminated = terminated.clone() if any_terminated is None else any_terminated | terminated
            any_truncated = truncated.clone() if any_truncated is None else any_truncated | truncated
        return obs, total_reward, any_terminated, any_truncated, info


class EpisodeStatistics(gymnasium.Wrapper):
    """Running episode returns and lengths per env, on the env's device; finished episodes are
    summed into device counters (no host read per step)."""

    def __init__(self, env):
        super().__init__(env)
        u = env.unwrapped
        self.episode_return = torch.zeros(u.num_envs, device=u.device)
        self.episode_length = torch.zeros(u.num_envs, device=u.device)
        self.finished = torch.zeros((), device=u.device)
        self.finished_return = torch.zeros((), device=u.device)
        self.finished_length = torch.zeros((), device=u.device)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        done = terminated | truncated
        self.episode_return += reward
        self.episode_length += 1
        self.finished += done.sum()
        self.finished_return += torch.where(done, self.episode_return, 0.0).sum()
        self.finished_length += torch.where(done, self.episode_length, 0.0).sum()
        self.episode_return.masked_fill_(done, 0.0)
        self.episode_length.masked_fill_(done, 0.0)
        return obs, reward, terminated, truncated, info

    def summary(self) -> str:
        n = int(self.finished.item())
        if n == 0:
            return "no episode finished"
        return (f"{n} episodes, mean return {self.finished_return.item() / n:.3f}, "
                f"mean length {self.finished_length.item() / n:.1f}")


def make_env(num_envs: int, device: str, seed: int, action_repeat: int):
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(id=ENV_ID, entry_point=CartpoleEnv, disable_env_checker=True)
    env = gymnasium.make(ENV_ID, num_envs=num_envs, device=device, seed=seed)
    return EpisodeStatistics(ActionRepeat(env, action_repeat))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--steps", type=int, default=300, help="outer steps (each one --action-repeat env steps)")
    p.add_argument("--warmup", type=int, default=20, help="outer steps left out of the SPS")
    p.add_argument("--action-repeat", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.num_envs < 1 or args.steps <= args.warmup or args.warmup < 0 or args.action_repeat < 1:
        p.error("--num-envs, --action-repeat >= 1 and --steps > --warmup >= 0")
    return args


def main(argv=None) -> float:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    if torch.device(args.device).type == "cpu":
        torch.set_num_threads(1)
    env = make_env(args.num_envs, args.device, args.seed, args.action_repeat)
    print(f"env: {env}  num_envs={env.unwrapped.num_envs}", flush=True)
    policy = BalanceController(device=args.device)
    obs, _ = env.reset(seed=args.seed)
    t0 = None
    for i in range(args.steps):
        if i == args.warmup:
            if torch.device(args.device).type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        obs, reward, terminated, truncated, info = env.step(policy(obs["policy"]))
    if torch.device(args.device).type == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    print(env.summary())
    env.close()
    sps = (args.steps - args.warmup) * args.num_envs / elapsed
    print(f"SPS: {sps:.1f}", flush=True)
    return sps


if __name__ == "__main__":
    main()

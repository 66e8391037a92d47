"""Train the batched torch cart-pole (``torch_env.py``) with rsl_rl's ``OnPolicyRunner`` (rsl-rl-lib 5.x).

    python examples/stacks/rsl_rl_torch_env.py                      # CPU, 64 envs, a few seconds
    perfkit profile examples/stacks/rsl_rl_torch_env.py --iterations 8

The training loop lives inside the library: ``OnPolicyRunner.learn`` steps the env through the
``VecEnv`` wrapper below (written like Isaac Lab's ``RslRlVecEnvWrapper``: ``num_envs`` is a
property forwarding to the wrapped env, observations are a ``TensorDict``), checks each step's
outputs for NaN, keeps its episode statistics (``rsl_rl.utils.logger.Logger``) and runs
``PPO.update`` over mini-batches. rsl_rl logs to TensorBoard in ``--log-dir`` (a temporary folder
by default), as a training run does.

The first iteration is a warm-up (``runner.learn(1)``); the last line printed is ``SPS: <float>``,
env steps per second over the remaining iterations (one more ``runner.learn`` call, timed between
device synchronizations).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import torch
from rsl_rl.env import VecEnv
from rsl_rl.runners import OnPolicyRunner
from tensordict import TensorDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_env import CartpoleEnv  # noqa: E402


class RslRlVecEnvWrapper(VecEnv):
    """rsl_rl's ``VecEnv`` over a direct-workflow env that returns ``(obs_dict, reward, terminated,
    truncated, extras)``: dones are ``terminated | truncated`` and time-outs go to
    ``extras["time_outs"]`` (rsl_rl bootstraps the value there)."""

    def __init__(self, env, clip_actions: float | None = None):
        self.env = env
        self.clip_actions = clip_actions
        self.num_actions = self.unwrapped.num_actions
        self.max_episode_length = self.unwrapped.max_episode_length
        self.device = self.unwrapped.device
        self.cfg = {"num_envs": self.unwrapped.num_envs, "step_dt": self.unwrapped.step_dt}
        self.env.reset()

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
        return TensorDict({"policy": self.unwrapped.obs_buf}, batch_size=[self.num_envs])

    def step(self, actions: torch.Tensor):
        if self.clip_actions is not None:
            actions = torch.clamp(actions, -self.clip_actions, self.clip_actions)
        obs_dict, rew, terminated, truncated, extras = self.env.step(actions)
        dones = (terminated | truncated).to(dtype=torch.long)
        extras["time_outs"] = truncated
        return TensorDict(obs_dict, batch_size=[self.num_envs]), rew, dones, extras


def train_cfg(args) -> dict:
    """The runner's configuration (rsl-rl-lib 5.x layout: ``actor``/``critic`` models and ``algorithm``)."""
    return {
        "seed": args.seed,
        "num_steps_per_env": args.num_steps,
        "save_interval": 10**9,  # the runner saves iteration 0 and the last one
        "check_for_nan": True,
        "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
        "logger": "tensorboard",
        "run_name": "cartpole",
        "actor": {
            "class_name": "MLPModel",
            "hidden_dims": [args.hidden] * 2,
            "activation": "elu",
            "obs_normalization": False,
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0, "std_type": "scalar"},
        },
        "critic": {"class_name": "MLPModel", "hidden_dims": [args.hidden] * 2, "activation": "elu", "obs_normalization": False},
        "algorithm": {
            "class_name": "PPO",
            "num_learning_epochs": args.epochs,
            "num_mini_batches": args.mini_batches,
            "learning_rate": 1e-3,
            "schedule": "adaptive",
            "desired_kl": 0.01,
            "gamma": 0.99,
            "lam": 0.95,
            "entropy_coef": 0.005,
            "value_loss_coef": 1.0,
            "clip_param": 0.2,
            "max_grad_norm": 1.0,
            "use_clipped_value_loss": True,
        },
    }


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--iterations", type=int, default=6, help="learning iterations, the first a warm-up (>= 2)")
    p.add_argument("--num-steps", type=int, default=16, help="num_steps_per_env: rollout length per iteration")
    p.add_argument("--epochs", type=int, default=2, help="PPO num_learning_epochs")
    p.add_argument("--mini-batches", type=int, default=2, help="PPO num_mini_batches")
    p.add_argument("--hidden", type=int, default=32, help="width of the two hidden layers")
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-dir", default=None, help="rsl_rl's log folder (default: a temporary one, removed at the end)")
    args = p.parse_args(argv)
    if args.num_envs < 1 or args.iterations < 2 or args.num_steps < 1:
        p.error("--num-envs and --num-steps must be >= 1, --iterations >= 2")
    return args


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def main(argv=None) -> float:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    if torch.device(args.device).type == "cpu":
        torch.set_num_threads(1)  # tiny tensors: intra-op threads only add overhead (and nondeterminism)
    env = RslRlVecEnvWrapper(CartpoleEnv(args.num_envs, device=args.device, seed=args.seed))
    log_dir = args.log_dir or tempfile.mkdtemp(prefix="rsl_rl_cartpole_")
    try:
        runner = OnPolicyRunner(env, train_cfg(args), log_dir=log_dir, device=args.device)
        runner.learn(num_learning_iterations=1, init_at_random_ep_len=True)  # warm-up iteration
        _sync(args.device)
        t0 = time.perf_counter()
        runner.learn(num_learning_iterations=args.iterations - 1)
        _sync(args.device)
        elapsed = time.perf_counter() - t0
        rewards = runner.logger.rewbuffer
        print(f"mean episode return (last {len(rewards)} episodes): {statistics.mean(rewards) if rewards else float('nan'):.4f}")
    finally:
        if args.log_dir is None:
            shutil.rmtree(log_dir, ignore_errors=True)
    sps = (args.iterations - 1) * args.num_steps * args.num_envs / elapsed
    print(f"SPS: {sps:.1f}", flush=True)
    return sps


if __name__ == "__main__":
    main()

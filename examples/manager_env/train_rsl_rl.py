"""Train the manager-based ant velocity task with rsl_rl's ``OnPolicyRunner`` (rsl-rl-lib 5.x).

    python examples/manager_env/train_rsl_rl.py --device cpu --num-envs 64 --iterations 4    # MuJoCo C, seconds
    python examples/manager_env/train_rsl_rl.py --num-envs 4096                              # CUDA: MuJoCo Warp
    perfkit profile examples/manager_env/train_rsl_rl.py --num-envs 4096

As an Isaac Lab training script does: build the env from its config, wrap it for rsl_rl
(:class:`manager_env.wrapper.RslRlVecEnvWrapper`), build the runner from a config dict and call
``runner.learn``. The rollout loop, the NaN checks, the episode statistics and the PPO update all run
inside rsl_rl; the env's managers call TorchScript helpers (:mod:`manager_env.math_utils`).

The first iteration is a warm-up (TorchScript specialization, CUDA-graph capture, allocator growth):
``runner.learn(1)``; the rest is one more ``runner.learn`` call, timed between device
synchronizations. Printed last: the policy's parameter sum and the mean return of the last
episodes (identical for identical runs), then ``SPS: <float>`` (env steps per second over the timed
iterations).
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

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # examples/: the manager_env package

from rsl_rl.runners import OnPolicyRunner  # noqa: E402

from manager_env.env import ManagerBasedRLEnv  # noqa: E402
from manager_env.env_cfg import ant_velocity_env_cfg  # noqa: E402
from manager_env.wrapper import RslRlVecEnvWrapper  # noqa: E402


def train_cfg(args) -> dict:
    """rsl-rl-lib 5.x runner configuration (Isaac Lab's flat-terrain velocity PPO settings)."""
    hidden = [int(h) for h in args.hidden.split(",")]
    return {
        "seed": args.seed,
        "num_steps_per_env": args.num_steps,
        "save_interval": 10**9,  # the runner saves iteration 0 and the last one
        "check_for_nan": True,
        "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
        "logger": "tensorboard",
        "run_name": "ant_velocity_flat",
        "actor": {
            "class_name": "MLPModel",
            "hidden_dims": hidden,
            "activation": "elu",
            "obs_normalization": True,
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0, "std_type": "scalar"},
        },
        "critic": {"class_name": "MLPModel", "hidden_dims": hidden, "activation": "elu", "obs_normalization": True},
        "algorithm": {
            "class_name": "PPO",
            "num_learning_epochs": args.epochs,
            "num_mini_batches": args.mini_batches,
            "learning_rate": 1.0e-3,
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
    p.add_argument("--num-envs", type=int, default=None, help="default: 4096 with CUDA, else 64")
    p.add_argument("--iterations", type=int, default=20, help="learning iterations, the first a warm-up (>= 2)")
    p.add_argument("--num-steps", type=int, default=24, help="num_steps_per_env: rollout length per iteration")
    p.add_argument("--epochs", type=int, default=5, help="PPO num_learning_epochs")
    p.add_argument("--mini-batches", type=int, default=4, help="PPO num_mini_batches")
    p.add_argument("--hidden", default="128,128,128", help="hidden layer widths of actor and critic")
    p.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    p.add_argument("--backend", default="auto", choices=("auto", "mjwarp", "mujoco"),
                   help="physics: MuJoCo Warp (mjwarp) or MuJoCo C (mujoco); auto: mjwarp on CUDA")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-dir", default=None, help="rsl_rl's log folder (default: a temporary one, removed at the end)")
    args = p.parse_args(argv)
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.num_envs is None:
        args.num_envs = 4096 if torch.device(args.device).type == "cuda" else 64
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
        torch.set_num_threads(1)  # small tensors: intra-op threads add overhead (and nondeterminism)
    env_cfg = ant_velocity_env_cfg(num_envs=args.num_envs, backend=args.backend, device=args.device, seed=args.seed)
    env = RslRlVecEnvWrapper(ManagerBasedRLEnv(env_cfg))
    print(f"env: {type(env.unwrapped).__name__} ant velocity, backend={env.unwrapped.backend} device={env.device} "
          f"num_envs={env.num_envs} step_dt={env.unwrapped.step_dt:g} decimation={env.unwrapped.decimation} "
          f"max_episode_length={env.max_episode_length}", flush=True)
    log_dir = args.log_dir or tempfile.mkdtemp(prefix="rsl_rl_manager_env_")
    try:
        runner = OnPolicyRunner(env, train_cfg(args), log_dir=log_dir, device=args.device)
        runner.learn(num_learning_iterations=1, init_at_random_ep_len=True)  # warm-up iteration
        _sync(args.device)
        t0 = time.perf_counter()
        runner.learn(num_learning_iterations=args.iterations - 1)
        _sync(args.device)
        elapsed = time.perf_counter() - t0
        param_sum = sum(float(p.detach().double().sum()) for p in runner.alg.get_policy().parameters())
        returns = runner.logger.rewbuffer
        print(f"policy parameter sum: {param_sum:.10f}")
        print(f"mean episode return (last {len(returns)} episodes): {statistics.mean(returns) if returns else float('nan'):.6f}")
    finally:
        env.close()
        if args.log_dir is None:
            shutil.rmtree(log_dir, ignore_errors=True)
    sps = (args.iterations - 1) * args.num_steps * args.num_envs / elapsed
    print(f"SPS: {sps:.1f}", flush=True)
    return sps


if __name__ == "__main__":
    main()

"""Sync-free PPO on perfkit's reference batched env — the loop ``perfkit profile`` is shown on.

    python examples/train.py                       # ant, CPU MuJoCo backend unless CUDA is here
    python examples/train.py --num-envs 4096       # on a GPU (MuJoCo Warp backend)
    perfkit profile examples/train.py              # the README's first command

Inside an iteration nothing waits on the device: the env step, the policy, the storage writes and
the learner all stay on it; one line of metrics per iteration is read without waiting for the device
(``log_iteration_async``: a non-blocking copy to pinned memory, printed once it has landed).
"""

from __future__ import annotations

import argparse

import torch

from perfkit.envs import BACKENDS, ENV_NAMES, make_env
from perfkit.rl import PPO, PPOConfig


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="ant", choices=ENV_NAMES)
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--iterations", type=int, default=40)
    p.add_argument("--num-steps", type=int, default=32, help="rollout length per env per iteration")
    p.add_argument("--backend", default="auto", choices=BACKENDS)
    p.add_argument("--device", default=None, help="default: cuda when available (mjwarp), else cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-seconds", type=float, default=None, help="stop after the iteration that crosses this much training time")
    args = p.parse_args(argv)
    if args.num_envs < 1 or args.iterations < 1 or args.num_steps < 1:
        p.error("--num-envs, --iterations and --num-steps must be >= 1")
    return args


def main(argv=None) -> list[dict]:
    """Train; prints one line per iteration and, last, ``SPS: <float>`` over the steady-state
    iterations (the first, with compilation and warm-up, left out). Returns the metrics history."""
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    env = make_env(args.env, args.num_envs, backend=args.backend, device=args.device, seed=args.seed)
    if env.device.type == "cpu":
        # The tensors here are tiny ([num_envs, <60]): intra-op threads only add overhead, and the
        # cores are better spent in MuJoCo's rollout threads.
        torch.set_num_threads(1)
    ppo = PPO(env.obs_dim, env.act_dim, env.num_envs, device=env.device, cfg=PPOConfig(num_steps=args.num_steps), seed=args.seed)
    print(
        f"env={env.name} backend={env.backend} device={env.device} num_envs={env.num_envs} "
        f"obs_dim={env.obs_dim} act_dim={env.act_dim} sim_dt={env.sim_dt:g} decimation={env.decimation} "
        f"policy_dt={env.policy_dt:g} horizon={env.max_episode_steps}",
        flush=True,
    )
    history = []
    steps_per_iteration = ppo.cfg.num_steps * env.num_envs

    def report(metrics):
        it = metrics["iteration"]
        metrics["env_steps"] = (it + 1) * steps_per_iteration
        history.append(metrics)
        print(
            f"iter {it:4d}  reward/step {metrics['reward_per_step']:8.4f}  "
            f"mean episode reward {metrics['episode_return']:9.3f}  episodes {int(metrics['episodes']):5d}  "
            f"value_loss {metrics['value_loss']:8.4f}  std {metrics['action_std']:.3f}  SPS {metrics['sps']:,.0f}",
            flush=True,
        )

    obs = env.reset()
    for it in range(args.iterations):
        with torch.inference_mode():
            for _ in range(ppo.cfg.num_steps):
                actions = ppo.act(obs)
                obs, reward, done, info = env.step(actions)
                ppo.process_env_step(reward, done, info)
        ppo.update(obs)
        # no wait for the GPU: the metrics are copied to pinned memory in the background, and the
        # iterations whose copies have landed are printed (on the GPU, usually the previous one)
        for metrics in ppo.log_iteration_async():
            report(metrics)
        trained_s = sum(steps_per_iteration / m["sps"] for m in history)
        if args.max_seconds is not None and trained_s >= args.max_seconds:
            break
    for metrics in ppo.drain_metrics():  # after training: the last copies (the loop's only wait)
        report(metrics)
    steady = history[1:] or history
    steps = sum(ppo.cfg.num_steps * env.num_envs for _ in steady)
    print(f"SPS: {steps / sum(ppo.cfg.num_steps * env.num_envs / m['sps'] for m in steady):.1f}", flush=True)
    return history


if __name__ == "__main__":
    main()

"""The PPO loop of ``examples/train.py`` with the classic GPU anti-patterns planted — for perfkit to find.

    python examples/train_naive.py                          # every anti-pattern active
    python examples/train_naive.py --fix item_log,env_loop  # those two replaced by their sync-free form
    python examples/train_naive.py --fix all                # behaves like train.py
    perfkit profile examples/train_naive.py                 # reports each one with its line

Each planted anti-pattern sits on its own line, marked ``# ANTI-PATTERN <name>``, inside an
``if``/``else`` whose other branch is the fix (what train.py does). Names for ``--fix``:

  item_log       per-step ``.item()`` logging            -> accumulate on the device, read once per iteration
  nonzero_reset  ``nonzero()`` to find the envs to reset -> ``masked_fill_`` with the boolean mask
  env_loop       a Python loop over envs                 -> one batched op
  fresh_tensors  new tensors every step                  -> in-place update of a preallocated buffer
  print_tensor   ``print`` of a device tensor            -> print host floats already read
  cpu_numpy      a blocking ``.cpu().numpy()`` per step  -> the on-device episode count PPO keeps
  list_gather    indexing with a Python list             -> ``index_select`` with a device index tensor

The last line printed is ``SPS: <float>``: env steps per second over the steady-state iterations
(the first one — compilation, warm-up — left out), timed between per-iteration host reads.
"""

from __future__ import annotations

import argparse

import torch

from perfkit.envs import BACKENDS, ENV_NAMES, make_env
from perfkit.rl import PPO, PPOConfig

ANTI_PATTERNS = ("item_log", "nonzero_reset", "env_loop", "fresh_tensors", "print_tensor", "cpu_numpy", "list_gather")
WATCHED_ENVS = [0, 1, 2, 3]  # a few envs whose torso height is printed each iteration


def parse_fix(text: str) -> frozenset[str]:
    names = {n.strip() for n in text.split(",") if n.strip()}
    if "all" in names:
        return frozenset(ANTI_PATTERNS)
    unknown = sorted(names - set(ANTI_PATTERNS))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown anti-pattern(s) {unknown}; expected names from {list(ANTI_PATTERNS)} or 'all'")
    return frozenset(names)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="ant", choices=ENV_NAMES)
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--iterations", type=int, default=40)
    p.add_argument("--num-steps", type=int, default=32, help="rollout length per env per iteration")
    p.add_argument("--backend", default="auto", choices=BACKENDS)
    p.add_argument("--device", default=None, help="default: cuda when available (mjwarp), else cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fix", type=parse_fix, default=frozenset(), metavar="NAME[,NAME...]", help="replace these anti-patterns by their fix ('all' for every one)")
    args = p.parse_args(argv)
    if args.num_envs < len(WATCHED_ENVS) or args.iterations < 1 or args.num_steps < 1:
        p.error(f"--num-envs must be >= {len(WATCHED_ENVS)} (envs {WATCHED_ENVS} are watched); --iterations and --num-steps >= 1")
    return args


def main(argv=None) -> float:
    args = parse_args(argv)
    fix = args.fix
    torch.manual_seed(args.seed)
    env = make_env(args.env, args.num_envs, backend=args.backend, device=args.device, seed=args.seed)
    if env.device.type == "cpu":
        torch.set_num_threads(1)  # as in train.py: tiny tensors, cores go to MuJoCo's rollout threads
    ppo = PPO(env.obs_dim, env.act_dim, env.num_envs, device=env.device, cfg=PPOConfig(num_steps=args.num_steps), seed=args.seed)
    print(f"env={env.name} backend={env.backend} device={env.device} num_envs={env.num_envs} fixed={sorted(fix) or 'none'}", flush=True)

    watched_idx = torch.tensor(WATCHED_ENVS, device=env.device)  # the fix for list_gather: index on the device, made once
    watched_obs = torch.zeros((len(WATCHED_ENVS), env.obs_dim), device=env.device)
    ep_return = torch.zeros(env.num_envs, device=env.device)  # this script's own per-env episode tracker
    step_rewards: list[float] = []
    episodes_host = 0
    steady_steps, steady_time = 0, 0.0

    obs = env.reset()
    for it in range(args.iterations):
        with torch.inference_mode():
            for _ in range(ppo.cfg.num_steps):
                actions = ppo.act(obs)
                if "env_loop" in fix:
                    actions.clamp_(-1.0, 1.0)
                else:
                    for i in range(env.num_envs):  # ANTI-PATTERN env_loop: one tiny kernel per env
                        actions[i].clamp_(-1.0, 1.0)
                obs, reward, done, info = env.step(actions)
                ppo.process_env_step(reward, done, info)

                if "item_log" not in fix:
                    step_rewards.append(reward.mean().item())  # ANTI-PATTERN item_log: host read every step
                if "fresh_tensors" in fix:
                    ep_return.add_(reward)
                else:
                    ep_return = torch.zeros(env.num_envs, device=env.device) + ep_return + reward  # ANTI-PATTERN fresh_tensors
                if "nonzero_reset" in fix:
                    ep_return.masked_fill_(done, 0.0)
                else:
                    finished = done.nonzero(as_tuple=True)[0]  # ANTI-PATTERN nonzero_reset: data-dependent shape
                    ep_return[finished] = 0.0
                if "cpu_numpy" not in fix:
                    done_host = done.cpu().numpy()  # ANTI-PATTERN cpu_numpy: blocking copy every step
                    episodes_host += int(done_host.sum())
                if "list_gather" in fix:
                    torch.index_select(obs, 0, watched_idx, out=watched_obs)
                else:
                    watched_obs.copy_(obs[[0, 1, 2, 3]])  # ANTI-PATTERN list_gather: the list (WATCHED_ENVS) is copied host->device

        ppo.update(obs)
        metrics = ppo.log_iteration()  # one device->host read per iteration (as in train.py)
        if it > 0 or args.iterations == 1:
            steady_steps += ppo.cfg.num_steps * env.num_envs
            steady_time += ppo.cfg.num_steps * env.num_envs / metrics["sps"]
        mean_step_reward = sum(step_rewards) / len(step_rewards) if step_rewards else metrics["reward_per_step"]
        step_rewards.clear()
        episodes = episodes_host if "cpu_numpy" not in fix else int(metrics["episodes"])
        episodes_host = 0
        print(
            f"iter {it:4d}  reward/step {mean_step_reward:8.4f}  mean episode reward {metrics['episode_return']:9.3f}  "
            f"episodes {episodes:5d}  SPS {metrics['sps']:,.0f}",
            flush=True,
        )
        if "print_tensor" not in fix:
            print("  watched envs' torso height:", watched_obs[:, 0])  # ANTI-PATTERN print_tensor: formats (and syncs) on the host
    sps = steady_steps / steady_time
    print(f"SPS: {sps:.1f}", flush=True)
    return sps


if __name__ == "__main__":
    main()

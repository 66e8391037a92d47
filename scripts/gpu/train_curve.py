"""Train PPO on the reference env with examples/train.py and record the reward curve.

    python3 scripts/gpu/train_curve.py --out DIR [--env ant] [--num-envs 4096] [--iterations 300]
                                      [--max-seconds 90] [--backend auto] [--seed 0]

On the GPU (default: mjwarp at 4096 envs) it trains until ``--iterations`` or ``--max-seconds`` of
training time, whichever comes first; on a CPU machine pass e.g. ``--num-envs 64 --iterations 40``.
Writes DIR/train_curve.json (every iteration's metrics), DIR/train_curve.md (the curve as a table
and the command) and DIR/train_curve.png (reward per step and mean episode reward vs env steps);
prints the curve. Exits 1 if the reward did not rise (mean of the last 10% of iterations vs the
first 10%).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def load_train():
    spec = importlib.util.spec_from_file_location("perfkit_example_train", os.path.join(ROOT, "examples", "train.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--env", default="ant")
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--iterations", type=int, default=300)
    p.add_argument("--max-seconds", type=float, default=90.0)
    p.add_argument("--backend", default="auto")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)

    train = load_train()
    train_args = ["--env", args.env, "--num-envs", str(args.num_envs), "--iterations", str(args.iterations),
                  "--backend", args.backend, "--seed", str(args.seed), "--max-seconds", str(args.max_seconds)]
    t0 = time.perf_counter()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        history = train.main(train_args)
    wall = time.perf_counter() - t0
    log = buf.getvalue()
    header = next((ln for ln in log.splitlines() if ln.startswith("env=")), "")
    sps_line = next((ln for ln in reversed(log.splitlines()) if ln.startswith("SPS:")), "SPS: ?")

    n = len(history)
    k = max(1, n // 10)
    first = sum(m["reward_per_step"] for m in history[:k]) / k
    last = sum(m["reward_per_step"] for m in history[-k:]) / k
    rose = last > first
    from perfkit import machine

    command = "python3 examples/train.py " + " ".join(train_args)
    result = {"command": command, "script": "python3 scripts/gpu/train_curve.py " + " ".join(argv or sys.argv[1:]),
              "env": header, "final": sps_line, "wall_s": wall, "machine": machine.describe(),
              "reward_per_step_first10pct": first, "reward_per_step_last10pct": last, "rose": rose, "history": history}
    with open(os.path.join(args.out, "train_curve.json"), "w") as f:
        json.dump(result, f, indent=1)

    step = max(1, n // 25)
    rows = [m for i, m in enumerate(history) if i % step == 0 or i == n - 1]
    md = ["# PPO reward curve on the reference env", "", f"Command: `{command}`  ", f"{header}  ",
          f"Machine: {result['machine'].get('device', '?')}; {sps_line}; wall {wall:.0f} s", "",
          f"Reward per step: first 10% of iterations {first:.3f} -> last 10% {last:.3f} ({'rose' if rose else 'DID NOT RISE'}).", "",
          "| iteration | env steps | reward/step | mean episode reward | episodes | action std | SPS |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for m in rows:
        md.append(f"| {m['iteration']} | {m['env_steps']:,} | {m['reward_per_step']:.4f} | {m['episode_return']:.2f} | "
                  f"{int(m['episodes'])} | {m['action_std']:.3f} | {m['sps']:,.0f} |")
    with open(os.path.join(args.out, "train_curve.md"), "w") as f:
        f.write("\n".join(md) + "\n")

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
        xs = [m["env_steps"] for m in history]
        ax[0].plot(xs, [m["reward_per_step"] for m in history])
        ax[0].set(xlabel="env steps", ylabel="reward per step", title="reward per step")
        ax[1].plot(xs, [m["episode_return"] for m in history])
        ax[1].set(xlabel="env steps", ylabel="mean episode reward", title="mean episode reward (episodes ended)")
        fig.suptitle(header, fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, "train_curve.png"), dpi=110)
    except Exception as exc:  # the curve is in the JSON and Markdown anyway
        print(f"(no plot: {exc})")

    print(header)
    for m in rows:
        print(f"iter {m['iteration']:4d}  env steps {m['env_steps']:>11,}  reward/step {m['reward_per_step']:8.4f}  "
              f"mean episode reward {m['episode_return']:9.2f}")
    print(f"{sps_line}  ({n} iterations, {wall:.0f} s wall); reward/step {first:.3f} -> {last:.3f}: {'rose' if rose else 'DID NOT RISE'}")
    print(f"wrote {args.out}/train_curve.json, train_curve.md, train_curve.png")
    return 0 if rose else 1


if __name__ == "__main__":
    sys.exit(main())

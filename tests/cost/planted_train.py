"""A toy training loop with two planted anti-patterns and `--fix NAME`, the interface of examples/train_naive.py:
the CPU end-to-end test of scripts/gpu/probe_validate.py runs it (``main(argv)`` returns the SPS)."""
import argparse
import time


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--num-envs", type=int, default=64)
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backend", default="torch")
    ap.add_argument("--env", default="toy")
    ap.add_argument("--fix", default="")
    a = ap.parse_args(argv)
    fixes = set(a.fix.split(",")) if a.fix else set()

    import torch  # after argparse: `--help` stays fast

    class Env:
        def __init__(self, n):
            self.num_envs = n
            self.state = torch.zeros(n, 8)

        def step(self, action):
            if "env_loop" in fixes:
                self.state.mul_(0.5).add_(action)
            else:
                for i in range(self.num_envs):  # ANTI-PATTERN env_loop
                    self.state[i] = self.state[i] * 0.5 + action[i]
            return self.state

    torch.manual_seed(a.seed)
    env = Env(a.num_envs)
    action = torch.rand(a.num_envs, 8)
    total = torch.zeros(())
    warm = min(5, a.iterations - 1)
    t0 = time.perf_counter()
    for it in range(a.iterations):
        if it == warm:
            t0 = time.perf_counter()
        obs = env.step(action)
        total += obs.sum()
        if "item_log" not in fixes:
            log = total.item()  # planted: item_log
    sps = (a.iterations - warm) * a.num_envs / (time.perf_counter() - t0)
    print(f"SPS: {sps:.1f}")
    return sps


if __name__ == "__main__":
    main()

"""examples/train.py with a planted, known slowdown, for measuring the compare gate
(``benchmarks/compare_gate.py``): every env step period is stretched by ``--slowdown`` (0.10 = +10 %)
by burning CPU for that share of the wall time since the previous step began (a sleep would overshoot
by the scheduler's wake-up latency on a loaded machine, planting more than asked; a fixed amount of
work would take longer under load, planting more too). examples/train.py itself is
unchanged; its own arguments follow.

    perfkit profile -o slow.json benchmarks/slowed_train.py --slowdown 0.10 --iterations 8
"""

from __future__ import annotations

import argparse
import pathlib
import runpy
import sys
import time

TRAIN = pathlib.Path(__file__).resolve().parent.parent / "examples" / "train.py"


def _spin_rate() -> float:
    """Iterations per second of ``sum(range(n))``, a busy wait that runs in C."""
    n, best = 200_000, float("inf")
    for _ in range(3):
        t = time.perf_counter()
        sum(range(n))
        best = min(best, time.perf_counter() - t)
    return n / best


def slowed(env, share: float):
    """``env`` whose class's ``step`` first burns CPU for ``share`` of the wall time since the last
    step began: a slowdown of ``share`` whatever the machine's load. The wait runs in at most ~8 chunks
    of ``sum(range(n))``, too few iterations for perfkit to report the wait as a per-env loop (a plain
    Python spin would be one, and traced)."""
    cls = type(env)
    last = [None]
    rate = _spin_rate() if share > 0 else 0.0

    def step(self, actions):
        now = time.perf_counter()
        if last[0] is not None and share > 0:
            wait = share * (now - last[0])
            until, chunk = now + wait, max(1000, int(rate * wait / 8))
            while time.perf_counter() < until:
                sum(range(chunk))
        last[0] = time.perf_counter()
        return cls.step(self, actions)

    env.__class__ = type(f"Slowed{cls.__name__}", (cls,), {"step": step})
    return env


def main() -> None:
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--slowdown", type=float, default=0.0)
    known, rest = ap.parse_known_args()
    import perfkit.envs

    make_env = perfkit.envs.make_env
    perfkit.envs.make_env = lambda *a, **k: slowed(make_env(*a, **k), known.slowdown)
    sys.argv = [str(TRAIN), *rest]
    runpy.run_path(str(TRAIN), run_name="__main__")


if __name__ == "__main__":
    main()

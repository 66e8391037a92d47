"""Where perfkit's added start-up goes: py-spy over ``examples/train.py``'s start, plainly and under
``perfkit profile``, in alternating fresh processes.

    python3 scripts/gpu/startup.py --out DIR [--rounds 2] [--num-envs 4096] [--idle] [--native]

On the H200 (session 10, ``--line-times``) train.py's first line of output — printed after ``make_env``
and ``PPO()``, before any step — came 2.3 s (256 envs) and 4.5 s (4096 envs) later under perfkit, while
the records' self blocks saw ~0.25 s of start-up. This runs the script for one short iteration (the start
is nearly all of it) under ``py-spy record --format raw`` (``--idle``: waits in C too; ``--native``: C/C++
frames) and lists, per function, the samples each arm spent with it on the stack (inclusive, median over
the rounds) and the functions that gained most under perfkit. Writes DIR/startup.md, DIR/startup.json
and each run's raw stacks.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = "examples/train.py"
# the frames that launch the script under `python -m perfkit profile` (on every sample of that arm)
_LAUNCH = ("(<frozen runpy>)", "(perfkit/__main__.py)", "(perfkit/cli/profile.py)", "(perfkit/profile/runner.py)",
           "(click/core.py)", "(click/decorators.py)")


def inclusive(raw: str) -> tuple[collections.Counter, int]:
    """``{function (file:line dropped): samples with it on the stack}`` and the total samples."""
    out: collections.Counter = collections.Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        total += int(n)
        seen = set()
        for frame in stack.split(";"):
            name = frame.split(" (")[0] + (" (" + frame.split(" (")[1].split(":")[0] + ")" if " (" in frame else "")
            if name not in seen:
                seen.add(name)
                out[name] += int(n)
    return out, total


def run(arm: str, i: int, a: argparse.Namespace, pyspy: str, out: Path) -> dict:
    args = [SCRIPT, "--backend", a.backend, "--num-envs", str(a.num_envs), "--iterations", "1", "--num-steps", "4"]
    cmd = [sys.executable, *args] if arm == "plain" else [sys.executable, "-m", "perfkit", "profile", "-q", "-o",
                                                          str(out / f"r{i}-{arm}.json"), *args]
    raw = out / f"r{i}-{arm}.txt"
    # (py-spy takes native frames only by pausing the process at each sample: --native runs blocking)
    spy = [pyspy, "record", "--rate", str(a.rate), "--format", "raw", "--output", str(raw),
           *(["--native"] if a.native else ["--nonblocking"]), *(["--idle"] if a.idle else []), "--", *cmd]
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", PYTHONUNBUFFERED="1")
    t0 = time.perf_counter()
    p = subprocess.run(spy, cwd=ROOT, capture_output=True, text=True, env=env, timeout=a.timeout)
    wall = time.perf_counter() - t0
    (out / f"r{i}-{arm}.log").write_text(p.stdout + p.stderr)
    counts, total = inclusive(raw.read_text()) if raw.exists() else (collections.Counter(), 0)
    return {"arm": arm, "round": i, "exit": p.returncode, "wall_s": round(wall, 2), "samples": total, "counts": counts}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--num-envs", type=int, default=4096)
    ap.add_argument("--rate", type=int, default=100)
    ap.add_argument("--backend", default="mjwarp", help="train.py's --backend (mujoco: the CPU path, for a check off the GPU)")
    ap.add_argument("--idle", action="store_true")
    ap.add_argument("--native", action="store_true")
    ap.add_argument("--timeout", type=int, default=240)
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    pyspy = shutil.which("py-spy") or "/tmp/site/bin/py-spy"
    runs = []
    for i in range(1, a.rounds + 1):
        for arm in (("plain", "perfkit") if i % 2 else ("perfkit", "plain")):
            print(f"startup: round {i} {arm}", flush=True)
            runs.append(run(arm, i, a, pyspy, out))
    med: dict[str, collections.Counter] = {}
    for arm in ("plain", "perfkit"):
        mine = [r["counts"] for r in runs if r["arm"] == arm]
        names = set().union(*mine) if mine else set()
        med[arm] = collections.Counter({n: statistics.median(c.get(n, 0) for c in mine) for n in names})
    names = [n for n in set(med["plain"]) | set(med["perfkit"]) if not n.endswith(_LAUNCH)]
    gained = sorted(names, key=lambda n: med["plain"].get(n, 0) - med["perfkit"].get(n, 0))
    lines = ["# perfkit's added start-up on train.py, by function (py-spy)", "",
             f"`python3 scripts/gpu/startup.py {' '.join(argv if argv is not None else sys.argv[1:])}` — "
             f"{a.num_envs} envs, one iteration of 4 steps, {a.rate} Hz" + (", idle" if a.idle else "")
             + (", native" if a.native else ""), "",
             "| round | arm | exit | wall s | samples |", "|---:|---|---:|---:|---:|"]
    lines += [f"| {r['round']} | {r['arm']} | {r['exit']} | {r['wall_s']} | {r['samples']} |" for r in runs]
    lines += ["", f"Functions by samples gained under perfkit (median over the rounds, inclusive; {1000 / a.rate:g} ms "
              "a sample):", "", "| function | plain | perfkit | gained |", "|---|---:|---:|---:|"]
    for n in gained[:a.top]:
        p, k = med["plain"].get(n, 0), med["perfkit"].get(n, 0)
        lines.append(f"| `{n}` | {p:g} | {k:g} | {k - p:+g} |")
    (out / "startup.md").write_text("\n".join(lines) + "\n")
    (out / "startup.json").write_text(json.dumps([{k: v for k, v in r.items() if k != "counts"} for r in runs], indent=1))
    print((out / "startup.md").read_text())
    return 0 if all(r["exit"] == 0 for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())

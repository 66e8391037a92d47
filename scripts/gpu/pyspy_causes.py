"""Where the host's time goes under perfkit, from outside the process: py-spy samples the manager
env's training script plainly and under ``perfkit profile``, in alternating fresh processes, and the
collapsed stacks are split by what the innermost interesting frame belongs to.

    python3 scripts/gpu/pyspy_causes.py --out DIR [--rounds 2] [--num-envs 4096] [--iterations 8]
    python3 scripts/gpu/pyspy_causes.py --summarize DIR      # re-read the raw stacks of an earlier run

py-spy (``--wheels`` folder or PATH) samples the main thread at ``--rate`` Hz, idle samples only with ``--idle``; a
CUDA sync spin-waits in the driver, so it counts as the Python line that asked for it. Only the
samples inside ``OnPolicyRunner.learn`` count (the script's two calls: the warm-up iteration and the
timed ones); only the second, the script's timed window, counts here, so imports, env construction, the
warm-up iteration (perfkit's discovery and sampled step) and perfkit's record writing stay out. Each sample is put
in one class, by its innermost Python frame:

* ``perfkit``: the innermost frame is perfkit's own code (a hook's body, a sink, the sync-warning path;
  a hook's line that calls the original op too, so a sync's wait can land here: see its line);
* ``warnings``: Python's ``warnings`` module (the runtime's sync reports on their way to perfkit);
* ``program``: everything else (the script, torch, the env, rsl_rl: what a plain run does too).

The per-class sample counts divided by the run's env steps give ms/step per class (at the sampling
rate); the difference between the arms is what perfkit added and where. The leaf functions that gained
most samples are listed too.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import time

from perfkit.overhead.measure import DEFAULT_METRIC, compile_metric, parse_metric

SCRIPT = "examples/manager_env/train_rsl_rl.py"
_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^():]*):(?P<line>\d+)\)$")


def _frames(stack: str) -> list[tuple[str, str, int]]:
    out = []
    for part in stack.split(";"):
        m = _FRAME.match(part)
        out.append((m["func"], m["file"], int(m["line"])) if m else (part, "", 0))
    return out


def _learn_caller(frames: list[tuple[str, str, int]]) -> tuple[str, int] | None:
    """(file, line) of the script's call of ``OnPolicyRunner.learn`` this sample is under, if any."""
    for k, (func, path, _) in enumerate(frames):
        if func.endswith("learn") and "on_policy_runner" in path and k:
            return frames[k - 1][1], frames[k - 1][2]
    return None


# the timed window's samples by the rsl_rl phase they are under (inclusive: a sample under PPO.update is
# the learning phase's, whatever it calls): where a difference between the arms lies
PHASES = {
    "learning (PPO.update)": {"PPO.update"},
    "env step": {"RslRlVecEnvWrapper.step"},
    "policy (PPO.act)": {"PPO.act"},
    "returns": {"PPO.compute_returns"},
    "logging": {"Logger.log", "Logger.process_env_step"},
}


def classify(frames: list[tuple[str, str, int]]) -> str:
    """The class of one sample from its frames (root first): that of its innermost frame."""
    path = "/" + frames[-1][1].replace("\\", "/")
    if "/perfkit/" in path and "/examples/" not in path:
        return "perfkit"
    if path.endswith("/warnings.py"):
        return "warnings"
    return "program"


def summarize_raw(path: str) -> dict:
    """Samples per class and per leaf line in one py-spy ``raw`` file, inside the script's timed window:
    its last call of ``OnPolicyRunner.learn`` (the script calls it twice: one warm-up iteration, then
    the timed ones)."""
    rows = []
    for line in open(path, encoding="utf-8", errors="replace"):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if stack and count.isdigit():
            frames = _frames(stack)
            rows.append((frames, _learn_caller(frames), int(count)))
    callers = {c for _, c, _ in rows if c is not None}
    timed = max(callers, key=lambda c: c[1]) if callers else None
    classes: collections.Counter = collections.Counter()
    leaves: collections.Counter = collections.Counter()
    phases: collections.Counter = collections.Counter()
    for frames, caller, n in rows:
        if caller is None or caller != timed:
            continue
        classes[classify(frames)] += n
        func, file, ln = frames[-1]
        leaves[f"{func} ({os.path.basename(file)}:{ln})"] += n
        phases["all"] += n
        funcs = {f for f, _, _ in frames}
        for phase, names in PHASES.items():
            if funcs & names:
                phases[phase] += n
    return {"classes": dict(classes), "leaves": dict(leaves), "phases": dict(phases)}


def run_arm(arm: str, i: int, args: argparse.Namespace, pyspy: str) -> dict:
    script = [SCRIPT, "--backend", args.backend, "--device", args.device, "--num-envs", str(args.num_envs),
              "--iterations", str(args.iterations), "--num-steps", str(args.num_steps)]
    cmd = [sys.executable, *script] if arm == "plain" else [
        sys.executable, "-m", "perfkit", "profile", "-q", "-o", os.path.join(args.out, f"record-{i}.json"), *script]
    raw = os.path.join(args.out, f"{arm}-{i}.raw.txt")
    t0 = time.perf_counter()
    native = ["--native"] if args.native else []
    idle = ["--idle"] if args.idle else []
    proc = subprocess.run([pyspy, "record", *native, *idle, "-r", str(args.rate), "-f", "raw", "--full-filenames", "-o", raw, "--", *cmd],
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    sps = parse_metric(proc.stdout, compile_metric(DEFAULT_METRIC))
    return {"arm": arm, "round": i, "rc": proc.returncode, "wall_s": round(wall, 2), "sps": sps,
            "raw": os.path.basename(raw), "stderr_tail": proc.stderr[-800:]}


def report(out: str, runs: list[dict], rate: float, steps: int) -> str:
    """The table per run and the leaf lines that gained most (``steps``: the timed window's env steps)."""
    by_arm: dict[str, list[dict]] = collections.defaultdict(list)
    for r in runs:
        path = os.path.join(out, r["raw"])
        if os.path.exists(path):
            r.update(summarize_raw(path))
            by_arm[r["arm"]].append(r)
    lines = [f"# py-spy: the manager env's host time by class ({rate:g} Hz, per env step of "
             f"the {steps} steps of the script's timed `OnPolicyRunner.learn` call)", "",
             "| arm | round | SPS | program ms/step | perfkit ms/step | warnings ms/step |", "|---|---:|---:|---:|---:|---:|"]
    per_step: dict[str, dict[str, list[float]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for arm, rs in by_arm.items():
        for r in rs:
            ms = {c: 1e3 * r["classes"].get(c, 0) / rate / steps for c in ("program", "perfkit", "warnings")}
            for c, v in ms.items():
                per_step[arm][c].append(v)
            lines.append(f"| {arm} | {r['round']} | {r['sps'] or 0:,.0f} | {ms['program']:.2f} | {ms['perfkit']:.2f} "
                         f"| {ms['warnings']:.2f} |")
    names = ["all", *PHASES]
    lines += ["", "By phase (samples under each rsl_rl call, inclusive; ms/step):", "",
              "| arm | round | " + " | ".join(names) + " |", "|---|---:|" + "---:|" * len(names)]
    for arm, rs in by_arm.items():
        for r in rs:
            ph = r.get("phases") or {}
            lines.append(f"| {arm} | {r['round']} | " + " | ".join(f"{1e3 * ph.get(n, 0) / rate / steps:.2f}" for n in names)
                         + " |")
    if "plain" in by_arm and "perfkit" in by_arm:
        gain: collections.Counter = collections.Counter()
        for arm, sign in (("perfkit", 1), ("plain", -1)):
            for r in by_arm[arm]:
                for leaf, n in r["leaves"].items():
                    gain[leaf] += sign * n / len(by_arm[arm])
        lines += ["", "Leaf functions with the most samples gained under perfkit (mean per run, ms/step):", ""]
        for leaf, n in gain.most_common(25):
            lines.append(f"* {leaf}: +{1e3 * n / rate / steps:.3f}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=None)
    p.add_argument("--summarize", default=None, metavar="DIR")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--iterations", type=int, default=8)
    p.add_argument("--num-steps", type=int, default=24)
    p.add_argument("--rate", type=int, default=250, help="samples a second (py-spy takes an integer)")
    p.add_argument("--backend", default="mjwarp")
    p.add_argument("--native", action="store_true", help="py-spy --native: C/C++ frames too (it stops the process "
                   "for each sample: on the H200 the manager env ran at ~6,000 env steps/s instead of ~160,000 at 250 Hz)")
    p.add_argument("--idle", action="store_true", help="py-spy --idle: samples of a waiting thread too (a blocking sync)")
    p.add_argument("--arms", nargs="+", default=["plain", "perfkit"])
    p.add_argument("--device", default="cuda")
    p.add_argument("--pyspy", default=None, help="the py-spy binary (default: PATH, then /tmp/site/bin)")
    a = p.parse_args(argv)
    steps = (a.iterations - 1) * a.num_steps  # the timed learn call
    if a.summarize:
        runs = json.load(open(os.path.join(a.summarize, "runs.json")))
        print(report(a.summarize, runs, a.rate, steps), end="")
        return 0
    pyspy = a.pyspy or shutil.which("py-spy") or "/tmp/site/bin/py-spy"
    os.makedirs(a.out, exist_ok=True)
    runs = []
    for i in range(a.rounds):
        for arm in (a.arms if i % 2 == 0 else a.arms[::-1]):
            runs.append(run_arm(arm, i, a, pyspy))
            print(json.dumps({k: v for k, v in runs[-1].items() if k != "stderr_tail"}), flush=True)
    json.dump(runs, open(os.path.join(a.out, "runs.json"), "w"), indent=1)
    text = report(a.out, runs, a.rate, steps)
    open(os.path.join(a.out, "pyspy-causes.md"), "w").write(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

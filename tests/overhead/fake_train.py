"""A stand-in training script for the overhead tests: it knows which arm runs it and does what the
plan says for that arm's n-th run.

    python fake_train.py PLAN.json LOG

PLAN.json: ``{"plain": [{"sps": 100.0}, ...], "perfkit": [...], "torch-profiler": [...]}``; an entry
may also give ``"exit"`` (status), ``"stderr"`` (a line to print there), ``"sleep"`` (seconds) and
``"child"`` (a file to write the pid of a child process that sleeps, for the kill-the-group test).
The n-th run of an arm takes entry n (the last one once they run out). Each run appends its arm
to LOG, so the order the runs came in can be read back.
"""

import json
import os
import subprocess
import sys
import time


def which_arm() -> str:
    if "perfkit.profile.session" in sys.modules:  # run by `perfkit profile`
        return "perfkit"
    if "torch" in sys.modules:  # the torch.profiler arm imported torch before running us
        import torch

        if torch.autograd.profiler._is_profiler_enabled:
            return "torch-profiler"
    return "plain"


def main() -> int:
    plan_path, log_path = sys.argv[1], sys.argv[2]
    with open(plan_path) as f:
        plan = json.load(f)
    arm = which_arm()
    try:
        with open(log_path) as f:
            n = sum(1 for line in f if line.strip() == arm)
    except FileNotFoundError:
        n = 0
    with open(log_path, "a") as f:
        f.write(arm + "\n")
    entries = plan.get(arm) or [{}]
    e = entries[min(n, len(entries) - 1)]
    print(f"fake_train: arm {arm}, run {n + 1}, argv {sys.argv[3:]}", flush=True)
    if e.get("child"):
        c = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        with open(e["child"], "w") as f:
            f.write(str(c.pid))
    if e.get("stderr"):
        print(e["stderr"], file=sys.stderr, flush=True)
    if e.get("sleep"):
        time.sleep(e["sleep"])
    if e.get("sps") is not None:
        print(f"SPS: {e['sps']}", flush=True)
    return int(e.get("exit", 0))


if __name__ == "__main__":
    sys.exit(main())

"""The manager env's whole training run plainly and under perfkit with its parts switched off one at a
time, each run a fresh process, the arms interleaved in a rotating order (issue 23's diagnosis by cause):

    python3 scripts/gpu/overhead_arms.py --out DIR [--rounds 2] [--arms plain warn-only perfkit ...]

Arms: ``plain``; ``warn-only`` (plain, with torch's sync-debug warnings caught as perfkit catches
them); ``perfkit`` (the default); ``perfkit-hooks`` (``sync_source = "hooks"``: no runtime warnings, a
Python hook on every sync-prone op); ``perfkit-untimed`` (no CUDA-event timed steps, no NVTX, no
sampled steps). Settings go through a ``[tool.perfkit]`` table in a scratch working directory. Every run
goes through ``gc_window.py``, so each row also says what the garbage collector cost inside the script's
timed window. The figure per arm is the median over rounds of its SPS over the round's plain SPS.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

from perfkit.overhead.measure import DEFAULT_METRIC, compile_metric, parse_metric, rotation

SPS_LINE = compile_metric(DEFAULT_METRIC)  # the script's own steady-state `SPS: <float>` line, as `perfkit overhead` reads it
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "examples/manager_env/train_rsl_rl.py")
GCW = os.path.join(ROOT, "scripts/gpu/gc_window.py")
SETTINGS = {
    "perfkit": "",
    "perfkit-hooks": 'sync_source = "hooks"\n',
    "perfkit-untimed": 'timing_every = 1000000000\nnvtx = "off"\nsample_steps = []\n',
}


def run(arm: str, i: int, a: argparse.Namespace) -> dict:
    args = [SCRIPT, "--backend", a.backend, "--device", a.device, "--num-envs", str(a.num_envs),
            "--iterations", str(a.iterations), "--num-steps", str(a.num_steps)]
    cwd = os.path.join(a.out, f"cwd-{arm}")
    os.makedirs(cwd, exist_ok=True)
    if arm in SETTINGS:
        with open(os.path.join(cwd, "pyproject.toml"), "w") as f:
            f.write("[tool.perfkit]\n" + SETTINGS[arm])
        rec = os.path.join(a.out, f"{arm}-{i}.json")
        cmd = [sys.executable, "-m", "perfkit", "profile", "-q", "-o", rec, GCW, *args]
    else:
        rec = None
        cmd = [sys.executable, GCW, *(["--warn-only"] if arm == "warn-only" else []), *args]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=a.timeout)
    wall = time.perf_counter() - t0
    sps = parse_metric(p.stdout, SPS_LINE)
    gcw = re.findall(r"^GC_WINDOW (.*)$", p.stderr, re.M)
    row = {"arm": arm, "round": i, "rc": p.returncode, "wall_s": round(wall, 2), "sps": sps,
           "gc": json.loads(gcw[-1]) if gcw else None}
    if rec and os.path.exists(rec):
        r = json.load(open(rec))
        row["self"] = r.get("self")
        row["syncs_per_step"] = round(sum(f.get("per_step", 0) for f in r.get("findings", []) if f.get("kind") == "sync"), 2)
    if p.returncode:
        row["stderr_tail"] = p.stderr[-1500:]
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--arms", nargs="+", default=["plain", "warn-only", "perfkit", "perfkit-hooks", "perfkit-untimed"])
    ap.add_argument("--num-envs", type=int, default=4096)
    ap.add_argument("--iterations", type=int, default=6)
    ap.add_argument("--num-steps", type=int, default=24)
    ap.add_argument("--timeout", type=float, default=200)
    ap.add_argument("--backend", default="mjwarp")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args(argv)
    a.out = os.path.abspath(a.out)
    os.makedirs(a.out, exist_ok=True)
    rows = []
    for i in range(a.rounds):
        for arm in rotation(a.arms, i):
            rows.append(run(arm, i, a))
            print(json.dumps({k2: v for k2, v in rows[-1].items() if k2 != "self"}), flush=True)
            json.dump(rows, open(os.path.join(a.out, "arms.json"), "w"), indent=1)
    plain = {r["round"]: r["sps"] for r in rows if r["arm"] == "plain" and r["sps"]}
    lines = [f"# The manager env's whole run by arm ({a.num_envs} envs, {a.iterations} x {a.num_steps} steps, "
             f"{a.rounds} rounds, fresh processes, rotating order)", "",
             "| arm | per-round SPS / plain | median | GC ms in the timed window (gen0/1/2, median) |", "|---|---|---:|---|"]
    for arm in a.arms:
        rs = [r for r in rows if r["arm"] == arm and r["sps"] and r["round"] in plain]
        ratios = [r["sps"] / plain[r["round"]] for r in rs]
        gcs = [r["gc"]["window"] for r in rs if r.get("gc") and r["gc"].get("window")]
        gcm = "/".join(f"{statistics.median(g[str(n)][1] for g in gcs):.0f}" for n in (0, 1, 2)) if gcs else "-"
        lines.append(f"| {arm} | {', '.join(f'{x:.3f}' for x in ratios)} | "
                     f"{statistics.median(ratios) if ratios else float('nan'):.3f} | {gcm} |")
    text = "\n".join(lines) + "\n"
    open(os.path.join(a.out, "arms.md"), "w").write(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Every sync the runtime makes is hooked, and every hooked one is a runtime sync (issues 11, 22):
``perfkit profile --verify`` on the examples and on real libraries' training loops.

    python3 scripts/gpu/verify.py --out DIR [--sizes 256 4096] [--iterations 6] [--stacks]

For ``examples/train.py`` and ``examples/train_naive.py`` on MuJoCo Warp at each size (and with
``--stacks``: ``examples/manager_env`` through rsl_rl's OnPolicyRunner at 4096 envs, and rsl_rl's runner
on the batched torch cart-pole ``examples/stacks/rsl_rl_torch_env.py`` at 4096 envs), runs
``perfkit profile --verify`` (torch.profiler/CUPTI counts the CUDA runtime's own synchronizing calls
inside steady steps and matches them against perfkit's hooked syncs) and collects each run's verify
block: runtime syncs, hooked syncs, unattributed ones (the target is zero), the per-API split and a
sample of the unattributed calls. Writes DIR/verify.md and DIR/verify.json (after every run, so a
timeout still leaves results) and each run's record and console output; exits 1 when any run has
unattributed syncs or failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from perfkit.profile.verify_agreement import record_rates
from perfkit.record import Run

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ("examples/train.py", "examples/train_naive.py")
# real libraries' loops: (script, its arguments, perfkit's own options) — the warm-up is one iteration
STACKS = (
    ("examples/manager_env/train_rsl_rl.py", ["--num-envs", "4096", "--iterations", "4", "--num-steps", "24",
                                              "--device", "cuda", "--backend", "mjwarp"], ["--warmup-steps", "24"]),
    ("examples/stacks/rsl_rl_torch_env.py", ["--num-envs", "4096", "--iterations", "4", "--num-steps", "16",
                                             "--device", "cuda"], ["--warmup-steps", "16"]),
)


def profile_run(options: list[str], script: str, args: list[str], record: Path, log: Path,
                timeout: int) -> tuple[int, float]:
    """``perfkit profile OPTIONS -o RECORD SCRIPT ARGS`` in the repository root (this checkout first on the
    path), its command and console output written to ``log``: (exit status, 124 on timeout; seconds)."""
    cmd = [sys.executable, "-m", "perfkit", "profile", *options, "-o", str(record), script, *args]
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
        code, text = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        code, text = 124, f"TIMEOUT after {timeout} s\n{e.stdout or ''}\n{e.stderr or ''}"
    seconds = round(time.time() - t0, 1)
    log.write_text(f"$ {' '.join(cmd)}\n# exit {code}, {seconds:.1f} s\n{text}")
    return code, seconds


def run_one(script: str, n: int, iterations: int, out: Path, backend: str, timeout: int,
            args: list[str] | None = None, options: tuple[str, ...] | list[str] = ()) -> dict:
    name = f"{Path(script).stem}-{n}"
    record = out / f"{name}.json"
    if args is None:
        args = ["--num-envs", str(n), "--iterations", str(iterations), "--backend", backend]
    code, seconds = profile_run(["--verify", *options], script, args, record, out / f"{name}.txt", timeout)
    row: dict = {"script": script, "num_envs": n, "exit": code, "seconds": seconds}
    if record.exists():
        rec = json.loads(record.read_text())
        v = (rec.get("extra") or {}).get("verify") or {}
        row.update({k: v.get(k) for k in ("steps", "runtime_syncs", "hooked_syncs", "hooked_without_runtime_sync",
                                          "runtime_reported", "reported_without_runtime_sync", "unattributed",
                                          "runtime_per_step", "unattributed_per_step", "by_api", "sites",
                                          "reported_sites", "unattributed_sites")})
        agreed = v.get("agreement") or {}
        row["agreement"] = {k: agreed.get(k) for k in ("window", "steps", "runtime_per_step", "record_per_step", "ratio",
                                                      "sites_outside_tolerance")}
        row["syncs_per_step"] = round(sum(record_rates(Run.load(record).findings).values()), 4)
        row["per_site"] = agreed.get("sites") or []
        row["sps"] = rec.get("sps")
    return row


def write(out: Path, rows: list[dict], machine: str) -> None:
    (out / "verify.json").write_text(json.dumps({"machine": machine, "runs": rows}, indent=1) + "\n")
    lines = ["# `perfkit profile --verify` on the examples", "", f"Machine: {machine}. Command per row: "
             "`perfkit profile --verify -o R.json SCRIPT --num-envs N --iterations I --backend mjwarp`.", "",
             "| script | envs | steps verified | runtime syncs | hooked | reported by the runtime | counted, no runtime sync "
             "| unattributed | runtime/step | syncs/step (record) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        empty = (r.get("hooked_without_runtime_sync") or 0) + (r.get("reported_without_runtime_sync") or 0)
        lines.append(f"| `{r['script']}` | {r['num_envs']} | {r.get('steps')} | {r.get('runtime_syncs')} | "
                     f"{r.get('hooked_syncs')} | {r.get('runtime_reported')} | **{empty}** | **{r.get('unattributed')}** | "
                     f"{r.get('runtime_per_step')} | {r.get('syncs_per_step')} |" + ("" if r["exit"] == 0 else f" exit {r['exit']}"))
    lines += ["", "Per site: the runtime's syncs per step against the record's over the same steps — the record's "
              "whole steady state when the verify window ran to the end of the run, else the window's own steps "
              "(the block's `agreement`, perfkit/profile/verify_agreement.py; ratio = record / runtime; target 1 ± 0.05).", ""]
    for r in rows:
        a = r.get("agreement") or {}
        lines += [f"`{r['script']}` at {r['num_envs']}: over {a.get('steps')} steps ({a.get('window')}), total "
                  f"{a.get('record_per_step')} vs {a.get('runtime_per_step')} ({a.get('ratio')}), "
                  f"{a.get('sites_outside_tolerance')} sites outside ±5 %", "", "| site | runtime/step | record/step | ratio |",
                  "|---|---:|---:|---:|"]
        lines += [f"| `{s['site']}` | {s['runtime_per_step']} | {s['record_per_step']} | {s['ratio']} |"
                  for s in r.get("per_site") or []]
        lines.append("")
    for r in rows:
        for u in r.get("unattributed_sites") or []:
            lines += ["", f"Unattributed in `{r['script']}` at {r['num_envs']}: {u['count']} at `{u['site']}` "
                      f"({u.get('function')}; {u.get('apis')}); stack {u.get('stack')}"]
        for s in r.get("sites") or []:
            if s.get("hooked_without_runtime_sync"):
                lines += ["", f"No runtime sync in `{r['script']}` at {r['num_envs']}: `{s['site']}` {s['op']} "
                          f"({s['hooked_without_runtime_sync']} of {s['hooked']} hooked calls)"]
    (out / "verify.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 4096])
    ap.add_argument("--iterations", type=int, default=6)
    ap.add_argument("--backend", default="mjwarp")
    ap.add_argument("--timeout", type=int, default=240)
    ap.add_argument("--stacks", action="store_true", help="also the real libraries' loops (rsl_rl)")
    ap.add_argument("--only-stacks", action="store_true", help="only the real libraries' loops")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        import torch

        machine = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    except Exception:
        machine = "?"
    rows: list[dict] = []
    plan = [] if a.only_stacks else [(script, n, None, ()) for n in a.sizes for script in SCRIPTS]
    if a.stacks or a.only_stacks:
        plan += [(script, int(args[1]), args, options) for script, args, options in STACKS]
    for script, n, args, options in plan:
        print(f"verify: {script} at {n} envs", flush=True)
        rows.append(run_one(script, n, a.iterations, out, a.backend, a.timeout, args, options))
        write(out, rows, machine)
        r = rows[-1]
        print(f"   exit {r['exit']}, {r.get('runtime_syncs')} runtime syncs, {r.get('unattributed')} unattributed "
              f"({r['seconds']} s)", flush=True)
    print((out / "verify.md").read_text())
    return 0 if all(r["exit"] == 0 and r.get("unattributed") == 0 for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""On the GPU: env-count sweeps of the reference env (ant and humanoid, MuJoCo Warp), plus the report.

    python3 scripts/gpu/sweeps.py --out DIR [--envs ant,humanoid] [--num-envs 256..32768]
                                  [--max-seconds 2] [--budget-s 330] [--train]
    python3 scripts/gpu/sweeps.py --out DIR --envs none --train     # train.py vs train_naive.py only

1. ``perfkit sweep perfkit.envs:make_env --env-kwarg name=ENV --env-kwarg backend=mjwarp
   --num-envs 256..32768`` for each env -> ``DIR/sweep-ENV/`` (``sweep.json``, ``sweep.csv``,
   ``points/<N>.json`` and ``points/<N>.log``). Each point is a fresh process: warm-up (Warp kernel
   compilation — served from Warp's kernel cache after the first point — and CUDA-graph capture)
   is timed apart; the steady state runs ``--steps`` steps or ``--max-seconds``, whichever ends
   first (at least 10 steps); then ``--session-steps`` instrumented steps give the per-segment split.
2. ``perfkit report DIR/sweep-ant DIR/sweep-humanoid -o DIR/report`` (index.html, report.md, PNGs),
   with this script's command line at the top.
3. With ``--train``: ``perfkit profile`` of ``examples/train.py`` and ``examples/train_naive.py``
   (``--num-envs``/``--iterations`` below) -> ``DIR/train/{train,train_naive}.json``, their report
   side by side in ``DIR/train/report/`` and ``perfkit compare`` of the two in ``DIR/train/compare.md``.

Writes ``DIR/summary.json`` and ``DIR/summary.md`` and prints a short summary. Exits 1 when a sweep
completed no point, a point failed with anything other than out-of-memory, or a training run failed.
Budget: about 16 points x 10-15 s plus first-time kernel compilation. ``--budget-s`` (default 330) is a
safety net: once spent, no new point starts (the rest are recorded as skipped, the report still
written, the exit status 1); ``--per-point-timeout`` bounds a stuck point; ``--skip-existing`` reuses
finished sweeps when rerun.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def fail(msg: str) -> None:
    print(f"sweeps.py: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--envs", default="ant,humanoid", help="comma-separated; 'none' with --train for the training runs only")
    ap.add_argument("--num-envs", default="256..32768")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup-steps", type=int, default=10)
    ap.add_argument("--max-seconds", type=float, default=2.0)
    ap.add_argument("--session-steps", type=int, default=10)
    ap.add_argument("--per-point-timeout", type=float, default=240.0)
    ap.add_argument("--budget-s", type=float, default=330.0,
                    help="all sweeps together: no new point starts after this (the rest are recorded as skipped); "
                         "each env after the first is guaranteed --min-env-s of it")
    ap.add_argument("--min-env-s", type=float, default=45.0)
    ap.add_argument("--gpus", default=None, help="e.g. 0,1 to spread points over GPUs")
    ap.add_argument("--backend", default="mjwarp", choices=["mjwarp", "mujoco"],
                    help="mujoco: a CPU dry run of this script (tiny --num-envs), not the measurement")
    ap.add_argument("--skip-existing", action="store_true",
                    help="reuse DIR/sweep-ENV when it already holds a finished sweep (resume after a time-out)")
    ap.add_argument("--train", action="store_true", help="also profile examples/train.py vs train_naive.py")
    ap.add_argument("--train-num-envs", type=int, default=4096)
    ap.add_argument("--train-iterations", type=int, default=8)
    a = ap.parse_args()

    import torch

    if a.backend == "mjwarp" and not torch.cuda.is_available():
        fail("no CUDA device: this script measures the mjwarp backend on a GPU")
    out = a.out.resolve()  # before chdir: a relative --out means relative to where this was started
    os.chdir(REPO)  # the sweep's subprocesses import perfkit from this checkout
    from perfkit.analysis.report_model import build_report, load_inputs
    from perfkit.renderers import write_report
    from perfkit.sweeps.runner import SweepConfig, parse_num_envs, run_sweep
    from perfkit.record import EXTRA_FIRST_STEP_S, EXTRA_PHYSICS_SPS
    from perfkit.sweeps.record import load_sweep

    out.mkdir(parents=True, exist_ok=True)
    me = ["python3", "scripts/gpu/sweeps.py", *sys.argv[1:]]
    t_all = time.perf_counter()
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    summary: dict = {"command": " ".join(shlex.quote(x) for x in me), "device": device,
                     "sweeps": {}, "problems": []}
    sweep_dirs = []
    envs = [e.strip() for e in a.envs.split(",") if e.strip() and e.strip() != "none"]
    deadline = time.perf_counter() + a.budget_s
    for i, env in enumerate(envs):
        d = out / f"sweep-{env}"
        budget = float(round(max(a.min_env_s, deadline - time.perf_counter() - a.min_env_s * (len(envs) - i - 1))))
        sweep_cmd = ["perfkit", "sweep", "perfkit.envs:make_env", "--env-kwarg", f"name={env}", "--env-kwarg",
                     f"backend={a.backend}", "--num-envs", a.num_envs, "--steps", str(a.steps), "--warmup-steps",
                     str(a.warmup_steps), "--max-seconds", str(a.max_seconds), "--session-steps", str(a.session_steps),
                     "--timeout", str(a.per_point_timeout), "--budget", f"{budget:.0f}", "-o", str(d), "--overwrite"]
        cfg = SweepConfig(target="perfkit.envs:make_env", num_envs=parse_num_envs(a.num_envs), out_dir=d,
                          steps=a.steps, warmup_steps=a.warmup_steps, env_kwargs={"name": env, "backend": a.backend},
                          max_seconds=a.max_seconds, session_steps=a.session_steps, timeout_s=a.per_point_timeout,
                          budget_s=budget, overwrite=True,  # a sweep left by an earlier run is replaced
                          gpus=[g for g in a.gpus.split(",")] if a.gpus else None,
                          command=sweep_cmd)
        t0 = time.perf_counter()
        sw = None
        if a.skip_existing and (d / "sweep.json").exists():
            sw = load_sweep(d)
            if any(p.status in ("pending", "skipped") for p in sw.points) or [p.num_envs for p in sw.points] != cfg.num_envs:
                sw = None
            else:
                print(f"== sweep {env}: reusing {d}", flush=True)
        if sw is None:
            print(f"== sweep {env}: {' '.join(sweep_cmd)}", flush=True)
            sw = run_sweep(cfg, progress=True)
        elapsed = time.perf_counter() - t0
        knee = sw.knee()
        rows = []
        for p in sw.points:
            r = sw.runs.get(p.num_envs)
            ok = p.status == "complete" and r is not None
            rows.append({
                "num_envs": p.num_envs, "status": p.status,
                "sps": r.sps if ok else None, "physics_sps": r.extra.get(EXTRA_PHYSICS_SPS) if ok else None,
                "p50_ms": r.step_ms.get("p50") if ok else None, "p99_ms": r.step_ms.get("p99") if ok else None,
                "steps": r.steps if ok else 0, "warmup_s": r.warmup_s if r else None,
                "first_step_s": r.extra.get(EXTRA_FIRST_STEP_S) if r else None,
                "gpu_used_bytes": r.memory.get("gpu_used_bytes") if r else None,
                "peak_torch_bytes": r.memory.get("peak_gpu_bytes") if r else None,
                "segments_ms": {k: (v.gpu_ms_per_step if v.gpu_ms_per_step is not None else v.cpu_ms_per_step)
                                for k, v in (r.segments.items() if ok else [])},
                "session_syncs_per_step": sum(v.syncs_per_step for v in r.segments.values()) if ok else None,
                "point_wall_s": p.elapsed_s, "error": p.error,
            })
            if p.status not in ("complete", "oom"):
                summary["problems"].append(f"{env} n={p.num_envs}: {p.status}: {p.error}"
                                           + (" (raise --budget-s, or rerun with --skip-existing)" if p.status == "skipped" else ""))
        if not sw.completed():
            summary["problems"].append(f"{env}: no point completed")
        summary["sweeps"][env] = {"dir": str(d), "wall_s": elapsed, "knee": knee.to_dict(), "points": rows,
                                  "command": " ".join(sweep_cmd)}
        sweep_dirs.append(d)
        print(f"   {env}: {knee.describe()} ({elapsed:.0f} s)", flush=True)

    if sweep_dirs:
        rep_dir = out / "report"
        title = f"perfkit: reference env sweeps ({'MuJoCo Warp' if a.backend == 'mjwarp' else 'MuJoCo C, CPU dry run'})"
        paths = write_report(build_report(load_inputs(sweep_dirs), title=title, command=me), rep_dir)
        summary["report"] = str(paths["html"])

    if a.train:
        summary["train"] = train_stage(a, out / "train", summary["problems"])

    summary["wall_s"] = time.perf_counter() - t_all
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    (out / "summary.md").write_text(summary_md(summary))
    print(summary_md(summary))
    if summary["problems"]:
        fail("; ".join(summary["problems"]))
    return 0


def train_stage(a, d: Path, problems: list) -> dict:
    """Profile train.py and train_naive.py, report them side by side, compare them."""
    d.mkdir(parents=True, exist_ok=True)
    res: dict = {}
    records = []
    for script in ("examples/train.py", "examples/train_naive.py"):
        rec = d / (Path(script).stem + ".json")
        cmd = [sys.executable, "-m", "perfkit", "profile", "-o", str(rec), script, "--num-envs", str(a.train_num_envs),
               "--iterations", str(a.train_iterations), "--backend", a.backend]
        print(f"== {' '.join(cmd[2:])}", flush=True)
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        except subprocess.TimeoutExpired as e:
            problems.append(f"{script}: perfkit profile took longer than 240 s")
            res[script] = {"rc": None, "wall_s": time.perf_counter() - t0, "error": "timeout"}
            (d / (Path(script).stem + ".log")).write_text(str(e.stdout or "") + "\n--- stderr ---\n" + str(e.stderr or ""))
            continue
        (d / (Path(script).stem + ".log")).write_text(p.stdout + "\n--- stderr ---\n" + p.stderr)
        res[script] = {"rc": p.returncode, "wall_s": time.perf_counter() - t0, "record": str(rec)}
        if p.returncode != 0 or not rec.exists():
            problems.append(f"{script}: perfkit profile exited {p.returncode}: {p.stderr[-400:]}")
        else:
            records.append(rec)
    if len(records) == 2:
        rp = subprocess.run([sys.executable, "-m", "perfkit", "report", *map(str, records), "-o", str(d / "report"),
                             "--title", "perfkit: examples/train.py vs examples/train_naive.py"],
                            capture_output=True, text=True)
        if rp.returncode != 0:
            problems.append(f"report of the training runs failed: {rp.stderr[-400:]}")
        else:
            res["report"] = str(d / "report" / "index.html")
        cp = subprocess.run([sys.executable, "-m", "perfkit", "compare", *map(str, records), "--format", "markdown"],
                            capture_output=True, text=True)
        (d / "compare.md").write_text(cp.stdout)
        res["compare_rc"] = cp.returncode
        from perfkit.record import Run

        for rec in records:
            r = Run.load(rec)
            res[rec.stem] = {"sps": r.sps, "p50_ms": r.step_ms.get("p50"), "syncs_per_step": r.syncs_per_step,
                             "allocs_per_step": r.allocs_per_step, "findings": len(r.findings)}
    return res


def summary_md(s: dict) -> str:
    lines = [f"# Reference env sweeps on {s['device']}", "", "```", s["command"], "```", ""]
    for env, sw in s["sweeps"].items():
        lines += [f"## {env} ({sw['wall_s']:.0f} s)", "", f"`{sw['command']}`", "", f"**{sw['knee']['description']}**", "",
                  "| num_envs | status | env SPS | physics SPS | p50 ms | p99 ms | warm-up s | GPU mem used |",
                  "|---:|---|---:|---:|---:|---:|---:|---:|"]
        for r in sw["points"]:
            def f(v, spec=",.0f"):
                return "-" if v is None else format(v, spec)
            mem = r["gpu_used_bytes"]
            lines.append(f"| {r['num_envs']} | {r['status']} | {f(r['sps'])} | {f(r['physics_sps'])} | "
                         f"{f(r['p50_ms'], '.3f')} | {f(r['p99_ms'], '.3f')} | {f(r['warmup_s'], '.1f')} | "
                         f"{'-' if not mem else f'{mem / 2**30:.2f} GiB'} |")
        lines.append("")
    if s.get("train"):
        lines += ["## examples/train.py vs examples/train_naive.py", "", "```", json.dumps(s["train"], indent=1), "```", ""]
        if s["train"].get("report"):
            lines.append(f"Training report: {s['train']['report']}")
    lines += [f"Report: {s.get('report') or '-'}", f"Total: {s.get('wall_s', 0):.0f} s", ""]
    if s["problems"]:
        lines += ["## Problems", ""] + [f"* {p}" for p in s["problems"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())

"""Data-parallel scaling of examples/train_ddp.py, plain and under perfkit, and the merged per-rank report.

    python3 scripts/gpu/dist.py --out DIR [--gpus 2] [--num-envs 4096] [--iterations 80]
    python3 scripts/gpu/dist.py --out DIR --same-gpu      # one GPU: both ranks on cuda:0, gloo
    python3 scripts/gpu/dist.py --out DIR --rounds 3      # perfkit's overhead per rank over 3 interleaved rounds
    python3 scripts/gpu/dist.py --out DIR --backend gloo --device cpu --num-envs 16 --iterations 4 --num-steps 8

On the 2-GPU H200 machine (``nvidia-h200-x2``; warp and mujoco installed into /tmp/site by
``scripts/gpu-check.sh setup``; ``bash scripts/gpu-check.sh setup dist`` runs this with ``--out
$OUT/dist``) it runs, one after the other, each under ``torchrun --standalone`` with a time limit:

1. train_ddp.py on 1 GPU (world size 1) and on ``--gpus`` GPUs, ``--num-envs`` envs per rank, plain:
   the ranks' SPS as the script prints them (its own CUDA-event timing). The 1-GPU run goes first: it
   compiles Warp's kernels into the cache the ranks then share;
2. the same two under ``perfkit profile`` (``python3 -m perfkit``), writing DIR/one/run.json and
   DIR/multi/run.rank{R}.json;
3. ``perfkit report DIR/multi/run.rank*.json --single DIR/one/run.json`` -> DIR/report/.

Every process gets ``NCCL_NVLS_ENABLE=0``, ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1`` and
``NVSHMEM_DISABLE_NVLS=1`` (NVLink multicast stays off on the lent machines). It prints the scaling
efficiency (total SPS / (ranks x 1-GPU SPS)) plain and under perfkit, the straggler, the imbalance
and the share of the step spent in communication, and writes DIR/summary.md and DIR/summary.json
(and the logs of every launch). Exits 1 when a launch fails. The CPU form above (gloo, MuJoCo C)
runs the same logic in about a minute on 2 cores (tests/distributed/test_dist_gpu_script.py).

``--same-gpu`` is for a machine with one GPU: every rank on ``cuda:0`` (NCCL refuses two ranks on one
device, so the backend is gloo, on CUDA tensors). What that shows and does not show is printed at the
start and written into the summary (:data:`SAME_GPU_NOTE`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
SAME_GPU_NOTE = (
    "--same-gpu: {n} ranks share cuda:0 with gloo (NCCL refuses two ranks on one GPU). It shows perfkit on a "
    "data-parallel job whose tensors live on the GPU: a record per rank, CUDA-event segment times per rank, the "
    "collectives counted and timed, the merged report and perfkit's overhead per rank. It does NOT show data-parallel "
    "scaling or NCCL's cost: the ranks compete for one GPU's SMs and memory bandwidth (the 'scaling efficiency' is "
    "that of sharing, not of adding GPUs), and gloo moves every gradient through host memory over TCP where NCCL "
    "would use NVLink, so the comm share is gloo's, far above what NCCL on {n} GPUs would show.")
TOTAL = re.compile(r"^total SPS: ([0-9.]+) \(world size (\d+); per rank ([0-9., ]+);", re.M)


class LaunchError(RuntimeError):
    pass


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(NO_MULTICAST)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*filter(None, env.get("PYTHONPATH", "").split(os.pathsep)), str(ROOT)]))
    return env


def launch(name: str, nproc: int, train_args: list[str], out: Path, timeout_s: float, record: Path | None = None) -> dict:
    """One torchrun launch of train_ddp.py (under ``perfkit profile -o record`` when given); its log
    goes to out/NAME.log. Returns the total and per-rank SPS it printed."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc)]
    if record is not None:
        cmd += ["-m", "perfkit", "profile", "-q", "-o", str(record)]
    cmd += [str(ROOT / "examples" / "train_ddp.py"), *train_args]
    log = out / f"{name}.log"
    print(f"[dist] {name}: {' '.join(cmd[1:])}", flush=True)
    t0 = time.perf_counter()
    with open(log, "w") as f:
        f.write(" ".join(cmd) + "\n")
        f.flush()
        try:
            proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=child_env(), cwd=ROOT,
                                  timeout=timeout_s, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise LaunchError(f"{name}: no result within {timeout_s:g} s (log: {log})") from None
    wall = time.perf_counter() - t0
    text = log.read_text(errors="replace")
    m = TOTAL.search(text)
    if proc.returncode != 0 or m is None:
        tail = "\n".join(text.strip().splitlines()[-15:])
        raise LaunchError(f"{name}: exit code {proc.returncode}, {'no total SPS line' if m is None else ''} (log: {log})\n{tail}")
    per_rank = [float(x) for x in m.group(3).split(",")]
    print(f"[dist] {name}: total SPS {float(m.group(1)):,.0f} over {m.group(2)} rank(s) in {wall:.0f} s", flush=True)
    return {"name": name, "nproc": nproc, "total_sps": float(m.group(1)), "per_rank": per_rank, "wall_s": wall,
            "command": cmd[1:], "log": log.name}


def efficiency(multi: dict, one: dict) -> float:
    return multi["total_sps"] / (multi["nproc"] * one["total_sps"])


def overhead_ratios(plain_one: dict, plain_multi: dict, prof_one: dict, prof_multi: dict) -> dict:
    """perfkit / plain SPS of one round: the 1-rank run's and each rank's of the multi-rank runs."""
    return {"one": prof_one["total_sps"] / plain_one["total_sps"],
            "per_rank": [a / b for a, b in zip(prof_multi["per_rank"], plain_multi["per_rank"])]}


def median_ratios(rounds: list[dict]) -> dict:
    """The median over rounds of :func:`overhead_ratios`' figures."""
    from statistics import median

    ratios = [r["perfkit_over_plain"] for r in rounds]
    return {"one": median(x["one"] for x in ratios),
            "per_rank": [median(x["per_rank"][i] for x in ratios) for i in range(len(ratios[0]["per_rank"]))]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--gpus", type=int, default=2, help="ranks of the multi-GPU runs")
    p.add_argument("--num-envs", type=int, default=4096, help="envs per rank")
    p.add_argument("--iterations", type=int, default=80)
    p.add_argument("--num-steps", type=int, default=32)
    p.add_argument("--env", default="ant")
    p.add_argument("--backend", default=None, choices=("nccl", "gloo"), help="default: train_ddp.py's (nccl on CUDA)")
    p.add_argument("--device", default=None, help="cpu for the CPU form (default: each rank's GPU)")
    p.add_argument("--sync", default="allreduce", choices=("allreduce", "ddp"))
    p.add_argument("--same-gpu", action="store_true",
                   help="one GPU: every rank on cuda:0 with gloo on CUDA tensors (see the note it prints)")
    p.add_argument("--rounds", type=int, default=1,
                   help="rounds of the four launches, the order rotating by round (perfkit's overhead per rank as the "
                        "median of the rounds' ratios); the last round's records make the report")
    p.add_argument("--timeout", type=float, default=240.0, help="seconds per launch")
    p.add_argument("--budget", type=float, default=480.0,
                   help="seconds for everything: a launch gets at most what is left (gpu-check.sh stops a stage at 540)")
    args = p.parse_args(argv)
    if args.gpus < 2:
        p.error("--gpus must be >= 2")
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    note = None
    if args.same_gpu:
        if args.backend == "nccl" or (args.device is not None and args.device != "cuda:0"):
            p.error("--same-gpu runs every rank on cuda:0 with gloo: leave --backend and --device out")
        args.backend, args.device = "gloo", "cuda:0"
        note = SAME_GPU_NOTE.format(n=args.gpus)
        print(f"[dist] {note}", flush=True)
    if args.device is None or args.device.startswith("cuda"):
        import torch

        have = torch.cuda.device_count()
        need = 1 if args.same_gpu else args.gpus
        if have < need:
            print(f"[dist] FAILED: {need} GPU{'s' if need > 1 else ''} needed, this machine shows {have} "
                  f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')}); run it on nvidia-h200-x2 "
                  "(or with --same-gpu on one GPU), alone (not in an a|b pair of gpu-check.sh)", flush=True)
            return 1
    out = Path(args.out)
    (out / "one").mkdir(parents=True, exist_ok=True)
    (out / "multi").mkdir(parents=True, exist_ok=True)
    train_args = ["--env", args.env, "--num-envs", str(args.num_envs), "--iterations", str(args.iterations),
                  "--num-steps", str(args.num_steps), "--sync", args.sync]
    if args.backend:
        train_args += ["--backend", args.backend]
    if args.device:
        train_args += ["--device", args.device]
    n = args.gpus
    t_start = time.perf_counter()

    def limit() -> float:
        left = args.budget - (time.perf_counter() - t_start)
        if left < 10:
            raise LaunchError(f"the --budget of {args.budget:g} s is spent")
        return min(args.timeout, left)

    arms = [("plain", 1), ("plain", n), ("perfkit", 1), ("perfkit", n)]  # the 1-GPU run first: it fills Warp's cache
    rounds: list[dict] = []
    try:
        for r in range(1, args.rounds + 1):
            order = arms[(r - 1) % 4:] + arms[:(r - 1) % 4]
            got: dict[tuple[str, int], dict] = {}
            for kind, k in order:
                name = f"{kind}-{k}" + (f".r{r}" if args.rounds > 1 else "")
                record = (out / ("one" if k == 1 else "multi") / "run.json") if kind == "perfkit" else None
                got[(kind, k)] = launch(name, k, train_args, out, limit(), record=record)
            rounds.append({"round": r, "order": [f"{kind}-{k}" for kind, k in order],
                           "perfkit_over_plain": overhead_ratios(got[("plain", 1)], got[("plain", n)],
                                                                 got[("perfkit", 1)], got[("perfkit", n)])})
    except LaunchError as e:
        print(f"[dist] FAILED: {e}", flush=True)
        return 1
    plain_one, plain_multi, prof_one, prof_multi = (got[a] for a in arms)  # the last round's
    ranks = [out / "multi" / f"run.rank{r}.json" for r in range(n)]
    missing = [str(r) for r in ranks if not r.exists()]
    if missing or not (out / "one" / "run.json").exists():
        print(f"[dist] FAILED: records missing: {missing or [str(out / 'one' / 'run.json')]}", flush=True)
        return 1
    report_cmd = [sys.executable, "-m", "perfkit", "report", *map(str, ranks), "--single", str(out / "one" / "run.json"),
                  "-o", str(out / "report"), "--title", f"train_ddp.py: {n} ranks x {args.num_envs} envs vs 1"]
    print(f"[dist] report: {' '.join(report_cmd[1:])}", flush=True)
    rep = subprocess.run(report_cmd, capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=args.timeout)
    if rep.returncode != 0:
        print(f"[dist] FAILED: perfkit report exited {rep.returncode}\n{rep.stdout}{rep.stderr}", flush=True)
        return 1

    from perfkit.analysis.ranks import headline, merge_ranks
    from perfkit.analysis.report_model import fmt_num
    from perfkit.record import Run

    runs = [Run.load(r) for r in ranks]
    single = Run.load(out / "one" / "run.json")
    s = merge_ranks(runs, single)
    result = {
        "script": "python3 scripts/gpu/dist.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "train_args": train_args,
        "same_gpu": note,
        "environment": NO_MULTICAST,
        "plain": {"one": plain_one, "multi": plain_multi, "scaling_efficiency": efficiency(plain_multi, plain_one)},
        "perfkit": {"one": prof_one, "multi": prof_multi, "scaling_efficiency": efficiency(prof_multi, prof_one),
                    "recorded": {"total_sps": s.total_sps, "single_sps": s.single_sps,
                                 "scaling_efficiency": s.scaling_efficiency}},
        "rounds": rounds,
        "overhead": median_ratios(rounds),
        "straggler": s.straggler, "imbalance": s.imbalance, "balanced": s.balanced, "slowest_rank": s.slowest_rank,
        "comm_share": s.comm_share,
        "ranks": [{"rank": r.rank, "device": r.device, "sps": r.sps, "step_ms": r.step_ms, "busy_ms": r.busy_ms,
                   "comm_ms": r.comm_ms, "comm_source": r.comm_source, "comm_share": r.comm_share} for r in s.ranks],
        "headline": headline(s, fmt_num),
        "machine": runs[0].machine,
        "wall_s": time.perf_counter() - t_start,
    }
    (out / "summary.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    lines = [
        f"# Data-parallel scaling: train_ddp.py, {n} ranks vs 1", "",
        f"Command: `{result['script']}` (train_ddp.py {' '.join(train_args)}; every process with "
        + ", ".join(f"{k}={v}" for k, v in NO_MULTICAST.items()) + ")", "",
        f"Machine: {runs[0].machine.get('device', '?')} x {1 if note else n}, torch {runs[0].machine.get('torch')}, "
        f"backend {s.backend}; wall {result['wall_s']:.0f} s", "",
        *([f"**{note}**", ""] if note else []),
        "| run | 1 rank SPS | " + f"{n} ranks total SPS | per rank | scaling efficiency |",
        "|---|---:|---:|---|---:|",
    ]
    for label, one, multi in (("plain", plain_one, plain_multi), ("under perfkit profile", prof_one, prof_multi)):
        lines.append(f"| {label} | {one['total_sps']:,.0f} | {multi['total_sps']:,.0f} | "
                     + ", ".join(f"{v:,.0f}" for v in multi["per_rank"]) + f" | {efficiency(multi, one):.1%} |")
    med = result["overhead"]
    lines += ["", f"perfkit / plain SPS (median of {len(rounds)} round{'s' if len(rounds) > 1 else ''}, the order rotating): "
              f"1 rank {med['one']:.3f}; {n} ranks, per rank " + ", ".join(f"{v:.3f}" for v in med["per_rank"])
              + ("; per round: " + "; ".join(
                  f"r{x['round']} {x['perfkit_over_plain']['one']:.3f} / "
                  + ", ".join(f"{v:.3f}" for v in x["perfkit_over_plain"]["per_rank"]) for x in rounds)
                 if len(rounds) > 1 else ""),
              "", "(The table's SPS are the last round's.)" if len(rounds) > 1 else ""]
    lines += ["", "Merged per-rank records (perfkit report, the records' own step timing):", ""]
    lines += [f"* {h}" for h in result["headline"]]
    lines += ["", "Full report: `report/index.html`, `report/report.md`.", ""]
    (out / "summary.md").write_text("\n".join(lines))
    print("\n".join(lines), flush=True)
    who = (f"balanced (imbalance {s.imbalance:.1%}, most busy: rank {s.straggler})" if s.balanced
           else f"straggler rank {s.straggler} (imbalance {(s.imbalance or 0):.1%})")
    print(f"[dist] plain scaling efficiency {result['plain']['scaling_efficiency']:.1%}; under perfkit "
          f"{result['perfkit']['scaling_efficiency']:.1%}; {who}; comm {(s.comm_share or 0):.1%} of the step; "
          f"{result['wall_s']:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

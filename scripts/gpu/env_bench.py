"""GPU benchmark of the reference env (issue 3): env alone vs raw captured MuJoCo Warp, budget check,
and end-to-end training SPS of examples/train.py vs examples/train_naive.py.

    python3 scripts/gpu/env_bench.py --out DIR [--worlds 1024,4096,16384] [--models ant,humanoid]
                                    [--seconds 1.0] [--train-envs 4096] [--skip-train]

For each model and world count:
  * raw   — ``mujoco_warp.step`` captured in a CUDA graph (one physics step per graph, as MuJoCo
            Warp's own testspeed does), replayed back to back; physics steps/s = worlds x steps / s.
            Controls are fixed uniform noise in [-1, 1]; worlds start at qpos0 and are never reset.
  * env   — ``make_env(name, worlds, backend="mjwarp")``, ``env.step(actions)`` back to back with a
            fixed action tensor; env steps/s, and physics steps/s = env steps/s x decimation.
  * ratio — env physics steps/s / raw physics steps/s (stand-alone), and the same-world ratio:
            raw physics vs env.step interleaved on the env's own worlds (``same_worlds_ratio``), the
            one held to the target >= 0.9 from 4096 worlds up.
  * budget — ``env.step`` under ``perfkit.budget(syncs=0, allocs=0)`` and
            ``torch.cuda.set_sync_debug_mode("error")``, with torch's CUDA allocation counter
            unchanged over the steps, and the physics replayed from a CUDA graph.
Then ``examples/train.py`` and ``examples/train_naive.py`` at ``--train-envs`` envs, each in its
own process; their final ``SPS:`` lines (steady-state env steps/s, learning included) side by side.

Writes DIR/env_bench.json and DIR/env_bench.md; prints a summary; exits 1 if a check fails.
The first run on a machine compiles MuJoCo Warp's CUDA kernels (Warp caches them afterwards).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def _timed(fn, seconds: float, sync) -> tuple[int, float]:
    """Run ``fn`` back to back for about ``seconds``; returns (calls, elapsed) with a sync at both ends."""
    sync()
    t0 = time.perf_counter()
    for _ in range(5):
        fn()
    sync()
    per_call = max((time.perf_counter() - t0) / 5, 1e-6)
    n = max(10, int(seconds / per_call))
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    sync()
    return n, time.perf_counter() - t0


def bench_raw(name: str, worlds: int, seconds: float, device: str = "cuda") -> dict:
    import mujoco_warp as mjw
    import torch
    import warp as wp

    from perfkit.envs.models import get_spec, load_mjmodel

    spec, mjm = get_spec(name), load_mjmodel(name)
    with wp.ScopedDevice(device):
        m = mjw.put_model(mjm)
        m.opt.warn_overflow = int(m.opt.warn_overflow) & ~int(mjw.OverflowType.ITERATIONS | mjw.OverflowType.LS_ITERATIONS)  # as the env does
        d = mjw.make_data(mjm, nworld=worlds, nconmax=spec.nconmax, njmax=spec.njmax)
        g = torch.Generator(device=device).manual_seed(0)
        wp.to_torch(d.ctrl).uniform_(-1.0, 1.0, generator=g)
        mjw.step(m, d)  # compile / load modules before capturing
        if device == "cpu":  # smoke-test path: no CUDA graph on Warp's CPU device
            step = lambda: mjw.step(m, d)  # noqa: E731
        else:
            torch.cuda.synchronize()
            with wp.ScopedCapture() as cap:
                mjw.step(m, d)
            step = lambda: wp.capture_launch(cap.graph)  # noqa: E731
        for _ in range(20):
            step()
        n, dt = _timed(step, seconds, wp.synchronize_device)
    return {"physics_sps": worlds * n / dt, "steps_timed": n}


def bench_env(name: str, worlds: int, seconds: float, device: str = "cuda") -> dict:
    import torch

    import perfkit
    from perfkit.envs import make_env

    cuda = device != "cpu"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    env = make_env(name, worlds, backend="mjwarp", device=device, seed=0)
    g = torch.Generator(device=env.device).manual_seed(0)
    actions = torch.empty(worlds, env.act_dim, device=env.device).uniform_(-1.0, 1.0, generator=g)
    for _ in range(20):
        env.step(actions)
    n, dt = _timed(lambda: env.step(actions), seconds, sync)
    env_sps = worlds * n / dt
    same = same_worlds_ratio(env, actions, seconds) if cuda and env.captured else None

    # zero syncs, zero allocations: perfkit's budget; then, separately (so the two hook mechanisms
    # cannot interfere), torch's sync debug mode and the CUDA allocator's allocation counter
    budget_ok, budget_msg, counts = True, "", ""
    try:
        with perfkit.budget(syncs=0, allocs=0) as b:
            for _ in range(10):
                env.step(actions)
        counts = f"perfkit budget: syncs={b.syncs} allocs={b.allocs}"
    except perfkit.BudgetExceeded as exc:
        budget_ok, budget_msg = False, f"BudgetExceeded: {exc}"
    if cuda:
        sync()
        allocs_before = torch.cuda.memory_stats(env.device).get("allocation.all.allocated", 0)
        try:
            torch.cuda.set_sync_debug_mode("error")
            for _ in range(10):
                env.step(actions)
        except RuntimeError as exc:  # torch raises on a synchronizing op in "error" mode
            budget_ok, budget_msg = False, budget_msg + f" torch sync debug mode: {exc}"
        finally:
            torch.cuda.set_sync_debug_mode("default")
        sync()
        allocs_after = torch.cuda.memory_stats(env.device).get("allocation.all.allocated", 0)
        if allocs_after != allocs_before:
            budget_ok = False
            budget_msg += f" torch CUDA allocations during 10 steps: {allocs_after - allocs_before}"
        counts += f"; sync debug mode clean; CUDA allocations {allocs_after - allocs_before}"
    finite = bool(torch.isfinite(env.obs).all())
    out = {
        "env_sps": env_sps,
        "physics_sps": env_sps * env.decimation,
        "decimation": env.decimation,
        "steps_timed": n,
        "captured": env.captured,
        "budget_ok": budget_ok and (env.captured or not cuda) and finite,
        "budget_detail": budget_msg.strip() or counts,
        "describe": env.describe(),
        "same_worlds": same,
    }
    del env, actions
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return out


def same_worlds_ratio(env, actions, seconds: float, rounds: int = 9) -> dict:
    """Env step vs raw physics on the *same* worlds, interleaved: the env's overhead alone.

    The stand-alone raw benchmark steps fresh worlds that are never reset: within a second the
    humanoids lie on the floor and the ants settle, a contact load the env (which resets fallen
    worlds) never sees, so its ratio mixes the env's overhead with a different physics workload.
    Here three arms run in alternating order on the env's own ``mujoco_warp`` data, each block
    timed between device syncs: ``raw`` = the ``decimation`` substeps captured in a graph and
    replayed on Warp's stream (plain MuJoCo Warp), ``graph`` = the env's own graph (substeps + task
    kernel) on torch's stream, ``step`` = ``env.step(actions)``. Ratios are per round
    (raw time / arm time for the same number of control steps), then the median over rounds.
    """
    import statistics

    import torch

    wp = env._wp
    torch.cuda.synchronize()
    with wp.ScopedDevice(env._wp_device):
        with wp.ScopedCapture() as cap:
            env._substeps()  # the env's `decimation` mujoco_warp.step calls, without the task kernel
        wp.synchronize_device()
    arms = {"raw": lambda: wp.capture_launch(cap.graph), "graph": env.physics_launch, "step": lambda: env.step(actions)}
    env.step(actions)
    n, dt = _timed(arms["step"], seconds / (3 * rounds), torch.cuda.synchronize)
    times = {k: [] for k in arms}
    order = list(arms)
    for r in range(rounds):
        for k in order if r % 2 == 0 else order[::-1]:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n):
                arms[k]()
            torch.cuda.synchronize()
            times[k].append(time.perf_counter() - t0)
    env.reset()

    def med(xs):
        return statistics.median(xs)

    ratio_step = [a / b for a, b in zip(times["raw"], times["step"])]
    ratio_graph = [a / b for a, b in zip(times["raw"], times["graph"])]
    q = statistics.quantiles(ratio_step, n=4)
    ms = {k: 1e3 * med(v) / n for k, v in times.items()}
    return {"rounds": rounds, "steps_per_block": n, "ms_per_control_step": ms,
            "ratio_step": med(ratio_step), "ratio_step_quartiles": [q[0], q[2]], "ratio_graph": med(ratio_graph)}


def run_training(script: str, num_envs: int, iterations: int, timeout: float, backend: str = "mjwarp") -> dict:
    cmd = ["python3", os.path.join("examples", script), "--num-envs", str(num_envs), "--iterations", str(iterations), "--backend", backend]
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"command": " ".join(cmd), "ok": False, "error": f"timed out after {timeout:.0f} s"}
    m = re.search(r"^SPS: ([0-9.]+)$", r.stdout, re.M)
    res = {"command": " ".join(cmd), "ok": r.returncode == 0 and m is not None, "wall_s": time.perf_counter() - t0}
    if m:
        res["sps"] = float(m.group(1))
    if not res["ok"]:
        res["error"] = (r.stderr or r.stdout)[-1500:]
    iters = re.findall(r"reward/step\s+(-?[0-9.]+)", r.stdout)
    res["reward_per_step"] = [float(x) for x in iters]
    return res


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--worlds", default="1024,4096,16384")
    p.add_argument("--models", default="ant,humanoid")
    p.add_argument("--seconds", type=float, default=1.0, help="timed seconds per measurement")
    p.add_argument("--train-envs", type=int, default=4096)
    p.add_argument("--skip-train", action="store_true")
    p.add_argument("--device", default="cuda", help="cuda (the benchmark) or cpu (a smoke test of this script on Warp's CPU device)")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)

    import torch

    if args.device != "cpu" and not torch.cuda.is_available():
        print("env_bench: CUDA is not available; this benchmark needs the GPU (--device cpu for a smoke test)", file=sys.stderr)
        return 2
    import warp as wp

    wp.config.log_level = wp.LOG_WARNING
    from perfkit import machine

    worlds = [int(w) for w in args.worlds.split(",")]
    models = [m.strip() for m in args.models.split(",")]
    rows, failures = [], []
    t_start = time.perf_counter()
    for name in models:
        for nw in worlds:
            t0 = time.perf_counter()
            raw = bench_raw(name, nw, args.seconds, args.device)
            env = bench_env(name, nw, args.seconds, args.device)
            ratio = env["physics_sps"] / raw["physics_sps"]
            same = env["same_worlds"]
            row = {"model": name, "worlds": nw, "raw_physics_sps": raw["physics_sps"], "env_sps": env["env_sps"],
                   "env_physics_sps": env["physics_sps"], "ratio_standalone": ratio, "same_worlds": same,
                   "ratio": same["ratio_step"] if same else ratio, "decimation": env["decimation"],
                   "ratio_target": 0.9 if nw >= 4096 else None, "captured": env["captured"],
                   "budget_ok": env["budget_ok"], "budget_detail": env["budget_detail"], "env": env["describe"],
                   "seconds": time.perf_counter() - t0}
            rows.append(row)
            if nw >= 4096 and row["ratio"] < 0.9 and args.device != "cpu":
                failures.append(f"{name}@{nw}: env/raw physics SPS ratio (same worlds) {row['ratio']:.3f} < 0.9")
            if not env["budget_ok"]:
                failures.append(f"{name}@{nw}: step not sync/alloc-free: {env['budget_detail']}")
            print(f"{name:9s} {nw:6d} worlds  raw {raw['physics_sps'] / 1e6:7.2f}M phys/s  env {env['env_sps'] / 1e6:6.2f}M env/s "
                  f"= {env['physics_sps'] / 1e6:7.2f}M phys/s  ratio {ratio:.3f}  budget {'ok' if env['budget_ok'] else 'FAIL'}  "
                  f"({row['seconds']:.1f}s)", flush=True)
            if same:
                print(f"{'':9s} {'':6s} same worlds, interleaved: step/raw {same['ratio_step']:.3f} "
                      f"(quartiles {same['ratio_step_quartiles'][0]:.3f}-{same['ratio_step_quartiles'][1]:.3f}), "
                      f"graph/raw {same['ratio_graph']:.3f}; ms per control step "
                      + ", ".join(f"{k} {v:.3f}" for k, v in same["ms_per_control_step"].items()), flush=True)

    training = {}
    if not args.skip_train:
        backend = "mjwarp" if args.device != "cpu" else "mujoco"
        training["train"] = run_training("train.py", args.train_envs, 6, 240, backend)
        training["train_naive"] = run_training("train_naive.py", args.train_envs, 3, 240, backend)
        for k, v in training.items():
            print(f"{k:12s} {args.train_envs} envs: " + (f"SPS {v['sps']:,.0f}" if v.get("ok") else f"FAILED {v.get('error', '')[-300:]}"), flush=True)
            if not v.get("ok"):
                failures.append(f"{k} failed")
        if training["train"].get("ok") and training["train_naive"].get("ok"):
            print(f"train.py / train_naive.py SPS: {training['train']['sps'] / training['train_naive']['sps']:.1f}x", flush=True)

    result = {"machine": machine.describe(), "rows": rows, "training": training, "failures": failures,
              "total_s": time.perf_counter() - t_start, "command": " ".join([os.path.relpath(__file__, ROOT), *(argv or sys.argv[1:])])}
    with open(os.path.join(args.out, "env_bench.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(args.out, "env_bench.md"), "w") as f:
        f.write(render_markdown(result))
    print(f"wrote {args.out}/env_bench.json and env_bench.md ({result['total_s']:.0f} s)")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    return 0


def render_markdown(res: dict) -> str:
    mach = res["machine"]
    lines = [
        "# Reference env throughput: env alone vs raw captured MuJoCo Warp",
        "",
        f"Command: `python3 {res['command']}`  ",
        f"Machine: {mach.get('device', '?')}, torch {mach.get('torch', '?')}, warp {mach.get('warp', '?')}, mujoco {mach.get('mujoco', '?')}",
        "",
        "Physics steps/s: raw = worlds x captured `mujoco_warp.step` replays per second on fresh worlds that are never "
        "reset (stand-alone); env = env steps/s x decimation; stand-alone ratio = env / raw.",
        "Same-world ratio (the target, >= 0.9 from 4096 worlds up): raw physics time / `env.step` time for the same number "
        "of control steps on the env's own worlds, raw and env blocks interleaved in one run, median over rounds "
        "(`same_worlds_ratio` in the script says why: fresh never-reset worlds fall and carry a contact load the env never sees). "
        "graph/raw: the env's captured graph alone (substeps + task kernel, no torch ops).",
        "Budget: `env.step` under `perfkit.budget(syncs=0, allocs=0)`, "
        "`torch.cuda.set_sync_debug_mode('error')`, torch CUDA allocation count unchanged.",
        "",
        "| model | worlds | raw physics steps/s | env steps/s | env physics steps/s | stand-alone ratio | same-world ratio (quartiles) | graph/raw | budget |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in res["rows"]:
        same = r.get("same_worlds")
        sw = f"{same['ratio_step']:.3f} ({same['ratio_step_quartiles'][0]:.3f}-{same['ratio_step_quartiles'][1]:.3f})" if same else "-"
        gr = f"{same['ratio_graph']:.3f}" if same else "-"
        lines.append(f"| {r['model']} | {r['worlds']} | {r['raw_physics_sps']:,.0f} | {r['env_sps']:,.0f} | {r['env_physics_sps']:,.0f} | "
                     f"{r.get('ratio_standalone', r['ratio']):.3f} | {sw} | {gr} | {'ok' if r['budget_ok'] else 'FAIL: ' + r['budget_detail']} |")
    if res["training"]:
        lines += ["", "## Training end to end (steady-state env steps/s, learning included)", "", "| script | SPS | command |", "|---|---:|---|"]
        for k, v in res["training"].items():
            lines.append(f"| {k} | {v['sps']:,.0f} | `{v['command']}` |" if v.get("ok") else f"| {k} | failed | `{v.get('command', '')}` |")
    if res["failures"]:
        lines += ["", "## Failures", ""] + [f"* {f}" for f in res["failures"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())

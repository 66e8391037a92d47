"""Issues 11 and 12 on the H200: the manager env (examples/manager_env) trained through rsl_rl's
OnPolicyRunner at 4096 envs, profiled, and perfkit's overhead on it.

    python3 scripts/gpu/stacks.py --out /tmp/stacks --results "$OUT"
        # the H200 run: one command, ~6-9 min (the first Warp kernel build adds ~1 min)
    python3 scripts/gpu/stacks.py --out DIR --device cpu --num-envs 64 --iterations 3 --num-steps 8 --rounds 1
        # a smoke test of this script on the CPU (add --no-jit while perfkit breaks TorchScript)

(a) ``perfkit profile`` of ``train_rsl_rl.py --num-envs N``: DIR/profile/record.json, the console
    output (console.out, console.err), ``perfkit report`` (report/), and on CUDA a second run with
    ``--verify`` (CUPTI-counted runtime syncs against the attributed ones: verify.json, verify.*).
(b) SPS of the same training plainly, under ``perfkit profile`` and under ``torch.profiler`` (CPU and
    CUDA activities, ``with_stack=True``, over the whole run), each in a fresh process, ``--rounds``
    interleaved rounds (the order rotates each round); each run's own ``SPS:`` line (the script times
    its iterations after a warm-up one). Reported: per-round and median SPS ratios to the plain run,
    perfkit's overhead in %, and the wall time each tool adds to a run (record building, trace
    processing). The measurement is :func:`perfkit.overhead.measure`, what ``perfkit overhead`` runs
    (``scripts/gpu/overhead.py`` measures train.py and this env with it for issue 12).

Writes DIR/summary.md and DIR/stacks.json after every step (what is done so far survives a timeout)
and packs everything into DIR/stacks-results.tgz at the end; ``--results R`` keeps those three files
in R too (give it the device tool's $OUT, which returns at most 8 files, and keep DIR outside it).
Every child run has its own timeout; ``--budget-s`` stops starting rounds that would not finish in
time. Exit status: 0 when every run
succeeded, 1 when some run failed (the reports say which), 2 when the set-up is missing.

rsl-rl-lib and its pure-Python requirements are not on the GPU machine: stage them here with
``bash scripts/gpu/stage-stack-wheels.sh`` (into .gpu4/) and carry .gpu4; this script installs them
into /tmp/site-stacks when rsl_rl does not import (``--wheels``). warp, mujoco and mujoco-warp come
from the GPU check's own staging (scripts/gpu/README.md), in /tmp/site.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # this checkout's perfkit (perfkit.overhead.measure), whatever else is installed

from perfkit.overhead import measure as overhead  # noqa: E402

SCRIPT = ROOT / "examples" / "manager_env" / "train_rsl_rl.py"
MODES = overhead.ARMS  # plain, perfkit, torch-profiler
STACK_SITE = "/tmp/site-stacks"
STACK_REQUIRED = ("rsl_rl", "tensordict", "git", "tensorboard")  # what the wheels in .gpu4/ provide
REQUIRED = ("torch", *STACK_REQUIRED, "mujoco", "warp", "mujoco_warp", "perfkit")
_SPS = overhead.compile_metric(overhead.DEFAULT_METRIC)


def log(msg: str) -> None:
    print(f"[stacks {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="output folder (logs, records, reports)")
    p.add_argument("--results", default=None,
                   help="also keep summary.md, stacks.json (after every step) and stacks-results.tgz (at the end) here: "
                        "the device tool's $OUT, which returns at most 8 files")
    p.add_argument("--device", default="cuda", help="cuda (the benchmark) or cpu (a smoke test of this script)")
    p.add_argument("--backend", default="auto", choices=("auto", "mjwarp", "mujoco"))
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--iterations", type=int, default=8, help="training iterations per run (the first is the script's warm-up)")
    p.add_argument("--num-steps", type=int, default=24, help="num_steps_per_env (perfkit's --warmup-steps is one iteration)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds of (b)")
    p.add_argument("--timeout", type=int, default=240, help="seconds a single training run may take")
    p.add_argument("--budget-s", type=float, default=530.0, help="start no round that would end after this many seconds")
    p.add_argument("--no-verify", action="store_true", help="skip the perfkit profile --verify run of (a)")
    p.add_argument("--skip-profile", action="store_true", help="skip (a)")
    p.add_argument("--skip-overhead", action="store_true", help="skip (b)")
    p.add_argument("--no-jit", action="store_true",
                   help="run every child with PYTORCH_JIT=0 (TorchScript off; for a perfkit that still breaks TorchScript)")
    p.add_argument("--wheels", default=str(ROOT / ".gpu4"), help="wheels to install when rsl_rl does not import")
    a = p.parse_args(argv)
    if a.rounds < 1 or a.iterations < 2 or a.num_envs < 1 or a.num_steps < 1:
        p.error("--rounds, --num-envs, --num-steps >= 1 and --iterations >= 2")
    return a


# ------------------------------------------------------------------------------------------ set-up


def child_env(args, extra_paths: list[str]) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(ROOT), *extra_paths, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("GIT_PYTHON_REFRESH", "quiet")  # GitPython (rsl_rl's logger) without a git executable
    if args.no_jit:
        env["PYTORCH_JIT"] = "0"
    return env


def missing_modules(env: dict[str, str], required=REQUIRED) -> dict[str, str]:
    """Module -> why it does not import, in a child with ``env``."""
    code = ("import importlib, json, sys\nbad = {}\n"
            f"for m in {list(required)!r}:\n"
            "    try:\n        importlib.import_module(m)\n"
            "    except Exception as e:\n        bad[m] = f'{type(e).__name__}: {e}'\n"
            "print(json.dumps(bad))")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        return {"python": p.stderr.strip()[-500:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def ensure_stack(args, required=REQUIRED) -> tuple[dict[str, str], list[str]]:
    """The child environment, with rsl-rl-lib & co installed from ``args.wheels`` when they are missing;
    and what still does not import (of ``required``)."""
    extra = [p for p in ("/tmp/site", STACK_SITE) if os.path.isdir(p)]
    env = child_env(args, extra)
    bad = missing_modules(env, required)
    if any(m in bad for m in STACK_REQUIRED):
        wheels = sorted(Path(args.wheels).glob("*.whl")) if Path(args.wheels).is_dir() else []
        if wheels:
            log(f"installing {len(wheels)} wheels from {args.wheels} into {STACK_SITE}")
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                            "--no-cache-dir", "--upgrade", "--target", STACK_SITE, *map(str, wheels)], check=False)
            extra = [p for p in ("/tmp/site", STACK_SITE) if os.path.isdir(p)]
            env = child_env(args, extra)
            bad = missing_modules(env, required)
    return env, [f"{m}: {why}" for m, why in bad.items()]


def versions(env: dict[str, str]) -> dict:
    code = ("import json, torch, importlib.metadata as md\n"
            "d = {'torch': torch.__version__, 'cuda': torch.version.cuda,\n"
            "     'gpu': torch.cuda.get_device_name() if torch.cuda.is_available() else None}\n"
            "for n in ('rsl-rl-lib', 'tensordict', 'warp-lang', 'mujoco', 'mujoco-warp', 'tensorboard'):\n"
            "    try: d[n] = md.version(n)\n    except Exception: d[n] = None\n"
            "print(json.dumps(d))")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"error": p.stderr.strip()[-500:]}


# ------------------------------------------------------------------------------------------ runs


def train_args(args) -> list[str]:
    return ["--device", args.device, "--backend", args.backend, "--num-envs", str(args.num_envs),
            "--iterations", str(args.iterations), "--num-steps", str(args.num_steps)]


def profile_command(args, record: Path, verify: bool = False) -> list[str]:
    """``perfkit profile`` of the training, for (a): its record to ``record`` (its warm-up: one iteration)."""
    cmd = [sys.executable, "-m", "perfkit", "profile", "-o", str(record), "--warmup-steps", str(args.num_steps)]
    if verify:
        cmd.append("--verify")
    return cmd + [str(SCRIPT), *train_args(args)]


def run_one(cmd: list[str], env: dict[str, str], logs: Path, name: str, timeout: float) -> dict:
    """:func:`perfkit.overhead.measure.run_once` from the checkout's root (its own process group, killed whole
    on timeout; stdout/stderr to logs/NAME.{out,err}), with the run's ``SPS:`` as ``sps``."""
    r = overhead.run_once(cmd, name=name, log_dir=logs, metric=_SPS, env=env, cwd=ROOT, timeout=timeout)
    r["sps"] = r["metric"]
    return r


# ------------------------------------------------------------------------------------------ (a) profile


def summarize_record(path: Path) -> dict:
    """What the H200 run must show, read from the record: SPS, segments (GPU/CPU ms and syncs per step,
    the 'other' breakdown when the record has one), the top sync findings with their library/chain."""
    import dataclasses

    import perfkit

    run = perfkit.Run.load(path)
    segs = {}
    for name, s in run.segments.items():
        d = dataclasses.asdict(s)
        children = getattr(s, "children", None)
        if children:
            d["children"] = {k: (v if isinstance(v, dict) else dataclasses.asdict(v)) for k, v in children.items()}
        segs[name] = d
    syncs = sorted((f for f in run.findings if f.kind == "sync"), key=lambda f: -f.per_step)
    findings = [{"site": f"{f.path}:{f.line}", "op": f.op, "segment": f.segment, "per_step": f.per_step,
                 "est_ms_per_step": f.est_ms_per_step, "code": f.code,
                 "library": getattr(f, "library", "n/a (field missing)"), "chain": getattr(f, "chain", None)}
                for f in syncs[:25]]
    return {"status": run.status, "steps": run.steps, "num_envs": run.num_envs, "sps": run.sps, "step_ms": run.step_ms,
            "syncs_per_step": round(run.syncs_per_step, 3), "segments": segs, "top_syncs": findings,
            "n_findings": len(run.findings), "verify": run.extra.get("verify"), "notes": run.extra.get("notes")}


def profile_stage(args, env: dict[str, str], out: Path, results: dict) -> None:
    pdir = out / "profile"
    pdir.mkdir(parents=True, exist_ok=True)
    rec = pdir / "record.json"
    log(f"(a) perfkit profile {SCRIPT.name} --num-envs {args.num_envs} on {args.device}")
    r = run_one(profile_command(args, rec), env, pdir, "console", args.timeout)
    results["profile"] = {"run": r}
    log(f"    exit {r['rc']}, {r['wall_s']} s, SPS {r['sps']}")
    if rec.exists():
        try:
            results["profile"]["record"] = summarize_record(rec)
        except Exception as e:  # the record is kept; the summary is a convenience
            results["profile"]["record_error"] = f"{type(e).__name__}: {e}"
        rep = run_one([sys.executable, "-m", "perfkit", "report", str(rec), "-o", str(pdir / "report")], env, pdir,
                      "report", 300)
        results["profile"]["report"] = {"rc": rep["rc"], "dir": "profile/report"}
    if args.device.startswith("cuda") and not args.no_verify:
        vrec = pdir / "verify.json"
        log("(a) perfkit profile --verify (CUPTI-counted runtime syncs vs attributed)")
        v = run_one(profile_command(args, vrec, verify=True), env, pdir, "verify", args.timeout)
        results["profile"]["verify_run"] = v
        if vrec.exists():
            try:
                results["profile"]["verify"] = json.loads(vrec.read_text()).get("extra", {}).get("verify")
            except (OSError, json.JSONDecodeError) as e:
                results["profile"]["verify"] = f"unreadable: {e}"
        log(f"    exit {v['rc']}, verify {results['profile'].get('verify')}")


# ------------------------------------------------------------------------------------------ (b) overhead


def overhead_stage(args, env: dict[str, str], out: Path, results: dict, t_start: float) -> None:
    """plain vs ``perfkit profile -q`` vs torch.profiler: :func:`perfkit.overhead.measure`, the
    reports rewritten after every round."""

    def on_run(run: dict) -> None:
        log(f"(b) round {run['round']}/{args.rounds} "
            f"{run['arm']:15s} exit {run['rc']}  SPS {run['metric']}  wall {run['wall_s']} s")

    def on_round(res: dict) -> None:
        results["overhead"] = res
        write_reports(out, results)

    results["overhead"] = overhead.measure(
        overhead.Target(os.path.relpath(SCRIPT, ROOT), train_args(args)), arms=MODES, rounds=args.rounds, timeout=args.timeout,
        warmup_runs=0, env=env, cwd=ROOT, log_dir=out / "overhead", profile_args=["--warmup-steps", str(args.num_steps)],
        deadline=t_start + args.budget_s, machine=False,
        label=f"manager env through rsl_rl, {args.num_envs} envs, {args.iterations} iterations x {args.num_steps} steps",
        on_run=on_run, on_round=on_round)
    if results["overhead"].get("stopped"):
        log(results["overhead"]["stopped"])


# ------------------------------------------------------------------------------------------ reports


def _fmt(v, spec: str = "") -> str:
    if v is None:
        return "—"
    return format(v, spec) if spec else str(v)


def markdown(results: dict) -> str:
    ver = results.get("versions", {})
    lines = [f"# Manager env through rsl_rl under perfkit ({ver.get('gpu') or results['args']['device']})", "",
             f"`{results['command']}`", "",
             f"torch {ver.get('torch')} (CUDA {ver.get('cuda')}), rsl-rl-lib {ver.get('rsl-rl-lib')}, tensordict "
             f"{ver.get('tensordict')}, warp {ver.get('warp-lang')}, mujoco {ver.get('mujoco')}, mujoco-warp "
             f"{ver.get('mujoco-warp')}; started {results['started']}", ""]
    prof = results.get("profile")
    if prof:
        r = prof["run"]
        lines += ["## (a) perfkit profile", "", f"exit {r['rc']}, wall {r['wall_s']} s, the script's SPS {_fmt(r['sps'])}", ""]
        if r.get("stderr_tail"):
            lines += ["```", *r["stderr_tail"], "```", ""]
        rec = prof.get("record")
        if rec:
            lines += [f"record: status {rec['status']}, {rec['steps']} steady steps, {rec['num_envs']} envs, "
                      f"SPS {rec['sps']:,.0f}, step p50 {rec['step_ms'].get('p50')} ms, syncs/step {rec['syncs_per_step']}", "",
                      "| segment | gpu ms/step | cpu ms/step | syncs/step | calls/step |", "|---|---|---|---|---|"]
            for name, s in rec["segments"].items():
                lines.append(f"| {name} | {_fmt(s.get('gpu_ms_per_step'))} | {_fmt(s.get('cpu_ms_per_step'))} | "
                             f"{_fmt(s.get('syncs_per_step'))} | {_fmt(s.get('calls_per_step'))} |")
                for cname, c in (s.get("children") or {}).items():
                    lines.append(f"| &nbsp;&nbsp;{name} / {cname} | {_fmt(c.get('gpu_ms_per_step'))} | "
                                 f"{_fmt(c.get('cpu_ms_per_step'))} | {_fmt(c.get('syncs_per_step'))} | {_fmt(c.get('calls_per_step'))} |")
            lines += ["", "| sync site | op | segment | per step | library | chain |", "|---|---|---|---|---|---|"]
            for f in rec["top_syncs"]:
                chain = " ← ".join(f["chain"]) if f.get("chain") else "—"
                lines.append(f"| `{f['site']}` `{f['code'][:60]}` | {f['op']} | {f['segment']} | {f['per_step']} | "
                             f"{f['library']} | {chain} |")
            lines.append("")
        if prof.get("verify") is not None or prof.get("verify_run"):
            lines += [f"--verify: {json.dumps(prof.get('verify'))}", ""]
    ov = results.get("overhead")
    if ov and ov.get("rounds"):
        lines += [overhead.markdown(ov, heading="##")]
    return "\n".join(lines) + "\n"


def write_reports(out: Path, results: dict) -> None:
    dirs = [out] + ([Path(results["args"]["results"])] if results["args"].get("results") else [])
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
        (d / "stacks.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
        (d / "summary.md").write_text(markdown(results))


def all_ok(results: dict) -> bool:
    """Something ran and every run succeeded: (a)'s profile runs (exit 0 and an SPS line) and (b)'s."""
    prof = results.get("profile") or {}
    runs = [r for r in (prof.get("run"), prof.get("verify_run")) if r]
    ov = results.get("overhead")
    if not runs and not (ov and ov["rounds"]):
        return False
    if ov is not None and (ov["summary"]["failures"] or not ov["rounds"]):
        return False
    return all(r["rc"] == 0 and r["sps"] is not None for r in runs)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    t_start = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict = {"command": " ".join(["scripts/gpu/stacks.py", *argv]),
                     "args": vars(args), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    env, missing = ensure_stack(args)
    results["versions"] = versions(env)
    log(f"versions: {results['versions']}")
    if missing:
        results["missing"] = missing
        write_reports(out, results)
        print("stacks: missing on this machine (stage them: bash scripts/gpu/stage-wheels.sh for warp/mujoco/mujoco-warp, "
              "bash scripts/gpu/stage-stack-wheels.sh for rsl-rl-lib & co, and carry them):\n  " + "\n  ".join(missing),
              file=sys.stderr)
        return 2
    if args.device.startswith("cuda") and not results["versions"].get("gpu"):
        print("stacks: --device cuda but torch sees no GPU (use --device cpu for a smoke test)", file=sys.stderr)
        return 2
    if not args.skip_profile:
        profile_stage(args, env, out, results)
        write_reports(out, results)
    if not args.skip_overhead:
        overhead_stage(args, env, out, results, t_start)
    results["elapsed_s"] = round(time.perf_counter() - t_start, 1)
    write_reports(out, results)
    with tarfile.open(out / "stacks-results.tgz", "w:gz") as tar:
        for p in sorted(out.iterdir()):
            if p.name != "stacks-results.tgz":
                tar.add(p, arcname=p.name)
    if args.results:
        shutil.copy2(out / "stacks-results.tgz", Path(args.results) / "stacks-results.tgz")
    log(f"done in {results['elapsed_s']} s: {out / 'summary.md'}, {out / 'stacks-results.tgz'}")
    print((out / "summary.md").read_text(), flush=True)
    return 0 if all_ok(results) else 1


if __name__ == "__main__":
    sys.exit(main())

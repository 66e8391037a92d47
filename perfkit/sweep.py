"""Env-count sweeps: measure one target at several ``num_envs``, each point in a fresh subprocess.

A point runs in its own process so that one point's compiled kernels, cached allocator blocks or
out-of-memory state never leak into the next. Two kinds of target:

* an env factory ``module:callable`` — each point runs :mod:`perfkit.sweep_worker`, which builds the
  env with ``num_envs=N``, warms it up and times the steady state;
* a script (``path.py``) with ``num_envs_arg`` naming its env-count flag — each point runs
  ``perfkit profile -o points/N.json script.py --NAME N ...`` and keeps its record.

The output directory (its layout and reading it: :mod:`perfkit.sweep_record`) is what ``perfkit
report`` and ``perfkit compare`` read. The manifest and CSV are rewritten after every point, so an interrupted sweep keeps what it measured.
With several GPUs (``gpus=["0", "1"]``) one worker thread per GPU pulls points from a shared queue
and pins its subprocesses with ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from perfkit.analysis.knee import DEFAULT_THRESHOLD, find_knee
from perfkit.oom import is_oom_text
from perfkit.record import EXTRA_ERROR, RecordError, Run
from perfkit.sweep_record import CSV, MANIFEST, POINTS, SWEEP_SCHEMA, PointResult, Sweep, points_frame

MAX_POINTS = 64


class SweepError(ValueError):
    """Bad sweep input (env-count spec, target, manifest); the message says what and where."""


# ---- env-count specs ---------------------------------------------------------------------------

def parse_num_envs(spec: str) -> list[int]:
    """``"256..32768"`` -> 256, 512, ..., 32768 (doubling); ``"256..32768x4"`` -> factor 4;
    ``"256,1024,4096"`` -> that list; ``"4096"`` -> one point. Sorted, deduplicated."""
    s = str(spec).strip().replace(" ", "")
    if not s:
        raise SweepError("empty --num-envs")
    m = re.fullmatch(r"(\d+)\.\.(\d+)(?:[x*](\d+))?", s)
    if m:
        lo, hi = int(m.group(1)), int(m.group(2))
        factor = int(m.group(3) or 2)
        if lo < 1 or hi < lo:
            raise SweepError(f"--num-envs {spec!r}: need 1 <= start <= end")
        if factor < 2:
            raise SweepError(f"--num-envs {spec!r}: the growth factor must be >= 2")
        out, n = [], lo
        while n <= hi:
            out.append(n)
            n *= factor
        if out[-1] != hi:
            out.append(hi)  # the end of the range is always measured
        values = out
    elif re.fullmatch(r"\d+(,\d+)*,?", s):
        values = [int(x) for x in s.split(",") if x]
        if any(v < 1 for v in values):
            raise SweepError(f"--num-envs {spec!r}: env counts must be >= 1")
    else:
        raise SweepError(f"--num-envs {spec!r}: use a range START..END (doubling, or START..ENDxF) or a list A,B,C")
    values = sorted(set(values))
    if len(values) > MAX_POINTS:
        raise SweepError(f"--num-envs {spec!r}: {len(values)} points is more than {MAX_POINTS}")
    return values


def parse_env_kwargs(items: Iterable[str]) -> dict[str, Any]:
    """``["name=humanoid", "backend=mjwarp", "seed=3"]`` -> kwargs; values are JSON when they parse
    as JSON (numbers, true/false/null, lists), strings otherwise."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise SweepError(f"--env-kwarg {item!r}: use NAME=VALUE")
        if key == "num_envs":
            raise SweepError("--env-kwarg num_envs=...: the sweep sets num_envs itself (use --num-envs)")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


# ---- configuration and results -------------------------------------------------------------------

@dataclass
class SweepConfig:
    target: str  # "module:callable" or a script path
    num_envs: list[int]
    out_dir: Path
    steps: int = 200
    warmup_steps: int = 20
    actions: str = "random"
    seed: int = 0
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    num_envs_arg: str | None = None  # script targets: the flag that takes N ("--num-envs")
    script_args: list[str] = field(default_factory=list)  # script targets: further arguments
    gpus: list[str] | None = None  # CUDA_VISIBLE_DEVICES value per worker thread
    timeout_s: float | None = None  # per point
    budget_s: float | None = None  # no new point starts after this long; the rest are recorded "skipped"
    max_seconds: float | None = None  # steady state stops early after this long (factory targets)
    session_steps: int = 0  # instrumented steps per point under perfkit.session (factory targets)
    knee_threshold: float = DEFAULT_THRESHOLD
    python: str = field(default_factory=lambda: sys.executable)
    command: list[str] = field(default_factory=list)  # how the sweep was invoked, for the manifest

    @property
    def kind(self) -> str:
        return "script" if is_script_target(self.target) else "factory"

    def validate(self) -> None:
        if not self.num_envs:
            raise SweepError("no env counts to sweep")
        if self.kind == "script":
            if not Path(self.target).is_file():
                raise SweepError(f"script target {self.target!r} does not exist")
            if not self.num_envs_arg:
                raise SweepError(f"script target {self.target!r} needs --num-envs-arg NAME (the flag that takes the env count)")
        else:
            mod, sep, attr = self.target.partition(":")
            if not sep or not mod or not attr:
                raise SweepError(f"target {self.target!r}: use module:callable (e.g. perfkit.envs:make_env) or a script path")
        if self.steps < 1 or self.warmup_steps < 0:
            raise SweepError("--steps must be >= 1 and --warmup-steps >= 0")
        if self.actions not in ("random", "zero"):
            raise SweepError(f"--actions must be random or zero, not {self.actions!r}")
        if self.budget_s is not None and self.budget_s <= 0:
            raise SweepError("--budget must be > 0 seconds")
        if not 0 < self.knee_threshold < 10:
            raise SweepError(f"knee threshold must be a fraction such as 0.10, got {self.knee_threshold}")


def is_script_target(target: str) -> bool:
    return target.endswith(".py") or os.sep in target and ":" not in target


# ---- running -----------------------------------------------------------------------------------

def point_command(cfg: SweepConfig, n: int, record: Path) -> list[str]:
    if cfg.kind == "script":
        return [cfg.python, "-m", "perfkit", "profile", "-q", "-o", str(record), "--warmup-steps", str(cfg.warmup_steps),
                cfg.target, cfg.num_envs_arg, str(n), *cfg.script_args]
    point = {
        "target": cfg.target, "num_envs": n, "steps": cfg.steps, "warmup_steps": cfg.warmup_steps,
        "actions": cfg.actions, "seed": cfg.seed, "env_kwargs": cfg.env_kwargs,
        "max_seconds": cfg.max_seconds, "session_steps": cfg.session_steps,
        "command": ["perfkit", "sweep", cfg.target, "--num-envs", str(n)],
    }
    return [cfg.python, "-m", "perfkit.sweep_worker", "--config", json.dumps(point), "--out", str(record)]


def run_one(cfg: SweepConfig, n: int, gpu: str | None) -> tuple[PointResult, Run | None]:
    out = Path(cfg.out_dir)
    record = out / POINTS / f"{n}.json"
    log = out / POINTS / f"{n}.log"
    record.parent.mkdir(parents=True, exist_ok=True)
    if record.exists():
        record.unlink()  # a stale record from an earlier sweep must not pass for this one
    env = dict(os.environ)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    env.setdefault("PYTHONUNBUFFERED", "1")
    # the target module is resolved from where the sweep was started
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), *filter(None, [env.get("PYTHONPATH")])])
    res = PointResult(num_envs=n, status="error", record=f"{POINTS}/{n}.json", log=f"{POINTS}/{n}.log", gpu=gpu)
    t0 = time.perf_counter()
    with open(log, "w") as logf:
        try:
            proc = subprocess.run(point_command(cfg, n, record), stdout=logf, stderr=subprocess.STDOUT,
                                  env=env, timeout=cfg.timeout_s, stdin=subprocess.DEVNULL)
            res.rc = proc.returncode
        except subprocess.TimeoutExpired:
            res.status, res.rc = "timeout", None
            res.error = f"point took longer than {cfg.timeout_s:g} s"
    res.elapsed_s = time.perf_counter() - t0
    run = None
    if record.exists():
        try:
            run = Run.load(record)
        except RecordError as e:
            res.error = str(e)
    log_tail = _tail(log)
    if res.status != "timeout":
        if run is not None:
            res.status = run.status
            if res.status == "partial" and res.rc == 0:
                res.status = "complete"
            elif res.status == "complete" and res.rc not in (0, None):
                res.status = "error"  # e.g. a script that wrote its record, then exited non-zero
            res.error = run.extra.get(EXTRA_ERROR) or (None if res.rc == 0 else f"exit code {res.rc}: {_last_line(log_tail)}")
            if res.status == "complete" and run.steps == 0:
                res.status = "error"
                res.error = (f"no steady-state step measured (every step was warm-up: fewer than "
                             f"--warmup-steps {cfg.warmup_steps}, or no env.step found)")
        if run is not None and res.rc not in (0, None) and is_oom_text(log_tail):
            res.status = "oom"
        elif run is None:
            res.status = "oom" if is_oom_text(log_tail) or res.rc in (-9, 137) else "error"
            res.error = res.error or f"no record written (exit code {res.rc}): {log_tail[-300:].strip()}"
    if run is None or run.status != res.status:
        # keep one record per point whatever happened, so the report can list it
        run = run or Run(command=point_command(cfg, n, record)[1:], num_envs=n)
        run.status = res.status
        run.exit_code = res.rc
        run.extra.setdefault(EXTRA_ERROR, res.error)
        run.save(record)
    return res, run


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][-300:] if lines else "(no output)"


def _tail(path: Path, n: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - n))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def run_sweep(cfg: SweepConfig, progress: bool = True,
              on_point: Callable[[PointResult, Run | None], None] | None = None) -> Sweep:
    """Run every point (in parallel across ``cfg.gpus``), writing the output directory as it goes."""
    cfg.validate()
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    points = {n: PointResult(num_envs=n, status="pending") for n in cfg.num_envs}
    runs: dict[int, Run] = {}
    lock = threading.Lock()
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    bar = _progress(len(points), progress, desc=f"sweep {cfg.target}")

    def record(res: PointResult, run: Run | None) -> None:
        with lock:
            points[res.num_envs] = res
            if run is not None:
                runs[res.num_envs] = run
            write_outputs(cfg, list(points.values()), runs, started)
            if bar is not None:
                sps = f"{run.sps:,.0f} SPS" if run is not None and res.status == "complete" else res.status
                bar.set_postfix_str(f"n={res.num_envs}: {sps}", refresh=False)
                bar.update(1)
            if on_point:
                on_point(res, run)

    gpus: list[str | None] = list(cfg.gpus) if cfg.gpus else [None]
    todo: queue.Queue[int] = queue.Queue()
    for n in cfg.num_envs:
        todo.put(n)

    t_start = time.perf_counter()

    def worker(gpu: str | None) -> None:
        while True:
            try:
                n = todo.get_nowait()
            except queue.Empty:
                return
            if cfg.budget_s is not None and time.perf_counter() - t_start > cfg.budget_s:
                record(PointResult(num_envs=n, status="skipped", gpu=gpu,
                                   error=f"not started: the sweep's --budget of {cfg.budget_s:g} s was spent"), None)
                continue
            try:
                res, run = run_one(cfg, n, gpu)
            except Exception as e:  # a broken point must not end the sweep
                res, run = PointResult(num_envs=n, status="error", gpu=gpu, error=f"{type(e).__name__}: {e}"), None
            record(res, run)

    write_outputs(cfg, list(points.values()), runs, started)
    try:
        if len(gpus) == 1:
            worker(gpus[0])
        else:
            threads = [threading.Thread(target=worker, args=(g,), name=f"sweep-gpu{g}", daemon=True) for g in gpus]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        if bar is not None:
            bar.close()
    return Sweep(dir=out, manifest=manifest_dict(cfg, list(points.values()), runs, started),
                 points=sorted(points.values(), key=lambda p: p.num_envs), runs=runs)


def _progress(total: int, enabled: bool, desc: str):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="point", file=sys.stderr, dynamic_ncols=True)


def manifest_dict(cfg: SweepConfig, points: list[PointResult], runs: dict[int, Run], started: str) -> dict[str, Any]:
    done = [runs[p.num_envs] for p in points if p.status == "complete" and p.num_envs in runs]
    knee = find_knee([r.num_envs for r in done], [r.sps for r in done], cfg.knee_threshold)
    machine = next((r.machine for r in done if r.machine), None) or next((r.machine for r in runs.values() if r.machine), {})
    opts = {k: v for k, v in asdict(cfg).items() if k not in ("target", "num_envs", "out_dir", "command", "python")}
    return {
        "schema": SWEEP_SCHEMA,
        "target": cfg.target,
        "kind": cfg.kind,
        "command": cfg.command,
        "started": started,
        "updated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "num_envs": list(cfg.num_envs),
        "options": opts,
        "points": [asdict(p) for p in sorted(points, key=lambda p: p.num_envs)],
        "knee": knee.to_dict(),
        "csv": CSV,
        "machine": machine,
    }


def write_outputs(cfg: SweepConfig, points: list[PointResult], runs: dict[int, Run], started: str) -> None:
    out = Path(cfg.out_dir)
    df = points_frame(points, runs)
    tmp = out / (CSV + ".tmp")
    df.to_csv(tmp, index=False)
    os.replace(tmp, out / CSV)
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest_dict(cfg, points, runs, started), indent=1, default=str) + "\n")
    os.replace(tmp, out / MANIFEST)



"""Env-count sweeps: measure one target at several ``num_envs``, each point in a fresh subprocess.

A point runs in its own process so that one point's compiled kernels, cached allocator blocks or
out-of-memory state never leak into the next. Two kinds of target:

* an env factory ``module:callable`` — each point runs :mod:`perfkit.sweeps.worker`, which builds the
  env with ``num_envs=N``, warms it up and times the steady state;
* a script (``path.py``) with ``num_envs_arg`` naming its env-count flag — each point runs
  ``perfkit profile -o points/N.json script.py --NAME N ...`` and keeps its record.

The output directory (its layout and reading it: :mod:`perfkit.sweeps.record`) is what ``perfkit
report`` and ``perfkit compare`` read. The manifest and CSV are rewritten after every point, so an interrupted sweep keeps what it measured;
``resume=True`` (``--resume``) runs only the points a sweep with the same measurement options in the
same directory did not finish (complete or out of memory); a folder that already holds a sweep, or
other files, is refused without it or ``overwrite=True`` (``--overwrite``: only what the old sweep
wrote is removed). Before the first point the target is
checked without running it: a factory's module must be found and define the callable, a script
must compile. Each point has a time limit (``DEFAULT_TIMEOUT_S`` unless given).
With several GPUs (``gpus=["0", "1"]``) one worker thread per GPU pulls points from a shared queue
and pins its subprocesses with ``CUDA_VISIBLE_DEVICES``. A point is a single process: the launcher's
variables (``RANK``, ``WORLD_SIZE``, ... :data:`perfkit.dist.LAUNCH_VARS`) are not passed on, so its
record is rank 0 of a world of 1 whatever shell the sweep runs in, its ``dist.device`` the GPU it
saw (``cuda:0``) and ``dist.physical_gpu`` the machine's GPU behind it.
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

from perfkit.sweeps.knee import DEFAULT_THRESHOLD, find_knee
from perfkit.dist import LAUNCH_VARS
from perfkit.sweeps.oom import is_oom_text
from perfkit.record import EXTRA_ERROR, RecordError, Run
from perfkit.sweeps.record import CSV, MANIFEST, POINTS, SWEEP_SCHEMA, PointResult, Sweep, load_sweep, points_frame

MAX_POINTS = 64
DEFAULT_TIMEOUT_S = 1800.0  # per point: a hung point (a deadlock, a stuck driver) must not hold the sweep
FINISHED = ("complete", "oom")  # point results --resume keeps: measured, or definitively out of memory
# options that change what a point measures: a resumed sweep must have the same
MEASUREMENT_OPTIONS = ("steps", "warmup_steps", "actions", "seed", "env_kwargs", "num_envs_arg", "script_args",
                       "max_seconds", "session_steps")


class SweepError(ValueError):
    """Bad sweep input (env-count spec, target, manifest); the message says what and where."""


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped the sweep; the output directory holds what finished (``sweep`` has it)."""

    def __init__(self, sweep: "Sweep"):
        super().__init__("sweep interrupted")
        self.sweep = sweep


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
    timeout_s: float | None = DEFAULT_TIMEOUT_S  # per point; None: no limit
    budget_s: float | None = None  # no new point starts after this long; the rest are recorded "skipped"
    max_seconds: float | None = None  # steady state stops early after this long (factory targets)
    session_steps: int = 0  # instrumented steps per point under perfkit.profile.session (factory targets)
    knee_threshold: float = DEFAULT_THRESHOLD
    python: str = field(default_factory=lambda: sys.executable)
    command: list[str] = field(default_factory=list)  # how the sweep was invoked, for the manifest
    resume: bool = False  # keep the finished points of the sweep already in out_dir
    overwrite: bool = False  # replace the sweep already in out_dir (only what it wrote), or write beside other files

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
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise SweepError("--timeout must be > 0 seconds")

    def check_out_dir(self) -> None:
        """SweepError when ``out_dir`` holds what this sweep must not replace: a sweep (unless
        ``resume`` finishes it or ``overwrite`` replaces it), other files (unless ``resume`` or
        ``overwrite`` says to write beside them), or a sweep's file names that no sweep manifest
        accounts for (never replaced). Nothing is changed here."""
        if self.resume and self.overwrite:
            raise SweepError("--resume keeps the sweep in the output folder, --overwrite replaces it: give one of them")
        out = Path(self.out_dir)
        if not out.is_dir():
            return  # absent (created when the sweep starts), or a file: the writability check says
        entries = sorted(p.name for p in out.iterdir())
        if not entries:
            return
        if MANIFEST in entries:
            try:
                prev = load_sweep(out)
            except RecordError as e:
                raise SweepError(f"{out} holds a {MANIFEST} that is not a sweep perfkit can read ({e}); nothing in it "
                                 "is replaced: move it away or give another -o") from None
            if self.resume or self.overwrite:
                return
            done = sum(p.status in FINISHED for p in prev.points)
            raise SweepError(f"{out} already holds a sweep of {prev.target} ({done} of {len(prev.points)} points "
                             f"finished, started {prev.manifest.get('started', '?')}): --resume finishes it, "
                             "--overwrite replaces it (only the files that sweep wrote), or give another -o")
        ours = [name for name in (CSV, POINTS) if name in entries]
        if ours:
            raise SweepError(f"{out} holds {' and '.join(ours)} but no {MANIFEST}: no sweep accounts for them, so "
                             "nothing there is replaced; move them away or give another -o")
        if not (self.resume or self.overwrite):
            shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
            raise SweepError(f"{out} is not empty ({len(entries)} entries: {shown}) and holds no sweep: give "
                             "--overwrite to write the sweep beside them (they are kept), or another -o")

    def check_target(self) -> None:
        """SweepError when the target cannot run, found without running any of its code: a factory's
        module must exist and (where its source says) define the callable; a script must compile."""
        if self.kind == "script":
            from perfkit.profile.runner import TargetError, check_syntax

            try:
                check_syntax(self.target)
            except TargetError as e:
                raise SweepError(str(e)) from None
        else:
            check_factory(self.target)


def check_factory(target: str) -> None:
    """The module of ``module:callable`` is found (from the working directory, as the points will)
    and, when its source is readable, binds the callable's first name at module level. Nothing of
    the module runs (a module may take minutes to import, or build a GPU context)."""
    import ast
    import importlib.util

    module, _, attr = target.partition(":")
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as e:  # a parent package that is missing or fails to import
        raise SweepError(f"target {target!r}: cannot import {module!r}: {type(e).__name__}: {e}") from None
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)
    if spec is None:
        raise SweepError(f"target {target!r}: no module named {module!r} (looked in {cwd} and sys.path)")
    origin = spec.origin or ""
    if not origin.endswith(".py"):
        return  # a package without source or an extension module: the point will say
    try:
        tree = ast.parse(Path(origin).read_bytes(), filename=origin)
    except (OSError, SyntaxError, ValueError) as e:
        raise SweepError(f"target {target!r}: {origin} does not compile: {e}") from None
    first = attr.split(".")[0]
    names: set[str] = set()
    dynamic = False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            dynamic |= node.name == "__getattr__"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                dynamic |= a.name == "*"
                names.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            dynamic = True  # names bound conditionally: leave them to the point
    if first not in names and not dynamic:
        raise SweepError(f"target {target!r}: {module} ({origin}) defines no {first!r}")


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
    return [cfg.python, "-m", "perfkit.sweeps.worker", "--config", json.dumps(point), "--out", str(record)]


def run_one(cfg: SweepConfig, n: int, gpu: str | None) -> tuple[PointResult, Run | None]:
    out = Path(cfg.out_dir)
    record = out / POINTS / f"{n}.json"
    log = out / POINTS / f"{n}.log"
    record.parent.mkdir(parents=True, exist_ok=True)
    if record.exists():
        record.unlink()  # a stale record from an earlier sweep must not pass for this one
    env = dict(os.environ)
    for k in LAUNCH_VARS:  # a point is one process, rank 0 of 1, even in a shell inside a torchrun job
        env.pop(k, None)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    env.setdefault("PYTHONUNBUFFERED", "1")
    # the target module is resolved from where the sweep was started
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), *filter(None, [env.get("PYTHONPATH")])])
    res = PointResult(num_envs=n, status="error", record=f"{POINTS}/{n}.json", log=f"{POINTS}/{n}.log", gpu=gpu)
    t0 = time.perf_counter()
    with open(log, "w") as logf:
        proc = subprocess.Popen(point_command(cfg, n, record), stdout=logf, stderr=subprocess.STDOUT, env=env,
                                stdin=subprocess.DEVNULL)
        with _RUNNING_LOCK:
            _RUNNING.add(proc)
        try:
            res.rc = proc.wait(timeout=cfg.timeout_s)
        except subprocess.TimeoutExpired:
            _stop(proc)
            res.status, res.rc = "timeout", None
            res.error = f"point took longer than {cfg.timeout_s:g} s"
        except BaseException:  # Ctrl-C: the point is abandoned, not recorded
            _stop(proc)
            raise
        finally:
            with _RUNNING_LOCK:
                _RUNNING.discard(proc)
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


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Warning)\b.*|^Error: .*")


def _last_line(text: str) -> str:
    """The line of a log that says why a point failed: its last exception line (``ValueError: ...``,
    perfkit's ``Error: ...``), else its last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if _EXCEPTION_LINE.match(ln):
            return ln[-300:]
    return lines[-1][-300:] if lines else "(no output)"


_RUNNING: set[subprocess.Popen] = set()  # point processes in flight, stopped on Ctrl-C
_RUNNING_LOCK = threading.Lock()


def _stop(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """End a point process: SIGTERM (it writes a partial record), then SIGKILL."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _tail(path: Path, n: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - n))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _resumable(cfg: SweepConfig, out: Path) -> tuple[dict[int, PointResult], dict[int, Run], str | None]:
    """The finished points of the sweep already in ``out`` that this one can keep (``cfg.resume``);
    SweepError when that sweep measured something else."""
    if not cfg.resume or not (out / MANIFEST).is_file():
        return {}, {}, None
    try:
        prev = load_sweep(out)
    except RecordError as e:
        raise SweepError(f"--resume: {e}") from None
    if prev.manifest.get("target") != cfg.target:
        raise SweepError(f"--resume: {out} holds a sweep of {prev.manifest.get('target')!r}, not {cfg.target!r}")
    opts = prev.manifest.get("options") or {}
    ours = asdict(cfg)
    differ = [k for k in MEASUREMENT_OPTIONS if k in opts and opts[k] != ours[k]]
    if differ:
        shown = ", ".join(f"{k} {opts[k]!r} there, {ours[k]!r} here" for k in differ)
        raise SweepError(f"--resume: the sweep in {out} was measured with other options ({shown}); "
                         "resume with the same ones, or sweep into another -o")
    keep = {p.num_envs: p for p in prev.points
            if p.num_envs in cfg.num_envs and p.status in FINISHED and p.num_envs in prev.runs}
    return keep, {n: prev.runs[n] for n in keep}, prev.manifest.get("started")


def clear_previous(out: Path) -> None:
    """``--overwrite``: remove what the sweep in ``out`` wrote — its manifest, its table and the
    record and log of each of its env counts (names this module makes, never paths read from the
    manifest) — and nothing else."""
    try:
        data = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        return
    counts = {p.get("num_envs") for p in data.get("points") or [] if isinstance(p, dict)} | set(data.get("num_envs") or [])
    for n in counts:
        if isinstance(n, int) and not isinstance(n, bool):
            for suffix in (".json", ".log"):
                (out / POINTS / f"{n}{suffix}").unlink(missing_ok=True)
    try:
        (out / POINTS).rmdir()  # only when nothing else is left in it
    except OSError:
        pass
    (out / CSV).unlink(missing_ok=True)
    (out / MANIFEST).unlink(missing_ok=True)


def run_sweep(cfg: SweepConfig, progress: bool = True,
              on_point: Callable[[PointResult, Run | None], None] | None = None) -> Sweep:
    """Run every point (in parallel across ``cfg.gpus``), writing the output directory as it goes.
    Ctrl-C stops the points in flight and raises :class:`SweepInterrupted` once the directory holds
    what finished (resume it with ``cfg.resume``)."""
    cfg.validate()
    cfg.check_out_dir()
    out = Path(cfg.out_dir)
    if cfg.overwrite:
        clear_previous(out)
    out.mkdir(parents=True, exist_ok=True)
    kept, kept_runs, prev_started = _resumable(cfg, out)
    points = {n: kept.get(n) or PointResult(num_envs=n, status="pending") for n in cfg.num_envs}
    runs: dict[int, Run] = dict(kept_runs)
    lock = threading.Lock()
    started = prev_started or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    todo_list = [n for n in cfg.num_envs if n not in kept]
    bar = _progress(len(todo_list), progress, desc=f"sweep {cfg.target}")
    stop = threading.Event()

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
    for n in todo_list:
        todo.put(n)

    t_start = time.perf_counter()

    def worker(gpu: str | None) -> None:
        while not stop.is_set():
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
            if stop.is_set():
                return  # stopped by Ctrl-C mid-point: the point stays pending
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
                while t.is_alive():
                    t.join(0.2)  # a timed join lets Ctrl-C reach this thread
    except KeyboardInterrupt:
        stop.set()
        with _RUNNING_LOCK:
            running = list(_RUNNING)
        for proc in running:
            _stop(proc)
        with lock:
            write_outputs(cfg, list(points.values()), runs, started, interrupted=True)
            sweep = Sweep(dir=out, manifest=manifest_dict(cfg, list(points.values()), runs, started, interrupted=True),
                          points=sorted(points.values(), key=lambda p: p.num_envs), runs=dict(runs))
        raise SweepInterrupted(sweep) from None
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


def manifest_dict(cfg: SweepConfig, points: list[PointResult], runs: dict[int, Run], started: str,
                  interrupted: bool = False) -> dict[str, Any]:
    done = [runs[p.num_envs] for p in points if p.status == "complete" and p.num_envs in runs]
    knee = find_knee([r.num_envs for r in done], [r.sps for r in done], cfg.knee_threshold)
    machine = next((r.machine for r in done if r.machine), None) or next((r.machine for r in runs.values() if r.machine), {})
    opts = {k: v for k, v in asdict(cfg).items() if k not in ("target", "num_envs", "out_dir", "command", "python", "resume", "overwrite")}
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
        "interrupted": interrupted,
    }


def write_outputs(cfg: SweepConfig, points: list[PointResult], runs: dict[int, Run], started: str,
                  interrupted: bool = False) -> None:
    from perfkit.outputs import write_text

    out = Path(cfg.out_dir)
    write_text(out / CSV, points_frame(points, runs).to_csv(index=False))
    write_text(out / MANIFEST, json.dumps(manifest_dict(cfg, points, runs, started, interrupted), indent=1,
                                          default=str) + "\n")



"""Running the library-stack example scripts plainly and under ``perfkit profile``, in subprocesses.

Each distinct run (script, arguments, plain/profiled, environment) is made once per test session and
shared by every test that asks for it (:func:`submit`): the tests of one script read one record. Runs
start without waiting, two at a time: a test module starts its plain and its profiled run together,
and the two cores of a CI machine run them side by side.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import re
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
STACKS = EXAMPLES / "stacks"
MANAGER_ENV = EXAMPLES / "manager_env"
RUN_TIMEOUT_S = 240

_SPS = re.compile(r"^SPS: ([0-9.eE+-]+)\s*$", re.M)


@dataclasses.dataclass
class ScriptRun:
    cmd: list[str]
    returncode: int
    stdout: str
    stderr: str
    record_path: Path | None

    @property
    def sps(self) -> float | None:
        found = _SPS.findall(self.stdout)
        return float(found[-1]) if found else None

    def record(self):
        import perfkit

        assert self.record_path is not None, "a plain run has no record"
        return perfkit.Run.load(self.record_path)

    def line_starting(self, prefix: str) -> str | None:
        lines = [ln for ln in self.stdout.splitlines() if ln.startswith(prefix)]
        return lines[-1] if lines else None

    def describe(self) -> str:
        return f"$ {' '.join(self.cmd)}\nexit {self.returncode}\n--- stdout (tail) ---\n{self.stdout[-3000:]}\n--- stderr (tail) ---\n{self.stderr[-3000:]}"


_cache: dict[tuple, Future] = {}
_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="stack-run")


def submit(workdir: Path, script: Path, args: list[str], *, profile: bool, warmup_steps: int | None = None,
           env: dict[str, str] | None = None) -> Future:
    """Start ``script args`` in a fresh Python (``perfkit profile -o REC script args`` when ``profile``),
    with this checkout first on ``PYTHONPATH`` and ``workdir`` as the working directory; the future's
    result is a :class:`ScriptRun`. The same run asked for twice is made once."""
    key = (str(script), tuple(args), profile, warmup_steps, tuple(sorted((env or {}).items())))
    if key not in _cache:
        record = workdir / f"run{len(_cache)}.json" if profile else None
        _cache[key] = _pool.submit(_run, workdir, script, args, record, warmup_steps, env)
    return _cache[key]


def _run(workdir: Path, script: Path, args: list[str], record: Path | None, warmup_steps: int | None,
         env: dict[str, str] | None) -> ScriptRun:
    run_env = os.environ.copy()
    run_env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in run_env.get("PYTHONPATH", "").split(os.pathsep) if p])
    run_env["PYTHONUNBUFFERED"] = "1"
    run_env.update(env or {})
    if record is not None:
        cmd = [sys.executable, "-m", "perfkit", "profile", "-o", str(record)]
        if warmup_steps is not None:
            cmd += ["--warmup-steps", str(warmup_steps)]
        cmd += [str(script), *args]
    else:
        cmd = [sys.executable, str(script), *args]
    p = subprocess.run(cmd, cwd=workdir, env=run_env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    return ScriptRun(cmd, p.returncode, p.stdout, p.stderr, record)


def plain_and_profiled(workdir: Path, script: Path, args: list[str], warmup_steps: int) -> tuple[ScriptRun, ScriptRun]:
    """``script args`` run plainly and under ``perfkit profile --warmup-steps warmup_steps``, side by side."""
    plain = submit(workdir, script, args, profile=False)
    profiled = submit(workdir, script, args, profile=True, warmup_steps=warmup_steps)
    return plain.result(), profiled.result()


def assert_runs_as_without(plain: ScriptRun, profiled: ScriptRun, num_envs: int) -> None:
    """The script exits as it does without perfkit, both runs print a positive SPS, and the record is
    complete, of ``num_envs`` envs, with steady steps."""
    assert plain.returncode == 0, plain.describe()
    assert profiled.returncode == plain.returncode, profiled.describe()
    assert plain.sps is not None and plain.sps > 0, plain.describe()
    assert profiled.sps is not None and profiled.sps > 0, profiled.describe()
    rec = profiled.record()
    assert rec.status == "complete"
    assert rec.num_envs == num_envs
    assert rec.steps > 0


def line_of(path: Path | str, text: str) -> int:
    """The 1-based number of the only line of ``path`` that contains ``text`` (stripped)."""
    hits = [i for i, ln in enumerate(Path(path).read_text().splitlines(), 1) if text in ln]
    assert len(hits) == 1, f"{text!r} found on lines {hits} of {path}; expected exactly one"
    return hits[0]


def module_file(module: str) -> Path:
    """The installed file of ``module`` (e.g. ``rsl_rl.algorithms.ppo``)."""
    import importlib.util

    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, f"{module} is not installed"
    return Path(spec.origin)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def assert_library(finding, dist: str) -> None:
    """``finding.library`` names distribution ``dist`` (PEP 503-normalized: ``stable_baselines3`` is
    ``stable-baselines3``) and its installed version."""
    lib = getattr(finding, "library", None)
    assert isinstance(lib, str) and " " in lib, f"library {lib!r}: expected '<distribution> <version>'"
    name, _, version = lib.rpartition(" ")
    assert _norm(name) == _norm(dist), lib
    assert version == importlib.metadata.version(dist), lib


def sync_at(run, path_suffix: str, code: str):
    """The one sync finding whose path ends with ``path_suffix`` and whose source line is ``code``."""
    hits = [f for f in run.findings if f.kind == "sync" and f.path.replace(os.sep, "/").endswith(path_suffix) and f.code == code]
    where = sorted({f"{f.path}:{f.line} [{f.op}] {f.code}" for f in run.findings if f.kind == "sync"})
    assert len(hits) == 1, f"expected one sync at {path_suffix} `{code}`, found {len(hits)}; the run's syncs:\n" + "\n".join(where)
    return hits[0]


def chain_of(finding) -> list[str]:
    chain = getattr(finding, "chain", None)
    assert chain is not None, "Finding has no `chain` field"
    return [c.replace(os.sep, "/") for c in chain]


def child_stats(segment, name_suffix: str) -> dict:
    """The breakdown entry of ``segment`` (``SegmentStats.children``) whose name ends with ``name_suffix``,
    as a dict (entries may be dicts or SegmentStats-like objects)."""
    children = getattr(segment, "children", None)
    assert children, "SegmentStats has no `children` breakdown"
    hits = [k for k in children if k.endswith(name_suffix)]
    assert len(hits) == 1, f"expected one child named *{name_suffix}, got {hits} of {sorted(children)}"
    c = children[hits[0]]
    return dict(c) if isinstance(c, dict) else dataclasses.asdict(c)


def per_update_rate(epochs: int, mini_batches: int, steps_per_iteration: int, steady_iterations: int) -> tuple[float, float]:
    """(expected, tolerance) of the per-step rate of a sync made once per PPO mini-batch: ``epochs *
    mini_batches`` per iteration of ``steps_per_iteration`` env steps. The steady window's last update
    runs after the last step starts and may count as teardown: one iteration's worth either way."""
    rate = epochs * mini_batches / steps_per_iteration
    return rate, rate / steady_iterations + 1e-6

"""A sweep on disk: its manifest (``sweep.json``, schema ``perfkit.sweep/1``), its points and their records.

The data side of :mod:`perfkit.sweeps.runner` (which runs the points): what ``perfkit report``, ``perfkit
compare`` and scripts read. Layout of a sweep directory::

    sweep.json        manifest: target, options, points, knee
    sweep.csv         one row per point (pandas)
    points/<N>.json   the run record of each point (perfkit.run/3), OOM and failed points included
    points/<N>.log    the point's stdout/stderr
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfkit.sweeps.knee import DEFAULT_THRESHOLD, Knee, find_knee
from perfkit.record import (
    EXTRA_BUILD_S, EXTRA_CUDA_VISIBLE_DEVICES, EXTRA_FIRST_STEP_S, EXTRA_GPU_INDEX, EXTRA_HOST_MS_PER_STEP,
    EXTRA_PHYSICS_SPS, EXTRA_TIMING, EXTRA_WARMUP_STEPS_S, RecordError, Run,
)

SWEEP_SCHEMA = "perfkit.sweep/1"
"""The manifest schema this perfkit writes."""
READABLE_SWEEP_SCHEMAS: tuple[str, ...] = ("perfkit.sweep/1",)
"""The manifest schemas :func:`load_sweep` accepts (a new schema is one more entry here)."""
MANIFEST = "sweep.json"
CSV = "sweep.csv"
POINTS = "points"


@dataclass
class PointResult:
    num_envs: int
    status: str  # complete | oom | error | timeout | partial | pending | skipped
    record: str | None = None  # path relative to the sweep dir
    log: str | None = None
    rc: int | None = None
    elapsed_s: float | None = None
    gpu: str | None = None
    error: str | None = None


@dataclass
class Sweep:
    """A sweep on disk (or just run): its manifest, points, and their run records."""

    dir: Path
    manifest: dict[str, Any]
    points: list[PointResult]
    runs: dict[int, Run]  # num_envs -> record, for points whose record could be read

    @property
    def target(self) -> str:
        return self.manifest.get("target", "?")

    @property
    def label(self) -> str:
        kw = self.manifest.get("options", {}).get("env_kwargs") or {}
        extra = ",".join(f"{k}={v}" for k, v in kw.items())
        return f"{self.target}({extra})" if extra else self.target

    @property
    def short_label(self) -> str:
        """For plot legends: the env's name and backend when given (``ant/mjwarp``), else the callable."""
        kw = self.manifest.get("options", {}).get("env_kwargs") or {}
        if kw.get("name"):
            return "/".join(str(kw[k]) for k in ("name", "backend") if kw.get(k))
        return self.target.rsplit(":", 1)[-1].rsplit("/", 1)[-1]

    def completed(self) -> list[Run]:
        return [self.runs[p.num_envs] for p in self.points if p.status == "complete" and p.num_envs in self.runs]

    def knee(self, threshold: float | None = None) -> Knee:
        th = threshold if threshold is not None else self.manifest.get("options", {}).get("knee_threshold", DEFAULT_THRESHOLD)
        done = self.completed()
        return find_knee([r.num_envs for r in done], [r.sps for r in done], th)

    def describe_knee(self) -> str:
        """The knee in words; when no point completed, why: how many failed, and how."""
        if not self.completed():
            ended = [p for p in self.points if p.status not in ("complete", "pending", "skipped")]
            if ended and len(ended) == len(self.points):
                from collections import Counter

                how = ", ".join(f"{k} {v}" for k, v in Counter(p.status for p in ended).items())
                return f"no knee: all {len(ended)} points failed ({how})"
        return self.knee().describe()

    def frame(self):
        return points_frame(self.points, self.runs)


# ---- tables ------------------------------------------------------------------------------------

def physics_sps(run: Run) -> float | None:
    """Physics steps/s: recorded by the sweep worker; otherwise env SPS x the env's decimation when
    the record knows it (a script point recorded by ``perfkit profile``)."""
    v = run.extra.get(EXTRA_PHYSICS_SPS)
    if v is None and run.sps and isinstance(run.env.get("decimation"), (int, float)):
        v = run.sps * run.env["decimation"]
    return v


def point_row(p: PointResult, run: Run | None) -> dict[str, Any]:
    row: dict[str, Any] = {"num_envs": p.num_envs, "status": p.status}
    r = run
    row.update(
        sps=r.sps if r and p.status == "complete" else math.nan,
        physics_sps=(physics_sps(r) or math.nan) if r and p.status == "complete" else math.nan,
        step_ms_p50=r.step_ms.get("p50", math.nan) if r else math.nan,
        step_ms_p99=r.step_ms.get("p99", math.nan) if r else math.nan,
        step_ms_mean=r.step_ms.get("mean", math.nan) if r else math.nan,
        steps=r.steps if r else 0,
        wall_s=r.wall_s if r else math.nan,
        warmup_s=r.warmup_s if r else math.nan,
        build_s=r.extra.get(EXTRA_BUILD_S, math.nan) if r else math.nan,
        first_step_s=(r.extra.get(EXTRA_FIRST_STEP_S) if r and r.extra.get(EXTRA_FIRST_STEP_S) is not None else math.nan),
        warmup_steps_s=r.extra.get(EXTRA_WARMUP_STEPS_S, math.nan) if r else math.nan,
        host_ms_per_step=r.extra.get(EXTRA_HOST_MS_PER_STEP, math.nan) if r else math.nan,
        timing=r.extra.get(EXTRA_TIMING) if r else None,
        peak_gpu_bytes=r.memory.get("peak_gpu_bytes", math.nan) if r else math.nan,
        gpu_used_bytes=r.memory.get("gpu_used_bytes", math.nan) if r else math.nan,
        host_peak_rss_bytes=r.memory.get("host_peak_rss_bytes", math.nan) if r else math.nan,
        host_rss_bytes=r.memory.get("host_rss_bytes", math.nan) if r else math.nan,
        syncs_per_step=sum(s.syncs_per_step for s in r.segments.values()) if r else math.nan,
        allocs_per_step=sum(s.allocs_per_step for s in r.segments.values()) if r else math.nan,
    )
    if r:
        for name, seg in r.segments.items():
            t = seg.gpu_ms_per_step if seg.gpu_ms_per_step is not None else seg.cpu_ms_per_step
            row[f"seg_{name}_ms"] = t
    row.update(gpu=p.gpu, elapsed_s=p.elapsed_s, rc=p.rc, record=p.record, error=p.error,
               cuda_visible_devices=r.extra.get(EXTRA_CUDA_VISIBLE_DEVICES) if r else None,
               gpu_index=r.extra.get(EXTRA_GPU_INDEX) if r else None)
    return row


def points_frame(points: list[PointResult], runs: dict[int, Run]):
    import pandas as pd

    rows = [point_row(p, runs.get(p.num_envs)) for p in sorted(points, key=lambda p: p.num_envs)]
    return pd.DataFrame(rows)


# ---- reading ------------------------------------------------------------------------------------

def is_sweep_path(path: str | os.PathLike) -> bool:
    """A sweep directory (holding sweep.json) or a manifest file of schema perfkit.sweep/*."""
    p = Path(path)
    if p.is_dir():
        return (p / MANIFEST).is_file()
    if p.is_file():
        try:
            with open(p, "rb") as f:
                head = f.read(4096).decode(errors="replace")
        except OSError:
            return False
        return '"perfkit.sweep/' in head
    return False


def load_sweep(path: str | os.PathLike) -> Sweep:
    """Read a sweep directory or manifest; the records of its points are loaded beside it."""
    p = Path(path)
    manifest_path = p / MANIFEST if p.is_dir() else p
    try:
        data = json.loads(manifest_path.read_text())
    except FileNotFoundError:
        raise RecordError(f"{manifest_path}: no such sweep manifest") from None
    except (OSError, UnicodeDecodeError) as e:
        raise RecordError(f"{manifest_path}: cannot read: {e}") from None
    except json.JSONDecodeError as e:
        raise RecordError(f"{manifest_path}: not JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    if not isinstance(data, dict) or data.get("schema") not in READABLE_SWEEP_SCHEMAS:
        got = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise RecordError(f"{manifest_path}: schema {got!r} is not one this perfkit reads ({', '.join(READABLE_SWEEP_SCHEMAS)})")
    base = manifest_path.parent
    points: list[PointResult] = []
    runs: dict[int, Run] = {}
    known = set(PointResult.__dataclass_fields__)
    try:
        for d in data.get("points", []):
            pr = PointResult(**{k: v for k, v in d.items() if k in known})
            points.append(pr)
            if pr.record and pr.status != "pending":
                rp = base / pr.record
                if rp.exists():
                    runs[pr.num_envs] = Run.load(rp)  # RecordError names the point's file
    except TypeError as e:
        raise RecordError(f"{manifest_path}: malformed {SWEEP_SCHEMA} manifest: {e}") from None
    return Sweep(dir=base, manifest=data, points=sorted(points, key=lambda q: q.num_envs), runs=runs)

"""The run record: what one profiling session (or one sweep point) measured, as plain, versioned data.

Collectors fill a :class:`Run`; analyses read and annotate it; renderers draw it. It serializes to JSON
with schema ``perfkit.run/1`` (DESIGN.md, "Run record"). The minimum fields of that schema are never
renamed without bumping :data:`SCHEMA`; anything else a stage wants to keep goes in ``extra``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = "perfkit.run/2"
"""/2: a finding's ``count`` is over the steady-state steps (/1 counted warm-up too); ``total_steps``,
``warmup_steps``, ``sampling``, ``Finding.chain``/``library`` and ``SegmentStats.children`` added."""
READABLE_SCHEMAS = ("perfkit.run/1", SCHEMA)

SEGMENTS = ("physics", "policy", "reward", "learner", "logging", "other")
"""The segments of a training loop, in the order reports list them."""

FINDING_KINDS = ("sync", "alloc", "loop", "stream")


class RecordError(ValueError):
    """A run record could not be read: missing, not JSON, or of another schema. The message names the file."""


@dataclass
class SegmentStats:
    """Per-step cost of one segment of the training loop (averaged over steady-state steps)."""

    gpu_ms_per_step: float | None = None  # None where no GPU timing was taken (CPU-only machine)
    cpu_ms_per_step: float = 0.0
    syncs_per_step: float = 0.0
    allocs_per_step: float = 0.0
    alloc_bytes_per_step: float = 0.0
    calls_per_step: float = 0.0  # entries into the segment per step
    children: dict[str, "SegmentStats"] | None = None  # "other" only: its time by the env step's callees


@dataclass
class Finding:
    """One site in user code that makes the GPU wait: a sync, an allocation, a per-env loop, a stream hazard."""

    kind: str  # one of FINDING_KINDS
    op: str  # what happened: ".item()", "torch.zeros", "for-loop over envs", ...
    path: str  # relative to the working directory where it can be
    line: int
    function: str = ""
    segment: str = "other"
    count: int = 0  # events over the steady-state steps (sampled kinds: estimated from the sampled steps)
    per_step: float = 0.0  # count / the run's steps
    est_ms_per_step: float | None = None  # priced by perfkit.analysis.cost, None when unpriced
    bytes: int | None = None  # allocations: bytes over the run, where known
    thread: str | None = None  # thread name when not the main thread
    would_sync_on_gpu: bool = False  # caught on a CPU tensor: this call syncs when the tensor is on CUDA
    message: str = ""  # the fix, in words
    code: str = ""  # the source line, stripped
    chain: list[str] = field(default_factory=list)  # "path:line" from the site out to the user's own code (library sites)
    library: str | None = None  # "rsl-rl-lib 5.5.1" when the site is inside an installed library

    @property
    def site(self) -> str:
        return f"{self.path}:{self.line}"


# ``memory`` keys in order of preference for a run's one memory figure (``Run.peak_memory``);
# records written before host_peak_rss_bytes existed held the sweep worker's peak RSS in host_rss_bytes
MEMORY_FIGURES = (
    ("gpu_used_bytes", "GPU memory used"),
    ("peak_gpu_bytes", "peak torch GPU memory"),
    ("host_peak_rss_bytes", "peak host RSS"),
    ("host_rss_bytes", "host RSS"),
)


@dataclass
class Run:
    """The run record (``perfkit.run/1``)."""

    command: list[str] = field(default_factory=list)
    steps: int = 0  # steady-state steps (after warm-up): what every finding's per_step divides by
    num_envs: int | None = None
    wall_s: float = 0.0  # steady-state wall time
    warmup_s: float = 0.0  # warm-up / compile time, kept apart
    sps: float = 0.0  # env steps per second = steps * num_envs / wall_s
    step_ms: dict[str, float] = field(default_factory=dict)  # {"p50", "p99", "mean"}
    segments: dict[str, SegmentStats] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    machine: dict[str, Any] = field(default_factory=dict)
    # Beyond the minimum schema:
    status: str = "complete"  # "complete" | "partial" (crash, sys.exit, Ctrl-C) | "oom" | "error" | "timeout" (sweep points)
    exit_code: int | None = None
    env: dict[str, Any] = field(default_factory=dict)  # backend, sim_dt, decimation, policy_dt, obs/act dims
    step_times_ms: list[float] = field(default_factory=list)  # per steady-state step, for distributions
    memory: dict[str, Any] = field(default_factory=dict)  # peak_gpu_bytes, host_peak_rss_bytes, ... (machine.process_memory)
    extra: dict[str, Any] = field(default_factory=dict)  # anything else a stage wants to keep
    total_steps: int = 0  # every step, warm-up included
    warmup_steps: int = 0  # steps kept apart from steady state
    sampling: dict[str, Any] = field(default_factory=dict)  # the sampled steps: {"steps": [...], "every": k, "weights": [...]}
    schema: str = SCHEMA

    # ---- derived views -------------------------------------------------------------------------
    @property
    def syncs_per_step(self) -> float:
        return sum(f.per_step for f in self.findings if f.kind == "sync")

    @property
    def allocs_per_step(self) -> float:
        return sum(f.per_step for f in self.findings if f.kind == "alloc")

    def peak_memory(self) -> tuple[float | None, str]:
        """The memory figure reports and comparisons use, with what it is: the GPU memory the run
        took (Warp's included) if measured, else torch's peak, else the host's peak RSS."""
        for key, label in MEMORY_FIGURES:
            v = self.memory.get(key)
            if v:
                return float(v), label
        return None, "memory"

    def findings_of(self, kind: str) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]

    # ---- serialization -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d = {"schema": d.pop("schema"), **d}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "<dict>") -> "Run":
        if not isinstance(d, dict):
            raise RecordError(f"{source}: not a perfkit run record (top level is {type(d).__name__}, not an object)")
        schema = d.get("schema")
        if schema not in READABLE_SCHEMAS:
            raise RecordError(
                f"{source}: schema {schema!r} is not {SCHEMA!r}; this perfkit reads {' and '.join(READABLE_SCHEMAS)} run records"
            )
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in d.items() if k in known}
        unknown = {k: v for k, v in d.items() if k not in known}
        try:
            kwargs["segments"] = {k: _segment_stats(v) for k, v in (d.get("segments") or {}).items()}
            finding_fields = {f.name for f in dataclasses.fields(Finding)}
            kwargs["findings"] = [
                Finding(**{k: v for k, v in f.items() if k in finding_fields}) for f in (d.get("findings") or [])
            ]
            run = cls(**kwargs)
        except (TypeError, AttributeError) as e:
            raise RecordError(f"{source}: malformed {SCHEMA} record: {e}") from None
        if unknown:
            run.extra.setdefault("unknown_fields", {}).update(unknown)
        return run

    def save(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1, default=_json_default) + "\n")
        os.replace(tmp, path)  # a reader never sees half a record
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Run":
        path = Path(path)
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise RecordError(f"{path}: no such run record") from None
        except (IsADirectoryError, UnicodeDecodeError) as e:
            raise RecordError(f"{path}: cannot read as a run record: {e}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise RecordError(f"{path}: not JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
        return cls.from_dict(data, source=str(path))

    # ---- pandas views ---------------------------------------------------------------------------
    def findings_frame(self):
        """One row per finding, costliest first."""
        import pandas as pd

        cols = [f.name for f in dataclasses.fields(Finding)]
        df = pd.DataFrame([dataclasses.asdict(f) for f in self.findings], columns=cols)
        if len(df):
            df = df.sort_values(["est_ms_per_step", "per_step"], ascending=False, na_position="last")
        return df.reset_index(drop=True)

    def segments_frame(self):
        """One row per segment (index: segment name), in report order."""
        import pandas as pd

        order = [s for s in SEGMENTS if s in self.segments] + [s for s in self.segments if s not in SEGMENTS]
        rows = {name: dataclasses.asdict(self.segments[name]) for name in order}
        cols = [f.name for f in dataclasses.fields(SegmentStats)]
        df = pd.DataFrame.from_dict(rows, orient="index", columns=cols)
        df.index.name = "segment"
        return df

    def to_pandas(self):
        """The findings table (DESIGN.md's ``perfkit.Run.load(path).to_pandas()``)."""
        return self.findings_frame()


def _segment_stats(d: dict[str, Any]) -> SegmentStats:
    d = dict(d)
    children = d.pop("children", None)
    s = SegmentStats(**d)
    if children:
        s.children = {k: SegmentStats(**v) for k, v in children.items()}
    return s


def _json_default(o: Any) -> Any:
    # numpy / torch scalars and paths that slipped into a record
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, os.PathLike):
        return os.fspath(o)
    raise TypeError(f"not JSON serializable in a run record: {type(o).__name__}")

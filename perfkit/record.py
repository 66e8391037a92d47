"""The run record: what one profiling session (or one sweep point) measured, as plain, versioned data.

Collectors fill a :class:`Run`; analyses read and annotate it; renderers draw it. It serializes to JSON
with schema :data:`SCHEMA`; :data:`READABLE_SCHEMAS` are the schemas this perfkit loads. The fields of
:class:`Run` are never renamed without a new schema; anything else a stage wants to keep goes in
``extra``, and every ``extra`` key that one module writes and another reads is named below
(``EXTRA_*``), so writer and readers cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = "perfkit.run/2"
"""The schema this perfkit writes. /2: a finding's ``count`` is over the steady-state steps (/1
counted warm-up too); ``total_steps``, ``warmup_steps``, ``sampling``, ``Finding.chain``/``library``
and ``SegmentStats.children`` added; later, without a new schema, the ``dist`` block (a record
without one is rank 0 of a world of 1), the ``comm`` segment, the ``self`` block (perfkit's own
cost; absent from older records), ``Finding.lint_rule`` (absent: not known) and the per-site ``verify``
block (:data:`EXTRA_VERIFY`). Since then a sync-prone call counts only when the CUDA runtime waits for it
(a copy of zero elements, a ``.to`` to where the tensor already is, a non-blocking copy into pinned
memory are not syncs), and torch's own checks made for the caller (``torch.distributions`` argument
validation) count at the caller's line."""
READABLE_SCHEMAS: tuple[str, ...] = ("perfkit.run/1", SCHEMA)
"""The schemas :meth:`Run.load` accepts (a new schema is one more entry here)."""
REQUIRED_FIELDS: tuple[str, ...] = ("command", "steps", "num_envs", "wall_s", "warmup_s", "sps", "step_ms",
                                    "segments", "findings", "machine")
"""The minimum fields of every readable schema: a record without one of them is refused, never shown
as a complete run of zeros."""

SEGMENTS = ("physics", "policy", "reward", "learner", "comm", "logging", "other")
"""The segments of a training loop, in the order reports list them."""

FINDING_KINDS = ("sync", "alloc", "loop", "stream")

# ---- run.extra keys shared between modules (writer -> readers) --------------------------------------
# profiling session -> console, perfetto, cost model, sweep worker, benchmarks
EXTRA_TOTAL_STEPS = "total_steps"  # steps detected, warm-up included
EXTRA_WARMUP_STEPS = "warmup_steps"  # of which warm-up
EXTRA_STEP_DETECTION = "step_detection"  # "auto" | "manual" | "--step-fn MOD:CLASS.METHOD"
EXTRA_STEP_CLASSES = "step_classes"
EXTRA_POLICY_CLASSES = "policy_classes"
EXTRA_SAMPLED_STEPS = "sampled_steps"
EXTRA_RATE_WINDOW = "rate_window"  # {period, steps, first_step}: syncs' rates are over whole periods of the loop
EXTRA_SETUP_SYNCS = "setup_syncs"  # syncs before the first step: not a per-step cost
EXTRA_TEARDOWN_SYNCS = "teardown_syncs"  # syncs after the last step's start
EXTRA_SYNC_WAIT = "sync_wait"  # {site: {wait_ms_per_step, gap_ms_per_step_after, calls_per_step}} -> cost model
EXTRA_LOOP_OPS = "loop_ops"  # {site: torch calls per loop iteration} -> cost model
EXTRA_TIMELINE = "timeline"  # [{step, segment, start_ms, dur_ms, gpu}] -> export-trace (segment detail, spread over the run)
EXTRA_STEP_STARTS = "step_starts_ms"  # start of every step of the run (step k at index k-1), ms from the session's start
EXTRA_LAST_STEP_END = "last_step_end_ms"  # when the last step's call returned, same clock
EXTRA_OTHER_ENV_STEPS = "other_env_steps"  # steps of envs that do not mark the steps: [{thread, env, steps}]
EXTRA_COUNT_CPU_TENSORS = "count_cpu_tensors"
EXTRA_SYNC_SOURCE = "sync_source"  # "runtime" (CUDA's own sync reports) | "hooks" (each hook decides) -> console
EXTRA_CUDA_ALLOCATOR_ALLOCS = "cuda_allocator_allocs_per_step"
EXTRA_GPU_TIMED_STEPS = "gpu_timed_steps"
EXTRA_GPU_STEP_MS_MEAN = "gpu_step_ms_mean"
EXTRA_VERIFY = "verify"  # --verify: {steps, runtime_syncs, hooked_syncs, hooked_without_runtime_sync, unattributed, sites, ...} -> console
EXTRA_WARP_TORCH_INTEROP = "warp_torch_interop"
EXTRA_NOTES = "notes"  # [str] shown under the summary
EXTRA_TRACEBACK = "traceback"  # why a record is incomplete (session, sweep worker)
# cost model -> console, report, scripts (perfkit.pricing.cost documents each)
EXTRA_PRICING = "pricing"  # {model, profile, costs, how, model_of, source_of, validation, step_ms, ...}
EXTRA_WHAT_IF = "what_if"  # fixing the top N: {statistic, step_ms, untouched_ms, step_ms_after, sps_after, bound, ...}
EXTRA_WHAT_IF_TABLE = "what_if_table"  # [{rank, site, op, est_ms_per_step, source_label, validation, step_ms_after, sps_after, ...}]
# perfkit profile
EXTRA_BUDGET = "budget"  # {max_syncs_per_step, max_allocs_per_step, exceeded}
# sweep worker -> sweep, report, compare
EXTRA_ERROR = "error"  # why a point (or a run) failed, one line
EXTRA_ENDED_AT = "ended_at"  # when the profiled program ended (Unix time): which rank of a job failed first
EXTRA_PHYSICS_SPS = "physics_sps"
EXTRA_BUILD_S = "build_s"
EXTRA_FIRST_STEP_S = "first_step_s"
EXTRA_SEGMENTS_SOURCE = "segments_source"
EXTRA_SESSION = "session"  # the sweep worker's instrumented pass: {used, reason | steps, ...}
# Run.from_dict
EXTRA_UNKNOWN_FIELDS = "unknown_fields"  # top-level fields of the record this perfkit does not know


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
    est_ms_per_step: float | None = None  # priced by perfkit.pricing.cost, None when unpriced
    bytes: int | None = None  # allocations: bytes over the run, where known
    thread: str | None = None  # thread name when not the main thread
    would_sync_on_gpu: bool = False  # caught on a CPU tensor: this call syncs when the tensor is on CUDA
    message: str = ""  # the fix, in words
    code: str = ""  # the source line, stripped
    chain: list[str] = field(default_factory=list)  # "path:line" from the site out to the user's own code (library sites)
    library: str | None = None  # "rsl-rl-lib 5.5.1" when the site is inside an installed library
    lint_rule: str | None = None  # syncs: the static rule that finds the same pattern ("PK101"); None: the linter has none

    @property
    def site(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass
class SelfCost:
    """What perfkit itself cost the run, as the session measured and estimated it (the record's ``self``
    block; ``perfkit overhead``, which runs the program with and without perfkit, is the ground truth).

    One-off costs are measured: ``startup_s`` (the session's start: installing the hooks and the
    per-call calibration, before the first step), ``special_s`` (perfkit's own work at each kind of
    special step boundary — ``discovery_close``, ``sample``, ``gpu_timed``, ``verify``, ``poll`` —
    in seconds over the run, with ``special_steps`` counting them), ``sampled_extra_s`` (what the
    sampled steps took beyond a typical step, the costly collectors on) and ``record_s`` (building
    the record). A plain steady step's cost is estimated: ``per_step_ms = sum(per_step[k] *
    per_call_us[k]) / 1000`` over the hooked torch calls, segment transitions and sync events per step
    (hooked calls counted on the sampled steps, the others over the run), with ``per_call_us``
    measured once at the session's start (``calibration``)."""

    startup_s: float = 0.0
    special_s: dict[str, float] = field(default_factory=dict)
    special_steps: dict[str, int] = field(default_factory=dict)
    sampled_extra_s: float = 0.0
    record_s: float = 0.0
    per_step_ms: float = 0.0
    per_step: dict[str, float] = field(default_factory=dict)  # hooked_call, segment_transition, sync_event: per step
    per_call_us: dict[str, float] = field(default_factory=dict)  # the same kinds: microseconds per call
    calibration: str = ""

    @property
    def startup_total_s(self) -> float:
        """perfkit's time before the steady state: the session's start and closing the discovery window."""
        return self.startup_s + self.special_s.get("discovery_close", 0.0)

    @property
    def one_off_s(self) -> float:
        """Everything perfkit spent outside the plain steps: start-up, special steps, samples, the record."""
        return self.startup_s + sum(self.special_s.values()) + self.sampled_extra_s + self.record_s


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
    """The run record (schema :data:`SCHEMA`; :data:`REQUIRED_FIELDS` are in every readable one)."""

    command: list[str] = field(default_factory=list)
    steps: int = 0  # steady-state steps (after warm-up): what every finding's per_step divides by
    num_envs: int | None = None
    wall_s: float = 0.0  # steady-state wall time
    warmup_s: float = 0.0  # warm-up / compile time, kept apart
    sps: float | None = 0.0  # env steps per second = steps * num_envs / wall_s (steps/s when num_envs is None); None: not measured
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
    dist: dict[str, Any] = field(default_factory=dict)  # rank, world size, backend, device; collectives and DDP (perfkit.dist)
    self: SelfCost | None = None  # what perfkit itself cost the run (None: not measured, e.g. a record of an older perfkit)
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

    @property
    def throughput_unit(self) -> str:
        """What :attr:`sps` counts: env steps when the env count is known, else steps of the loop."""
        return "steps/s" if self.num_envs is None else "env-steps/s"

    def findings_of(self, kind: str) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]

    def on_device_price(self, f: Finding) -> tuple[str | None, float | None]:
        """A CPU run's GPU-only price of ``f`` (the cost model keeps it out of the run's own prediction):
        ``("H200", ms/step)``, or ``(None, None)``."""
        src = ((self.extra.get(EXTRA_PRICING) or {}).get("source_of") or {}).get(f"{f.site} {f.op}")
        if not isinstance(src, dict) or src.get("on_device_ms") is None:
            return None, None
        return str(src.get("on_device") or "GPU"), float(src["on_device_ms"])

    def price_ms(self, f: Finding) -> float | None:
        """What ``f`` costs per step as this run priced it: its own price, else (a CPU run) its price on
        the GPU it was priced for."""
        return f.est_ms_per_step if f.est_ms_per_step is not None else self.on_device_price(f)[1]

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
            raise RecordError(f"{source}: schema {schema!r} is not one this perfkit reads ({', '.join(READABLE_SCHEMAS)})")
        missing = [k for k in REQUIRED_FIELDS if k not in d]
        if missing:
            raise RecordError(f"{source}: an incomplete {schema} run record: missing {', '.join(missing)}")
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: _checked(source, k, v, _RUN_TYPES.get(k)) for k, v in d.items() if k in known}
        unknown = {k: v for k, v in d.items() if k not in known}
        segments = _checked(source, "segments", d.get("segments") or {}, "dict")
        kwargs["segments"] = {}
        for name, seg in segments.items():
            kwargs["segments"][name] = _segment_stats(source, f"segments.{name}", seg)
        kwargs["findings"] = []
        for i, f in enumerate(_checked(source, "findings", d.get("findings") or [], "list")):
            where = f"findings[{i}]"
            _checked(source, where, f, "dict")
            missing = [k for k in ("kind", "op", "path", "line") if k not in f]
            if missing:
                raise RecordError(f"{source}: {where} lacks {', '.join(missing)}")
            kwargs["findings"].append(Finding(**{k: _checked(source, f"{where}.{k}", v, _FINDING_TYPES[k])
                                                 for k, v in f.items() if k in _FINDING_TYPES}))
        own = _checked(source, "self", d.get("self"), "dict?")
        kwargs["self"] = None if own is None else SelfCost(**{
            k: _checked(source, f"self.{k}", v, _SELF_TYPES[k]) for k, v in own.items() if k in _SELF_TYPES})
        run = cls(**kwargs)
        if unknown:
            run.extra.setdefault(EXTRA_UNKNOWN_FIELDS, {}).update(unknown)
        return run

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, default=_json_default) + "\n"

    def save(self, path: str | os.PathLike) -> Path:
        """Write the record to ``path`` atomically; a symlink, a device or a FIFO is written to, never
        replaced (:func:`perfkit.outputs.write_text`). Raises OSError when it cannot."""
        from perfkit.outputs import write_text

        return write_text(path, self.to_json())

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
        """The findings table (the same as :meth:`findings_frame`)."""
        return self.findings_frame()


def _segment_stats(source: str, where: str, seg: Any) -> SegmentStats:
    _checked(source, where, seg, "dict")
    stats = SegmentStats(**{k: _checked(source, f"{where}.{k}", v, _SEGMENT_TYPES[k])
                            for k, v in seg.items() if k in _SEGMENT_TYPES})
    children = _checked(source, f"{where}.children", seg.get("children"), "dict?")
    if children:
        stats.children = {name: _segment_stats(source, f"{where}.children.{name}", c) for name, c in children.items()}
    return stats


# ---- field types, checked when a record is read ---------------------------------------------------
# "num": int or float (never bool); "int": an integer (an integral float is taken); a trailing "?"
# allows null; "dict" / "list": that JSON container; "str-list" / "num-list": a list of those
_RUN_TYPES = {
    "schema": "str", "command": "str-list", "steps": "int", "num_envs": "int?", "wall_s": "num", "warmup_s": "num",
    "sps": "num?", "step_ms": "num-dict", "segments": "dict", "findings": "list", "machine": "dict", "status": "str",
    "exit_code": "int?", "env": "dict", "step_times_ms": "num-list", "memory": "dict", "extra": "dict",
    "total_steps": "int", "warmup_steps": "int", "sampling": "dict", "dist": "dict",
}
_SELF_TYPES = {"startup_s": "num", "special_s": "num-dict", "special_steps": "num-dict", "sampled_extra_s": "num",
               "record_s": "num", "per_step_ms": "num", "per_step": "num-dict", "per_call_us": "num-dict", "calibration": "str"}
_SEGMENT_TYPES = {"gpu_ms_per_step": "num?", "cpu_ms_per_step": "num", "syncs_per_step": "num",
                  "allocs_per_step": "num", "alloc_bytes_per_step": "num", "calls_per_step": "num"}
_FINDING_TYPES = {
    "kind": "str", "op": "str", "path": "str", "line": "int", "function": "str", "segment": "str", "count": "int",
    "per_step": "num", "est_ms_per_step": "num?", "bytes": "int?", "thread": "str?", "would_sync_on_gpu": "bool",
    "message": "str", "code": "str", "chain": "str-list", "library": "str?", "lint_rule": "str?",
}
_TYPE_NAMES = {"num": "a number", "int": "an integer", "str": "a string", "bool": "true or false", "dict": "an object",
               "list": "a list", "str-list": "a list of strings", "num-list": "a list of numbers",
               "num-dict": "an object of numbers"}


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _checked(source: str, field: str, v: Any, kind: str | None) -> Any:
    """``v`` if it has the field's type (an integral float becomes an int); RecordError naming the
    field and what it holds otherwise."""
    if kind is None:
        return v
    if kind.endswith("?"):
        if v is None:
            return None
        kind = kind[:-1]
    ok = False
    if kind == "num":
        ok = _is_num(v)
    elif kind == "int":
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        ok = isinstance(v, int) and not isinstance(v, bool)
    elif kind == "str":
        ok = isinstance(v, str)
    elif kind == "bool":
        ok = isinstance(v, bool)
    elif kind == "dict":
        ok = isinstance(v, dict)
    elif kind == "list":
        ok = isinstance(v, list)
    elif kind == "str-list":
        ok = isinstance(v, list) and all(isinstance(x, str) for x in v)
    elif kind == "num-list":
        ok = isinstance(v, list) and all(_is_num(x) for x in v)
    elif kind == "num-dict":
        ok = isinstance(v, dict) and all(_is_num(x) for x in v.values())
    if not ok:
        shown = json.dumps(v, default=str)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise RecordError(f"{source}: field {field!r} is {shown}, not {_TYPE_NAMES[kind]}")
    return v


def _json_default(o: Any) -> Any:
    # numpy / torch scalars and paths that slipped into a record
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, os.PathLike):
        return os.fspath(o)
    raise TypeError(f"not JSON serializable in a run record: {type(o).__name__}")

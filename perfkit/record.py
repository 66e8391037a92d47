"""The run record: what one profiling session (or one sweep point) measured, as plain, versioned data.

Collectors fill a :class:`Run`; analyses read it (the cost model returns a priced copy); renderers
draw it. It serializes to JSON with schema :data:`SCHEMA`; :data:`READABLE_SCHEMAS` are the schemas
this perfkit loads, an older one migrated on load (:func:`migrate`). The fields of :class:`Run` are
never renamed without a new schema. Its typed blocks hold what more than one module reads: the
``timeline`` (:class:`Timeline`), the syncs outside the steps (:class:`OutsideSteps`) and the
``pricing`` (:class:`Pricing`). Anything else a stage keeps goes in ``extra``, and every ``extra``
key is named below (``EXTRA_*``, listed in :data:`EXTRA_KEYS`) with the module that writes it and
those that read it, so writer and readers cannot drift apart (``tests/house/test_record.py``).
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = "perfkit.run/3"
"""The schema this perfkit writes. /3: the timeline, the syncs outside the steps and the pricing are
typed blocks (``timeline``, ``outside_steps``, ``pricing``) instead of ``extra`` keys, and no fact is
stored twice (``extra`` no longer repeats ``total_steps``, ``warmup_steps`` or the sampled steps, nor
``env`` the run's ``num_envs``); counts are defined as in /2. /2: a finding's ``count`` is over the steady-state steps (/1
counted warm-up too); ``total_steps``, ``warmup_steps``, ``sampling``, ``Finding.chain``/``library``
and ``SegmentStats.children`` added; later, without a new schema, the ``dist`` block (a record
without one is rank 0 of a world of 1), the ``comm`` segment, the ``self`` block (perfkit's own
cost; absent from older records), ``Finding.lint_rule`` (absent: not known) and the per-site ``verify``
block (:data:`EXTRA_VERIFY`; its ``agreement``, the record's syncs per step against the runtime's over the
same steps, per site). Since then a sync-prone call counts only when the CUDA runtime waits for it
(a copy of zero elements, a ``.to`` to where the tensor already is, a non-blocking copy into pinned
memory are not syncs), and torch's own checks made for the caller (``torch.distributions`` argument
validation) count at the caller's line."""
READABLE_SCHEMAS: tuple[str, ...] = ("perfkit.run/1", "perfkit.run/2", SCHEMA)
"""The schemas :meth:`Run.load` accepts (a new schema is one more entry here, and a step in :func:`migrate`)."""
REQUIRED_FIELDS: tuple[str, ...] = ("command", "steps", "num_envs", "wall_s", "warmup_s", "sps", "step_ms",
                                    "segments", "findings", "machine")
"""The minimum fields of every readable schema: a record without one of them is refused, never shown
as a complete run of zeros."""

SEGMENTS = ("physics", "policy", "reward", "learner", "comm", "logging", "other")
"""The segments of a training loop, in the order reports list them."""

FINDING_KINDS = ("sync", "alloc", "loop", "stream")

# ---- run.extra keys (writer -> readers) ---------------------------------------------------------------
# profiling session (perfkit.profile.snapshot) -> ...
EXTRA_STEP_DETECTION = "step_detection"  # "auto" | "manual" | "--step-fn MOD:CLASS.METHOD" -> report
EXTRA_STEP_CLASSES = "step_classes"  # the env classes whose step marked the steps -> report
EXTRA_POLICY_CLASSES = "policy_classes"  # the modules found as the policy -> report
EXTRA_RATE_WINDOW = "rate_window"  # {period, steps, first_step}: syncs' rates are over whole periods of the loop -> report
EXTRA_SYNC_WAIT = "sync_wait"  # {site: {wait_ms_per_step, gap_ms_per_step_after, calls_per_step, bursts (newer)}} -> cost model
EXTRA_LOOP_OPS = "loop_ops"  # {site: torch calls per loop iteration} -> cost model
EXTRA_SYNC_COUNTING = "sync_counting"  # {mode, paused, period, blocks, block_steps, counted_steps, sites, sites_varying, agree, recheck}: syncs counted on whole periods -> report
EXTRA_SYNC_SOURCE = "sync_source"  # "runtime" (CUDA's own sync reports) | "hooks" (each hook decides) -> console
EXTRA_CUDA_ALLOCATOR_ALLOCS = "cuda_allocator_allocs_per_step"  # the CUDA caching allocator's own count on the sampled steps (where no whole periods were counted) -> report
EXTRA_CUDA_ALLOCATOR_PERIODS = "cuda_allocator_periods"  # {allocs_per_step, learner_allocs_per_step, periods, steps}: that count over whole periods -> console, budget, report
EXTRA_GPU_TIMED_STEPS = "gpu_timed_steps"  # steps timed with CUDA events -> report
EXTRA_GPU_STEP_MS_MEAN = "gpu_step_ms_mean"  # their mean GPU time -> report
EXTRA_WARP_TORCH_INTEROP = "warp_torch_interop"  # [{call, path, line, count}]: where Warp and torch share memory -> report
EXTRA_VERIFY = "verify"  # --verify: {steps, runtime_syncs, hooked_syncs, hooked_without_runtime_sync, unattributed, sites, agreement, ...} -> console
EXTRA_NOTES = "notes"  # [str] shown under the summary -> console
EXTRA_TRACEBACK = "traceback"  # why a record is incomplete (session, sweep worker) -> console
# perfkit profile -> its budget message
EXTRA_BUDGET = "budget"  # {max_syncs_per_step, max_allocs_per_step, exceeded}
# runner, sweep worker -> sweep, report, compare, ranks
EXTRA_ERROR = "error"  # why a point (or a run) failed, one line
EXTRA_ENDED_AT = "ended_at"  # when the profiled program ended (Unix time): which rank of a job failed first
# sweep worker -> sweep record (its points' table), report, compare
EXTRA_PHYSICS_SPS = "physics_sps"
EXTRA_BUILD_S = "build_s"
EXTRA_FIRST_STEP_S = "first_step_s"
EXTRA_WARMUP_STEPS_S = "warmup_steps_s"  # the warm-up steps' time (warmup_s = build_s + this)
EXTRA_HOST_MS_PER_STEP = "host_ms_per_step"  # host (enqueue) time per step: close to the step time = launch-bound
EXTRA_TIMING = "timing"  # how the steps were timed: "cuda-events" | "perf_counter"
EXTRA_GPU_INDEX = "gpu_index"  # the CUDA device the point ran on, as its process numbers it
EXTRA_CUDA_VISIBLE_DEVICES = "cuda_visible_devices"  # the point process's CUDA_VISIBLE_DEVICES (the sweep's GPU)
EXTRA_SEGMENTS_SOURCE = "segments_source"
EXTRA_SESSION = "session"  # the sweep worker's instrumented pass: {used, reason | steps, ...} -> report (why it failed)
# Run.from_dict -> Run.to_dict: top-level fields of a record this perfkit does not know, written back
# when the record is saved again (a newer perfkit's record loses nothing)
EXTRA_UNKNOWN_FIELDS = "unknown_fields"

EXTRA_KEYS: frozenset[str] = frozenset(v for k, v in dict(globals()).items() if k.startswith("EXTRA_"))
"""Every ``extra`` key perfkit writes; a test fails on a write of any other."""


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

    def added_s(self, plain_steps: int) -> float:
        """What perfkit added to the run's wall time, by its own account: the one-off costs and the
        estimated cost of ``plain_steps`` plain steady steps (``perfkit overhead`` checks it against the
        measured difference)."""
        return self.one_off_s + self.per_step_ms * max(0, plain_steps) / 1000.0


@dataclass
class Timeline:
    """When things happened, in ms from the session's start (``perfkit export-trace`` draws it).

    ``spans``: ``{"step", "segment", "start_ms", "dur_ms", "gpu"}`` of the segments, on steps spread
    over the whole run (the first few steady steps and every GPU-timed one); ``step_starts_ms``: the
    start of every step of the run (step k at index k-1); ``last_step_end_ms``: when the last step's
    call returned. Empty for a run without one (a sweep point without a session pass)."""

    spans: list[dict[str, Any]] = field(default_factory=list)
    step_starts_ms: list[float] = field(default_factory=list)
    last_step_end_ms: float | None = None


@dataclass
class OutsideSteps:
    """Syncs made outside every step, never a per-step cost: ``setup`` before the first step began,
    ``teardown`` after the last one began (at a site that did not sync in the steps before). Each entry:
    ``{"op", "path", "line", "function", "count", ...}``."""

    setup: list[dict[str, Any]] = field(default_factory=list)
    teardown: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Pricing:
    """The cost model's annotation (:func:`perfkit.pricing.cost.price_run`; empty: not priced).

    ``prices``: how the findings were priced (``model``, ``profile``, ``costs``, ``how``, ``model_of``,
    ``source_of``, ``unpriced``, ``validation``, ``step_ms``, ...); ``what_if``: fixing the top N
    (``statistic``, ``step_ms``, ``step_ms_after``, ``sps_after``, ``bound``, ``summary``, ``notes``,
    ...); ``what_if_table``: fixing the top 1..N, cumulative, one row each (``rank``, ``site``, ``op``,
    ``est_ms_per_step``, ``source_label``, ``validation``, ``step_ms_after``, ``sps_after``, ...)."""

    prices: dict[str, Any] = field(default_factory=dict)
    what_if: dict[str, Any] = field(default_factory=dict)
    what_if_table: list[dict[str, Any]] = field(default_factory=list)


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
    timeline: Timeline = field(default_factory=Timeline)
    outside_steps: OutsideSteps = field(default_factory=OutsideSteps)
    pricing: Pricing = field(default_factory=Pricing)
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
        src = (self.pricing.prices.get("source_of") or {}).get(f"{f.site} {f.op}")
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
        d = migrate(d, source)
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
        for name, cls_, types in (("timeline", Timeline, _TIMELINE_TYPES), ("outside_steps", OutsideSteps, _OUTSIDE_TYPES),
                                  ("pricing", Pricing, _PRICING_TYPES)):
            block = _checked(source, name, d.get(name), "dict?") or {}
            kwargs[name] = cls_(**{k: _checked(source, f"{name}.{k}", v, types[k]) for k, v in block.items() if k in types})
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


# ---- older schemas ------------------------------------------------------------------------------------

MOVED_TO_BLOCKS: dict[str, tuple[str, str]] = {
    "timeline": ("timeline", "spans"), "step_starts_ms": ("timeline", "step_starts_ms"),
    "last_step_end_ms": ("timeline", "last_step_end_ms"),
    "setup_syncs": ("outside_steps", "setup"), "teardown_syncs": ("outside_steps", "teardown"),
    "pricing": ("pricing", "prices"), "what_if": ("pricing", "what_if"), "what_if_table": ("pricing", "what_if_table"),
}
"""The ``extra`` keys of /1 and /2 that are typed blocks in /3: ``{key: (block, field)}``."""


def migrate(d: dict[str, Any], source: str = "<dict>") -> dict[str, Any]:
    """A /1 or /2 record's data as /3 (a new dict; ``d`` is left as it was; a /3 record is returned as is).

    The ``extra`` keys of :data:`MOVED_TO_BLOCKS` move into their blocks; the facts /2 kept twice are
    kept once: ``extra``'s ``total_steps`` and ``warmup_steps`` (the fields, where a /1 record had
    none), ``extra["sampled_steps"]`` (``sampling["steps"]``) and ``env["num_envs"]`` (``num_envs``)
    are dropped where they equal the fact kept, and kept where they do not (then they are not the same
    fact). Nothing else changes: counts mean in /3 what they meant in /2. Type errors are left to
    :meth:`Run.from_dict`, which names the field."""
    if d.get("schema") == SCHEMA or not isinstance(d.get("extra", {}), dict):
        return d
    d = dict(d)
    extra = d["extra"] = dict(d.get("extra") or {})
    for key, (block, name) in MOVED_TO_BLOCKS.items():
        if key in extra:
            d[block] = {**(d.get(block) or {}), name: extra.pop(key)}
    for key in ("total_steps", "warmup_steps"):
        if key in extra and (key not in d or d[key] == extra[key]):
            d[key] = extra.pop(key)
    sampling = d.get("sampling")
    if "sampled_steps" in extra and (sampling is None or isinstance(sampling, dict)):
        if "steps" not in (sampling or {}):  # /1 had no sampling block
            d["sampling"] = {**(sampling or {}), "steps": extra.pop("sampled_steps")}
        elif sampling["steps"] == extra["sampled_steps"]:
            del extra["sampled_steps"]
    env = d.get("env")
    if isinstance(env, dict) and "num_envs" in env and env["num_envs"] == d.get("num_envs"):
        d["env"] = {k: v for k, v in env.items() if k != "num_envs"}
    d["schema"] = SCHEMA
    return d


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
_TIMELINE_TYPES = {"spans": "list", "step_starts_ms": "num-list", "last_step_end_ms": "num?"}
_OUTSIDE_TYPES = {"setup": "list", "teardown": "list"}
_PRICING_TYPES = {"prices": "dict", "what_if": "dict", "what_if_table": "list"}
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


def is_number(v: Any) -> bool:
    """A JSON number of a record (a bool is not one)."""
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
        ok = is_number(v)
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
        ok = isinstance(v, list) and all(is_number(x) for x in v)
    elif kind == "num-dict":
        ok = isinstance(v, dict) and all(is_number(x) for x in v.values())
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

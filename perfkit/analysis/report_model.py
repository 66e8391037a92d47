"""What a throughput report shows, gathered once for every output format (the report's model).

``load_inputs`` reads run records and sweeps (a sweep directory or its ``sweep.json``);
``build_report`` turns them into a :class:`Report` — tables of plain strings and numbers plus the
data of the figures to draw. The renderers (:mod:`perfkit.renderers`: plots, HTML, Markdown) only
format what is here, so every output always agrees.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from perfkit.formatting import nbytes as fmt_bytes
from perfkit.formatting import num as fmt_num
from perfkit.record import (
    EXTRA_CUDA_ALLOCATOR_ALLOCS,
    EXTRA_CUDA_ALLOCATOR_PERIODS,
    EXTRA_ERROR,
    EXTRA_GPU_STEP_MS_MEAN,
    EXTRA_GPU_TIMED_STEPS,
    EXTRA_POLICY_CLASSES,
    EXTRA_RATE_WINDOW,
    EXTRA_SEGMENTS_SOURCE,
    EXTRA_SESSION,
    EXTRA_STEP_CLASSES,
    EXTRA_STEP_DETECTION,
    EXTRA_WARP_TORCH_INTEROP,
    Finding,
    RecordError,
    Run,
)
from perfkit.sweeps.record import Sweep, is_sweep_path, load_sweep, physics_sps

TOP_FINDINGS = 15


@dataclass
class Item:
    """One input of the report: a single run, or a sweep."""

    label: str
    source: str
    run: Run | None = None
    sweep: Sweep | None = None

    @property
    def kind(self) -> str:
        return "sweep" if self.sweep is not None else "run"

    def representative(self) -> Run | None:
        """The run whose machine/env block describes this item (a sweep's largest completed point)."""
        if self.run is not None:
            return self.run
        done = self.sweep.completed()
        if done:
            return done[-1]
        return next(iter(self.sweep.runs.values()), None)


@dataclass
class Figure:
    name: str  # file name of the PNG
    title: str
    caption: str
    path: Path | None = None


@dataclass
class Report:
    title: str
    items: list[Item]
    command: list[str] = field(default_factory=list)
    generated: str = ""
    setup_columns: list[str] = field(default_factory=list)
    setup_rows: list[tuple[str, list[str]]] = field(default_factory=list)
    run_columns: list[str] = field(default_factory=list)
    run_rows: list[list[str]] = field(default_factory=list)
    sweeps: list[dict[str, Any]] = field(default_factory=list)  # {"label", "command", "knee", "columns", "rows", "notes"}
    findings_columns: list[str] = field(default_factory=list)
    findings_rows: list[list[str]] = field(default_factory=list)
    findings_total: int = 0
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ranks: list[dict[str, Any]] = field(default_factory=list)  # one per data-parallel job (perfkit.analysis.ranks)
    what_if: list[dict[str, Any]] = field(default_factory=list)  # per priced run: {"label", "summary", "columns", "rows", "notes"}
    plot_data: dict[str, Any] = field(default_factory=dict, repr=False)  # what each figure draws


# ---- inputs -------------------------------------------------------------------------------------

def load_inputs(paths: Sequence[str | os.PathLike]) -> list[Item]:
    """Each path: a run record (perfkit.run/3, /2 or /1), or a sweep directory / manifest (perfkit.sweep/1).
    Raises RecordError naming the file that could not be read."""
    items: list[Item] = []
    for p in paths:
        if is_sweep_path(p):
            sw = load_sweep(p)
            items.append(Item(label=sw.label, source=str(p), sweep=sw))
        else:
            if Path(p).is_dir():
                raise RecordError(f"{p}: a directory without a sweep.json (give a run record or a sweep directory)")
            run = Run.load(p)
            items.append(Item(label=run_label(run, p), source=str(p), run=run))
    _dedupe_labels(items)
    return items


def run_label(run: Run, path: str | os.PathLike) -> str:
    """``train.py`` for a record of ``perfkit profile ... examples/train.py --num-envs 4096``; the
    file name when the command says nothing better; ``train_ddp.py rank 1`` for a rank of a job."""
    rank = ""
    world = run.dist.get("world_size") if isinstance(run.dist, dict) else None
    if isinstance(world, int) and world > 1:
        rank = f" rank {run.dist.get('rank')}"
    for tok in run.command:
        if str(tok).endswith(".py"):
            return Path(str(tok)).name + rank
    if len(run.command) >= 2 and run.command[0] == "-m":
        return str(run.command[1]) + rank
    return Path(path).stem


def _dedupe_labels(items: list[Item]) -> None:
    """Two inputs never share a label: the file name is added, then a number."""
    from collections import Counter

    counts = Counter(it.label for it in items)
    for it in items:
        if counts[it.label] > 1 and it.source:
            it.label = f"{it.label} ({Path(it.source).name})"
    seen: dict[str, int] = {}
    for it in items:
        seen[it.label] = seen.get(it.label, 0) + 1
        if seen[it.label] > 1:
            it.label = f"{it.label} #{seen[it.label]}"


# ---- formatting helpers ---------------------------------------------------------------------------

def sps_cell(run: Run) -> str:
    """A run's throughput for a table: env steps/s, or loop steps/s (said so) when num_envs is unknown."""
    if run.sps is None:
        return "-"
    return fmt_num(float(run.sps)) + (" steps/s" if run.num_envs is None else "")


def _syncs(run: Run) -> float:
    return max(sum(s.syncs_per_step for s in run.segments.values()), run.syncs_per_step)


def _allocs(run: Run) -> float:
    return max(sum(s.allocs_per_step for s in run.segments.values()), run.allocs_per_step)


# ---- building -----------------------------------------------------------------------------------

SETUP_FIELDS: list[tuple[str, str, str]] = [
    # (row label, block, key)
    ("GPU", "machine", "device"),
    ("GPU memory", "machine", "gpu_memory_bytes"),
    ("driver", "machine", "driver"),
    ("CUDA", "machine", "cuda"),
    ("torch", "machine", "torch"),
    ("warp", "machine", "warp"),
    ("mujoco", "machine", "mujoco"),
    ("mujoco_warp", "machine", "mujoco_warp"),
    ("python", "machine", "python"),
    ("CPU", "machine", "cpu"),
    ("CPU cores", "machine", "cpu_count"),
    ("env", "env", "name"),
    ("backend", "env", "backend"),
    ("env device", "env", "device"),
    ("num_envs", "run", "num_envs"),
    ("sim_dt", "env", "sim_dt"),
    ("decimation", "env", "decimation"),
    ("policy_dt", "env", "policy_dt"),
    ("obs dim", "env", "obs_dim"),
    ("act dim", "env", "act_dim"),
    ("horizon (steps)", "env", "episode_length"),
    ("rendering", "env", "rendering"),
    # how the profile measured (a sweep point's block holds none of these: the row is then left out)
    ("steps marked by", "extra", EXTRA_STEP_DETECTION),
    ("stepped env", "extra", EXTRA_STEP_CLASSES),
    ("policy", "extra", EXTRA_POLICY_CLASSES),
    ("sync rates over", "extra", EXTRA_RATE_WINDOW),
    ("GPU-timed steps", "extra", EXTRA_GPU_TIMED_STEPS),
    ("GPU step mean (ms)", "extra", EXTRA_GPU_STEP_MS_MEAN),
    ("CUDA allocations/step", "extra", EXTRA_CUDA_ALLOCATOR_ALLOCS),
    ("CUDA allocations/step, whole periods", "extra", EXTRA_CUDA_ALLOCATOR_PERIODS),  # a run has this or the row above
    ("Warp-torch shared memory", "extra", EXTRA_WARP_TORCH_INTEROP),
]


def _extra_value(v: Any) -> str:
    """One of the profile's own facts (``SETUP_FIELDS``' ``extra`` rows) in a cell."""
    if isinstance(v, dict) and {"period", "steps"} <= set(v):  # the rate window
        periods = v["steps"] // v["period"] if isinstance(v["steps"], int) and isinstance(v["period"], int) and v["period"] else "?"
        return f"the last {fmt_num(v['steps'])} steady steps ({periods} whole periods of {fmt_num(v['period'])} steps)"
    if isinstance(v, dict) and "allocs_per_step" in v:  # the CUDA allocator's count over whole periods
        learner = v.get("learner_allocs_per_step")
        return (f"{fmt_num(v['allocs_per_step'])} over {fmt_num(v.get('periods'))} whole periods"
                + (f" (learner {fmt_num(learner)})" if learner is not None else ""))
    if isinstance(v, list):  # class names, or where Warp and torch share memory
        return ", ".join(f"{x.get('call')} at {x.get('path')}:{x.get('line')} ({fmt_num(x.get('count'))}x)"
                         if isinstance(x, dict) else str(x) for x in v) or "-"
    return fmt_num(v)


def _setup_value(item: Item, rep: Run | None, block: str, key: str) -> str:
    if rep is None:
        return "-"
    if block == "run" and key == "num_envs":
        if item.sweep is not None:
            ns = [p.num_envs for p in item.sweep.points]
            return f"{ns[0]:,}..{ns[-1]:,} ({len(ns)} points)" if len(ns) > 1 else f"{ns[0]:,}"
        return fmt_num(rep.num_envs)
    if block == "extra":
        return _extra_value(rep.extra.get(key))
    src = rep.machine if block == "machine" else rep.env
    v = src.get(key)
    if key == "episode_length" and v is None:
        v = src.get("max_episode_steps", src.get("horizon"))
    if key == "gpu_memory_bytes":
        return fmt_bytes(v)
    if block == "machine" and key == "device" and isinstance(v, str) and v.lower() == "cpu":
        cpu = rep.machine.get("cpu")
        return f"none: a CPU run{f' ({cpu})' if cpu else ''}"  # machine.describe's "cpu" is no GPU's name
    if key == "rendering" and v is None:
        return "off (not recorded)"
    if isinstance(v, float):
        return f"{v:g}"
    return fmt_num(v)


def build_report(inputs: Sequence[Item | Any], title: str = "perfkit throughput report",
                 command: Sequence[str] | None = None, single: Item | Run | None = None) -> Report:
    """``inputs``: Items, or Runs / Sweeps directly (labelled for you). Per-rank records of a
    data-parallel job are also merged (:mod:`perfkit.analysis.ranks`), beside ``single`` (the 1-GPU
    run: one of the inputs, or found among them) for the scaling efficiency. One builder per section
    of the report, in the order it shows them."""
    items = _items_of(inputs)
    rep = Report(title=title, items=items, command=list(command or []),
                 generated=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    _setup_section(rep)
    _runs_section(rep)
    _ranks_section(rep, single)
    sps_series = _sweep_sections(rep)
    found = _findings_section(rep)
    _what_if_sections(rep)
    _figures(rep, sps_series, found)
    _notes(rep)
    return rep


def _items_of(inputs: Sequence[Item | Any]) -> list[Item]:
    items: list[Item] = []
    for x in inputs:
        if isinstance(x, Item):
            items.append(x)
        elif isinstance(x, Run):
            items.append(Item(label=run_label(x, "run"), source="", run=x))
        else:  # a Sweep
            items.append(Item(label=x.label, source=str(x.dir), sweep=x))
    _dedupe_labels(items)
    if not items:
        raise ValueError("a report needs at least one run or sweep")
    return items


def _setup_section(rep: Report) -> None:
    """The hardware / software block, one column per input."""
    rep.setup_columns = [it.label for it in rep.items]
    reps = [it.representative() for it in rep.items]
    for row_label, block, key in SETUP_FIELDS:
        vals = [_setup_value(it, r, block, key) for it, r in zip(rep.items, reps)]
        if all(v in ("-", "off (not recorded)") for v in vals) and row_label not in ("GPU", "torch", "num_envs", "rendering"):
            continue
        rep.setup_rows.append((row_label, vals))


def _single_runs(rep: Report) -> list[tuple[str, Run]]:
    return [(it.label, it.run) for it in rep.items if it.run is not None]


def _runs_section(rep: Report) -> None:
    """The single runs side by side."""
    rep.run_columns = ["run", "status", "num_envs", "steps", "env SPS", "physics SPS", "p50 ms", "p99 ms",
                       "warm-up s", "memory", "syncs/step", "allocs/step", "findings"]
    for label, r in _single_runs(rep):
        mem, kind = r.peak_memory()
        rep.run_rows.append([
            label, r.status, fmt_num(r.num_envs), fmt_num(r.steps), sps_cell(r),
            fmt_num(physics_sps(r)), fmt_num(r.step_ms.get("p50")), fmt_num(r.step_ms.get("p99")),
            fmt_num(float(r.warmup_s)), f"{fmt_bytes(mem)} ({kind})" if mem else "-",
            fmt_num(float(_syncs(r))), fmt_num(float(_allocs(r))), fmt_num(len(r.findings)),
        ])


def _ranks_section(rep: Report, single: Item | Run | None) -> None:
    """Data-parallel jobs: their ranks merged, against ``single`` (the 1-GPU run) where given."""
    from perfkit.analysis.ranks import report_sections

    base = None
    if single is not None:
        it = single if isinstance(single, Item) else next((i for i in rep.items if i.run is single), None)
        base = (it.label, it.run) if it is not None else (run_label(single, "single"), single)
    rep.ranks = report_sections(_single_runs(rep), base, fmt_num)


SWEEP_COLUMNS = ["num_envs", "status", "env SPS", "physics SPS", "p50 ms", "p99 ms", "warm-up s", "memory", "note"]


def _sweep_sections(rep: Report) -> list[dict[str, Any]]:
    """One table per sweep; returns the series the throughput figure draws."""
    sps_series = []
    for it in rep.items:
        if it.sweep is None:
            continue
        sw = it.sweep
        knee = sw.knee()
        rows = []
        ns, sps, phys, mem, failed = [], [], [], [], []
        mem_kind = None
        gains = {a: g for a, _b, g in knee.gains}
        for p in sw.points:
            r = sw.runs.get(p.num_envs)
            ok = p.status == "complete" and r is not None and r.sps is not None
            m, kind = r.peak_memory() if r is not None else (None, "memory")
            note = ""
            if ok and p.num_envs in gains:
                note = f"next doubling: {gains[p.num_envs]:+.0%}"
            if knee.num_envs == p.num_envs:
                note = ("KNEE; " + note).strip("; ")
            if not ok:
                note = (p.error or "")[:160]
            rows.append([fmt_num(p.num_envs), p.status, fmt_num(float(r.sps)) if ok else "-",
                         fmt_num(physics_sps(r)) if ok else "-",
                         fmt_num(r.step_ms.get("p50")) if ok else "-", fmt_num(r.step_ms.get("p99")) if ok else "-",
                         fmt_num(float(r.warmup_s)) if r is not None and r.warmup_s else "-",
                         fmt_bytes(m) if m else "-", note])
            if ok:
                ns.append(p.num_envs)
                sps.append(float(r.sps))
                phys.append(float(physics_sps(r) or r.sps))
                mem.append(m or 0.0)
                mem_kind = mem_kind or kind
            elif p.status not in ("pending", "skipped"):
                failed.append((p.num_envs, p.status))
        rep.sweeps.append({"label": it.label, "command": sw.manifest.get("command") or [],
                           "knee": sw.describe_knee(), "columns": list(SWEEP_COLUMNS), "rows": rows, "source": it.source})
        sps_series.append({"label": sw.short_label, "num_envs": ns, "sps": sps, "physics_sps": phys,
                           "memory_bytes": mem, "memory_kind": mem_kind or "memory", "failed": failed, "knee": knee})
    return sps_series


def _findings_section(rep: Report) -> list[tuple[str, Finding]]:
    """The findings, costliest first, across runs and sweep points; returns them all (labelled)."""
    items = rep.items
    found: list[tuple[str, Finding]] = []
    gpu_only: dict[int, str] = {}  # a CPU run's finding priced only for a GPU: what it costs there
    for it in items:
        if it.run is not None:
            found += [(it.label if len(items) > 1 else "", f) for f in it.run.findings]
            for f in it.run.findings:
                device, on_device = (None, None) if f.est_ms_per_step is not None else it.run.on_device_price(f)
                if on_device is not None:
                    gpu_only[id(f)] = f"on an {device}: ~{fmt_num(on_device)}"
        else:
            # one row per site across the sweep's points: the point where it costs most
            best: dict[tuple, tuple[str, Finding]] = {}
            for r in it.sweep.completed():
                for f in r.findings:
                    key = (f.kind, f.op, f.path, f.line)
                    cost = (f.est_ms_per_step or 0.0, f.per_step)
                    if key not in best or cost > (best[key][1].est_ms_per_step or 0.0, best[key][1].per_step):
                        best[key] = (f"{it.sweep.short_label} n={r.num_envs}", f)
            found += list(best.values())
    found.sort(key=lambda e: (e[1].est_ms_per_step if e[1].est_ms_per_step is not None else -1.0, e[1].per_step),
               reverse=True)
    rep.findings_total = len(found)
    if any(f.would_sync_on_gpu for _, f in found):
        rep.notes.append("'(CPU tensor)': caught on a CPU tensor; the same call syncs when the tensor is on the GPU")
    rep.findings_columns = (["run"] if len(items) > 1 else []) + ["kind", "op", "site", "function", "segment",
                                                                  "per step", "est. ms/step", "fix", "code"]
    # a run with no detected step has counts over the run, and no per-step rate or price
    stepless = {id(f) for it in items if it.run is not None and not it.run.steps for f in it.run.findings}
    for label, f in found[:TOP_FINDINGS]:
        row = [label] if len(items) > 1 else []
        rate, price = ((f"{f.count:,} in the run (no step detected)", "-") if id(f) in stepless
                       else (fmt_num(float(f.per_step)), fmt_num(f.est_ms_per_step)))
        row += [f.kind + (" (CPU tensor)" if f.would_sync_on_gpu else ""), f.op, f.site, f.function, f.segment,
                rate, price if id(f) in stepless else gpu_only.get(id(f), price), f.message, f.code]
        rep.findings_rows.append(row)
    return found


def _what_if_sections(rep: Report) -> None:
    """Each priced run's fixes in order, with where each price comes from."""
    for it in rep.items:
        if it.run is not None:
            section = what_if_section(it.run, it.label)
            if section is not None:
                rep.what_if.append(section)


FIGURES = [
    Figure("sps_memory.png", "Throughput and memory vs num_envs",
           "Env steps/s (solid) and physics steps/s = env SPS x decimation (dashed) on log axes; the star "
           "and dotted line mark the knee; red bands are points that ran out of memory or failed. Memory: "
           "device memory the point's process took beyond what was free before the env was built (Warp's "
           "allocations included) where measured, else torch's peak allocation, else peak host RSS."),
    Figure("segments.png", "Segment breakdown per step",
           "Mean time per steady-state step in each training-loop segment (GPU time where CUDA events were "
           "taken, CPU time otherwise)."),
    Figure("step_times.png", "Step-time distribution",
           "Steady-state step times in ms: box p25-p75, whiskers p1-p99, red tick p99."),
    Figure("findings.png", "Top findings",
           "Sites that make the GPU wait, by estimated cost per step (or by occurrences per step when the "
           "machine's costs were not probed)."),
]


def _figures(rep: Report, sps_series: list[dict[str, Any]], found: list[tuple[str, Finding]]) -> None:
    """The figures and the per-step material each draws."""
    seg_entries: list[tuple[str, Run]] = []
    dist: list[tuple[str, list[float]]] = []
    for it in rep.items:
        if it.run is not None:
            seg_entries.append((it.label, it.run))
            dist.append((it.label, it.run.step_times_ms))
        else:
            for r in it.sweep.completed():
                lab = f"{it.sweep.short_label} n={r.num_envs}" if len(rep.items) > 1 else f"n={r.num_envs}"
                seg_entries.append((lab, r))
                dist.append((lab, r.step_times_ms))
    rep.plot_data = {"sps": sps_series, "segments": seg_entries, "dist": dist, "findings": found}
    rep.figures = [dataclasses.replace(f) for f in FIGURES]  # each report draws its own (plots sets the path)


def _notes(rep: Report) -> None:
    """What the reader must know about an input: a run that did not complete, an unknown num_envs,
    a sweep without segments."""
    for it in rep.items:
        r = it.representative()
        if r is not None and r.status not in ("complete",) and it.run is not None:
            rep.notes.append(f"{it.label}: run status is {r.status!r}" + (f" ({r.extra.get(EXTRA_ERROR)})" if r.extra.get(EXTRA_ERROR) else ""))
        if it.run is not None and r.num_envs is None and r.steps:
            rep.notes.append(f"{it.label}: num_envs unknown, so its throughput counts loop steps (steps/s), not env "
                             "steps (profile with --num-envs N or perfkit.step(num_envs=N))")
        if r is not None and r.extra.get(EXTRA_SEGMENTS_SOURCE, "").startswith("sweep worker"):
            rep.notes.append(f"{it.label}: segments not broken down (run the sweep with --session-steps N for per-segment "
                             "times and findings); the bar is the whole env.step")
        session = r.extra.get(EXTRA_SESSION) if r is not None else None
        if isinstance(session, dict) and session.get("used") is False and session.get("reason"):
            rep.notes.append(f"{it.label}: no per-segment breakdown: {session['reason']}")
    rep.notes = list(dict.fromkeys(rep.notes))


WHAT_IF_COLUMNS = ["#", "fix", "site", "price ms/step", "price from", "validation", "step ms (mean)"]


def what_if_section(run: Run, label: str) -> dict[str, Any] | None:
    """A run's what-if table (``run.pricing.what_if_table``: fixing the top 1..N findings, cumulative),
    its summary line and the pricing notes, as the cost model wrote them into the record
    (:func:`perfkit.pricing.cost.price_run`); None for a record without them (unpriced, or priced
    before the table existed)."""
    rows = run.pricing.what_if_table
    wi = run.pricing.what_if
    summary = wi.get("summary")
    if not isinstance(rows, list) or not rows or not summary:
        return None
    unit = "env-steps/s" if run.num_envs else "steps/s"
    out_rows = []
    for r in rows:
        price = fmt_num(r.get("est_ms_per_step"))
        if r.get("unbounded_ms") is not None:
            price += f" (of {fmt_num(r['unbounded_ms'])})"
        out_rows.append([str(r.get("rank")), f"{r.get('kind')} {r.get('op')}", str(r.get("site")), price,
                         r.get("source_label") or "-", r.get("validation") or "-", fmt_num(r.get("step_ms_after")),
                         fmt_num(r.get("sps_after"))])
    return {"label": label, "summary": summary, "columns": WHAT_IF_COLUMNS + [unit], "rows": out_rows,
            "notes": [str(n) for n in wi.get("notes") or []]}

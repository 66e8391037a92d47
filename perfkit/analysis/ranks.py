"""Merging the per-rank records of a data-parallel job: total throughput, the straggler, the cost of
communication and the scaling efficiency.

    runs = load_ranks(["run.rank0.json", "run.rank1.json"])
    s = merge_ranks(runs, single=Run.load("one_gpu.json"))
    s.total_sps, s.straggler, s.imbalance, s.comm_share, s.scaling_efficiency
    ranks_frame(runs); rank_segments_frame(runs)          # pandas

Definitions (every figure per steady-state step of each rank's own record):

* a rank's **SPS** is its record's env steps/s; the job's **total SPS** is their sum;
* a rank's **comm time** (:func:`comm_ms`) is the GPU time of its ``comm`` segment where CUDA
  events were taken, else the host time inside its collective calls and their ``Work.wait()``
  (``dist.comm.host_ms_per_step``), plus DDP's exposed bucket communication (its reducer's own
  measurement minus the overlap with backward compute, where DDP ran: ``dist.ddp``); its **busy
  time** is its mean step time minus its comm time;
* in a job that communicates every step the ranks move in lock step: their step times are alike and
  a slow rank shows as the others' longer comm time (they wait for it inside the collective). So the
  **straggler** is the rank with the most busy time, and the **imbalance** is
  ``max(busy) / mean(busy) - 1`` (0: balanced; 0.5: the slowest rank works 50 % longer than the
  average one, and the average rank waits about that much in comm). Below :data:`BALANCED` the job
  is called balanced (the straggler is still named). The **slowest rank** is the one with the lowest
  SPS, named only when the ranks' SPS differ by :data:`BALANCED` or more (in lock step they are alike,
  and the lowest of alike figures is noise: the straggler says who holds the others up);
* **comm share** is comm time / mean step time, per rank and averaged over the ranks;
* **scaling efficiency** = total SPS / (ranks x the 1-GPU run's SPS): 1.0 is perfect weak scaling
  (each rank as fast as one GPU alone); the 1-GPU run must be a record of a world of 1;
* a **failed job**: each rank's exit status and exception (``exit_code``, ``extra["error"]``); the
  **first failure** is the failed rank whose program ended first (``extra["ended_at"]``); ranks with
  no record are **missing** (killed before writing it, or not given);
* **nodes** (``dist.node``): per node its ranks, SPS and mean busy time; the **slow node** is the one
  whose ranks are busiest on average (named when there are two nodes or more).

Records are grouped into jobs by their ``dist`` block (:func:`group_ranks`): the same world size,
command and rendezvous (``run_id``, else ``master``); a rank seen twice starts another job.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from perfkit.formatting import num
from perfkit.record import EXTRA_ENDED_AT, EXTRA_ERROR, SEGMENTS, Run

BALANCED = 0.10  # an imbalance below this is "balanced" (run-to-run noise of step times is a few per cent)


def _dist(run: Run) -> dict[str, Any]:
    return run.dist if isinstance(run.dist, dict) else {}


def world_of(run: Run) -> int:
    v = _dist(run).get("world_size")
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 1 else 1


def rank_of(run: Run) -> int:
    v = _dist(run).get("rank")
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0


def script_of(run: Run) -> str:
    """``train_ddp.py`` for a record of ``... examples/train_ddp.py --num-envs 4096``."""
    for tok in run.command:
        if str(tok).endswith(".py"):
            return Path(str(tok)).name
    if len(run.command) >= 2 and run.command[0] == "-m":
        return str(run.command[1])
    return " ".join(map(str, run.command[:1])) or "?"


def comm_ms(run: Run) -> tuple[float | None, str]:
    """A rank's comm time per step and where it comes from: ``"gpu"``, the CUDA-event time of its
    ``comm`` segment (on NCCL the collective kernels, waiting for the other ranks included), else
    ``"host"``, the host time inside the collective calls and their ``Work.wait()`` (``dist.comm``; on
    gloo the exchange and the wait for the other ranks), plus ``"ddp"``: DDP's exposed bucket time.
    A source is named only where something ran in the steady steps (collectives made only in set-up,
    as DDP's first broadcast, are none). ``(None, "none")`` when the run made no collective."""
    seg = run.segments.get("comm")
    comm = _dist(run).get("comm") or {}
    ms, src = None, "none"
    ran = not comm or bool(comm.get("calls_per_step") or comm.get("waits_per_step"))
    if not ran:  # no steady collective: the segment holds at most a few set-up/teardown calls
        pass
    elif seg is not None and seg.gpu_ms_per_step is not None:
        ms, src = float(seg.gpu_ms_per_step), "gpu"
    elif isinstance(comm.get("host_ms_per_step"), (int, float)):
        ms, src = float(comm["host_ms_per_step"]), "host"
    elif seg is not None:
        ms, src = float(seg.cpu_ms_per_step), "host"
    ddp = _dist(run).get("ddp") or {}
    exposed = ddp.get("exposed_comm_ms_per_step")
    if isinstance(exposed, (int, float)):
        ms = (ms or 0.0) + float(exposed)
        src = "ddp" if src == "none" else f"{src} + ddp"
    return ms, src


def step_ms(run: Run) -> float | None:
    """A rank's mean step over the steps its comm figures cover: the complete timed steps (the last,
    cut short at its step call's return, left out), else the record's mean step."""
    n = _dist(run).get("complete_steps")
    times = run.step_times_ms
    if isinstance(n, int) and n >= 1 and len(times) == n + 1:
        return float(sum(times[:n]) / n)
    v = run.step_ms.get("mean")
    if v is None and run.step_times_ms:
        v = sum(run.step_times_ms) / len(run.step_times_ms)
    return float(v) if v is not None else None


@dataclass
class RankRow:
    rank: int
    label: str = ""
    local_rank: int | None = None
    node: int | None = None
    host: str | None = None
    device: str | None = None
    physical_gpu: str | None = None
    status: str = "complete"
    num_envs: int | None = None
    steps: int = 0
    sps: float | None = None
    step_ms: float | None = None
    comm_ms: float | None = None
    comm_source: str = "none"
    busy_ms: float | None = None
    comm_share: float | None = None
    comm_calls_per_step: float | None = None
    comm_host_ms: float | None = None  # host time inside collectives and Work.wait() per step
    comm_wait_ms: float | None = None  # of it, inside Work.wait()
    ddp_exposed_ms: float | None = None
    syncs_per_step: float = 0.0
    exit_code: int | None = None
    error: str | None = None  # the program's exception, one line
    ended_at: float | None = None  # Unix time the program ended


@dataclass
class RankSummary:
    world_size: int
    script: str = "?"
    backend: str | None = None
    ranks: list[RankRow] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)
    total_sps: float | None = None
    slowest_rank: int | None = None  # lowest SPS
    straggler: int | None = None  # most busy time (the others wait for it in comm)
    imbalance: float | None = None  # max(busy) / mean(busy) - 1
    balanced: bool | None = None
    comm_share: float | None = None  # mean over the ranks
    single_sps: float | None = None
    single_label: str | None = None
    scaling_efficiency: float | None = None
    failed: list[int] = field(default_factory=list)  # ranks whose program exited non-zero, first failure first
    first_failure: int | None = None
    nodes: dict[int, dict[str, Any]] = field(default_factory=dict)  # node -> {ranks, missing, total_sps, busy_ms}
    slow_node: int | None = None
    segments: dict[str, dict[int, float]] = field(default_factory=dict)  # segment -> rank -> ms/step
    segment_source: str = "cpu"  # "gpu" where every rank has GPU times
    comm_ops: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)  # op -> rank -> per-step figures
    notes: list[str] = field(default_factory=list)

    def row(self, rank: int) -> RankRow | None:
        return next((r for r in self.ranks if r.rank == rank), None)


def _row(run: Run, label: str) -> RankRow:
    d = _dist(run)
    comm = d.get("comm") or {}
    ddp = d.get("ddp") or {}
    c_ms, src = comm_ms(run)
    s_ms = step_ms(run)
    busy = (s_ms - (c_ms or 0.0)) if s_ms is not None else None
    return RankRow(
        rank=rank_of(run), label=label, local_rank=d.get("local_rank"), node=d.get("node"), host=d.get("host"),
        device=d.get("device"), physical_gpu=d.get("physical_gpu"), status=run.status, num_envs=run.num_envs,
        steps=run.steps, sps=float(run.sps) if run.sps is not None else None, step_ms=s_ms, comm_ms=c_ms,
        comm_source=src, busy_ms=busy, comm_share=(c_ms or 0.0) / s_ms if s_ms else None,
        comm_calls_per_step=comm.get("calls_per_step"), comm_host_ms=comm.get("host_ms_per_step"),
        comm_wait_ms=comm.get("wait_ms_per_step"), ddp_exposed_ms=ddp.get("exposed_comm_ms_per_step"),
        syncs_per_step=sum(s.syncs_per_step for s in run.segments.values()),
        exit_code=run.exit_code, error=run.extra.get(EXTRA_ERROR) or None,
        ended_at=run.extra.get(EXTRA_ENDED_AT) if isinstance(run.extra.get(EXTRA_ENDED_AT), (int, float)) else None,
    )


def merge_ranks(runs: Sequence[Run], single: Run | None = None, labels: Sequence[str] | None = None) -> RankSummary:
    """The job the per-rank records ``runs`` (one job: see :func:`group_ranks`) make, beside the
    1-GPU run ``single`` when given (see the module doc for every definition). ValueError when
    ``runs`` is empty or holds a rank twice."""
    if not runs:
        raise ValueError("no rank records to merge")
    labels = list(labels) if labels is not None else [f"rank {rank_of(r)}" for r in runs]
    seen: dict[int, int] = {}
    for i, r in enumerate(runs):
        k = rank_of(r)
        if k in seen:
            raise ValueError(f"rank {k} appears twice ({labels[seen[k]]} and {labels[i]}): records of two jobs? "
                             "give one job's records, or let perfkit report group them")
        seen[k] = i
    order = sorted(range(len(runs)), key=lambda i: rank_of(runs[i]))
    runs = [runs[i] for i in order]
    labels = [labels[i] for i in order]
    world = max(world_of(r) for r in runs)
    d0 = _dist(runs[0])
    s = RankSummary(world_size=world, script=script_of(runs[0]), backend=d0.get("backend"))
    s.ranks = [_row(r, lab) for r, lab in zip(runs, labels)]
    s.missing = sorted(set(range(world)) - {r.rank for r in s.ranks})
    failed = [r for r in s.ranks if r.exit_code not in (None, 0)]
    failed.sort(key=lambda r: (r.ended_at is None, r.ended_at or 0.0, r.rank))
    s.failed = [r.rank for r in failed]
    if failed and failed[0].ended_at is not None:
        s.first_failure = failed[0].rank
    if s.missing:
        why = ("no record: killed before writing it (SIGKILL, out of memory), or its file was not given"
               if failed or any(r.status != "complete" for r in s.ranks) else "not given")
        s.notes.append(f"{len(s.ranks)} of {world} ranks have records; missing: rank{'s' if len(s.missing) > 1 else ''} "
                       f"{', '.join(map(str, s.missing))} ({why}): totals and comparisons cover the ranks with records")
    bad = [r.rank for r in s.ranks if r.status != "complete"]
    if bad:
        s.notes.append(f"rank(s) {', '.join(map(str, bad))} did not complete: their figures cover what they measured")
    measured = [r for r in s.ranks if r.sps is not None]
    if measured:
        s.total_sps = sum(r.sps for r in measured)
        low, high = min(r.sps for r in measured), max(r.sps for r in measured)
        if len(measured) > 1 and high > 0 and (high - low) / high >= BALANCED:
            s.slowest_rank = min(measured, key=lambda r: (r.sps, r.rank)).rank
    if any(r.num_envs is None for r in s.ranks):
        s.notes.append("num_envs unknown on some rank: its SPS counts loop steps, not env steps")
    busy = [r for r in s.ranks if r.busy_ms is not None]
    if busy:
        top = max(busy, key=lambda r: (r.busy_ms, -r.rank))
        s.straggler = top.rank
        mean_busy = sum(r.busy_ms for r in busy) / len(busy)
        if len(busy) > 1 and mean_busy > 0:
            s.imbalance = top.busy_ms / mean_busy - 1.0
            s.balanced = s.imbalance < BALANCED
    shares = [r.comm_share for r in s.ranks if r.comm_share is not None]
    if shares:
        s.comm_share = sum(shares) / len(shares)
    if all(r.comm_source == "none" for r in s.ranks):
        s.notes.append("no collective was seen on any rank (no torch.distributed call, no DDP): comm time is 0")
    sources = {r.comm_source for r in s.ranks}
    if len(sources) > 1:
        s.notes.append(f"comm time is measured differently across ranks ({', '.join(sorted(sources))})")
    _nodes(s, runs)
    if single is not None and world_of(single) != 1:
        s.notes.append(f"the 1-GPU baseline's record is rank {rank_of(single)} of a world of {world_of(single)}, "
                       "not a 1-GPU run: no scaling efficiency")
        single = None
    if single is not None:
        s.single_label = script_of(single)
        if single.sps:
            s.single_sps = float(single.sps)
            if s.total_sps is not None:
                s.scaling_efficiency = s.total_sps / (len(measured) * s.single_sps)
        n1 = single.num_envs
        if n1 is not None and any(r.num_envs not in (None, n1) for r in s.ranks):
            s.notes.append(f"the 1-GPU run stepped {n1:,} envs and the ranks "
                           f"{', '.join(sorted({f'{r.num_envs:,}' for r in s.ranks if r.num_envs}))}: "
                           "the efficiency compares unlike loads")
    # per-segment times per rank (GPU where every rank has them)
    gpu = all(any(st.gpu_ms_per_step is not None for st in r.segments.values()) for r in runs)
    s.segment_source = "gpu" if gpu else "cpu"
    names = {n for r in runs for n in r.segments}
    for name in [n for n in SEGMENTS if n in names] + sorted(names - set(SEGMENTS)):
        per: dict[int, float] = {}
        for r in runs:
            st = r.segments.get(name)
            if st is None:
                continue
            v = st.gpu_ms_per_step if gpu and st.gpu_ms_per_step is not None else st.cpu_ms_per_step
            per[rank_of(r)] = float(v)
        s.segments[name] = per
    for r in runs:
        for op, e in ((_dist(r).get("comm") or {}).get("ops") or {}).items():
            if "calls_per_step" in e:
                s.comm_ops.setdefault(op, {})[rank_of(r)] = {
                    k: e.get(k) for k in ("calls_per_step", "bytes_per_step", "call_ms_per_step", "waits_per_step",
                                          "wait_ms_per_step", "async_per_step")}
    return s


def _nodes(s: RankSummary, runs: Sequence[Run]) -> None:
    """Per node: its ranks (and those missing, where torchrun's numbering says which node they were on:
    rank = node x local world size + local rank), their SPS and mean busy time; the slow node."""
    lws = {_dist(x).get("local_world_size") for x in runs}
    for r in s.ranks:
        n = r.node if isinstance(r.node, int) else 0
        e = s.nodes.setdefault(n, {"ranks": [], "missing": [], "total_sps": None, "busy_ms": None, "host": r.host})
        e["ranks"].append(r.rank)
        if r.sps is not None:
            e["total_sps"] = (e["total_sps"] or 0.0) + r.sps
    per_node = {v for v in lws if isinstance(v, int) and v >= 1}
    if len(per_node) == 1:
        k = per_node.pop()
        for m in s.missing:
            s.nodes.setdefault(m // k, {"ranks": [], "missing": [], "total_sps": None, "busy_ms": None,
                                        "host": None})["missing"].append(m)
    for n, e in s.nodes.items():
        busy = [r.busy_ms for r in s.ranks if (r.node or 0) == n and r.busy_ms is not None]
        e["busy_ms"] = sum(busy) / len(busy) if busy else None
    s.nodes = dict(sorted(s.nodes.items()))
    measured = {n: e["busy_ms"] for n, e in s.nodes.items() if e["busy_ms"] is not None}
    if len(s.nodes) > 1 and measured:
        s.slow_node = max(measured, key=lambda n: (measured[n], -n))


# ---- grouping, loading, pandas -----------------------------------------------------------------------

def job_key(run: Run) -> tuple:
    d = _dist(run)
    rid = d.get("run_id")
    rid = None if rid in (None, "", "none") else rid
    return (world_of(run), tuple(map(str, run.command)), rid or d.get("master"))


def group_ranks(entries: Sequence[tuple[str, Run]]) -> list[list[tuple[str, Run]]]:
    """The multi-rank records among ``(label, run)`` entries grouped into jobs (see module doc), in
    input order; records of a world of 1 are left out."""
    groups: list[tuple[tuple, list[tuple[str, Run]]]] = []
    for label, run in entries:
        if world_of(run) <= 1:
            continue
        key, k = job_key(run), rank_of(run)
        for gkey, members in groups:
            if gkey == key and all(rank_of(r) != k for _, r in members):
                members.append((label, run))
                break
        else:
            groups.append((key, [(label, run)]))
    return [members for _, members in groups]


def single_for(group: Sequence[tuple[str, Run]], entries: Sequence[tuple[str, Run]]) -> tuple[str, Run] | None:
    """The 1-GPU baseline of a job among ``entries``: the one record of a world of 1 that ran the
    same script under a process group (``dist.backend`` set, as ``torchrun --nproc-per-node 1``
    gives); None when there is not exactly one."""
    script = script_of(group[0][1])
    found = [(lab, r) for lab, r in entries if world_of(r) == 1 and _dist(r).get("backend") and script_of(r) == script]
    return found[0] if len(found) == 1 else None


def load_ranks(paths: Sequence[str | os.PathLike]) -> list[Run]:
    """The records at ``paths``, in rank order (RecordError naming a file that cannot be read)."""
    return sorted((Run.load(p) for p in paths), key=rank_of)


def ranks_frame(runs: Sequence[Run], single: Run | None = None):
    """One row per rank (index ``rank``): SPS, step, busy and comm times, comm share, devices."""
    import pandas as pd

    s = merge_ranks(runs, single)
    df = pd.DataFrame([asdict(r) for r in s.ranks]).set_index("rank")
    return df


def rank_segments_frame(runs: Sequence[Run]):
    """Milliseconds per step of each segment (rows) on each rank (columns): GPU time where every rank
    has it, else CPU time."""
    import pandas as pd

    s = merge_ranks(runs)
    df = pd.DataFrame(s.segments).T
    df.index.name = "segment"
    df.columns.name = "rank"
    return df.reindex(columns=sorted(df.columns))


# ---- text ------------------------------------------------------------------------------------------

def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}" if abs(v) >= 0.1 else f"{v:.1%}"


def headline(s: RankSummary, fmt: Callable[[Any], str]) -> list[str]:
    """The job in a few sentences (the report's and the GPU script's summary)."""
    n = len(s.ranks)
    out = []
    if s.failed:
        first = s.row(s.failed[0])
        head = (f"The job failed: rank {first.rank} failed first" if s.first_failure is not None
                else f"The job failed: rank {first.rank} failed")
        out.append(head + f" (exit {first.exit_code}" + (f", {first.error}" if first.error else "") + ")"
                   + "".join(f"; then rank {r.rank} (exit {r.exit_code}" + (f", {r.error}" if r.error else "") + ")"
                             for r in map(s.row, s.failed[1:]))
                   + (f"; no record from rank{'s' if len(s.missing) > 1 else ''} {', '.join(map(str, s.missing))}"
                      if s.missing else "") + ".")
    elif s.missing:
        out.append(f"No record from rank{'s' if len(s.missing) > 1 else ''} {', '.join(map(str, s.missing))}.")
    out.append(f"{n} rank{'s' if n != 1 else ''} of a world of {s.world_size}"
               + (f" ({s.backend})" if s.backend else "") + f": total {fmt(s.total_sps)} env steps/s"
               + (f", per rank {', '.join(fmt(r.sps) for r in s.ranks)}" if n > 1 else "") + ".")
    if s.straggler is not None and s.imbalance is not None:
        r = s.row(s.straggler)
        mean_busy = sum(x.busy_ms for x in s.ranks if x.busy_ms is not None) / max(1, sum(x.busy_ms is not None for x in s.ranks))
        verdict = "balanced" if s.balanced else f"straggler: rank {s.straggler}"
        sps = (f"lowest SPS: rank {s.slowest_rank}" if s.slowest_rank is not None
               else f"SPS alike across ranks (within {BALANCED:.0%})")
        out.append(f"Imbalance {_pct(s.imbalance)} ({verdict}): rank {s.straggler} is busy {fmt(r.busy_ms)} ms/step "
                   f"outside communication against a mean of {fmt(mean_busy)} ms; {sps}.")
    if len(s.nodes) > 1:
        parts = []
        for node, e in s.nodes.items():
            part = f"node {node}" + (f" ({e['host']})" if e.get("host") else "") + f": ranks {', '.join(map(str, e['ranks'])) or '-'}"
            if e["missing"]:
                part += f" (no record from {', '.join(map(str, e['missing']))})"
            part += f", {fmt(e['total_sps'])} env steps/s, busy {fmt(e['busy_ms'])} ms/step"
            parts.append(part)
        slow = f"; slow node: {s.slow_node}" if s.slow_node is not None else ""
        out.append(f"{len(s.nodes)} nodes — " + "; ".join(parts) + slow + ".")
    if s.comm_share is not None:
        out.append(f"Communication takes {_pct(s.comm_share)} of the step on average "
                   f"({', '.join(f'rank {r.rank} {_pct(r.comm_share)}' for r in s.ranks)}).")
    if s.scaling_efficiency is not None:
        out.append(f"Scaling efficiency {_pct(s.scaling_efficiency)}: {fmt(s.total_sps)} / ({n} x {fmt(s.single_sps)} "
                   f"env steps/s of the 1-GPU run {s.single_label}).")
    elif s.single_sps is None:
        out.append("Scaling efficiency: no 1-GPU record given (perfkit report ... --single one_gpu.json).")
    return out


def rank_line(run: Run, output: str, fmt: Callable[[Any], str] | None = None) -> str:
    """One line per rank for the console of ``perfkit profile`` under a launcher."""
    f = fmt or num
    d = _dist(run)
    c_ms, src = comm_ms(run)
    s_ms = step_ms(run)
    share = f" ({_pct(c_ms / s_ms)})" if c_ms is not None and s_ms else ""
    where = ", ".join(str(x) for x in (d.get("backend"), d.get("device")) if x)
    unit = run.throughput_unit
    ended = f"{run.status} (exit {run.exit_code}), " if run.status != "complete" else ""
    return (f"perfkit rank {rank_of(run)}/{world_of(run)}" + (f" [{where}]" if where else "") + f": {ended}{f(run.sps)} {unit}, "
            f"step mean {f(s_ms)} ms, comm {f(c_ms)} ms/step{share}, {len(run.findings)} findings; record {output}")


def _marks(s: RankSummary, r: RankRow) -> list[str]:
    out = []
    if r.rank == s.first_failure:
        out.append("failed first")
    if r.rank == s.straggler and s.imbalance is not None and not s.balanced:
        out.append("straggler")
    if r.rank == s.slowest_rank:
        out.append("lowest SPS")
    return out


def report_sections(entries: Sequence[tuple[str, Run]], single: tuple[str, Run] | None,
                    fmt: Callable[[Any], str]) -> list[dict[str, Any]]:
    """One report section per job among the ``(label, run)`` entries (the report's model; ``fmt``
    formats numbers as the rest of the report does). ``single``: the 1-GPU baseline; else one is
    looked for among the entries (:func:`single_for`)."""
    out = []
    labels: list[str] = []
    for group in group_ranks(entries):
        base = single or single_for(group, entries)
        s = merge_ranks([r for _, r in group], base[1] if base else None, [lab for lab, _ in group])
        if base is not None:
            s.single_label = base[0]
        rows = []
        for r in s.ranks:
            where = r.device or "-"
            if r.physical_gpu is not None and r.device and r.device != f"cuda:{r.physical_gpu}":
                where += f" (GPU {r.physical_gpu})"
            rows.append([
                str(r.rank), fmt(r.node), r.host or "-", where, r.status, fmt(r.num_envs), fmt(r.steps), fmt(r.sps),
                fmt(r.step_ms), fmt(r.busy_ms), fmt(r.comm_ms) + (f" ({r.comm_source})" if r.comm_ms is not None else ""),
                _pct(r.comm_share), fmt(r.comm_calls_per_step), fmt(r.comm_host_ms), fmt(r.comm_wait_ms),
                fmt(r.ddp_exposed_ms), fmt(r.syncs_per_step), fmt(r.exit_code), r.error or "-",
                "; ".join(_marks(s, r)),
            ])
        for m in s.missing:
            node = next((n for n, e in s.nodes.items() if m in e["missing"]), None)
            rows.append([str(m), fmt(node), "-", "-", "no record", *["-"] * 14, "missing"])
        rows.sort(key=lambda row: int(row[0]))
        ranks = [r.rank for r in s.ranks]
        seg_rows = [[name, *(fmt(per.get(k)) for k in ranks)] for name, per in s.segments.items()]
        comm_rows = []
        for op, per in sorted(s.comm_ops.items()):
            for k in ranks:
                e = per.get(k)
                if e is None or not (e.get("calls_per_step") or e.get("waits_per_step")):
                    continue  # this rank made the op only in set-up or teardown
                comm_rows.append([op, str(k), fmt(e.get("calls_per_step")), fmt(e.get("async_per_step")),
                                  fmt((e.get("bytes_per_step") or 0) / 1e6), fmt(e.get("call_ms_per_step")),
                                  fmt(e.get("waits_per_step")), fmt(e.get("wait_ms_per_step"))])
        summary = {
            "world_size": s.world_size, "ranks": ranks, "total_sps": s.total_sps, "slowest_rank": s.slowest_rank,
            "straggler": s.straggler, "imbalance": s.imbalance, "balanced": s.balanced, "comm_share": s.comm_share,
            "single_sps": s.single_sps, "scaling_efficiency": s.scaling_efficiency, "missing": list(s.missing),
            "failed": list(s.failed), "first_failure": s.first_failure,
            "exit_codes": {r.rank: r.exit_code for r in s.ranks}, "errors": {r.rank: r.error for r in s.ranks if r.error},
            "nodes": {n: dict(e) for n, e in s.nodes.items()}, "slow_node": s.slow_node,
        }
        label = f"{s.script}, {len(s.ranks)} of {s.world_size} ranks" + (f" ({s.backend})" if s.backend else "")
        if s.failed:
            label += f", failed (first: rank {s.first_failure if s.first_failure is not None else s.failed[0]})"
        d0 = _dist(group[0][1])
        job_id = d0.get("run_id") if d0.get("run_id") not in (None, "", "none") else d0.get("master")
        if label in labels:  # two jobs alike: their headings must still tell them apart
            label += f", job {job_id}" if job_id and label + f", job {job_id}" not in labels else f", job {len(labels) + 1}"
        labels.append(label)
        out.append({
            "label": label,
            "summary": summary,
            "headline": headline(s, fmt),
            "columns": ["rank", "node", "host", "device", "status", "num_envs", "steps", "env SPS", "step ms", "busy ms",
                        "comm ms", "comm share", "comm calls/step", "comm host ms", "of it Work.wait ms", "DDP exposed ms",
                        "syncs/step", "exit", "error", "note"],
            "rows": rows,
            "segment_columns": ["segment", *(f"rank {k}" for k in ranks)],
            "segment_rows": seg_rows,
            "segment_source": "GPU time (CUDA events)" if s.segment_source == "gpu" else "CPU time",
            "comm_columns": ["op", "rank", "calls/step", "async/step", "MB/step", "call ms/step", "waits/step",
                             "wait ms/step"],
            "comm_rows": comm_rows,
            "notes": list(s.notes),
        })
    return out


__all__ = ["BALANCED", "RankRow", "RankSummary", "comm_ms", "group_ranks", "headline", "job_key", "load_ranks",
           "merge_ranks", "rank_line", "rank_of", "rank_segments_frame", "ranks_frame", "report_sections", "single_for",
           "world_of"]

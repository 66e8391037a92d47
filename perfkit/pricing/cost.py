"""The cost model: what each finding costs per step, and the step time and SPS a set of fixes would buy.

Prices come from a machine cost profile (:mod:`perfkit.pricing.machine_profile`): this machine's cached one, or
the labelled H200 reference. The model is ``perfkit.cost/2``.

**One statistic.** Every time here is a *mean* over the run's steady, timed steps: the step time
``T`` is ``run.step_ms["mean"]`` (else ``wall_s / steps``, the same mean), a segment's time ``h_s``
is its ``cpu_ms_per_step`` (host time spent in the segment per step, a mean over the same steps) and
its GPU time ``g_s`` its ``gpu_ms_per_step``. SPS is a mean rate, ``N * 1000 / T`` (``N`` = num_envs,
1 without it: steps/s), before and after a fix alike. Step-time percentiles (p50, p99) are never used.

**Price of one finding** (``raw``; costs per call times ``per_step``), by model (``pricing.prices["model_of"]``):

* **sync** — ``round_trip + drain + extra``.
  ``round_trip`` is the idle-queue sync (``sync_idle_ms``) when the queue is empty and what a sync
  adds behind queued work (``sync_queued_extra_ms``) when it is full, mixed by ``p_full``, the
  probability the queue is full at that point. ``drain`` is the queued GPU work the host waits for.
  The run's per-segment GPU times are CUDA-event spans (they include GPU idle gaps), so they bound
  the GPU work rather than measure it; the work that outruns the host is the *backlog*
  ``B = sum over segments of max(0, g_s - h_s)`` (a CUDA-graph physics segment: one launch on
  the host, milliseconds on the GPU), and ``p_full = min(1, B / T)``.
  - ``sync_wait`` (the session timed the site's real syncs, ``run.extra["sync_wait"][site]``: host
    time blocked per call and the host work from its end to the next sync or the step end): removing
    a site's calls saves, per *burst* (consecutive calls at the site within a step, no other sync
    between: :mod:`perfkit.collectors.sync_wait`), ``min(W, G + n * overhead)`` — each call's fixed
    ``overhead`` (the round trip and the ``extra`` below) plus the queued GPU work it waited for as far
    as the host work after it hides it: that work overlaps only with the host work before the next
    sync of another site, which then waits instead; ``W``/``G``/``n``: the burst's summed waits, gaps
    after, calls. The record sums the bursts in two classes (waits within their gaps, or not), priced
    alike: exact unless a burst waited longer than its gap by less than its overhead (then at most its
    overhead too much). A record without ``bursts`` (older) is priced from the site's averages, one
    class. The measured wait is host time inside the call, so ``extra`` (a copy, formatting) is in it,
    not added on top, and no call saves more than its measured wait. Fixing *all*
    syncs saves their summed waits (``pricing.prices["sync_all_ms"]``, ``what_if["all_syncs"]``).
  - ``backlog_split`` (GPU timing, no measured wait): the syncs of a step share the backlog evenly,
    ``drain = B / k`` (``k`` syncs per step), so all of them together never drain more than ``B``.
  - ``round_trip`` (no GPU timing: a CPU-only run's would-sync-on-GPU findings): the round trip alone,
    a GPU's price (from the reference profile on a CPU-only machine) that is no cost on this machine:
    on a CPU run it is shown as what the finding costs on that GPU, never predicted (**CPU runs** below).
  ``extra``: ``print`` formats the tensor (``tensor_repr_ms``); ``.cpu()``/``.numpy()``/``.tolist()``
  copy device->host (``d2h_latency_ms`` + bytes / ``d2h_gbps``); a blocking host->device copy
  (``torch.tensor(list, device=...)``, indexing with a Python list) copies the other way.
* **alloc** — one caching-allocator round trip per new tensor (``alloc_cached_ms``; on a CPU run the
  CPU allocator's ``alloc_cpu_ms``: a CUDA allocation's price on a CPU run once ranked perfkit's own
  MLP, 10 activations a step, above the script's syncs). Only the allocation: the fix (a buffer made
  once, written in place: ``out=``, ``add_``, ``zero_``) still launches the op's kernel; a kernel
  goes only where the fix also rewrites the arithmetic (``zeros(n) + a + b`` -> ``a.add_(b)``), which
  the record cannot know.
* **loop** — ``per_step`` counts loop-body iterations per step; each iteration issues ``ops`` small
  torch ops at the probed per-env-loop price of one. ``ops`` is what the session counted
  (``run.extra["loop_ops"][site]``: every torch call, index views included), priced at the probed
  iteration over the probe body's five such calls (``pyloop_iteration_ms / PYLOOP_CALLS``); else what
  the loop body's source issues (calls, arithmetic on tensors, item assignments: the kernels) or, if
  more, the out-of-place ops the run found in the body (alloc findings in its lines, per iteration),
  priced at ``pyloop_op_ms`` (the iteration over the probe body's three such ops); with no source,
  the probe's three. Those inner allocations keep their own price and the loop's is reduced by it,
  so a loop and its body are not counted twice; so do the syncs in its body (about one per
  iteration), whose round trip holds the launch of their op: the loop's price is reduced by one op
  per inner sync call.
  On a CPU run with this machine's own probe profile, one loop iteration costs one probed iteration
  (``pyloop_iteration_ms``) whatever its body: on a CPU an iteration's Python and dispatch overhead
  sets its cost (the probe's 8.3 us matched the 8 us observed for a 2-call body, where the calls-based
  price predicted x2.17 for a measured x84).
* **stream** — a race, not a cost: left unpriced.

**CPU runs** (the record's device is ``cpu``). A price that used a GPU cost from another machine's
profile (a sync round trip, a copy, a kernel launch: anything but the CPU allocator's price) is no cost
on this machine and would promise a speed-up that cannot happen here: the finding gets no
``est_ms_per_step`` and enters no prediction; ``pricing.prices["source_of"][key]`` keeps it as
``on_device_ms`` (``"on an H200 this costs ~X ms/step"``) and ``what_if["on_device"]`` sums them.

**Bound.** The step is cut into *buckets*: each recorded segment ``s`` (time ``h_s``) and the
unsegmented rest ``R = max(0, T - sum h_s)``. A finding sits in its segment's bucket (the rest when
its segment is not recorded). Its price is ``est = min(raw, bucket time, T)``: a finding cannot save
more than the measured time of the segment it sits in (a sync's wait is host time inside its
segment). ``pricing.prices["source_of"][key]`` keeps ``raw`` (``unbounded_ms``) and the bound when it binds.
A record with a negative segment time has no usable breakdown: the whole step is then one bucket
(``pricing.prices["segments_consistent"]`` is false and the notes say so).

**What if.** Fixing a set ``F`` of findings: per bucket ``b``, ``saved_b = min(time_b, sum of est over
the fixed findings in b)`` (when ``F`` holds every sync and all their waits were measured, a sync
saves ``max(est, its share of its site's wait)``: all syncs gone, the whole backlog may overlap).
The *untouched time* ``U`` is the summed time of the buckets no fixed finding sits in — measured
time the fixes do not touch. The GPU floor ``G = min(T, sum of g_s over GPU-bound segments)``
is GPU work that stays whatever the host does. A segment is GPU-bound when its event span is at least
``GPU_BOUND_RATIO`` times its host time (``g_s >= 2 h_s``: a CUDA graph, one launch for
milliseconds of GPU work); an event span only a little longer than the host time is mostly GPU
waiting for a slow host or draining before a sync (the H200 validation: with ``g_s > h_s`` alone,
train_naive.py's host-bound ``other`` segment floored every prediction at the measured step, and
removing its 2.3 ms per-env loop was predicted to save nothing). The prediction is

    T_after = min(T, max(T - sum_b saved_b, U, G, MIN_STEP_FRACTION * T))

and ``SPS_after = N * 1000 / T_after``; ``bound`` names the term that set it (``fixes``,
``untouched``, ``gpu``, or ``min_fraction``: a last resort, at most a 50x claim, that binds only
where the untouched time and the GPU floor are smaller still, as in a run without segment times).
A prediction is made on this run's own measured times: a price from another machine enters it
bounded, never scaled.
``run.pricing.what_if_table`` lists the top ``TOP_N`` findings, the script's own first (a library's is
fixed by configuring, subclassing or reporting it upstream), each group by ``est``, with the cumulative
``T_after`` and SPS of fixing the first 1..k of them; ``run.pricing.what_if`` is the top-N summary,
with the words every output shows (``summary``, ``notes``, and ``note``, the notes in one line for
the console: :func:`what_if_summary`, :func:`pricing_notes`, :func:`pricing_note_line`).

**Where each price comes from** (``pricing.prices["source_of"][key]["label"]``): ``measured here (sync
wait)``; ``this machine's probe profile`` (the profile's key is the run's machine); ``reference H200
profile, not measured here`` (or ``... same GPU model, not probed on this machine``); another
machine's profile, named. A price from another machine is never scaled, only bounded as above, and
says so (``bounded by its segment's measured X ms/step``). The committed validation on the H200
(``perfkit/data/price-validation.json``, :func:`perfkit.pricing.machine_profile.read_validation`) labels each
model ``validated on NVIDIA H200 (...)``, ``unvalidated (error X%)`` or ``not validated``.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable

from perfkit.pricing.machine_profile import (  # noqa: F401
    ProfileError,
    load_profile,
    read_validation,
    reference_profile,
    save_profile,
    validation_label,
)
from perfkit.collectors import hub
from perfkit.formatting import num
from perfkit.record import (
    EXTRA_LOOP_OPS,
    EXTRA_SYNC_WAIT,
    Finding,
    Pricing,
    Run,
    is_number,
)

MODEL = "perfkit.cost/2"
STATISTIC = "mean"  # the one step-time statistic of every price and prediction (module doc)
TOP_N = 5
MIN_STEP_FRACTION = 0.02  # last resort where no segment time bounds a prediction: at most a 50x claim
REST = "(unsegmented)"  # the bucket of step time outside every recorded segment
# The pyloop probe's loop body, ``out[i] = a[i] * 2.0 + b[i]``, counted two ways: 3 ops as
# ``_body_ops`` reads source (mul, add, the item assignment: the kernels), 5 torch calls as a session
# counts them (``run.extra["loop_ops"]``: the two index views too). The probed iteration time is
# split by the count of the same kind as the one it prices (tests/cost/test_loop_units.py).
PYLOOP_OPS = 3
PYLOOP_CALLS = 5


# costs that mean the same on a CPU run wherever they were measured (host-side work)
_HOST_COSTS = frozenset({"alloc_cpu_ms"})

# where a price comes from, most trusted first (a finding priced from several takes the least trusted)
SOURCES = ("measured", "probe", "reference_same_gpu", "reference", "other")


def price_kind(op: str) -> str:
    """What a sync op costs beyond its round trip, from the sync-op table (``perfkit.collectors.patches``):
    ``"d2h"`` / ``"h2d"`` for a copy, ``"round trip"`` for the rest and for a label no table has."""
    sync_op = hub.sync_op(op)
    return sync_op.price if sync_op is not None else "round trip"


class _Prices:
    """Costs by name from the machine profile, falling back to the reference; remembers what it used,
    overall (``used``) and since the last :meth:`start` (``touched``: the costs one finding used)."""

    def __init__(self, profile: dict[str, Any], reference: dict[str, Any] | None):
        self.profile = profile
        self.reference = reference
        self.used: dict[str, dict[str, Any]] = {}
        self.touched: dict[str, str] = {}  # cost name -> "profile" | "reference"
        self.cpu_run = False  # the run is on a CPU: an allocation costs the CPU allocator's price
        self.per_iteration = False  # a CPU run with this machine's probe: loops at one probed iteration each

    def start(self) -> None:
        self.touched = {}

    def get(self, name: str, default: float | None = None) -> float | None:
        v = self.first(name)
        return default if v is None else v

    def first(self, *names: str) -> float | None:
        """The first of ``names`` this machine's profile has, else the first the reference has."""
        for role, doc in (("profile", self.profile), ("reference", self.reference)):
            if doc is None:
                continue
            for name in names:
                if name in doc.get("costs", {}):
                    value = float(doc["costs"][name])
                    self.used[name] = {"value": value, "source": doc.get("source", "?"),
                                       "metric": doc.get("cost_sources", {}).get(name)}
                    self.touched[name] = role
                    return value
        return None


@dataclass
class _RunContext:
    step_ms: float | None  # T: the mean step time
    gpu_ms: float | None  # GPU time per step, all segments (event spans: an upper bound of GPU work)
    backlog_ms: float  # GPU work per step that outruns the host: what syncs drain
    gpu_bound_ms: float  # GPU time of the GPU-bound segments: the GPU floor of any fixed step
    syncs_per_step: float
    busy: float  # probability a sync finds the queue full (0 without GPU timing)
    buckets: dict[str, float] = field(default_factory=dict)  # segment (or REST) -> host ms per step
    segments_consistent: bool = True  # False: a negative segment time; the step is then one bucket

    @classmethod
    def of(cls, run: Run) -> "_RunContext":
        step = step_ms_of(run)
        timed = [s for s in run.segments.values() if s.gpu_ms_per_step is not None]
        gpu = float(sum(s.gpu_ms_per_step for s in timed)) if timed else None
        backlog = float(sum(max(0.0, s.gpu_ms_per_step - (s.cpu_ms_per_step or 0.0)) for s in timed))
        bound = float(sum(s.gpu_ms_per_step for s in timed if _gpu_bound(s)))
        syncs = sum(f.per_step for f in run.findings if f.kind == "sync")
        busy = min(1.0, backlog / step) if step else 0.0
        buckets = {name: float(s.cpu_ms_per_step or 0.0) for name, s in run.segments.items()}
        consistent = all(v >= 0 for v in buckets.values())
        if not consistent:  # a negative segment time: the breakdown cannot bound anything
            buckets = {}
        buckets[REST] = max(0.0, (step or 0.0) - sum(buckets.values()))
        return cls(step, gpu, backlog, bound, syncs, busy, buckets, consistent)

    def bucket_of(self, f: Finding) -> str:
        return f.segment if f.segment in self.buckets and f.segment != REST else REST

    def describe(self, bucket: str) -> str:
        if bucket != REST:
            return f"its segment's ({bucket})"
        return "the unsegmented rest of the step" if self.segments_consistent else "the step (segment times inconsistent)"


GPU_BOUND_RATIO = 2.0


def _gpu_bound(s) -> bool:
    """Whether a segment's GPU work outlasts its host work clearly enough to floor a fixed step."""
    h = s.cpu_ms_per_step or 0.0
    return s.gpu_ms_per_step is not None and s.gpu_ms_per_step > 0 and s.gpu_ms_per_step >= GPU_BOUND_RATIO * h


def step_ms_of(run: Run) -> float | None:
    """The run's mean step time (the model's one statistic): ``step_ms["mean"]``, else wall time over
    steps (also a mean). Never a percentile."""
    v = (run.step_ms or {}).get("mean")
    if v:
        return float(v)
    if run.steps and run.wall_s:
        return run.wall_s * 1000.0 / run.steps
    return None


def envs_of(run: Run) -> int:
    """What one step advances: num_envs, or 1 (SPS is then steps/s)."""
    return int(run.num_envs) if run.num_envs else 1


def sps_of(run: Run) -> float | None:
    """Mean steps (env steps) per second, ``N * 1000 / T``: the rate the mean step time gives."""
    step = step_ms_of(run)
    return envs_of(run) * 1000.0 / step if step else None


def _bytes_per_call(f: Finding) -> float:
    if f.bytes and f.count:
        return f.bytes / f.count
    return 4.0  # a scalar


def _copy_ms(prices: _Prices, direction: str, nbytes: float) -> float | None:
    lat = prices.get(f"{direction}_latency_ms")
    if lat is None:
        return None
    bw = prices.get(f"{direction}_gbps")
    return lat + (nbytes / (bw * 1e9) * 1e3 if bw else 0.0)


_BUILTINS = frozenset(dir(builtins))


def _body_ops(nodes: list[ast.AST]) -> int:
    """Torch ops one iteration of a loop body issues, read from its source: calls (not of builtins like
    ``range``/``len``), arithmetic on non-constants outside index expressions, and item assignments
    (``x[i] = ...``, ``x[i] += ...``: a copy kernel each). ``out[i] = a[i] * 2.0 + b[i]`` is 3, the
    pyloop probe's body; ``actions[i].clamp_(-1.0, 1.0)`` is 1."""
    ops = 0
    index_nodes: set[int] = set()
    for root in nodes:
        for n in ast.walk(root):
            if isinstance(n, ast.Subscript):
                index_nodes.update(id(m) for m in ast.walk(n.slice))
    for root in nodes:
        for n in ast.walk(root):
            if id(n) in index_nodes or isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(n, ast.Call):
                ops += not (isinstance(n.func, ast.Name) and n.func.id in _BUILTINS)
            elif isinstance(n, ast.BinOp):
                ops += not (isinstance(n.left, ast.Constant) and isinstance(n.right, ast.Constant))
            elif isinstance(n, ast.UnaryOp):
                ops += not isinstance(n.operand, ast.Constant)
            elif isinstance(n, ast.Assign):
                ops += sum(isinstance(t, ast.Subscript) for t in n.targets)
            elif isinstance(n, ast.AugAssign):
                ops += 1
    return ops


@lru_cache(maxsize=256)
def _loop_span(path: str, line: int) -> tuple[int, int, int] | None:
    """First and last line of the loop (or comprehension) whose header is ``path:line``, and the torch
    ops one iteration of its body issues (:func:`_body_ops`)."""
    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None
    found = []
    for n in ast.walk(tree):
        if getattr(n, "lineno", None) != line:
            continue
        if isinstance(n, (ast.For, ast.AsyncFor, ast.While)):
            body = list(n.body)
        elif isinstance(n, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            body = [n.elt]
        elif isinstance(n, ast.DictComp):
            body = [n.key, n.value]
        else:
            continue
        found.append((n.lineno, n.end_lineno or n.lineno, _body_ops(body)))
    return max(found, key=lambda s: s[1]) if found else None


def loop_body_findings(loop: Finding, run: Run) -> list[Finding]:
    """The other findings inside ``loop``'s body (its source lines) that run about once per iteration."""
    span = _loop_span(loop.path, loop.line)
    if span is None:
        return []
    first, last, _ = span
    return [a for a in run.findings if a is not loop and a.kind != "loop" and a.path == loop.path
            and first <= a.line <= last and a.per_step >= 0.5 * loop.per_step]


def _inner_allocs(loop: Finding, run: Run) -> list[Finding]:
    return [a for a in loop_body_findings(loop, run) if a.kind == "alloc"]


def _inner_syncs(loop: Finding, run: Run) -> list[Finding]:
    return [a for a in loop_body_findings(loop, run) if a.kind == "sync"]


@dataclass(frozen=True)
class _SyncWait:
    """A site's measured waits, per call (ms): ``classes`` holds ``(wait, gap, calls)`` sums per call of
    the site's bursts in each class (the record's ``bursts``: :mod:`perfkit.collectors.sync_wait`), or
    one class, the whole site's averages, in a record without them."""

    wait: float
    gap: float
    classes: tuple[tuple[float, float, float], ...]

    def saving(self, overhead: float) -> float:
        """Host time per call that removing the site's calls saves, at most: per class, each call's
        ``overhead`` (the round trip, a copy: inside the measured wait, gone with the call) plus the queued
        GPU work it waited for as far as the host work after it (``gap``) hides it, and never more than
        the measured wait: ``min(wait, gap + calls * overhead)``."""
        return sum(min(w, g + n * overhead) for w, g, n in self.classes)


def _sync_wait_of(run: Run, f: Finding) -> _SyncWait | None:
    """``f``'s site's measured waits from ``run.extra["sync_wait"]`` (per call), or None."""
    d = (run.extra.get(EXTRA_SYNC_WAIT) or {}).get(f.site)
    if not isinstance(d, dict):
        return None
    w, g, n = d.get("wait_ms_per_step"), d.get("gap_ms_per_step_after"), d.get("calls_per_step")
    if not all(is_number(x) for x in (w, g, n)) or n <= 0:
        return None
    w, g, n = float(w) / n, float(g) / n, float(n)
    classes: tuple[tuple[float, float, float], ...] = ((w, g, 1.0),)
    bursts = d.get("bursts")
    if isinstance(bursts, dict):
        parts = [bursts.get(c) for c in ("fit", "over")]
        if all(isinstance(p, dict) and all(is_number(p.get(k)) for k in ("wait_ms", "gap_ms", "calls")) for p in parts):
            classes = tuple((p["wait_ms"] / n, p["gap_ms"] / n, p["calls"] / n) for p in parts)
    return _SyncWait(w, g, classes)


def pricing_model(f: Finding, run: Run, ctx: "_RunContext | None" = None) -> str:
    """Which model prices ``f``: for syncs ``sync_wait`` (measured wait and gap), ``backlog_split`` (the
    even split of the GPU backlog: GPU timing but no measured wait) or ``round_trip`` (no GPU timing: a
    CPU-only run's would-sync findings); else the finding kind."""
    if f.kind != "sync":
        return f.kind
    if _sync_wait_of(run, f) is not None:
        return "sync_wait"
    ctx = ctx or _RunContext.of(run)
    return "backlog_split" if ctx.gpu_ms is not None else "round_trip"


def price_finding(f: Finding, run: Run, prices: _Prices, ctx: _RunContext | None = None) -> tuple[float | None, str]:
    """``(est_ms_per_step, how)`` for one finding; ``None`` with the reason when it cannot be priced."""
    ctx = ctx or _RunContext.of(run)
    op = (f.op or "").lower()
    if f.kind == "stream":
        return None, "a stream hazard is a race, not a cost"
    if f.kind == "sync":
        idle = prices.get("sync_idle_ms")
        if idle is None:
            return None, "no sync round-trip cost in the profile"
        p_full = ctx.busy
        round_trip = p_full * prices.get("sync_queued_extra_ms", idle) + (1.0 - p_full) * idle
        extra, extras = 0.0, []
        if "print" in op:
            repr_ms = prices.get("tensor_repr_ms")
            if repr_ms:
                extra += repr_ms
                extras.append("tensor repr")
        direction = price_kind(f.op or "")  # the table's label as written (not lower-cased: "Event.synchronize()")
        if direction in ("d2h", "h2d"):
            c = _copy_ms(prices, direction, _bytes_per_call(f))
            if c:
                extra += c
                extras.append(f"{direction.upper()} copy")
        sw = _sync_wait_of(run, f)
        if sw is not None:
            # the measured wait is the host's time inside the call: the copy and the formatting are in it
            # already (a price on top would count them twice); like the round trip they go with the call
            overhead = round_trip + extra
            per_call = sw.saving(overhead)
            bursts = "per burst" if len(sw.classes) > 1 else "site average"
            how = (f"round trip {round_trip * 1e3:.1f} us" + "".join(f" + {e}" for e in extras)
                   + f" + min(drained wait, host gap after) ({bursts}: wait {sw.wait * 1e3:.1f} us, gap "
                   f"{sw.gap * 1e3:.1f} us per call; measured), at most the measured wait")
            return f.per_step * per_call, how
        drain = ctx.backlog_ms / max(ctx.syncs_per_step, 1.0)
        per_call = round_trip + drain + extra
        how = (f"round trip {round_trip * 1e3:.1f} us + drain {drain * 1e3:.1f} us (queue full {p_full:.0%})"
               + "".join(f" + {e}" for e in extras))
        return f.per_step * per_call, how
    if f.kind == "alloc":
        cost = _alloc_ms(prices)
        if cost is None:
            return None, "no allocation cost in the profile"
        return f.per_step * cost, "caching-allocator round trip per new tensor"
    if f.kind == "loop":
        inner = _inner_allocs(f, run)
        syncs = _inner_syncs(f, run)
        less = [f"{len(inner)} inner allocation site(s)"] * bool(inner) + [f"{len(syncs)} inner sync site(s)"] * bool(syncs)
        iteration_ms = prices.first("pyloop_iteration_ms") if prices.per_iteration else None
        if iteration_ms is not None:
            # on a CPU an iteration's cost is its Python and dispatch overhead, which the probe's loop
            # measures as a whole (issue 18: its 8.3 us matched the 8 us observed for a 2-call body)
            inner_ms = (sum(a.per_step for a in inner) * (_alloc_ms(prices) or 0.0)
                        + sum(a.per_step for a in syncs) * iteration_ms / PYLOOP_CALLS)
            est = max(0.0, f.per_step * iteration_ms - inner_ms)
            return est, (f"one probed per-env iteration ({iteration_ms * 1e3:.3g} us) per iteration"
                         + (", less " + " and ".join(less) if less else ""))
        op_ms = prices.first("pyloop_op_ms", "launch_torch_ms")
        if op_ms is None:
            return None, "no per-env loop cost in the profile"
        inner_rate = sum(a.per_step for a in inner + syncs) / f.per_step if f.per_step else 0.0
        counted = (run.extra.get(EXTRA_LOOP_OPS) or {}).get(f.site)
        span = _loop_span(f.path, f.line)
        if isinstance(counted, (int, float)) and counted > 0:
            iteration_ms = prices.first("pyloop_iteration_ms")
            if iteration_ms is not None:
                op_ms = iteration_ms / PYLOOP_CALLS
            ops, how = float(counted), f"{counted:g} torch calls per iteration (counted)"
        elif span is not None and span[2] > 0:
            ops = max(float(span[2]), inner_rate)
            how = f"{ops:.3g} torch ops per iteration (read from the loop body)"
        else:
            ops = max(float(PYLOOP_OPS), inner_rate)
            how = f"{ops:.3g} torch ops per iteration (assumed: the probe's loop body)"
        alloc_ms = (_alloc_ms(prices) or 0.0) if inner else 0.0
        # an inner sync's round trip already holds the launch of its op (the copy it waits for)
        inner_ms = sum(a.per_step for a in inner) * alloc_ms + sum(a.per_step for a in syncs) * op_ms
        est = max(0.0, f.per_step * ops * op_ms - inner_ms)
        return est, how + " x per-env loop op cost" + (", less " + " and ".join(less) if less else "")
    return None, f"unknown finding kind {f.kind!r}"


def _alloc_ms(prices: _Prices) -> float | None:
    """One new tensor: the CUDA caching allocator's round trip, or on a CPU run the CPU allocator's."""
    if prices.cpu_run:
        return prices.first("alloc_cpu_ms", "alloc_cached_ms")
    return prices.first("alloc_cached_ms", "alloc_cpu_ms")


def _profile_for(profile: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    if profile is None:
        profile = load_profile()
    reference = reference_profile()
    if profile.get("source") == reference.get("source"):
        reference = None
    return profile, reference


def machine_key(machine: dict[str, Any] | None) -> str | None:
    """:func:`perfkit.machine.key` of a recorded machine block (device, driver, torch); None when the
    record names no device."""
    if not machine or not machine.get("device"):
        return None
    return f"{machine['device']}|{machine.get('driver')}|{machine.get('torch')}".replace(" ", "_")


class _SourceNamer:
    """Names where a finding's price came from (:data:`SOURCES`, and the words the outputs show)."""

    def __init__(self, run: Run, profile: dict[str, Any], reference: dict[str, Any] | None):
        self.run_key = machine_key(run.machine)
        self.run_device = (run.machine or {}).get("device")
        self.profile = profile
        self.profile_is_reference = reference is None and str(profile.get("source", "")).startswith("reference:")
        self.reference = reference if reference is not None else (profile if self.profile_is_reference else None)

    def _reference(self) -> tuple[str, str]:
        dev = ((self.reference or {}).get("machine") or {}).get("device") or "H200"
        short = str(dev).replace("NVIDIA ", "")
        if self.run_device and self.run_device == dev:
            return "reference_same_gpu", f"reference {short} profile (same GPU model, not probed on this machine)"
        return "reference", f"reference {short} profile, not measured here"

    def role(self, role: str) -> tuple[str, str]:
        """(source, label) of a cost taken from the machine profile (``"profile"``) or the reference."""
        if role == "reference" or self.profile_is_reference:
            return self._reference()
        key = self.profile.get("key")
        if self.run_key is None:
            return "probe", f"probe profile ({self.profile.get('source', '?')})"
        if key == self.run_key:
            return "probe", "this machine's probe profile"
        return "other", f"probe profile of another machine ({key}), not measured here"

    @property
    def own_probe(self) -> bool:
        """Whether the machine profile is this machine's own probe (its key is the run's machine)."""
        return not self.profile_is_reference and self.run_key is not None and self.profile.get("key") == self.run_key

    def gpu_only(self, touched: dict[str, str]) -> str | None:
        """On a CPU run: the GPU (``"H200"``) whose costs a price took from another machine's profile
        (a sync round trip, a kernel launch, a CUDA allocation), or None when every cost it used means
        the same on this CPU (this machine's probe, a CPU allocation)."""
        for name, role in touched.items():
            if name in _HOST_COSTS or self.role(role)[0] == "probe":
                continue
            doc = self.reference if role == "reference" or self.profile_is_reference else self.profile
            return str(((doc or {}).get("machine") or {}).get("device") or "GPU").replace("NVIDIA ", "")
        return None

    def of(self, touched: dict[str, str], model: str) -> tuple[str, str]:
        named = [self.role(r) for r in dict.fromkeys(touched.values())] or [("other", "no cost used")]
        worst = max(named, key=lambda sl: SOURCES.index(sl[0]))
        if model == "sync_wait":
            label = "measured here (sync wait)"
            if worst[0] != "probe":
                label += f"; round trip from the {worst[1]}"
            return "measured", label
        return worst


def price_run(run: Run, profile: dict[str, Any] | None = None, validation: dict[str, Any] | None = None) -> Run:
    """``run`` priced: a copy of it whose findings carry their ``est_ms_per_step`` (bounded: module doc)
    and whose ``pricing`` block (:class:`perfkit.record.Pricing`) holds ``prices``, ``what_if`` and
    ``what_if_table``. ``run`` itself is left as it was (its findings and pricing are not touched; the
    copy shares the rest).

    ``profile=None`` prices with this machine's cached profile if there is one, else the reference;
    costs a machine profile lacks (a CPU-only machine has no sync round trip) come from the reference,
    and ``pricing.prices["costs"]`` names the source of every number used, ``pricing.prices["source_of"]`` the source
    of every price. ``validation=None`` reads the committed validation
    (:func:`perfkit.pricing.machine_profile.read_validation`); pass ``{}`` for none.
    """
    run = dataclasses.replace(run, findings=[dataclasses.replace(f) for f in run.findings], pricing=Pricing())
    profile, reference = _profile_for(profile)
    if validation is None:
        validation = read_validation()
    prices = _Prices(profile, reference)
    ctx = _RunContext.of(run)
    namer = _SourceNamer(run, profile, reference)
    cpu = is_cpu_run(run)
    prices.cpu_run = cpu
    prices.per_iteration = cpu and namer.own_probe
    unpriced, hows, model_of, source_of = {}, {}, {}, {}
    for f in run.findings:
        key = f"{f.site} {f.op}"
        prices.start()
        raw, how = price_finding(f, run, prices, ctx)
        model = model_of[key] = pricing_model(f, run, ctx)
        if raw is None:
            f.est_ms_per_step = None
            unpriced[key] = how
            continue
        gpu = namer.gpu_only(prices.touched) if cpu else None
        if gpu is not None:
            # a GPU's price is no cost on this CPU: it never enters this run's prediction (issue 18)
            f.est_ms_per_step = None
            unpriced[key] = f"on an {gpu} this costs ~{raw:.3g} ms/step ({how}); no cost on this CPU"
            source_of[key] = {"source": namer.of(prices.touched, model)[0], "label": f"{gpu} price, not this CPU's",
                              "model": model, "validation": validation_label(model, validation), "bucket": None,
                              "bound_ms": None, "unbounded_ms": None, "on_device": gpu, "on_device_ms": raw}
            continue
        bucket = ctx.bucket_of(f)
        room = min(ctx.buckets[bucket], ctx.step_ms) if ctx.step_ms else None
        bounded = room is not None and raw > room
        f.est_ms_per_step = room if bounded else raw
        source, label = namer.of(prices.touched, model)
        if bounded:
            where = ctx.describe(bucket)
            label += f"; bounded by {where} measured {room:.3g} ms/step"
            how += f" = {raw:.3g} ms/step, bounded by {where} measured {room:.3g} ms/step"
        hows[key] = how
        source_of[key] = {"source": source, "label": label, "model": model,
                          "validation": validation_label(model, validation), "bucket": bucket,
                          "bound_ms": room, "unbounded_ms": raw if bounded else None}
    run.pricing.prices = {
        "model": MODEL,
        "statistic": STATISTIC,
        "profile": profile.get("source"),
        "profile_key": profile.get("key"),
        "own_probe": namer.own_probe,  # the profile is this machine's own `perfkit probe`
        "cpu_run": cpu,
        "profile_created": profile.get("created"),
        "reference": reference.get("source") if reference else None,
        "costs": prices.used,
        "unpriced": unpriced,
        "how": hows,
        "model_of": model_of,
        "source_of": source_of,
        "validation": _validation_summary(validation),
        "sync_all_ms": _all_syncs_ms(run),
        "step_ms": ctx.step_ms,
        "segments_ms": dict(ctx.buckets),  # the buckets of the bound (module doc)
        "segments_consistent": ctx.segments_consistent,
        "gpu_ms_per_step": ctx.gpu_ms,
        "gpu_backlog_ms_per_step": ctx.backlog_ms,
        "queue_full_fraction": round(ctx.busy, 4),
    }
    run.pricing.what_if = what_if(run, ctx=ctx)
    run.pricing.what_if_table = what_if_table(run, ctx=ctx)
    # the words every output shows, kept with the numbers (renderers format the record, nothing else)
    run.pricing.what_if["summary"] = what_if_summary(run)
    run.pricing.what_if["notes"] = pricing_notes(run)
    run.pricing.what_if["note"] = pricing_note_line(run)
    return run


def is_cpu_run(run: Run) -> bool:
    """Whether the run was measured on a CPU (its device is ``cpu``: no GPU time, no real syncs)."""
    return str((run.machine or {}).get("device") or "").lower() == "cpu"


def on_device_prices(run: Run) -> dict[str, Any] | None:
    """A CPU run's findings priced only for a GPU: ``{"device", "findings", "ms_per_step"}``, or None."""
    src = [s for s in (run.pricing.prices.get("source_of") or {}).values()
           if isinstance(s, dict) and s.get("on_device_ms") is not None]
    if not src:
        return None
    return {"device": src[0]["on_device"], "findings": len(src), "ms_per_step": float(sum(s["on_device_ms"] for s in src))}


def _validation_summary(doc: dict[str, Any] | None) -> dict[str, Any] | None:
    if not doc:
        return None
    return {"device": (doc.get("machine") or {}).get("device"), "created": doc.get("created"),
            "report": doc.get("report"), "tolerance": doc.get("tolerance"),
            "models": {name: validation_label(name, doc) for name in doc.get("models", {})}}


def _all_syncs_ms(run: Run) -> float | None:
    """Host time per step all syncs priced by ``sync_wait`` block for: what fixing every one of them
    saves (the whole backlog may then overlap; :func:`predict` keeps the step above the GPU floor)."""
    syncs = [f for f in run.findings if f.kind == "sync"]
    if not syncs or any(_sync_wait_of(run, f) is None for f in syncs):
        return None
    sw = run.extra[EXTRA_SYNC_WAIT]
    return float(sum(sw[site]["wait_ms_per_step"] for site in {f.site for f in syncs}))


def _savings(run: Run, fixed: list[Finding]) -> list[tuple[Finding, float]]:
    """What each fixed finding saves: its price; with every sync fixed and all their waits measured, a
    sync saves at least its share (by calls) of its site's measured wait."""
    out = [(f, f.est_ms_per_step or 0.0) for f in fixed]
    syncs = [f for f in run.findings if f.kind == "sync"]
    all_ms = run.pricing.prices.get("sync_all_ms")
    if not syncs or not isinstance(all_ms, (int, float)) or not all(any(f is g for g in fixed) for f in syncs):
        return out
    sw = run.extra[EXTRA_SYNC_WAIT]
    calls: dict[str, float] = {}
    for f in syncs:
        calls[f.site] = calls.get(f.site, 0.0) + f.per_step
    return [(f, max(ms, float(sw[f.site]["wait_ms_per_step"]) * f.per_step / calls[f.site]) if f.kind == "sync"
             and calls.get(f.site) else ms) for f, ms in out]


_BOUNDS = ("fixes", "untouched", "gpu", "min_fraction")


def predict(run: Run, fixed: Iterable[Finding] | None = None, saved_ms: float | None = None,
            ctx: _RunContext | None = None) -> dict[str, Any]:
    """Predicted mean step time and SPS after fixing ``fixed`` (priced findings; the module doc's
    formula) or saving ``saved_ms`` per step (no segment known: every bucket counts as touched)."""
    ctx = ctx or _RunContext.of(run)
    step = ctx.step_ms
    n = envs_of(run)
    touched: set[str]
    if saved_ms is None:
        per_bucket: dict[str, float] = {}
        for f, ms in _savings(run, list(fixed or [])):
            b = ctx.bucket_of(f)
            per_bucket[b] = per_bucket.get(b, 0.0) + ms
        touched = set(per_bucket)
        saved_ms = sum(min(ctx.buckets[b], ms) for b, ms in per_bucket.items())
    else:
        touched = set(ctx.buckets)
    if not step:
        return {"statistic": STATISTIC, "step_ms": None, "saved_ms": saved_ms, "step_ms_after": None, "sps": None,
                "sps_after": None, "gain": None, "bound": None}
    untouched = float(sum(v for b, v in ctx.buckets.items() if b not in touched))
    gpu_floor = min(step, ctx.gpu_bound_ms)
    terms = {"fixes": step - saved_ms, "untouched": untouched, "gpu": gpu_floor,
             "min_fraction": MIN_STEP_FRACTION * step}
    after = max(terms.values())
    # a floor the savings only just reach (every touched segment's whole time saved) is what sets it
    bound = next((k for k in _BOUNDS[1:] if terms[k] >= after * (1.0 - 1e-9)), "fixes")
    # a fix never makes the step slower (a GPU floor or segment sum above the measured step)
    after = min(step, after)
    return {"statistic": STATISTIC, "step_ms": step, "saved_ms": saved_ms, "untouched_ms": untouched,
            "gpu_floor_ms": gpu_floor, "floor_ms": max(untouched, gpu_floor, terms["min_fraction"]),
            "step_ms_after": after, "sps": n * 1000.0 / step, "sps_after": n * 1000.0 / after,
            "gain": step / after - 1.0, "bound": bound}


def _ranked(run: Run) -> list[Finding]:
    """Priced findings, the script's own first (a fix it can make), then the libraries' (fixed by
    configuring, subclassing or reporting upstream), each costliest first."""
    return sorted((f for f in run.findings if f.est_ms_per_step is not None),
                  key=lambda f: (f.library is not None, -f.est_ms_per_step))


def what_if(run: Run, top_n: int = TOP_N, ctx: _RunContext | None = None) -> dict[str, Any]:
    """Predicted step time and SPS after fixing the ``top_n`` costliest priced findings, and per finding
    if only it were; ``sources``: how many priced findings each source priced (and how many bounded)."""
    ctx = ctx or _RunContext.of(run)
    priced = _ranked(run)
    top = priced[:top_n]
    overall = predict(run, top, ctx=ctx)
    per_finding = []
    for f in priced:
        p = predict(run, [f], ctx=ctx)
        per_finding.append({"site": f.site, "kind": f.kind, "op": f.op, "segment": f.segment,
                            "est_ms_per_step": f.est_ms_per_step, "sps_if_fixed": p["sps_after"],
                            "gain": p["gain"]})
    syncs = [f for f in run.findings if f.kind == "sync" and f.est_ms_per_step is not None]
    all_syncs = predict(run, syncs, ctx=ctx) if syncs else None
    source_of = run.pricing.prices.get("source_of") or {}
    sources: dict[str, dict[str, Any]] = {}
    for f in priced:
        src = source_of.get(f"{f.site} {f.op}")
        if src is None:
            continue
        base = src["label"].split("; bounded by")[0]
        e = sources.setdefault(base, {"source": src["source"], "findings": 0, "bounded": 0})
        e["findings"] += 1
        e["bounded"] += src.get("unbounded_ms") is not None
    return {"top_n": top_n, "fixed": [f"{f.site} {f.op}" for f in top], **overall, "per_finding": per_finding,
            "all_syncs": all_syncs, "sources": sources, "on_device": on_device_prices(run)}


def what_if_table(run: Run, top_n: int = TOP_N, ctx: _RunContext | None = None) -> list[dict[str, Any]]:
    """Fixing the top 1, 2, ..., ``top_n`` findings: per row the finding, its price and where the
    price comes from, and the cumulative predicted mean step time and SPS."""
    ctx = ctx or _RunContext.of(run)
    top = _ranked(run)[:top_n]
    source_of = run.pricing.prices.get("source_of") or {}
    rows = []
    for k, f in enumerate(top, 1):
        p = predict(run, top[:k], ctx=ctx)
        src = source_of.get(f"{f.site} {f.op}") or {}
        rows.append({"rank": k, "site": f.site, "op": f.op, "kind": f.kind, "segment": f.segment,
                     "est_ms_per_step": f.est_ms_per_step, "unbounded_ms": src.get("unbounded_ms"),
                     "source": src.get("source"), "source_label": src.get("label"), "model": src.get("model"),
                     "validation": src.get("validation"), "step_ms_after": p["step_ms_after"],
                     "sps_after": p["sps_after"], "gain": p["gain"], "untouched_ms": p.get("untouched_ms"),
                     "bound": p["bound"]})
    return rows


_BOUND_WORDS = {
    "untouched": "the measured time of the segments these fixes do not touch",
    "gpu": "the GPU time of the GPU-bound segments",
    "min_fraction": f"the last-resort floor of {MIN_STEP_FRACTION:.0%} of the step (no segment times bound it)",
}


def bound_words(bound: str | None) -> str | None:
    """What set a prediction, in words (None when the fixes' savings did)."""
    return _BOUND_WORDS.get(bound or "")


def pricing_notes(run: Run) -> list[str]:
    """The lines every output shows under the what-if table: the statistic, where the prices come
    from (how many findings each source priced, how many bounded), and how far each model used is
    validated. Read from the record alone (also for a record loaded later)."""
    pr = run.pricing.prices
    wi = run.pricing.what_if
    gpu = on_device_prices(run)
    if pr and gpu and not wi.get("sources"):
        return [_on_device_words(gpu, pr)]
    if not pr or not wi.get("sources"):
        return []
    unit = "env-steps/s" if run.num_envs else "steps/s"
    lines = [f"times are means over the steady steps (SPS = {'num_envs' if run.num_envs else '1'} x 1000 / mean "
             f"step ms, {unit}); a prediction never goes below the measured time the fixes do not touch"]
    parts = _source_parts(wi)
    lines.append("prices: " + "; ".join(parts))
    if pr.get("segments_consistent") is False:
        lines.append("this record's segment times are inconsistent (a negative one): prices and predictions are "
                     "bounded by the whole step only")
    if any(e["source"] in ("reference", "reference_same_gpu", "other") for e in wi["sources"].values()):
        lines.append("a price from another machine is not scaled to this one, only bounded by this run's "
                     "measured segment times" + ("" if pr.get("own_probe") else
                                                 ": measure this machine's with `perfkit probe`"))
    if gpu:
        lines.append(_on_device_words(gpu, pr))
    models = sorted({s["model"] for s in (pr.get("source_of") or {}).values()})
    if models:
        labels = [f"{m}: {validation_label_of(pr, m)}" for m in models]
        lines.append("validation of the pricing models: " + "; ".join(labels))
    return lines


def _on_device_words(gpu: dict[str, Any], pr: dict[str, Any]) -> str:
    line = (f"on this CPU, {gpu['findings']} finding(s) priced only with GPU costs are left out of the prediction "
            f"(a GPU's price is no cost here): on an {gpu['device']} they cost ~{num(gpu['ms_per_step'])} ms/step")
    return line if pr.get("own_probe") else line + "; `perfkit probe` prices this machine's loops"


def pricing_note_line(run: Run) -> str | None:
    """The pricing notes in one line (the console's): where the prices come from and what is left out."""
    pr = run.pricing.prices
    wi = run.pricing.what_if
    parts = _source_parts(wi)
    gpu = on_device_prices(run)
    if gpu:
        parts.append(f"{gpu['findings']} GPU-only, left out (on an {gpu['device']} ~{num(gpu['ms_per_step'])} ms/step)")
    if not parts:
        return None
    line = "prices: " + "; ".join(parts)
    foreign = any(e["source"] in ("reference", "reference_same_gpu", "other") for e in (wi.get("sources") or {}).values())
    if foreign:
        line += "; another machine's prices are bounded, never scaled"
    if (foreign or gpu) and not pr.get("own_probe"):
        line += "; `perfkit probe` measures this machine's"
    return line


def _source_parts(wi: dict[str, Any]) -> list[str]:
    """``3 from this machine's probe profile``, ``2 from the reference H200 profile, not measured here
    (1 bounded by their segment's measured time)``: how many priced findings each source priced."""
    parts = []
    for label, e in (wi.get("sources") or {}).items():
        part = (f"{e['findings']} {label}" if label.startswith("measured")
                else f"{e['findings']} from {'' if label.startswith('this ') else 'the '}{label}")
        if e.get("bounded"):
            part += f" ({e['bounded']} bounded by their segment's measured time)"
        parts.append(part)
    return parts


def what_if_summary(run: Run) -> str | None:
    """The one-line what-if every output shows: ``fixing the top 5: est. 0.297 -> 0.0546 ms/step
    (mean), 53,808 -> 292,900 env-steps/s (x5.44); ...`` and what set the prediction."""
    wi = run.pricing.what_if
    if not wi.get("fixed") or not wi.get("step_ms_after") or wi.get("statistic") != STATISTIC:
        return None
    unit = "env-steps/s" if run.num_envs else "steps/s"
    line = (f"fixing the top {len(wi['fixed'])}: est. {num(wi['step_ms'])} -> {num(wi['step_ms_after'])} ms/step "
            f"({wi['statistic']}), {num(wi['sps'], 4)} -> {num(wi['sps_after'], 4)} {unit} (x{num(1 + wi['gain'])})")
    words = bound_words(wi.get("bound"))
    if words:
        floor = wi.get("untouched_ms") if wi["bound"] == "untouched" else wi.get("step_ms_after")
        line += f"; floored at {num(floor)} ms/step, {words}"
    elif wi.get("untouched_ms"):
        line += f"; the segments these fixes do not touch measure {num(wi['untouched_ms'])} ms/step"
    return line


def validation_label_of(pricing: dict[str, Any], model: str) -> str:
    for s in (pricing.get("source_of") or {}).values():
        if s.get("model") == model and s.get("validation"):
            return s["validation"]
    return "not validated"

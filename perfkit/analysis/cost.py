"""The cost model: what each finding costs per step, and the SPS a fix would buy.

Prices come from a machine cost profile (:mod:`perfkit.costs_profile`): this machine's cached one, or
the labelled H200 reference. The model, per finding kind (all costs per call, times ``per_step``):

* **sync** — ``round_trip + drain + extra``.
  ``round_trip`` is the idle-queue sync (``sync_idle_ms``) when the queue is empty and what a sync
  adds behind queued work (``sync_queued_extra_ms``) when it is full, mixed by ``p_full``, the
  probability the queue is full at that point. ``drain`` is the queued GPU work the host waits for.
  The run's per-segment GPU times are CUDA-event spans (they include GPU idle gaps), so they bound
  the GPU work rather than measure it; the work that outruns the host is the *backlog*
  ``B = sum over segments of max(0, gpu_ms - cpu_ms)`` (a CUDA-graph physics segment: one launch on
  the host, milliseconds on the GPU). The syncs of a step drain it: ``drain = B / k`` per call
  (``k`` syncs per step), so all of them together never drain more than ``B``, and
  ``p_full = min(1, B / step_ms)``. In a launch-bound loop ``B`` is 0 and a sync costs its round
  trip.
  Without GPU timing (a CPU-only run, would-sync-on-GPU findings) the price is the round trip alone.
  When the session timed the site's real syncs (``run.extra["sync_wait"][site]``: host time blocked
  per call and the host work from its end to the next sync or the step end), removing *one* sync is
  priced ``round_trip + min(wait - round_trip, gap_after)`` per call: the queued GPU work overlaps
  only with the host work before the next sync, which then waits instead (the H200 validation: one
  of several syncs removed saves ~nothing). Fixing *all* syncs saves their summed waits
  (``pricing["sync_all_ms"]``, ``what_if["all_syncs"]``), floored at the GPU time like any what-if.
  ``pricing["model_of"]`` names the model that priced each finding.
  ``extra``: ``print`` formats the tensor (``tensor_repr_ms``); ``.cpu()``/``.numpy()``/``.tolist()``
  copy device->host (``d2h_latency_ms`` + bytes / ``d2h_gbps``); a blocking host->device copy
  (``torch.tensor(list, device=...)``, indexing with a Python list) copies the other way.
  Removing one of several syncs saves its drain only as far as the host has work to overlap with
  the GPU before the next sync drains the rest: the even split is a middle estimate of that, between
  nothing (the next sync waits instead) and the whole backlog (all host work overlaps).
* **alloc** — one caching-allocator round trip per new tensor (``alloc_cached_ms``, or
  ``alloc_cpu_ms`` on a CPU-only profile).
* **loop** — ``per_step`` counts loop-body iterations per step; each iteration issues ``ops`` small
  torch ops at the probed per-env-loop price of one. ``ops`` is what the session counted
  (``run.extra["loop_ops"][site]``: every torch call, index views included), priced at the probed
  iteration over the probe body's five such calls (``pyloop_iteration_ms / PYLOOP_CALLS``); else what
  the loop body's source issues (calls, arithmetic on tensors, item assignments: the kernels) or, if
  more, the out-of-place ops the run found in the body (alloc findings in its lines, per iteration),
  priced at ``pyloop_op_ms`` (the iteration over the probe body's three such ops); with no source,
  the probe's three. Those inner allocations
  keep their own price and the loop's is reduced by it, so a loop and its body are not counted twice.
* **stream** — a race, not a cost: left unpriced.

What if: the step time after fixing a set of findings is ``max(step_ms - sum(est), floor)`` with
``floor`` the GPU time of the GPU-bound segments (``gpu_ms > cpu_ms``: that GPU work stays whatever
the host does; a host-bound segment's event span is mostly GPU idling, so it sets no floor) — and
never below ``MIN_STEP_FRACTION`` of the measured step — and SPS scales as ``step_ms / step_ms_after``.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable

from perfkit.costs_profile import ProfileError, load_profile, reference_profile, save_profile  # noqa: F401
from perfkit.record import EXTRA_LOOP_OPS, EXTRA_PRICING, EXTRA_SYNC_WAIT, EXTRA_WHAT_IF, Finding, Run

MODEL = "perfkit.cost/1"
TOP_N = 5
MIN_STEP_FRACTION = 0.02  # no prediction from pricing alone claims more than a 50x speed-up
# The pyloop probe's loop body, ``out[i] = a[i] * 2.0 + b[i]``, counted two ways: 3 ops as
# ``_body_ops`` reads source (mul, add, the item assignment: the kernels), 5 torch calls as a session
# counts them (``run.extra["loop_ops"]``: the two index views too). The probed iteration time is
# split by the count of the same kind as the one it prices (tests/cost/test_loop_units.py).
PYLOOP_OPS = 3
PYLOOP_CALLS = 5

# the sync collectors' op names that copy data (perfkit.collectors.torch_sync / warp_sync)
_D2H_OPS = (".cpu", ".numpy", ".tolist", ".to(cpu")  # .cpu(), .numpy() (also Warp's array.numpy()), ...
_H2D_OPS = ("torch.tensor(", "torch.as_tensor(", "t[list]")  # a Python list copied to the device


class _Prices:
    """Costs by name from the machine profile, falling back to the reference; remembers what it used."""

    def __init__(self, profile: dict[str, Any], reference: dict[str, Any] | None):
        self.profile = profile
        self.reference = reference
        self.used: dict[str, dict[str, Any]] = {}

    def get(self, name: str, default: float | None = None) -> float | None:
        v = self.first(name)
        return default if v is None else v

    def first(self, *names: str) -> float | None:
        """The first of ``names`` this machine's profile has, else the first the reference has."""
        for doc in (self.profile, self.reference):
            if doc is None:
                continue
            for name in names:
                if name in doc.get("costs", {}):
                    value = float(doc["costs"][name])
                    self.used[name] = {"value": value, "source": doc.get("source", "?"),
                                       "metric": doc.get("cost_sources", {}).get(name)}
                    return value
        return None


@dataclass
class _RunContext:
    step_ms: float | None
    gpu_ms: float | None  # GPU time per step, all segments (event spans: an upper bound of GPU work)
    backlog_ms: float  # GPU work per step that outruns the host: what syncs drain
    gpu_bound_ms: float  # GPU time of the GPU-bound segments: the floor of any fixed step
    syncs_per_step: float
    busy: float  # probability a sync finds the queue full (0 without GPU timing)

    @classmethod
    def of(cls, run: Run) -> "_RunContext":
        step = step_ms_of(run)
        timed = [s for s in run.segments.values() if s.gpu_ms_per_step is not None]
        gpu = float(sum(s.gpu_ms_per_step for s in timed)) if timed else None
        backlog = float(sum(max(0.0, s.gpu_ms_per_step - (s.cpu_ms_per_step or 0.0)) for s in timed))
        bound = float(sum(s.gpu_ms_per_step for s in timed if s.gpu_ms_per_step > (s.cpu_ms_per_step or 0.0)))
        syncs = sum(f.per_step for f in run.findings if f.kind == "sync")
        busy = min(1.0, backlog / step) if step else 0.0
        return cls(step, gpu, backlog, bound, syncs, busy)


def step_ms_of(run: Run) -> float | None:
    """The run's typical step time: p50, else mean, else wall time over steps."""
    for k in ("p50", "mean"):
        v = (run.step_ms or {}).get(k)
        if v:
            return float(v)
    if run.steps and run.wall_s:
        return run.wall_s * 1000.0 / run.steps
    return None


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


def _sync_wait_of(run: Run, f: Finding) -> tuple[float, float] | None:
    """``(wait_ms, gap_ms_after)`` per call at ``f``'s site from ``run.extra["sync_wait"]``, or None."""
    d = (run.extra.get(EXTRA_SYNC_WAIT) or {}).get(f.site)
    if not isinstance(d, dict):
        return None
    w, g, n = d.get("wait_ms_per_step"), d.get("gap_ms_per_step_after"), d.get("calls_per_step")
    if not all(isinstance(x, (int, float)) for x in (w, g, n)) or n <= 0:
        return None
    return float(w) / n, float(g) / n


def pricing_model(f: Finding, run: Run) -> str:
    """Which model prices ``f``: for syncs ``sync_wait`` (measured wait and gap) or ``backlog_split``
    (the even split of the GPU backlog); else the finding kind."""
    if f.kind != "sync":
        return f.kind
    return "sync_wait" if _sync_wait_of(run, f) is not None else "backlog_split"


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
        sw = _sync_wait_of(run, f)
        if sw is not None:
            wait, gap = sw
            drain = max(0.0, wait - round_trip)
            per_call = round_trip + min(drain, gap)
            how = (f"round trip {round_trip * 1e3:.1f} us + min(drained wait {drain * 1e3:.1f} us, host gap after "
                   f"{gap * 1e3:.1f} us) (measured)")
        else:
            drain = ctx.backlog_ms / max(ctx.syncs_per_step, 1.0)
            per_call = round_trip + drain
            how = f"round trip {round_trip * 1e3:.1f} us + drain {drain * 1e3:.1f} us (queue full {p_full:.0%})"
        extra = 0.0
        if "print" in op:
            repr_ms = prices.get("tensor_repr_ms")
            if repr_ms:
                extra += repr_ms
                how += " + tensor repr"
        if any(k in op for k in _D2H_OPS):
            c = _copy_ms(prices, "d2h", _bytes_per_call(f))
            if c:
                extra += c
                how += " + D2H copy"
        elif any(k in op for k in _H2D_OPS):
            c = _copy_ms(prices, "h2d", _bytes_per_call(f))
            if c:
                extra += c
                how += " + H2D copy"
        return f.per_step * (per_call + extra), how
    if f.kind == "alloc":
        cost = prices.first("alloc_cached_ms", "alloc_cpu_ms")
        if cost is None:
            return None, "no allocation cost in the profile"
        return f.per_step * cost, "caching-allocator round trip per new tensor"
    if f.kind == "loop":
        op_ms = prices.first("pyloop_op_ms", "launch_torch_ms")
        if op_ms is None:
            return None, "no per-env loop cost in the profile"
        inner = _inner_allocs(f, run)
        inner_rate = sum(a.per_step for a in inner) / f.per_step if f.per_step else 0.0
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
        alloc_ms = (prices.first("alloc_cached_ms", "alloc_cpu_ms") or 0.0) if inner else 0.0
        inner_ms = sum(a.per_step for a in inner) * alloc_ms
        est = max(0.0, f.per_step * ops * op_ms - inner_ms)
        return est, how + " x per-env loop op cost" + (f", less {len(inner)} inner allocation site(s)" if inner else "")
    return None, f"unknown finding kind {f.kind!r}"


def _profile_for(profile: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    if profile is None:
        profile = load_profile()
    reference = reference_profile()
    if profile.get("source") == reference.get("source"):
        reference = None
    return profile, reference


def price_run(run: Run, profile: dict[str, Any] | None = None) -> Run:
    """Set every finding's ``est_ms_per_step`` and store ``run.extra["what_if"]`` and
    ``run.extra["pricing"]``. Returns ``run`` (annotated in place).

    ``profile=None`` prices with this machine's cached profile if there is one, else the reference;
    costs a machine profile lacks (a CPU-only machine has no sync round trip) come from the reference,
    and ``pricing["costs"]`` names the source of every number used.
    """
    profile, reference = _profile_for(profile)
    prices = _Prices(profile, reference)
    ctx = _RunContext.of(run)
    unpriced, hows = {}, {}
    for f in run.findings:
        est, how = price_finding(f, run, prices, ctx)
        f.est_ms_per_step = est
        if est is None:
            unpriced[f"{f.site} {f.op}"] = how
        else:
            hows[f"{f.site} {f.op}"] = how
    run.extra[EXTRA_PRICING] = {
        "model": MODEL,
        "profile": profile.get("source"),
        "profile_key": profile.get("key"),
        "profile_created": profile.get("created"),
        "reference": reference.get("source") if reference else None,
        "costs": prices.used,
        "unpriced": unpriced,
        "how": hows,
        "model_of": {f"{f.site} {f.op}": pricing_model(f, run) for f in run.findings},
        "sync_all_ms": _all_syncs_ms(run),
        "step_ms": ctx.step_ms,
        "gpu_ms_per_step": ctx.gpu_ms,
        "gpu_backlog_ms_per_step": ctx.backlog_ms,
        "queue_full_fraction": round(ctx.busy, 4),
    }
    run.extra[EXTRA_WHAT_IF] = what_if(run)
    return run


def _all_syncs_ms(run: Run) -> float | None:
    """Host time per step all syncs priced by ``sync_wait`` block for: what fixing every one of them
    saves (the whole backlog may then overlap; :func:`predict` keeps the step above the GPU floor)."""
    syncs = [f for f in run.findings if f.kind == "sync"]
    if not syncs or any(_sync_wait_of(run, f) is None for f in syncs):
        return None
    sw = run.extra[EXTRA_SYNC_WAIT]
    return float(sum(sw[site]["wait_ms_per_step"] for site in {f.site for f in syncs}))


def sps_of(run: Run) -> float | None:
    if run.sps:
        return float(run.sps)
    step = step_ms_of(run)
    if step and run.num_envs:
        return run.num_envs * 1000.0 / step
    return None


def predict(run: Run, fixed: Iterable[Finding] | None = None, saved_ms: float | None = None) -> dict[str, Any]:
    """Predicted step time and SPS after fixing ``fixed`` (priced findings) or saving ``saved_ms`` per step."""
    ctx = _RunContext.of(run)
    step = ctx.step_ms
    sps = sps_of(run)
    if saved_ms is None:
        fixed = list(fixed or [])
        saved_ms = sum(f.est_ms_per_step or 0.0 for f in fixed)
        syncs = [f for f in run.findings if f.kind == "sync"]
        all_ms = (run.extra.get(EXTRA_PRICING) or {}).get("sync_all_ms")
        if syncs and isinstance(all_ms, (int, float)) and all(any(f is g for g in fixed) for f in syncs):
            # every sync fixed: their summed waits, not the one-at-a-time estimates (bounded by the floor below)
            saved_ms += max(0.0, all_ms - sum(f.est_ms_per_step or 0.0 for f in syncs))
    if not step:
        return {"step_ms": None, "saved_ms": saved_ms, "step_ms_after": None, "sps": sps, "sps_after": None,
                "gain": None}
    floor = max(ctx.gpu_bound_ms, MIN_STEP_FRACTION * step)
    # a fix never makes the step slower: where the GPU-bound segments' event spans exceed the measured
    # step (spans include idle GPU time, and the step is a host-side median), the floor is the step
    after = min(step, max(step - saved_ms, floor))
    sps_after = sps * step / after if sps else None
    return {"step_ms": step, "saved_ms": saved_ms, "floor_ms": floor, "step_ms_after": after, "sps": sps,
            "sps_after": sps_after, "gain": step / after - 1.0}


def what_if(run: Run, top_n: int = TOP_N) -> dict[str, Any]:
    """Predicted SPS after fixing the ``top_n`` costliest priced findings, and per finding if only it were."""
    priced = sorted((f for f in run.findings if f.est_ms_per_step is not None),
                    key=lambda f: f.est_ms_per_step, reverse=True)
    top = priced[:top_n]
    overall = predict(run, top)
    per_finding = []
    for f in priced:
        p = predict(run, [f])
        per_finding.append({"site": f.site, "kind": f.kind, "op": f.op, "segment": f.segment,
                            "est_ms_per_step": f.est_ms_per_step, "sps_if_fixed": p["sps_after"],
                            "gain": p["gain"]})
    syncs = [f for f in run.findings if f.kind == "sync" and f.est_ms_per_step is not None]
    all_syncs = predict(run, syncs) if syncs else None
    return {"top_n": top_n, "fixed": [f"{f.site} {f.op}" for f in top], **overall, "per_finding": per_finding,
            "all_syncs": all_syncs}

"""Collectives: ``torch.distributed``'s communication as the ``comm`` segment, counted and timed.

Hooks (installed by the session through its patcher, removed with everything else):

* every collective and point-to-point function of ``torch.distributed`` (:data:`COLLECTIVES`:
  ``all_reduce``, ``broadcast``, ``all_gather``, ``all_gather_into_tensor``, ``reduce_scatter``,
  ``reduce_scatter_tensor``, ``all_to_all``, ``barrier``, the object collectives, ``send``/``recv``
  ...), replaced in ``torch.distributed.distributed_c10d`` and wherever a module holds the same
  function (``torch.distributed.all_reduce``, ``from torch.distributed import all_reduce``). A call
  runs in segment ``comm``, so the segment clock gives its host time on every timed step and CUDA
  events its GPU time on the GPU-timed ones, like any other segment. One call is one call: a
  collective that calls another (``all_gather_object`` -> ``all_gather``) counts once;
* ``Work.wait`` (what ``async_op=True`` returns): also segment ``comm``, its host time kept as the
  op's *wait*. It is never a sync finding: on NCCL it makes the current stream wait for the
  collective, on gloo it blocks the host until the exchange ends — communication either way, not a
  device value read back. A real sync inside ``comm`` (an ``.item()`` on an all-reduced loss in a
  ``with perfkit.segment("comm")`` block, the host copies ``all_gather_object`` makes on CUDA) is a
  sync finding like any other, in segment ``comm``;
* ``init_process_group`` / ``destroy_process_group``: the process group's backend, rank and world
  size are read when it is made and before it is destroyed;
* ``DistributedDataParallel.forward``: DDP's gradient buckets are all-reduced by its C++ reducer from
  autograd hooks, never through these Python functions; on the GPU their time lies inside the
  backward (segment ``learner``) on NCCL's stream. perfkit registers no communication hook (a
  program may register only one, and it may be the program's own): it counts the forwards that
  will all-reduce in backward (grad enabled, not under ``no_sync``) and reads the reducer's own
  statistics (``_get_ddp_logging_data``: bucket sizes; per backward the communication time, the
  compute time and their overlap, measured by DDP with CUDA events on the GPU and the host clock on
  the CPU, on the iterations DDP samples: 1-10 and every 100th). DDP's own figures are averages over
  every sampled iteration, perfkit's warm-up and DDP's first iterations included; perfkit reads each
  sampled iteration's own times right after DDP sets them (in the next forward) and keeps those whose
  step was a timed, complete steady step: the steady state, as every other figure.

What the host time of a collective means: a synchronous gloo collective returns when the exchange
is done, so its host time includes waiting for the slowest rank; a synchronous NCCL collective
returns once enqueued (microseconds) and the waiting happens on the GPU, where the CUDA-event time of
the ``comm`` segment sees it (the current stream waits for NCCL's before the call returns).

Counting follows the session's steps: calls made before the first step are setup, during warm-up
warm-up; a steady step's calls count when the step is timed and complete. The last step is not: it
has no next boundary, so its calls after its step call returned are teardown (the final
``all_gather`` of a script's throughput) and the ones before are only part of a step. The per-step
figures are over the timed steps but the last — a script making 2 all-reduces per step reads
exactly 2.
"""

from __future__ import annotations

import sys
import threading
import weakref
from time import perf_counter
from typing import Any, Callable

from perfkit.collectors import segments
from perfkit.collectors import hub
from perfkit.collectors.hub import tls
from perfkit.collectors.patches import Patcher, wraps

COMM = "comm"

# name -> (position, keyword) of the tensor or tensor list this rank sends; None: no tensor payload
COLLECTIVES: dict[str, tuple[int, str] | None] = {
    "all_reduce": (0, "tensor"),
    "all_reduce_coalesced": (0, "tensors"),
    "broadcast": (0, "tensor"),
    "all_gather": (1, "tensor"),
    "all_gather_into_tensor": (1, "input_tensor"),
    "all_gather_coalesced": (1, "input_tensor_list"),
    "reduce": (0, "tensor"),
    "reduce_scatter": (1, "input_list"),
    "reduce_scatter_tensor": (1, "input"),
    "all_to_all": (1, "input_tensor_list"),
    "all_to_all_single": (1, "input"),
    "gather": (0, "tensor"),
    "scatter": (0, "tensor"),
    "send": (0, "tensor"),
    "recv": (0, "tensor"),
    "isend": (0, "tensor"),
    "irecv": (0, "tensor"),
    "batch_isend_irecv": None,
    "barrier": None,
    "monitored_barrier": None,
    "all_gather_object": None,
    "broadcast_object_list": None,
    "gather_object": None,
    "scatter_object_list": None,
    "send_object_list": None,
    "recv_object_list": None,
}
WAIT = "Work.wait"  # the op of a wait whose collective was not seen (made before the session, or by torch itself)


def _payload(args: tuple, kwargs: dict, where: tuple[int, str] | None, Tensor: type) -> int:
    """Bytes of the tensor (or tensors) this rank contributes to a call."""
    if where is None:
        return 0
    pos, name = where
    x = args[pos] if len(args) > pos else kwargs.get(name)
    if isinstance(x, Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(t.numel() * t.element_size() for t in x if isinstance(t, Tensor))
    return 0


class CommCollector:
    """The hooks of one session (see module doc). ``timed(index)`` says whether a step counts in the
    steady-state timing (the session's rule)."""

    def __init__(self, clock: Any, timed: Callable[[int], bool]):
        self.clock = clock
        self.timed = timed
        self.totals: dict[str, list] = {}  # op -> [calls, call_s, bytes, waits, wait_s, async calls] over the timed steps
        self.phases: dict[str, dict[str, int]] = {}  # op -> {phase: calls (waits not included)}
        self.pg: dict[str, Any] = {}  # the process group, as last seen
        self.installed = False
        self._torch: Any = None
        self._local = threading.local()  # .depth: inside a hooked call on this thread
        self._works: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()
        self._step = -1  # the step the pending events belong to
        self._pending: list[tuple] = []  # (kind, op, t0, seconds, bytes) of the current step
        self._ddp: list[_DDPModule] = []  # per DDP module seen
        self._ddp_live: dict[int, _DDPModule] = {}  # id(module) -> its entry, while the module lives
        self.ddp_forwards = 0  # forwards that all-reduce in backward, over the timed steps
        self._lock = threading.Lock()

    # ---- installing ---------------------------------------------------------------------------------
    def install(self, patcher: Patcher) -> bool:
        """Hook ``torch.distributed`` (False when this torch has none)."""
        torch = sys.modules.get("torch")
        if torch is None:
            return False
        dist = getattr(torch, "distributed", None)
        if dist is None or not dist.is_available():
            return False
        from torch.distributed import distributed_c10d as c10d

        self._torch = torch
        replace: dict[int, tuple[Any, Any]] = {}
        for name in COLLECTIVES:
            orig = getattr(c10d, name, None)
            if orig is not None and not hasattr(orig, "__perfkit_wrapped__"):
                replace[id(orig)] = (orig, self._collective(orig, name))
        for name, make in (("init_process_group", self._after_init), ("destroy_process_group", self._before_destroy)):
            orig = getattr(c10d, name, None)
            if orig is not None and not hasattr(orig, "__perfkit_wrapped__"):
                replace[id(orig)] = (orig, make(orig))
        _replace_everywhere(patcher, replace)
        work = getattr(c10d, "Work", None)
        if work is not None and callable(getattr(work, "wait", None)):
            try:
                patcher.set(work, "wait", self._wait(work.wait))
            except (AttributeError, TypeError):  # pragma: no cover - a Work class that cannot be patched
                pass
        try:
            from torch.nn.parallel import DistributedDataParallel as DDP
        except ImportError:  # pragma: no cover
            DDP = None
        if DDP is not None and "forward" in vars(DDP):
            patcher.set(DDP, "forward", self._ddp_forward(vars(DDP)["forward"]))
        self.installed = True
        self._read_pg()
        return True

    # ---- hooks ----------------------------------------------------------------------------------------
    def _enter(self) -> tuple[list | None, int, Any]:
        """Enter segment ``comm`` on this thread: (stack, token, transition callback) to leave it."""
        main = threading.get_ident() == hub.MAIN_IDENT
        st = hub.MAIN_STACK if main else tls.stack
        if st and st[-1] == COMM:
            return None, 0, None
        tok = len(st)
        st.append(COMM)
        cb = segments.on_transition if main else None
        if cb is not None:
            cb(COMM)
        return st, tok, cb

    @staticmethod
    def _leave(st: list | None, tok: int, cb: Any) -> None:
        if st is None:
            return
        del st[tok:]
        if cb is not None:
            cb(st[-1] if st else "other")

    def _collective(self, orig: Callable, op: str) -> Callable:
        where = COLLECTIVES[op]
        local = self._local
        Tensor = self._torch.Tensor
        Work = getattr(self._torch.distributed, "Work", None)

        @wraps(orig)
        def collective(*args, **kwargs):
            if hub.is_compiling() or getattr(local, "depth", 0):
                return orig(*args, **kwargs)
            local.depth = 1
            st, tok, cb = self._enter()
            t0 = perf_counter()
            try:
                out = orig(*args, **kwargs)
            finally:
                t1 = perf_counter()
                self._leave(st, tok, cb)
                local.depth = 0
            is_async = Work is not None and isinstance(out, Work)
            if is_async:
                self._works[out] = op
            elif Work is not None and isinstance(out, list):  # batch_isend_irecv: one Work per op
                for w in out:
                    if isinstance(w, Work):
                        self._works[w] = op
            try:
                self._event("async" if is_async else "call", op, t0, t1 - t0, _payload(args, kwargs, where, Tensor))
            except Exception:  # pragma: no cover - instrumentation must never break the program
                pass
            return out

        collective.__perfkit_comm__ = op  # type: ignore[attr-defined]
        return collective

    def _wait(self, orig: Callable) -> Callable:
        local = self._local
        works = self._works

        @wraps(orig)
        def wait(work, *args, **kwargs):
            if hub.is_compiling() or getattr(local, "depth", 0):
                return orig(work, *args, **kwargs)
            try:
                op = works.get(work, WAIT)
            except TypeError:  # pragma: no cover - not weak-referenceable
                op = WAIT
            local.depth = 1
            st, tok, cb = self._enter()
            t0 = perf_counter()
            try:
                return orig(work, *args, **kwargs)
            finally:
                t1 = perf_counter()
                self._leave(st, tok, cb)
                local.depth = 0
                self._event("wait", op, t0, t1 - t0, 0)

        return wait

    def _after_init(self, orig: Callable) -> Callable:
        @wraps(orig)
        def init_process_group(*args, **kwargs):
            out = orig(*args, **kwargs)
            self._read_pg()
            return out

        return init_process_group

    def _before_destroy(self, orig: Callable) -> Callable:
        @wraps(orig)
        def destroy_process_group(*args, **kwargs):
            self._read_pg()
            self._read_ddp()
            return orig(*args, **kwargs)

        return destroy_process_group

    def _ddp_forward(self, orig: Callable) -> Callable:
        is_grad_enabled = self._torch.is_grad_enabled

        @wraps(orig)
        def forward(module, *args, **kwargs):
            e = None
            if is_grad_enabled() and getattr(module, "require_backward_grad_sync", True) and not hub.is_compiling():
                try:
                    e = self._ddp_seen(module)
                except Exception:  # pragma: no cover
                    pass
            out = orig(module, *args, **kwargs)
            if e is not None and e.sampled_before():  # DDP has just set the previous iteration's times
                try:
                    e.take_sample(module)
                except Exception:  # pragma: no cover
                    pass
            return out

        return forward

    # ---- accounting -----------------------------------------------------------------------------------
    def _phase(self, idx: int) -> str:
        if idx == 0:
            return "setup"
        return "warmup" if idx <= self.clock.warmup_steps else "steady"

    def _event(self, kind: str, op: str, t0: float, secs: float, nbytes: int) -> None:
        with self._lock:
            idx = self.clock.index
            if idx != self._step:
                self._commit(final=False)
                self._step = idx
            if kind in ("call", "async"):
                ph = self.phases.setdefault(op, {})
                phase = self._phase(idx)
                ph[phase] = ph.get(phase, 0) + 1
            self._pending.append((kind, op, t0, secs, nbytes))

    def _commit(self, final: bool) -> None:
        """Fold the pending events of step ``self._step`` into the totals when it is a timed, complete
        steady step. The last step (``final``) is not complete: its steady calls after its step call
        returned are teardown, the others are counted by phase only."""
        pending, idx = self._pending, self._step
        self._pending = []
        if not pending:
            return
        c = self.clock
        end = None
        last = final and idx == c.index
        if last and idx > 0 and not c.manual and c.last_end is not None and c.last_end >= c.begin_t:
            end = c.last_end
        steady = idx > c.warmup_steps
        timed = steady and self.timed(idx) and not last
        for kind, op, t0, secs, nbytes in pending:
            if end is not None and t0 >= end:
                if steady and kind in ("call", "async"):
                    ph = self.phases.setdefault(op, {})
                    ph["steady"] = ph.get("steady", 0) - 1
                    ph["teardown"] = ph.get("teardown", 0) + 1
                continue
            if not timed:
                continue
            if kind == "ddp":
                self.ddp_forwards += 1
                continue
            e = self.totals.get(op)
            if e is None:
                e = self.totals[op] = [0, 0.0, 0, 0, 0.0, 0]
            if kind == "wait":
                e[3] += 1
                e[4] += secs
            else:
                e[0] += 1
                e[1] += secs
                e[2] += nbytes
                e[5] += kind == "async"

    def _ddp_seen(self, module: Any) -> "_DDPModule":
        key = id(module)
        e = self._ddp_live.get(key)
        if e is None:
            e = _DDPModule(module)
            self._ddp.append(e)
            self._ddp_live[key] = e
            # a module collected before the session ends (a training function returned, the program
            # collects garbage before destroying the group) still leaves its statistics behind
            e.finalizer = weakref.finalize(module, self._ddp_gone, key, e, getattr(module, "logger", None))
        e.forward(self.clock.index)
        self._event("ddp", "ddp.forward", perf_counter(), 0.0, 0)
        return e

    def _ddp_gone(self, key: int, e: "_DDPModule", logger: Any) -> None:
        if self._ddp_live.get(key) is e:
            del self._ddp_live[key]
        if logger is not None:
            e.data = _ddp_data(logger) or e.data

    def _read_ddp(self) -> None:
        for e in self._ddp:
            m = e.ref()
            if m is not None:
                e.data = _ddp_data(m) or e.data

    def _read_pg(self) -> None:
        try:
            dist = self._torch.distributed
            if dist.is_initialized():
                self.pg = {"backend": str(dist.get_backend()), "rank": int(dist.get_rank()),
                           "world_size": int(dist.get_world_size())}
        except Exception:  # pragma: no cover - a process group in a strange state
            pass

    def snapshot(self) -> dict[str, Any]:
        """What was seen, as plain data (after the session's hooks are off)."""
        from perfkit.dist import launch_info

        with self._lock:
            self._commit(final=True)
            last = self.clock.index
            last_timed = last > self.clock.warmup_steps and self.timed(last)  # in the session's timed steps
        if self._torch is not None:
            self._read_pg()
            self._read_ddp()
        for e in self._ddp:
            if e.finalizer is not None:
                e.finalizer.detach()  # the session is over: nothing more to read when the module goes
        cuda_device = None
        torch = self._torch or sys.modules.get("torch")
        if torch is not None:
            try:
                if torch.cuda.is_initialized():
                    cuda_device = f"cuda:{torch.cuda.current_device()}"
            except Exception:  # pragma: no cover
                pass
        return {
            "launch": launch_info(),
            "pg": dict(self.pg),
            "cuda_device": cuda_device,
            "totals": {k: list(v) for k, v in self.totals.items()},
            "phases": {k: dict(v) for k, v in self.phases.items()},
            "ddp": [{"forwards": e.forwards, "data": e.data, "sampled": len(e.samples),
                     "steady": [list(v) for step, *v in e.samples
                                if step > self.clock.warmup_steps and step != last and self.timed(step)]}
                    for e in self._ddp if e.forwards],
            "ddp_forwards": self.ddp_forwards,
            "last_step_timed": last_timed,
        }


class _DDPModule:
    """One DDP module the session saw: its grad-synchronizing forwards, the step each ran in, DDP's
    latest statistics and each sampled iteration's own times ``(step, comm, overlap, compute)`` in ms."""

    def __init__(self, module: Any):
        self.ref = weakref.ref(module)
        self.forwards = 0
        self.data: dict[str, Any] | None = None
        self.finalizer: Any = None
        self.steps: list[int] = []  # the step of the last two forwards
        self.samples: list[tuple[int, float, float, float]] = []
        self._iteration: Any = None

    def forward(self, step: int) -> None:
        self.forwards += 1
        self.steps = [*self.steps[-1:], step]

    def sampled_before(self) -> bool:
        """Whether DDP timed the previous iteration (its 1st-10th, then every 100th): it has just set
        its times, in this forward."""
        n = self.forwards - 1
        return n >= 1 and (n <= 10 or n % 100 == 0)

    def take_sample(self, module: Any) -> None:
        data = _ddp_data(module)
        if not data or "backward_comm_time" not in data:
            return
        self.data = data
        it = data.get("iteration")
        if it == self._iteration:  # nothing new was set (DDP's timer was not ready)
            return
        self._iteration = it
        ms = [data.get(k, 0) / 1e6 for k in ("backward_comm_time", "backward_compute_comm_overlap_time",
                                               "backward_compute_time")]
        self.samples.append((self.steps[0], *ms))


def _ddp_data(module: Any) -> dict[str, Any] | None:
    """The reducer's statistics DDP keeps about itself, from the module or its ``logger`` (None when
    this torch has none)."""
    get = getattr(module, "_get_ddp_logging_data", None)
    if get is None:
        return None
    try:
        data = get()
        if not isinstance(data, dict):  # the logger's own object: two maps (DDP's method merges them)
            data = {**dict(getattr(data, "strs_map", {})), **dict(getattr(data, "ints_map", {}))}
    except Exception:
        return None
    keep = ("avg_backward_comm_time", "avg_backward_compute_comm_overlap_time", "avg_backward_compute_time",
            "backward_comm_time", "backward_compute_comm_overlap_time", "backward_compute_time",
            "avg_forward_compute_time", "bucket_sizes", "rebuilt_bucket_sizes", "num_buckets_reduced", "bucket_cap_bytes",
            "total_parameter_size_bytes", "iteration", "backend_name", "module_name", "comm_hook", "gradient_as_bucket_view",
            "find_unused_parameters", "device_ids")
    return {k: data[k] for k in keep if k in data}


def _replace_everywhere(patcher: Patcher, replace: dict[int, tuple[Any, Any]]) -> None:
    """Set each new function wherever a module holds its original (one pass over the modules)."""
    for mod in list(sys.modules.values()):
        d = getattr(mod, "__dict__", None)
        if not isinstance(d, dict):
            continue
        for k, v in list(d.items()):
            e = replace.get(id(v))
            if e is not None and e[0] is v:
                patcher.set(mod, k, e[1])


# ---- the record's dist block --------------------------------------------------------------------------

def _bucket_bytes(value: Any) -> list[int]:
    if isinstance(value, str):
        return [int(x) for x in value.replace(",", " ").split() if x.strip().isdigit()]
    if isinstance(value, (list, tuple)):
        return [int(x) for x in value]
    if isinstance(value, int):
        return [value]
    return []


def ddp_block(modules: list[dict], forwards: int, n_timed: int) -> dict[str, Any] | None:
    """The record's ``dist.ddp``: DDP's reducer statistics, per step of this run."""
    if not modules:
        return None
    per_step = forwards / n_timed if n_timed else None
    steady = all(m.get("steady") for m in modules)
    out: dict[str, Any] = {
        "modules": len(modules),
        "forwards_per_step": round(per_step, 6) if per_step is not None else None,
        "source": "steady iterations" if steady else "DDP's average",
        "accounting": ("DDP's bucket all-reduces run in its C++ reducer during backward (segment learner); "
                       "their time is DDP's own measurement per backward (CUDA events on the GPU, the host clock "
                       "on the CPU) on the iterations DDP samples (1-10, then every 100th), times the "
                       "forwards per step that all-reduce; "
                       + ("averaged over the sampled iterations that ran in timed steady steps"
                          if steady else "DDP's own average over every sampled iteration (warm-up included: "
                          "no sampled iteration ran in a timed steady step)")),
    }
    comm = overlap = compute = 0.0
    measured = False
    buckets: list[int] = []
    for m in modules:
        data = m.get("data") or {}
        if steady:
            rows = m["steady"]
            measured = True
            comm += sum(r[0] for r in rows) / len(rows)
            overlap += sum(r[1] for r in rows) / len(rows)
            compute += sum(r[2] for r in rows) / len(rows)
            out["steady_iterations"] = out.get("steady_iterations", 0) + len(rows)
        elif "avg_backward_comm_time" in data:
            measured = True
            comm += data.get("avg_backward_comm_time", 0) / 1e6
            overlap += data.get("avg_backward_compute_comm_overlap_time", 0) / 1e6
            compute += data.get("avg_backward_compute_time", 0) / 1e6
        sizes = _bucket_bytes(data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes"))
        buckets += sizes
        for k in ("module_name", "bucket_cap_bytes", "total_parameter_size_bytes", "iteration", "comm_hook"):
            if k in data and len(modules) == 1:
                out[k] = data[k]
    out["buckets"] = len(buckets) if buckets else None
    out["bucket_bytes"] = buckets
    if measured:
        out["comm_ms_per_backward"] = round(comm, 6)
        out["overlap_ms_per_backward"] = round(overlap, 6)
        out["compute_ms_per_backward"] = round(compute, 6)
        if per_step is not None:
            out["comm_ms_per_step"] = round(comm * per_step, 6)
            out["exposed_comm_ms_per_step"] = round(max(0.0, comm - overlap) * per_step, 6)
    return out


def comm_block(totals: dict[str, list], phases: dict[str, dict[str, int]], n_timed: int) -> dict[str, Any] | None:
    """The record's ``dist.comm``: the collectives per timed steady step.

    Per op: ``calls_per_step``, ``async_per_step`` (of them with ``async_op=True``), ``bytes_per_step``
    (the tensors this rank sent), ``call_ms_per_step`` (host time inside the calls), ``waits_per_step``
    and ``wait_ms_per_step`` (host time inside ``Work.wait()``), and ``calls`` by phase over the whole
    run. The block's totals add the ops up; ``host_ms_per_step`` = calls + waits: the host time the
    step spent in communication."""
    if not totals and not phases:
        return None
    ops: dict[str, dict[str, Any]] = {}
    sums = {"calls_per_step": 0.0, "bytes_per_step": 0.0, "call_ms_per_step": 0.0, "waits_per_step": 0.0,
            "wait_ms_per_step": 0.0}
    for op in sorted(set(totals) | set(phases)):
        calls, call_s, nbytes, waits, wait_s, n_async = totals.get(op, [0, 0.0, 0, 0, 0.0, 0])
        e: dict[str, Any] = {"calls": {k: v for k, v in (phases.get(op) or {}).items() if v}}
        if n_timed:
            e.update({
                "calls_per_step": round(calls / n_timed, 6),
                "async_per_step": round(n_async / n_timed, 6),
                "bytes_per_step": round(nbytes / n_timed, 3),
                "call_ms_per_step": round(call_s * 1e3 / n_timed, 6),
                "waits_per_step": round(waits / n_timed, 6),
                "wait_ms_per_step": round(wait_s * 1e3 / n_timed, 6),
            })
            for k in sums:
                sums[k] += e[k]
        ops[op] = e
    out: dict[str, Any] = {"timed_steps": n_timed}
    if n_timed:
        out.update({k: round(v, 6) for k, v in sums.items()})
        out["host_ms_per_step"] = round(sums["call_ms_per_step"] + sums["wait_ms_per_step"], 6)
    out["ops"] = ops
    return out


def dist_record(raw: dict[str, Any] | None, n_timed: int, env_device: Any = None, host: str | None = None) -> dict[str, Any]:
    """The record's ``dist`` block (:data:`perfkit.dist.DIST_KEYS`) from :meth:`CommCollector.snapshot`
    and the number of timed steady steps (the last one among them is left out of the per-step
    figures); ``{}`` without a snapshot."""
    from perfkit.dist import physical_gpu

    if not raw:
        return {}
    if raw.get("last_step_timed") and n_timed:
        n_timed -= 1  # the per-step figures are over the complete steps (module doc)
    launch = dict(raw.get("launch") or {})
    pg = raw.get("pg") or {}
    out: dict[str, Any] = {
        "rank": pg.get("rank", launch.get("rank", 0)),
        "local_rank": launch.get("local_rank"),
        "world_size": pg.get("world_size", launch.get("world_size", 1)),
        "local_world_size": launch.get("local_world_size"),
        "node": launch.get("node", 0),
        "host": host,
        "backend": pg.get("backend"),
    }
    device = str(env_device) if env_device else raw.get("cuda_device") or "cpu"
    if device == "cuda":
        device = raw.get("cuda_device") or "cuda:0"
    out["device"] = device
    out["visible_devices"] = launch.get("visible_devices")
    out["physical_gpu"] = physical_gpu(device, launch.get("visible_devices"))
    for k in ("launcher", "run_id", "master"):
        out[k] = launch.get(k)
    out["complete_steps"] = n_timed  # the timed steps the per-step figures below are over: the first n of step_times_ms
    comm = comm_block(raw.get("totals") or {}, raw.get("phases") or {}, n_timed)
    if comm:
        out["comm"] = comm
    ddp = ddp_block(raw.get("ddp") or [], raw.get("ddp_forwards", 0), n_timed)
    if ddp:
        out["ddp"] = ddp
    return out


__all__ = ["COLLECTIVES", "COMM", "CommCollector", "comm_block", "ddp_block", "dist_record"]

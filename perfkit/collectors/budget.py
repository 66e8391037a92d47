"""Budgets: fail when a block of code (or a profiled run) makes more syncs or allocations than allowed.

From Python (works with or without a profiling session around it)::

    with perfkit.budget(syncs=0, allocs=0):
        env.step(actions)

raises :class:`BudgetExceeded` on exit when the block went over, listing each offending site
(``path:line  op  ×count``). On a CPU-only machine sync calls on CPU tensors count as
would-sync-on-GPU, which is what makes sync-free unit tests meaningful in CI.

From the command line ``perfkit profile --max-syncs-per-step N --max-allocs-per-step N`` checks the
run record with :func:`perfkit.analysis.budgets.check_run` and exits with status 2.
"""

from __future__ import annotations

import dataclasses

from perfkit.collectors import hub
from perfkit.source import relpath


@dataclasses.dataclass
class Site:
    kind: str
    op: str
    path: str
    line: int
    count: float
    function: str = ""
    would_sync_on_gpu: bool = False

    def __str__(self) -> str:
        n = f"{self.count:g}"
        where = f" in {self.function}()" if self.function else ""
        wg = " (would sync on GPU)" if self.would_sync_on_gpu else ""
        return f"{self.path}:{self.line}  {self.kind} {self.op} x{n}{where}{wg}"


class BudgetExceeded(AssertionError):
    """A block or run made more syncs/allocations than its budget. ``sites`` lists the offenders."""

    def __init__(self, message: str, sites: list[Site]):
        super().__init__(message)
        self.sites = sites


def _format(what: str, over: list[tuple[str, float, int]], sites: list[Site]) -> str:
    head = "; ".join(f"{n:g} {k}{what} > budget {b}" for k, n, b in over)
    lines = [f"perfkit budget exceeded: {head}"]
    lines += [f"  {s}" for s in sites]
    return "\n".join(lines)


class budget:
    """Context manager: at most ``syncs`` sync calls and ``allocs`` tensor allocations in the block.

    ``None`` leaves a kind unchecked. ``count_cpu_tensors`` (default: when this machine has no CUDA)
    counts sync calls on CPU tensors as would-sync-on-GPU. After the block, ``.syncs``, ``.allocs`` and
    ``.sites`` hold what was counted, whether or not it raised."""

    def __init__(self, syncs: int | None = None, allocs: int | None = None, *, count_cpu_tensors: bool | None = None):
        for name, v in (("syncs", syncs), ("allocs", allocs)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise ValueError(f"budget({name}=...) must be a non-negative int or None, got {v!r}")
        self.max_syncs = syncs
        self.max_allocs = allocs
        self._count_cpu = count_cpu_tensors
        self._sink = hub.Sink()
        self._mode = None
        self.sites: list[Site] = []
        self.syncs = 0
        self.allocs = 0

    def __enter__(self) -> "budget":
        hub.acquire(self._sink, self._count_cpu)
        if self.max_allocs is not None:
            import torch  # noqa: F401  (the mode needs torch)
            from perfkit.collectors.alloc import alloc_mode

            self._mode = alloc_mode()
            self._mode.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            if self._mode is not None:
                self._mode.__exit__(None, None, None)
        finally:
            hub.release(self._sink)
        self.sites = sites_from_counts(self._sink.counts)
        self.syncs = self._sink.total("sync")
        self.allocs = self._sink.total("alloc")
        if exc_type is not None:
            return False  # the block's own exception wins
        over = []
        if self.max_syncs is not None and self.syncs > self.max_syncs:
            over.append(("sync", self.syncs, self.max_syncs))
        if self.max_allocs is not None and self.allocs > self.max_allocs:
            over.append(("alloc", self.allocs, self.max_allocs))
        if over:
            kinds = {k for k, _, _ in over}
            bad = [s for s in self.sites if s.kind in kinds]
            raise BudgetExceeded(_format("s", [(k, n, b) for k, n, b in over], bad), bad)
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with budget(self.max_syncs, self.max_allocs, count_cpu_tensors=self._count_cpu):
                return fn(*args, **kwargs)

        return wrapper


def sites_from_counts(counts: dict) -> list[Site]:
    out = [
        Site(kind=k[0], op=k[1], path=relpath(k[2]), line=k[3], count=c[0], function=k[4], would_sync_on_gpu=k[6])
        for k, c in counts.items()
    ]
    out.sort(key=lambda s: (s.kind, -s.count, s.path, s.line))
    return out

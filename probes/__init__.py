"""Micro-benchmarks of the platform's primitive costs (``perfkit.probes``; in the repository they sit
at the top, in ``probes/``, and the wheel installs them as ``perfkit.probes``).

One small module per probe, each with ``measure(quick=False) -> dict`` and a ``__main__`` that prints
the dict as JSON (``python -m perfkit.probes.sync --quick``). This registry names them for ``perfkit probe``
and the machine cost profile (:mod:`perfkit.pricing.machine_profile`), which turns their numbers into the
prices the cost model (:mod:`perfkit.pricing.cost`) puts on each finding.

A probe's dict always has ``status``: ``ok``, ``partial`` (some numbers cannot be measured here; they
are listed with the reason under ``unavailable``) or ``unavailable`` (with ``reason``): on a CPU-only
machine the CPU-meaningful probes run and the rest say so.
"""

from __future__ import annotations

import importlib
import time
from typing import Any, Callable, Iterable

PROBES: dict[str, str] = {
    "sync": "host-device sync round trip, idle and behind a queue of kernels",
    "launch": "kernel launch overhead: torch op, Warp launch, CUDA-graph replay per kernel",
    "allocator": "caching-allocator hit vs cudaMalloc",
    "copies": "D2H/H2D latency and bandwidth, pageable vs pinned, by size",
    "markers": "NVTX range and CUDA-event cost",
    "interop": "Warp<->torch to_torch/from_torch cost",
    "pyloop": "Python per-env loop of small torch ops vs one batched op",
}
"""Probe name -> what it measures; the module is ``perfkit.probes.<name>``."""


class UnknownProbe(KeyError):
    def __str__(self) -> str:
        return f"unknown probe {self.args[0]!r}; known: {', '.join(PROBES)}"


def get(name: str) -> Callable[..., dict[str, Any]]:
    """The ``measure`` function of probe ``name``."""
    if name not in PROBES:
        raise UnknownProbe(name)
    return importlib.import_module(f"{__name__}.{name}").measure


def run(name: str, quick: bool = False) -> dict[str, Any]:
    """Run one probe. A probe that raises is reported as ``{"status": "error", "reason": ...}`` so one
    broken measurement never loses the others; ``seconds`` and ``quick`` are added."""
    measure = get(name)
    t0 = time.perf_counter()
    try:
        result = measure(quick=quick)
    except Exception as e:  # a probe failing is a result to report, not a crash of the whole profile
        result = {"status": "error", "reason": f"{type(e).__name__}: {e}"}
    result["seconds"] = round(time.perf_counter() - t0, 3)
    result["quick"] = bool(quick)
    return result


def run_all(quick: bool = False, only: Iterable[str] | None = None,
            progress: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
    """Run the named probes (all by default), in registry order."""
    names = list(PROBES) if only is None else list(only)
    for name in names:
        if name not in PROBES:
            raise UnknownProbe(name)
    results = {}
    for name in names:
        if progress is not None:
            progress(name)
        results[name] = run(name, quick=quick)
    return results

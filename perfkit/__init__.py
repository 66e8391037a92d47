"""perfkit: performance profiling and diagnostics for GPU-batched RL environments.

Public API: ``segment``, ``step``, ``budget``, ``hot``, ``Run``, ``BudgetExceeded``.
Heavy modules (torch hooks) are imported on first use, so ``import perfkit`` stays cheap.
"""

from __future__ import annotations

from time import perf_counter as _perf_counter

IMPORTED_AT = _perf_counter()  # ``perfkit profile``'s own start-up counts from here (the record's self block)

import sys  # noqa: E402

from perfkit._layout import load_checkout_probes as _load_checkout_probes  # noqa: E402
from perfkit.record import Finding, RecordError, Run, SegmentStats

__version__ = "0.1.0"

_load_checkout_probes(sys.modules[__name__])

_LAZY = {
    "segment": "perfkit.collectors.segments",
    "step": "perfkit.profile.session",
    "budget": "perfkit.collectors.budget",
    "BudgetExceeded": "perfkit.collectors.budget",
    "Session": "perfkit.profile.session",
}


def hot(fn):
    """Mark a function as a hot path for ``perfkit lint`` (it is returned unchanged)."""
    return fn


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'perfkit' has no attribute {name!r}")


__all__ = ["segment", "step", "budget", "hot", "Run", "BudgetExceeded", "Finding", "SegmentStats", "RecordError", "Session"]

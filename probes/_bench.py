"""Shared timing helpers for the probes: repeat-and-median timers, CUDA presence, result shapes.

Every probe returns a plain dict: ``{"status": "ok" | "partial" | "unavailable", "device": ..., ...}``.
``partial`` means some numbers could not be measured here (listed with the reason in ``"unavailable"``);
``unavailable`` carries only ``"reason"``. Times are in microseconds (keys end in ``_us``), bandwidths in
GB/s (``_gbps``), so a reader never guesses a unit.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any, Callable

STATUSES = ("ok", "partial", "unavailable")


def unavailable(reason: str) -> dict[str, Any]:
    return {"status": "unavailable", "reason": reason}


def finish(result: dict[str, Any], missing: dict[str, str]) -> dict[str, Any]:
    """Set ``status`` from what could not be measured (``missing``: metric -> reason)."""
    if missing:
        result["status"] = "partial"
        result["unavailable"] = dict(missing)
    else:
        result["status"] = "ok"
    return result


def cuda_reason() -> str | None:
    """None when CUDA is usable, else why not (without initializing anything on a CPU machine)."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device (CPU-only machine)"
    return None


def warp_reason() -> str | None:
    try:
        import warp  # noqa: F401
    except ImportError:
        return "warp-lang is not installed"
    return None


def warp_init():
    """Import and initialize Warp quietly (its banner would corrupt a probe's JSON on stdout)."""
    import contextlib

    import warp as wp

    wp.config.log_level = getattr(wp, "LOG_WARNING", 30)
    with contextlib.redirect_stdout(sys.stderr):
        wp.init()
    return wp


def repeats(quick: bool, full: int = 7, fast: int = 3) -> int:
    return fast if quick else full


def per_call_us(fn: Callable[[], Any], n: int, reps: int, *, before: Callable[[], Any] | None = None,
                after: Callable[[], Any] | None = None, warmup: int = 3) -> float:
    """Median over ``reps`` batches of the wall time of ``n`` calls of ``fn``, per call, in µs.

    ``before`` runs untimed ahead of each batch (e.g. drain the GPU); ``after`` runs inside the timed
    region at the end of each batch (e.g. ``torch.cuda.synchronize`` so queued work is counted).
    """
    for _ in range(warmup):
        fn()
    if after is not None:
        after()
    samples = []
    for _ in range(reps):
        if before is not None:
            before()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if after is not None:
            after()
        samples.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(samples)


def median_us(fn: Callable[[], float], reps: int) -> float:
    """Median of ``reps`` calls of ``fn``, which returns one sample in µs."""
    return statistics.median(fn() for _ in range(reps))


def rounded(d: Any, digits: int = 4) -> Any:
    """Round floats (recursively) to ``digits`` significant digits for a readable profile."""
    if isinstance(d, float):
        return float(f"{d:.{digits}g}")
    if isinstance(d, dict):
        return {k: rounded(v, digits) for k, v in d.items()}
    if isinstance(d, list):
        return [rounded(v, digits) for v in d]
    return d


def main(measure: Callable[..., dict[str, Any]], argv: list[str] | None = None) -> int:
    """The ``__main__`` of every probe: ``python -m perfkit.probes.NAME [--quick]`` prints its numbers as JSON."""
    name = measure.__module__.rsplit(".", 1)[-1]
    parser = argparse.ArgumentParser(prog=f"python -m perfkit.probes.{name}", description=(measure.__doc__ or "").strip())
    parser.add_argument("--quick", action="store_true", help="few iterations (CI mode)")
    args = parser.parse_args(argv)
    result = measure(quick=args.quick)
    json.dump(rounded(result), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0

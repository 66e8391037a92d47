"""Host<->device copies: latency and bandwidth, pageable vs pinned host memory, by size.

For each size and direction (``d2h``, ``h2d``) and host memory kind (``pageable``, ``pinned``): the
median wall time of one ``dst.copy_(src)`` into a preallocated buffer, drained (``us``), and the
bandwidth it implies (``gbps``). ``latency_us`` is the smallest size's time (a 4-byte copy: what a
``.cpu()`` of a scalar pays on top of the sync). CUDA only.
"""

from __future__ import annotations

import time
from typing import Any

from perfkit.probes._bench import cuda_reason, finish, main, repeats, unavailable

SIZES = (4, 4 << 10, 256 << 10, 4 << 20, 64 << 20)
QUICK_SIZES = (4, 64 << 10, 4 << 20)


def _copy_us(dst, src, n: int, reps: int) -> float:
    import statistics

    import torch

    non_blocking = dst.is_pinned() or src.is_pinned()
    for _ in range(2):
        dst.copy_(src, non_blocking=non_blocking)
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            dst.copy_(src, non_blocking=non_blocking)
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(samples)


def measure(quick: bool = False) -> dict[str, Any]:
    """D2H/H2D bandwidth and latency, pageable vs pinned, by size."""
    reason = cuda_reason()
    if reason is not None:
        return unavailable(reason)
    import torch

    reps = repeats(quick)
    rows = []
    for size in QUICK_SIZES if quick else SIZES:
        dev_buf = torch.empty(size, dtype=torch.uint8, device="cuda")
        n = 3 if size >= (4 << 20) else (10 if quick else 50)
        for memory in ("pageable", "pinned"):
            host = torch.empty(size, dtype=torch.uint8, pin_memory=(memory == "pinned"))
            for direction, (dst, src) in (("d2h", (host, dev_buf)), ("h2d", (dev_buf, host))):
                us = _copy_us(dst, src, n, reps)
                rows.append({"direction": direction, "memory": memory, "bytes": size, "us": us,
                             "gbps": size / (us * 1e-6) / 1e9})
    smallest = min(r["bytes"] for r in rows)
    largest = max(r["bytes"] for r in rows)
    result: dict[str, Any] = {"device": torch.cuda.get_device_name(), "copies": rows}
    for r in rows:
        key = f"{r['direction']}_{r['memory']}"
        if r["bytes"] == smallest:
            result[f"{key}_latency_us"] = r["us"]
        if r["bytes"] == largest:
            result[f"{key}_gbps"] = r["gbps"]
    return finish(result, {})


if __name__ == "__main__":
    raise SystemExit(main(measure))

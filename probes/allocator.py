"""Allocation cost: a caching-allocator hit vs a real ``cudaMalloc``, by size.

* ``cpu_empty_us`` — ``torch.empty`` of a small CPU tensor (host allocator + tensor bookkeeping; on a
  CPU-only machine the cost of a fresh tensor in the step loop).
* ``sizes`` — per size (bytes): ``cached_us``, a ``torch.empty(..., device="cuda")`` + free served
  from torch's cache; ``cudamalloc_us``, the same after ``torch.cuda.empty_cache()`` handed the
  block back, so the allocator must call ``cudaMalloc``; ``empty_cache_us``, the ``cudaFree``
  of that block. CUDA only.
* ``cached_alloc_us`` / ``cudamalloc_us`` — the smallest size's numbers, the ones the cost model uses.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from perfkit.probes._bench import cuda_reason, finish, main, per_call_us, repeats

SIZES = (4 << 10, 1 << 20, 64 << 20)
QUICK_SIZES = (4 << 10, 1 << 20)


def measure(quick: bool = False) -> dict[str, Any]:
    """Caching-allocator hit vs cudaMalloc cost."""
    import torch

    reps = repeats(quick)
    result: dict[str, Any] = {
        "cpu_empty_us": per_call_us(lambda: torch.empty(256), n=50 if quick else 2000, reps=reps)
    }
    reason = cuda_reason()
    if reason is not None:
        result["device"] = "cpu"
        return finish(result, {k: reason for k in ("sizes", "cached_alloc_us", "cudamalloc_us")})

    dev = torch.device("cuda")
    result["device"] = torch.cuda.get_device_name(dev)
    sync = torch.cuda.synchronize
    sizes = []
    for size in QUICK_SIZES if quick else SIZES:
        cached = per_call_us(lambda: torch.empty(size, dtype=torch.uint8, device=dev),
                             n=20 if quick else 500, reps=reps)
        fresh, freed = [], []
        for _ in range(reps * (2 if quick else 5)):
            torch.cuda.empty_cache()
            sync()
            t0 = time.perf_counter()
            t = torch.empty(size, dtype=torch.uint8, device=dev)
            fresh.append((time.perf_counter() - t0) * 1e6)
            del t
            t0 = time.perf_counter()
            torch.cuda.empty_cache()
            freed.append((time.perf_counter() - t0) * 1e6)
        sizes.append({"bytes": size, "cached_us": cached, "cudamalloc_us": statistics.median(fresh),
                      "empty_cache_us": statistics.median(freed)})
    result["sizes"] = sizes
    result["cached_alloc_us"] = sizes[0]["cached_us"]
    result["cudamalloc_us"] = sizes[0]["cudamalloc_us"]
    return finish(result, {})


if __name__ == "__main__":
    raise SystemExit(main(measure))

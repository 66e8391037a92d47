"""Host-device sync round trip: what one ``.item()`` costs with an idle queue and behind queued kernels.

* ``item_idle_us`` — ``x.item()`` on a CUDA scalar with nothing queued: launch of the 4-byte D2H copy,
  the stream wait, the return. The floor of every sync.
* ``synchronize_idle_us`` — ``torch.cuda.synchronize()`` with nothing queued.
* ``behind_queue`` — ``x.item()`` right after a known amount of GPU work (a ``torch.cuda._sleep`` spin
  kernel and a run of small kernels): ``wall_us`` is launch → value on the host, ``gpu_us`` the queued
  work's own GPU time (CUDA events), ``extra_us = wall_us - gpu_us`` what the sync adds on top of the
  work it drains.
* ``tensor_repr_us`` — ``str(t)`` of a small CPU tensor: the host half of ``print(t)`` (measured on
  every machine; on CUDA ``print(t)`` pays a sync on top).
"""

from __future__ import annotations

import time
from typing import Any

from perfkit.probes._bench import cuda_reason, finish, main, per_call_us, repeats


def _repr_us(quick: bool) -> float:
    import torch

    t = torch.arange(16, dtype=torch.float32).reshape(4, 4)
    return per_call_us(lambda: str(t), n=20 if quick else 200, reps=repeats(quick))


def measure(quick: bool = False) -> dict[str, Any]:
    """Host-device sync round trip, idle and behind a queue of kernels."""
    import torch

    result: dict[str, Any] = {"tensor_repr_us": _repr_us(quick)}
    reason = cuda_reason()
    if reason is not None:
        result["device"] = "cpu"
        return finish(result, {k: reason for k in ("item_idle_us", "synchronize_idle_us", "behind_queue",
                                                    "item_behind_queue_extra_us")})

    dev = torch.device("cuda")
    result["device"] = torch.cuda.get_device_name(dev)
    reps = repeats(quick)
    n = 50 if quick else 1000
    x = torch.zeros((), device=dev)
    torch.cuda.synchronize()
    result["item_idle_us"] = per_call_us(lambda: x.item(), n=n, reps=reps)
    result["synchronize_idle_us"] = per_call_us(torch.cuda.synchronize, n=n, reps=reps)

    # Behind a queue: a spin kernel of known length, then a run of small kernels.
    buf = torch.zeros(1 << 16, device=dev)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    queues = []
    for label, kernels in (("spin_50k_cycles", None), ("100_small_kernels", 100)):
        samples = []
        for _ in range(reps + 1):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            start.record()
            if kernels is None:
                torch.cuda._sleep(50_000)  # 50k cycles of spinning (~25-50 µs); its GPU time is measured
            else:
                for _ in range(kernels):
                    buf.add_(1.0)
            end.record()
            launched = (time.perf_counter() - t0) * 1e6
            x.item()
            wall = (time.perf_counter() - t0) * 1e6
            gpu = start.elapsed_time(end) * 1e3  # GPU timeline span: includes gaps while the host launched
            samples.append((wall, gpu, launched))
        samples = samples[1:]  # the first one pays lazy init
        samples.sort()
        wall, gpu, launched = samples[len(samples) // 2]
        queues.append({"queue": label, "wall_us": wall, "gpu_us": gpu, "host_launch_us": launched,
                       "extra_us": wall - gpu})
    result["behind_queue"] = queues
    # The single number the cost model uses for "a sync with a full queue": the smallest extra.
    result["item_behind_queue_extra_us"] = max(0.0, min(q["extra_us"] for q in queues))
    return finish(result, {})


if __name__ == "__main__":
    raise SystemExit(main(measure))

"""Kernel launch overhead: a small torch op, a Warp launch, and a kernel replayed from a CUDA graph.

* ``torch_op_us`` — host time to issue ``x.add_(1)`` on a small tensor (on a CPU-only machine this is
  the whole op: dispatch plus a tiny computation; on CUDA the launch only, the GPU runs behind).
* ``torch_op_synced_us`` — the same with the queue drained at the end of each batch (CUDA only): the
  larger of the launch rate and the GPU's per-kernel time.
* ``warp_launch_us`` — host time of ``wp.launch`` of a one-thread kernel (on ``cuda:0`` or ``cpu``).
* ``graph_replay_us_per_kernel`` / ``graph_launch_us`` — a CUDA graph of ``graph_kernels`` small
  kernels: per-kernel time of a replay (drained) and host time of one ``replay()`` call (CUDA only).
  ``graph_speedup`` = ``torch_op_synced_us / graph_replay_us_per_kernel``.
"""

from __future__ import annotations

from typing import Any

from perfkit.probes._bench import cuda_reason, finish, main, per_call_us, repeats, warp_init, warp_reason

GRAPH_KERNELS = 100


def _warp_launch_us(device: str, quick: bool) -> float:
    import contextlib
    import sys

    wp = warp_init()

    @wp.kernel
    def _bump(a: wp.array(dtype=wp.float32)):  # noqa: F821 - warp type annotations
        i = wp.tid()
        a[i] = a[i] + 1.0

    a = wp.zeros(1, dtype=wp.float32, device=device)
    with contextlib.redirect_stdout(sys.stderr):  # compiles (cached in the kernel cache)
        wp.launch(_bump, dim=1, inputs=[a], device=device)
    wp.synchronize_device(device)
    us = per_call_us(lambda: wp.launch(_bump, dim=1, inputs=[a], device=device),
                     n=50 if quick else 2000, reps=repeats(quick))
    wp.synchronize_device(device)
    return us


def measure(quick: bool = False) -> dict[str, Any]:
    """Kernel launch overhead: torch op, Warp launch, CUDA-graph replay per kernel."""
    import torch

    missing: dict[str, str] = {}
    reason = cuda_reason()
    dev = torch.device("cuda" if reason is None else "cpu")
    result: dict[str, Any] = {"device": "cpu" if reason else torch.cuda.get_device_name(dev)}
    reps = repeats(quick)
    n = 50 if quick else 2000
    x = torch.zeros(16, device=dev)
    result["torch_op_us"] = per_call_us(lambda: x.add_(1.0), n=n, reps=reps)

    wreason = warp_reason()
    if wreason is None:
        result["warp_launch_us"] = _warp_launch_us("cuda:0" if reason is None else "cpu", quick)
    else:
        missing["warp_launch_us"] = wreason

    if reason is not None:
        for k in ("torch_op_synced_us", "graph_replay_us_per_kernel", "graph_launch_us", "graph_speedup"):
            missing[k] = reason
        return finish(result, missing)

    sync = torch.cuda.synchronize
    result["torch_op_synced_us"] = per_call_us(lambda: x.add_(1.0), n=n, reps=reps, before=sync, after=sync)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm up on a side stream, as torch's graph docs ask
        for _ in range(3):
            x.add_(1.0)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(GRAPH_KERNELS):
            x.add_(1.0)
    replays = 5 if quick else 100
    per_replay = per_call_us(graph.replay, n=replays, reps=reps, before=sync, after=sync)
    result["graph_kernels"] = GRAPH_KERNELS
    result["graph_replay_us_per_kernel"] = per_replay / GRAPH_KERNELS
    result["graph_launch_us"] = per_call_us(graph.replay, n=1, reps=max(reps, 5), before=sync, after=None)
    sync()
    result["graph_speedup"] = result["torch_op_synced_us"] / max(result["graph_replay_us_per_kernel"], 1e-9)
    return finish(result, missing)


if __name__ == "__main__":
    raise SystemExit(main(measure))

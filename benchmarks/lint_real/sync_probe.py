"""Which index writes and Warp calls make the host wait for the GPU (run on a CUDA machine; not a test).

For each statement: queue ~50 ms of GPU work (``torch.cuda._sleep``), run the statement, and time how long
the host took to get past it. A statement that synchronizes waits for the queued work (host time ~ the sleep);
one that does not returns in microseconds. ``torch.cuda.set_sync_debug_mode`` is cross-checked.

    python benchmarks/lint_real/sync_probe.py            # prints one line per statement, writes nothing
"""

from __future__ import annotations

import time

import torch

N = 1 << 20
CASES = {
    "x[5] = 0.0": "x[5] = 0.0",
    "x[:, 0] = 0.0": "x2[:, 0] = 0.0",
    "x[2:9] = 1.0": "x[2:9] = 1.0",
    "x[:] = 0.0": "x[:] = 0.0",
    "x[...] = 0": "x[...] = 0",
    "x[idx] = 0.0 (long tensor)": "x[idx] = 0.0",
    "x[idx, 1] = 0.0": "x2[idx, 1] = 0.0",
    "x[mask] = 0.0": "x[mask] = 0.0",
    "x[mask] = t (tensor)": "x[mask] = y[mask]",
    "x[idx] = t (tensor)": "x[idx] = y[idx]",
    "x[idx] = s (0-dim cuda)": "x[idx] = s",
    "x[5] = s (0-dim cuda)": "x[5] = s",
    "x[mask] = s (0-dim cuda)": "x[mask] = s",
    "x.masked_fill_(mask, 0.0)": "x.masked_fill_(mask, 0.0)",
    "x.index_fill_(0, idx, 0.0)": "x.index_fill_(0, idx, 0.0)",
    "x.fill_(0.0)": "x.fill_(0.0)",
    "x[idx] += 1.0": "x[idx] += 1.0",
    "x[mask] += 1.0": "x[mask] += 1.0",
    "x += 1.0": "x += 1.0",
    "x.index_put_((idx,), v)": "x.index_put_((idx,), y[idx])",
}


def main():
    assert torch.cuda.is_available(), "needs a CUDA GPU"
    dev = torch.device("cuda")
    x = torch.zeros(N, device=dev)
    x2 = torch.zeros(N // 4, 4, device=dev)
    y = torch.ones(N, device=dev)
    idx = torch.arange(0, N // 4, 7, device=dev)
    mask = torch.zeros(N, dtype=torch.bool, device=dev)
    mask[::3] = True
    s = torch.tensor(3.0, device=dev)
    cycles = 50_000_000  # ~25-50 ms at H200 clocks
    env = dict(x=x, x2=x2, y=y, idx=idx, mask=mask, s=s, torch=torch)
    for stmt in CASES.values():  # warm up (allocator, kernels)
        exec(stmt, env)
    torch.cuda.synchronize()
    torch.cuda._sleep(cycles)
    t0 = time.perf_counter()
    torch.cuda.synchronize()
    sleep_s = time.perf_counter() - t0
    print(f"reference sleep: {sleep_s * 1e3:.1f} ms")
    for name, stmt in CASES.items():
        times = []
        for _ in range(3):
            torch.cuda.synchronize()
            torch.cuda._sleep(cycles)
            t0 = time.perf_counter()
            exec(stmt, env)
            times.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            exec(stmt, env)
            debug = "quiet"
        except RuntimeError:
            debug = "sync-debug error"
        finally:
            torch.cuda.set_sync_debug_mode("default")
        host = min(times)
        verdict = "SYNC" if host > 0.5 * sleep_s else "async"
        print(f"{verdict:5s} host {host * 1e3:7.2f} ms  {debug:16s}  {name}")
    try:
        import warp as wp

        wp.init()
        for stmt in ("wp.zeros(1024, dtype=float, device='cuda:0')", "wp.empty(1024, dtype=float, device='cuda:0')",
                     "wp.clone(a)", "wp.array(np.ones(1024, dtype=np.float32), device='cuda:0')"):
            import numpy as np

            a = wp.zeros(1024, dtype=float, device="cuda:0")
            wenv = dict(wp=wp, np=np, a=a)
            exec(stmt, wenv)
            torch.cuda.synchronize()
            times = []
            for _ in range(3):
                torch.cuda._sleep(cycles)
                t0 = time.perf_counter()
                exec(stmt, wenv)
                times.append(time.perf_counter() - t0)
                torch.cuda.synchronize()
            host = min(times)
            print(f"{'SYNC' if host > 0.5 * sleep_s else 'async':5s} host {host * 1e3:7.2f} ms  warp  {stmt}")
    except ImportError:
        print("warp not installed: Warp allocations not probed")


if __name__ == "__main__":
    main()

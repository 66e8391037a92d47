"""Does torch's own sync detection agree with the CUDA runtime, op by op? (issue 23, item 1)

For each op class, run it N times on the GPU and count, side by side:

* ``warned``   — warnings torch raises with ``torch.cuda.set_sync_debug_mode("warn")`` (one per synchronizing
  call torch makes: ``memcpy_and_sync``, ``stream_synchronize``, ...), caught by a ``warnings.showwarning``
  override, with the file and line the warning names (must be the calling Python line);
* ``runtime``  — the CUDA runtime's own sync calls under torch.profiler (CUPTI): ``cudaStreamSynchronize``,
  ``cudaDeviceSynchronize``, ``cudaEventSynchronize``, ``cudaMemcpy`` (blocking), ``cudaMemcpyAsync`` followed by
  a sync, counted once per call (CPU-side events only).

If the two agree for every op class, perfkit can count syncs from the runtime itself on CUDA, with Python
hooks only where an op's label is wanted. It also times a warning (the cost of one counted sync) and checks
what a sync inside autograd's backward (run on the engine's own thread) does.

    python3 scripts/gpu/sync_debug_check.py --out DIR      # on a CUDA machine; writes DIR/sync_debug.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

SYNC_API = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")


def cases(torch, np):
    dev = "cuda"
    x = torch.randn(4096, device=dev)
    m = x > 0
    idx = torch.arange(0, 100, device=dev)
    pinned = torch.empty(4096, pin_memory=True)
    host = torch.randn(4096)
    nidx = np.arange(0, 100)
    y2 = torch.randn(64, 8, device=dev)
    loc = torch.zeros(256, 4, device=dev)
    scale = torch.ones(256, 4, device=dev)
    return {
        "item": lambda: x[0].item(),
        "cpu": lambda: x.cpu(),
        "bool": lambda: bool(x[0] > 0),
        "nonzero": lambda: x.nonzero(),
        "mask_read": lambda: x[m],
        "list_index": lambda: x[[1, 2, 3]],
        "numpy_index": lambda: x[nidx],
        "tensor_index_read": lambda: x[idx],
        "slice_read": lambda: x[1:100],
        "int_read": lambda: x[5],
        "scalar_write_idx": lambda: x.__setitem__(idx, 0.0),
        "scalar_write_int": lambda: x.__setitem__(5, 0.0),
        "scalar_write_row": lambda: y2.__setitem__(5, 0.0),
        "mask_fill": lambda: x.__setitem__(m, 0.0),
        "mask_write_tensor": lambda: x.__setitem__(m, torch.zeros((), device=dev)),
        "to_same_device": lambda: x.to(dev),
        "to_cpu_nonblocking_pinned": lambda: pinned.copy_(x, non_blocking=True),
        "h2d_pageable": lambda: host.to(dev),
        "h2d_pinned_nonblocking": lambda: pinned.to(dev, non_blocking=True),
        "tensor_list_cuda": lambda: torch.tensor([1.0, 2.0, 3.0], device=dev),
        "tensor_empty_cuda": lambda: torch.tensor([], device=dev),
        "where_1arg": lambda: torch.where(m),
        "where_3arg": lambda: torch.where(m, x, 0.0),
        "unique": lambda: torch.unique(idx),
        "masked_select": lambda: torch.masked_select(x, m),
        "repeat_interleave": lambda: torch.repeat_interleave(idx, 2),
        "normal_validate": lambda: torch.distributions.Normal(loc, scale).log_prob(loc),
        "clip_grad_nonfinite": None,  # filled below (needs a parameter with a grad)
        "cuda_synchronize": lambda: torch.cuda.synchronize(),
        "event_synchronize": None,
        "tolist": lambda: idx[:4].tolist(),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--n", type=int, default=20)
    a = ap.parse_args()
    import numpy as np
    import torch
    if not torch.cuda.is_available():
        print("sync_debug_check: needs CUDA", file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    from torch.profiler import ProfilerActivity, profile

    c = cases(torch, np)
    p = torch.nn.Parameter(torch.randn(64, device="cuda"))
    p.grad = torch.randn(64, device="cuda")
    c["clip_grad_nonfinite"] = lambda: torch.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    ev = torch.cuda.Event()
    ev.record()
    c["event_synchronize"] = lambda: ev.synchronize()

    seen: list[tuple[str, int, str]] = []
    orig_show = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if "synchronizing" in str(message):
            seen.append((filename, lineno, str(message)[:80]))
            return
        return orig_show(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    warnings.filterwarnings("always", message=".*synchroniz.*")
    here = os.path.abspath(__file__)
    rows = []
    for name, fn in c.items():
        for _ in range(3):
            fn()  # warm-up (first-call allocations, lazy init)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("warn")
        seen.clear()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(a.n):
                fn()
        torch.cuda.set_sync_debug_mode(0)
        torch.cuda.synchronize()
        api = {}
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CPU and any(e.name.startswith(s) for s in SYNC_API):
                api[e.name] = api.get(e.name, 0) + 1
        # cudaMemcpyAsync DtoH is followed by a cudaStreamSynchronize (memcpy_and_sync): count the sync calls
        runtime = sum(v for k, v in api.items() if k != "cudaMemcpyAsync")
        where = sorted({f"{os.path.basename(f)}:{ln}" for f, ln, _ in seen})
        rows.append({"op": name, "n": a.n, "warned": len(seen), "runtime": runtime, "api": api,
                     "warned_at": where, "at_caller": all(f == here for f, _, _ in seen) if seen else None})
        print(f"{name:28s} warned/call {len(seen) / a.n:5.2f}  runtime/call {runtime / a.n:5.2f}  {api}  {where[:3]}",
              flush=True)
    # cost of one counted sync: .item() with and without the warning path
    x = torch.randn(16, device="cuda")
    for mode in (0, "warn", 0, "warn"):
        torch.cuda.set_sync_debug_mode(mode)
        t0 = time.perf_counter()
        for _ in range(2000):
            x[0].item()
        dt = (time.perf_counter() - t0) / 2000 * 1e6
        print(f"item() with sync_debug_mode={mode!r}: {dt:.2f} us/call")
        rows.append({"op": f"cost:item:{mode}", "us_per_call": dt})
    torch.cuda.set_sync_debug_mode(0)
    # a sync in backward (autograd's device thread): does the warning reach Python, and where?
    seen.clear()
    w = torch.randn(100, device="cuda", requires_grad=True)
    torch.cuda.set_sync_debug_mode("warn")
    out = w[w > 0].sum()  # forward syncs (mask read)
    fwd = len(seen)
    out.backward()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode(0)
    print(f"backward: forward warnings {fwd}, after backward {len(seen)}")
    rows.append({"op": "backward_thread", "forward": fwd, "total": len(seen)})
    with open(os.path.join(a.out, "sync_debug.json"), "w") as f:
        json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

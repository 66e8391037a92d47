"""A benchmark script at module level: timing done wrong and right."""

import time

import torch

device = "cuda"
x = torch.randn(4096, 4096, device=device)
w = torch.randn(4096, 4096, device=device)

t0 = time.time()
for _ in range(10):
    y = x @ w
dt = time.time() - t0  # expect: PK401
print(f"matmul: {dt * 100:.2f} ms per call")

torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(10):
    y = x @ w
torch.cuda.synchronize()
dt = time.perf_counter() - t0
print(f"matmul (synced): {dt * 100:.2f} ms")

start = torch.cuda.Event(enable_timing=True)
end = torch.cuda.Event(enable_timing=True)
start.record()
y = torch.relu(x @ w)
end.record()
ms = start.elapsed_time(end)  # expect: PK402
end.synchronize()
ms = start.elapsed_time(end)
print(ms)


def timed_softmax(a: torch.Tensor) -> float:
    begin = time.perf_counter()
    out = torch.softmax(a, dim=-1)
    stop = time.perf_counter()  # expect: PK401
    return stop - begin


def timed_sum(a: torch.Tensor) -> float:
    begin = time.perf_counter()
    total = a.sum().item()  # the read syncs, so the interval is honest
    return time.perf_counter() - begin + 0 * total

"""Warp <-> torch interop: the host cost of sharing one buffer between the two (zero-copy both ways).

* ``to_torch_us`` — ``wp.to_torch(a)`` of a Warp array (a new torch view each call).
* ``from_torch_us`` — ``wp.from_torch(t)`` of a torch tensor (a new Warp array view each call).
* ``from_torch_ctype_us`` — ``wp.from_torch(t, return_ctype=True)``, the cheap form for feeding a
  kernel launch every step.
* ``stream_from_torch_us`` — ``wp.stream_from_torch()``, what code pays to launch Warp on torch's
  current stream (CUDA only).

Runs on ``cuda:0`` when there is one, else on the CPU (the same Python-side work).
"""

from __future__ import annotations

from typing import Any

from perfkit.probes._bench import cuda_reason, finish, main, per_call_us, repeats, warp_init, warp_reason


def measure(quick: bool = False) -> dict[str, Any]:
    """Warp<->torch to_torch/from_torch cost."""
    wreason = warp_reason()
    if wreason is not None:
        return {"status": "unavailable", "reason": wreason}
    import torch

    wp = warp_init()
    reason = cuda_reason()
    device = "cuda:0" if reason is None else "cpu"
    reps = repeats(quick)
    n = 50 if quick else 2000
    a = wp.zeros(4096, dtype=wp.float32, device=device)
    t = torch.zeros(4096, device=device)
    result: dict[str, Any] = {"device": device}
    result["to_torch_us"] = per_call_us(lambda: wp.to_torch(a), n=n, reps=reps)
    result["from_torch_us"] = per_call_us(lambda: wp.from_torch(t), n=n, reps=reps)
    result["from_torch_ctype_us"] = per_call_us(lambda: wp.from_torch(t, return_ctype=True), n=n, reps=reps)
    missing = {}
    if reason is None:
        result["stream_from_torch_us"] = per_call_us(lambda: wp.stream_from_torch(), n=n, reps=reps)
    else:
        missing["stream_from_torch_us"] = reason
    return finish(result, missing)


if __name__ == "__main__":
    raise SystemExit(main(measure))

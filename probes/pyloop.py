"""Python per-env loop cost: ``for i in range(num_envs)`` of small torch ops vs the one batched op.

The loop body is the typical per-env update, ``out[i] = a[i] * 2.0 + b[i]``: three kernels (mul,
add, the copy into ``out[i]``) and three index views per iteration. The batched equivalent is
``torch.add(a * 2.0, b, out=out)``.

* ``per_env_iteration_us`` — one iteration of the loop (at each env count in ``by_num_envs``: it is
  flat in ``num_envs``, which is why a per-env loop's cost grows linearly with it).
* ``per_op_us`` — ``per_env_iteration_us / ops_per_iteration``: the price of one torch op issued from a
  per-env Python loop.
* ``batched_us`` — the batched op at the largest env count (drained on CUDA).
"""

from __future__ import annotations

from typing import Any

from perfkit.probes._bench import cuda_reason, finish, main, per_call_us, repeats

OPS_PER_ITERATION = 3
NUM_ENVS = (64, 1024)
QUICK_NUM_ENVS = (64,)


def measure(quick: bool = False) -> dict[str, Any]:
    """Python per-iteration loop cost per env vs one batched op."""
    import torch

    reason = cuda_reason()
    dev = torch.device("cpu" if reason else "cuda")
    sync = (lambda: None) if reason else torch.cuda.synchronize
    reps = repeats(quick)
    rows = []
    for n_envs in QUICK_NUM_ENVS if quick else NUM_ENVS:
        a = torch.rand(n_envs, 8, device=dev)
        b = torch.rand(n_envs, 8, device=dev)
        out = torch.empty_like(a)

        def loop():
            for i in range(n_envs):
                out[i] = a[i] * 2.0 + b[i]

        def batched():
            torch.add(a * 2.0, b, out=out)

        loop_us = per_call_us(loop, n=1, reps=reps, before=sync, after=sync, warmup=1)
        batched_us = per_call_us(batched, n=10 if quick else 200, reps=reps, before=sync, after=sync)
        rows.append({"num_envs": n_envs, "loop_us": loop_us, "per_env_iteration_us": loop_us / n_envs,
                     "batched_us": batched_us, "loop_over_batched": loop_us / max(batched_us, 1e-9)})
    last = rows[-1]
    result: dict[str, Any] = {
        "device": "cpu" if reason else torch.cuda.get_device_name(),
        "ops_per_iteration": OPS_PER_ITERATION,
        "by_num_envs": rows,
        "per_env_iteration_us": last["per_env_iteration_us"],
        "per_op_us": last["per_env_iteration_us"] / OPS_PER_ITERATION,
        "batched_us": last["batched_us"],
    }
    return finish(result, {})


if __name__ == "__main__":
    raise SystemExit(main(measure))

"""Does a perfkit session slow tensordict's ``TensorDict.to(device)`` of data already on the device?

py-spy put 3.4 ms per env step of the manager env's perfkit runs at one line of tensordict's
``_fast_apply`` (``base.py:9728``, under rsl_rl's ``obs.to(self.device)``), 10 samples plainly and 132
under perfkit, with no perfkit frame above it (``reports/h200-2026-12-01-run4/pyspy-causes.md``). This
times that call alone, without py-spy: an rsl_rl-shaped observation TensorDict on the device, ``.to()``
to the same device, ``--calls`` calls a round, plainly and inside a perfkit session in steady state
(a toy env stepped past its warm-up and discovery window), the two interleaved over ``--rounds``
rounds; also ``TensorDict.apply`` and ``Tensor.to`` alone, and perfkit's runtime sync detection on
and off within the session. Prints one JSON line of medians (µs per call) and the ratios.

    python3 scripts/gpu/tensordict_to.py [--device cuda] [--num-envs 4096] [--rounds 7] [--calls 2000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from time import perf_counter
from typing import Any, Callable


def _per_call_us(fn: Callable[[], Any], calls: int, sync: Callable[[], None]) -> float:
    sync()
    t0 = perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (perf_counter() - t0) / calls * 1e6


def measure(device: str, num_envs: int, rounds: int, calls: int) -> dict[str, Any]:
    import torch
    from tensordict import TensorDict

    from perfkit.profile.session import Session

    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    obs = TensorDict({"policy": torch.zeros(num_envs, 48, device=dev), "critic": torch.zeros(num_envs, 51, device=dev)},
                     batch_size=[num_envs], device=dev)
    t = torch.zeros(num_envs, 48, device=dev)
    cases: dict[str, Callable[[], Any]] = {
        "td.to(device)": lambda: obs.to(dev),
        "td.apply(identity)": lambda: obs.apply(lambda x: x),
        "t.to(device)": lambda: t.to(dev),
    }

    class Env:
        num_envs = 64

        def __init__(self) -> None:
            self.x = torch.zeros(64, device=dev)

        def step(self, a: Any) -> Any:
            self.x.add_(a)
            return self.x

    env, a = Env(), torch.ones(64, device=dev)
    times: dict[str, list[float]] = {f"{arm} {k}": [] for arm in ("plain", "perfkit", "perfkit-detection-off") for k in cases}
    for k, fn in cases.items():  # warm tensordict's caches and torch's allocator before any timing
        _per_call_us(fn, calls, sync)
    for r in range(rounds):
        for k, fn in cases.items():
            times[f"plain {k}"].append(_per_call_us(fn, calls, sync))
        with Session(warmup_steps=3) as s:
            for _ in range(40):
                env.step(a)
                if s.clock.phase == "steady" and not s.sampler.active:
                    break
            for k, fn in cases.items():
                times[f"perfkit {k}"].append(_per_call_us(fn, calls, sync))
            if dev.type == "cuda":
                prev = torch.cuda.get_sync_debug_mode()
                torch.cuda.set_sync_debug_mode(0)
                try:
                    for k, fn in cases.items():
                        times[f"perfkit-detection-off {k}"].append(_per_call_us(fn, calls, sync))
                finally:
                    torch.cuda.set_sync_debug_mode(prev)
    med = {k: round(statistics.median(v), 3) for k, v in times.items() if v}
    ratios = {k: round(med[f"perfkit {k}"] / med[f"plain {k}"], 3) for k in cases if med.get(f"plain {k}")}
    return {"device": str(dev), "num_envs": num_envs, "rounds": rounds, "calls": calls, "median_us": med,
            "perfkit_over_plain": ratios, "torch": torch.__version__, "python": sys.version.split()[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--num-envs", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--out", default=None, help="also write the JSON here")
    a = ap.parse_args(argv)
    res = measure(a.device, a.num_envs, a.rounds, a.calls)
    line = json.dumps(res)
    print(line)
    if a.out:
        import os

        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "tensordict_to.json"), "w") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

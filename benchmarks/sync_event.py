"""What one counted sync costs perfkit in steady state: the whole hook path of a would-sync ``.item()``
on a CPU-only machine (the hook's checks, finding the site, the segment, counting it in the session's
sink), beyond the call itself.

    python benchmarks/sync_event.py              # prints µs per event for each kind of site
    python benchmarks/sync_event.py --json out.json

A :class:`perfkit.profile.session.Session` (``count_cpu_tensors=True``) drives a toy env past its warm-up and
discovery window; on each steady step that is not sampled (no allocation mode, no line tracer) it
times ``--calls`` calls of a function that makes one ``.item()``, through the hook and through the
original, and keeps the difference. The call is made from:

* ``user``: a line of the user's own script (the site is that line, the chain that line alone);
* ``library``: a line of an installed package called from the user's line (the site is the package's
  line, the chain runs back to the user's);
* ``on_behalf``: torch code that syncs for its caller (``torch.distributions``' argument checks) —
  the site is the caller's line, found by walking out of torch's frames;
* ``event_path``: the event path alone — ``hub.emit`` from a user line (its site, its segment, the
  session's sink) less the same line without it — the part of each of the above after the hook's checks.

The figure per kind is the median over steps of the per-call time through the hook less the median of
the original's (the same with each one's best step beside it: other processes only ever add time). Beside them, :func:`perfkit.collectors.self_cost.calibrate`
run in the same steady state (what the record's ``self`` block prices a sync event at).

A benchmark, not a test: it prints and never asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import sysconfig
from time import perf_counter
from typing import Any


def _programs(torch: Any) -> dict[str, Any]:
    """One function per kind of site, compiled under file names that classify as that kind."""
    t = torch.ones(1)
    lib_file = os.path.join(sysconfig.get_paths()["purelib"], "perfkit_bench_lib", "util.py")
    lib: dict[str, Any] = {"t": t}
    exec(compile("def read():\n    return t.item()\n", lib_file, "exec"), lib)
    behalf_file = os.path.join(os.path.dirname(torch.__file__), "distributions", "perfkit_bench.py")
    behalf: dict[str, Any] = {"t": t}
    exec(compile("def check():\n    return t.item()\n", behalf_file, "exec"), behalf)
    user: dict[str, Any] = {"t": t, "read": lib["read"], "check": behalf["check"]}
    src = ("def user():\n    return t.item()\n"
           "def library():\n    return read()\n"
           "def on_behalf():\n    return check()\n")
    exec(compile(src, "/perfkit-bench/train.py", "exec"), user)
    return {k: user[k] for k in ("user", "library", "on_behalf")}


def _event_path() -> tuple[Any, Any]:
    """The event path alone (site, segment, the session's sink: ``hub.emit``) from a user line, and the
    same line without it (the frame read both make)."""
    from perfkit.collectors import hub

    ns: dict[str, Any] = {"emit": hub.emit, "_getframe": sys._getframe}
    src = ("def event():\n    emit('sync', '.item()', _getframe(), would=True)\n"
           "def bare():\n    _getframe()\n")
    exec(compile(src, "/perfkit-bench/train.py", "exec"), ns)
    return ns["event"], ns["bare"]


def _per_call(fn: Any, calls: int) -> float:
    t0 = perf_counter()
    for _ in range(calls):
        fn()
    return (perf_counter() - t0) / calls


def measure(steps: int = 60, calls: int = 300) -> dict[str, Any]:
    import torch

    from perfkit.collectors import self_cost
    from perfkit.profile.session import Session

    class Env:
        num_envs = 64

        def __init__(self) -> None:
            self.x = torch.zeros(64)

        def step(self, a: Any) -> Any:
            self.x.add_(a)
            return self.x

    env, a = Env(), torch.ones(64)
    progs = _programs(torch)
    times: dict[str, list[float]] = {k: [] for k in ("plain", *progs, "bare", "event_path")}
    event, bare = _event_path()
    cal: list[float] = []
    with Session(warmup_steps=5, count_cpu_tensors=True) as s:
        item = torch.Tensor.item
        orig = item.__perfkit_wrapped__
        t = torch.ones(1)
        for i in range(steps):
            env.step(a)
            if s.clock.phase != "steady" or s.sampler.active:
                continue
            times["plain"].append(_per_call(lambda: orig(t), calls))
            for k, fn in progs.items():
                times[k].append(_per_call(fn, calls))
            times["bare"].append(_per_call(bare, calls))
            times["event_path"].append(_per_call(event, calls))
            if i % 10 == 0:
                cal.append(self_cost.calibrate(torch)["sync_event"])
    counted = {k[1]: c[0] for k, c in s.sink.counts.items() if k[0] == "sync"}
    plain, bare_t = times.pop("plain"), times.pop("bare")
    out: dict[str, Any] = {}
    if plain:
        out = {k: {"median_us": round((statistics.median(v) - statistics.median(base)) * 1e6, 3),
                   "best_us": round((min(v) - min(base)) * 1e6, 3), "steps": len(v)}
               for k, v in times.items() for base in [bare_t if k == "event_path" else plain]}
    out["calibrate_sync_event_us"] = round(statistics.median(cal), 3) if cal else None
    out["counted"] = sum(counted.values())
    out["python"] = sys.version.split()[0]
    out["torch"] = torch.__version__
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    res = measure(args.steps, args.calls)
    for k in ("user", "library", "on_behalf", "event_path"):
        if k in res:
            r = res[k]
            print(f"{k:>10}: {r['median_us']:7.3f} µs/event (best step {r['best_us']:.3f}, {r['steps']} steps)")
    print(f" calibrate: {res['calibrate_sync_event_us']} µs/event (the self block's price)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Instrumentation cost: an NVTX range and a CUDA event, the two markers perfkit puts in a hot loop.

* ``nvtx_range_us`` — ``nvtx.push_range`` + ``nvtx.pop_range`` (the ``nvtx`` package; without a
  profiler attached this is the no-op path every user pays).
* ``nvtx_annotate_us`` — ``with nvtx.annotate(name):`` (the context-manager form).
* ``event_record_us`` — ``torch.cuda.Event(enable_timing=True).record()`` with a fresh event each
  time, as a per-step timer does; ``event_query_us`` — ``event.query()`` on a completed event (how
  lazy resolution checks without syncing); ``event_elapsed_us`` — ``start.elapsed_time(end)`` on
  completed events. CUDA only.
"""

from __future__ import annotations

from typing import Any

from perfkit.probes._bench import cuda_reason, finish, main, per_call_us, repeats


def measure(quick: bool = False) -> dict[str, Any]:
    """NVTX range and CUDA-event cost."""
    reps = repeats(quick)
    n = 100 if quick else 5000
    result: dict[str, Any] = {}
    missing: dict[str, str] = {}
    try:
        import nvtx
    except ImportError:
        missing["nvtx_range_us"] = missing["nvtx_annotate_us"] = "the nvtx package is not installed"
    else:
        def push_pop():
            nvtx.push_range("perfkit-probe")
            nvtx.pop_range()

        def annotate():
            with nvtx.annotate("perfkit-probe"):
                pass

        result["nvtx_range_us"] = per_call_us(push_pop, n=n, reps=reps)
        result["nvtx_annotate_us"] = per_call_us(annotate, n=n, reps=reps)

    reason = cuda_reason()
    if reason is not None:
        result["device"] = "cpu"
        for k in ("event_record_us", "event_query_us", "event_elapsed_us"):
            missing[k] = reason
        return finish(result, missing)
    import torch

    result["device"] = torch.cuda.get_device_name()
    result["event_record_us"] = per_call_us(lambda: torch.cuda.Event(enable_timing=True).record(), n=n, reps=reps)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    end.record()
    end.synchronize()
    result["event_query_us"] = per_call_us(end.query, n=n, reps=reps)
    result["event_elapsed_us"] = per_call_us(lambda: start.elapsed_time(end), n=n, reps=reps)
    return finish(result, missing)


if __name__ == "__main__":
    raise SystemExit(main(measure))

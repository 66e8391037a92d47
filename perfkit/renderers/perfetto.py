"""Chrome / Perfetto trace JSON (the "Trace Event Format") from a run record.

The profile session writes ``run.extra["timeline"]``: a list of
``{"step", "segment", "start_ms", "dur_ms", "gpu"}`` spans. Each becomes a complete ("X") event on
a CPU or a GPU track of one process, plus an enclosing "step N" span per step on a track of its
own. A run without a timeline (a sweep point, an older record) gets one span per steady-state step
laid end to end from ``step_times_ms`` — honest about what it is: step durations, not a recorded
timeline. Open the file in https://ui.perfetto.dev or chrome://tracing.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from perfkit.record import Run

PID = 1
TID_STEPS = 1
TID_CPU = 2
TID_GPU = 3
_REQUIRED = ("step", "segment", "start_ms", "dur_ms")


class TraceError(ValueError):
    """The run's timeline is malformed; the message says which entry."""


def _num(v: Any, what: str, i: int) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise TraceError(f"timeline entry {i}: {what} is not a number: {v!r}") from None
    if not math.isfinite(f):
        raise TraceError(f"timeline entry {i}: {what} is not finite: {v!r}")
    return f


def _meta(name: str, tid: int | None, value: str, sort: int | None = None) -> list[dict]:
    ev = [{"ph": "M", "pid": PID, "name": name, "args": {"name": value}}]
    if tid is not None:
        ev[0]["tid"] = tid
        if sort is not None:
            ev.append({"ph": "M", "pid": PID, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": sort}})
    return ev


def trace_events(run: Run) -> list[dict[str, Any]]:
    title = " ".join(map(str, run.command)) or "perfkit run"
    events: list[dict[str, Any]] = _meta("process_name", None, f"perfkit: {title}")
    events += _meta("thread_name", TID_STEPS, "steps", 0)
    timeline = run.extra.get("timeline")
    spans: list[dict[str, Any]] = []
    if timeline:
        if not isinstance(timeline, list):
            raise TraceError(f"extra.timeline is a {type(timeline).__name__}, not a list of spans")
        events += _meta("thread_name", TID_CPU, "CPU segments", 1)
        has_gpu = False
        steps: dict[int, list[float]] = {}
        for i, e in enumerate(timeline):
            if not isinstance(e, dict) or any(k not in e for k in _REQUIRED):
                raise TraceError(f"timeline entry {i} lacks one of {', '.join(_REQUIRED)}: {e!r}"[:300])
            start, dur = _num(e["start_ms"], "start_ms", i), _num(e["dur_ms"], "dur_ms", i)
            if dur < 0:
                raise TraceError(f"timeline entry {i}: negative duration {dur}")
            step = int(_num(e["step"], "step", i))
            gpu = bool(e.get("gpu", False))
            has_gpu |= gpu
            spans.append({"ph": "X", "pid": PID, "tid": TID_GPU if gpu else TID_CPU, "name": str(e["segment"]),
                          "cat": "gpu" if gpu else "segment", "ts": start * 1e3, "dur": dur * 1e3,
                          "args": {"step": step}})
            if not gpu:
                lo_hi = steps.setdefault(step, [start, start + dur])
                lo_hi[0], lo_hi[1] = min(lo_hi[0], start), max(lo_hi[1], start + dur)
        if has_gpu:
            events += _meta("thread_name", TID_GPU, "GPU segments", 2)
        for step, (lo, hi) in steps.items():
            spans.append({"ph": "X", "pid": PID, "tid": TID_STEPS, "name": f"step {step}", "cat": "step",
                          "ts": lo * 1e3, "dur": (hi - lo) * 1e3, "args": {"step": step}})
    else:
        t = 0.0
        for i, ms in enumerate(run.step_times_ms):
            dur = _num(ms, "step_times_ms", i)
            spans.append({"ph": "X", "pid": PID, "tid": TID_STEPS, "name": f"step {i}", "cat": "step",
                          "ts": t * 1e3, "dur": dur * 1e3, "args": {"step": i, "num_envs": run.num_envs}})
            t += dur
    spans.sort(key=lambda e: (e["ts"], -e["dur"]))
    return events + spans


def to_trace(run: Run) -> dict[str, Any]:
    source = "timeline" if run.extra.get("timeline") else "step_times_ms"
    return {
        "traceEvents": trace_events(run),
        "displayTimeUnit": "ms",
        "otherData": {
            "generator": "perfkit",
            "schema": run.schema,
            "source": source,
            "command": " ".join(map(str, run.command)),
            "num_envs": run.num_envs,
            "steps": run.steps,
            "sps": run.sps,
            "device": run.machine.get("device"),
        },
    }


def write_trace(run: Run, path: str | os.PathLike) -> tuple[Path, int]:
    """Write the trace; returns the path and the number of span events."""
    from perfkit.outputs import write_text

    trace = to_trace(run)
    write_text(path, json.dumps(trace, separators=(",", ":")) + "\n")
    return Path(path), sum(1 for e in trace["traceEvents"] if e["ph"] == "X")

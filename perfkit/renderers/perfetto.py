"""Chrome / Perfetto trace JSON (the "Trace Event Format") from a run record.

The profile session writes the record's ``timeline`` (:class:`perfkit.record.Timeline`): the start of
every step of the run (``step_starts_ms``) and ``spans``: ``{"step", "segment", "start_ms", "dur_ms", "gpu"}`` of the
segments, recorded on steps spread over the whole run (the first few steady steps and every
GPU-timed one). Every step becomes a "step N" span on a track of its own; each segment span a
complete ("X") event on a CPU or a GPU track. A run without a timeline (a sweep point, an older record) gets one span per steady-state step
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
from perfkit.renderers.base import Renderer

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


StepRange = tuple[int | None, int | None]


def parse_steps(text: str) -> StepRange:
    """``"A:B"`` -> ``(A, B)``: steps ``A <= step < B``, like a Python slice; ``"A:"`` / ``":B"`` leave a
    side open; ``"N"`` is the one step N. ValueError when it is none of these."""
    a, sep, b = str(text).strip().partition(":")
    try:
        start = int(a) if a.strip() else None
        stop = (int(b) if b.strip() else None) if sep else (start + 1 if start is not None else None)
    except ValueError:
        raise ValueError(f"not a step range: {text!r} (use A:B, A:, :B or N)") from None
    if not sep and start is None:
        raise ValueError(f"not a step range: {text!r} (use A:B, A:, :B or N)")
    if (start is not None and start < 0) or (stop is not None and stop < 0):
        raise ValueError(f"step range {text!r}: steps are numbered from 0")
    if start is not None and stop is not None and stop <= start:
        raise ValueError(f"step range {text!r} is empty (A:B takes the steps A <= step < B)")
    return start, stop


def _in(step: int, steps: StepRange | None) -> bool:
    if steps is None:
        return True
    start, stop = steps
    return (start is None or step >= start) and (stop is None or step < stop)


def _timeline(run: Run) -> list | None:
    return run.timeline.spans or None


def _step_starts(run: Run) -> list[float]:
    return [_num(v, "timeline.step_starts_ms", i) for i, v in enumerate(run.timeline.step_starts_ms)]


def trace_events(run: Run, steps: StepRange | None = None) -> list[dict[str, Any]]:
    """The trace's events: metadata, then the spans of the steps in ``steps`` (all by default).
    TraceError when the timeline is malformed or the range holds none of the record's steps."""
    title = " ".join(map(str, run.command)) or "perfkit run"
    events: list[dict[str, Any]] = _meta("process_name", None, f"perfkit: {title}")
    events += _meta("thread_name", TID_STEPS, "steps", 0)
    timeline = _timeline(run)
    spans: list[dict[str, Any]] = []
    held: list[int] = []  # the steps the record holds, for the message when the range misses them all
    if timeline:
        events += _meta("thread_name", TID_CPU, "CPU segments", 1)
        has_gpu = False
        bounds: dict[int, list[float]] = {}
        for i, e in enumerate(timeline):
            if not isinstance(e, dict) or any(k not in e for k in _REQUIRED):
                raise TraceError(f"timeline entry {i} lacks one of {', '.join(_REQUIRED)}: {e!r}"[:300])
            start, dur = _num(e["start_ms"], "start_ms", i), _num(e["dur_ms"], "dur_ms", i)
            if dur < 0:
                raise TraceError(f"timeline entry {i}: negative duration {dur}")
            step = int(_num(e["step"], "step", i))
            held.append(step)
            if not _in(step, steps):
                continue
            gpu = bool(e.get("gpu", False))
            has_gpu |= gpu
            spans.append({"ph": "X", "pid": PID, "tid": TID_GPU if gpu else TID_CPU, "name": str(e["segment"]),
                          "cat": "gpu" if gpu else "segment", "ts": start * 1e3, "dur": dur * 1e3,
                          "args": {"step": step}})
            if not gpu:
                lo_hi = bounds.setdefault(step, [start, start + dur])
                lo_hi[0], lo_hi[1] = min(lo_hi[0], start), max(lo_hi[1], start + dur)
        if has_gpu:
            events += _meta("thread_name", TID_GPU, "GPU segments", 2)
        starts = _step_starts(run)
        if starts:  # every step of the run, from its recorded start to the next one's
            for k, lo in enumerate(starts, 1):
                if k < len(starts):
                    hi = starts[k]
                else:  # the last step: until its call returned (or its last recorded span)
                    end = run.timeline.last_step_end_ms
                    hi = _num(end, "timeline.last_step_end_ms", k) if end is not None else bounds.get(k, [lo, lo])[1]
                held.append(k)
                if _in(k, steps) and hi > lo:
                    spans.append({"ph": "X", "pid": PID, "tid": TID_STEPS, "name": f"step {k}", "cat": "step",
                                  "ts": lo * 1e3, "dur": (hi - lo) * 1e3, "args": {"step": k}})
        else:
            for step, (lo, hi) in bounds.items():
                spans.append({"ph": "X", "pid": PID, "tid": TID_STEPS, "name": f"step {step}", "cat": "step",
                              "ts": lo * 1e3, "dur": (hi - lo) * 1e3, "args": {"step": step}})
    else:
        t = 0.0
        for i, ms in enumerate(run.step_times_ms):
            dur = _num(ms, "step_times_ms", i)
            held.append(i)
            if _in(i, steps):
                spans.append({"ph": "X", "pid": PID, "tid": TID_STEPS, "name": f"step {i}", "cat": "step",
                              "ts": t * 1e3, "dur": dur * 1e3, "args": {"step": i, "num_envs": run.num_envs}})
            t += dur
    if steps is not None and not spans:
        have = f"steps {min(held)}..{max(held)}" if held else "no steps"
        start, stop = steps
        raise TraceError(f"no step in {'' if start is None else start}:{'' if stop is None else stop}: "
                         f"the record holds {have}")
    spans.sort(key=lambda e: (e["ts"], -e["dur"]))
    return events + spans


def to_trace(run: Run, steps: StepRange | None = None) -> dict[str, Any]:
    source = "timeline" if _timeline(run) else "step_times_ms"
    return {
        "traceEvents": trace_events(run, steps),
        "displayTimeUnit": "ms",
        "otherData": {
            "generator": "perfkit",
            "schema": run.schema,
            "source": source,
            "command": " ".join(map(str, run.command)),
            "num_envs": run.num_envs,
            "steps": run.steps,
            "sps": run.sps,
            "sps_unit": run.throughput_unit,
            "device": run.machine.get("device"),
            "step_range": list(steps) if steps is not None else None,
        },
    }


def steps_covered(trace: dict[str, Any]) -> list[int]:
    """The steps a trace's spans cover, sorted."""
    return sorted({e["args"]["step"] for e in trace["traceEvents"] if e["ph"] == "X"})


class PerfettoRenderer(Renderer):
    """The run's trace (``steps``: only those steps, :func:`parse_steps`) as Trace Event Format JSON."""

    extension = ".json"
    reads = "run"

    def __init__(self, steps: StepRange | None = None):
        self.steps = steps

    def render(self, run: Run) -> str:
        return self.encode(to_trace(run, self.steps))

    @staticmethod
    def encode(trace: dict[str, Any]) -> str:
        return json.dumps(trace, separators=(",", ":")) + "\n"


def write_trace(run: Run, path: str | os.PathLike, steps: StepRange | None = None) -> tuple[Path, int, list[int]]:
    """Write the trace (:class:`PerfettoRenderer`); returns the path, the number of span events and the
    steps covered, for the command's one line."""
    from perfkit.outputs import write_text

    trace = to_trace(run, steps)
    path = write_text(path, PerfettoRenderer.encode(trace))
    return Path(path), sum(1 for e in trace["traceEvents"] if e["ph"] == "X"), steps_covered(trace)

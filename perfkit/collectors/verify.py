"""``--verify``: do perfkit's sync counts agree with the CUDA runtime, site by site, both ways?

Over a window of whole steady-state steps (boundary to boundary), torch.profiler (CUPTI through Kineto,
``with_stack``) records the runtime and driver API calls; each hooked sync runs inside a
``perfkit.sync:<op>@<file>:<line>`` range and each step inside a ``perfkit.step#k`` range
(``torch.profiler.record_function``). Afterwards (:func:`analyze`):

* each range is counted once: the profiler also lists GPU-side copies of a ``record_function`` range
  (``gpu_user_annotation``); only the CPU-side event is a step or a hooked call;
* every synchronizing API call (``cudaStreamSynchronize``, ``cudaDeviceSynchronize``,
  ``cudaEventSynchronize``, synchronous ``cudaMemcpy``, and their driver-API twins used by Warp) inside
  a step range is matched to the hooked range it ran in, on its thread;
* per hooked call: how many runtime syncs it made — none means perfkit reported a sync the GPU never
  made (*hooked without runtime sync*);
* per runtime sync outside every hooked range (*unattributed*: a sync no hook saw): the Python stack
  that made it (the call's own, else its nearest enclosing op's), grouped by the first frame outside
  the runtime, so a missed sync names its line.

The block (``run.extra["verify"]``) holds the totals and the same figures per site. The target is zero
unattributed and zero hooked-without-runtime-sync.

The window opens at the first steady step and stays open to the end of the run, or — past
``verify_steps`` steps (default 64) — closes at the first boundary after a whole number of the loop's
periods (once-per-iteration work is in it at its rate whatever step it starts at). A window that ends
with the run covers the record's whole steady state, so its per-site rates can be set against the
record's over the same steps, one-off and data-dependent sites included
(:mod:`perfkit.profile.verify_agreement`: ``by_step``, the runtime's syncs per site and step, is read
there and left out of the record). The profiler costs far more than perfkit's default mode, so
``--verify`` is a check, not a measurement: the window's steps are kept out of the step times.
"""

from __future__ import annotations

import bisect
import re
from typing import Any, Iterable

from perfkit.collectors import hub
from perfkit.collectors.sites import kind_of
from perfkit.source import relpath

SYNC_API = {
    "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy", "cudaMemcpy2D",
    "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize", "cuMemcpyDtoH", "cuMemcpyDtoH_v2",
    "cuMemcpy", "cuMemcpy_v2",
}
SYNC_PREFIX = "perfkit.sync:"
NO_STACK = "(no Python stack)"  # the site of a runtime sync the profiler gave no stack
STEP_PREFIX = "perfkit.step#"
MAX_SITES = 50  # per-site rows kept in the block (the most runtime syncs first)
MAX_STACK = 8  # frames kept per unattributed site
_FRAME = re.compile(r"^(?P<file>.+)\((?P<line>\d+)\): (?P<func>.*)$")  # torch.profiler's stack entries


VERIFY_STEPS = 64  # the steps past which the window closes, at the next whole period (``verify_steps``)


WINDOW_CAP = 4  # a window never holds more than this many times ``max_steps`` (a period longer than that)


def window_full(n: int, max_steps: int, period: int | None) -> bool:
    """Whether a window that has held ``n`` whole steps closes at this boundary: past ``max_steps``, at
    a whole number of the loop's ``period`` (where one is known) — or at ``WINDOW_CAP * max_steps``
    whatever the period (the profiler's events are held in memory)."""
    if n >= WINDOW_CAP * max_steps:
        return True
    return n >= max_steps and (not period or period <= 1 or n % period == 0)


class Verifier:
    def __init__(self, torch: Any, max_steps: int = VERIFY_STEPS):
        self.torch = torch
        self.max_steps = max_steps
        self.prof: Any = None
        self.start_idx = 0
        self.end_idx: int | None = None  # the boundary the window closed at (None: open, or it ended with the run)
        self._step_rf: Any = None
        self._result: dict[str, Any] | None = None
        # "file:line" -> {step: syncs the runtime reported there outside the hooks}
        self.reported_steps: dict[str, dict[int, int]] = {}
        self._idx: int | None = None  # the step whose range is open

    def start(self, idx: int) -> None:
        P = self.torch.profiler
        self.prof = P.profile(activities=[P.ProfilerActivity.CPU, P.ProfilerActivity.CUDA], with_stack=True)
        self.prof.__enter__()
        self.start_idx = idx
        hub.verify_range = self._sync_range
        hub.verify_note = self._note_reported

    def holds(self, idx: int) -> bool:
        """Whether step ``idx`` is one of the window's (or the one its analysis ran at the start of)."""
        return self.start_idx <= idx and (self.end_idx is None or idx <= self.end_idx)

    def _sync_range(self, op: str, site: tuple | None = None) -> Any:
        return self.torch.profiler.record_function(range_name(op, site))

    def _note_reported(self, site: tuple) -> None:
        """A sync the runtime reported outside every hook (perfkit counted it at ``site``)."""
        if self._step_rf is not None:  # inside the window's steps, where analyze() looks
            key = f"{relpath(site[0])}:{site[1]}"
            by = self.reported_steps.setdefault(key, {})
            by[self._idx] = by.get(self._idx, 0) + 1

    def boundary(self, idx: int, period: int | None = None) -> None:
        """A step boundary: close the step range that ends here and open the next (whole steps only);
        past ``max_steps``, close the window at a whole number of ``period``."""
        if self.prof is None:
            return
        if self._step_rf is not None:
            self._step_rf.__exit__(None, None, None)
            self._step_rf = None
        if window_full(idx - self.start_idx, self.max_steps, period):
            self.end_idx = idx
            self.stop()
            return
        self._idx = idx
        self._step_rf = self.torch.profiler.record_function(f"{STEP_PREFIX}{idx}")
        self._step_rf.__enter__()

    def stop(self) -> None:
        """Close the window: at a boundary (:meth:`boundary`) or with the run (the last step open-ended)."""
        if self.prof is None:
            return
        hub.verify_range = None
        hub.verify_note = None
        if self._step_rf is not None:
            self._step_rf.__exit__(None, None, None)
            self._step_rf = None
        prof, self.prof = self.prof, None
        prof.__exit__(None, None, None)
        reported = {site: sum(by.values()) for site, by in self.reported_steps.items()}
        self._result = analyze(prof.events(), reported, self.reported_steps)
        self._result["ended_with_run"] = self.end_idx is None

    def result(self) -> dict[str, Any]:
        return self._result or {"steps": 0, "note": "the run ended before the verify window"}


def range_name(op: str, site: tuple | None) -> str:
    """``perfkit.sync:<op>@<file>:<line>`` (just ``perfkit.sync:<op>`` without a site)."""
    if site is None:
        return SYNC_PREFIX + op
    return f"{SYNC_PREFIX}{op}@{relpath(site[0])}:{site[1]}"


def _parse_range(name: str) -> tuple[str, str]:
    """(op, "file:line") of a hooked range's name ("" where it names no site)."""
    body = name[len(SYNC_PREFIX):]
    op, sep, site = body.rpartition("@")
    return (op, site) if sep else (body, "")


def _on_cpu(e: Any) -> bool:
    """The CPU-side event of a range (GPU-side copies of a ``record_function`` have device type CUDA)."""
    return str(getattr(e, "device_type", "CPU")).rsplit(".", 1)[-1] == "CPU"


def _stack_of(e: Any) -> list[str]:
    """The Python stack of a runtime call: its own, else that of its nearest enclosing op (CUPTI API
    events often carry none; the aten op that issued them does)."""
    hops = 0
    while e is not None and hops < 64:
        st = list(getattr(e, "stack", None) or ())
        if st:
            return st
        e = getattr(e, "cpu_parent", None)
        hops += 1
    return []


def _program_frame(stack: list[str]) -> tuple[str, int, str] | None:
    """(file, line, function) of the innermost frame outside the runtime perfkit instruments."""
    for entry in stack:
        m = _FRAME.match(entry.strip())
        if m and kind_of(m["file"]) != "runtime":
            return m["file"], int(m["line"]), m["func"]
    return None


class _Ranges:
    """Non-overlapping ranges of one thread, sorted by start, for "which range holds t" lookups."""

    def __init__(self, ranges: list[tuple]):
        self.ranges = sorted(ranges)
        self.starts = [r[0] for r in self.ranges]

    def holding(self, t0: float, t1: float, eps: float = 1.0) -> int | None:
        """The index of the range holding [t0, t1] (µs of slack at the edges), None where none does."""
        i = bisect.bisect_right(self.starts, t0 + eps) - 1
        for j in (i, i - 1):  # ranges do not overlap: only the last to start before t0 (or, within the slack, the one before) can
            if j >= 0:
                r = self.ranges[j]
                if r[0] - eps <= t0 and t1 <= r[1] + eps:
                    return j
        return None


def _hooked_range(by_thread: dict[Any, _Ranges], thread: Any, t0: float, t1: float) -> tuple[Any, int | None]:
    """(thread, index) of the hooked range a runtime call ran in: on its own thread, else (a profiler
    that names threads differently for API events) on any."""
    own = by_thread.get(thread)
    if own is not None:
        i = own.holding(t0, t1)
        if i is not None:
            return thread, i
    for t, ranges in by_thread.items():
        if t != thread:
            i = ranges.holding(t0, t1)
            if i is not None:
                return t, i
    return None, None


def analyze(events: Iterable[Any], reported: dict[str, int] | None = None,
            reported_steps: dict[str, dict[int, int]] | None = None) -> dict[str, Any]:
    """The verify block from the profiler's events (see module doc). Each event needs ``name``,
    ``time_range`` (``.start``/``.end`` in µs), ``device_type``, and where it has them ``thread``,
    ``stack`` and ``cpu_parent`` (``torch.autograd.profiler_util.FunctionEvent``).

    ``reported``: ``{"file:line": n}`` of the syncs perfkit counted from the runtime's own reports
    outside every hook (:mod:`.cuda_syncs`); a runtime sync outside the hooks whose program frame is such
    a site is attributed to it (up to the count perfkit reported there), the rest stay unattributed, and
    reports with no runtime sync to match are false reports like a hooked call's. ``reported_steps``:
    the same reports by step (``{site: {step: n}}``), so a runtime sync with no stack is matched to a
    report of its own step.

    ``by_step``: ``{site: {step: n}}``, every runtime sync in the window by the site it counts at (the
    hooked range's, the program frame's, or for a call with no stack the reported site it matched) and
    its step, for :func:`perfkit.profile.verify_agreement.agreement`."""
    seen: set[tuple] = set()
    steps: list[tuple] = []
    hooked: dict[Any, list[tuple]] = {}
    api: list[tuple[float, float, str, Any, Any]] = []
    for e in events:
        name = e.name
        if not name.startswith(("perfkit.", "cu")) or not _on_cpu(e):
            continue
        tr = e.time_range
        thread = getattr(e, "thread", None)
        key = (name, tr.start, tr.end, thread)
        if key in seen:
            continue
        seen.add(key)
        if name.startswith(STEP_PREFIX):
            steps.append((tr.start, tr.end, int(name[len(STEP_PREFIX):])))
        elif name.startswith(SYNC_PREFIX):
            hooked.setdefault(thread, []).append((tr.start, tr.end, *_parse_range(name)))
        elif name in SYNC_API:
            api.append((tr.start, tr.end, name, thread, e))
    step_ranges = _Ranges(steps)
    in_window = {t: [r for r in rs if step_ranges.holding(r[0], r[1]) is not None] for t, rs in hooked.items()}
    by_thread = {t: _Ranges(rs) for t, rs in in_window.items()}
    made = {t: [0] * len(r.ranges) for t, r in by_thread.items()}  # runtime syncs inside each hooked range

    by_api: dict[str, dict[str, int]] = {}
    unattributed: dict[str, dict[str, Any]] = {}
    by_step: dict[str, dict[int, int]] = {}  # site -> {step: runtime syncs made there}
    no_stack_steps: list[int] = []  # the steps of the runtime syncs the profiler gave no stack
    framed_steps: dict[str, dict[int, int]] = {}  # site -> {step: runtime syncs outside the hooks with a stack there}

    def at(site: str, idx: int, n: int = 1) -> None:
        d = by_step.setdefault(site, {})
        d[idx] = d.get(idx, 0) + n

    n_api = n_un = 0
    for t0, t1, name, thread, e in api:
        j = step_ranges.holding(t0, t1)
        if j is None:
            continue  # the profiler's own start/stop, perfkit's work between steps, or outside the window
        step_idx = step_ranges.ranges[j][2]
        n_api += 1
        d = by_api.setdefault(name, {"total": 0, "attributed": 0})
        d["total"] += 1
        owner, i = _hooked_range(by_thread, thread, t0, t1)
        if i is not None:
            d["attributed"] += 1
            made[owner][i] += 1
            at(by_thread[owner].ranges[i][3], step_idx)
            continue
        n_un += 1
        stack = _stack_of(e)
        frame = _program_frame(stack)
        site = f"{relpath(frame[0])}:{frame[1]}" if frame else NO_STACK
        if frame:
            at(site, step_idx)
            fs = framed_steps.setdefault(site, {})
            fs[step_idx] = fs.get(step_idx, 0) + 1
        else:
            no_stack_steps.append(step_idx)
        u = unattributed.setdefault(site, {"site": site, "function": frame[2] if frame else "", "count": 0, "apis": {},
                                           "stack": stack[:MAX_STACK]})
        u["count"] += 1
        u["apis"][name] = u["apis"].get(name, 0) + 1

    n_reported = n_report_empty = 0
    report_rows = []

    def take(key: str, n: int) -> int:
        u = unattributed.get(key)
        m = min(n, u["count"]) if u else 0
        if u is not None:
            u["count"] -= m
            if not u["count"]:
                del unattributed[key]
        return m

    pool: dict[int, int] = {}  # step -> runtime syncs with no stack, not yet matched to a report
    for idx in no_stack_steps:
        pool[idx] = pool.get(idx, 0) + 1
    for site, n in sorted((reported or {}).items()):
        m = take(site, n)
        # a runtime call the profiler gave no Python stack: matched to what perfkit reported there, by
        # count, step by step where the reports' steps are known (a report and its sync share a step)
        by = (reported_steps or {}).get(site)
        framed = framed_steps.get(site, {})  # (not the hooked calls' syncs at the same line)
        # (step, how many of its frameless syncs this site may take): its reports' steps, less the syncs
        # with a stack it made there; with no steps known, any step's, up to what is left unmatched
        wants = ([(i, k - framed.get(i, 0)) for i, k in sorted(by.items())] if by
                 else [(j, n - m) for j in sorted(pool)])
        m_free = 0
        for j, need in wants:
            g = min(need, pool.get(j, 0), n - m - m_free)
            if g > 0:
                pool[j] -= g
                at(site, j, g)
                m_free += g
        take(NO_STACK, m_free)
        m += m_free
        n_un -= m
        n_reported += m
        n_report_empty += n - m
        report_rows.append({"site": site, "reported": n, "runtime_syncs": m, "reported_without_runtime_sync": n - m})
    sites: dict[tuple[str, str], dict[str, Any]] = {}
    n_hooked = n_empty = 0
    for thread, ranges in by_thread.items():
        for r, runtime in zip(ranges.ranges, made[thread]):
            op, site = r[2], r[3]
            s = sites.setdefault((site, op), {"site": site, "op": op, "hooked": 0, "runtime_syncs": 0,
                                              "hooked_without_runtime_sync": 0})
            s["hooked"] += 1
            s["runtime_syncs"] += runtime
            n_hooked += 1
            if not runtime:
                s["hooked_without_runtime_sync"] += 1
                n_empty += 1
    n_steps = len(steps)
    for idx, k in pool.items():
        if k:
            at(NO_STACK, idx, k)

    def per_step(n: int) -> float | None:
        return round(n / n_steps, 4) if n_steps else None

    site_rows = sorted(sites.values(), key=lambda s: (-s["runtime_syncs"], -s["hooked"], s["site"], s["op"]))
    for s in site_rows:
        s["runtime_per_step"] = per_step(s["runtime_syncs"])
    idxs = [r[2] for r in step_ranges.ranges]
    return {
        "steps": n_steps,
        "first_step": min(idxs) if idxs else None,
        "last_step": max(idxs) if idxs else None,
        "by_step": by_step,
        "runtime_syncs": n_api,
        "hooked_syncs": n_hooked,
        "hooked_without_runtime_sync": n_empty,
        "unattributed": n_un,
        "runtime_per_step": per_step(n_api),
        "unattributed_per_step": per_step(n_un),
        "by_api": by_api,
        "runtime_reported": n_reported,
        "reported_without_runtime_sync": n_report_empty,
        "reported_sites": sorted(report_rows, key=lambda r: (-r["runtime_syncs"], r["site"]))[:MAX_SITES],
        "sites": site_rows[:MAX_SITES],
        "unattributed_sites": sorted(unattributed.values(), key=lambda u: (-u["count"], u["site"]))[:MAX_SITES],
    }

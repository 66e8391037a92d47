"""Does the record's syncs-per-step agree with the CUDA runtime's, site by site? (``--verify``)

:mod:`perfkit.collectors.verify` leaves, in its block, every runtime sync of its window by site and
step (``by_step``). Here those counts are read the way the record reads its own (the snapshot module's
counting definitions) and set beside the record's sync findings:

* over the record's rate window — the steady steps from ``first_step`` (cut at the start to whole
  periods of the loop) to the last — when the verify window ended with the run, so one-off work (a
  checkpoint written at the end of ``learn()``) and data-dependent syncs are counted over the same steps
  on both sides; the last step has no next boundary, so a site counts there at most the most it made in
  one earlier step, and a site that synced only there is teardown — the record's rule (where the site's
  only earlier syncs were in the warm-up, which the window does not cover, the record's own warm-up
  count stands in: a script's ``learn()`` called once to warm up and once timed ends both calls alike);
* over the verify window's own steps when it closed at a boundary before the run ended (a long run), on
  both sides: the record's side is then its own syncs in those very steps (the clock's per-step trails,
  ``window_record``), not its rates over the whole run — a data-dependent site (resets, rsl_rl's
  checkpoint save) made other counts in the steps the window did not see (the H200, the manager env,
  16 iterations: four sites read 0.4–1.17 against the window's runtime counts while both sides agreed
  step by step).

The result replaces ``by_step`` in the block as ``agreement``: runtime and record syncs per step in total
and per site, their ratio (record / runtime) and the sites outside ``TOLERANCE`` (with the runtime's
syncs there by step).
"""

from __future__ import annotations

from typing import Any, Iterable

TOLERANCE = 0.05  # a site agrees when record / runtime is within 1 +- this


def runtime_rates(by_step: dict[str, dict[int, int]], first: int, last: int, open_last: bool,
                  warm: dict[str, int] | None = None) -> dict[str, float]:
    """Per site, the runtime's syncs per step over steps ``first``..``last``; ``open_last``: the last
    step ran on to the end of the run (its count capped at the site's most in one earlier step — of the
    window, else the warm-up's typical step, ``warm``, which the window does not cover — and a site seen
    only there and never in the warm-up is teardown)."""
    n = last - first + 1
    out: dict[str, float] = {}
    if n <= 0:
        return out
    for site, per in by_step.items():
        closed = sum(m for i, m in per.items() if first <= i < last)
        tail = per.get(last, 0)
        if open_last and tail:
            earlier = max((m for i, m in per.items() if i < last), default=0)
            tail = min(tail, earlier or (warm or {}).get(site, 0))
        if closed + tail:
            out[site] = (closed + tail) / n
    return out


def record_rates(findings: Iterable[Any]) -> dict[str, float]:
    """Per site ("path:line"), the record's syncs per step (the syncs a GPU run makes: not the
    would-sync-on-GPU ones of a CPU run)."""
    out: dict[str, float] = {}
    for f in findings:
        if f.kind == "sync" and not f.would_sync_on_gpu:
            key = f"{f.path}:{f.line}"
            out[key] = out.get(key, 0.0) + f.per_step
    return out


def _ratio(record: float, runtime: float) -> float | None:
    return round(record / runtime, 4) if runtime else None


def agreement(block: dict[str, Any], findings: Iterable[Any], rate_first_step: int,
              warm: dict[str, int] | None = None, window_record: dict[str, float] | None = None) -> dict[str, Any] | None:
    """The ``agreement`` entry of a verify block (module doc); ``rate_first_step``: the first step of the
    record's rate window; ``warm``: per site ("path:line") that synced in the warm-up, the most events
    its typical warm-up step made (the record's rule for a last step, read from the record's count);
    ``window_record``: per site, the record's own syncs per step over the window's steps, for a window
    that closed before the run ended (None: the findings' rates stand in). None when the block has no step."""
    by_step = block.get("by_step") or {}
    first, last = block.get("first_step"), block.get("last_step")
    if first is None or last is None:
        return None
    whole = bool(block.get("ended_with_run"))
    if whole:
        first = max(first, rate_first_step)
    runtime = runtime_rates(by_step, first, last, open_last=whole, warm=warm)
    same_steps = not whole and window_record is not None
    record = window_record if same_steps else record_rates(findings)
    sites = []
    for site in sorted(set(runtime) | set(record), key=lambda s: (-runtime.get(s, 0.0), -record.get(s, 0.0), s)):
        rt, rc = runtime.get(site, 0.0), record.get(site, 0.0)
        sites.append({"site": site, "runtime_per_step": round(rt, 4), "record_per_step": round(rc, 4),
                      "ratio": _ratio(rc, rt)})
    off = [s for s in sites if s["ratio"] is None or abs(s["ratio"] - 1) > TOLERANCE]
    for s in off:  # where the runtime synced there, step by step: what to read a disagreement by
        s["runtime_steps"] = {str(i): m for i, m in sorted((by_step.get(s["site"]) or {}).items())}
    rt_total, rc_total = sum(runtime.values()), sum(record.values())
    return {
        "window": "the record's steady state" if whole else "the verify window (closed before the run ended)"
                  + ("; the record's syncs in its steps" if same_steps else ""),
        "first_step": first, "last_step": last, "steps": max(0, last - first + 1),
        "runtime_per_step": round(rt_total, 4), "record_per_step": round(rc_total, 4),
        "ratio": _ratio(rc_total, rt_total), "tolerance": TOLERANCE,
        "sites_outside_tolerance": len(off), "sites": sites,
    }

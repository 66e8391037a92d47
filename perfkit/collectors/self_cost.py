"""perfkit's own cost in a run: what the session measures of its one-off work and what it estimates a
plain steady step costs (the record's ``self`` block, :class:`perfkit.record.SelfCost`).

* One-off work is timed where it happens: the session's start, its work at each special step boundary
  (by kind), the sampled steps' time beyond a typical step, building the record.
* A plain steady step runs no perfkit code but its always-on hooks: a wrapper around each hooked torch
  call (most of which cannot sync and return at once), a clock read at each segment transition, the
  event path of each sync. :func:`calibrate` measures each of those per call once, at the session's
  start (a few hundred calls each, the best of three rounds: ~1 ms), and the estimate is their counts
  per step times those costs. ``perfkit overhead`` (the program run with and without perfkit) is the
  ground truth the estimate is checked against.
"""

from __future__ import annotations

import sys
from time import perf_counter
from typing import Any

from perfkit.record import SelfCost

CALLS = 200  # calls per calibration round
_PROGRAM_FILE = "/perfkit-calibration/program.py"  # a program file of no package: the sync event's site
ROUNDS = 3

SPECIAL_KINDS = ("warmup", "discovery_close", "verify", "sample", "gpu_timed", "poll")


DEVICE_CALLS = 50  # calls per round of the on-device calibration (a CUDA sync each: ~30 µs)
DEVICE_ROUNDS = 8  # rounds of each, interleaved (3 of each, one after the other, read 0 once on the H200:
# warned 47.0 µs against plain 43.9 µs in one run, the reverse order of the two in another)


def _best(fn: Any, calls: int = CALLS, rounds: int = ROUNDS) -> float:
    """The least seconds per call of ``fn()`` over ``rounds`` rounds of ``calls`` calls."""
    best = float("inf")
    for _ in range(rounds):
        t0 = perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (perf_counter() - t0) / calls)
    return best


def _program_call(body: str, **names: Any) -> Any:
    """A function ``call()`` whose one line ``body`` runs at a program's line (a function compiled under a
    file name of no installed package), so that a sync it makes is found there as a program's would be."""
    ns: dict[str, Any] = dict(names)
    exec(compile(f"def call():\n    {body}\n", _PROGRAM_FILE, "exec"), ns)
    return ns["call"]


def _best_in_scratch_sink(fn: Any, calls: int = CALLS, rounds: int = ROUNDS) -> float:
    """:func:`_best` of ``fn`` while a scratch sink stands in for the session's (which must not count the
    calibration's syncs)."""
    from perfkit.collectors import hub
    from perfkit.collectors.hub import Sink

    saved, saved_sync = list(hub.sinks), list(hub.sync_sinks)
    hub.sinks[:] = hub.sync_sinks[:] = [Sink()]
    try:
        return _best(fn, calls, rounds)
    finally:
        hub.sinks[:] = saved
        hub.sync_sinks[:] = saved_sync


def calibrate(torch: Any) -> dict[str, float]:
    """Microseconds per call of perfkit's always-on paths, measured now (the hooks must be installed):
    ``hooked_call`` (a hooked torch call that cannot sync — a slice read, or on a CUDA run an always-sync
    op on a host tensor — through the hook, less the same call of the original), ``segment_transition``
    (half a call through a segment wrapper) and ``sync_event`` (a counted sync's whole path: the hook on a
    CPU machine; on CUDA the runtime's warning measured on the device, else raised from Python; else
    finding a sync's site and counting it in a sink)."""
    from perfkit.collectors.hub import Sink
    from perfkit.collectors.sites import chain_of, site_of
    from perfkit.collectors.timing import SegmentClock

    out: dict[str, float] = {}
    orig = None
    if torch is not None:
        hooked = torch.Tensor.__getitem__
        orig = getattr(hooked, "__perfkit_wrapped__", None)
    if orig is not None:
        t = torch.zeros(4)
        sl = slice(0, 1)
        through = _best(lambda: hooked(t, sl))
        plain = _best(lambda: orig(t, sl))
        out["hooked_call"] = max(0.0, through - plain) * 1e6
    else:
        cheap = _unhooked_path_of_a_hooked_call(torch)
        if cheap is not None:
            out["hooked_call"] = cheap * 1e6
    out["segment_transition"] = _segment_transition(SegmentClock()) * 1e6
    out["sync_emit"] = _emit_in_a_loop() * 1e6
    full = _hooked_sync(torch)
    if full is None:
        full = _warned_device_sync(torch)  # (None before the program has made its device ready)
    if full is None:
        full = _runtime_reported_sync()
    if full is not None:
        out["sync_event"] = full * 1e6
        return {k: round(v, 4) for k, v in out.items()}
    sink = Sink()

    def event(frame: Any) -> None:
        site = site_of(frame)
        sink.count(("sync", ".item()", site[0], site[1], site[2], None, False, "steady"), "other", None, 1)
        chain_of(frame)

    # the event's frame is a program's (a sync is found at the program line that made it)
    out["sync_event"] = _best(_program_call("event(_getframe())", event=event, _getframe=sys._getframe)) * 1e6
    return {k: round(v, 4) for k, v in out.items()}


def _emit_in_a_loop() -> float:
    """Seconds :func:`perfkit.collectors.hub.emit` takes for a sync at a program line in a tight loop (into
    a scratch sink): the part of a sync event's price the program's own runs measure again
    (``hub.emit_time``; :func:`self_cost` puts the difference on the calibrated price)."""
    from perfkit.collectors import hub

    frame = _program_call("return getframe()", getframe=sys._getframe)()
    return _best_in_scratch_sink(lambda: hub.emit("sync", ".item()", frame))


def _segment_transition(clock: Any) -> float:
    """Seconds one segment transition costs a plain steady step: a call of a function wrapped by
    :func:`perfkit.collectors.segments.wrap` (the wrapper every segment-ruled function runs through, with
    ``clock`` as the session's transition callback) less the bare call, halved (entering and leaving are
    a transition each). Timing ``clock.transition`` alone priced ~0.06 µs on the H200, a tenth of the
    wrapper's own frame."""
    from perfkit.collectors import hub, segments

    top = hub.MAIN_STACK[-1] if hub.MAIN_STACK else None
    bare = _program_call("return None")
    wrapped = segments.wrap(bare, "reward" if top == "policy" else "policy")
    saved = segments.on_transition
    segments.on_transition = clock.transition
    try:
        through = _best(wrapped)
    finally:
        segments.on_transition = saved
    return max(0.0, through - _best(bare)) / 2


def _unhooked_path_of_a_hooked_call(torch: Any) -> float | None:
    """Seconds a call of an always-hooked op that does not count costs (a CUDA run counting the runtime's
    reports hooks only the ops that always sync, ``.item()``, ``.cpu()``, ...; called on a host tensor
    they are no sync and the hook hands the call on): :func:`_host_item_through_the_hook`. None where
    host tensors count (a CPU machine: :func:`_hooked_sync` prices those)."""
    from perfkit.collectors import hub

    return None if hub.count_cpu else _host_item_through_the_hook(torch)


def _host_item_through_the_hook(torch: Any) -> float | None:
    """Seconds ``.item()`` of a CPU tensor from a program line costs through perfkit's hook beyond the
    original, into a scratch sink: the whole counted-sync path where host tensors count, the hook handing
    the call on where they do not. None where ``.item()`` is not hooked."""
    item = getattr(torch.Tensor, "item", None) if torch is not None else None
    orig = getattr(item, "__perfkit_wrapped__", None)
    if orig is None:
        return None
    t = torch.ones(1)
    through = _best_in_scratch_sink(_program_call("return t.item()", t=t))
    return max(0.0, through - _best(_program_call("return orig(t)", orig=orig, t=t)))


def _warned_device_sync(torch: Any) -> float | None:
    """Seconds a sync the CUDA runtime reports costs perfkit on this machine, measured on the device: a
    boolean-mask read of a CUDA tensor (a sync no hook sees: the runtime warns, perfkit's catcher finds
    its line and counts it into a scratch sink) less the same read with torch's sync detection off.
    This holds the C++ side of the warning too, which :func:`_runtime_reported_sync`'s Python warning
    cannot (the H200: ~9 µs a warned sync against ~3.5 µs priced from Python alone). None without the
    runtime's reports, or before the program has initialised CUDA (a session's start: the session
    measures it again where its discovery window closes, :func:`device_sync_event_us`)."""
    from perfkit.collectors import hub
    from perfkit.collectors.cuda_syncs import get_mode, set_mode

    if torch is None or hub.installed_sync_source != "runtime":
        return None
    try:
        # never the first CUDA call of the process: that would make a context on the current device
        # before the program chose its own (every rank of a job on GPU 0)
        if not torch.cuda.is_initialized():
            return None
        dev = torch.device("cuda", torch.cuda.current_device())
        t = torch.ones(2, device=dev)
        m = torch.ones(2, dtype=torch.bool, device=dev)
        read = _program_call("return t[m]", t=t, m=m)
        prev = get_mode(torch)
        warned = plain = float("inf")
        for _ in range(DEVICE_ROUNDS):  # interleaved: the GPU's clocks drift under both alike
            warned = min(warned, _best_in_scratch_sink(read, DEVICE_CALLS, rounds=1))
            set_mode(torch, 0)
            try:
                plain = min(plain, _best(read, DEVICE_CALLS, rounds=1))
            finally:
                set_mode(torch, prev)
    except Exception:  # no usable device after all: the Python-side price stands
        return None
    return max(0.0, warned - plain)


def device_sync_event_us(torch: Any) -> float | None:
    """:func:`_warned_device_sync` in microseconds, for the session to call once the program has made
    its device ready (where the discovery window closes); None where it cannot be measured."""
    cost = _warned_device_sync(torch)
    return round(cost * 1e6, 4) if cost is not None else None


def _hooked_sync(torch: Any) -> float | None:
    """Seconds one counted sync costs beyond the call itself, the whole hook path: ``.item()`` of a CPU
    tensor from a program line, counted as would-sync (a CPU machine; :func:`_host_item_through_the_hook`).
    None where CPU tensors are not counted (a CUDA machine: the runtime-reported path is priced instead)."""
    from perfkit.collectors import hub

    return _host_item_through_the_hook(torch) if hub.count_cpu else None


def _runtime_reported_sync() -> float | None:
    """Seconds one sync the CUDA runtime reports costs perfkit (a CUDA run counting the runtime's own
    reports, ``hub.installed_sync_source == "runtime"``): the warning torch raises at the sync, through
    Python's warnings machinery and perfkit's catcher, to its site and count — raised here from a program
    line as torch raises it (``PyErr_WarnEx``), into a scratch sink. None where the runtime's reports are
    not counted. (The H200 measured ~9 µs more per warned sync than per plain one,
    ``reports/sync-debug-h200/``; the site-and-count part alone, which this used to be, is ~1.3 µs.)"""
    import warnings

    from perfkit.collectors import hub
    from perfkit.collectors.cuda_syncs import MESSAGE

    if hub.installed_sync_source != "runtime":
        return None
    msg = MESSAGE + " (Triggered internally at calibration)"
    return _best_in_scratch_sink(_program_call("warn(msg, UserWarning)", warn=warnings.warn, msg=msg))


class SelfMeter:
    """Accumulates the session's one-off costs (see module doc)."""

    def __init__(self) -> None:
        self.startup_s = 0.0
        self.special_s: dict[str, float] = {}
        self.special_steps: dict[str, int] = {}
        self.per_call_us: dict[str, float] = {}
        self.record_s = 0.0
        self.emit_base: tuple[int, float] = (0, 0.0)  # hub.emit_time when the session's calibration was done

    def special(self, kind: str, seconds: float) -> None:
        self.special_s[kind] = self.special_s.get(kind, 0.0) + seconds
        self.special_steps[kind] = self.special_steps.get(kind, 0) + 1

    def snapshot(self, sampled_extra_s: float, sampled_steps: int, hooked_calls: int,
                 emitted: tuple[int, float] = (0, 0.0)) -> dict[str, Any]:
        """Plain data for the session's snapshot: with the sampled steps' time beyond a typical step, how
        many steps were sampled and the hooked torch calls counted on them; ``emitted``: ``hub.emit_time``
        now (the run's sync events since :attr:`emit_base`, and the seconds spent finding their sites and
        counting them)."""
        return {"startup_s": self.startup_s, "special_s": dict(self.special_s), "special_steps": dict(self.special_steps),
                "sampled_extra_s": sampled_extra_s, "per_call_us": dict(self.per_call_us),
                "hooked_calls_per_step": hooked_calls / sampled_steps if sampled_steps else None,
                "emitted": [emitted[0] - self.emit_base[0], emitted[1] - self.emit_base[1]]}


def self_cost(meter: dict[str, Any] | None, transitions_per_step: float, syncs_per_step: float) -> SelfCost | None:
    """The record's ``self`` block from the session's meter (:meth:`SelfMeter.snapshot`) and the run's
    rates: segment transitions and sync events per steady step."""
    if not meter:
        return None
    per_call = dict(meter.get("per_call_us") or {})
    n, seconds = (meter.get("emitted") or (0, 0.0))[:2]
    if n and "sync_event" in per_call:  # the site-and-count part as this program ran it, not as the loop did
        in_situ = seconds / n * 1e6
        per_call["sync_emit_in_situ"] = round(in_situ, 4)
        per_call["sync_event"] = round(per_call["sync_event"] + max(0.0, in_situ - per_call.get("sync_emit", 0.0)), 4)
    per_step = {"segment_transition": round(transitions_per_step, 4), "sync_event": round(syncs_per_step, 4)}
    hooked = meter.get("hooked_calls_per_step")
    if hooked is not None:
        per_step["hooked_call"] = round(hooked, 4)
    ms = sum(n * per_call.get(k, 0.0) for k, n in per_step.items()) / 1e3
    return SelfCost(startup_s=round(meter["startup_s"], 6),
                    special_s={k: round(v, 6) for k, v in meter["special_s"].items()},
                    special_steps=dict(meter["special_steps"]), sampled_extra_s=round(meter["sampled_extra_s"], 6),
                    per_step_ms=round(ms, 6), per_step=per_step, per_call_us=per_call,
                    calibration="measured at the session's start (best of 3 x 200 calls each)")

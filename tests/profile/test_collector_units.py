"""Unit tests of the session's parts built directly, with injected times and no session: the step clock,
the per-sync waits, the sampler, the GPU side without CUDA and the step scheduler (the schedule:
test_sampling_schedule.py; build_run on hand-built snapshots: test_profile_rates.py)."""

from __future__ import annotations

import dataclasses
from time import perf_counter

import pytest
import torch

from perfkit.collectors import steps
from perfkit.collectors.loops import LineSampler
from perfkit.collectors.sampling import Sampler
from perfkit.collectors.steps import Boundary, StepClock
from perfkit.collectors.streams import StreamMonitor
from perfkit.collectors.sync_wait import SyncWaits


class Scheduler:
    """Stands in for the session's scheduler: sees the boundaries at or past ``next_special``."""

    def __init__(self, clock: StepClock, every: int):
        self.clock, self.every, self.seen = clock, every, []

    def __call__(self, now: float, idx: int, env) -> Boundary:
        self.seen.append(idx)
        took = now - self.clock.begin_t if self.clock.index else None  # the closing step counts as timed
        return Boundary(took, True, idx + self.every, now + 0.5)  # perfkit's own work here took 0.5 s


def test_step_clock_fast_path_times_steps_and_hands_special_ones_to_the_scheduler():
    clock = StepClock(warmup_steps=2, on_boundary=lambda *a: None)
    sched = Scheduler(clock, every=3)
    clock.on_boundary = sched
    for i in range(1, 11):
        clock.begin(None, now=float(i * i))
    assert sched.seen == [1, 4, 7, 10]
    # the fast path times the plain steps, the scheduler's decision the others; a step handed to the
    # scheduler begins after perfkit's work there (0.5 s after its boundary)
    assert clock.times == [4 - 1.5, 9 - 4, 16 - 9, 25 - 16.5, 36 - 25, 49 - 36, 64 - 49.5, 81 - 64, 100 - 81]
    assert clock.index == 10 and clock.begin_t == 100.5 and clock.next_special == 13 and clock.phase == "steady"
    assert clock.starts[0] == 1.5 and clock.starts[1] == 4.0 and len(clock.starts) == 10


def test_step_clock_applies_the_decision_whether_a_step_is_timed():
    # the scheduler sees every boundary; it says steps 1 (warm-up), 3 and 4 are not timed
    clock = StepClock(warmup_steps=1, on_boundary=lambda *a: None)
    clock.on_boundary = lambda now, idx, env: Boundary(now - clock.begin_t if clock.index else None,
                                                       clock.index not in (1, 3, 4), idx + 1, now + 0.25)
    for i in range(1, 6):
        clock.begin(None, now=10.0 * i)
    clock.last_end = 52.0
    clock.close(3.0, True)  # the run ends: the last step (5) took 3 s and counts
    # a step's time runs from the end of perfkit's work at its boundary (0.25 s) to the next boundary
    assert clock.times == [9.75, 3.0] and clock.untimed == [9.75, 9.75]  # the warm-up step is in neither
    assert clock.steady_t == 20.0 and clock.next_special == 6
    summary = clock.summary(t0=0.0)
    assert summary.total_steps == 5 and summary.step_times == [9.75, 3.0] and summary.untimed_step_times == [9.75, 9.75]
    assert summary.step_starts[:2] == [10250.0, 20250.0] and summary.last_step_end == 52000.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        summary.total_steps = 6  # type: ignore[misc]


def test_step_clock_keeps_each_early_steps_syncs():
    clock = StepClock(warmup_steps=0, on_boundary=lambda now, idx, env: Boundary(None, False, 10 ** 9, now))
    clock.begin(None, now=0.0)
    clock.trail[("k",)] = 2
    clock.begin(None, now=1.0)
    clock.begin(None, now=2.0)  # a step without syncs keeps nothing
    clock.trail[("k",)] = 1
    clock.begin(None, now=3.0)
    assert clock.kept == {1: {("k",): 2}, 3: {("k",): 1}} and clock.trail == {}
    assert steps.KEPT_TRAILS >= 1024


def test_sync_waits_keep_the_wait_and_the_host_work_after_it_on_timed_steps():
    clock = StepClock(warmup_steps=1, on_boundary=lambda *a: None)
    waits = SyncWaits(clock, timed=lambda idx: idx != 3)
    clock.index, clock.begin_t = 2, 10.0
    waits.on_wait(("a.py", 5), 10.5, 10.7)  # waits 0.2 s
    waits.on_wait(("a.py", 9), 11.0, 11.1)  # 0.3 s of host work after the first
    clock.times.append(2.0)  # step 2 closes at 12.0: 0.9 s after the second
    clock.index, clock.begin_t = 3, 12.0
    waits.on_wait(("a.py", 5), 12.5, 12.6)  # step 3 is not timed: not kept
    sites = waits.summary().sites
    assert sites[("a.py", 5)][:2] == [1, pytest_approx(0.2)]
    assert sites[("a.py", 5)][2] == pytest_approx(0.3) and sites[("a.py", 9)][2] == pytest_approx(0.9)


def test_sync_waits_sum_each_burst_of_a_site_and_sort_it_by_whether_its_waits_fit_in_its_gaps():
    from perfkit.profile.snapshot import sync_wait_record

    clock = StepClock(warmup_steps=1, on_boundary=lambda *a: None)
    waits = SyncWaits(clock, timed=lambda idx: True)
    # step 2: A three times in a row (the first waits 0.5 s for the physics), then B: one burst of A,
    # W = 0.52, G = 0.02 + 0.02 + 0.44 = 0.48 -> "over"; B: W 0.01, G 0.99 (to the step's end) -> "fit"
    clock.index, clock.begin_t = 2, 10.0
    waits.on_wait(("a.py", 5), 10.0, 10.5)
    waits.on_wait(("a.py", 5), 10.52, 10.53)
    waits.on_wait(("a.py", 5), 10.55, 10.56)
    waits.on_wait(("a.py", 9), 11.0, 11.01)
    clock.times.append(2.0)  # step 2 closes at 12.0
    # step 3: A, B, A: two bursts of A, B between them; the last A's gap is never measured (the step
    # does not close): that burst is dropped, its call scaled in from the closed bursts
    clock.index, clock.begin_t = 3, 12.0
    waits.on_wait(("a.py", 5), 12.0, 12.3)  # W 0.3, G 0.1 -> over
    waits.on_wait(("a.py", 9), 12.4, 12.41)  # W 0.01, G 0.09 -> fit
    waits.on_wait(("a.py", 5), 12.5, 12.51)  # gap unknown: dropped
    a, b = (waits.summary().sites[k] for k in (("a.py", 5), ("a.py", 9)))
    assert a[:2] == [5, pytest_approx(0.83)]
    assert a[4:] == [0.0, 0.0, 0, pytest_approx(0.82), pytest_approx(0.58), 4, 2]
    assert b[4:] == [pytest_approx(0.02), pytest_approx(1.08), 2, 0.0, 0.0, 0, 2]
    rec = sync_wait_record({("a.py", 5): a, ("a.py", 9): b}, 2)
    k = 5 / 4 / 2  # 5 calls, 4 in closed bursts, 2 timed steps
    assert rec["a.py:5"]["bursts"] == {
        "per_step": pytest_approx(2 * k), "fit": {"wait_ms": 0.0, "gap_ms": 0.0, "calls": 0.0},
        "over": {"wait_ms": pytest_approx(820 * k), "gap_ms": pytest_approx(580 * k), "calls": pytest_approx(4 * k)}}
    assert rec["a.py:5"]["calls_per_step"] == 2.5 and rec["a.py:9"]["bursts"]["fit"]["calls"] == 1.0
    # a summary without burst sums (as before them): the averages only, no "bursts"
    assert "bursts" not in sync_wait_record({("a.py", 5): a[:4]}, 2)["a.py:5"]


def pytest_approx(v):
    import pytest

    return pytest.approx(v, abs=1e-9)


def test_sampler_counts_allocations_and_hooked_calls_only_while_started():
    from perfkit.collectors import hub
    from perfkit.collectors.steps import PhaseSink

    clock = StepClock(warmup_steps=0, on_boundary=lambda *a: None)
    sampler = Sampler(torch, LineSampler(), StreamMonitor())
    sink = PhaseSink(clock, lambda: sampler.active)
    hub.acquire(sink, True)
    try:
        x = torch.zeros(4)
        torch.ones(4)  # not sampled: not counted
        clock.index = 7
        sampler.start(None, 7)
        y = x + 1  # <- an allocation
        x[0:2]  # a call of a hooked op (Tensor.__getitem__)
        sampler.stop()
        torch.ones(4)
    finally:
        hub.release(sink)
    assert sampler.done == [7]
    allocs = {k: v for k, v in sink.per_sample.items() if k[0] == "alloc"}
    assert sum(per[7] for per in allocs.values()) == 1 and y.shape == (4,)
    assert sampler.hooked_calls == 1
    summary = sampler.summary()
    assert summary.steps == [7] and summary.counted == 1 and summary.hooked_calls == 1


def test_gpu_steps_without_cuda_time_nothing_and_say_verify_was_skipped():
    from perfkit.collectors.gpu_steps import GpuSteps
    from perfkit.collectors.timing import SegmentClock

    class NoCuda:
        class cuda:
            is_available = staticmethod(lambda: False)
            is_initialized = staticmethod(lambda: False)

    gpu = GpuSteps(SegmentClock(), timing_every=7, nvtx="auto", verify=True, verify_steps=20, timeline_limit=10)
    assert gpu.setup(NoCuda, 0.0) == ["--verify needs CUDA; skipped on this machine"]
    assert not gpu.verify_holds(3, warmup_steps=2)  # no --verify window: the steps after warm-up are timed
    assert gpu.boundary(3, 1, sampled=False, period=None) is False and gpu.begin(1.0) is False
    assert gpu.summary() is None and gpu.verify_result() is None


class _Rules:  # the segment rules' part the scheduler calls (nothing to wrap here)
    def poll(self):
        pass

    def finish_policy_discovery(self):
        pass


class _Sampler:  # records what the scheduler asks of the costly collectors
    def __init__(self):
        self.active, self.calls = False, []
        self.streams = StreamMonitor()
        self.streams.installed = True

    def start(self, frame, idx):
        self.active = True
        self.calls.append(("start", idx))

    def stop(self):
        self.active = False
        self.calls.append(("stop",))

    def forget(self):
        self.calls.append(("forget",))


def test_the_scheduler_sees_special_boundaries_only_and_decides_timed_sampled_and_traced_steps():
    from perfkit.collectors.gpu_steps import GpuSteps
    from perfkit.collectors.patches import Patcher
    from perfkit.collectors.sampling import SampleSchedule
    from perfkit.collectors.scheduler import StepScheduler
    from perfkit.collectors.self_cost import SelfMeter
    from perfkit.collectors.sync_gate import SyncGate
    from perfkit.collectors.timing import SegmentClock
    from perfkit.config import Config

    cfg = Config(warmup_steps=2, timing_every=3, timeline_steps=1, sample_steps=(7,))
    clock = StepClock(cfg.warmup_steps)
    segclock = SegmentClock(clock)
    discovery = steps.Discovery(clock, Patcher(), find_steps=False, name_segments={})
    discovery.stop(wrap_found=False)  # no window in this test
    sampler, meter, seen = _Sampler(), SelfMeter(), []
    sched = StepScheduler(cfg, clock, segclock, SampleSchedule(3, 31, 1.0, cfg.sample_steps), sampler,
                          GpuSteps(segclock, timing_every=3, nvtx="off", verify=False, verify_steps=20, timeline_limit=100),
                          discovery, _Rules(), Patcher(), meter, SyncGate("every-step", dict, lambda: False, lambda: None),
                          seen.append, [])
    assert clock.on_boundary == sched.on_boundary
    decided = []
    clock.on_boundary = lambda now, idx, env: decided.append((idx, sched.on_boundary(now, idx, env))) or decided[-1][1]
    env = object()
    for i in range(1, 13):
        clock.begin(env, now=perf_counter())
    # warm-up steps 1-2, then the first steady step (traced: timeline_steps=1), every 3rd steady step
    # (3, 6, 9, 12: the GPU-timed and traced ones; here traced only) and the sampled step 7 and the one after
    assert [i for i, _ in decided] == [1, 2, 3, 4, 6, 7, 8, 9, 10, 12]
    assert sampler.calls == [("start", 7), ("stop",)]
    timed = {i - 1: b.timed for i, b in decided if b.took is not None}
    assert timed == {1: False, 2: False, 3: True, 5: True, 6: True, 7: False, 8: True, 9: True, 11: True}
    assert len(clock.times) == 12 - 2 - 1 - 1 and clock.untimed and len(clock.untimed) == 1  # step 12 still runs
    assert meter.special_steps == {"warmup": 2, "poll": 7, "sample": 1} and seen == [env] * 10
    assert sched.timed(7) is False and sched.timed(8) is True and sched.timed(2) is False


def test_loop_headers_are_read_only_from_code_that_jumps_back():
    """The sampled step reads loop headers from each program function's bytecode; a function with no
    backward jump (most of them) has none, and the raw-opcode check that skips disassembling it must
    agree with the full reading on loops of every kind."""
    from perfkit.collectors.loops import _has_backward_jump, _loop_heads

    def straight(x):
        return x + 1 if x else x - 1

    def for_loop(xs):
        s = 0
        for x in xs:
            s += x
        return s

    def while_loop(n):
        while n > 0:
            n -= 1
        return n

    def comprehension(xs):
        return [x for x in xs]

    assert not _has_backward_jump(straight.__code__) and _loop_heads(straight.__code__) == {}
    for f in (for_loop, while_loop):
        assert _has_backward_jump(f.__code__) and _loop_heads(f.__code__)
    # a comprehension's own code object (Python 3.11), or inlined in its function (3.12+, PEP 709)
    inner = [c for c in comprehension.__code__.co_consts if hasattr(c, "co_code")] or [comprehension.__code__]
    assert all(_has_backward_jump(c) and _loop_heads(c) for c in inner)


def test_the_setprofile_window_asks_about_a_runtime_function_once():
    """Python before 3.12 has no per-code disabling: the discovery window's profile function sees every
    call. A runtime function that can never matter (not a step, not program code, no segment) is asked
    about once and skipped after, as sys.monitoring disables it: MuJoCo Warp's kernel hashing at start-up
    made ~millions of such calls, and asking each again cost a 64-env make_env 8.2 s against 5.0 s plainly
    (CPU, Python 3.11). Program code is asked again from the first env step on (it may become a step's
    callee), not before it (no part of "other" exists yet)."""
    import json.decoder
    import sys

    from perfkit.collectors.patches import Patcher

    d = steps.Discovery(StepClock(2), Patcher(), find_steps=True, name_segments={})
    asked = []
    real = d._on_call
    d._on_call = lambda frame, code: asked.append(code.co_name) or real(frame, code)

    def frame_of(fn, *args):
        seen = []

        def profile(frame, event, arg):
            if event == "call" and frame.f_code is fn.__code__:
                seen.append(frame)

        sys.setprofile(profile)
        try:
            fn(*args)
        finally:
            sys.setprofile(None)
        return seen[0]

    def program_fn():
        return 1

    runtime = frame_of(json.decoder.py_scanstring, '"x"', 1)  # a pure-Python function of the standard library
    program = frame_of(program_fn)
    for _ in range(3):
        d(runtime, "call", None)
        d(program, "call", None)
    assert asked.count("py_scanstring") == 1
    assert asked.count("program_fn") == 1  # before the first step nothing can make it a part: once
    d._stepped = True  # (what the first env step sets)
    for _ in range(3):
        d(runtime, "call", None)
        d(program, "call", None)
    assert asked.count("py_scanstring") == 1
    assert asked.count("program_fn") == 4  # from the first step on it may be a step's callee: every call


def test_a_segment_on_some_gpu_timed_steps_is_scaled_by_its_host_time_not_averaged_over_them():
    """22 GPU-timed steps of a 32-step rollout: the update ran in 2 of them where its share says 0.7.
    Averaged over the timed steps its GPU time would be 2.9 times its cost; scaled by its host time per
    step over every timed step, it is its cost. A segment on every timed step keeps the plain mean."""
    from perfkit.collectors.timing import GpuSummary
    from perfkit.profile.snapshot import gpu_ms_per_step

    # per update: 40 ms of host work, 80 ms of GPU span; an update every 32 steps: 1.25 ms host a step
    gpu = GpuSummary(totals={"learner": 160.0, "physics": 44.0}, steps=22,
                     cpu_totals={"learner": 80.0, "physics": 2.2}, steps_with={"learner": 2, "physics": 22})
    assert gpu_ms_per_step(gpu, "learner", 40.0 / 32) == pytest.approx(80.0 / 32)
    assert 160.0 / 22 == pytest.approx(2.9 * 80.0 / 32, rel=0.01)  # what the plain mean said
    assert gpu_ms_per_step(gpu, "physics", 0.1) == pytest.approx(2.0)  # on every step: GPU time / timed steps
    # no host time to scale by (not measured on the timed steps, or none a step): the plain mean
    assert gpu_ms_per_step(GpuSummary(totals={"x": 6.0}, steps=3, steps_with={"x": 1}), "x", 1.0) == 2.0
    assert gpu_ms_per_step(gpu, "learner", 0.0) == pytest.approx(160.0 / 22)

"""``--verify``'s reading of the profiler's events, on synthetic events shaped like torch.profiler's
``FunctionEvent`` (name, time_range, device_type, thread, stack, cpu_parent): each range once, every
hooked call with its runtime syncs, every runtime sync outside the hooks with the line that made it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import os

import torch
from torch.autograd import DeviceType

from perfkit.collectors.verify import SYNC_PREFIX, analyze, range_name


TORCH_DIR = os.path.dirname(torch.__file__)


@dataclass
class _Range:
    start: float
    end: float


@dataclass
class Ev:
    name: str
    start: float
    end: float
    device_type: Any = DeviceType.CPU
    thread: int = 1
    stack: list = field(default_factory=list)
    cpu_parent: Any = None

    @property
    def time_range(self):
        return _Range(self.start, self.end)


def _gpu_copy(e: Ev) -> Ev:
    """The GPU-side copy of a record_function range the profiler also lists (gpu_user_annotation)."""
    return Ev(e.name, e.start + 0.5, e.end + 0.5, device_type=DeviceType.CUDA, thread=0)


def _window(steps=4, per_step=5, gpu_copies=True):
    """``steps`` steps of 100 µs, each with ``per_step`` hooked .item() ranges holding one
    cudaStreamSynchronize each: the train_naive shape the issue measured."""
    evs = []
    for k in range(steps):
        t = 1000.0 + 100.0 * k
        step = Ev(f"perfkit.step#{k + 10}", t, t + 100.0)
        evs.append(step)
        for j in range(per_step):
            s0 = t + 5.0 + 15.0 * j
            rng = Ev(range_name(".item()", ("/w/train.py", 40 + j)), s0, s0 + 10.0)
            evs += [rng, Ev("cudaStreamSynchronize", s0 + 2.0, s0 + 8.0, cpu_parent=rng)]
            if gpu_copies:
                evs.append(_gpu_copy(rng))
        if gpu_copies:
            evs.append(_gpu_copy(step))
    return evs


def test_each_range_counts_once_and_the_step_count_is_the_windows():
    v = analyze(_window(steps=4, per_step=5))
    assert v["steps"] == 4  # not 8: the GPU-side copies of the step ranges are not steps
    assert v["hooked_syncs"] == 20 and v["runtime_syncs"] == 20
    assert v["runtime_per_step"] == 5.0
    assert v["unattributed"] == 0 and v["hooked_without_runtime_sync"] == 0


def test_the_same_event_listed_twice_is_one():
    evs = _window(steps=2, per_step=1, gpu_copies=False)
    v = analyze(evs + evs)
    assert (v["steps"], v["hooked_syncs"], v["runtime_syncs"]) == (2, 2, 2)


def test_per_site_rows_say_how_many_runtime_syncs_each_hooked_call_made():
    v = analyze(_window(steps=3, per_step=2))
    rows = {(s["site"], s["op"]): s for s in v["sites"]}
    assert set(rows) == {("/w/train.py:40", ".item()"), ("/w/train.py:41", ".item()")}
    for s in rows.values():
        assert (s["hooked"], s["runtime_syncs"], s["hooked_without_runtime_sync"], s["runtime_per_step"]) == (3, 3, 0, 1.0)


def test_a_hooked_call_without_a_runtime_sync_is_a_false_report():
    evs = _window(steps=2, per_step=1, gpu_copies=False)
    evs.append(Ev(range_name("torch.tensor(list, device=cuda)", ("/w/env.py", 7)), 1050.0, 1060.0))  # no runtime call inside
    v = analyze(evs)
    assert v["hooked_syncs"] == 3 and v["hooked_without_runtime_sync"] == 1
    row = next(s for s in v["sites"] if s["site"] == "/w/env.py:7")
    assert (row["hooked"], row["runtime_syncs"], row["hooked_without_runtime_sync"]) == (1, 0, 1)


def test_an_unattributed_sync_names_the_line_that_made_it():
    evs = _window(steps=2, per_step=1, gpu_copies=False)
    op = Ev("aten::_local_scalar_dense", 1060.0, 1070.0,
            stack=[f"{TORCH_DIR}/distributions/distribution.py(76): __init__",
                   "/w/ppo.py(88): get_action", "/w/ppo.py(120): <module>"])
    evs += [op, Ev("cudaStreamSynchronize", 1062.0, 1068.0, cpu_parent=op),
            Ev("cudaStreamSynchronize", 1162.0, 1168.0, stack=["/w/ppo.py(88): get_action"])]
    v = analyze(evs)
    assert v["unattributed"] == 2 and v["runtime_syncs"] == 4
    (u,) = v["unattributed_sites"]
    assert (u["site"], u["function"], u["count"], u["apis"]) == ("/w/ppo.py:88", "get_action", 2, {"cudaStreamSynchronize": 2})
    assert v["by_api"]["cudaStreamSynchronize"] == {"total": 4, "attributed": 2}


def test_a_sync_without_any_stack_is_still_counted():
    evs = _window(steps=1, per_step=0, gpu_copies=False) + [Ev("cudaDeviceSynchronize", 1010.0, 1011.0)]
    v = analyze(evs)
    assert v["unattributed"] == 1 and v["unattributed_sites"][0]["site"] == "(no Python stack)"


def test_syncs_outside_the_steps_are_not_in_the_window():
    evs = _window(steps=2, per_step=1, gpu_copies=False)
    evs += [Ev("cudaDeviceSynchronize", 10.0, 11.0), Ev("cudaStreamSynchronize", 5000.0, 5001.0)]
    v = analyze(evs)
    assert v["runtime_syncs"] == 2 and v["unattributed"] == 0


def test_a_runtime_sync_on_another_thread_is_matched_to_that_threads_hook():
    evs = _window(steps=1, per_step=0, gpu_copies=False)
    evs += [Ev(range_name(".cpu()", ("/w/log.py", 3)), 1010.0, 1030.0, thread=2),
            Ev("cudaStreamSynchronize", 1012.0, 1014.0, thread=2)]
    v = analyze(evs)
    assert v["unattributed"] == 0 and v["sites"][0]["site"] == "/w/log.py:3" and v["sites"][0]["runtime_syncs"] == 1


def test_range_names_carry_op_and_site():
    assert range_name(".item()", None) == SYNC_PREFIX + ".item()"
    assert range_name("t[i] = scalar", ("/w/x.py", 9)).endswith("t[i] = scalar@/w/x.py:9")


def test_syncs_the_runtime_reported_outside_the_hooks_are_attributed_to_their_line():
    """On CUDA an index or a copy has no hook: perfkit counts the runtime's own report of the sync at
    its line (collectors/cuda_syncs.py); verify matches those to the runtime syncs at the same line, and
    counts a report with no runtime sync there as a false report."""
    evs = _window(steps=2, per_step=1, gpu_copies=False)
    for t in (1060.0, 1160.0):
        evs.append(Ev("cudaStreamSynchronize", t, t + 4.0, stack=["/w/ppo.py(88): get_action"]))
    evs.append(Ev("cudaStreamSynchronize", 1170.0, 1174.0, stack=["/w/ppo.py(91): get_action"]))
    v = analyze(evs, reported={"/w/ppo.py:88": 2, "/w/env.py:7": 1})
    assert (v["runtime_syncs"], v["hooked_syncs"], v["runtime_reported"], v["unattributed"]) == (5, 2, 2, 1)
    assert v["reported_without_runtime_sync"] == 1
    assert [u["site"] for u in v["unattributed_sites"]] == ["/w/ppo.py:91"]
    rows = {r["site"]: r for r in v["reported_sites"]}
    assert rows["/w/ppo.py:88"]["runtime_syncs"] == 2 and rows["/w/env.py:7"]["reported_without_runtime_sync"] == 1


def test_a_runtime_sync_without_a_stack_is_matched_to_a_report_by_count():
    evs = _window(steps=2, per_step=1, gpu_copies=False)
    evs += [Ev("cudaStreamSynchronize", 1060.0, 1064.0), Ev("cudaStreamSynchronize", 1160.0, 1164.0)]
    v = analyze(evs, reported={"/w/env.py:7": 2})
    assert (v["unattributed"], v["runtime_reported"], v["reported_without_runtime_sync"]) == (0, 2, 0)


def test_past_its_steps_the_window_closes_at_a_whole_number_of_periods():
    """Once-per-iteration syncs (the update, the logger) are in a window cut short at the record's rate
    only if it holds whole periods (the H200 run: 20 steps against a 24-step rsl_rl period read the
    update's .item() as 0/step, the record 0.83); a short run's window runs to its end."""
    from perfkit.collectors.verify import window_full

    assert not window_full(63, 64, None) and window_full(64, 64, None)
    assert not window_full(64, 64, 24) and not window_full(71, 64, 24) and window_full(72, 64, 24)
    assert window_full(64, 64, 32) and window_full(64, 64, 1)
    assert not window_full(255, 64, 1000) and window_full(256, 64, 1000)  # a 1000-step rollout: capped


class _FakeProfiler:
    """torch.profiler's shape as the Verifier uses it, holding the events a test gives it."""

    def __init__(self, events):
        self._events = events

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def events(self):
        return self._events


def _fake_torch(events):
    class FakeTorch:
        class profiler:
            class ProfilerActivity:
                CPU, CUDA = "cpu", "cuda"

            profile = staticmethod(lambda **kw: _FakeProfiler(events))
            record_function = staticmethod(lambda name: _FakeProfiler([]))

    return FakeTorch


def test_the_window_opens_at_the_first_steady_step_and_says_whether_it_ended_with_the_run():
    from perfkit.collectors.verify import Verifier

    v = Verifier(_fake_torch(_window(steps=2)), max_steps=4)
    v.start(6)
    for idx in range(6, 13):
        v.boundary(idx, period=3)
    assert v.end_idx == 12 and v.prof is None  # 6 steps: past 4, at a whole number of 3-step periods
    assert v.holds(6) and v.holds(12) and not v.holds(5) and not v.holds(13)
    assert v.result()["ended_with_run"] is False
    short = Verifier(_fake_torch(_window(steps=2)), max_steps=64)
    short.start(6)
    for idx in range(6, 9):
        short.boundary(idx, period=3)
    short.stop()  # the session ends: the last step ran on to the end of the run
    assert short.result()["ended_with_run"] is True and short.holds(100)


def test_every_runtime_sync_is_kept_by_its_site_and_step():
    evs = _window(steps=2, per_step=1, gpu_copies=False)  # .item() at /w/train.py:40 in steps 10 and 11
    lib = Ev("aten::nonzero", 1070.0, 1080.0, stack=["/w/env.py(9): step"])
    evs += [lib, Ev("cudaStreamSynchronize", 1072.0, 1075.0, cpu_parent=lib),
            Ev("cudaStreamSynchronize", 1160.0, 1164.0)]  # no stack: matched to the report at env.py:7
    v = analyze(evs, reported={"/w/env.py:7": 1})
    assert (v["first_step"], v["last_step"]) == (10, 11)
    train = next(k for k in v["by_step"] if k.endswith("train.py:40"))
    env9 = next(k for k in v["by_step"] if k.endswith("env.py:9"))
    env7 = next(k for k in v["by_step"] if k.endswith("env.py:7"))
    assert v["by_step"][train] == {10: 1, 11: 1} and v["by_step"][env9] == {10: 1} and v["by_step"][env7] == {11: 1}


def test_a_runtime_sync_without_a_stack_is_matched_to_a_report_of_its_own_step():
    """Matched by count alone, the runtime's frameless syncs went to the reported sites in the events'
    order: on the H200 six sites of the manager env read 0 runtime syncs per step in the agreement
    (their syncs given to other sites' steps) while every count matched."""
    evs = _window(steps=3, per_step=1, gpu_copies=False)  # steps 10, 11, 12
    evs += [Ev("cudaStreamSynchronize", 1260.0, 1261.0), Ev("cudaStreamSynchronize", 1262.0, 1263.0),
            Ev("cudaStreamSynchronize", 1060.0, 1061.0)]  # listed out of time order
    v = analyze(evs, reported={"/w/a.py:1": 1, "/w/b.py:2": 2},
                reported_steps={"/w/a.py:1": {10: 1}, "/w/b.py:2": {12: 2}})
    assert v["by_step"]["/w/a.py:1"] == {10: 1} and v["by_step"]["/w/b.py:2"] == {12: 2}
    assert (v["unattributed"], v["runtime_reported"], v["reported_without_runtime_sync"]) == (0, 3, 0)
    assert sum(sum(d.values()) for d in v["by_step"].values()) == v["runtime_syncs"]
    # a report with no frameless sync in its step stays a report without one
    w = analyze(evs, reported={"/w/a.py:1": 2}, reported_steps={"/w/a.py:1": {10: 1, 11: 1}})
    assert w["reported_without_runtime_sync"] == 1 and w["unattributed"] == 2


def test_a_hooked_call_at_a_reported_line_does_not_stand_in_for_the_reports_own_sync():
    """A line with a hooked .item() and a runtime-reported sync (the same line, two ops): the hooked
    call's sync is the hook's; the frameless one is matched to the report."""
    evs = _window(steps=1, per_step=1, gpu_copies=False)  # .item() at /w/train.py:40, hooked, step 10
    evs.append(Ev("cudaStreamSynchronize", 1060.0, 1061.0))  # frameless, step 10
    v = analyze(evs, reported={"/w/train.py:40": 1}, reported_steps={"/w/train.py:40": {10: 1}})
    assert (v["unattributed"], v["runtime_reported"], v["reported_without_runtime_sync"]) == (0, 1, 0)
    assert v["by_step"]["/w/train.py:40"] == {10: 2}

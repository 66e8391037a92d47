"""The discovery window through the interpreter's own hook (``sys.monitoring`` on Python 3.12+, the
``sys.setprofile`` function before): what it finds must not depend on what it stops looking at.

On 3.12 program code with nothing to do is disabled until the first env step (imports and set-up make
nearly all first calls: a ``torch._dynamo`` import inside ``Adam()`` cost ~1 s of start-up under the
window on the H200 when every library call reached perfkit) and reported again from that step on; only
the codes a frame was opened for report their returns. Neither may lose a part of "other" or leave a
segment open. Runs on either Python: each checks its own backend."""
from __future__ import annotations

import sys

import pytest

from perfkit.collectors import segments
from perfkit.collectors.patches import Patcher
from perfkit.collectors.steps import Discovery, StepClock

MONITORING = hasattr(sys, "monitoring")


def helper(x):
    return x + 1


def compute_reward(x):
    return segments.current()


class Env:
    num_envs = 4

    def __init__(self):
        self.rewards_in = []

    def step(self, x):
        self.rewards_in.append(compute_reward(x))
        return helper(x)


def _open(d: Discovery):
    asked = []
    real = d._on_call
    d._on_call = lambda frame, code: asked.append(code.co_name) or real(frame, code)
    assert d.start()
    return asked


def _close(d: Discovery):
    d.stop(wrap_found=False)
    if MONITORING:
        assert sys.monitoring.get_tool(sys.monitoring.PROFILER_ID) is None
    assert sys.getprofile() is None


def test_code_first_called_before_the_first_step_is_a_part_of_the_step_after_it():
    d = Discovery(StepClock(2), Patcher(), find_steps=True, name_segments={})
    asked = _open(d)
    try:
        for i in range(50):  # set-up: the helper's first calls, nothing open, no step yet
            helper(i)
        before = asked.count("helper")
        env = Env()
        loop = [env.step(i) for i in range(3)]
    finally:
        _close(d)
    assert loop == [1, 2, 3]
    labels = {code.co_name: label for code, label in d._callees.items()}
    assert labels.get("helper") == "other/helper"  # found below the step although disabled before it
    assert env.rewards_in == ["reward"] * 3  # the segment was pushed inside the step ...
    assert segments.current() != "reward" and not d._open  # ... and popped at its return
    assert before == 1  # asked once, then passed over (disabled, on sys.monitoring) until the first step


def test_a_frame_opened_before_a_step_pops_its_segment_at_return_and_on_an_exception():
    d = Discovery(StepClock(2), Patcher(), find_steps=True, name_segments={})
    _open(d)

    def compute_reward_fails():
        raise ValueError("boom")

    try:
        seen = compute_reward(0)
        with pytest.raises(ValueError):
            compute_reward_fails()
        after = segments.current()
    finally:
        _close(d)
    assert seen == "reward" and after != "reward" and not d._open


@pytest.mark.skipif(not MONITORING, reason="sys.monitoring is Python 3.12+")
def test_monitoring_leaves_no_local_events_behind():
    d = Discovery(StepClock(2), Patcher(), find_steps=True, name_segments={})
    _open(d)
    try:
        compute_reward(0)
        env = Env()
        env.step(1)
    finally:
        _close(d)
    mon = sys.monitoring
    mon.use_tool_id(mon.PROFILER_ID, "test")
    try:
        for fn in (compute_reward, Env.step, helper):
            assert mon.get_local_events(mon.PROFILER_ID, fn.__code__) == 0
    finally:
        mon.free_tool_id(mon.PROFILER_ID)


_MODULE = """\
import sys

def made_at_import(x):
    return x

made_at_import(1)
EVENTS = sys.monitoring.get_events(sys.monitoring.PROFILER_ID) if hasattr(sys, "monitoring") else None

def later(x):
    return x
"""


def test_an_import_runs_unobserved_and_the_window_is_back_after_it(tmp_path, monkeypatch):
    """A module's code is nobody's step: while a new module loads the window looks away (on 3.12 its
    global events are off — on the CPU a ``torch._dynamo`` and sympy import with an ``Adam()`` ran ~0.16 s
    slower under a session with them on), and it looks again once the import returns."""
    (tmp_path / "pk_window_mod.py").write_text(_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    d = Discovery(StepClock(2), Patcher(), find_steps=True, name_segments={})
    asked = _open(d)
    try:
        pk_window_mod = __import__("pk_window_mod")  # an import statement's own call (written out: no module here to install)
        pk_window_mod.later(1)
        events_after = sys.monitoring.get_events(sys.monitoring.PROFILER_ID) if MONITORING else None
    finally:
        _close(d)
        sys.modules.pop("pk_window_mod", None)
    assert "made_at_import" not in asked and "<module>" not in asked
    assert "later" in asked
    if MONITORING:
        assert pk_window_mod.EVENTS == 0 and events_after != 0

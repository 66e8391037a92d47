"""perfkit reports its own cost (issue 23.4): every record has a ``self`` block, plausible on a CPU run;
and closing the discovery window wraps functions where they were imported in one pass (issue 23.3)."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from perfkit.collectors.patches import Patcher
from perfkit.record import Run, SelfCost
from perfkit.renderers.console import self_line
from perfkit.profile.session import Session

from _helpers import AddEnv


class Env(AddEnv):
    def step(self, a):
        x = super().step(a)
        x[0:2].sum()  # a hooked call (Tensor.__getitem__) that cannot sync
        return x


def _run():
    from time import perf_counter

    env, a = Env(), torch.ones(8)
    w = torch.nn.Parameter(torch.ones(8))
    with Session(warmup_steps=5, count_cpu_tensors=True) as s:
        for _ in range(3):
            for _ in range(24):
                env.step(a)
            loss = (w * 2).sum()
            loss.backward()
            loss.item()
    s.t_after = perf_counter()
    return s


def test_every_record_has_a_plausible_self_block(tmp_path):
    s = _run()
    own = s.run.self
    assert isinstance(own, SelfCost)
    assert own.startup_s > 0 and own.record_s > 0
    assert set(own.per_call_us) == {"hooked_call", "segment_transition", "sync_event", "sync_emit", "sync_emit_in_situ"}
    assert all(v >= 0 for v in own.per_call_us.values())
    # the site-and-count part as the program ran it replaces the calibration loop's price of it
    pc = own.per_call_us
    assert pc["sync_event"] >= s.meter.per_call_us["sync_event"]
    assert pc["sync_event"] == pytest.approx(
        s.meter.per_call_us["sync_event"] + max(0.0, pc["sync_emit_in_situ"] - pc["sync_emit"]), abs=2e-4)
    # the hooked calls are counted on the sampled steps: one slice read per step (the learner's calls aside)
    assert own.per_step["hooked_call"] >= 1
    assert own.per_step["sync_event"] == pytest.approx(s.run.syncs_per_step, abs=1e-3)
    assert 0 < own.per_step_ms < s.run.step_ms["mean"]
    # every special boundary is one of the kinds, counted once; they add up to what the session timed
    assert own.special_steps["discovery_close"] == 1 and own.special_steps["warmup"] == 5
    # (the first steady step's boundary closes the discovery window too, and counts as that)
    assert own.special_steps["sample"] == len(s.run.sampling["steps"]) - 1
    assert sum(own.special_steps.values()) == sum(s.meter.special_steps.values())
    assert sum(own.special_s.values()) == pytest.approx(sum(s.meter.special_s.values()), abs=1e-5)
    assert own.one_off_s >= own.startup_total_s > 0
    # the special boundaries and the timed steps are disjoint spans of the session's own time
    assert sum(own.special_s.values()) + sum(s.run.step_times_ms) / 1e3 <= s.t_after - s.t_start
    # it survives the record's round trip, typed
    back = Run.load(s.run.save(tmp_path / "r.json"))
    assert back.self == own
    assert self_line(back).startswith("perfkit added ~") and "s of start-up to this run" in self_line(back)


def test_an_older_record_has_no_self_block():
    d = Run().to_dict()
    del d["self"]
    assert Run.from_dict(d).self is None and self_line(Run.from_dict(d)) is None


def test_the_calibration_does_not_count_its_own_syncs():
    s = _run()
    assert not s.run.outside_steps.setup


def test_set_everywhere_in_a_batch_replaces_every_holder_in_one_pass():
    def f():
        return 1

    owner = types.ModuleType("_pk_owner")
    owner.f = f
    holder = types.ModuleType("_pk_holder")
    holder.g = f  # `from _pk_owner import f as g`
    sys.modules.update({"_pk_owner": owner, "_pk_holder": holder})
    try:
        p = Patcher()
        with p.batch():
            p.set_everywhere(owner, "f", "new")
            assert owner.f == "new" and holder.g is f  # the other holders wait for the block's end
        assert holder.g == "new"
        p.undo()
        assert owner.f is f and holder.g is f
    finally:
        del sys.modules["_pk_owner"], sys.modules["_pk_holder"]


def test_a_sync_the_runtime_reports_is_priced_through_the_whole_warning_path(monkeypatch, capsys):
    """On CUDA a counted sync costs the warning torch raises, Python's warnings machinery and perfkit's
    catcher (~9 µs on the H200), not only its site-and-count (~1.3 µs, what the calibration priced before:
    the manager env's record estimated 0.12 ms/step for 90 syncs). The runtime's catcher is installed as a
    CUDA run installs it; the warning is raised as torch raises it, from a program line."""
    import warnings

    from perfkit.collectors import hub, self_cost
    from perfkit.collectors.cuda_syncs import MESSAGE, RuntimeSyncs

    reached = []
    real = hub.Sink()
    rs = RuntimeSyncs(lambda frame: (reached.append(frame.f_code.co_filename), hub._runtime_sync(frame)),
                      hub._inside_hook, hub._count_in_hook)
    monkeypatch.setattr(warnings, "_showwarnmsg", rs._showwarnmsg(warnings._showwarnmsg))
    monkeypatch.setattr(hub, "installed_sync_source", "runtime")
    monkeypatch.setattr(hub, "sinks", [real])
    monkeypatch.setattr(hub, "sync_sinks", [real])
    with warnings.catch_warnings():
        warnings.filterwarnings("always", message=MESSAGE, category=UserWarning)
        cost = self_cost._runtime_reported_sync()
    assert cost is not None and cost > 0
    assert len(reached) == self_cost.CALLS * self_cost.ROUNDS  # every call went through the catcher ...
    assert set(reached) == {self_cost._PROGRAM_FILE}  # ... from the program line that raised it
    assert not real.counts  # ... into a scratch sink, not the session's
    assert MESSAGE not in capsys.readouterr().err  # and the warnings never reach the program's stderr
    monkeypatch.setattr(hub, "installed_sync_source", "hooks")
    assert self_cost._runtime_reported_sync() is None  # where the runtime's reports are not counted


def test_a_segment_transition_is_priced_through_the_segment_wrapper():
    """The price of a transition is that of the wrapper every segment-ruled call runs through (its frame,
    its stack, the session's callback), not of the clock's callback alone (0.06 µs on the H200 against a
    wrapper's ~1 µs): each calibration call enters and leaves a segment through ``segments.wrap``."""
    from perfkit.collectors import segments, self_cost

    seen = []

    class Clock:
        def transition(self, name):
            seen.append(name)

    before = segments.on_transition
    cost = self_cost._segment_transition(Clock())
    assert cost >= 0
    assert len(seen) == 2 * self_cost.CALLS * self_cost.ROUNDS  # in and out of the segment, every call
    assert set(seen) == {"policy", "other"}
    assert segments.on_transition is before  # the session's callback is back


def test_a_cuda_run_prices_its_always_sync_hooks_on_calls_that_do_not_count(monkeypatch):
    """On CUDA only the always-sync ops are hooked (``.item()``, ``.cpu()``, ...), and a manager env calls
    them on host tensors far more often than it syncs (222 hooked calls against 90 syncs a step on the
    H200): that path is priced as ``hooked_call``; on a CPU machine, where host tensors count, it is not."""
    from perfkit.collectors import hub, self_cost

    with Session(count_cpu_tensors=True):
        assert self_cost._unhooked_path_of_a_hooked_call(torch) is None  # host tensors count here
        monkeypatch.setattr(hub, "count_cpu", False)
        sink = hub.sinks[0] if hub.sinks else None
        before = dict(sink.counts) if sink is not None and hasattr(sink, "counts") else None
        cost = self_cost._unhooked_path_of_a_hooked_call(torch)
        assert cost is not None and cost >= 0
        if before is not None:
            assert dict(sink.counts) == before  # nothing counted


@pytest.mark.gpu
def test_a_runtime_reported_sync_is_priced_on_the_device():
    """On CUDA the sync event's price is measured on the device, the C++ side of torch's warning included:
    a mask read warned and caught against the same read with the sync detection off, into a scratch sink."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from perfkit.collectors import hub, self_cost

    with Session() as s:
        if hub.installed_sync_source != "runtime":
            pytest.skip("the runtime's sync reports are not installed here")
        torch.zeros(1, device="cuda")  # the program makes its device ready (the calibration never does)
        cost = self_cost._warned_device_sync(torch)
        mode = torch.cuda.get_sync_debug_mode()
        per_call = self_cost.calibrate(torch)
    assert cost is not None and cost > 0
    assert mode != 0  # the session's sync detection is back on after the unwarned half
    assert per_call["sync_event"] > 0 and "hooked_call" in per_call
    assert not s.run.outside_steps.setup  # the calibration's syncs were not counted


def test_the_device_price_never_makes_the_first_cuda_context(monkeypatch):
    """Where CUDA is not initialised yet (a session's start, before the program picked its device: every
    rank of a job would get a context on GPU 0) the on-device price is not taken."""
    from perfkit.collectors import hub, self_cost

    monkeypatch.setattr(hub, "installed_sync_source", "runtime")
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    touched = []
    monkeypatch.setattr(torch.cuda, "current_device", lambda: touched.append(1) or 0)
    assert self_cost._warned_device_sync(torch) is None and self_cost.device_sync_event_us(torch) is None
    assert not touched


def test_start_up_counts_perfkits_own_launch_but_not_the_programs_torch_import(tmp_path, monkeypatch):
    """``perfkit profile`` imports itself, checks the script and builds the session before the program
    runs: that is start-up perfkit adds (the self block's ``startup_s``). Importing torch at the session's
    start is not: the program imports it too. A session the program opens itself counts from its start."""
    from time import perf_counter

    import perfkit
    from perfkit.profile import runner

    script = tmp_path / "prog.py"
    script.write_text("print('ran')\n")
    monkeypatch.setattr(perfkit, "IMPORTED_AT", perf_counter() - 3.0)  # perfkit began 3 s before
    launched = runner.run(str(script), session_kwargs={"warmup_steps": 0}).run.self.startup_s
    assert 3.0 <= launched < 3.0 + 2.0
    own = Session(warmup_steps=0)
    with own:
        pass
    assert own.run.self.startup_s < 2.0  # no launch before it: the session's own start only

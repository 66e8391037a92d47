"""The cost model: deterministic runs and profiles in, expected estimates out."""

from __future__ import annotations

import json

import pytest

from perfkit.pricing.cost import MIN_STEP_FRACTION, ProfileError, load_profile, predict, price_run, save_profile
from perfkit.pricing.machine_profile import SCHEMA, build_profile, reference_profile
from perfkit.record import Finding, Pricing, Run, SegmentStats

GPU_PROFILE = {
    "schema": SCHEMA, "key": "test-gpu", "source": "test GPU profile", "probes": {},
    "costs": {
        "sync_idle_ms": 0.030, "sync_queued_extra_ms": 0.010, "tensor_repr_ms": 0.200,
        "d2h_latency_ms": 0.015, "d2h_gbps": 10.0, "h2d_latency_ms": 0.020, "h2d_gbps": 5.0,
        "alloc_cached_ms": 0.004, "launch_torch_ms": 0.005, "pyloop_iteration_ms": 0.018, "pyloop_op_ms": 0.006,
    },
}


def run_of(*findings, step_ms=10.0, gpu=None, num_envs=1000, sps=None, extra=None, segments=None):
    segs = {"physics": SegmentStats(gpu_ms_per_step=gpu)} if gpu is not None else {"physics": SegmentStats()}
    segs.update(segments or {})
    return Run(steps=100, num_envs=num_envs, wall_s=step_ms / 10, step_ms={"p50": step_ms},
               sps=sps if sps is not None else num_envs * 1000.0 / step_ms, segments=segs,
               findings=list(findings), extra=dict(extra or {}))


def sync(op=".item()", per_step=1.0, line=1, **kw):
    return Finding("sync", op, "train.py", line, per_step=per_step, count=int(per_step * 100), **kw)


@pytest.fixture(autouse=True)
def _empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


def test_sync_without_gpu_timing_costs_the_round_trip():
    run = price_run(run_of(sync(per_step=2.0)), GPU_PROFILE)
    assert run.findings[0].est_ms_per_step == pytest.approx(2 * 0.030)


def test_sync_behind_a_busy_queue_pays_the_drain():
    # GPU busy 4 of 10 ms; two syncs per step share the drainable 4 ms of GPU work
    run = price_run(run_of(sync(per_step=1.0, line=1), sync(per_step=1.0, line=2), gpu=4.0), GPU_PROFILE)
    busy = 0.4
    per_call = busy * 0.010 + (1 - busy) * 0.030 + 4.0 / 2
    assert [f.est_ms_per_step for f in run.findings] == pytest.approx([per_call, per_call])
    assert run.pricing.prices["queue_full_fraction"] == pytest.approx(0.4)


def test_a_host_bound_loop_drains_nothing():
    # CUDA-event spans of host-bound segments cover GPU idle time: they are no backlog and no floor
    segs = {"policy": SegmentStats(gpu_ms_per_step=6.0, cpu_ms_per_step=6.0),
            "logging": SegmentStats(gpu_ms_per_step=2.9, cpu_ms_per_step=3.0)}
    run = price_run(run_of(sync(per_step=2.0, segment="logging"), gpu=1.0, segments=segs), GPU_PROFILE)
    busy = 1.0 / 10  # only physics (1 ms on the GPU, nothing on the host) outruns the host
    raw = 2 * (busy * 0.010 + (1 - busy) * 0.030 + 1.0 / 2)
    assert run.findings[0].est_ms_per_step == pytest.approx(raw)
    assert run.pricing.prices["gpu_backlog_ms_per_step"] == pytest.approx(1.0)
    assert predict(run, saved_ms=100.0)["step_ms_after"] == pytest.approx(1.0)
    # the same sync outside every recorded segment sits in the unsegmented rest of the step, 10 - 9 = 1 ms:
    # its price is bounded by that measured time, and says so
    rest = price_run(run_of(sync(per_step=2.0), gpu=1.0, segments=segs), GPU_PROFILE)
    assert rest.findings[0].est_ms_per_step == pytest.approx(1.0)
    src = rest.pricing.prices["source_of"]["train.py:1 .item()"]
    assert src["unbounded_ms"] == pytest.approx(raw) and src["bucket"] == "(unsegmented)"
    assert "bounded by the unsegmented rest of the step measured 1 ms/step" in src["label"]


def test_all_syncs_together_never_drain_more_than_a_step_of_gpu_work():
    findings = [sync(per_step=5.0, line=i) for i in range(4)]  # 20 syncs per step
    run = price_run(run_of(*findings, step_ms=10.0, gpu=9.0), GPU_PROFILE)
    total = sum(f.est_ms_per_step for f in run.findings)
    assert total == pytest.approx(20 * (0.9 * 0.010 + 0.1 * 0.030) + 9.0)


def test_op_specific_extras():
    findings = [
        sync("print(t)", line=1),  # the values copied to the host, then formatted there
        sync(".cpu()", line=2, bytes=100 * 40_000_000),  # 40 MB per call
        sync("torch.tensor(list, device=cuda)", line=3),
    ]
    run = price_run(run_of(*findings), GPU_PROFILE)
    est = [f.est_ms_per_step for f in run.findings]
    assert est[0] == pytest.approx(0.030 + 0.200 + 0.015 + 4 / 10e9 * 1e3)
    assert est[1] == pytest.approx(0.030 + 0.015 + 40e6 / 10e9 * 1e3)  # + 4 ms of copying
    assert est[2] == pytest.approx(0.030 + 0.020 + 4 / 5e9 * 1e3)


# the copy ops whose labels no substring list once matched (issue 22): each gets its copy's price
@pytest.mark.parametrize("op,direction", [
    ('.to("cpu")', "d2h"), ("cpu_t.copy_(cuda_t)", "d2h"), ("np.asarray(t)", "d2h"), ("wp.array.list()", "d2h"),
    ('.to("cuda")', "h2d"), ("cuda_t.copy_(cpu_t)", "h2d"), (".cuda()", "h2d"), ("t[idx] = scalar", "h2d"),
    ("t[i] = scalar", "h2d"),
])
def test_every_copy_op_is_priced_as_its_copy(op, direction):
    run = price_run(run_of(sync(op, bytes=100 * 1_000_000)), GPU_PROFILE)  # 1 MB per call
    lat, gbps = (0.015, 10.0) if direction == "d2h" else (0.020, 5.0)
    assert run.findings[0].est_ms_per_step == pytest.approx(0.030 + lat + 1e6 / (gbps * 1e9) * 1e3)
    assert f"+ {direction.upper()} copy" in run.pricing.prices["how"][f"train.py:1 {op}"]


def _table_ops():
    from perfkit.collectors import hub

    return sorted(hub.sync_ops().items())


# every op of every patch table (and the runtime's names), not a list that can miss a new one
@pytest.mark.parametrize("op,sync_op", _table_ops(), ids=[label for label, _ in _table_ops()])
def test_every_op_of_the_tables_is_priced_by_its_table_row(op, sync_op):
    run = price_run(run_of(sync(op, bytes=100 * 1_000_000)), GPU_PROFILE)  # 1 MB per call
    how = run.pricing.prices["how"][f"train.py:1 {op}"]
    copy = {"d2h": 0.015 + 1e6 / 10e9 * 1e3, "h2d": 0.020 + 1e6 / 5e9 * 1e3}.get(sync_op.price, 0.0)
    extra = 0.200 if "print" in op else 0.0  # the tensor's repr (test_op_specific_extras)
    assert run.findings[0].est_ms_per_step == pytest.approx(0.030 + copy + extra)
    assert ("copy" in how) == (sync_op.price != "round trip"), how


def test_a_sync_that_copies_nothing_pays_only_its_round_trip():
    run = price_run(run_of(sync(".nonzero()"), sync("torch.cuda.synchronize()", line=2)), GPU_PROFILE)
    assert [f.est_ms_per_step for f in run.findings] == pytest.approx([0.030, 0.030])


def test_alloc_loop_and_stream():
    findings = [
        Finding("alloc", "torch.zeros", "train.py", 5, per_step=10.0),
        Finding("loop", "for-loop over envs", "train.py", 6, per_step=1000.0),
        Finding("loop", "for-loop over envs", "train.py", 9, per_step=500.0),
        Finding("stream", "wp.launch on another stream", "train.py", 7, per_step=1.0),
    ]
    run = price_run(run_of(*findings, step_ms=100.0, extra={"loop_ops": {"train.py:9": 4}}), GPU_PROFILE)
    est = [f.est_ms_per_step for f in run.findings]
    assert est[0] == pytest.approx(10 * 0.004)
    assert est[1] == pytest.approx(1000 * 3 * 0.006)  # the probe's 3 ops per iteration
    assert est[2] == pytest.approx(500 * 4 * 0.018 / 5)  # counted torch calls: the probe's body makes 5
    assert est[3] is None
    assert "race" in run.pricing.prices["unpriced"]["train.py:7 wp.launch on another stream"]


def test_a_loop_and_the_allocations_in_its_body_are_not_counted_twice(tmp_path):
    src = tmp_path / "env.py"
    src.write_text("def step(self):\n"
                   "    for i in range(self.num_envs):\n"
                   "        a = self.x[i] * 2.0\n"
                   "        self.y[i] = a + self.z[i] - 1.0\n"
                   "    return torch.zeros(3)\n")
    path = str(src)
    findings = [
        Finding("loop", "for-loop over envs", path, 2, per_step=100.0),
        Finding("alloc", "Tensor.mul", path, 3, per_step=100.0),
        Finding("alloc", "Tensor.add", path, 4, per_step=100.0),
        Finding("alloc", "Tensor.sub", path, 4, per_step=100.0),
        Finding("alloc", "Tensor.div", path, 4, per_step=100.0),
        Finding("alloc", "Tensor.rare", path, 4, per_step=2.0),  # not once per iteration
        Finding("alloc", "torch.zeros", path, 5, per_step=100.0),  # after the loop
    ]
    run = price_run(run_of(*findings), GPU_PROFILE)
    loop, *allocs = run.findings
    # 4 inner allocations per iteration -> 4 ops; the loop's price excludes what they already cost
    assert loop.est_ms_per_step == pytest.approx(100 * 4 * 0.006 - 400 * 0.004)
    assert [a.est_ms_per_step for a in allocs] == pytest.approx([0.4, 0.4, 0.4, 0.4, 0.008, 0.4])
    block = loop.est_ms_per_step + sum(a.est_ms_per_step for a in allocs[:4])
    assert block == pytest.approx(100 * 4 * 0.006)  # the whole loop block: 4 ops per iteration
    assert "inner allocation" in run.pricing.prices["how"][f"{path}:2 for-loop over envs"]


def test_a_sync_in_a_loop_body_holds_the_launch_of_its_op(tmp_path):
    # obs[i, 1] = 0.5 is one torch call per iteration and a sync (a scalar copied host-to-device): the
    # sync's round trip already holds that call's launch, so the loop adds nothing on top of it
    src = tmp_path / "env.py"
    src.write_text("def step(self):\n"
                   "    for i in range(self.num_envs):\n"
                   "        self.obs[i, 1] = 0.5\n"
                   "        self.x[i].mul_(2.0)\n")
    path = str(src)
    loop = Finding("loop", "for-loop over envs", path, 2, per_step=16.0)
    write = Finding("sync", "t[i] = scalar", path, 3, per_step=16.0)
    run = price_run(run_of(loop, write, extra={"loop_ops": {f"{path}:2": 3.0}}), GPU_PROFILE)
    loop, write = run.findings  # priced copies
    per_call = 0.018 / 5  # the probed iteration over the probe body's five calls
    assert loop.est_ms_per_step == pytest.approx(16 * 3 * per_call - 16 * per_call)
    assert write.est_ms_per_step == pytest.approx(16 * (0.030 + 0.020 + 4 / 5e9 * 1e3))  # round trip + the H2D copy
    assert "less 1 inner sync site(s)" in run.pricing.prices["how"][f"{path}:2 for-loop over envs"]
    # a sync that runs once per step, not per iteration, is no part of the loop's body cost
    rare = Finding("sync", "t[i] = scalar", path, 3, per_step=1.0)
    run = price_run(run_of(Finding("loop", "for-loop over envs", path, 2, per_step=16.0), rare,
                           extra={"loop_ops": {f"{path}:2": 3.0}}), GPU_PROFILE)
    assert run.findings[0].est_ms_per_step == pytest.approx(16 * 3 * per_call)


@pytest.mark.parametrize("body, ops", [
    ("out[i] = a[i] * 2.0 + b[i]", 3),  # the pyloop probe's body: its price is per 3
    ("actions[i].clamp_(-1.0, 1.0)", 1),  # constants are not ops
    ("x[i + 1] += y[i]\nn = len(z)", 1),  # index arithmetic and builtins are not ops
    ("print(i)", 0),
])
def test_ops_per_iteration_are_read_from_the_loop_body(body, ops):
    import ast

    from perfkit.pricing.cost import _body_ops

    assert _body_ops(ast.parse(body).body) == ops


def test_a_loop_of_one_op_per_env_costs_one_op_per_env(tmp_path):
    src = tmp_path / "naive.py"
    src.write_text("for i in range(n):\n    actions[i].clamp_(-1.0, 1.0)\n")
    run = price_run(run_of(Finding("loop", "for-loop over envs", str(src), 1, per_step=257.0)), GPU_PROFILE)
    assert run.findings[0].est_ms_per_step == pytest.approx(257 * 1 * 0.006)
    assert "read from the loop body" in run.pricing.prices["how"][f"{src}:1 for-loop over envs"]


def test_what_if_is_floored_at_the_gpu_time_and_ranks_findings():
    findings = [sync(per_step=1.0, line=1), Finding("loop", "for", "train.py", 2, per_step=300.0)]
    run = price_run(run_of(*findings, step_ms=10.0, gpu=2.0, num_envs=1000), GPU_PROFILE)
    wi = run.pricing.what_if
    loop_ms = 300 * 3 * 0.006
    sync_ms = run.findings[0].est_ms_per_step
    assert wi["per_finding"][0]["site"] == "train.py:2" and wi["per_finding"][0]["est_ms_per_step"] == pytest.approx(loop_ms)
    assert wi["per_finding"][0]["sps_if_fixed"] == pytest.approx(1000 * 1000 / (10 - loop_ms))
    assert wi["per_finding"][1]["sps_if_fixed"] == pytest.approx(1000 * 1000 / (10 - sync_ms))
    assert wi["step_ms_after"] == pytest.approx(max(10 - loop_ms - sync_ms, 2.0))
    assert wi["fixed"] == ["train.py:2 for", "train.py:1 .item()"]
    # savings beyond the GPU time are not promised
    p = predict(run, saved_ms=50.0)
    assert p["step_ms_after"] == pytest.approx(2.0) and p["sps_after"] == pytest.approx(500_000)
    # without GPU timing the floor is a fraction of the step
    bare = price_run(run_of(Finding("loop", "for", "t.py", 1, per_step=10_000.0)), GPU_PROFILE)
    assert bare.pricing.what_if["step_ms_after"] == pytest.approx(10 * MIN_STEP_FRACTION)
    # a GPU floor above the measured step (event spans include idle GPU time; seen on the H200 for
    # train.py: "1.67 -> 2.66 ms/step") never predicts a slower step
    over = price_run(run_of(sync(per_step=1.0, line=1), step_ms=1.67, gpu=2.66, num_envs=4096), GPU_PROFILE)
    assert over.pricing.what_if["step_ms_after"] <= 1.67
    assert predict(over, saved_ms=0.5)["step_ms_after"] == pytest.approx(1.67)


def test_missing_costs_leave_findings_unpriced_and_say_why():
    prof = {"schema": SCHEMA, "key": "k", "source": "sparse", "costs": {"sync_idle_ms": 0.05}}
    run = price_run(run_of(Finding("alloc", "torch.empty", "a.py", 1, per_step=1.0)), prof)
    # the reference fills what the machine profile lacks only where it has the number
    ref = reference_profile()
    if "alloc_cached_ms" in ref["costs"]:
        assert run.findings[0].est_ms_per_step == pytest.approx(ref["costs"]["alloc_cached_ms"])
    else:
        assert run.findings[0].est_ms_per_step is None
        assert run.pricing.prices["unpriced"] == {"a.py:1 torch.empty": "no allocation cost in the profile"}


def test_cpu_machine_profile_borrows_sync_costs_from_the_labelled_reference():
    cpu_profile = build_profile({"allocator": {"status": "partial", "cpu_empty_us": 2.0},
                                 "pyloop": {"status": "ok", "per_env_iteration_us": 25.0, "per_op_us": 8.0}})
    f = sync(per_step=1.0, would_sync_on_gpu=True)
    a = Finding("alloc", "torch.zeros", "train.py", 3, per_step=2.0)
    run = price_run(run_of(f, a), cpu_profile)
    f, a = run.findings  # priced copies
    ref = reference_profile()
    assert f.est_ms_per_step == pytest.approx(ref["costs"]["sync_idle_ms"])
    costs = run.pricing.prices["costs"]
    assert costs["sync_idle_ms"]["source"].startswith("reference:")
    # an allocation on this CPU machine is priced with this machine's own number
    assert a.est_ms_per_step == pytest.approx(2 * 0.002)
    assert costs["alloc_cpu_ms"]["source"] == cpu_profile["source"]


def test_default_profile_is_the_machine_cache_else_the_reference(tmp_path):
    run = price_run(run_of(sync()))
    assert run.pricing.prices["profile"].startswith("reference:")
    assert "H200" in run.pricing.prices["profile"]
    from perfkit.machine import key

    mine = dict(GPU_PROFILE, key=key(), source="measured here")
    save_profile(mine)  # into this machine's cache slot
    run = price_run(run_of(sync()))
    assert run.pricing.prices["profile"] == "measured here"
    assert run.findings[0].est_ms_per_step == pytest.approx(0.030)


def test_priced_run_round_trips_through_json(tmp_path):
    run = price_run(run_of(sync(per_step=2.0), gpu=1.0), GPU_PROFILE)
    path = run.save(tmp_path / "run.json")
    back = Run.load(path)
    assert back.findings[0].est_ms_per_step == run.findings[0].est_ms_per_step
    assert back.pricing.what_if["sps_after"] == pytest.approx(run.pricing.what_if["sps_after"])


def test_load_profile_errors_name_the_file(tmp_path):
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps({"schema": "perfkit.run/1"}))
    with pytest.raises(ProfileError, match="p.json: schema 'perfkit.run/1'"):
        load_profile(bad)
    bad.write_text("{")
    with pytest.raises(ProfileError, match="not JSON"):
        load_profile(bad)
    with pytest.raises(ProfileError, match="no such machine profile"):
        load_profile(tmp_path / "missing.json")
    bad.write_text(json.dumps({"schema": SCHEMA, "costs": {"sync_idle_ms": "fast"}}))
    with pytest.raises(ProfileError, match="costs"):
        load_profile(bad)


def test_a_committed_reference_profile_replaces_the_one_number_reference(tmp_path, monkeypatch):
    import perfkit.pricing.machine_profile as cp

    ref = dict(GPU_PROFILE, key="NVIDIA_H200|580.1|2.11.0", machine={"device": "NVIDIA H200"},
               created="2026-11-29T23:00:00+00:00", source="measured on this machine (...) by perfkit probe")
    path = tmp_path / "h200-profile.json"
    save_profile(ref, path)
    monkeypatch.setattr(cp, "REFERENCE_PATH", path)
    got = cp.reference_profile()
    assert got["source"] == ("reference: NVIDIA H200 profile committed at perfkit/data/h200-profile.json "
                             "(measured 2026-11-29T23:00:00+00:00)")
    run = price_run(run_of(Finding("alloc", "torch.zeros", "t.py", 1, per_step=5.0)))  # no machine cache
    assert run.findings[0].est_ms_per_step == pytest.approx(5 * 0.004)
    assert run.pricing.prices["profile"] == got["source"]


def test_measured_sync_wait_prices_one_removal_by_the_host_gap_after_it():
    # GPU 4 of 10 ms (busy 0.4, round trip 0.4*0.010 + 0.6*0.030 = 0.022 ms); two syncs per step.
    # A: waits 1.5 ms, 0.3 ms of host work before the next sync -> saves 0.022 + 0.3
    # B: waits 0.5 ms per call (2 calls/step), 2.0 ms of host work after each -> saves 0.022 + (0.5 - 0.022)
    # C: no sync_wait entry -> the backlog split (4 ms over 4 syncs per step)
    extra = {"sync_wait": {"train.py:1": {"wait_ms_per_step": 1.5, "gap_ms_per_step_after": 0.3, "calls_per_step": 1.0},
                           "train.py:2": {"wait_ms_per_step": 1.0, "gap_ms_per_step_after": 4.0, "calls_per_step": 2.0}}}
    a, b, c = sync(line=1), sync(line=2, per_step=2.0), sync(line=3)
    run = price_run(run_of(a, b, c, gpu=4.0, extra=extra), GPU_PROFILE)
    a, b, c = run.findings  # priced copies
    rt = 0.4 * 0.010 + 0.6 * 0.030
    assert a.est_ms_per_step == pytest.approx(rt + 0.3)
    assert b.est_ms_per_step == pytest.approx(2 * 0.5)
    assert c.est_ms_per_step == pytest.approx(rt + 4.0 / 4)
    model = run.pricing.prices["model_of"]
    assert model == {"train.py:1 .item()": "sync_wait", "train.py:2 .item()": "sync_wait", "train.py:3 .item()": "backlog_split"}
    assert run.pricing.prices["sync_all_ms"] is None  # C has no measurement: no all-syncs total
    assert run.pricing.what_if["all_syncs"]["saved_ms"] == pytest.approx(a.est_ms_per_step + b.est_ms_per_step + c.est_ms_per_step)


def test_a_site_is_priced_per_burst_so_one_bursts_gap_cannot_hide_another_bursts_wait():
    # Site 1 syncs twice a step with other syncs between: once waiting 1.8 ms for the physics with 0.05 ms
    # of host work after it, once a 0.03 ms round trip with 3.0 ms after. Each burst hides only behind its
    # own gap: min(1.8, 0.05 + rt) + min(0.03, 3.0 + rt). The site's averages (0.915 ms wait, 1.525 ms gap
    # per call) would let the second call's gap hide the first call's wait: 1.83 ms.
    avg = {"wait_ms_per_step": 1.83, "gap_ms_per_step_after": 3.05, "calls_per_step": 2.0}
    split = {"per_step": 2.0, "fit": {"wait_ms": 0.03, "gap_ms": 3.0, "calls": 1.0},
             "over": {"wait_ms": 1.8, "gap_ms": 0.05, "calls": 1.0}}
    rt = 0.4 * 0.010 + 0.6 * 0.030

    def priced(site):
        run = price_run(run_of(sync(line=1, per_step=2.0), gpu=4.0, extra={"sync_wait": {"train.py:1": site}}), GPU_PROFILE)
        return run.findings[0].est_ms_per_step

    assert priced(dict(avg, bursts=split)) == pytest.approx(0.05 + rt + 0.03)
    assert priced(avg) == pytest.approx(1.83)  # an older record, without bursts: the site's averages, as before
    # the same calls in one burst a step (consecutive): the 1.8 ms may hide behind all 3.05 ms of host work
    one = {"per_step": 1.0, "fit": {"wait_ms": 1.83, "gap_ms": 3.05, "calls": 2.0},
           "over": {"wait_ms": 0.0, "gap_ms": 0.0, "calls": 0.0}}
    assert priced(dict(avg, bursts=one)) == pytest.approx(1.83)


@pytest.mark.parametrize("op, extra_ms", [(".cpu()", 0.015 + 4 / 10e9 * 1e3), ("print(t)", 0.200 + 0.015 + 4 / 10e9 * 1e3)])
def test_a_measured_wait_already_holds_the_copy_and_the_formatting(op, extra_ms):
    # The wait is timed around the whole call: a .cpu()'s D2H copy (a print's formatting too) is inside it.
    # Waits fit in the gaps: the call saves its measured wait, not the wait plus a copy priced on top.
    extra = {"sync_wait": {"train.py:1": {"wait_ms_per_step": 0.05, "gap_ms_per_step_after": 2.0, "calls_per_step": 1.0}}}
    run = price_run(run_of(sync(op=op), gpu=4.0, extra=extra), GPU_PROFILE)
    assert run.findings[0].est_ms_per_step == pytest.approx(0.05)
    # behind a short gap the overhead still goes with the call: round trip + copy (+ repr) + the gap
    extra["sync_wait"]["train.py:1"].update(wait_ms_per_step=1.0, gap_ms_per_step_after=0.1)
    run = price_run(run_of(sync(op=op), gpu=4.0, extra=extra), GPU_PROFILE)
    rt = 0.4 * 0.010 + 0.6 * 0.030
    assert run.findings[0].est_ms_per_step == pytest.approx(0.1 + rt + extra_ms)


def test_fixing_all_measured_syncs_saves_their_waits_bounded_by_the_gpu_floor():
    extra = {"sync_wait": {"train.py:1": {"wait_ms_per_step": 3.0, "gap_ms_per_step_after": 0.1, "calls_per_step": 1.0},
                           "train.py:2": {"wait_ms_per_step": 4.0, "gap_ms_per_step_after": 0.1, "calls_per_step": 1.0}}}
    run = price_run(run_of(sync(line=1), sync(line=2), step_ms=10.0, gpu=6.0, extra=extra), GPU_PROFILE)
    rt = 0.6 * 0.010 + 0.4 * 0.030
    assert [f.est_ms_per_step for f in run.findings] == pytest.approx([rt + 0.1, rt + 0.1])  # one at a time: little
    assert run.pricing.prices["sync_all_ms"] == pytest.approx(7.0)
    allp = run.pricing.what_if["all_syncs"]
    assert allp["saved_ms"] == pytest.approx(7.0)
    assert allp["step_ms_after"] == pytest.approx(6.0)  # 10 - 7 = 3 ms, but the GPU's 6 ms stays


def test_pricing_returns_a_priced_copy_and_leaves_the_run_as_it_was():
    before = run_of(sync(per_step=2.0), extra={"notes": ["kept"]})
    kept = before.to_dict()
    priced = price_run(before, GPU_PROFILE)
    assert priced is not before
    assert before.to_dict() == kept  # no price, no pricing block: the input is not annotated
    assert before.findings[0].est_ms_per_step is None and before.pricing == Pricing()
    assert priced.findings[0].est_ms_per_step == pytest.approx(2 * 0.030)
    assert priced.extra["notes"] == ["kept"] and priced.pricing.what_if

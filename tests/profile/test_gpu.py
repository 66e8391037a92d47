"""GPU checks (marker gpu; skipped without CUDA): syncs on CUDA, warp syncs, --verify, CUDA-event timing,
stream hazards. `python3 scripts/gpu/profile_check.py --out DIR` runs these plus the overhead benchmark."""
from __future__ import annotations

import os

import pytest

from perfkit.collectors.budget import budget
from perfkit.profile.session import Session

from _helpers import line_of, load, marked_line, script

pytestmark = pytest.mark.gpu


@pytest.fixture
def hooks(monkeypatch):
    """Every hook decides from the call ([tool.perfkit] sync_source = "hooks"; also what a program with its
    own sync-debug mode gets): the tables' exact labels and decisions are checked here; the default on
    CUDA, the runtime's own reports, is checked against it below and against CUPTI by --verify."""
    from perfkit.collectors import hub

    monkeypatch.setattr(hub, "sync_source", "hooks")


@pytest.fixture(scope="module")
def cuda_cases():
    os.environ["PK_CASES_DEVICE"] = "cuda"
    try:
        mod = load("sync_cases")
    finally:
        os.environ.pop("PK_CASES_DEVICE", None)
    assert mod.x.is_cuda
    return mod


SYNC_NAMES = ["item", "cpu", "cpu_numpy", "to_cpu", "to_cpu_numpy", "tolist", "bool_if", "bool_call", "float_call", "int_call", "index_call",
              "fstring", "print_tensor", "mask_read", "list_index", "where_one", "nonzero", "torch_nonzero",
              "masked_select", "unique", "torch_unique", "repeat_interleave", "tensor_list", "contains",
              "mask_write", "list_write", "ndarray_index", "ndarray_write", "empty_list_scalar_write"]


@pytest.mark.parametrize("name", SYNC_NAMES)
def test_each_sync_kind_is_caught_on_cuda(cuda_cases, name, hooks):
    fn = getattr(cuda_cases, name)
    line, op = marked_line(fn)
    with budget(count_cpu_tensors=False) as b:
        fn()
    syncs = [s for s in b.sites if s.kind == "sync"]
    assert [(s.op, s.line, s.count) for s in syncs] == [(op, line, 1)], syncs
    assert not syncs[0].would_sync_on_gpu


@pytest.mark.parametrize("name", ["clean_where3", "clean_index_tensor", "clean_slice", "clean_repeat_sized",
                                  "clean_tensor_no_device", "clean_inplace", "clean_mask_fill_scalar",
                                  "clean_to_dtype", "clean_tensor_empty", "clean_tensor_empty_nested",
                                  "clean_empty_list_index", "clean_empty_ndarray_index",
                                  "clean_to_cpu_non_blocking", "clean_to_cpu_empty"])
def test_sync_free_calls_on_cuda_count_zero(cuda_cases, name, hooks):
    with budget(syncs=0, count_cpu_tensors=False):
        getattr(cuda_cases, name)()


@pytest.mark.parametrize("name", SYNC_NAMES)
def test_each_sync_kind_the_runtime_reports_is_counted_once_at_its_line(cuda_cases, name):
    """The default on CUDA: the runtime's own report counts the sync (collectors/cuda_syncs.py) — at the
    marked line, once, named as the table names it or by the expression's kind (t[...], .to(...))."""
    from perfkit.collectors import hub
    from perfkit.collectors.cuda_syncs import RUNTIME_OPS

    fn = getattr(cuda_cases, name)
    line, op = marked_line(fn)
    with budget(count_cpu_tensors=False) as b:
        fn()
    assert hub.installed_sync_source == "runtime"
    syncs = [s for s in b.sites if s.kind == "sync"]
    # as many as the runtime made: print(t), t[list] = scalar and repeat_interleave(tensor) make 2 or more
    # (reports/counts-h200-2026-12-01/sync_ops.txt); each is checked against CUPTI by probes/sync_ops.py
    assert [s.line for s in syncs] == [line] and syncs[0].count >= 1, syncs
    assert syncs[0].op == op or syncs[0].op in RUNTIME_OPS, syncs


@pytest.mark.parametrize("name", ["clean_where3", "clean_index_tensor", "clean_slice", "clean_repeat_sized",
                                  "clean_tensor_no_device", "clean_inplace", "clean_mask_fill_scalar",
                                  "clean_to_dtype", "clean_tensor_empty", "clean_tensor_empty_nested",
                                  "clean_empty_list_index", "clean_empty_ndarray_index",
                                  "clean_to_cpu_non_blocking", "clean_to_cpu_empty"])
def test_sync_free_calls_the_runtime_does_not_report_count_zero(cuda_cases, name):
    with budget(syncs=0, count_cpu_tensors=False):
        getattr(cuda_cases, name)()


def test_explicit_cuda_syncs():
    import torch

    ev = torch.cuda.Event()
    st = torch.cuda.current_stream()
    with budget(count_cpu_tensors=False) as b:
        torch.cuda.synchronize()  # <- a
        ev.record()
        ev.synchronize()  # <- b
        st.synchronize()  # <- c
    here = __file__
    got = sorted((s.op, s.line) for s in b.sites)
    assert got == sorted([("torch.cuda.synchronize()", line_of(here, "torch.cuda.synchronize()  # <- a")),
                          ("Event.synchronize()", line_of(here, "ev.synchronize()  # <- b")),
                          ("Stream.synchronize()", line_of(here, "st.synchronize()  # <- c"))])


def test_blocking_copy_to_host_is_a_sync_and_non_blocking_is_not(hooks):
    import torch

    d = torch.ones(8, device="cuda")
    h = torch.empty(8)
    pinned = torch.empty(8, pin_memory=True)
    with budget(count_cpu_tensors=False) as b:
        h.copy_(d)  # <- copy d2h
        pinned.copy_(d, non_blocking=True)
        d.copy_(h)  # <- copy h2d
        h.to("cuda")  # <- to cuda
        h.cuda()  # <- cuda()
        pinned.to("cuda", non_blocking=True)
        d.to("cuda")
        d[:0].to("cpu")  # zero bytes: nothing copied
        torch.tensor([], device="cuda")  # no element: nothing copied
        h[:0].cuda()
        d[torch.arange(2)]  # <- host index
    f = __file__
    assert sorted((s.op, s.line) for s in b.sites) == sorted([
        ("cpu_t.copy_(cuda_t)", line_of(f, "# <- copy d2h")), ("cuda_t.copy_(cpu_t)", line_of(f, "# <- copy h2d")),
        ('.to("cuda")', line_of(f, "# <- to cuda")), (".cuda()", line_of(f, "# <- cuda()")),
        ("t[cpu_idx]", line_of(f, "# <- host index"))])


def test_warp_syncs_on_cuda():
    wp = pytest.importorskip("warp")
    wp.init()
    arr = wp.zeros(16, dtype=wp.float32, device="cuda:0")
    with budget(count_cpu_tensors=False) as b:
        wp.synchronize()  # <- w1
        wp.synchronize_device("cuda:0")  # <- w2
        arr.numpy()  # <- w3
        arr.list()  # <- w4
        wp.synchronize_stream(wp.get_stream("cuda:0"))  # <- w5
    here = __file__
    got = sorted((s.op, s.line, s.count) for s in b.sites)
    want = sorted([("wp.synchronize()", line_of(here, "# <- w1"), 1), ("wp.synchronize_device()", line_of(here, "# <- w2"), 1),
                   ("wp.array.numpy()", line_of(here, "# <- w3"), 1), ("wp.array.list()", line_of(here, "# <- w4"), 1),
                   ("wp.synchronize_stream()", line_of(here, "# <- w5"), 1)])
    assert got == want


def test_verify_reports_zero_unattributed_syncs_on_a_planted_loop():
    mod = load("gpu_planted")
    with Session(verify=True, warmup_steps=3) as s:
        mod.main(40)
    v = s.run.extra["verify"]
    assert v["steps"] >= 10, v
    # the loop plants 6 syncs a step; on the H200 (torch 2.11) CUPTI shows 3 of them per step as
    # cudaStreamSynchronize/cudaDeviceSynchronize: the others wait inside a synchronous memcpy, which
    # is not counted as a separate sync call. What matters: every runtime sync has a hooked site.
    assert v["runtime_syncs"] >= 2 * v["steps"], v
    assert v["unattributed"] == 0, v
    # the window: every steady step (40 - 3 warm-up: the run is shorter than verify_steps), each range
    # counted once (not its GPU-side copies); over them the record agrees with the runtime site by site
    assert v["steps"] == 37 and v["ended_with_run"], v
    assert v["agreement"]["sites_outside_tolerance"] == 0, v["agreement"]
    assert v["hooked_without_runtime_sync"] == 0, v  # every hooked call made the runtime wait
    assert sum(r["hooked"] for r in v["sites"]) == v["hooked_syncs"], v
    ops = {f.op for f in s.run.findings_of("sync")}
    assert {"bool(t)", "t[bool_mask]", ".nonzero()", ".item()", ".cpu()", "torch.cuda.synchronize()"} <= ops
    for f in s.run.findings_of("sync"):
        assert f.per_step == pytest.approx(1.0), f


def test_cuda_event_segment_times_sum_to_the_device_time_per_step():
    mod = load("gpu_bound")
    # Reference: the same loop unprofiled, timed by two events around 200 steps. (Not the host's wall
    # p50: it equals the device time only once CUDA's launch queue is full, and how many steps that
    # takes depends on the driver's queue depth — on the H200 runs saw 0.88, 3.14 and 3.49 ms for 3.5.)
    ref = mod.gpu_ms_per_step(200)
    with Session(warmup_steps=20, timing_every=4) as s:
        mod.main(200)
    run = s.run
    gpu_sum = sum(v.gpu_ms_per_step or 0.0 for v in run.segments.values())
    assert run.extra["gpu_timed_steps"] >= 10
    assert gpu_sum == pytest.approx(ref, rel=0.10), (gpu_sum, ref, {k: v.gpu_ms_per_step for k, v in run.segments.items()})
    assert run.segments["physics"].gpu_ms_per_step > run.segments["policy"].gpu_ms_per_step > 0
    # the profiler itself added no sync: the only one is the script's final torch.cuda.synchronize(),
    # after the last step began, so teardown rather than a per-step finding
    assert run.findings_of("sync") == []
    assert [(d["op"], d["count"]) for d in run.outside_steps.teardown] == [("torch.cuda.synchronize()", 1)]


def test_a_segment_on_some_steps_only_is_priced_per_step_not_per_timed_step():
    """The learner every 4th step: its GPU time per step is one update's device time / 4 (on the timed
    steps it ran in, GPU time per host ms, times its host ms per step over every timed step)."""
    mod = load("gpu_periodic")
    ref = mod.learn_ms() / mod.PERIOD
    with Session(warmup_steps=20, timing_every=3) as s:
        mod.main(200)
    seg = s.run.segments["learner"]
    assert s.run.extra["gpu_timed_steps"] >= 30
    assert seg.gpu_ms_per_step == pytest.approx(ref, rel=0.25), (seg, ref)
    assert seg.calls_per_step == pytest.approx(1 / mod.PERIOD, rel=0.1)


def test_stream_hazard_found_only_where_cuda_leaves_the_streams_unordered():
    """torch on a side stream with Warp on its own: a race, found at its line. Warp on its own blocking
    stream with torch on the legacy default stream (ordered by CUDA), or Warp on torch's stream: none."""
    pytest.importorskip("warp")
    mod = load("gpu_streams")
    with Session(warmup_steps=1) as s:  # the first steady step is sampled: launches are checked there
        mod.main(8, mode="side")
    st = s.run.findings_of("stream")
    assert st and st[0].line == line_of(mod.__file__, "# <- stream"), s.run.findings
    for mode in ("own", "torch"):
        with Session(warmup_steps=1) as s2:
            mod.main(8, mode=mode)
        assert not s2.run.findings_of("stream"), (mode, s2.run.findings_of("stream"))


def test_verify_from_the_cli(tmp_path):
    from click.testing import CliRunner

    from perfkit.cli import main
    from perfkit.record import Run

    out = tmp_path / "v.json"
    r = CliRunner().invoke(main, ["profile", "--verify", "-o", str(out), script("gpu_planted.py"), "40"])
    assert r.exit_code == 0, r.output
    assert "verify:" in r.output and "0 unattributed" in r.output
    assert Run.load(out).extra["verify"]["unattributed"] == 0


def test_boolean_mask_write_of_a_scalar_makes_no_runtime_sync():
    """perfkit counts `t[mask] = scalar` as no sync (torch's masked_fill_ path); --verify checks that claim."""
    import torch

    class MaskEnv:
        num_envs = 4096

        def __init__(self):
            self.x = torch.rand(self.num_envs, device="cuda")

        def step(self):
            self.x.add_(0.01)
            self.x[self.x > 0.99] = 0.0
            return self.x

    env = MaskEnv()
    with Session(verify=True, warmup_steps=2) as s:
        for _ in range(30):
            env.step()
    v = s.run.extra["verify"]
    assert v["steps"] >= 10 and v["unattributed"] == 0, v
    assert not s.run.findings_of("sync")


def test_a_temporary_inside_an_out_op_is_an_allocation_on_cuda():
    """``torch.linalg.vecdot(a, b, out=c)`` looks allocation-free but allocates ``a * b`` inside; on
    CUDA the allocator's counters catch it at the calling line (this is how the reference env's
    one allocation per step was found on the H200)."""
    import torch

    from perfkit.collectors.budget import BudgetExceeded

    a = torch.ones(256, 8, device="cuda")
    c = torch.empty(256, device="cuda")
    torch.linalg.vecdot(a, a, dim=1, out=c)  # warm the allocator's cache: the count is requests, hits too
    with pytest.raises(BudgetExceeded) as e:
        with budget(allocs=0, count_cpu_tensors=False):
            torch.linalg.vecdot(a, a, dim=1, out=c)  # <- tmp
    assert any(s.line == line_of(__file__, "# <- tmp") for s in e.value.sites), e.value.sites
    with budget(allocs=0, count_cpu_tensors=False):
        torch.mul(a, a, out=a)
        torch.sum(a, dim=1, out=c)

"""A hooked op counts only when it makes the CUDA runtime wait, decided from the call: devices of source
and destination, element count, non_blocking and pinned memory, where the index lives. On a CPU-only run
the same decision is made as if the program's tensors lived on the GPU (would-sync-on-GPU)."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

from perfkit.collectors import torch_sync as ts
from perfkit.collectors.budget import budget

BOOL = (torch.bool, torch.uint8)


@pytest.mark.parametrize("dst_cuda,src_cuda,numel,non_blocking,pinned,want", [
    (False, True, 8, False, False, "cpu_t.copy_(cuda_t)"),  # blocking D2H
    (False, True, 8, True, False, "cpu_t.copy_(cuda_t)"),  # non_blocking into pageable memory still waits
    (False, True, 8, True, True, None),  # non_blocking into pinned memory: the host goes on
    (False, True, 0, False, False, None),  # zero bytes: nothing is copied
    (True, False, 8, False, False, "cuda_t.copy_(cpu_t)"),  # blocking H2D
    (True, False, 8, True, True, None),  # non_blocking out of pinned memory
    (True, False, 0, False, False, None),
    (True, True, 8, False, False, None),  # device to device: no host wait
    (False, False, 8, False, False, None),  # host to host
])
def test_copy_between_host_and_device(dst_cuda, src_cuda, numel, non_blocking, pinned, want):
    op = ts.copy_op(dst_cuda, src_cuda, numel, non_blocking, pinned)
    assert (op.label if op else None) == want


@pytest.mark.parametrize("index,cuda,want", [
    ([0, 2], True, "t[list]"), ([], True, None),
    (np.array([0, 2]), True, "t[ndarray]"), (np.array([], dtype=np.int64), True, None),
    (np.array([True, False, True, False, False, False]), True, "t[ndarray]"),
    (torch.tensor([0, 2]), True, "t[cpu_idx]"),  # a host index into a device tensor is copied over
    (torch.tensor([0, 2]), False, None),  # CPU-only run: the index is taken to live with the tensor
    (torch.tensor([], dtype=torch.long), True, None),
    (torch.tensor([True, False]), True, "t[bool_mask]"), (torch.tensor([True, False]), False, "t[bool_mask]"),
])
def test_where_an_index_lives_decides_whether_a_read_copies(index, cuda, want):
    op = ts._index_part_op(index, cuda, torch.Tensor, BOOL, np.ndarray)
    assert (op.label if op else None) == want


@pytest.mark.parametrize("index,value,want", [
    ([0, 2], 0.0, "t[list] = v"), ([0, 2], torch.zeros(2), "t[list] = v"),
    ([], 0.0, "t[list] = v"),  # nothing selected, yet the scalar is copied over: named as the runtime names it (H200)
    ([], torch.zeros(0), None),
    (torch.tensor([0, 2]), 0.0, "t[idx] = scalar"), (slice(0, 2), 0.0, None),
])
def test_a_write_through_a_list_is_named_like_the_runtimes_report_of_it(index, value, want):
    t = torch.zeros(4)
    op = ts._setitem_op(t, index, value, torch.Tensor, BOOL, np.ndarray)
    assert (op.label if op else None) == want


@pytest.mark.parametrize("data,has", [
    ([], False), ([[], []], False), ((), False), (np.zeros(0), False), (np.zeros((2, 0)), False),
    ([1.0], True), ([[1.0]], True), (3.0, True), (np.zeros(3), True),
])
def test_empty_data_copies_nothing(data, has):
    assert ts._has_elements(data) is has


@pytest.mark.parametrize("args,kwargs,dev,nb", [
    (("cpu",), {}, "cpu", False), (("cuda", torch.float32, True), {}, "cuda", True), ((torch.float32,), {}, None, False),
    ((), {"device": "cuda", "non_blocking": True}, "cuda", True), ((0,), {}, 0, False), ((torch.float64, True), {}, None, True),
])
def test_to_reads_its_target_and_non_blocking(args, kwargs, dev, nb):
    assert ts._target_device(args, kwargs, torch.Tensor, torch.dtype) == dev
    assert ts._non_blocking(args, kwargs) is nb


def test_to_another_tensor_takes_its_device():
    other = torch.zeros(1)
    assert ts._target_device((other,), {}, torch.Tensor, torch.dtype) == other.device


def test_cpu_tensors_in_a_cuda_run_are_not_syncs():
    # count_cpu_tensors=False is how a CUDA run counts: host tensors never make the runtime wait
    x = torch.arange(6.0)
    with budget(syncs=0, count_cpu_tensors=False):
        x.sum().item()
        x[[0, 1]]
        x[np.array([0, 1])]
        x[x > 2]
        x.to("cpu")
        x.numpy()
        torch.tensor([1.0, 2.0], device="cpu")
        torch.empty(6).copy_(x)


def test_each_distribution_check_is_the_callers_sync_once_per_check():
    # Normal(loc, scale) validates loc and scale (2 bool() of a tensor), log_prob its value (1): on a GPU
    # each waits; torch makes them for the caller, so they count at the caller's line. (validate_args
    # given: importing torch._dynamo, as torch.compile does, turns the default off process-wide.)
    loc, scale, act = torch.zeros(4), torch.ones(4), torch.zeros(4)
    steps = 5
    with budget(count_cpu_tensors=True) as b:
        for _ in range(steps):
            dist = torch.distributions.Normal(loc, scale, validate_args=True)  # <- init
            dist.log_prob(act)  # <- log_prob
    src, start = inspect.getsourcelines(test_each_distribution_check_is_the_callers_sync_once_per_check)
    init = start + next(i for i, t in enumerate(src) if "# <- init" in t)
    lp = start + next(i for i, t in enumerate(src) if "# <- log_prob" in t)
    got = sorted((s.op, s.line, s.count) for s in b.sites if s.kind == "sync")
    assert got == sorted([("bool(t)", init, 2 * steps), ("bool(t)", lp, steps)])
    assert all(s.path.endswith("test_sync_decisions.py") and s.would_sync_on_gpu for s in b.sites)


def test_clip_grad_norm_error_if_nonfinite_is_the_callers_sync():
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.ones(3)
    with budget(count_cpu_tensors=True) as b:
        torch.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    assert [(s.op, s.count) for s in b.sites if s.kind == "sync"] == [("bool(t)", 1)]
    with budget(syncs=0, count_cpu_tensors=True):
        torch.nn.utils.clip_grad_norm_([p], 1.0)  # without the check: no read-back


def test_the_library_frame_that_synced_is_first_in_the_chain():
    import sys

    from perfkit.collectors.sites import chain_of

    frames = []

    def keep(*a, **k):
        frames.append(sys._getframe(1))
        return True

    loc = torch.zeros(2)
    orig = torch.Tensor.__bool__
    torch.Tensor.__bool__ = keep
    try:
        torch.distributions.Normal(loc, torch.ones(2), validate_args=True)
    finally:
        torch.Tensor.__bool__ = orig
    chain = chain_of(frames[0])
    assert "torch" in chain[0][0] and "distributions" in chain[0][0]
    assert chain[-1][0] == __file__ and len(chain) == 2


def test_torch_bookkeeping_stays_nobodys_sync():
    p = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.Adam([p], lr=0.1, capturable=False)
    p.grad = torch.ones(3)
    with budget(syncs=0, count_cpu_tensors=True):
        opt.step()


def test_a_cleanrl_style_loop_reports_distribution_checks_and_numpy_indexing_per_step():
    import perfkit
    from perfkit.profile.session import Session

    obs = torch.rand(64, 3)
    mb_inds = np.arange(64)
    with Session(warmup_steps=2, sample_steps=(), count_cpu_tensors=True) as s:
        for _ in range(12):
            perfkit.step()
            np.random.shuffle(mb_inds)
            mb = obs[mb_inds[:16]]  # <- ndarray
            dist = torch.distributions.Normal(mb, torch.ones_like(mb), validate_args=True)  # <- normal
            dist.log_prob(mb).sum()  # <- log_prob
    src, start = inspect.getsourcelines(test_a_cleanrl_style_loop_reports_distribution_checks_and_numpy_indexing_per_step)
    line = {m: start + next(i for i, t in enumerate(src) if f"# <- {m}" in t) for m in ("ndarray", "normal", "log_prob")}
    got = {(f.op, f.line): f for f in s.run.findings_of("sync")}
    assert got[("t[ndarray]", line["ndarray"])].per_step == 1.0
    assert got[("bool(t)", line["normal"])].per_step == 2.0
    assert got[("bool(t)", line["log_prob"])].per_step == 1.0
    normal = got[("bool(t)", line["normal"])]
    assert "distributions" in normal.chain[0] and normal.chain[-1].endswith(f":{line['normal']}")
    assert len(got) == 3, sorted(got)

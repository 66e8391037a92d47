"""Each sync kind is caught once per call, at the right line, on CPU tensors (would-sync-on-GPU)."""
from __future__ import annotations

import os
import threading

import pytest
import torch

import perfkit
from perfkit.collectors.budget import budget

from _helpers import load, marked_line

cases = load("sync_cases")
SYNC_FNS = [n for n in dir(cases) if callable(getattr(cases, n)) and not n.startswith(("clean_", "_"))
            and getattr(getattr(cases, n), "__module__", "") == cases.__name__]
CLEAN_FNS = [n for n in dir(cases) if n.startswith("clean_")]


@pytest.mark.parametrize("name", SYNC_FNS)
def test_each_sync_kind_counts_one_at_its_line(name, capsys):
    fn = getattr(cases, name)
    line, op = marked_line(fn)
    with budget(count_cpu_tensors=True) as b:
        fn()
    syncs = [s for s in b.sites if s.kind == "sync"]
    assert [(s.op, s.line, s.count) for s in syncs] == [(op, line, 1)], syncs
    assert syncs[0].path.endswith("sync_cases.py")
    assert syncs[0].function == name
    assert syncs[0].would_sync_on_gpu


def test_every_sync_kind_of_the_issue_has_a_case():
    ops = {marked_line(getattr(cases, n))[1] for n in SYNC_FNS}
    assert ops >= {".item()", ".cpu()", ".numpy()", ".tolist()", "bool(t)", "float(t)", "int(t)", "format(t)", "print(t)",
                   "t[bool_mask]", "t[list]", "torch.where(cond)", ".nonzero()", ".masked_select()", ".unique()",
                   ".repeat_interleave()", "torch.tensor(list, device=cuda)"}


@pytest.mark.parametrize("name", CLEAN_FNS)
def test_sync_free_calls_count_zero(name):
    with budget(syncs=0, count_cpu_tensors=True):
        getattr(cases, name)()


def test_calls_from_library_code_on_cpu_tensors_are_not_the_users_sync():
    # torch.optim's Adam reads its CPU step counters with .item(): not a sync the user wrote
    p = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.Adam([p], lr=0.1)
    p.grad = torch.ones(3)
    with budget(syncs=0, count_cpu_tensors=True):
        opt.step()


def test_cpu_tensors_are_not_counted_when_told_not_to():
    with budget(syncs=0, count_cpu_tensors=False):
        cases.item()
        cases.mask_read()


def test_repeated_calls_count_each_call():
    with budget(count_cpu_tensors=True) as b:
        for _ in range(7):
            cases.item()
    assert [s.count for s in b.sites] == [7]


def test_budget_raises_listing_each_site():
    line_item, _ = marked_line(cases.item)
    line_mask, _ = marked_line(cases.mask_read)
    with pytest.raises(perfkit.BudgetExceeded) as ei:
        with perfkit.budget(syncs=1, count_cpu_tensors=True):
            cases.item()
            cases.item()
            cases.mask_read()
    msg = str(ei.value)
    assert "3 syncs > budget 1" in msg
    assert f"sync_cases.py:{line_item}" in msg and ".item() x2" in msg
    assert f"sync_cases.py:{line_mask}" in msg and "t[bool_mask] x1" in msg
    assert {(s.line, s.count) for s in ei.value.sites} == {(line_item, 2), (line_mask, 1)}


def test_budget_within_limit_does_not_raise_and_reports_counts():
    with perfkit.budget(syncs=2, count_cpu_tensors=True) as b:
        cases.item()
    assert b.syncs == 1


def test_budget_rejects_bad_limits():
    with pytest.raises(ValueError):
        perfkit.budget(syncs=-1)
    with pytest.raises(ValueError):
        perfkit.budget(allocs="0")


def test_budget_lets_the_blocks_exception_through():
    with pytest.raises(KeyError):
        with perfkit.budget(syncs=0, count_cpu_tensors=True):
            cases.item()
            raise KeyError("mine")


def test_budget_counts_allocations_per_site_with_bytes():
    x = torch.ones(8)
    with budget(allocs=None, count_cpu_tensors=True) as b:
        pass
    assert b.allocs == 0
    b = budget(allocs=100)
    with b:
        y = torch.zeros(16)  # noqa: F841  one allocation, 64 bytes
        x.mul_(2.0)  # in place: none
        z = x.view(2, 4)  # noqa: F841  a view: none
        w = x + 1  # noqa: F841  one
        torch.add(x, 1, out=x)  # out=: none
    allocs = [(s.op, s.count) for s in b.sites if s.kind == "alloc"]
    assert sorted(allocs) == [("Tensor.add", 1), ("torch.zeros", 1)]
    with pytest.raises(perfkit.BudgetExceeded, match="torch.zeros"):
        with budget(allocs=0):
            torch.zeros(3)


def test_sync_in_a_worker_thread_is_attributed_to_that_threads_line():
    x = torch.ones(3)

    def worker():
        x.sum().item()  # <- .item()

    line, _ = marked_line(worker)
    t = threading.Thread(target=worker, name="collector")
    with budget(count_cpu_tensors=True) as b:
        t.start()
        t.join()
    assert [(s.op, s.line) for s in b.sites] == [(".item()", line)]
    sink_keys = list(b._sink.counts)
    assert sink_keys[0][5] == "collector"


def test_fixture_from_the_pytest_plugin(perfkit_budget):
    x = torch.ones(3)
    perfkit_budget.check(torch.add, x, 1, syncs=0)
    with pytest.raises(perfkit.BudgetExceeded):
        perfkit_budget.check(cases.item, syncs=0)
    with perfkit_budget(syncs=0, allocs=0):
        x.add_(1)


def test_warp_syncs_on_cpu_arrays():
    pytest.importorskip("warp")
    wc = load("warp_cases")
    for name in ("synchronize", "synchronize_device", "numpy", "to_list"):
        fn = getattr(wc, name)
        line, op = marked_line(fn)
        with budget(count_cpu_tensors=True) as b:
            fn()
        assert [(s.op, s.line, s.count) for s in b.sites if s.kind == "sync"] == [(op, line, 1)], name
    assert os.path.basename(b.sites[0].path) == "warp_cases.py"

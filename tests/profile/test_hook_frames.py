"""Hooks on calls that cannot sync cost no Python (issue 23.1). On CUDA, with the runtime's own sync reports
(the default), the ops that only sometimes sync carry no hook: a slice read of a CUDA tensor runs no Python
frame of perfkit's, while a mask read is still counted. On the CPU, where every sync-prone op is hooked to
count what would sync on a GPU, the hook runs and the count stays exact."""

from __future__ import annotations

import os
import sys

import pytest
import torch

import perfkit
from perfkit.collectors.budget import budget

PERFKIT = os.path.dirname(os.path.abspath(perfkit.__file__))


def perfkit_frames(fn, calls: int = 20) -> int:
    """Python frames of perfkit's own code entered while ``fn`` runs ``calls`` times (a profile function
    sees every Python call; whatever profile function was set is put back)."""
    seen = 0

    def prof(frame, event, arg):
        nonlocal seen
        if event == "call" and frame.f_code.co_filename.startswith(PERFKIT):
            seen += 1

    before = sys.getprofile()
    sys.setprofile(prof)
    try:
        for _ in range(calls):
            fn()
    finally:
        sys.setprofile(before)
    return seen


@pytest.mark.gpu
def test_a_slice_of_a_cuda_tensor_runs_no_python_of_perfkits_and_a_mask_read_is_still_counted():
    from perfkit.collectors import hub

    t = torch.ones(64, device="cuda")
    with budget(count_cpu_tensors=False) as b:
        assert hub.installed_sync_source == "runtime"
        t[0:2]
        assert perfkit_frames(lambda: t[0:2]) == 0
        assert perfkit_frames(lambda: t[3:9:2]) == 0
        t[t > 0]  # <- a mask read: the runtime waits, perfkit counts it
    syncs = [s for s in b.sites if s.kind == "sync"]
    assert len(syncs) == 1 and syncs[0].count == 1


def test_on_the_cpu_the_hook_runs_and_the_would_sync_count_stays_exact():
    t = torch.ones(64)
    with budget(count_cpu_tensors=True) as b:
        assert perfkit_frames(lambda: t[0:2], calls=5) > 0  # the hook runs for every call on the CPU ...
        for _ in range(3):
            t[t > 0]
    syncs = [s for s in b.sites if s.kind == "sync"]
    # ... and counts exactly the calls that would sync on a GPU: the mask reads, not the slices
    assert [(s.op, s.count, s.would_sync_on_gpu) for s in syncs] == [("t[bool_mask]", 3, True)]


def test_on_a_host_only_machine_a_to_that_names_no_device_string_runs_only_the_hook_itself():
    """``.to(torch.float64)``, ``.to(device_object)``, ``.to(other)`` cannot be the literal ``"cpu"`` that
    counts on a machine with no CUDA: the hook hands them on before any check (one frame: itself), while
    ``.to("cpu")`` is still counted."""
    if torch.cuda.is_available():
        pytest.skip("a machine with CUDA decides every .to() from its devices")
    t = torch.ones(8)
    dev = torch.device("cpu")
    with budget(count_cpu_tensors=True) as b:
        assert perfkit_frames(lambda: t.to(torch.float64), calls=5) == 5
        assert perfkit_frames(lambda: t.to(dev), calls=5) == 5
        assert perfkit_frames(lambda: t.to(t), calls=5) == 5
        t.to("cpu")  # <- counted
    syncs = [s for s in b.sites if s.kind == "sync"]
    assert [(s.op, s.count) for s in syncs] == [('.to("cpu")', 1)]

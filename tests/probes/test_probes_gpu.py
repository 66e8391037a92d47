"""On a CUDA machine: the probes' numbers obey the physics they measure (quick mode, loose bounds)."""

from __future__ import annotations

import pytest

import perfkit.probes as probes

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def results():
    return probes.run_all(quick=True)


def test_every_probe_runs_fully_on_cuda(results):
    for name, res in results.items():
        assert res["status"] == "ok", (name, res)


def test_sync_round_trip_is_microseconds_and_a_queue_is_waited_for(results):
    s = results["sync"]
    assert 1.0 < s["item_idle_us"] < 2000.0
    spin = next(q for q in s["behind_queue"] if q["queue"] == "spin_50k_cycles")
    assert spin["gpu_us"] > 5.0  # the spin kernel ran
    assert spin["wall_us"] >= spin["gpu_us"]  # .item() waited for it


def test_graph_replay_beats_eager_launches(results):
    la = results["launch"]
    assert la["graph_replay_us_per_kernel"] < la["torch_op_synced_us"]


def test_cudamalloc_costs_more_than_a_cache_hit(results):
    al = results["allocator"]
    assert al["cudamalloc_us"] > al["cached_alloc_us"]


def test_pinned_copies_are_not_slower_than_pageable_at_size(results):
    c = results["copies"]
    assert c["d2h_pinned_gbps"] > 0.5 * c["d2h_pageable_gbps"]
    assert c["h2d_pinned_gbps"] > 1.0

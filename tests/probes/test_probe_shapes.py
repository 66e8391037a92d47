"""Each probe, in quick mode: the shape of what it returns, here (CPU) and on a GPU machine."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

import perfkit.probes as probes
from perfkit.probes._bench import STATUSES

torch = pytest.importorskip("torch")
HAS_CUDA = torch.cuda.is_available()

# probe -> numbers it must give on any machine / only with CUDA
CPU_KEYS = {
    "sync": ["tensor_repr_us"],
    "launch": ["torch_op_us", "warp_launch_us"],
    "allocator": ["cpu_empty_us"],
    "copies": [],
    "markers": ["nvtx_range_us", "nvtx_annotate_us"],
    "interop": ["to_torch_us", "from_torch_us", "from_torch_ctype_us"],
    "pyloop": ["per_env_iteration_us", "per_op_us", "batched_us"],
}
CUDA_KEYS = {
    "sync": ["item_idle_us", "synchronize_idle_us", "item_behind_queue_extra_us"],
    "launch": ["torch_op_synced_us", "graph_replay_us_per_kernel", "graph_launch_us", "graph_speedup"],
    "allocator": ["cached_alloc_us", "cudamalloc_us"],
    "copies": ["d2h_pageable_latency_us", "h2d_pinned_gbps", "d2h_pinned_gbps"],
    "markers": ["event_record_us", "event_query_us"],
    "interop": ["stream_from_torch_us"],
    "pyloop": [],
}


def _positive_number(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def test_registry_names_every_probe_module():
    assert set(probes.PROBES) == set(CPU_KEYS)
    for name in probes.PROBES:
        assert callable(probes.get(name))


@pytest.fixture(scope="module")
def quick_results():
    return probes.run_all(quick=True)


@pytest.mark.parametrize("name", list(CPU_KEYS))
def test_quick_probe_shape(name, quick_results):
    res = quick_results[name]
    assert res["status"] in STATUSES, res
    assert res["quick"] is True and res["seconds"] >= 0
    json.dumps(res)  # plain data
    if res["status"] == "unavailable":
        assert not HAS_CUDA and res["reason"]
        assert not CPU_KEYS[name], f"{name} is CPU-meaningful and must run without CUDA"
        return
    for key in CPU_KEYS[name]:
        assert _positive_number(res[key]), (key, res.get(key))
    for key in CUDA_KEYS[name]:
        if HAS_CUDA:
            assert _positive_number(res[key]), (key, res.get(key))
        else:
            assert res["status"] == "partial"
            assert "CUDA" in res["unavailable"][key]


def test_cpu_only_machine_reports_cuda_probes_unavailable(quick_results):
    if HAS_CUDA:
        pytest.skip("this machine has CUDA")
    assert quick_results["copies"] == {"status": "unavailable", "reason": "no CUDA device (CPU-only machine)",
                                       "seconds": quick_results["copies"]["seconds"], "quick": True}


def test_pyloop_loop_is_slower_than_batched(quick_results):
    res = quick_results["pyloop"]
    row = res["by_num_envs"][0]
    # a loop of num_envs iterations of 3 ops cannot beat one batched call of the same ops
    assert row["loop_us"] > row["batched_us"]
    assert row["per_env_iteration_us"] == pytest.approx(row["loop_us"] / row["num_envs"])
    assert res["per_op_us"] == pytest.approx(res["per_env_iteration_us"] / res["ops_per_iteration"])


def test_unknown_probe_is_refused():
    with pytest.raises(KeyError, match="unknown probe 'nope'"):
        probes.run_all(quick=True, only=["pyloop", "nope"])


def test_a_failing_probe_is_reported_not_raised(monkeypatch):
    import perfkit.probes.pyloop

    def boom(quick=False):
        raise RuntimeError("device lost")

    monkeypatch.setattr(probes.pyloop, "measure", boom)
    res = probes.run("pyloop", quick=True)
    assert res["status"] == "error" and "device lost" in res["reason"]


def test_probe_main_prints_json():
    out = subprocess.run([sys.executable, "-m", "perfkit.probes.markers", "--quick"], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    res = json.loads(out)
    assert res["status"] in STATUSES and _positive_number(res["nvtx_range_us"])


def test_package_main_runs_the_named_probes_and_refuses_unknown_ones():
    p = subprocess.run([sys.executable, "-m", "perfkit.probes", "--quick", "pyloop"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert list(res) == ["pyloop"] and res["pyloop"]["status"] == "ok"
    bad = subprocess.run([sys.executable, "-m", "perfkit.probes", "nope"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown probe 'nope'" in bad.stderr

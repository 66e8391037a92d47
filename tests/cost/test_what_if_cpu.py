"""What-if that is honest on a CPU (issue 18, item 8): a GPU's price never becomes an env-steps/s
prediction for a CPU run (it is shown as what the finding costs on the H200); loops are priced with this
machine's probe, one probed iteration per loop iteration; the notes know a probe was run; the script's
own findings rank first; the console gives each top finding its fix and keeps the notes to one line."""

from __future__ import annotations


import pytest

from perfkit.pricing.cost import machine_key, price_run
from perfkit.pricing.machine_profile import SCHEMA, reference_profile
from perfkit.record import Finding, Run, SegmentStats
from perfkit.renderers import console

CPU = {"device": "cpu", "torch": "2.13.0", "driver": None}
PROBE = {"schema": SCHEMA, "key": machine_key(CPU), "source": "measured on this machine (cpu) by perfkit probe",
         "probes": {}, "costs": {"pyloop_iteration_ms": 0.0083, "pyloop_op_ms": 0.0028, "alloc_cpu_ms": 0.0009,
                                 "tensor_repr_ms": 0.5}}


@pytest.fixture(autouse=True)
def _empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


def cpu_run() -> Run:
    """train_naive.py's shape on this CPU: a per-step .cpu(), a per-env loop of 64 iterations (2 torch
    calls each, counted), and perfkit's own MLP allocating 6 activations a step."""
    def f(kind, op, line, per_step, segment="other", path="train_naive.py", **kw):
        return Finding(kind, op, path, line, segment=segment, per_step=per_step, count=int(per_step * 200),
                       would_sync_on_gpu=kind == "sync", message=f"fix {op}", **kw)

    findings = [f("sync", ".cpu()", 104, 1.0), f("sync", ".item()", 93, 1.0),
                f("loop", "for-loop over envs", 87, 64.0),
                f("alloc", "F.linear", 35, 6.0, segment="policy", path="perfkit/rl/networks.py", library="perfkit 0.1.0"),
                f("alloc", "Tensor.add", 97, 2.0)]
    segs = {"policy": SegmentStats(cpu_ms_per_step=0.3, allocs_per_step=6.0),
            "other": SegmentStats(cpu_ms_per_step=8.0, syncs_per_step=2.0)}
    return Run(command=["train_naive.py"], steps=200, num_envs=64, wall_s=200 * 9.45e-3, sps=6772.0,
               step_ms={"p50": 9.0, "p99": 40.0, "mean": 9.45}, segments=segs, findings=findings,
               machine=dict(CPU), extra={"loop_ops": {"train_naive.py:87": 2.0}})


def source(run, key):
    return run.pricing.prices["source_of"][key]


def test_a_gpu_price_is_no_prediction_on_a_cpu_run():
    run = price_run(cpu_run(), reference_profile(), validation={})
    sync = next(f for f in run.findings if f.op == ".cpu()")
    assert sync.est_ms_per_step is None  # no cost on this CPU
    src = source(run, "train_naive.py:104 .cpu()")
    assert src["on_device"] == "H200" and src["on_device_ms"] > 0
    assert run.pricing.prices["unpriced"]["train_naive.py:104 .cpu()"].startswith("on an H200 this costs ~")
    wi = run.pricing.what_if
    assert not any(".cpu()" in k or ".item()" in k or "for-loop" in k for k in wi["fixed"])  # no probe: the loop too
    assert wi["on_device"]["findings"] == 3 and wi["on_device"]["device"] == "H200"
    # what is predicted here (the allocations, at the CPU allocator's price) promises no GPU speed-up
    assert wi["gain"] < 0.01
    assert any("`perfkit probe`" in n for n in wi["notes"])


def test_allocations_on_a_cpu_run_cost_the_cpu_allocators_price():
    """Why perfkit's own MLP outranked the script's syncs: its 6 allocations a step were priced at the
    H200's CUDA caching-allocator round trip, on a CPU."""
    ref = reference_profile()
    run = price_run(cpu_run(), ref, validation={})
    mlp = next(f for f in run.findings if f.op == "F.linear")
    assert mlp.est_ms_per_step == pytest.approx(6 * ref["costs"]["alloc_cpu_ms"])
    assert ref["costs"]["alloc_cpu_ms"] < ref["costs"]["alloc_cached_ms"]


def test_loops_are_priced_with_this_machines_probe_and_the_notes_know_it():
    run = price_run(cpu_run(), PROBE, validation={})
    loop = next(f for f in run.findings if f.kind == "loop")
    assert loop.est_ms_per_step == pytest.approx(64 * 0.0083)  # one probed iteration per iteration
    assert source(run, "train_naive.py:87 for-loop over envs")["label"] == "this machine's probe profile"
    assert run.pricing.prices["own_probe"] is True
    wi = run.pricing.what_if
    assert wi["fixed"][0] == "train_naive.py:87 for-loop over envs"
    notes = " ".join(wi["notes"]) + wi["note"]
    assert "measure this machine's with `perfkit probe`" not in notes and "`perfkit probe`" not in notes
    assert "from this machine's probe profile" in notes and "on an H200" in notes  # the syncs, still GPU-only


def test_the_scripts_own_findings_rank_before_a_librarys():
    run = price_run(cpu_run(), PROBE, validation={})
    table = run.pricing.what_if_table
    assert [r["op"] for r in table] == ["for-loop over envs", "Tensor.add", "F.linear"]
    assert run.findings[3].est_ms_per_step > run.findings[4].est_ms_per_step  # the MLP's price is the larger


def test_the_console_gives_each_top_finding_its_fix_and_one_line_of_notes():
    run = price_run(cpu_run(), reference_profile(), validation={})
    con = console.ConsoleRenderer(width=250).render(run)
    for f in run.findings:
        assert f"fix: fix {f.op}" in con
    assert "on an H200 this costs ~" in con
    after = con.split("what if", 1)[1].splitlines()
    assert sum(line.strip().startswith("prices:") for line in after) == 1
    assert not any(line.strip().startswith(("times are means", "validation of the pricing", "a price from"))
                   for line in after)


def test_the_report_shows_a_gpu_only_price_as_what_it_costs_on_the_gpu():
    from perfkit.analysis.report_model import build_report

    run = price_run(cpu_run(), reference_profile(), validation={})
    rep = build_report([run])
    col = rep.findings_columns.index("est. ms/step")
    cells = {r[rep.findings_columns.index("op")]: r[col] for r in rep.findings_rows}
    assert cells[".cpu()"].startswith("on an H200: ~") and cells["Tensor.add"] != "-"

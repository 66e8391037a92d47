"""The pure parts of scripts/gpu/probe_validate.py: finding attribution and the reports it writes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from perfkit.record import Finding, Run

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu" / "probe_validate.py"


@pytest.fixture(scope="module")
def pv():
    spec = importlib.util.spec_from_file_location("probe_validate", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_planted_markers_on_lines_and_blocks(pv):
    src = "\n".join([
        "x = t.nonzero()  # ANTI-PATTERN nonzero_reset: data-dependent shape",
        "loss.item()  # planted: item_log",
        "# planted-begin: env_loop",
        "for i in range(n):",
        "    obs[i] = f(i)  # planted: fresh_tensors, list_gather",
        "# planted-end: env_loop",
        "y = 2",
    ])
    marks = pv.planted_lines(src)
    assert marks[2] == {"item_log"}
    assert marks[4] == {"env_loop"}
    assert marks[5] == {"env_loop", "fresh_tensors", "list_gather"}
    assert marks[1] == {"nonzero_reset"} and 7 not in marks


def test_attribute_by_markers_only_takes_the_scripts_own_findings(pv, tmp_path):
    script = tmp_path / "train_naive.py"
    script.write_text("a\nb.item()  # planted: item_log\n")
    mine = Finding("sync", ".item()", "examples/train_naive.py", 2, per_step=1.0)
    other = Finding("sync", ".item()", "perfkit/envs/x.py", 2, per_step=1.0)
    got = pv.attribute_by_markers(Run(findings=[mine, other]), script)
    assert got == {"item_log": [(mine, 1.0)]}


def test_a_marked_loop_brings_its_body(pv, tmp_path):
    script = tmp_path / "train_naive.py"
    script.write_text("def step(self):\n"
                      "    for i in range(self.n):  # planted: env_loop\n"
                      "        self.y[i] = self.x[i] * 2\n"
                      "    return self.y.sum()\n")
    loop = Finding("loop", "for-loop over envs", str(script), 2, per_step=64.0)
    body = Finding("alloc", "Tensor.mul", str(script), 3, per_step=64.0)
    after = Finding("alloc", "Tensor.sum", str(script), 4, per_step=1.0)
    got = pv.attribute_by_markers(Run(findings=[loop, body, after]), script)
    assert got == {"env_loop": [(loop, 1.0), (body, 1.0)]}


def test_attribute_by_diff_takes_what_a_fix_removes(pv):
    item = Finding("sync", ".item()", "t.py", 10, per_step=1.0)
    alloc = Finding("alloc", "torch.zeros", "t.py", 20, per_step=4.0)
    base = Run(findings=[item, alloc])
    fixed = {
        "item_log": Run(findings=[Finding("alloc", "torch.zeros", "t.py", 20, per_step=4.0)]),
        "fresh_tensors": Run(findings=[Finding("sync", ".item()", "t.py", 10, per_step=1.0),
                                       Finding("alloc", "torch.zeros", "t.py", 20, per_step=1.0)]),
        "print_tensor": Run(findings=[item, alloc]),
    }
    got = pv.attribute_by_diff(base, fixed)
    assert got["item_log"] == [(item, 1.0)]
    assert got["fresh_tensors"] == [(alloc, 0.75)]
    assert "print_tensor" not in got


def test_markdown_reports(pv, tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    from perfkit.pricing.machine_profile import build_profile

    prof = build_profile({"pyloop": {"status": "ok", "per_env_iteration_us": 20.0, "per_op_us": 7.0, "seconds": 1}})
    md = pv.profile_markdown(prof)
    assert "| `pyloop_iteration_ms` | 20 µs | `pyloop.per_env_iteration_us` |" in md
    v = {"num_envs": 256, "iterations": 3, "backend": None, "env": None, "attribution": "markers",
         "baseline_sps_runs": [100.0, 102.0], "baseline_median_sps": 101.0, "baseline_noise": 0.02,
         "step_ms_unprofiled": 2.5, "gpu_ms_per_step": 1.0, "pricing": {"profile": "p"},
         "rows": [{"fix": "item_log", "predicted_gain": 0.10, "measured_gain": 0.12, "verdict": "within ±30%",
                   "predicted_saved_ms": 0.2, "measured_saved_ms": 0.25, "verdict_ms": "within ±30%",
                   "median_sps": 113.0, "findings": ["sync .item() t.py:1 x1/step share 1.00"]},
                  {"fix": "env_loop", "predicted_gain": None, "measured_gain": 0.5, "verdict": "no findings attributed",
                   "predicted_saved_ms": None, "measured_saved_ms": 0.8, "verdict_ms": "no findings attributed",
                   "median_sps": 150.0, "findings": []}]}
    v["base_fix"], v["measured"], v["gpu_backlog_ms_per_step"] = [], "in-process", 0.1
    md = pv.validation_markdown([v])
    assert "| `item_log` | +10.0% | +12.0% | within ±30% | 0.2 | 0.25 | within ±30% | 113 |" in md
    assert "| `env_loop` | — | +50.0% | no findings attributed | — | 0.8 | no findings attributed | 150 | — |" in md
    json.dumps(v)


def test_missing_training_script_fails_loudly_after_the_profile(pv, tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(pv, "run_probes", lambda out, quick: {"probes": {}})
    rc = pv.main(["--out", str(tmp_path / "out"), "--script", str(tmp_path / "nope.py")])
    assert rc == 1
    assert "nope.py is not in this tree" in (tmp_path / "out" / "validation-error.txt").read_text()


def test_end_to_end_on_cpu_with_a_planted_toy_loop(pv, tmp_path, monkeypatch):
    """Profile, attribute by markers, price, measure interleaved: the whole validation on a CPU toy."""
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    import perfkit.probes as probes
    from perfkit.pricing.machine_profile import build_profile

    profile = build_profile(probes.run_all(quick=True, only=["pyloop", "allocator"]))
    script = Path(__file__).with_name("planted_train.py")
    args = pv.argparse.Namespace(script=script, num_envs=64, iterations=40, seed=0, backend=None, env=None,
                                 repeats=2, budget_s=60.0, run_timeout_s=120.0, subprocess=False)
    v = pv.validate(args, profile, tmp_path, ["item_log", "env_loop"])
    assert v["measured"] == "in-process"
    assert v["attribution"] == "markers"
    rows = {r["fix"]: r for r in v["rows"]}
    loop = rows["env_loop"]
    # the marked loop header brings the allocations of its body
    assert loop["findings"][0].startswith("loop ") and any(x.startswith("alloc ") for x in loop["findings"])
    # removing the per-env loop saves time on both sides; the agreement itself is the GPU script's
    # business (timings on a loaded 2-core CI box are too noisy to judge it here)
    assert loop["measured_gain"] > 0.5 and loop["predicted_gain"] > 0.05
    assert 0.1 < loop["predicted_saved_ms"] / loop["measured_saved_ms"] < 10.0
    assert loop["verdict"] in ("within ±30%", "over-predicted", "under-predicted")
    assert rows["item_log"]["findings"] and rows["item_log"]["findings"][0].startswith("sync .item()")
    assert len(v["baseline_sps_runs"]) == 2 and v["baseline_noise"] >= 0
    assert "| `env_loop` |" in pv.validation_markdown([v])
    # a pass on top of a base fix: the baseline already has env_loop fixed, its findings are gone
    v2 = pv.validate(args, profile, tmp_path, ["item_log"], ("env_loop",), budget_s=0.0)
    assert v2["base_fix"] == ["env_loop"] and v2["rows"][0]["findings"][0].startswith("sync .item()")
    assert not any(f.kind == "loop" for f in pv.Run.load(tmp_path / "naive-fix-env_loop.json").findings)


def test_measure_in_a_subprocess_parses_the_sps_line(pv, tmp_path):
    script = tmp_path / "t.py"
    script.write_text("import sys\nprint('noise')\nprint('SPS: 123.5')\n")
    args = pv.argparse.Namespace(script=script, num_envs=8, iterations=1, seed=0, backend=None, env=None,
                                 run_timeout_s=60.0, subprocess=True)
    assert pv.Measure(args)(()) == 123.5
    script.write_text("import sys\nsys.exit(3)\n")
    with pytest.raises(RuntimeError, match="exit 3"):
        pv.Measure(args)(("item_log",))


def test_verdicts(pv):
    assert pv.verdict(0.11, 0.10, 0.02) == "within ±30%"
    assert pv.verdict(0.20, 0.10, 0.02) == "over-predicted"
    assert pv.verdict(0.01, 0.10, 0.02) == "under-predicted"
    assert pv.verdict(0.01, -0.01, 0.02) == "below noise (both)"
    assert pv.verdict(None, 0.5, 0.02) == "no findings attributed"


def test_noise_pools_the_spread_of_every_repeated_variant(pv):
    sps = {"baseline": [100.0, 101.0], "a": [90.0, 110.0], "b": [100.0, 120.0], "c": [50.0]}
    med = {k: pv.statistics.median(v) for k, v in sps.items()}
    assert pv.spread(sps, med) == pytest.approx(20 / 110)  # median of 1/100.5, 20/100, 20/110
    assert pv.spread({"baseline": [100.0, 110.0]}, {"baseline": 105.0}) == pytest.approx(10 / 105)

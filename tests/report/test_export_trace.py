"""`perfkit export-trace`: Chrome/Perfetto trace-event JSON from a run's timeline."""

import json

import pytest
from click.testing import CliRunner

from perfkit.cli import main
from perfkit.record import Run

TIMELINE = [
    {"step": 3, "segment": "physics", "start_ms": 10.0, "dur_ms": 1.5, "gpu": False},
    {"step": 3, "segment": "reward", "start_ms": 11.5, "dur_ms": 0.25, "gpu": False},
    {"step": 3, "segment": "physics", "start_ms": 10.2, "dur_ms": 1.9, "gpu": True},
    {"step": 4, "segment": "physics", "start_ms": 12.0, "dur_ms": 1.25, "gpu": False},
    {"step": 4, "segment": "policy", "start_ms": 13.25, "dur_ms": 0.5, "gpu": False},
]


def export(run, tmp_path):
    src = run.save(tmp_path / "run.json")
    out = tmp_path / "trace.json"
    res = CliRunner().invoke(main, ["export-trace", str(src), "-o", str(out)])
    return res, out


def spans(trace):
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def test_timeline_becomes_cpu_gpu_and_step_tracks(tmp_path):
    run = Run(command=["train.py", "--num-envs", "4096"], num_envs=4096, steps=2, sps=1e6)
    run.timeline.spans = TIMELINE
    res, out = export(run, tmp_path)
    assert res.exit_code == 0, res.output
    trace = json.loads(out.read_text())
    assert trace["displayTimeUnit"] == "ms" and trace["otherData"]["source"] == "timeline"
    names = {(e["name"], e.get("tid"), e["args"]["name"]) for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] in ("thread_name", "process_name")}
    assert ("process_name", None, "perfkit: train.py --num-envs 4096") in names
    assert {("thread_name", 2, "CPU segments"), ("thread_name", 3, "GPU segments"), ("thread_name", 1, "steps")} <= names
    xs = spans(trace)
    seg = [e for e in xs if e["cat"] in ("segment", "gpu")]
    assert len(seg) == len(TIMELINE)
    phys = next(e for e in seg if e["cat"] == "segment" and e["args"]["step"] == 3 and e["name"] == "physics")
    assert phys["ts"] == pytest.approx(10_000.0) and phys["dur"] == pytest.approx(1_500.0)  # microseconds
    gpu = [e for e in seg if e["cat"] == "gpu"]
    assert len(gpu) == 1 and gpu[0]["tid"] == 3
    steps = {e["name"]: e for e in xs if e["cat"] == "step"}
    # a step span encloses its CPU segments: step 3 runs 10.0 .. 11.75 ms
    assert steps["step 3"]["ts"] == pytest.approx(10_000) and steps["step 3"]["dur"] == pytest.approx(1_750)
    assert steps["step 4"]["ts"] == pytest.approx(12_000) and steps["step 4"]["dur"] == pytest.approx(1_750)
    assert [e["ts"] for e in xs] == sorted(e["ts"] for e in xs)
    assert f"({len(xs)} events)" in res.output


def test_without_timeline_steps_are_laid_end_to_end(tmp_path):
    run = Run(command=["sweep-point"], num_envs=256, steps=3, step_times_ms=[2.0, 3.0, 1.5])
    res, out = export(run, tmp_path)
    assert res.exit_code == 0, res.output
    trace = json.loads(out.read_text())
    assert trace["otherData"]["source"] == "step_times_ms"
    xs = spans(trace)
    assert [(e["name"], e["ts"], e["dur"]) for e in xs] == [("step 0", 0.0, 2000.0), ("step 1", 2000.0, 3000.0),
                                                             ("step 2", 5000.0, 1500.0)]


def test_bad_record_and_bad_timeline_exit_2(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text("{")
    res = CliRunner().invoke(main, ["export-trace", str(bad), "-o", str(tmp_path / "t.json")])
    assert res.exit_code == 2 and "broken.json" in res.output and "not JSON" in res.output
    run = Run(command=["x"])
    run.timeline.spans = [{"step": 0, "segment": "physics", "start_ms": "soon", "dur_ms": 1}]
    res, out = export(run, tmp_path)
    assert res.exit_code == 2 and "timeline entry 0: start_ms is not a number" in res.output
    assert not out.exists()


def test_a_profiled_run_exports_every_step_with_segment_detail_spread_over_it():
    import torch

    from perfkit.renderers.perfetto import steps_covered, to_trace
    from perfkit.profile.session import Session

    class Env:
        num_envs = 8

        def __init__(self):
            self.x = torch.zeros(8)

        def compute_reward(self):
            return self.x.sum()

        def step(self, a):
            self.x.add_(a)
            return self.compute_reward()

    env, a = Env(), torch.ones(8)
    with Session(warmup_steps=2) as s:
        for _ in range(60):
            env.step(a)
    trace = to_trace(s.run)
    assert steps_covered(trace) == list(range(1, 61))  # every step, warm-up included
    seg_steps = {e["args"]["step"] for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "segment"}
    assert max(seg_steps) > 40 and len(seg_steps) < 60  # segment detail spread over the run, not on every step

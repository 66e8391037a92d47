"""Rates of work done once per period of the training loop (a learner update) read exactly however the
run's length falls (issue 22, item 4): the syncs' rates are counted over whole periods."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from perfkit.collectors.sampling import loop_period
from perfkit.config import Config
from perfkit.profile.session import Session
from perfkit.collectors.steps import ClockSummary, SyncSummary
from perfkit.collectors.timing import SegmentSummary
from perfkit.profile.snapshot import Snapshot, build_run

from _helpers import AddEnv, load_file

REPO = Path(__file__).resolve().parents[2]



def train(iterations: int, rollout: int, minibatches: int):
    """A rollout of ``rollout`` steps, then an update of ``minibatches`` backward passes, each reading its
    loss with ``.item()`` (a sync on the GPU)."""
    env, a = AddEnv(), torch.ones(8)
    w = torch.nn.Parameter(torch.ones(8))
    for _ in range(iterations):
        for _ in range(rollout):
            env.step(a)
        for _ in range(minibatches):
            loss = (w * 2).sum()
            loss.backward()
            loss.item()  # <- the update's sync


def _update_sync(run):
    (f,) = [f for f in run.findings_of("sync") if "the update's sync" in f.code]
    return f


@pytest.mark.parametrize("iterations", [2, 3])
def test_a_once_per_iteration_sync_reads_its_exact_rate_when_the_run_ends_after_an_update(iterations):
    # the last update runs after the last env step began: it used to count as (mostly) teardown, so a
    # short run read 9 of 16 minibatch syncs over 43 steps (0.209/step for 0.333)
    with Session(warmup_steps=5, config=Config(sample_budget=1.0), count_cpu_tensors=True) as s:
        train(iterations, rollout=24, minibatches=8)
    f = _update_sync(s.run)
    assert f.per_step == pytest.approx(8 / 24, rel=1e-6)
    assert f.count == round(f.per_step * s.run.steps)
    assert s.run.extra["rate_window"]["period"] == 24
    assert s.run.extra["rate_window"]["steps"] % 24 == 0


def test_a_per_step_sync_keeps_its_rate_in_the_window():
    with Session(warmup_steps=5, config=Config(sample_budget=1.0), count_cpu_tensors=True) as s:
        env, a = AddEnv(), torch.ones(8)
        w = torch.nn.Parameter(torch.ones(8))
        for _ in range(2):
            for _ in range(24):
                env.step(a).sum().item()  # <- per step
            (w * 2).sum().backward()
    (f,) = [f for f in s.run.findings_of("sync") if "per step" in f.code]
    assert f.per_step == pytest.approx(1.0)


def test_loop_period_from_the_learners_steps():
    assert loop_period([24, 48]) == 24
    assert loop_period([24, 48, 72, 96]) == 24
    assert loop_period([24]) is None and loop_period([24], confirmed=False) == 24
    assert loop_period([3, 10, 11, 30]) is None  # no gap recurs: no period
    assert loop_period([]) is None


def _snapshot(learner_steps=(24, 48), counts=None, trail=None, kept_trails=None) -> Snapshot:
    """A hand-built snapshot, composed of the collectors' summaries: 2 iterations of 24 steps, warm-up
    5; 8 syncs at one site during step 24 (in the steady state) and 8 after the last step's start (the
    last update)."""
    key = ("sync", ".item()", "/x/ppo.py", 317, "update", None, False, "steady")
    clock = ClockSummary(total_steps=48, step_times=[0.001] * 42, trail={key: 8} if trail is None else trail,
                         kept_trails={24: {key: 8}} if kept_trails is None else kept_trails)
    syncs = SyncSummary(counts={key: [16, 0, {"learner": 16}]} if counts is None else counts)
    return Snapshot(warmup_steps=5, num_envs=8, clock=clock, syncs=syncs,
                    segments=SegmentSummary(learner_steps=list(learner_steps)))


def test_build_run_counts_syncs_over_whole_periods():
    run = build_run(_snapshot())
    assert run.steps == 43 and run.total_steps == 48 and len(run.step_times_ms) == 42 and run.sps == 8000
    (f,) = run.findings
    assert f.per_step == pytest.approx(8 / 24) and f.count == round(8 / 24 * 43)
    assert run.segments["learner"].syncs_per_step == pytest.approx(8 / 24)
    assert run.extra["rate_window"] == {"period": 24, "steps": 24, "first_step": 25}


def test_build_run_without_a_period_counts_over_the_steady_state():
    run = build_run(_snapshot(learner_steps=[]))
    (f,) = run.findings
    assert f.per_step == pytest.approx(16 / 43)  # the last step's 8 count: one earlier step made 8
    assert "rate_window" not in run.extra


def test_build_run_keeps_a_site_that_synced_only_after_the_last_step_as_teardown():
    key = ("sync", ".cpu()", "/x/save.py", 3, "save", None, False, "steady")
    run = build_run(_snapshot(counts={key: [5, 0, {"other": 5}]}, trail={key: 5}, kept_trails={}))
    assert run.findings == [] and run.outside_steps.teardown[0]["count"] == 5


def _train_py(config: Config):
    """examples/train.py (CPU, MuJoCo C backend), 4 iterations of 16 steps, under a session."""
    mod = load_file(REPO / "examples" / "train.py", "_pk_train")
    with Session(config=config) as s:
        mod.main(["--num-envs", "16", "--iterations", "4", "--num-steps", "16", "--backend", "mujoco", "--device", "cpu"])
    return s.run


def test_train_py_allocations_from_whole_periods_match_every_step_sampled():
    # the first sampled step's one-off cost used to widen the stride to thousands: allocations were
    # counted on one rollout step (10/step of ~54, the learner's 13 not at all)
    every = _train_py(Config(sample_every=1, sample_budget=1.0))
    default = _train_py(Config())
    assert default.sampling["blocks"] and len(default.sampling["steps"]) < every.steps / 2
    assert default.allocs_per_step == pytest.approx(every.allocs_per_step, rel=0.10)
    assert default.segments["learner"].allocs_per_step == pytest.approx(every.segments["learner"].allocs_per_step, rel=0.10)
    from perfkit.analysis.budgets import check_run

    assert every.allocs_per_step > 10 and check_run(default, max_allocs_per_step=10)


def test_an_allocation_every_10th_step_reads_its_rate_in_a_loop_with_a_learner():
    env, a = AddEnv(), torch.ones(8)
    w = torch.nn.Parameter(torch.ones(8))
    n = 0
    with Session(warmup_steps=5) as s:  # the default stride and budget
        for _ in range(8):
            for _ in range(24):
                n += 1
                env.step(a)
                if n % 10 == 0:
                    env.extra = torch.ones(8)  # <- planted
            (w * 2).sum().backward()
    (f,) = [f for f in s.run.findings_of("alloc") if "planted" in f.code]
    assert f.per_step == pytest.approx(0.1, abs=0.01)


def test_a_per_env_loop_in_the_update_reads_its_rate_from_whole_periods():
    # 24 minibatches, each looping over the 8 envs, once per 24-step iteration: 8 iterations per step;
    # the rollout step sampled before the period was known counts for nothing once a whole period is
    env, a = AddEnv(), torch.ones(8)
    w = torch.nn.Parameter(torch.ones(8))
    with Session(warmup_steps=5, config=Config(sample_budget=1.0)) as s:
        for _ in range(4):
            for _ in range(24):
                env.step(a)
            for _ in range(24):
                (w * 2).sum().backward()
                for i in range(8):  # <- per env, in the update
                    pass
    (f,) = [f for f in s.run.findings_of("loop") if "per env, in the update" in f.code]
    assert s.run.sampling["blocks"] and f.per_step == pytest.approx(8.0)


rsl_rl = pytest.importorskip("rsl_rl")


def test_rsl_rl_minibatch_item_reads_one_third_per_step(tmp_path):
    # issue 22's case: rsl-rl-lib's OnPolicyRunner, 8 envs, 2 iterations of 24 steps, 2 epochs x 4
    # minibatches: PPO.update's minibatch .item() runs 16 times in 48 steps
    out = tmp_path / "run.json"
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-m", "perfkit", "profile", "-o", str(out),
                        str(REPO / "examples/stacks/rsl_rl_torch_env.py"), "--num-envs", "8", "--iterations", "2",
                        "--num-steps", "24", "--epochs", "2", "--mini-batches", "4", "--hidden", "32",
                        "--log-dir", str(tmp_path / "logs")], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    d = json.loads(out.read_text())
    (f,) = [f for f in d["findings"] if f["kind"] == "sync" and f["code"].startswith("mean_value_loss += value_loss.item()")]
    assert f["per_step"] == pytest.approx(1 / 3, rel=0.05)


def test_two_whole_periods_a_stride_apart_read_the_loops_period_not_the_stride():
    """Two sampled blocks of a 32-step loop, 31 periods apart (the stride), one event per period: periods 31
    and 32 both fit the two hits; neither is taken, and the whole periods' mean reads 1/32 (a run of
    train_naive read 6.71/step for 6.5 when 31 was taken)."""
    from perfkit.profile.snapshot import sampled_rate

    blocks = [*range(37, 69), *range(1029, 1061)]
    sampled = {i: 31 for i in blocks}
    occurrences = {40: 1, 40 + 31 * 32: 1}
    assert sampled_rate(occurrences, sampled) == pytest.approx(1 / 32)


def test_an_every_10th_step_event_in_spread_samples_reads_one_tenth_exactly():
    from perfkit.profile.snapshot import sampled_rate

    sampled = {6 + 31 * k: 31 for k in range(40)}  # single steps a prime stride apart
    occurrences = {i: 1 for i in sampled if i % 10 == 0}
    assert sampled_rate(occurrences, sampled) == 0.1

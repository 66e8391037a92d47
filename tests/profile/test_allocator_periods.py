"""On CUDA the caching allocator's own request count, read where the learner is entered and left (once
per period), gives the allocations of every whole period exactly; the sampled steps then stay single
steps within the sampling budget and only say which lines allocate (issues 22 and 23: exact rates without
paying for a whole period traced op by op). This machine has no CUDA: the count is a stand-in the loop
adds its allocations to, read by the same clock hooks."""

from __future__ import annotations

import pytest
import torch

from perfkit.analysis.budgets import check_run
from perfkit.analysis.report_model import build_report
from perfkit.collectors.sampling import SampleSchedule
from perfkit.config import Config
from perfkit.profile.session import Session

from _helpers import AddEnv


class AllocatorCount:
    """Stands in for ``allocation.all.allocated`` of the CUDA caching allocator."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> int:
        return self.n


def _train(counter: AllocatorCount, iterations: int, rollout: int = 24, per_step: int = 3, per_update: int = 40):
    env, a = AddEnv(), torch.ones(8)
    w = torch.nn.Parameter(torch.ones(8))
    for _ in range(iterations):
        for _ in range(rollout):
            env.step(a)
            counter.n += per_step
        for _ in range(4):
            (w * 2).sum().backward()
            counter.n += per_update // 4


@pytest.mark.parametrize("iterations", [4, 7])
def test_the_allocators_count_over_whole_periods_is_exact_and_the_learners_share_too(iterations):
    counter = AllocatorCount()
    with Session(warmup_steps=5) as s:
        s.segclock.alloc_counter = counter
        _train(counter, iterations)
    periods = s.run.extra["cuda_allocator_periods"]
    assert periods["allocs_per_step"] == pytest.approx((24 * 3 + 40) / 24)
    assert periods["learner_allocs_per_step"] == pytest.approx(40 / 24)
    assert periods["steps"] == 24 * periods["periods"] and periods["periods"] >= 1
    assert "cuda_allocator_allocs_per_step" not in s.run.extra  # the count is kept once (the sampled steps' figure is not)
    rep = build_report([s.run])
    assert ("CUDA allocations/step, whole periods", [f"4.67 over {periods['periods']} whole periods (learner 1.67)"]) \
        in rep.setup_rows


def test_with_the_allocator_counting_samples_stay_single_steps():
    counter = AllocatorCount()
    with Session(warmup_steps=5, config=Config(sample_every=5, sample_budget=1.0)) as s:
        s.segclock.alloc_counter = counter
        _train(counter, 8)
    assert "blocks" not in s.run.sampling
    steps = s.run.sampling["steps"]
    assert len(steps) >= 3 and all(b - a > 1 for a, b in zip(steps, steps[1:]))
    # without the count (the CPU), the same loop samples a whole period once the period is known
    with Session(warmup_steps=5, config=Config(sample_every=5, sample_budget=1.0)) as s2:
        _train(AllocatorCount(), 8)
    assert s2.run.sampling.get("blocks") and s2.run.sampling["blocks"][0][1] - s2.run.sampling["blocks"][0][0] == 23


def test_the_budget_gate_reads_the_allocators_count_beyond_the_sampled_lines():
    counter = AllocatorCount()
    with Session(warmup_steps=5) as s:
        s.segclock.alloc_counter = counter
        _train(counter, 4)
    problems = check_run(s.run, max_allocs_per_step=2)
    assert problems and "CUDA allocator" in problems[0] and problems[0].startswith("4.66667 allocs per step")
    assert check_run(s.run, max_allocs_per_step=5) == []


def test_where_whole_periods_are_counted_elsewhere_the_first_sample_prices_the_stride():
    def run(whole: bool) -> int:
        sch = SampleSchedule(first=6, every=31, budget=0.01)
        sch.whole_periods = whole
        assert sch.begin(6)
        sch.sample_done(6, 0.5)  # the first sample: one-off costs, 50x a typical step
        for i in range(7, 37):
            sch.begin(i)
            sch.timed_step(0.01)
        sch.begin(37)
        return sch.every
    assert run(True) == 31  # its cost is one-off: the next sample is taken at the default stride
    assert run(False) > 4000  # it prices the stride: a short run is sampled once

"""The sampling schedule (perfkit.collectors.sampling.SampleSchedule) on injected step costs: no clock,
no machine load."""

from __future__ import annotations

from perfkit.collectors.sampling import SampleSchedule, next_prime


def drive(schedule: SampleSchedule, steps: int, first: int, plain: float, sampled: float) -> list[int]:
    """Run ``steps`` steps from step ``first`` (the first steady step), each plain step costing
    ``plain`` seconds and each sampled one ``sampled``; returns the sampled steps."""
    for idx in range(first, first + steps):
        if schedule.begin(idx):
            schedule.sample_done(idx, sampled)
        else:
            schedule.timed_step(plain)
    return sorted(schedule.sampled)


def test_samples_the_first_steady_step_and_every_stride_after_it_when_cheap():
    s = SampleSchedule(first=6, every=5, budget=1.0)
    assert drive(s, 30, 6, plain=1.0, sampled=100.0) == [6, 11, 16, 21, 26, 31]
    assert all(w == 5 for w in s.sampled.values()) and s.stride == 5


def test_explicit_steps_stand_for_themselves():
    s = SampleSchedule(first=6, every=5, budget=0.01, explicit=(7, 9))
    assert drive(s, 20, 6, plain=1.0, sampled=100.0) == [7, 9]
    assert s.sampled == {7: 1, 9: 1} and s.stride is None


def test_widens_its_stride_when_samples_cost_more_than_the_budget():
    # a sample costs 4 plain steps more than a plain one; at 1 % that needs a stride of >= 400
    s = SampleSchedule(first=3, every=3, budget=0.01)
    got = drive(s, 2000, 3, plain=1.0, sampled=5.0)
    assert s.every >= 400 and s.every == next_prime(s.every)
    assert len(got) <= 2000 / 400 + 2
    # the first sample came before any timed step; it was priced once one was known, and the second
    # waited for that, rather than come 3 steps later at the stride nobody had priced yet
    assert got[0] == 3 and got[1] - got[0] > 3


def test_next_prime():
    assert [next_prime(n) for n in (0, 2, 4, 31, 32, 400)] == [2, 2, 5, 31, 37, 401]

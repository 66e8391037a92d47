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
    # the first sampled step prices nothing (it pays the one-off costs): the second comes at the
    # configured stride, and from it on the stride is priced
    assert got[:2] == [3, 6] and got[2] - got[1] >= 400


def test_a_one_off_cost_of_the_first_sample_does_not_price_the_stride():
    # the first sampled step costs 2000 plain steps (parsing, first calls); the others cost 2 % more than
    # a plain step: at a 1 % budget that needs a stride of 2, below the configured 31
    s = SampleSchedule(first=6, every=31, budget=0.01)
    for idx in range(6, 1006):
        if s.begin(idx):
            s.sample_done(idx, 2000.0 if idx == 6 else 1.02)
        else:
            s.timed_step(1.0)
    assert s.every == 31 and sorted(s.sampled)[:3] == [6, 37, 68]


def test_once_the_period_is_known_samples_are_whole_periods():
    s = SampleSchedule(first=6, every=3, budget=1.0)
    for idx in range(6, 300):
        if idx == 30:
            s.period = 24  # the learner ran in step 24: 24 env steps per period
        if s.begin(idx):
            s.sample_done(idx, 1.0)
        else:
            s.timed_step(1.0)
    # single steps 6, 9, ..., 30 until the period was known; then blocks of 24 steps, 3 periods apart
    assert s.blocks == [(30, 53), (102, 125), (174, 197), (246, 269)]
    w = s.weights()
    assert all(w[i] == 3 for a, b in s.blocks for i in range(a, b + 1))
    assert all(w[i] == 0 for i in (6, 9, 27))  # single steps stand for nothing once a whole period is sampled
    assert sum(w.values()) == 3 * 24 * 4


def test_a_block_cut_short_by_the_run_end_stands_for_nothing():
    s = SampleSchedule(first=6, every=1, budget=1.0)
    s.period = 10
    for idx in range(6, 31):
        if s.begin(idx):
            s.sample_done(idx, 1.0)
    assert s.blocks == [(6, 15), (16, 25)]
    assert s.weights()[26] == 0 and s.weights()[25] == 1


def test_next_prime():
    assert [next_prime(n) for n in (0, 2, 4, 31, 32, 400)] == [2, 2, 5, 31, 37, 401]


def test_a_block_stands_for_the_periods_until_the_next_even_when_the_stride_widened_while_it_was_taken():
    # the first block prices the stride (each of its steps costs a plain step more: at 1 % that is >= 100 periods);
    # it is priced once a timed step is known (when the next sample would start), and the block's weight is the
    # gap that follows it, not the stride it was taken at
    s = SampleSchedule(first=6, every=3, budget=0.01)
    s.period = 10
    drive(s, 2994, 6, plain=1.0, sampled=2.0)
    (a0, b0), (a1, _b1) = s.blocks[:2]
    w = s.weights()
    assert s.every >= 100
    assert w[a0] == (a1 - a0) // (b0 - a0 + 1)  # the periods from this block to the next
    assert len({w[i] for i in range(a0, b0 + 1)}) == 1


def test_a_single_step_stands_for_the_steps_until_the_next():
    s = SampleSchedule(first=3, every=3, budget=0.01)
    got = drive(s, 2000, 3, plain=1.0, sampled=5.0)
    assert all(s.sampled[a] == b - a for a, b in zip(got, got[1:]))

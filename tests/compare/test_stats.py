"""The bootstrap behind the compare gate (perfkit.analysis.stats), on synthetic step times."""

import random

import pytest

from perfkit.analysis.stats import MIN_SAMPLES, mean_difference_halfwidth, ratio_evidence, strata


def steps(n=200, base=2.5, jitter=0.1, every=32, update=38.0, seed=0, scale=1.0):
    """A PPO-shaped step-time series: small steps, and a learner update every ``every`` steps."""
    rng = random.Random(seed)
    return [scale * ((update if i % every == every - 1 else base) * (1 + jitter * (rng.random() - 0.5)))
            for i in range(n)]


def test_strata_cut_where_a_step_is_many_times_the_one_below():
    parts = strata([2.4, 2.6, 2.5, 7.0, 38.0, 41.0, 2.55])
    assert [list(p) for p in parts] == [[2.4, 2.5, 2.55, 2.6, 7.0], [38.0, 41.0]]  # 7 is < 3 x 2.6
    assert len(strata(steps())) == 2 and len(strata([1.0] * 20)) == 1


def test_unchanged_runs_give_an_interval_around_one():
    ev = ratio_evidence(steps(seed=1), steps(seed=2), "mean")
    assert ev.lo < 1.0 < ev.hi and not ev.worse
    assert ev.hi - ev.lo < 0.05  # the updates' fixed count is kept: the interval is narrow
    assert 0.05 < ev.p_not_worse < 0.95


def test_a_slowdown_is_beyond_the_spread_and_says_how_sure():
    ev = ratio_evidence(steps(seed=1), steps(seed=2, scale=1.10), "median")
    assert ev.worse and ev.lo > 1.05 and ev.p_not_worse < 1e-3
    assert "95% CI of the median step-time ratio" in ev.describe() and "p < 0.001" in ev.describe()
    faster = ratio_evidence(steps(seed=1), steps(seed=2, scale=0.9), "mean")
    assert faster.hi < 1.0 and not faster.worse


def test_seeded_and_therefore_repeatable():
    a, b = steps(seed=3), steps(seed=4, scale=1.02)
    assert ratio_evidence(a, b, "p99") == ratio_evidence(a, b, "p99")


def test_too_few_samples_give_no_evidence():
    assert ratio_evidence([1.0] * (MIN_SAMPLES - 1), [1.0] * 50) is None
    assert mean_difference_halfwidth([1.0] * 50, []) is None
    with pytest.raises(ValueError):
        ratio_evidence(steps(), steps(), "mode")


def test_mean_difference_halfwidth_is_the_spread_in_ms():
    w = mean_difference_halfwidth(steps(seed=1), steps(seed=2))
    assert 0 < w < 0.1

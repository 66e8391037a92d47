import math

import pytest

from perfkit.sweeps.knee import find_knee, gain_per_doubling


def saturating(n, peak=4e6, half=2048):
    """Michaelis-Menten-like throughput: linear at small n, flat at large n."""
    return peak * n / (n + half)


def test_knee_on_saturating_curve_is_first_point_where_doubling_gains_under_threshold():
    ns = [256 * 2**i for i in range(8)]  # 256 .. 32768
    sps = [saturating(n) for n in ns]
    knee = find_knee(ns, sps, threshold=0.10)
    # by hand: gain(n -> 2n) = 2(n+h)/(2n+h) - 1 = h/(2n+h) < 0.1  <=>  n > 4.5 h = 9216
    assert knee.num_envs == 16384 and knee.saturated
    assert knee.sps == pytest.approx(saturating(16384))
    assert [g[0] for g in knee.gains] == ns[:-1]
    for (n0, n1, g) in knee.gains:
        assert g == pytest.approx(2048 / (2 * n0 + 2048))


def test_threshold_moves_the_knee():
    ns = [256 * 2**i for i in range(8)]
    sps = [saturating(n) for n in ns]
    assert find_knee(ns, sps, threshold=0.30).num_envs == 4096  # h/(2n+h) < 0.3  <=>  n > 1.17 h = 2389
    assert find_knee(ns, sps, threshold=0.01).num_envs is None


def test_linear_curve_has_no_knee_and_says_so():
    ns = [256, 512, 1024, 2048]
    knee = find_knee(ns, [10.0 * n for n in ns])
    assert knee.num_envs is None and not knee.saturated
    assert "no knee up to 2048" in knee.describe()
    assert knee.peak_num_envs == 2048


def test_a_dip_followed_by_growth_is_not_the_knee():
    knee = find_knee([1024, 2048, 4096, 8192], [1e6, 1.9e6, 1.8e6, 2.5e6])
    assert knee.first_below == 2048  # 2048 -> 4096 loses throughput (noise, a bad point) ...
    assert knee.num_envs is None  # ... but 4096 -> 8192 gains 39 % again: not saturated
    assert knee.peak_num_envs == 8192 and knee.peak_sps == 2.5e6


def test_flat_then_falling_curve_knees_where_it_stops_growing():
    knee = find_knee([1024, 2048, 4096, 8192, 16384], [1e6, 1.9e6, 2.0e6, 1.95e6, 1.7e6])
    assert knee.num_envs == 2048 and knee.sps == 1.9e6
    assert knee.peak_num_envs == 4096


def test_non_doubling_steps_are_normalised_per_doubling():
    # 4x steps; SPS x2.2 per 4x = x1.483 per doubling (48 %): above 10 %, no knee
    assert gain_per_doubling(256, 1.0, 1024, 2.2) == pytest.approx(math.sqrt(2.2) - 1)
    assert find_knee([256, 1024, 4096], [1.0, 2.2, 4.84]).num_envs is None
    # x1.15 per 4x = 7.2 % per doubling: a knee at the first point
    assert find_knee([256, 1024, 4096], [1.0, 1.15, 1.3]).num_envs == 256


def test_unsorted_duplicates_and_missing_points():
    knee = find_knee([4096, 256, 1024, 1024, 2048], [3.0, 1.0, 1.5, 1.9, float("nan")])
    # nan dropped; 1024 keeps its best (1.9); 256->1024 is 4x
    assert [g[:2] for g in knee.gains] == [(256, 1024), (1024, 4096)]


def test_empty_and_single_point():
    assert find_knee([], []).describe() == "no knee: no completed points"
    k = find_knee([512], [1.0])
    assert k.num_envs is None and "one completed point" in k.describe()


def test_bad_input():
    with pytest.raises(ValueError):
        find_knee([1, 2], [1.0])
    with pytest.raises(ValueError):
        find_knee([1, 2], [1.0, 2.0], threshold=0)


def test_no_knee_message_is_true_when_an_earlier_doubling_gained_little():
    # +5.9 % then +12.1 %: the last doubling still gains >= 10 %, so there is no knee, but not "every" one did
    knee = find_knee([256, 512, 1024], [100.0, 105.9, 105.9 * 1.121])
    assert knee.num_envs is None
    msg = knee.describe()
    assert "every doubling" not in msg
    assert "no knee up to 1024 envs" in msg and "+12.1%" in msg and "+5.9%" in msg
    linear = find_knee([256, 512, 1024], [100.0, 200.0, 400.0]).describe()
    assert "every doubling still gains at least 10%" in linear


def test_a_loss_reads_as_a_loss():
    """issue 18 item 9: never "gained only -22.5 %"."""
    # +50 %, -22.5 %, +30 %: no knee (the last doubling gains), and the dip is a loss
    knee = find_knee([256, 512, 1024, 2048], [100.0, 150.0, 150.0 * 0.775, 150.0 * 0.775 * 1.3])
    msg = knee.describe()
    assert knee.num_envs is None and "lost 22.5% of throughput" in msg and "gained only -" not in msg
    # saturated, then falling: the knee says throughput falls past it
    knee = find_knee([256, 512, 1024, 2048], [100.0, 200.0, 205.0, 160.0])
    assert knee.num_envs == 512 and "falls past it (down to -22.0% per doubling)" in knee.describe()

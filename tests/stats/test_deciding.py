"""The samples an undecided interval needs to clear a band edge (stats.deciding): the z rule
n' = floor(n (h/d)^2) + 1 and the Student-t rule on exact tiny cases."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from depthscale.stats.deciding import samples_to_decide


def test_z_rule_is_the_fewest_samples_whose_half_width_falls_below_the_distance() -> None:
    # estimate 1 in [-1, 3] from 4 samples against ">= 0": h = 2 towards the edge, d = 1
    need = samples_to_decide(1.0, -1.0, 3.0, (0.0, None), 4)
    assert (need.needed, need.edge, need.distance, need.half_width) == (17, 0.0, 1.0, 2.0)
    assert 2.0 * math.sqrt(4 / 17) < 1.0 <= 2.0 * math.sqrt(4 / 16)
    assert not need.decided and "17 seeds (now 4)" in need.said()


def test_t_rule_counts_the_falling_t_quantile() -> None:
    # a t-interval from 3 samples of SD 1 around 1: h = t(0.975, 2) / sqrt(3); against ">= 0"
    # the fewest m with t(0.975, m - 1) / sqrt(m) < 1 is 7 (t(6) / sqrt(7) = 0.925; m = 6: 1.05)
    h = float(stats.t.ppf(0.975, 2)) / math.sqrt(3)
    need = samples_to_decide(1.0, 1.0 - h, 1.0 + h, (0.0, None), 3, t_interval=True)
    assert need.needed == 7
    assert float(stats.t.ppf(0.975, 6)) / math.sqrt(7) < 1.0
    assert float(stats.t.ppf(0.975, 5)) / math.sqrt(6) > 1.0
    # the z rule on the same interval asks for more: it keeps t(2)'s quantile
    assert samples_to_decide(1.0, 1.0 - h, 1.0 + h, (0.0, None), 3).needed == 19


def test_the_edge_needing_most_decides_and_a_decided_interval_needs_nothing_more() -> None:
    # [-2, 2] around 0 straddles both edges of [-1, 0.5]: h = 2 each way, d = 1 and 0.5
    need = samples_to_decide(0.0, -2.0, 2.0, (-1.0, 0.5), 2)
    assert (need.needed, need.edge) == (math.floor(2 * 16) + 1, 0.5)
    inside = samples_to_decide(-1.5, -1.6, -1.4, (-1.9, -1.0), 3)
    assert inside.decided and inside.needed == 3 and inside.said() == "decided at 3 seeds"
    outside = samples_to_decide(0.5, 0.4, 0.6, (None, 0.0), 3)
    assert outside.decided


def test_an_estimate_on_the_edge_or_past_the_cap_cannot_be_decided_by_samples() -> None:
    on_edge = samples_to_decide(0.0, -1.0, 1.0, (0.0, None), 5)
    assert on_edge.needed is None and "cannot decide" in on_edge.said()
    assert samples_to_decide(1e-3, -1.0, 1.0, (0.0, None), 5, cap=1000).needed is None
    assert samples_to_decide(math.nan, -1.0, 1.0, (0.0, None), 5).needed is None
    with pytest.raises(ValueError, match="n >= 1"):
        samples_to_decide(1.0, 0.0, 2.0, (0.5, None), 0)

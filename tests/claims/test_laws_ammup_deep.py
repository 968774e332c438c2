"""laws-ammup's deep probes (laws Sec. 3.2, Eq. 9): AM-muP needs no training, so quick and
medium also probe depths far past the grid's (to L >= 64), and the slope over all the depths
is reported beside the judged grid-depth one. The judge is pure: made-up laws on both sides
of the band."""

from __future__ import annotations

import math

import pytest

from depthscale.claims.laws import ammup, settings
from depthscale.claims.laws.law import LawResult, probe_law
from depthscale.claims.laws.sweeps import effective_depth
from depthscale.stats.sweeps import Optimum


def _law(alpha: float, depths: tuple[int, ...]) -> LawResult:
    """Optima at mean log10 eta* = -2 + alpha log10 L, three seeds +-0.001 decades apart."""
    optima = [Optimum(d, s, 10 ** (-2.0 + alpha * math.log10(d) + off), 0.0, False, "ammup")
              for d in depths for s, off in enumerate((-0.001, 0.0, 0.001))]
    return probe_law(optima, seed=0)


def test_quick_and_medium_probe_to_effective_depth_64_and_beyond() -> None:
    for scale in ("quick", "medium"):
        s = settings.AMMUP[scale]
        for key, arch in s["archs"].items():
            deep = s["deep_depths"][key]
            assert max(deep) > max(arch["depths"])
            assert effective_depth(arch, max(deep)) >= 64, (scale, key)
    assert "deep_depths" not in settings.AMMUP["smoke"]


@pytest.mark.parametrize("deep_alpha", [-1.5, -0.95, 0.5])
def test_deep_slope_is_reported_not_judged(deep_alpha: float) -> None:
    """Grid-depth probe and grid slopes -1.5 (both supported): the deep probes' slope, inside
    [-1.9, -1.0] or not (-0.95, +0.5), leaves the PASS alone and is named in the reason with
    its interval (L of the width's order is outside Sec. 3.3's 1 + O(1/C) regime)."""
    grid = _law(-1.5, (2, 4, 8, 16))
    a = ammup.ArchAmmup("cnn1d", grid, grid, [], _law(deep_alpha, (2, 4, 8, 16, 64, 128)), 32)
    judged = ammup.judge_ammup([a], 3)
    assert "alpha_ammup_deep_cnn1d" not in judged.bands
    assert judged.decision is not None
    verdict, reason = judged.decision
    assert verdict == "PASS", judged.decision
    assert "to L = 128 at width 32, reported, not judged" in reason
    assert f"AM-muP alpha {deep_alpha:.3g}" in reason
    measured = judged.measured
    assert measured["alpha_ammup_deep_cnn1d"] == pytest.approx(deep_alpha, abs=1e-6)


def test_without_deep_depths_the_judgement_is_unchanged() -> None:
    grid = _law(-1.5, (2, 4, 8, 16))
    judged = ammup.judge_ammup([ammup.ArchAmmup("cnn1d", grid, grid, [])], 3)
    assert "alpha_ammup_deep_cnn1d" not in judged.bands
    assert judged.decision[0] == "PASS", judged.decision

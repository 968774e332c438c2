"""laws-widths' spread band (laws Table 4): the seed-bootstrap interval of max - min alpha over
the (width, epoch) parts against <= 0.44, Table 4's own spread (-1.207 - -1.647). The judge is
pure: it is fed made-up laws with exact slopes, on both sides of the band's edge."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from depthscale.claims.laws import table1, widths
from depthscale.claims.laws.law import LawResult, probe_law
from depthscale.claims.laws.sweeps import SweepSettings
from depthscale.claims.registry import ClaimContext, read_settings
from depthscale.errors import ConfigError
from depthscale.stats.sweeps import Optimum

#: per-seed offsets of log10 eta* around the law: they cancel in the seed mean
_OFFSETS = (-0.001, 0.0, 0.001)


def _law(alpha: float) -> LawResult:
    """Optima with mean log10 eta* = -2 + alpha log10 L at L = 4, 8, 16, 32, three seeds."""
    optima = [Optimum(d, s, 10 ** (-2.0 + alpha * math.log10(d) + off), 0.0, False, "running")
              for d in (4, 8, 16, 32) for s, off in enumerate(_OFFSETS)]
    return probe_law(optima, seed=0)


def _parts(*alphas: float) -> dict[str, LawResult]:
    return {f"w{64 * (i + 1)}_epoch1": _law(a) for i, a in enumerate(alphas)}


def test_table4_own_alphas_have_its_spread_and_pass() -> None:
    """Table 4's nine alphas: spread 0.44 exactly, its interval on the edge; the three epoch-1
    alphas (-1.352, -1.360, -1.345, spread 0.015) pass both bands."""
    table4 = _parts(-1.352, -1.531, -1.207, -1.360, -1.444, -1.501, -1.345, -1.647, -1.550)
    low, high = widths.spread_interval(table4)
    assert low == pytest.approx(0.44, abs=3e-3) and high == pytest.approx(0.44, abs=3e-3)
    epoch1 = _parts(-1.352, -1.360, -1.345)
    assert widths.spread_interval(epoch1) == pytest.approx((0.015, 0.015), abs=3e-3)
    judged = widths.judge_widths(epoch1)
    assert judged.decision[0] == "PASS", judged.decision
    assert judged.bands["alpha_spread"] == (None, 0.44)


@pytest.mark.parametrize(("spread", "verdict"), [(0.43, "PASS"), (0.45, "FAIL")])
def test_spread_band_edge(spread: float, verdict: str) -> None:
    """Alphas -1.2, -1.3 and -1.2 - spread, all inside [-1.9, -1.0]: a spread 0.01 inside the
    edge passes, 0.01 outside fails."""
    judged = widths.judge_widths(_parts(-1.2, -1.3, -1.2 - spread))
    assert judged.decision[0] == verdict, judged.decision


def test_one_width_alpha_scaled_passes_the_law_band_but_fails_the_spread() -> None:
    """One width's alpha scaled by 1.5 (-1.2 -> -1.8): every alpha is still in the law band
    [-1.9, -1.0] (the old check, the law band alone, passed it), the spread 0.6 is not."""
    results = _parts(-1.2, -1.2, -1.8)
    assert widths.judge_laws(results).decision[0] == "PASS"
    low, high = widths.spread_interval(results)
    assert 0.59 < low <= high < 0.61
    judged = widths.judge_widths(results)
    assert judged.decision[0] == "FAIL", judged.decision
    assert "0.44" in judged.decision[1]


def test_a_missing_setting_is_a_config_error_before_any_run(tmp_path: Path) -> None:
    """The typed settings name what is missing: a sweep's seeds, laws-widths' epochs (before
    any sweep runs), laws-table1's architectures and probes."""
    with pytest.raises(ConfigError, match="seeds"):
        SweepSettings().seed_count()
    s = read_settings(widths.WidthsSettings, {"arch": {"model": "cnn1d"}, "widths": [8],
                                              "seeds": 1})
    ctx = ClaimContext("quick", tmp_path, "cpu", None, 0, {})
    with pytest.raises(ConfigError, match="epochs"):
        widths.measure_widths(ctx, s)
    assert not any(tmp_path.iterdir())
    with pytest.raises(ConfigError, match="archs"):
        read_settings(table1.Table1Settings, {"seeds": 1, "probe_seeds": 4, "batch": 8})

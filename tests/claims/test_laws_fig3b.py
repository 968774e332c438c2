"""laws-fig3b: PathSum's path sum (Chen et al. 2024) for a ResNet against every path
enumerated, the ResNet's layer counts read off the model, the verdict on made-up optima, and
the sweep shared with laws-table1 (same study name, arch and budget at every scale)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from depthscale.claims import CLAIMS
from depthscale.claims.laws import fig3b, settings, table1
from depthscale.claims.laws.fig3b import Fig3b, Fig3bSettings, judge_fig3b
from depthscale.claims.laws.pathsum import log10_path_sum, path_sum, resnet_layers
from depthscale.claims.laws.sweeps import SweepSettings, study_costs
from depthscale.claims.registry import ClaimContext, read_settings
from depthscale.errors import ConfigError


def _brute_force(blocks: int, outside: int, branch: int, skip: int) -> int:
    """sum_p L_p^3 with every one of the 2^K input-output paths walked: at each block the
    path takes the branch (``branch`` weighted layers) or the skip (``skip``)."""
    return sum((outside + sum(branch if take else skip for take in path)) ** 3
               for path in itertools.product((False, True), repeat=blocks))


@pytest.mark.parametrize("blocks", range(7))
def test_path_sum_equals_every_path_enumerated(blocks: int) -> None:
    for outside, branch, skip in itertools.product((0, 1, 2, 3), (1, 2), (0, 1)):
        assert path_sum(blocks, outside, branch, skip) == _brute_force(blocks, outside,
                                                                       branch, skip)


def test_path_sum_hand_values_and_errors() -> None:
    # K = 1, m = 2, b = 1: paths of 2 (skip) and 3 (branch) layers: 8 + 27
    assert path_sum(1, 2, 1) == 35
    # K = 2: lengths 2, 3, 3, 4: 8 + 2 * 27 + 64
    assert path_sum(2, 2, 1) == 126
    assert log10_path_sum(2, 2, 1) == pytest.approx(math.log10(126), rel=1e-15)
    # deep: the exact integer, no overflow: 2^64 E[(2 + J)^3], J ~ Bin(64, 1/2) (mean 34,
    # variance 16): 34^3 + 3 * 34 * 16
    assert path_sum(64, 2, 1) == 2**64 * (34**3 + 3 * 34 * 16)
    with pytest.raises(ConfigError, match="branch must be >= 0"):
        path_sum(2, 2, -1)
    with pytest.raises(ConfigError, match="no path carries a weighted layer"):
        log10_path_sum(3, 0, 0)


def test_resnet_layers_are_counted_on_the_model_as_built() -> None:
    arch = settings.ARCHS_QUICK["convresnet1d"]
    assert resnet_layers(arch) == (2, 1)  # stem and head; one conv per block
    assert resnet_layers({**arch, "options": {"block": 2}}) == (2, 2)
    assert resnet_layers(settings.ARCHS_FULL["convresnet2d"]) == (2, 1)
    with pytest.raises(ConfigError, match="needs a ResNet"):
        resnet_layers(settings.ARCHS_QUICK["cnn1d"])


_KS = (1, 2, 4, 8, 16)
_NOISE = (-0.02, 0.0, 0.02)


def _made_up(centre: dict[int, float], noise: tuple[float, ...] = _NOISE) -> Fig3b:
    """A measurement of the quick ResNet (m = 2, b = 1) whose seeds' log10 eta* sit at
    ``centre[K]`` plus ``noise``."""
    return Fig3b({k: tuple(centre[k] + e for e in noise) for k in _KS}, {k: k for k in _KS},
                 {k: log10_path_sum(k, 2, 1) for k in _KS}, {k: k + 2 for k in _KS}, (2, 1))


def _settings(**kw: Any) -> Fig3bSettings:
    return read_settings(Fig3bSettings, {**CLAIMS["laws-fig3b"].settings["quick"],
                                         **kw}).checked()


def test_optima_on_the_minus_three_halves_law_pass_and_pathsum_deviates_increasingly() -> None:
    j = judge_fig3b(_made_up({k: -0.5 - 1.5 * math.log10(k) for k in _KS}), _settings())
    assert j.decision is not None and j.decision[0] == "PASS", j.decision
    assert j.measured["d_am_deepest"] == pytest.approx(0.0, abs=1e-12)
    # PathSum's anchored prediction at K = 16: -0.5 log10(S(16)/S(1)), S(1) = 35 and
    # S(16) = 2^16 (10^3 + 3 * 10 * 4); eta* fell by 1.5 log10 16
    expect = -1.5 * math.log10(16) + 0.5 * math.log10(2**16 * 1120 / 35)
    assert j.measured["d_ps_deepest"] == pytest.approx(expect, rel=1e-12)
    assert j.measured["excess_deepest"] == pytest.approx(abs(expect), rel=1e-12)
    assert j.measured["ps_growth_low"] is not None and j.measured["ps_growth_low"] > 0


def test_rules_that_agree_fail_and_optima_on_pathsum_fail() -> None:
    m = _made_up({k: -0.5 - 1.5 * math.log10(k) for k in _KS})
    same = judge_fig3b(m, _settings(path_sum="one-path"))  # the negative control
    assert same.decision is not None and same.decision[0] == "FAIL", same.decision
    assert same.measured["excess_deepest"] == same.measured["excess_deepest_low"] == 0.0
    assert same.measured["excess_deepest_high"] == 0.0
    on_ps = _made_up({k: -0.5 - 0.5 * (log10_path_sum(k, 2, 1) - math.log10(35)) for k in _KS})
    j = judge_fig3b(on_ps, _settings())
    assert j.decision is not None and j.decision[0] == "FAIL", j.decision
    assert j.measured["excess_deepest_high"] is not None
    assert j.measured["excess_deepest_high"] < 0


def test_one_seed_leaves_it_inconclusive_and_bad_settings_are_config_errors() -> None:
    j = judge_fig3b(_made_up({k: -1.5 * math.log10(k) for k in _KS}, noise=(0.0,)),
                    _settings())
    assert j.decision is not None and j.decision[0] == "INCONCLUSIVE"
    assert "2+ seeds" in j.decision[1]
    with pytest.raises(ConfigError, match="path_sum must be one of"):
        _settings(path_sum="some-paths")
    with pytest.raises(ConfigError, match="must be convresnet1d or convresnet2d"):
        _settings(arch=settings.ARCHS_QUICK["cnn1d"])


class _Stop(Exception):
    pass


@pytest.mark.parametrize("scale", ["quick", "medium", "full"])
def test_the_resnet_sweep_is_laws_table1s_at_every_scale(
    scale: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both claims ask sweep_stages for the same study name and arch under the same budget
    and family parts, so the study tables (hence run ids) are equal and the runs shared."""
    calls: list[tuple[str, dict[str, Any], SweepSettings, Any]] = []

    def capture(ctx: ClaimContext, name: str, arch: dict[str, Any]) -> Any:
        calls.append((name, arch, read_settings(SweepSettings, ctx.settings),
                      settings.family_parts(ctx.settings.get("family_parts"),
                                            ctx.settings.get("archs"))))
        raise _Stop

    for module in (fig3b, table1):
        monkeypatch.setattr(module, "sweep_stages", capture)
    t1 = dict(CLAIMS["laws-table1"].settings[scale])
    key = next(k for k in t1["archs"] if k.startswith("convresnet"))
    ours = dict(CLAIMS["laws-fig3b"].settings[scale])

    def context(values: dict[str, Any]) -> ClaimContext:
        return ClaimContext(scale=scale, out_dir=tmp_path, device="cpu", data_dir=None, seed=0,
                            settings=values)

    with pytest.raises(_Stop):
        fig3b.measure_fig3b(context(ours), read_settings(Fig3bSettings, ours))
    only_resnet = {**t1, "archs": {key: t1["archs"][key]}}  # its other archs come first
    with pytest.raises(_Stop):
        table1.measure_table1(context(only_resnet),
                              read_settings(table1.Table1Settings, only_resnet))
    (name, arch, budget, parts), t1_call = calls
    assert name == f"laws-{key}" and (name, arch, budget, parts) == t1_call
    assert parts == settings.family_parts(t1.get("family_parts"), t1["archs"])
    s = read_settings(Fig3bSettings, ours)
    assert study_costs(s, {s.arch_key: s.arch}, "cpu") == [
        t for t in study_costs(budget, t1["archs"], "cpu") if t["study"]["name"] == name]


def test_deviations_are_anchored_at_the_shallowest_depth() -> None:
    means = np.array([[0.0, -0.5, -1.0], [1.0, 0.5, 0.0]])
    rule = np.array([3.0, 2.5, 1.5])
    assert fig3b.deviations(means, rule).tolist() == [[0.0, 0.0, 0.5], [0.0, 0.0, 0.5]]

"""nfd-eq8: the LRs the recipes' optimizers give the two internal layers (Eq. 8: eta_1 / eta_2
= sqrt(L), depth-muP: 1), one SGD step's readout per depth and seed, and the verdict on
synthetic slopes."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import pytest

from depthscale.claims import CLAIMS, ClaimContext
from depthscale.claims.nfd.eq8 import (
    BANDS,
    Eq8Measure,
    Eq8Settings,
    judge_eq8,
    lr_ratio,
    measure_eq8,
)
from depthscale.claims.nfd.slopes import slope_ci
from depthscale.claims.registry import read_settings
from depthscale.models import build
from depthscale.stats.fits import loglog_slope

ARMS = (("depth_mup", "depth-mup"), ("nfd_depth", "nfd-depth"))


@pytest.mark.parametrize("depth", [1, 4, 9, 64])
def test_eq8_gives_the_first_layer_sqrt_l_times_the_second_layers_lr(depth: int) -> None:
    width, eta_c = 8, 0.1
    for recipe, factor in (("nfd-depth", math.sqrt(depth)), ("depth-mup", 1.0)):
        net, plan = build("resnet2", recipe, input_shape=(10,), n_out=3, width=width,
                          depth=depth, seed=0)
        eta_1, eta_2 = lr_ratio(net, plan, eta_c)
        assert eta_2 == pytest.approx(eta_c * width, rel=1e-12)  # eta_2 = eta_c n
        assert eta_1 == pytest.approx(eta_c * width * factor, rel=1e-12)


def _measure(internal: Mapping[str, tuple[float, ...]], exponent: float = 0.5) -> Eq8Measure:
    slopes = {f"{k}_{tag}": slope_ci(list(v)) for tag, v in internal.items()
              for k in ("internal", "stream")}
    return Eq8Measure([], ARMS, {"depth_mup": 0.0, "nfd_depth": exponent}, slopes)


def test_the_verdict_reads_the_exponent_exactly_and_the_slopes_on_their_intervals() -> None:
    good = {"depth_mup": (-0.50, -0.49, -0.51), "nfd_depth": (0.01, 0.0, 0.02)}
    j = judge_eq8(_measure(good, 0.5 + 1e-12))
    assert j.decision is not None and j.decision[0] == "PASS", j.decision
    assert j.measured["lr_ratio_exponent_nfd_depth"] == pytest.approx(0.5)
    assert j.bands == BANDS
    # a depth-constant LR: the exponent 0 contradicts; so does an exponent off by 1e-6
    assert judge_eq8(_measure(good, 0.0)).decision[0] == "FAIL"  # type: ignore[index]
    assert judge_eq8(_measure(good, 0.5 + 1e-6)).decision[0] == "FAIL"  # type: ignore[index]
    # Eq. 8's one-step slope straddling the flat band's edge: undecided
    edge = {**good, "nfd_depth": (-0.10, -0.20, -0.15)}
    j = judge_eq8(_measure(edge))
    assert j.decision is not None and j.decision[0] == "INCONCLUSIVE"
    assert "one_step_internal_slope_nfd_depth: undecided" in j.decision[1]
    # depth-muP not collapsing: the contrast App. H.1 derives is missing, a FAIL
    flat = {**good, "depth_mup": (0.0, 0.01, -0.01)}
    assert judge_eq8(_measure(flat)).decision[0] == "FAIL"  # type: ignore[index]


def test_measure_takes_one_step_per_arm_depth_and_seed(tmp_path: Path) -> None:
    s = {**CLAIMS["nfd-eq8"].settings["smoke"], "width": 8, "depths": [2, 8], "seeds": 2}
    ctx = ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None, seed=3,
                       settings=s)
    m = measure_eq8(ctx, read_settings(Eq8Settings, s))
    assert len(m.rows) == 2 * 2 * 2 and {r["step"] for r in m.rows} == {1}
    assert m.exponents["nfd_depth"] == pytest.approx(0.5, abs=1e-12)
    assert m.exponents["depth_mup"] == pytest.approx(0.0, abs=1e-12)
    ys = [next(r["internal_update"] for r in m.rows if r["arm"] == "nfd_depth"
               and r["depth"] == L and r["seed"] == 4) for L in (2, 8)]
    assert m.slopes["internal_nfd_depth"].per_seed[1] == pytest.approx(
        loglog_slope([2, 8], ys).slope, rel=1e-12)

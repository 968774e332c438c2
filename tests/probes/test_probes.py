"""Coordinate checks and the two-layer-block diagnostics of nfd App. H."""

from __future__ import annotations

import statistics

import pytest
import torch
import torch.nn.functional as F

from depthscale.models import build
from depthscale.probes import coord_check, snapshot, two_layer_updates
from depthscale.stats.fits import loglog_slope

G = torch.Generator().manual_seed(0)
X = torch.randn(64, 20, generator=G)
Y = torch.randint(0, 10, (64,), generator=G)


def _factory(model: str, recipe: str):  # type: ignore[no-untyped-def]
    return lambda w, d, s: build(model, recipe, input_shape=(20,), n_out=10, width=w, depth=d,
                                 seed=s)


def test_depth_mup_coordinates_are_flat_in_width_and_depth() -> None:
    rep = coord_check(_factory("resnet1", "depth-mup"), X, Y, widths=[128, 256, 512],
                      depths=[4, 16, 64], base_width=128, base_depth=8, lr=0.1, seeds=range(8))
    for t in ("input", "stream"):
        for key in ("act", "update"):
            for axis in ("width", "depth"):
                assert abs(rep.fit(t, key, axis).slope) < 0.15, rep.table()
    # the branch output is the depth-muP multiplier's L^-1/2 at init and after the step
    assert -0.6 < rep.fit("branch", "update", "depth").slope < -0.4
    assert rep.verdict == "PASS", rep.evidence


def test_sp_activations_grow_with_depth() -> None:
    rep = coord_check(_factory("resnet1", "sp"), X, Y, depths=[2, 4, 8, 16], base_width=128,
                      lr=0.01)
    # each SP block multiplies the second moment by ~1.5 (ReLU): RMS grows geometrically
    assert rep.fit("stream", "act", "depth").ci_low > 0.5
    assert rep.fit("stream", "update", "depth").ci_low > 0.5
    assert rep.verdict == "FAIL" and "stream act_vs_depth: contradicts" in rep.evidence


def _first_step_internal_update(recipe: str, depth: int, seed: int) -> float:
    model, plan = build("resnet2", recipe, input_shape=(20,), n_out=10, width=128, depth=depth,
                        seed=seed)
    init = snapshot(model)
    opt = plan.optimizer(model, "sgd", 0.1)
    F.cross_entropy(model(X), Y).backward()
    opt.step()
    return statistics.fmean(two_layer_updates(model, init, X)["internal"])


@pytest.mark.parametrize(("recipe", "low", "high"),
                         [("depth-mup", -0.65, -0.35), ("nfd-depth", -0.15, 0.15)])
def test_first_internal_layer_update_slope_in_depth(recipe: str, low: float, high: float) -> None:
    depths = [4, 16, 64]
    ups = [statistics.fmean(_first_step_internal_update(recipe, d, s) for s in (0, 1))
           for d in depths]
    slope = loglog_slope(depths, ups).slope
    assert low <= slope <= high, slope


def test_untrained_model_has_zero_updates() -> None:
    model, _ = build("resnet2", "depth-mup", input_shape=(20,), n_out=10, width=16, depth=3)
    upd = two_layer_updates(model, snapshot(model), X)
    assert upd["internal"] == [0.0, 0.0, 0.0] and upd["stream"] == [0.0, 0.0, 0.0]

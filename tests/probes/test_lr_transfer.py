"""The LR-transfer check (issue 11, item 5): eta* per size from a short LR sweep, its drift in
decades with a seed-bootstrap interval, and the verdict; depth-muP against SP as the negative
control, the verdict rules on exact synthetic sweeps, and bad input refused before any work."""

from __future__ import annotations

import math
from typing import Any

import pytest

from depthscale.data import load
from depthscale.errors import ConfigError
from depthscale.models import build
from depthscale.probes import lr_transfer_check
from depthscale.probes.lr_transfer import _report

DATA = load("mnist1d", seed=0, n_train=256, n_test=64)
GRID = [0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0]


def _resnet1(recipe: str):  # type: ignore[no-untyped-def]
    return lambda w, d, s: build("resnet1", recipe, input_shape=DATA.sample_shape,
                                 n_out=DATA.n_out, width=w, depth=d, seed=s)


def test_depth_mup_lr_stays_put_while_sp_drifts_a_decade() -> None:
    """resnet1 on MNIST-1D, 30 SGD steps, depths 2 and 16 at width 32, the same grid: under
    depth-muP eta* = 3 at both depths (drift 0, PASS); under SP it falls from 0.3 to 0.03
    (drift 1 decade, FAIL)."""
    kw: dict[str, Any] = {"depths": [2, 16], "base_width": 32, "steps": 30, "batch_size": 32,
                          "seeds": [0, 1]}
    mup = lr_transfer_check(_resnet1("depth-mup"), DATA, GRID, **kw)
    sp = lr_transfer_check(_resnet1("sp"), DATA, GRID, **kw)
    assert [s.optimum.grid_lr for s in mup.sizes] == [3.0, 3.0]
    assert [s.optimum.grid_lr for s in sp.sizes] == [0.3, 0.03]
    assert mup.drift == pytest.approx(0.0) and sp.drift == pytest.approx(1.0)
    assert mup.verdict == "PASS" and mup.ci_high <= 0.3
    assert sp.verdict == "FAIL" and sp.ci_low > 0.3
    assert mup.axis_drift == {"depth": mup.drift}
    assert len(mup.rows()) == 2 * 2 * len(GRID)
    assert "drift of log10 eta* across 2 sizes 1.000 decades" in sp.evidence


def _records(curves: dict[int, list[list[float | None]]], lrs: list[float]) -> list[dict[str, Any]]:
    """Run records of a synthetic sweep: curves[size][seed][lr] is the running loss (None:
    diverged)."""
    out = []
    for size, seeds in curves.items():
        for seed, losses in enumerate(seeds):
            for lr, loss in zip(lrs, losses, strict=True):
                out.append({"size": size, "width": 8, "depth": 2 + size, "seed": seed, "lr": lr,
                            "status": "done" if loss is not None else "diverged",
                            "running_loss": loss, "final_train_loss": loss})
    return out


def _parabola(vertex: float, lrs: list[float], shift: float = 0.0) -> list[float | None]:
    return [(math.log10(lr) - math.log10(vertex)) ** 2 + shift for lr in lrs]


LRS = [0.01, 0.1, 1.0, 10.0]


def test_the_drift_is_the_spread_of_the_refined_optima() -> None:
    """Losses exactly quadratic in log10 LR: the parabola refinement finds each vertex, so the
    drift is |log10(0.5) - log10(2)| = 0.602 decades; seeds differ by a constant, which moves no
    optimum, so the interval has zero width and the verdict is a FAIL at tolerance 0.3."""
    curves = {0: [_parabola(0.5, LRS, c) for c in (0.0, 0.1)],
              1: [_parabola(2.0, LRS, c) for c in (0.0, 0.1)]}
    rep = _report(_records(curves, LRS), [(8, 2), (8, 3)], LRS, [0, 1], "running", 0.3, "sgd",
                  200)
    assert [s.optimum.lr for s in rep.sizes] == pytest.approx([0.5, 2.0])
    assert rep.drift == pytest.approx(math.log10(4))
    assert (rep.ci_low, rep.ci_high) == pytest.approx((math.log10(4), math.log10(4)))
    assert rep.verdict == "FAIL"
    same = _report(_records({0: curves[0], 1: curves[0]}, LRS), [(8, 2), (8, 3)], LRS, [0, 1],
                   "running", 0.3, "sgd", 200)
    assert same.drift == pytest.approx(0.0) and same.verdict == "PASS"


def test_a_grid_flatter_than_the_seed_noise_is_inconclusive() -> None:
    flat = [[1.00, 1.01, 1.00, 1.02], [1.5, 1.49, 1.51, 1.5]]  # seeds differ by 0.5
    rep = _report(_records({0: flat, 1: flat}, LRS), [(8, 2), (8, 3)], LRS, [0, 1], "running",
                  0.3, "sgd", 200)
    assert rep.verdict == "INCONCLUSIVE"
    assert "is not above its noise" in rep.evidence


def test_an_optimum_on_the_edge_cannot_pass() -> None:
    edge = [[0.1, 0.2, 0.3, 0.4]] * 2  # best at the lowest LR at both sizes: drift 0, a bound
    rep = _report(_records({0: edge, 1: edge}, LRS), [(8, 2), (8, 3)], LRS, [0, 1], "running",
                  0.3, "sgd", 200)
    assert rep.drift == 0.0 and rep.verdict == "INCONCLUSIVE"
    assert "lies on the grid's edge" in rep.evidence


def test_a_size_where_everything_diverged_bounds_the_drift() -> None:
    """No finite run at size 1: its eta* is below 0.01, so the drift is at least
    log10(1) - log10(0.01) = 2 decades (FAIL at 0.3); at tolerance 3 it is undecided."""
    curves = {0: [_parabola(1.0, LRS)] * 2, 1: [[None] * 4] * 2}
    rep = _report(_records(curves, LRS), [(8, 2), (8, 3)], LRS, [0, 1], "running", 0.3, "sgd",
                  200)
    assert rep.verdict == "FAIL" and "at least 2.000 decades" in rep.evidence
    loose = _report(_records(curves, LRS), [(8, 2), (8, 3)], LRS, [0, 1], "running", 3.0,
                    "sgd", 200)
    assert loose.verdict == "INCONCLUSIVE" and "lower the grid" in loose.evidence


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lrs": [0.1, 1.0]}, "at least three distinct learning rates"),
        ({"lrs": [0.1, 1.0, 1.0, 3.0]}, r"lrs has repeats: \[0.1, 1.0, 1.0, 3.0\]"),
        ({"lrs": [0.1, -1.0, 3.0]}, r"lrs\[1\] must be a finite number > 0"),
        ({"depths": [4]}, "needs at least two sizes"),
        ({"depths": [2, 2]}, "depths has repeats"),
        ({"seeds": []}, "at least one seed"),
        ({"seeds": [0, 0]}, "seeds has repeats"),
        ({"criterion": "best"}, "criterion must be one of: running, final"),
        ({"optimizer": "lion"}, "unknown optimizer 'lion'"),
        ({"steps": 0}, "steps must be a whole number >= 1"),
        ({"tolerance": 0}, "tolerance must be a finite number > 0"),
    ],
)
def test_bad_settings_are_refused_before_any_model_is_built(kwargs: dict[str, Any],
                                                            message: str) -> None:
    built: list[tuple[int, int, int]] = []

    def make(w: int, d: int, s: int):  # type: ignore[no-untyped-def]
        built.append((w, d, s))
        return _resnet1("sp")(w, d, s)

    settings: dict[str, Any] = {"lrs": [0.1, 0.3, 1.0], "depths": [2, 4], "base_width": 8,
                                "steps": 2, **kwargs}
    lrs = settings.pop("lrs")
    with pytest.raises(ConfigError, match=message):
        lr_transfer_check(make, DATA, lrs, **settings)
    assert built == []

"""nfd-prop3 (Prop. 3): the output f of depth-muP ResNets at alpha = 1 is Gaussian with the
kernel C_T, judged on intervals over init seeds. f given h_L is N(0, |h_L|^2/n) exactly (the
proof's first step), so a read-out of the right variance but not Gaussian, or Gaussian with
the wrong covariance, fails a check the kernel of h_L alone cannot make."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from depthscale.claims.nfd import kernels
from depthscale.claims.nfd.kernels import KernelPoint, Prop3Settings, judge_prop3, measure_prop3
from depthscale.claims.nfd.series import gaussian_inputs
from depthscale.claims.registry import ClaimContext, read_settings
from depthscale.limits import nngp_kernel
from depthscale.models import build

#: small nets: the read-out's law given the features is exact at every width
TINY = {"phi": "relu", "T": 1.0, "inputs": 4, "dim": 4, "widths": [16, 64], "depth_at": 4,
        "depths": [1, 2], "width_at": 64, "trials": 8, "seeds": 3, "readouts": 2048}


def _measure(tmp_path: Path, settings: dict[str, Any] | None = None) -> tuple[KernelPoint, ...]:
    s = settings or dict(TINY)
    return measure_prop3(ClaimContext(scale="smoke", out_dir=tmp_path, device="cpu",
                                      data_dir=None, seed=0, settings=s),
                         read_settings(Prop3Settings, s))


def _judge(settings: dict[str, Any], points: Any) -> Any:
    """nfd-prop3's judgement of ``points`` at ``settings``."""
    return judge_prop3(points, read_settings(Prop3Settings, settings))


def test_readout_given_the_features_is_standard_normal_at_every_width(tmp_path: Path) -> None:
    # z = u^T f / sqrt(u^T K_b u) ~ N(0, 1) given h_L (nfd Eq. 1's v ~ N(0, I)): over 3 seeds
    # x 8 nets x 2048 read-out rows, E[z^2] = 1 to 0.04 and the excess kurtosis 0 to 0.1
    points = [p for p in _measure(tmp_path) if p.sweep == "width"]
    assert len(points) == 6
    for p in points:
        assert p.readout_variance == pytest.approx(1.0, abs=0.04), p
        assert abs(p.readout_kurtosis) < 0.1, p
    j = _judge(TINY, points)
    for n in TINY["widths"]:
        low, high = (j.measured[f"readout_kurtosis_n{n}_ci_{e}"] for e in ("low", "high"))
        assert low is not None and high is not None and -0.1 <= low < high <= 0.1, (n, j.note)


def _heavy_build(real: Any) -> Any:
    """``build`` whose read-out entries are multiplied by independent N(0, 1) draws: the same
    variance, a fourth moment 9 (excess kurtosis 6) instead of 3."""

    def build(*args: Any, **kw: Any) -> Any:
        net, plan = real(*args, **kw)
        gen = torch.Generator().manual_seed(kw["seed"] + 1)
        with torch.no_grad():
            net.readout.weight.mul_(torch.randn(net.readout.weight.shape, generator=gen))
        return net, plan

    return build


def test_a_heavy_tailed_readout_of_the_right_variance_fails_only_the_gaussianity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    right = _measure(tmp_path)
    monkeypatch.setattr(kernels, "build", _heavy_build(kernels.build))
    heavy = _measure(tmp_path)
    # the kernel of h_L, all the old check measured, is the same to the last bit
    assert [p.relative_error for p in heavy] == [p.relative_error for p in right]
    for p, q in zip(heavy, right, strict=True):
        if p.sweep == "width":  # E[f f'] = <h, h'>/n whatever the read-out's law
            assert p.output_error == pytest.approx(q.output_error, abs=0.02)
            assert p.readout_variance == pytest.approx(1.0, abs=0.04)
    # given h_L, z = sum_i v_i a_i / |a| with a = H^T u has excess kurtosis
    # 6 sum a_i^4 / (sum a_i^2)^2: recompute it from the same nets' features
    X = gaussian_inputs(TINY["inputs"], TINY["dim"], 0)
    basis = np.linalg.eigh(nngp_kernel(X, "relu", 1.0))[1]
    for n in TINY["widths"]:
        ratios = []
        for seed in range(TINY["seeds"]):
            for trial in range(TINY["trials"]):
                net, _ = build("resnet1", "depth-mup", input_shape=(4,), n_out=1, width=n,
                               depth=4, seed=seed * 10_007 + trial,
                               plan_options={"T": 1.0, "regime": "kernel"})
                with torch.no_grad():
                    h = net.double().trace(torch.tensor(X)).streams[-1].numpy()
                a = h.T @ basis
                ratios.append(((a**4).sum(0) / (a**2).sum(0) ** 2).mean())
        predicted = 6 * float(np.mean(ratios))
        measured = [p.readout_kurtosis for p in heavy if p.sweep == "width" and p.width == n]
        assert float(np.mean(measured)) == pytest.approx(predicted, rel=0.15), (n, measured)
    j = _judge(TINY, heavy)
    assert j.decision is not None and j.decision[0] == "FAIL"
    assert "readout_kurtosis_n16: contradicts" in j.decision[1]
    assert "exponent_vs_width: contradicts" not in j.decision[1]


def _synthetic(slopes: list[float], kurtosis: float = 0.0) -> tuple[KernelPoint, ...]:
    """Per seed, errors 0.1 (n/16)^slope on the width sweep and 0.1/L on the depth sweep."""
    points = []
    for seed, slope in enumerate(slopes):
        for n in TINY["widths"] + [256]:
            e = 0.1 * (n / 16) ** slope
            points.append(KernelPoint("width", n, 4, seed, e, e, kurtosis, kurtosis, 1.0))
        for L in TINY["depths"]:
            points.append(KernelPoint("depth", 64, L, seed, 0.1 / L))
    return tuple(points)


@pytest.mark.parametrize(("slopes", "kurtosis", "verdict", "why"), [
    ([-0.5, -0.45, -0.55], 0.0, "PASS", ""),
    # the seed mean -0.4 lies in the band, its interval [-1.06, +0.26] does not decide
    ([-0.1, -0.6, -0.5], 0.0, "INCONCLUSIVE", "exponent_vs_width: undecided"),
    ([-0.1, -0.12, -0.08], 0.0, "FAIL", "exponent_vs_width: contradicts"),
    ([-0.5, -0.45, -0.55], 0.3, "FAIL", "output_kurtosis: contradicts"),
])
def test_each_band_is_judged_on_its_seed_interval(slopes: list[float], kurtosis: float,
                                                  verdict: str, why: str) -> None:
    s = {**TINY, "widths": TINY["widths"] + [256]}
    j = _judge(s, _synthetic(slopes, kurtosis))
    assert j.decision is not None and j.decision[0] == verdict, j.decision
    assert why in j.decision[1]
    assert j.measured["exponent_vs_width"] == pytest.approx(sum(slopes) / 3)
    assert j.measured["exponent_vs_depth"] == pytest.approx(-1.0)
    assert all(v is None or math.isfinite(v) for v in j.measured.values())


def test_fewer_than_two_seeds_is_refused(tmp_path: Path) -> None:
    from depthscale.errors import ConfigError

    with pytest.raises(ConfigError, match="seeds must be >= 2"):
        _measure(tmp_path, {**TINY, "seeds": 1})

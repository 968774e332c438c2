"""Chizat's ResNet of two-layer-perceptron blocks (chizat Eq. 24) through the registry."""

from __future__ import annotations

import math

import pytest
import torch

from depthscale.errors import ConfigError
from depthscale.models import TwoLayerPerceptronResNet, build, create


@pytest.mark.parametrize("recipe", ["mean-ode", "sp"])
def test_forward_maps_r_d_to_r_d_and_every_parameter_is_classified(recipe: str) -> None:
    model, p = build("chizat2lp", recipe, input_shape=(6,), n_out=6, width=6, depth=3, hidden=4)
    y = model(torch.randn(5, 6))
    assert y.shape == (5, 6)
    assert torch.isfinite(y).all()
    roles = p.roles(model)
    assert set(roles) == {n for n, _ in model.named_parameters()}
    assert {roles[f"U.{i}.weight"] for i in range(3)} == {"branch_in"}
    assert {roles[f"V.{i}.weight"] for i in range(3)} == {"branch_out"}
    assert len(p.resolve(model)) == 6  # U_l, V_l only: no biases, no embedding


def test_mean_ode_multipliers_are_one_over_d_and_one_over_lm() -> None:
    D, M, L = 5, 7, 3
    model, p = build("chizat2lp", "mean-ode", input_shape=(D,), n_out=D, width=D, depth=L,
                     hidden=M)
    assert (p.width, p.depth, p.hidden) == (D, L, M)
    for U, V in zip(model.U, model.V, strict=True):
        assert U.multiplier == pytest.approx(1 / D, rel=1e-12)
        assert V.multiplier == pytest.approx(1 / (L * M), rel=1e-12)
        assert tuple(U.weight.shape) == (M, D) and tuple(V.weight.shape) == (D, M)


def test_forward_is_eq_24_written_as_a_loop_over_neurons() -> None:
    """h_l = h_{l-1} + 1/(L M) sum_j v^{j,l} rho((u^{j,l})^T h_{l-1} / D), to 1e-6 in float64."""
    D, M, L = 3, 2, 4
    model, _ = build("chizat2lp", "mean-ode", input_shape=(D,), n_out=D, width=D, depth=L,
                     hidden=M, seed=3)
    model = model.double()
    x = torch.randn(4, D, dtype=torch.float64)
    out = model(x)
    for i in range(x.shape[0]):
        h = x[i].clone()
        for ell in range(L):
            u, v = model.U[ell].weight, model.V[ell].weight  # u^{j,l} = u[j], v^{j,l} = v[:, j]
            step = torch.zeros(D, dtype=torch.float64)
            for j in range(M):
                step = step + v[:, j] * torch.tanh(torch.dot(u[j], h) / D)
            h = h + step / (L * M)
        torch.testing.assert_close(out[i], h, rtol=0, atol=1e-6)


def test_mean_ode_init_scales_follow_chizat_defaults() -> None:
    """u ~ N(0, sigma_u^2) with sigma_u = sqrt(D), v ~ N(0, (alpha sqrt(D))^2), alpha = 1."""
    D, M, L = 16, 64, 8
    model, _ = build("chizat2lp", "mean-ode", input_shape=(D,), n_out=D, width=D, depth=L,
                     hidden=M)
    u = torch.cat([U.weight.detach().flatten() for U in model.U])  # 8192 draws
    v = torch.cat([V.weight.detach().flatten() for V in model.V])
    assert u.std().item() == pytest.approx(math.sqrt(D), rel=0.05)
    assert v.std().item() == pytest.approx(math.sqrt(D), rel=0.05)


def test_attributes_and_default_hidden() -> None:
    model = create("chizat2lp", input_shape=(4,), n_out=4, width=4, depth=6)
    assert (model.width, model.hidden, model.depth) == (4, 4, 6)  # M defaults to D
    assert model.plan_depth == model.effective_depth == 6
    assert model.activation_name == "tanh"


def test_trace_keeps_h0_to_hl() -> None:
    model, _ = build("chizat2lp", "mean-ode", input_shape=(3,), n_out=3, width=3, depth=4,
                     hidden=2)
    x = torch.randn(2, 3)
    tr = model.trace(x)
    assert len(tr.streams) == 5 and len(tr.increments) == 4
    torch.testing.assert_close(tr.streams[0], x)
    torch.testing.assert_close(tr.streams[-1], model(x))
    torch.testing.assert_close(tr.out, model(x))


@pytest.mark.parametrize(
    ("sizes", "message"),
    [
        ({"n_out": 2}, "has no embedding .* D=3, width=3, n_out=2"),
        ({"width": 5}, "has no embedding .* D=3, width=5, n_out=3"),
        ({"input_shape": (3, 1)}, r"expects per-sample inputs of shape \(D,\), got shape \(3, 1\)"),
    ],
)
def test_sizes_that_need_an_embedding_or_readout_raise_config_error(
    sizes: dict[str, object], message: str
) -> None:
    args: dict[str, object] = {"input_shape": (3,), "n_out": 3, "width": 3, "depth": 2, **sizes}
    with pytest.raises(ConfigError, match=message):
        build("chizat2lp", "mean-ode", **args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dim": 0}, "dim D must be >= 1, got 0"),
        ({"hidden": 0}, "hidden M must be >= 1, got 0"),
        ({"depth": 0}, "depth L must be >= 1, got 0"),
        ({"activation": "swish"}, "unknown activation 'swish'"),
    ],
)
def test_bad_sizes_raise_config_error(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"dim": 3, "hidden": 2, "depth": 2, **kwargs}
    with pytest.raises(ConfigError, match=message):
        TwoLayerPerceptronResNet(**args)  # type: ignore[arg-type]


def test_unknown_options_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="does not take option"):
        create("chizat2lp", input_shape=(3,), n_out=3, width=3, depth=2, block=2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_runs_on_cuda() -> None:
    model, _ = build("chizat2lp", "mean-ode", input_shape=(4,), n_out=4, width=4, depth=3)
    model = model.cuda()
    y = model(torch.randn(2, 4, device="cuda"))
    assert y.device.type == "cuda" and y.shape == (2, 4)

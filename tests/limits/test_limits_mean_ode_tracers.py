"""Tracer particles of the Neural Mean ODE (chizat Eq. 14 at a depth, Thm. 1(ii)'s coupling).

Tolerances: identities (a tracer started at a node particle follows it; tracers leave the field
unchanged; the hand-written one step at s = 1) to float64 rounding; the Hermite reading exact
on cubics to rounding; a tracer between nodes against a finer grid within the RK4 depth error.
"""

from __future__ import annotations

import numpy as np
import pytest

from depthscale.errors import ConfigError
from depthscale.limits.mean_ode import MeanODE, Tracers
from depthscale.limits.mean_ode.tracers import depth_field


def _data(n: int = 5, D: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, D)), rng.standard_normal((n, D))


def test_depth_field_is_exact_on_cubics_and_at_nodes() -> None:
    J = 4
    s = np.linspace(0.0, 1.0, J + 1)
    values = (2 * s**3 - s**2 + 0.5)[:, None]
    slopes = (6 * s**2 - 2 * s)[:, None]
    for x in (0.0, 0.13, 0.5, 0.77, 1.0):
        assert depth_field(values, slopes, x)[0] == pytest.approx(2 * x**3 - x**2 + 0.5,
                                                                  abs=1e-14)
    # linear between nodes without slopes; a node reads its own value exactly
    assert depth_field(values, None, 0.125)[0] == pytest.approx(0.5 * (values[0, 0]
                                                                       + values[1, 0]))
    assert depth_field(values, slopes, 1 / 3 * 0.75)[0] == values[1, 0]


@pytest.mark.parametrize("method", ["rk4", "heun"])
def test_tracers_started_at_node_particles_follow_them(method: str) -> None:
    X, Y = _data()
    J = 4
    ode = MeanODE(4, depth_steps=J, particles=64, method=method, coupling="shared", seed=1)
    U0, V0 = ode.initial_particles()
    stride = 2 if method == "rk4" else 1
    nodes = [0, 1, 3, 4]
    tr = Tracers(np.repeat(np.array(nodes) / J, 64), np.tile(U0, (4, 1)), np.tile(V0, (4, 1)))
    res = ode.train(X, Y, 5, tracers=tr)
    assert res.tracer_U is not None and res.tracer_V is not None
    want_U = np.concatenate([res.U[stride * j] for j in nodes])
    want_V = np.concatenate([res.V[stride * j] for j in nodes])
    np.testing.assert_allclose(res.tracer_U, want_U, rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.tracer_V, want_V, rtol=0, atol=1e-12)
    # the tracers leave the field alone
    plain = ode.train(X, Y, 5)
    np.testing.assert_array_equal(plain.outputs, res.outputs)
    assert plain.tracer_U is None


def test_tracers_on_a_finite_net_follow_its_units_layer_by_layer() -> None:
    """Euler with one unit set per node is the finite ResNet (chizat Eq. 24-25): a unit of
    layer l, traced at depth s_{l-1} = (l - 1)/L in that net's own field, moves as the unit."""
    X, Y = _data()
    L, M = 6, 3
    ode = MeanODE(4, depth_steps=L, particles=M, method="euler", sampler="iid",
                  coupling="independent", seed=2)
    U0, V0 = ode.initial_particles()  # (L + 1, M, D)
    depths = np.repeat(np.arange(L) / L, M)
    res = ode.train(X, Y, 4, tracers=Tracers(depths, U0[:L].reshape(-1, 4),
                                             V0[:L].reshape(-1, 4)))
    assert res.tracer_U is not None
    np.testing.assert_allclose(res.tracer_U, res.U[:L].reshape(-1, 4), rtol=0, atol=1e-12)


def test_one_step_of_a_tracer_at_the_output_is_eq_13_by_hand() -> None:
    """At s = 1, b(1, x_i) = (h(1, x_i) - y_i) / D: the move of a tracer is
    ``-eta (mean_i rho'(p_i) (v^T b_i) h_i / D, mean_i rho(p_i) b_i)``, ``p_i = u^T h_i / D``."""
    X, Y = _data()
    D = 4
    ode = MeanODE(D, depth_steps=3, particles=128, eta_u=0.7, eta_v=1.3, seed=3)
    rng = np.random.default_rng(9)
    u, v = 2 * rng.standard_normal(D), 2 * rng.standard_normal(D)
    res = ode.train(X, Y, 1, tracers=Tracers(np.array([1.0]), u[None], v[None]))
    h = res.outputs[0]
    b = (h - Y) / D
    p = h @ u / D
    gu = np.mean((1 - np.tanh(p) ** 2)[:, None] * (b @ v)[:, None] * h, axis=0) / D
    gv = np.mean(np.tanh(p)[:, None] * b, axis=0)
    assert res.tracer_U is not None and res.tracer_V is not None
    np.testing.assert_allclose(res.tracer_U[0], u - 0.7 * gu, rtol=0, atol=1e-13)
    np.testing.assert_allclose(res.tracer_V[0], v - 1.3 * gv, rtol=0, atol=1e-13)


def test_a_tracer_between_nodes_agrees_with_a_finer_grid() -> None:
    """RK4 with J = 4 and J = 16 on the same shared particles: a tracer at s = 0.3 (a node of
    neither grid) ends within 1e-4 of itself (RK4 depth error O(1/J^4), Hermite reading)."""
    X, Y = _data()
    rng = np.random.default_rng(4)
    u, v = 2 * rng.standard_normal((1, 4)), 2 * rng.standard_normal((1, 4))
    ends = []
    for J in (4, 16):
        ode = MeanODE(4, depth_steps=J, particles=256, coupling="shared", seed=5)
        res = ode.train(X, Y, 5, tracers=Tracers(np.array([0.3]), u, v))
        assert res.tracer_U is not None
        ends.append(res.tracer_U[0])
    assert np.max(np.abs(ends[0] - ends[1])) < 1e-4
    assert np.max(np.abs(ends[0] - u[0])) > 1e-2  # it moved


@pytest.mark.parametrize("depths, shape, message", [
    (np.array([0.5, 1.5]), (2, 4), "in \\[0, 1\\]"),
    (np.array([0.5]), (2, 4), "shape \\(T,\\)"),
    (np.array([0.5, 0.2]), (2, 3), "shape \\(T,\\)"),
])
def test_bad_tracers_are_config_errors(depths: np.ndarray, shape: tuple[int, int],
                                       message: str) -> None:
    X, Y = _data()
    with pytest.raises(ConfigError, match=message):
        MeanODE(4, depth_steps=2, particles=8).train(
            X, Y, 1, tracers=Tracers(depths, np.zeros(shape), np.zeros(shape)))

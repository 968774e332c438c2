"""The activation record: phi, phi' (numpy and torch) and the pair expectations E[phi(u) phi(v)],
E[phi'(u) phi'(v)] (right-hand sides of nfd Prop. 3, 6), closed forms against the quadrature."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from scipy import integrate, special
from scipy.special import roots_hermitenorm

from depthscale.activations import (
    ACTIVATIONS,
    CLOSED_FORMS,
    PHI_NAMES,
    activation,
    gating_factor,
    pair_expectation,
    resolve_activation,
)
from depthscale.errors import ConfigError

# (q1, q2, c): ordinary, strongly negative, nearly collinear, unequal scales, large variance.
PAIRS = [
    (1.0, 1.0, 0.3),
    (2.0, 0.7, -0.9 * math.sqrt(1.4)),
    (3.0, 3.0, 3.0 * (1 - 1e-7)),
    (0.2, 5.0, 0.5),
    (10.0, 10.0, -9.5),
]


def _normal_pdf(z: float) -> float:
    return math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)


def _outer_quad(q1: float, q2: float, c: float, f_outer, inner, lower: float) -> float:
    """E_z1[f_outer(sqrt(q1) z1) * inner(m, b)], inner = E[f(m + b Z)] in closed form, by quad.

    Conditioning v on u leaves a smooth 1D integrand (split at the kink for relu), which
    adaptive Gauss-Kronrod integrates to ~1e-14: an independent high-order reference.
    """
    s1, s2 = math.sqrt(q1), math.sqrt(q2)
    rho = c / (s1 * s2)
    b = s2 * math.sqrt((1 - rho) * (1 + rho))

    def integrand(z1: float) -> float:
        return f_outer(s1 * z1) * inner(s2 * rho * z1, b) * _normal_pdf(z1)

    val, _ = integrate.quad(integrand, lower, math.inf, epsabs=1e-15, epsrel=1e-13, limit=400)
    return val


def _relu_inner(m: float, b: float) -> float:
    return m * special.ndtr(m / b) + b * _normal_pdf(m / b)


def _step_inner(m: float, b: float) -> float:
    return float(special.ndtr(m / b))


def _erf_inner(m: float, b: float) -> float:
    return float(special.erf(m / math.sqrt(1 + 2 * b * b)))


def _derf_inner(m: float, b: float) -> float:
    a = 1 + 2 * b * b
    return 2 / math.sqrt(math.pi) * math.exp(-m * m / a) / math.sqrt(a)


@pytest.mark.parametrize(("q1", "q2", "c"), PAIRS)
def test_relu_arccos_closed_forms_match_high_order_quadrature_to_1e10(q1, q2, c):
    ref = _outer_quad(q1, q2, c, lambda u: u, _relu_inner, 0.0)
    ref_d = _outer_quad(q1, q2, c, lambda u: 1.0, _step_inner, 0.0)
    assert pair_expectation(q1, q2, c, "relu") == pytest.approx(ref, abs=1e-10, rel=1e-10)
    assert pair_expectation(q1, q2, c, "relu", derivative=True) == pytest.approx(
        ref_d, abs=1e-10, rel=1e-10
    )


@pytest.mark.parametrize(("q1", "q2", "c"), PAIRS)
def test_erf_arcsin_closed_forms_match_high_order_quadrature_to_1e10(q1, q2, c):
    ref = _outer_quad(q1, q2, c, lambda u: float(special.erf(u)), _erf_inner, -math.inf)
    ref_d = _outer_quad(
        q1, q2, c, lambda u: 2 / math.sqrt(math.pi) * math.exp(-u * u), _derf_inner, -math.inf
    )
    assert pair_expectation(q1, q2, c, "erf") == pytest.approx(ref, abs=1e-10, rel=1e-10)
    assert pair_expectation(q1, q2, c, "erf", derivative=True) == pytest.approx(
        ref_d, abs=1e-10, rel=1e-10
    )


@pytest.mark.parametrize("phi", ["relu", "erf", "tanh", "gelu", "identity"])
@pytest.mark.parametrize("derivative", [False, True])
def test_pair_expectations_match_monte_carlo_within_4_standard_errors(phi, derivative):
    rng = np.random.default_rng(1234)
    cov = np.array([[1.3, -0.6], [-0.6, 0.8]])
    uv = rng.standard_normal((400_000, 2)) @ np.linalg.cholesky(cov).T
    act = resolve_activation(phi)
    f = act.dphi if derivative else act.phi
    samples = f(uv[:, 0]) * f(uv[:, 1])
    se = samples.std(ddof=1) / math.sqrt(samples.size)
    exact = pair_expectation(cov[0, 0], cov[1, 1], cov[0, 1], phi, derivative=derivative)
    # identity' = 1 has zero variance: the sample mean is exactly 1.
    assert abs(samples.mean() - exact) <= 4 * se + 1e-12


@pytest.mark.parametrize(("q1", "q2", "c"), [p for p in PAIRS if p[0] <= 3 and p[1] <= 3])
def test_tanh_quadrature_with_default_nodes_is_converged_to_1e11_for_variances_up_to_3(q1, q2, c):
    default = pair_expectation(q1, q2, c, "tanh")
    fine = pair_expectation(q1, q2, c, "tanh", nodes=401)
    assert default == pytest.approx(fine, abs=1e-11)
    d_default = pair_expectation(q1, q2, c, "tanh", derivative=True)
    assert d_default == pytest.approx(
        pair_expectation(q1, q2, c, "tanh", derivative=True, nodes=401), abs=1e-10
    )


@pytest.mark.parametrize(("q1", "q2", "c"), PAIRS)
def test_smooth_callable_quadrature_matches_erf_closed_form_to_1e10(q1, q2, c):
    # torch.erf as a callable takes the quadrature path (phi' by autograd).
    assert pair_expectation(q1, q2, c, torch.erf) == pytest.approx(
        pair_expectation(q1, q2, c, "erf"), abs=1e-10
    )
    assert pair_expectation(q1, q2, c, torch.erf, derivative=True) == pytest.approx(
        pair_expectation(q1, q2, c, "erf", derivative=True), abs=1e-9
    )


def test_gelu_quadrature_is_converged_to_1e12():
    q1, q2, c = np.array(PAIRS).T
    assert np.allclose(
        pair_expectation(q1, q2, c, "gelu"),
        pair_expectation(q1, q2, c, "gelu", nodes=401),
        atol=1e-12,
        rtol=0,
    )


def test_kinked_callable_quadrature_is_second_order_and_within_1e3_of_the_pair_scale():
    q1, q2, c = (np.array(v) for v in zip(*PAIRS, strict=True))
    exact = pair_expectation(q1, q2, c, "relu")
    scale = np.sqrt(q1 * q2)  # 2 sqrt(E[relu(u)^2] E[relu(v)^2])
    err49 = np.abs(pair_expectation(q1, q2, c, torch.relu, nodes=49) - exact).max()
    err97 = np.abs(pair_expectation(q1, q2, c, torch.relu, nodes=97) - exact).max()
    assert np.all(np.abs(pair_expectation(q1, q2, c, torch.relu) - exact) <= 1e-3 * scale)
    assert err49 / err97 > 3.0  # halving the spacing: ~4x for a kink


def test_callable_derivatives_by_autograd_match_the_named_ones():
    x = np.linspace(-4, 4, 101)
    for name, fn in (("tanh", torch.tanh), ("erf", torch.erf), ("gelu", torch.nn.functional.gelu)):
        named, wrapped = resolve_activation(name), resolve_activation(fn)
        assert np.allclose(wrapped.phi(x), named.phi(x), atol=1e-15)
        assert np.allclose(wrapped.dphi(x), named.dphi(x), atol=1e-14)


# ---- the record: closed forms against the quadrature, one test per activation -----------------
def _random_pairs(seed: int, count: int = 6) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``count`` random 2 x 2 covariances ``A A^T`` (A: 2 x 3 normal times a scale in
    [0.3, 1]): variances ~0.05..3, correlations across (-1, 1)."""
    rng = np.random.default_rng(seed)
    covs = []
    for _ in range(count):
        a = rng.standard_normal((2, 3)) * rng.uniform(0.3, 1.0)
        covs.append(a @ a.T)
    return (np.array([c[0, 0] for c in covs]), np.array([c[1, 1] for c in covs]),
            np.array([c[0, 1] for c in covs]))


def _gauss_hermite_pairs(f, q1, q2, c, nodes: int = 400) -> np.ndarray:
    """E[f(u) f(v)] by a Gauss-Hermite product rule on the Cholesky factor of each pair: a rule
    independent of the record's trapezoidal one (agrees with it to ~6e-15 for tanh and gelu at
    these variances, 400 nodes)."""
    z, w = roots_hermitenorm(nodes)
    w = w / math.sqrt(2 * math.pi)
    out = []
    for a, b, cc in zip(q1, q2, c, strict=True):
        low = np.linalg.cholesky(np.array([[a, cc], [cc, b]]))
        u = np.broadcast_to(low[0, 0] * z[:, None], (nodes, nodes))
        v = low[1, 0] * z[:, None] + low[1, 1] * z[None, :]
        out.append(float(w @ (f(u) * f(v)) @ w))
    return np.array(out)


#: Closed form against the record's own quadrature (its phi, ``pairs=None``) at 801 nodes, in
#: units of the pair scale ``sqrt(q1 q2)`` (1 for phi'): smooth phi converge to rounding
#: (measured <= 2e-14); relu's kink makes the rule second order (measured 7e-6 at 801 nodes)
#: and relu's step phi' first order (measured 4e-3).
_CLOSED_TOL = {("relu", False): 2e-5, ("relu", True): 1e-2, ("erf", False): 1e-12,
               ("erf", True): 1e-12, ("identity", False): 1e-12, ("identity", True): 1e-12}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("derivative", [False, True])
def test_each_activations_pair_expectation_matches_an_independent_quadrature(name, derivative):
    q1, q2, c = _random_pairs(2024)
    act = ACTIVATIONS[name]
    got = pair_expectation(q1, q2, c, name, derivative=derivative)
    if act.closed_form:
        quad = pair_expectation(q1, q2, c, dataclasses.replace(act, pairs=None),
                                derivative=derivative, nodes=801)
        scale = 1.0 if derivative else np.sqrt(q1 * q2)
        assert np.all(np.abs(got - quad) <= _CLOSED_TOL[name, derivative] * scale)
    else:  # tanh, gelu: the trapezoidal rule against Gauss-Hermite, both converged
        ref = _gauss_hermite_pairs(act.dphi if derivative else act.phi, q1, q2, c)
        assert np.allclose(got, ref, atol=1e-11, rtol=0)


def test_the_closed_forms_are_relu_erf_identity_and_every_name_is_in_the_registry():
    assert CLOSED_FORMS == ("erf", "identity", "relu")
    assert tuple(sorted(ACTIVATIONS)) == PHI_NAMES
    for name, act in ACTIVATIONS.items():
        assert act.name == name and resolve_activation(name) is act
        assert activation(name) is act.phi_torch


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_each_records_numpy_and_torch_phi_and_derivatives_agree(name):
    act = ACTIVATIONS[name]
    x = np.linspace(-4, 4, 101)
    t = torch.tensor(x, requires_grad=True)
    y = act.phi_torch(t)
    (grad,) = torch.autograd.grad(y.sum(), t)
    assert np.allclose(act.phi(x), y.detach().numpy(), atol=1e-15, rtol=1e-15)
    assert np.allclose(act.dphi(x), act.dphi_torch(t.detach()).numpy(), atol=1e-15, rtol=1e-15)
    assert np.allclose(act.dphi(x[x != 0]), grad.numpy()[x != 0], atol=1e-14)  # relu kink at 0
    phi, dphi = act.phi_and_dphi(x)
    assert np.array_equal(phi, act.phi(x)) and np.array_equal(dphi, act.dphi(x))
    if act.d2phi is not None:  # second derivative by central differences of the first
        h = 1e-5
        assert np.allclose(act.d2phi(x), (act.dphi(x + h) - act.dphi(x - h)) / (2 * h),
                           atol=1e-8)


def test_gating_factor_is_the_records_mean_square_derivative_at_unit_variance():
    assert gating_factor("relu") == 0.5
    assert gating_factor("identity") == 1.0
    assert gating_factor("erf") == pytest.approx(4 / (math.pi * math.sqrt(5)), rel=1e-15)
    z, w = roots_hermitenorm(400)
    for name in ("tanh", "gelu"):  # against 400-node Gauss-Hermite
        ref = float(w @ ACTIVATIONS[name].dphi(z) ** 2) / math.sqrt(2 * math.pi)
        assert gating_factor(name) == pytest.approx(ref, abs=1e-13)
    with pytest.raises(ConfigError, match="unknown activation 'swish'"):
        gating_factor("swish")

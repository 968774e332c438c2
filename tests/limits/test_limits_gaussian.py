"""Pair expectations E[phi(u) phi(v)], E[phi'(u) phi'(v)] (right-hand sides of nfd Prop. 3, 6)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import integrate, special

from depthscale.errors import ConfigError
from depthscale.limits.gaussian import (
    PHI_NAMES,
    expect_dphi_dphi,
    expect_phi_phi,
    expect_phi_sq,
    pair_expectation,
    resolve_activation,
)

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


def test_duplicates_zero_variance_and_correlation_one_give_no_nan():
    x = np.array([[1.0, 2.0], [1.0, 2.0], [0.0, 0.0], [-1.0, -2.0], [3.0, 6.0]])
    cov = x @ x.T / 2
    for phi in [*PHI_NAMES, torch.tanh, torch.relu]:
        for fn in (expect_phi_phi, expect_dphi_dphi):
            out = fn(cov, phi)
            assert np.all(np.isfinite(out)), (phi, fn.__name__)
            assert np.allclose(out, out.T)
            assert np.allclose(out[0], out[1])  # duplicate rows stay duplicates
    # At correlation exactly 1 the pair expectation is E[phi(u)^2].
    relu = expect_phi_phi(cov, "relu")
    assert relu[0, 1] == pytest.approx(cov[0, 0] / 2, rel=1e-15)
    assert relu[0, 3] == 0.0  # antipodal: relu(u) relu(-u) = 0
    assert relu[2, 2] == 0.0
    assert expect_dphi_dphi(cov, "relu")[2, 2] == 0.0  # relu'(0) = 0, torch's convention


def test_identity_returns_the_covariance_and_diagonal_helper_matches_pairs():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 3))
    cov = a @ a.T
    assert np.array_equal(expect_phi_phi(cov, "identity"), 0.5 * (cov + cov.T))
    assert np.all(expect_dphi_dphi(cov, "identity") == 1.0)
    q = np.diag(cov)
    for phi in ("relu", "erf", "tanh", "gelu"):
        assert np.allclose(expect_phi_sq(q, phi), np.diag(expect_phi_phi(cov, phi)), atol=1e-12)
        assert np.allclose(
            expect_phi_sq(q, phi, derivative=True),
            np.diag(expect_dphi_dphi(cov, phi)),
            atol=1e-12,
        )
    assert np.allclose(expect_phi_sq(q, "relu"), q / 2, rtol=1e-15)


def test_callable_derivatives_by_autograd_match_the_named_ones():
    x = np.linspace(-4, 4, 101)
    for name, fn in (("tanh", torch.tanh), ("erf", torch.erf), ("gelu", torch.nn.functional.gelu)):
        named, wrapped = resolve_activation(name), resolve_activation(fn)
        assert np.allclose(wrapped.phi(x), named.phi(x), atol=1e-15)
        assert np.allclose(wrapped.dphi(x), named.dphi(x), atol=1e-14)


def test_unknown_phi_name_raises_config_error_listing_the_names():
    with pytest.raises(ConfigError, match="relu") as info:
        expect_phi_phi(np.eye(2), "swish")
    assert all(name in str(info.value) for name in PHI_NAMES)
    with pytest.raises(ConfigError):
        resolve_activation(3.0)  # type: ignore[arg-type]


def test_bad_covariances_raise_config_error():
    with pytest.raises(ConfigError, match="square"):
        expect_phi_phi(np.ones((2, 3)), "relu")
    with pytest.raises(ConfigError, match="negative"):
        expect_phi_phi(np.array([[-1.0, 0.0], [0.0, 1.0]]), "relu")
    with pytest.raises(ConfigError, match="non-finite"):
        expect_phi_phi(np.array([[np.nan]]), "relu")
    with pytest.raises(ConfigError, match="elementwise"):
        expect_phi_phi(np.eye(2), lambda t: t.sum())

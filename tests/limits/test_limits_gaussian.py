"""Gaussian expectations over every pair of a covariance (right-hand sides of nfd Prop. 3, 6)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from depthscale.activations import PHI_NAMES, expect_phi_sq, resolve_activation
from depthscale.errors import ConfigError
from depthscale.limits.gaussian import expect_dphi_dphi, expect_phi_phi


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

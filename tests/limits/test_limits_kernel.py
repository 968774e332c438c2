"""NNGP kernel ODE (nfd Prop. 3), its Euler recursion, and the eigenvalue claims of Props. 4-5."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from depthscale.errors import ConfigError
from depthscale.limits.kernel import (
    input_covariance,
    kernel_path,
    min_eigenvalue,
    nested_gap_min_eigenvalue,
    nngp_kernel,
    nngp_kernel_euler,
)


def _inputs(n: int = 8, d: int = 5, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d))


def _awkward_inputs() -> np.ndarray:
    """Duplicates, a collinear (scaled) copy, an antipodal copy, a near-duplicate and a zero row."""
    X = _inputs(6, 4, seed=3)
    return np.vstack([X, X[0], 2.5 * X[1], -X[2], X[3] + 1e-9, np.zeros(4)])


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize("T", [0.5, 1.0, 3.0])
def test_relu_diagonal_from_the_full_ode_equals_q0_exp_half_T(T):
    X = _inputs()
    q0 = np.sum(X * X, axis=1) / X.shape[1]
    K = nngp_kernel(X, "relu", T, method="ode")  # integrates the diagonal, not set exactly
    assert np.allclose(np.diag(K), q0 * math.exp(T / 2), rtol=1e-9, atol=0)
    assert np.allclose(np.diag(nngp_kernel(X, "relu", T)), q0 * math.exp(T / 2), rtol=1e-14)


@pytest.mark.parametrize("T", [0.1, 1.0, 4.0, 16.0])
def test_relu_flow_map_matches_pair_by_pair_ode_to_1e10(T):
    X = np.vstack([_inputs(40, 6, seed=1), _awkward_inputs()[:, :4] @ np.ones((4, 6))])
    fast = nngp_kernel(X, "relu", T)
    ref = nngp_kernel(X, "relu", T, method="ode", rtol=1e-13, atol=1e-15)
    assert _rel(fast, ref) <= 1e-10


@pytest.mark.parametrize("T", [0.5, 2.0])
def test_identity_kernel_is_exp_T_times_input_covariance(T):
    # phi = identity makes the ODE linear: d Sigma / dt = Sigma, so C_T = e^T Sigma_0 exactly.
    X = _inputs()
    assert _rel(nngp_kernel(X, "identity", T), math.exp(T) * input_covariance(X)) <= 1e-9


@pytest.mark.parametrize("phi", ["relu", "tanh", "erf"])
def test_euler_recursion_error_is_first_order_in_inverse_depth(phi):
    X = _inputs(6, 4)
    ref = nngp_kernel(X, phi, 1.0, rtol=1e-12, atol=1e-14)
    errs = [np.abs(nngp_kernel_euler(X, phi, 1.0, L) - ref).max() for L in (100, 200, 400)]
    assert errs[0] / errs[1] == pytest.approx(2.0, rel=0.05)
    assert errs[1] / errs[2] == pytest.approx(2.0, rel=0.05)


def test_euler_recursion_with_one_layer_is_one_euler_step():
    X = _inputs(4, 3)
    from depthscale.limits.gaussian import expect_phi_phi

    sigma0 = input_covariance(X)
    assert np.allclose(
        nngp_kernel_euler(X, "tanh", 0.7, 1), sigma0 + 0.7 * expect_phi_phi(sigma0, "tanh")
    )


@pytest.mark.parametrize(("phi", "method"), [("relu", "auto"), ("relu", "ode"), ("tanh", "auto")])
def test_kernel_path_from_one_integration_matches_separate_solves(phi, method):
    X = _inputs(5, 3)
    ts = [2.0, 0.0, 0.5, 1.0]
    path = kernel_path(X, phi, ts, method=method)
    assert np.array_equal(path[1], input_covariance(X))
    for t, K in zip(ts, path, strict=True):
        assert _rel(K, nngp_kernel(X, phi, t, method=method)) <= 1e-9


@pytest.mark.parametrize("phi", ["relu", "tanh", "erf", "gelu"])
def test_kernel_is_strictly_positive_definite_on_distinct_points_even_when_N_exceeds_d(phi):
    # Prop. 4: for non-polynomial phi and t > 0, C_t is SPD on distinct points; here N = 12 > d = 3
    # so Sigma_0 has rank 3 and all the positivity comes from the integral term.
    X = _inputs(12, 3, seed=7)
    assert min_eigenvalue(input_covariance(X)) < 1e-12
    assert min_eigenvalue(nngp_kernel(X, phi, 1.0)) > 1e-6


def test_identity_kernel_stays_rank_d_as_prop4_needs_a_nonpolynomial_phi():
    X = _inputs(12, 3, seed=7)
    assert abs(min_eigenvalue(nngp_kernel(X, "identity", 1.0))) < 1e-10


@pytest.mark.parametrize("phi", ["relu", "tanh", "erf"])
@pytest.mark.parametrize(("t", "t_prime"), [(0.0, 0.5), (0.5, 1.0), (1.0, 3.0), (2.0, 2.0)])
def test_nested_gap_C_tprime_minus_C_t_is_positive_semidefinite(phi, t, t_prime):
    # Prop. 5: C_t' - C_t = int_t^t' E[phi phi'] ds is a kernel (RKHS of C_t nested in C_t').
    X = np.vstack([_inputs(10, 4, seed=2), _awkward_inputs()])
    assert nested_gap_min_eigenvalue(X, phi, t, t_prime) >= -1e-10


@pytest.mark.parametrize(("phi", "method"), [("relu", "auto"), ("relu", "ode"), ("tanh", "auto")])
def test_duplicate_collinear_antipodal_and_zero_inputs_give_finite_kernels(phi, method):
    X = _awkward_inputs()
    K = nngp_kernel(X, phi, 1.0, method=method)
    assert np.all(np.isfinite(K))
    assert np.allclose(K, K.T)
    assert np.allclose(K[0], K[6], rtol=1e-12, atol=1e-14)  # duplicate rows stay duplicates
    assert np.all(K[-1] == 0.0)  # x = 0: h = 0 forever, phi(0) = 0
    assert min_eigenvalue(K) >= -1e-10


def test_relu_kernel_of_a_scaled_copy_scales_linearly():
    # ReLU is positively homogeneous: C_T(a x, x') = a C_T(x, x') for a > 0.
    X = _inputs(3, 4)
    K = nngp_kernel(np.vstack([X, 2.5 * X[:1]]), "relu", 1.0)
    assert K[3, 1] == pytest.approx(2.5 * K[0, 1], rel=1e-12)
    assert K[3, 3] == pytest.approx(2.5**2 * K[0, 0], rel=1e-12)


def test_callable_phi_works_and_matches_the_named_one():
    X = _inputs(4, 3)
    assert _rel(nngp_kernel(X, torch.tanh, 1.0), nngp_kernel(X, "tanh", 1.0)) <= 1e-12


def test_min_eigenvalue_matches_numpy():
    A = _inputs(6, 6)
    K = A @ A.T - 0.3 * np.eye(6)
    assert min_eigenvalue(K) == pytest.approx(np.linalg.eigvalsh(K)[0], rel=1e-12)


@pytest.mark.parametrize(
    ("X", "match"),
    [
        (np.zeros((0, 3)), "at least one row"),
        (np.zeros((3, 0)), "at least one row"),
        (np.ones(3), "2-D"),
        (np.array([[1.0, np.nan]]), "NaN"),
    ],
)
def test_empty_or_malformed_inputs_raise_config_error(X, match):
    with pytest.raises(ConfigError, match=match):
        nngp_kernel(X, "relu", 1.0)


def test_bad_settings_raise_config_error():
    X = _inputs(3, 2)
    with pytest.raises(ConfigError, match="relu, tanh"):
        nngp_kernel(X, "sigmoid", 1.0)
    with pytest.raises(ConfigError, match="T must be"):
        nngp_kernel(X, "relu", -1.0)
    with pytest.raises(ConfigError, match="depth L"):
        nngp_kernel_euler(X, "relu", 1.0, 0)
    with pytest.raises(ConfigError, match="unknown method"):
        nngp_kernel(X, "relu", 1.0, method="rk4")
    with pytest.raises(ConfigError, match="relu-flow"):
        nngp_kernel(X, "tanh", 1.0, method="relu-flow")
    with pytest.raises(ConfigError, match="t <= t_prime"):
        nested_gap_min_eigenvalue(X, "relu", 2.0, 1.0)
    with pytest.raises(ConfigError, match="rtol"):
        nngp_kernel(X, "relu", 1.0, rtol=0.0)
    with pytest.raises(ConfigError, match="non-empty"):
        min_eigenvalue(np.zeros((0, 0)))


def test_phi_with_infinite_gaussian_moments_raises_config_error():
    with pytest.raises(ConfigError, match="not finite"):
        nngp_kernel(_inputs(2, 2), lambda t: torch.exp(t * t), 1.0)


def test_relu_flow_rows_in_blocks_match_the_pair_ode_and_are_exactly_symmetric(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The flow map is evaluated on blocks of rows; with blocks of 7 rows on N = 20 inputs
    (blocks end mid-matrix, a duplicate and a zero input included) every entry agrees with the
    pair-by-pair ODE (rtol 1e-13) to 1e-11 relative, and the kernel is exactly symmetric."""
    import depthscale.limits.kernel as kernel_mod

    monkeypatch.setattr(kernel_mod, "_ROW_BLOCK", 7)
    X = np.random.default_rng(3).standard_normal((20, 5))
    X[9], X[15] = X[2], 0.0
    K = kernel_mod.kernel_path(X, "relu", (0.0, 0.5, 2.0), method="relu-flow")
    ref = kernel_mod.kernel_path(X, "relu", (0.0, 0.5, 2.0), method="ode", rtol=1e-13,
                                 atol=1e-15)
    np.testing.assert_array_equal(K, K.transpose(0, 2, 1))
    assert np.abs(K - ref).max() <= 1e-11 * np.abs(ref).max()
    np.testing.assert_array_equal(K[0], kernel_mod.input_covariance(X))

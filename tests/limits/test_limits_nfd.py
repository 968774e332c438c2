"""The NFD training simulator (nfd Def. 1, App. G Eq. 15) and its first-order kernel.

Tolerances come from the rates, fixed before running:

* Monte Carlo: R replicate seeds (independent particle systems) give a standard error SE from
  their spread; a single comparison is within 4 SE with R >= 10 (Student t with >= 9 degrees
  of freedom: a false failure below 0.3%); the ~60 Gram entries compared at eta_c = 0 use
  R = 16 and 5 SE (Bonferroni: 1% for the whole family). Increments of a fixed covariance are
  i.i.d. Gaussian, so the standard error of an empirical covariance entry is
  ``sqrt((S_ii S_jj + S_ij^2) / P)`` (4 SE each).
* First order in eta_c: with antithetic particles ``f^(1)`` is exactly odd in ``eta_c`` (the law
  is invariant under ``(g^_T, backward atoms) -> -(...)``, and ``f^(0) = 0``), so the output
  change is ``-eta_c L' K + O(eta_c^3)`` and ``K_est(eta) = Delta f / (-eta L')`` deviates from
  its ``eta -> 0`` value by ``c eta^2``: the paired differences over ``eta = 0.05, 0.1, 0.2``
  then have ratio ``(0.04 - 0.01) / (0.01 - 0.0025) = 4``, up to relative O(eta^2) corrections
  (allowed: 3..5).
* Networks vs limit: the RMS output error of a width-n network is O(n^-1/2): from n = 64 to
  1024 it should drop by 4; with 8 networks the RMS estimate has ~25% relative error at each
  end, so a drop by more than 2 is required. The depth error of the network-averaged output is
  O(1/L) plus a floor from the averaged width fluctuation; from L = 1 to 8 the limit itself
  moves by a factor ~4, so a drop below 0.6 is required.
* Coupling gap: the Eq. (15) terms are O(tau^2) per depth step and present at L - 1 of the L
  steps, so the coupled-vs-decoupled gap goes like (L - 1)/L^2: a fitted log-log slope of about
  -0.87 over L = 4..32 (rate -1 asymptotically); required <= -0.7.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from depthscale.errors import ConfigError
from depthscale.limits import nfd as nfd_module
from depthscale.limits.gaussian import expect_dphi_dphi, expect_phi_phi
from depthscale.limits.kernel import input_covariance, nngp_kernel_euler
from depthscale.limits.nfd import NFD, CholeskyRows, loss_derivative, loss_value, ntk_kernel
from depthscale.stats.fits import loglog_slope
from depthscale.train.finite.nfd import online_sgd_finite, teacher_stream


def _pair() -> tuple[np.ndarray, np.ndarray]:
    X = np.random.default_rng(0).standard_normal((2, 4))
    return X, np.array([1.0, 0.0])


def _mean_se(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return a.mean(axis=0), a.std(axis=0, ddof=1) / math.sqrt(a.shape[0])


# ---- 1. eta_c = 0 ---------------------------------------------------------------------------
def test_eta_zero_keeps_every_output_at_its_initial_limit_zero():
    xs, ys = teacher_stream(5, dim=4, seed=1)
    exact = NFD(eta_c=0.0, depth_steps=8, particles=2048, seed=3).train(xs, ys)
    assert np.all(np.abs(exact.outputs) <= 1e-12)  # antithetic pairs: exactly zero
    np.testing.assert_allclose(exact.losses, 0.5 * ys**2, atol=1e-12)
    plain = NFD(eta_c=0.0, depth_steps=8, particles=4096, seed=3, antithetic=False).train(xs, ys)
    assert np.all(np.abs(plain.outputs) <= 4 * plain.output_se)


def test_eta_zero_gram_matrices_follow_the_initial_forward_and_backward_recursions():
    """At eta_c = 0 nothing trains: Sigma_l = E[phi phi](C_l) on the Euler NNGP path and
    Theta_l = prod_{m > l} (1 + tau E[phi' phi'](C_m)) (nfd Prop. 2, 6), within 5 SE."""
    X = np.random.default_rng(2).standard_normal((3, 4))
    L, T = 4, 1.0
    runs = [NFD(eta_c=0.0, depth_steps=L, particles=4096, seed=s).train(X, np.zeros(3))
            for s in range(16)]
    sig_mean, sig_se = _mean_se(np.stack([r.sigma for r in runs]))
    the_mean, the_se = _mean_se(np.stack([r.theta for r in runs]))
    path = [input_covariance(X)]
    for _ in range(L):
        path.append(path[-1] + (T / L) * expect_phi_phi(path[-1], "relu"))
    theta = [np.ones((3, 3))]
    for layer in range(L, 0, -1):
        theta.insert(0, theta[0] * (1 + (T / L) * expect_dphi_dphi(path[layer - 1], "relu")))
    for layer in range(L + 1):
        target = expect_phi_phi(path[layer], "relu")
        assert np.all(np.abs(sig_mean[layer] - target) <= 5 * sig_se[layer] + 1e-12)
        assert np.all(np.abs(the_mean[layer] - theta[layer]) <= 5 * the_se[layer] + 1e-12)


# ---- 2. first step against the kernel --------------------------------------------------------
def _first_step_kernels(coupling: str, etas: list[float], seeds: int) -> np.ndarray:
    X, y = _pair()
    out = np.zeros((seeds, len(etas)))
    for s in range(seeds):
        base = NFD(eta_c=0.0, depth_steps=8, particles=2**15, coupling=coupling, seed=s,
                   eig_every=None).train(X, y).outputs[1]
        for j, eta in enumerate(etas):
            r = NFD(eta_c=eta, depth_steps=8, particles=2**15, coupling=coupling, seed=s,
                    eig_every=None).train(X, y)
            out[s, j] = (r.outputs[1] - base) / (-eta * r.lprime[0])
    return out


def test_def1_first_step_is_the_decoupled_kernel_with_an_order_eta_squared_residual():
    X, _ = _pair()
    etas = [0.05, 0.1, 0.2]
    k_est = _first_step_kernels("none", etas, seeds=10)
    target = ntk_kernel(X, "relu", 1.0, 8, backward="decoupled")[0, 1]
    mean, se = _mean_se(k_est)
    d1 = k_est[:, 1] - k_est[:, 0]
    d2 = k_est[:, 2] - k_est[:, 1]
    assert abs(d1.mean()) > 4 * d1.std(ddof=1) / math.sqrt(10)  # the eta^2 term is resolved
    assert 3.0 <= d2.mean() / d1.mean() <= 5.0
    assert abs(mean[0] - target) <= 4 * se[0] + abs(d1.mean())


def test_full_coupling_first_step_is_the_standard_ntk_not_the_decoupled_one():
    X, _ = _pair()
    k_est = _first_step_kernels("full", [0.05], seeds=10)[:, 0]
    mean, se = float(k_est.mean()), float(k_est.std(ddof=1) / math.sqrt(10))
    standard = ntk_kernel(X, "relu", 1.0, 8, backward="standard")[0, 1]
    decoupled = ntk_kernel(X, "relu", 1.0, 8, backward="decoupled")[0, 1]
    assert abs(mean - standard) <= 4 * se + 0.05**2
    assert abs(mean - decoupled) > 10 * se


def test_decoupled_kernel_is_twice_the_nngp_kernel_and_the_standard_gap_survives_depth():
    X = np.random.default_rng(4).standard_normal((3, 5))
    for L in (1, 7, 32):
        np.testing.assert_allclose(ntk_kernel(X, "tanh", 1.5, L, backward="decoupled"),
                                   2 * nngp_kernel_euler(X, "tanh", 1.5, L), rtol=1e-12)
    gaps = [ntk_kernel(X, "relu", 1.0, L) - ntk_kernel(X, "relu", 1.0, L, backward="decoupled")
            for L in (64, 512)]
    # on the diagonal C_l grows and Theta_l > 1 (relu), so the standard kernel is larger there
    assert np.all(np.diag(gaps[1]) > 0.05)
    np.testing.assert_allclose(gaps[0], gaps[1], rtol=0.02)  # converged, not vanishing


@pytest.mark.slow
def test_finite_networks_first_step_follows_the_ntk_of_their_backward_mode():
    """Width-512, depth-8 nets, one SGD step at eta_c = 1e-3 (first order), 8 seeds: the two
    kernels differ by ~0.1, about 15 standard errors of the seed mean at this width."""
    X, y = _pair()
    kernels = {b: ntk_kernel(X, "relu", 1.0, 8, backward=b)[0, 1]
               for b in ("standard", "decoupled")}
    for backward in ("standard", "decoupled"):
        est = []
        for seed in range(8):
            trained = online_sgd_finite(X, y, width=512, depth=8, eta_c=1e-3, seed=seed,
                                        backward=backward).outputs  # f(x0; th0), f(x1; th1)
            initial = online_sgd_finite(X[1:], y[1:], width=512, depth=8, eta_c=1e-3,
                                        seed=seed, backward=backward).outputs  # f(x1; th0)
            lp = loss_derivative("mse", trained[0], y[0])
            est.append((trained[1] - initial[0]) / (-1e-3 * lp))
        mean, se = float(np.mean(est)), float(np.std(est, ddof=1) / math.sqrt(8))
        other = "decoupled" if backward == "standard" else "standard"
        assert abs(mean - kernels[backward]) <= 4 * se
        assert abs(mean - kernels[other]) > 4 * se


# ---- 3. networks of growing width and depth ------------------------------------------------
_PAIRS = 4


def _nets(xs: np.ndarray, ys: np.ndarray, width: int, depth: int, backward: str) -> np.ndarray:
    return np.array([
        online_sgd_finite(xs, ys, width=width, depth=depth, eta_c=0.2, seed=s,
                          backward=backward, readout_sign=sign, dtype="float32").outputs
        for s in range(_PAIRS) for sign in (1.0, -1.0)
    ])


@pytest.mark.slow
@pytest.mark.parametrize(("backward", "coupling"), [("decoupled", "none"), ("standard", "full")])
def test_network_outputs_approach_the_nfd_as_width_grows(backward: str, coupling: str):
    xs, ys = teacher_stream(6, dim=16, seed=0)
    lim = NFD(eta_c=0.2, depth_steps=4, particles=2**15, coupling=coupling,
              eig_every=None).train(xs, ys).outputs
    err = {n: float(np.sqrt(np.mean((_nets(xs, ys, n, 4, backward) - lim) ** 2)))
           for n in (64, 1024)}
    assert err[1024] < err[64] / 2


@pytest.mark.slow
@pytest.mark.parametrize(("backward", "coupling"), [("decoupled", "none"), ("standard", "full")])
def test_network_mean_output_approaches_the_nfd_as_depth_grows(backward: str, coupling: str):
    xs, ys = teacher_stream(6, dim=16, seed=0)
    lim = NFD(eta_c=0.2, depth_steps=32, particles=2**15, coupling=coupling,
              eig_every=None).train(xs, ys).outputs
    err = {L: float(np.sqrt(np.mean((_nets(xs, ys, 1024, L, backward).mean(axis=0) - lim)
                                    ** 2))) for L in (1, 8)}
    assert err[8] < 0.6 * err[1]


# ---- 4. the growing factor -------------------------------------------------------------------
def _wishart(n: int, seed: int) -> np.ndarray:
    A = np.random.default_rng(seed).standard_normal((n, n + 3))
    return A @ A.T / n


def test_row_extension_equals_a_fresh_cholesky_of_the_full_matrix():
    S = _wishart(40, 0)
    fac = CholeskyRows(40)
    for k in range(40):
        fac.extend(S[: k + 1, k])
        np.testing.assert_allclose(fac.factor[: k + 1, : k + 1],
                                   np.linalg.cholesky(S[: k + 1, : k + 1]),
                                   rtol=0, atol=1e-12 * float(np.max(np.diag(S))))
    assert fac.active.all()


def test_increments_drawn_row_by_row_have_the_target_covariance_within_4_se():
    S = _wishart(6, 1)
    P = 2**16
    rng = np.random.default_rng(7)
    fac = CholeskyRows(6)
    xi = np.zeros((6, P))
    z = np.zeros((6, P))
    for k in range(6):
        row = fac.extend(S[: k + 1, k])
        xi[k] = rng.standard_normal(P)
        z[k] = row @ xi[: k + 1]  # earlier increments are kept, only xi[k] is new
    emp = z @ z.T / P
    se = np.sqrt((np.outer(np.diag(S), np.diag(S)) + S**2) / P)
    assert np.all(np.abs(emp - S) <= 4 * se)


def test_duplicate_directions_get_zero_pivots_and_identical_atoms_not_nan():
    B = np.random.default_rng(3).standard_normal((3, 5))
    vecs = np.vstack([B[0], B[1], B[0], B[0] + B[1], B[2]])  # rows 2, 3 add no new direction
    S = vecs @ vecs.T
    fac = CholeskyRows(5)
    for k in range(5):
        fac.extend(S[: k + 1, k])
    F = fac.factor
    assert np.all(np.isfinite(F))
    assert fac.active.tolist() == [True, True, False, False, True]
    np.testing.assert_allclose(F @ F.T, S, atol=1e-10 * float(np.max(np.diag(S))))
    np.testing.assert_allclose(F[2], F[0], atol=1e-12)
    refac = CholeskyRows(5, refactor=True)
    for k in range(5):
        refac.extend(S[: k + 1, k])
    np.testing.assert_allclose(refac.factor @ refac.factor.T, S, atol=1e-10 * S.max())


def test_nfd_with_duplicate_inputs_is_finite_and_repeats_the_atoms_at_eta_zero():
    xs, ys = teacher_stream(4, dim=4, seed=2)
    xs[2], ys[2] = xs[0], ys[0]
    for eta in (0.0, 0.3):
        res = NFD(eta_c=eta, depth_steps=6, particles=1024, coupling="full").train(xs, ys,
                                                                                  xs[:1])
        assert np.all(np.isfinite(res.outputs)) and np.all(np.isfinite(res.eval_outputs))
        assert np.all(np.isfinite(res.min_eig_sigma)) and np.all(np.isfinite(res.min_eig_theta))
    # at eta_c = 0, step 2 replays step 0 exactly: a singular Sigma, identical particles
    frozen = NFD(eta_c=0.0, depth_steps=6, particles=1024).train(xs, ys)
    np.testing.assert_allclose(frozen.sigma[:, 2, 2], frozen.sigma[:, 0, 0], rtol=1e-10)
    np.testing.assert_allclose(frozen.sigma[:, 0, 2], frozen.sigma[:, 0, 0], rtol=1e-10)
    assert np.all(frozen.min_eig_sigma[2:] <= 1e-9 * frozen.sigma[:, 0, 0])


def test_fresh_cholesky_baseline_gives_the_same_run():
    xs, ys = teacher_stream(12, dim=8, seed=5)
    runs = [NFD(eta_c=0.2, depth_steps=8, particles=512, factor_update=u).train(xs, ys)
            for u in ("extend", "refactor")]
    np.testing.assert_allclose(runs[0].outputs, runs[1].outputs, rtol=0, atol=1e-9)


# ---- 5. forward-backward coupling ------------------------------------------------------------
def test_eq15_coupling_gap_falls_like_one_over_depth_but_the_full_response_gap_does_not():
    xs, ys = teacher_stream(6, dim=16, seed=0)
    depths = [4, 8, 16, 32]
    gaps: dict[str, list[float]] = {"eq15": [], "full": []}
    for L in depths:
        base = NFD(eta_c=0.2, depth_steps=L, particles=2**13, eig_every=None).train(xs, ys)
        for mode in gaps:
            other = NFD(eta_c=0.2, depth_steps=L, particles=2**13, coupling=mode,
                        eig_every=None).train(xs, ys)
            gaps[mode].append(float(np.sqrt(np.mean((other.outputs - base.outputs) ** 2))))
    assert loglog_slope(depths, gaps["eq15"]).slope <= -0.7
    assert gaps["full"][-1] > 0.5 * gaps["full"][0]
    assert gaps["full"][-1] > 10 * gaps["eq15"][-1]


def test_coupling_true_and_false_are_eq15_and_none():
    xs, ys = teacher_stream(3, dim=4, seed=0)
    for flag, name in ((True, "eq15"), (False, "none")):
        a = NFD(eta_c=0.3, depth_steps=4, particles=256, coupling=flag).train(xs, ys)
        b = NFD(eta_c=0.3, depth_steps=4, particles=256, coupling=name).train(xs, ys)
        assert a.coupling == name
        np.testing.assert_array_equal(a.outputs, b.outputs)


# ---- held-out inputs, losses, options --------------------------------------------------------
@pytest.mark.parametrize("coupling", ["none", "full"])
def test_eval_after_k_steps_matches_the_online_prediction_of_step_k(coupling: str):
    """f on x_new after K steps (eval stream) equals the online output f^(K) when x_new is the
    (K+1)-th sample (forward stream): the same limit, different atoms: within 4 SE."""
    xs, ys = teacher_stream(5, dim=8, seed=4)
    diffs = []
    for seed in range(10):
        cfg = NFD(eta_c=0.3, depth_steps=6, particles=4096, coupling=coupling, seed=seed,
                  eig_every=None)
        evaluated = cfg.train(xs[:4], ys[:4], x_eval=xs[4:]).eval_outputs
        online = cfg.train(xs, ys)
        assert evaluated is not None
        diffs.append(float(evaluated[0] - online.outputs[4]))
    mean, se = _mean_se(np.array(diffs))
    assert abs(mean) <= 4 * se + 1e-12


def test_logistic_loss_and_its_derivative():
    f = np.linspace(-3, 3, 7)
    for y in (-1.0, 1.0):
        h = 1e-6
        fd = (loss_value("logistic", f + h, y) - loss_value("logistic", f - h, y)) / (2 * h)
        np.testing.assert_allclose(loss_derivative("logistic", f, y), fd, rtol=1e-6)
    np.testing.assert_allclose(loss_derivative("mse", f, 0.5), f - 0.5)
    xs, _ = teacher_stream(6, dim=4, seed=0)
    labels = np.where(np.arange(6) % 2, 1.0, -1.0)
    res = NFD(eta_c=0.5, depth_steps=4, particles=512, loss="logistic").train(xs, labels)
    assert np.all(np.isfinite(res.losses)) and res.losses[0] == pytest.approx(math.log(2))


def test_float32_uses_the_same_random_numbers_and_stays_within_its_rounding():
    xs, ys = teacher_stream(6, dim=4, seed=0)
    runs = [NFD(eta_c=0.3, depth_steps=6, particles=2048, dtype=dt).train(xs, ys)
            for dt in ("float64", "float32")]
    # float32 rounding (6e-8 relative) accumulated over ~1e3 operations per particle
    np.testing.assert_allclose(runs[1].outputs, runs[0].outputs, rtol=0, atol=1e-4)


@pytest.mark.parametrize(
    "kwargs",
    [{"coupling": "sideways"}, {"loss": "hinge"}, {"eta_c": -0.1}, {"eta_c": math.nan},
     {"particles": 1001}, {"particles": 1}, {"depth_steps": 0}, {"T": 0.0}, {"phi": "swish"},
     {"eig_every": 0}, {"dtype": "float16"}, {"factor_update": "sometimes"}, {"seed": -1}],
)
def test_bad_settings_raise_config_error(kwargs: dict[str, object]):
    with pytest.raises(ConfigError):
        NFD(**kwargs)  # type: ignore[arg-type]


def test_bad_data_raise_config_error():
    xs, ys = teacher_stream(3, dim=4, seed=0)
    sim = NFD(depth_steps=2, particles=64)
    with pytest.raises(ConfigError):
        sim.train(xs, ys[:2])
    with pytest.raises(ConfigError):
        sim.train(xs, ys, x_eval=np.zeros((1, 5)))
    with pytest.raises(ConfigError):
        NFD(depth_steps=2, particles=64, loss="logistic").train(xs, ys)
    with pytest.raises(ConfigError):
        ntk_kernel(xs, backward="sideways")
    assert "NFD" in nfd_module.__all__


@pytest.mark.slow
def test_nfd_benchmark_quick_runs_and_agrees_with_its_fresh_cholesky_baseline():
    from depthscale.benchmarks import nfd as nfd_bench

    res = nfd_bench.run(quick=True)
    assert res.name == "nfd" and res.baseline == "fresh-cholesky-every-step"
    assert res.ours_seconds > 0 and res.baseline_seconds > 0
    assert res.extra["steps_swept"] == [10, 20, 40, 80]
    assert res.extra["max_abs_output_diff_vs_baseline"] <= 1e-8
    assert math.isfinite(res.extra["time_exponent_vs_K"])

"""Forward/backward McKean-Vlasov particle simulators (nfd Prop. 2, 6) and the network coupling.

Monte Carlo tolerances: each estimate is averaged over R = 16 independent seeds and compared
within 4 standard errors, the standard error taken from the spread of the R replicates (so the
particles' mean-field interaction is accounted for). The deterministic targets are the Euler
recursions at the same step count, which are the schemes' exact infinite-particle limits; against
the continuous-time ODE the (deterministic, computed) Euler bias is added to the tolerance.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from depthscale.activations import resolve_activation
from depthscale.errors import ConfigError
from depthscale.limits import sde as sde_module
from depthscale.limits.gaussian import expect_dphi_dphi, expect_phi_phi
from depthscale.limits.kernel import input_covariance, nngp_kernel, nngp_kernel_euler
from depthscale.limits.sde import backward_sde, coupled_finite_network, forward_sde
from depthscale.limits.sde import particles as sde_particles
from depthscale.limits.sde.coupling import (
    RECIPE,
    resnet_branch,
    resnet_branch_backward,
    resnet_input,
)
from depthscale.models import build
from depthscale.param.multipliers import ResNetMultipliers, resnet_multipliers

REPLICATES = 16


def _inputs(n: int = 3, d: int = 4, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d))


def _mean_and_se(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return samples.mean(axis=0), samples.std(axis=0, ddof=1) / math.sqrt(samples.shape[0])


def _euler_path(X: np.ndarray, phi: str, T: float, steps: int) -> list[np.ndarray]:
    """Sigma_l of the infinite-width recursion for l = 0..steps."""
    sigma = input_covariance(X)
    path = [sigma]
    for _ in range(steps):
        sigma = sigma + (T / steps) * expect_phi_phi(sigma, phi)
        path.append(sigma)
    return path


@pytest.mark.parametrize("coefficient", ["particles", "gaussian"])
def test_forward_particle_covariance_matches_euler_and_ode_within_4_standard_errors(coefficient):
    X, T, steps = _inputs(), 1.0, 100
    runs = np.array(
        [
            forward_sde(X, "tanh", T, steps, 5000, seed, coefficient=coefficient).cov_path[-1]
            for seed in range(REPLICATES)
        ]
    )
    mean, se = _mean_and_se(runs)
    euler = nngp_kernel_euler(X, "tanh", T, steps)
    ode = nngp_kernel(X, "tanh", T)
    assert np.all(np.abs(mean - euler) <= 4 * se)
    assert np.all(np.abs(mean - ode) <= 4 * se + np.abs(euler - ode))


def test_forward_single_input_relu_variance_grows_like_exp_half_t():
    # Checked at t = 0, T/2, T; 32 replicates since the path errors are strongly correlated.
    x, steps = np.full((1, 2), 1.5), 200
    seeds = range(32)
    runs = np.array([forward_sde(x, "relu", 2.0, steps, 4000, s).cov_path for s in seeds])
    mean, se = _mean_and_se(runs[:, [0, steps // 2, steps], 0, 0])
    exact_euler = 1.5**2 * (1 + 2.0 / steps / 2) ** np.array([0, steps // 2, steps])
    assert np.all(np.abs(mean - exact_euler) <= 4 * se)
    assert abs(mean[-1] - 1.5**2 * math.e) <= 4 * se[-1] + abs(exact_euler[-1] - 1.5**2 * math.e)


def test_forward_float32_flag_gives_float32_particles_with_the_same_law():
    X = _inputs(2, 3)
    res = forward_sde(X, "tanh", 1.0, 50, 20_000, 0, dtype="float32")
    assert res.terminal.dtype == np.float32
    assert res.cov_path.dtype == np.float64
    euler = nngp_kernel_euler(X, "tanh", 1.0, 50)
    # One run: standard error of a second moment of a Gaussian <= sqrt(2/P) * scale.
    se = math.sqrt(2 / 20_000) * np.sqrt(np.outer(np.diag(euler), np.diag(euler)))
    assert np.all(np.abs(res.cov_path[-1] - euler) <= 5 * se)


def test_float32_one_input_steps_are_float32_arithmetic():
    # h_1 = h_0 + f xi with f = sqrt(dt mean tanh(h_0)^2) rounded to float32 and the sum
    # rounded once in float32 (a float64 product added to float32 particles rounds twice).
    P, steps = 20_000, 4
    res = forward_sde(np.ones((1, 1)), "tanh", 1.0, steps, P, 2, dtype="float32",
                      keep_paths=True, increments="two-point")
    assert res.paths is not None and res.paths.dtype == np.float32
    h0, h1 = res.paths[0, :, 0], res.paths[1, :, 0]
    a = np.tanh(h0)
    f = np.float32(math.sqrt(np.vdot(a, a) / P) * math.sqrt(1.0 / steps))
    xi = np.where(h1 > h0, np.float32(1.0), np.float32(-1.0))
    expected = h0 + f * xi
    assert expected.dtype == np.float32 and np.array_equal(h1, expected)


def test_forward_keep_paths_records_every_step_and_the_covariance_path():
    X = _inputs(2, 3)
    res = forward_sde(X, "relu", 1.0, 10, 500, 1, keep_paths=True)
    assert res.paths is not None and res.paths.shape == (11, 500, 2)
    assert np.array_equal(res.paths[-1], res.terminal)
    assert np.allclose(res.cov_path, np.einsum("lpi,lpj->lij", res.paths, res.paths) / 500)
    assert np.allclose(res.times, np.linspace(0, 1, 11))


def test_forward_is_reproducible_by_seed_and_varies_across_seeds():
    X = _inputs(2, 3)
    a = forward_sde(X, "tanh", 1.0, 20, 1000, 5).terminal
    assert np.array_equal(a, forward_sde(X, "tanh", 1.0, 20, 1000, 5).terminal)
    assert not np.array_equal(a, forward_sde(X, "tanh", 1.0, 20, 1000, 6).terminal)


@pytest.mark.parametrize("phi", ["relu", "tanh"])
def test_forward_with_duplicate_and_zero_inputs_has_no_nan_and_keeps_duplicates_equal(phi):
    X = _inputs(3, 4)
    X = np.vstack([X, X[0], np.zeros(4)])
    res = forward_sde(X, phi, 1.0, 20, 2000, 0)
    assert np.all(np.isfinite(res.terminal)) and np.all(np.isfinite(res.cov_path))
    assert np.allclose(res.terminal[:, 0], res.terminal[:, 3], atol=1e-10)
    assert np.all(res.terminal[:, 4] == 0.0)


def test_backward_relu_second_moment_matches_one_plus_half_dt_power_L_within_4_se():
    # E[relu'(h)^2] = P(h > 0) = 1/2, so E[g_{l-1}^2] = (1 + dt/2) E[g_l^2] and E[g_T^2] = 1.
    x, T, steps = np.ones((1, 3)), 1.0, 50
    runs = np.array(
        [backward_sde(x, "relu", T, steps, 5000, s).grad_cov_path[:, 0, 0] for s in range(16)]
    )
    mean, se = _mean_and_se(runs)
    exact = (1 + T / steps / 2) ** np.arange(steps, -1, -1)
    assert np.all(np.abs(mean - exact) <= 4 * se + 1e-12)
    assert abs(mean[0] - math.exp(T / 2)) <= 4 * se[0] + abs(exact[0] - math.exp(T / 2))


@pytest.mark.parametrize("coefficient", ["particles", "gaussian"])
def test_backward_multi_input_gradient_covariance_matches_the_gia_recursion_within_4_se(
    coefficient,
):
    # Theta_{l-1} = Theta_l * (1 + dt E[phi' phi'](Sigma_{l-1})) entrywise, Theta_T = all ones.
    X, T, steps = _inputs(2, 3, seed=4), 1.0, 40
    sigmas = _euler_path(X, "tanh", T, steps)
    theta = np.ones((2, 2))
    for sigma in reversed(sigmas[:-1]):
        theta = theta * (1 + T / steps * expect_dphi_dphi(sigma, "tanh"))
    runs = np.array(
        [
            backward_sde(X, "tanh", T, steps, 4000, s, coefficient=coefficient).grad_cov_path[0]
            for s in range(REPLICATES)
        ]
    )
    mean, se = _mean_and_se(runs)
    assert np.all(np.abs(mean - theta) <= 4 * se)


def test_backward_checkpoint_replay_is_bit_identical_and_pairs_with_forward_sde():
    X = _inputs(2, 3)
    full = backward_sde(X, "tanh", 1.0, 23, 300, 9, checkpoint_every=1)
    for every in (None, 5, 23, 100):
        other = backward_sde(X, "tanh", 1.0, 23, 300, 9, checkpoint_every=every)
        assert np.array_equal(other.terminal, full.terminal)
        assert np.array_equal(other.grad_cov_path, full.grad_cov_path)
    assert np.array_equal(full.forward_terminal, forward_sde(X, "tanh", 1.0, 23, 300, 9).terminal)


@pytest.mark.parametrize("increments", ["gaussian", "two-point"])
def test_draws_depend_on_the_seed_only_not_on_the_noise_threads(monkeypatch, increments):
    # P = 20000 is above the threshold where the noise blocks are drawn by a thread pool.
    X = _inputs(2, 3)
    kw = {"increments": increments}
    threaded_fwd = forward_sde(X, "tanh", 1.0, 5, 20_000, 3, **kw)
    threaded_bwd = backward_sde(X, "tanh", 1.0, 5, 20_000, 3, checkpoint_every=2, **kw)
    monkeypatch.setattr(sde_particles, "_PARALLEL_MIN_PARTICLES", 10**12)
    assert np.array_equal(forward_sde(X, "tanh", 1.0, 5, 20_000, 3, **kw).terminal,
                          threaded_fwd.terminal)
    serial_bwd = backward_sde(X, "tanh", 1.0, 5, 20_000, 3, checkpoint_every=1, **kw)
    assert np.array_equal(serial_bwd.terminal, threaded_bwd.terminal)
    assert np.array_equal(serial_bwd.forward_terminal, threaded_fwd.terminal)


def test_two_point_increments_are_fair_signs_and_the_initial_law_stays_gaussian():
    # One input, 2 steps: H_1 - H_0 = f xi with one scalar f per step, so the increments over
    # their absolute value are the signs xi themselves.
    P = 40_000
    res = forward_sde(np.ones((1, 2)), "tanh", 1.0, 2, P, 4, keep_paths=True,
                      increments="two-point")
    assert res.paths is not None
    h0, steps = res.paths[0, :, 0], np.diff(res.paths[:, :, 0], axis=0)
    for inc in steps:
        assert np.allclose(np.abs(inc), np.abs(inc[0]), rtol=1e-12)
        xi = np.sign(inc)
        assert set(np.unique(xi)) == {-1.0, 1.0}
        assert abs(xi.mean()) <= 4 / math.sqrt(P)
    assert abs(np.mean(steps[0] * steps[1])) <= 4 * np.abs(steps).max() ** 2 / math.sqrt(P)
    # h_0 ~ N(0, 1): every value distinct and the fourth moment 3 (se sqrt(96 / P))
    assert len(np.unique(h0)) == P
    assert abs(np.mean(h0**4) - 3.0) <= 4 * math.sqrt(96 / P)


def test_fair_signs_fill_any_length_with_plus_minus_one_from_the_generator():
    gen, out = np.random.Generator(np.random.PCG64(0)), np.empty(13)
    sde_module.fair_signs(gen, out)
    assert set(out) <= {-1.0, 1.0} and len(set(out)) == 2
    again = np.empty(13)
    sde_module.fair_signs(np.random.Generator(np.random.PCG64(0)), again)
    assert np.array_equal(out, again)
    # Sign i is bit i % 64 of raw word i // 64, by hand with Python integers; 130 signs use
    # three words, the last one partly.
    many = np.empty(130)
    sde_module.fair_signs(np.random.Generator(np.random.PCG64(7)), many)
    words = [int(w) for w in np.random.PCG64(7).random_raw(3)]
    assert many.tolist() == [1.0 if (words[i // 64] >> (i % 64)) & 1 else -1.0
                             for i in range(130)]
    as32 = np.empty(5, dtype=np.float32)
    sde_module.fair_signs(gen, as32)
    assert as32.dtype == np.float32 and set(np.abs(as32)) == {1.0}


@pytest.mark.parametrize("coefficient", ["particles", "gaussian"])
def test_two_point_forward_covariance_matches_the_euler_recursion_within_4_standard_errors(
    coefficient,
):
    # Weak order 1 like Euler-Maruyama: at 100 steps its O(dt) distance to the Gaussian
    # scheme's limit is far below the Monte Carlo error of 16 x 5000 particles.
    X, T, steps = _inputs(), 1.0, 100
    runs = np.array([
        forward_sde(X, "tanh", T, steps, 5000, seed, coefficient=coefficient,
                    increments="two-point").cov_path[-1]
        for seed in range(REPLICATES)
    ])
    mean, se = _mean_and_se(runs)
    assert np.all(np.abs(mean - nngp_kernel_euler(X, "tanh", T, steps)) <= 4 * se)


def test_two_point_relu_moments_follow_the_euler_recursions_exactly_in_expectation():
    # A symmetric law gives E[relu(h)^2] = E[h^2] / 2 and P(h > 0) = 1/2, so the forward
    # (1 + dt/2)^l and backward (1 + dt/2)^(L-l) recursions hold for signs as for normals.
    x, T, steps = np.ones((1, 3)), 1.0, 40
    runs = [backward_sde(x, "relu", T, steps, 4000, s, increments="two-point")
            for s in range(REPLICATES)]
    fwd_mean, fwd_se = _mean_and_se(np.array([r.cov_path[:, 0, 0] for r in runs]))
    bwd_mean, bwd_se = _mean_and_se(np.array([r.grad_cov_path[:, 0, 0] for r in runs]))
    growth = (1 + T / steps / 2) ** np.arange(steps + 1)
    assert np.all(np.abs(fwd_mean - growth) <= 4 * fwd_se + 1e-12)
    assert np.all(np.abs(bwd_mean - growth[::-1]) <= 4 * bwd_se + 1e-12)


def test_backward_starts_from_one_shared_readout_weight_per_particle():
    X = _inputs(3, 2)
    res = backward_sde(X, "relu", 0.0, 1, 1000, 0)  # T = 0: no increments, g_0 = g_T = v 1_N
    assert np.all(res.terminal == res.terminal[:, :1])
    assert np.allclose(res.grad_cov_path[-1], res.grad_cov_path[-1, 0, 0])


def test_coupling_error_decreases_with_depth():
    # Width 1e5 puts the width term (~0.05 / n) far below the depth term (~8e-4 / L^2).
    x = np.ones(4)
    mse = [
        coupled_finite_network(
            x, "tanh", 1.0, 100_000, L, seed=0, trials=2, explicit_weights=False
        ).mse[-1]
        for L in (1, 4, 16)
    ]
    assert mse[0] > 4 * mse[1] > 16 * mse[2]


def test_coupling_error_decreases_with_width():
    x = np.ones(4)
    mse = [
        coupled_finite_network(x, "tanh", 1.0, n, 8, seed=0, trials=8).mse[-1] for n in (64, 1024)
    ]
    assert mse[0] > 4 * mse[1]


def test_coupling_starts_at_zero_and_tracks_the_limit_variance():
    res = coupled_finite_network(np.ones(4), "relu", 1.0, 1024, 8, seed=1, trials=4)
    assert res.mse[0] == 0.0
    assert res.limit_variance[-1] == pytest.approx(math.exp(0.5), rel=1e-10)  # q0 = 1
    # Second moment of 4 x 1024 coordinates: standard error ~ sqrt(2 / 4096) q <= 0.04.
    assert np.all(np.abs(res.network_second_moment - res.limit_variance) <= 0.16)
    assert res.times.shape == res.mse.shape == (9,)
    assert res.mse_per_trial.shape == (4, 9)


def test_sde_bad_settings_raise_config_error():
    X = _inputs(2, 2)
    with pytest.raises(ConfigError, match="coefficient"):
        forward_sde(X, "tanh", 1.0, 10, 100, 0, coefficient="exact")
    with pytest.raises(ConfigError, match="dtype"):
        forward_sde(X, "tanh", 1.0, 10, 100, 0, dtype="float16")
    with pytest.raises(ConfigError, match="increments 'rademacher'; choose one of: gaussian"):
        backward_sde(X, "tanh", 1.0, 10, 100, 0, increments="rademacher")
    with pytest.raises(ConfigError, match="steps"):
        forward_sde(X, "tanh", 1.0, 0, 100, 0)
    with pytest.raises(ConfigError, match="particles"):
        forward_sde(X, "tanh", 1.0, 10, 1, 0)
    with pytest.raises(ConfigError, match="seed"):
        forward_sde(X, "tanh", 1.0, 10, 100, -1)
    with pytest.raises(ConfigError, match="activation"):
        backward_sde(X, "softplus", 1.0, 10, 100, 0)
    with pytest.raises(ConfigError, match="at least one row"):
        forward_sde(np.zeros((0, 2)), "tanh", 1.0, 10, 100, 0)
    with pytest.raises(ConfigError, match="one input vector"):
        coupled_finite_network(X, "tanh", 1.0, 16, 4)
    with pytest.raises(ConfigError, match="width"):
        coupled_finite_network(np.ones(2), "tanh", 1.0, 0, 4)


def test_backward_coupling_starts_exact_and_tracks_the_limit_second_moment():
    from depthscale.limits import coupled_finite_network_backward

    x = np.random.default_rng(0).standard_normal(8)
    res = coupled_finite_network_backward(x, "tanh", 1.0, 512, 8, seed=0, trials=4)
    assert res.mse[-1] == 0.0  # g_T = v on both sides
    # E[g_0^2] of the network vs theta_0 of the limit: 4 trials x 512 coordinates, the
    # second moment of a near-Gaussian has relative standard error ~ sqrt(2/2048) ~ 0.03.
    assert res.network_second_moment[0] == pytest.approx(res.limit_variance[0], rel=0.15)
    assert res.limit_variance[-1] == 1.0 and res.limit_variance[0] > 1.0


def test_backward_coupling_error_falls_with_width():
    from depthscale.limits import coupled_finite_network_backward

    x = np.random.default_rng(1).standard_normal(8)
    errs = [coupled_finite_network_backward(x, "tanh", 1.0, n, 8, seed=0, trials=4).mse[0]
            for n in (64, 1024)]
    # O(1/n): a 16x wider net should cut the error by far more than 2x
    assert errs[1] < errs[0] / 4


def test_transposed_product_given_the_forward_one_has_the_explicit_weights_law():
    """W^T g drawn by Gaussian conditioning on W p (O(n)) against explicit W (O(n^2)), for a g
    that depends on W through W p (as g_l depends on W_l in the backward pass): the first two
    moments of W^T g agree within 5 standard errors over 40000 draws at n = 4."""
    from depthscale.limits.sde.coupling import _transposed_given_forward

    rng = np.random.default_rng(3)
    n, draws = 4, 40000
    p = np.array([0.5, -1.0, 2.0, 0.25])

    def g_of(u: np.ndarray) -> np.ndarray:  # any function of W p; nonlinear and mixing
        return np.tanh(u) + 0.3 * u[::-1] + 1.0

    explicit, conditional = np.empty((draws, n)), np.empty((draws, n))
    for k, seq in enumerate(np.random.SeedSequence(11).spawn(draws)):
        W = rng.standard_normal((n, n))
        u = W @ p
        explicit[k] = W.T @ g_of(u)
        z = rng.standard_normal(n)  # W p / |p| in law
        conditional[k] = _transposed_given_forward(p, z, g_of(np.linalg.norm(p) * z), seq)
    for stat in (lambda a: a, lambda a: np.einsum("ki,kj->kij", a, a).reshape(draws, -1)):
        e, c = stat(explicit), stat(conditional)
        se = np.sqrt(e.var(axis=0) / draws + c.var(axis=0) / draws)
        assert np.all(np.abs(e.mean(axis=0) - c.mean(axis=0)) < 5 * se + 1e-12)
    # the conditional part is not noise: W^T g correlates with p through g's dependence on W p
    assert abs(float(np.mean(explicit @ p))) > 10 * float(np.std(explicit @ p)) / draws**0.5


def test_backward_coupling_without_weight_matrices_has_the_same_error_law():
    """The O(L n) backward coupling (explicit_weights=False) against explicit weights: the
    mean-square error at g_0 and g's second moment agree within 4 standard errors of their
    difference over 200 trials each (n = 64, L = 4, tanh)."""
    from depthscale.limits import coupled_finite_network_backward

    x = np.random.default_rng(0).standard_normal(8)
    runs = [coupled_finite_network_backward(x, "tanh", 1.0, 64, 4, seed=s, trials=200,
                                            explicit_weights=e)
            for s, e in ((1, True), (2, False))]
    per = [r.mse_per_trial[:, 0] for r in runs]
    se = math.hypot(*(float(v.std(ddof=1)) / math.sqrt(len(v)) for v in per))
    assert abs(float(per[0].mean() - per[1].mean())) < 4 * se
    assert runs[1].network_second_moment[0] == pytest.approx(runs[0].network_second_moment[0],
                                                             rel=0.05)


def test_backward_coupling_with_explicit_weights_is_unchanged_by_the_conditional_route():
    """Adding the conditional route left the explicit-weights coupling's draws and arithmetic
    where they were: the errors of seed 5 are those the coupling gave before it (pinned)."""
    from depthscale.limits import coupled_finite_network_backward

    x = np.random.default_rng(4).standard_normal(8)
    a = coupled_finite_network_backward(x, "tanh", 1.0, 32, 3, seed=5, trials=2)
    np.testing.assert_allclose(a.mse_per_trial[:, :3], [
        [0.0020856192671781376, 0.0006674145855752471, 0.0004543693460645554],
        [0.013513616071190572, 0.005745008093881382, 0.002404682115640865]], rtol=1e-12)


def _numpy_resnet(x, U, Ws, v, phi, m: ResNetMultipliers):
    """The coupling's network (its step functions) on given weights: streams ``h_0..h_L``, the
    output ``a_out v^T h_L`` and the backward states ``g_l = (df/dh_l) / a_out``."""
    act = resolve_activation(phi)
    hs = [resnet_input(U, x, m)]
    for W in Ws:
        hs.append(hs[-1] + resnet_branch(W, act.phi(hs[-1]), m))
    gs = [v]
    for layer in range(len(Ws), 0, -1):
        back = Ws[layer - 1].T @ gs[0]
        gs.insert(0, gs[0] + resnet_branch_backward(back, act.dphi(hs[layer - 1]), m))
    return hs, m.output * float(v @ hs[-1]), gs


@pytest.mark.parametrize(("width", "depth", "T", "d", "phi"), [
    (8, 3, 0.5, 5, "tanh"), (64, 16, 2.0, 3, "relu"), (32, 1, 4.0, 7, "tanh"),
    (16, 8, 3.0, 2, "relu"),
])
def test_the_couplings_numpy_resnet_equals_mlpresnet_under_the_depth_mup_plan(
        width, depth, T, d, phi):
    # The torch MLPResNet built under the depth-mup plan, its weights copied into the numpy
    # network of the couplings (float64 both sides): streams, output and backward states agree
    # to 1e-10 relative (measured ~1e-15). T != 1 and n > 1 in every case, so a branch
    # multiplier sqrt(1/(L n)) (no T) or sqrt(T/L) (no 1/sqrt(n)) moves the streams by far more.
    model, _ = build("resnet1", RECIPE, input_shape=(d,), n_out=1, width=width, depth=depth,
                     seed=3, plan_options={"T": T}, activation=phi)
    model = model.double()
    x = np.random.default_rng(5).standard_normal(d)
    trace = model.trace(torch.tensor(x[None, :]))
    grads = torch.autograd.grad(trace.out.sum(), trace.streams)
    U = model.embed.weight.detach().numpy()
    Ws = [b.weight.detach().numpy() for b in model.branches]
    v = model.readout.weight.detach().numpy()[0]
    m = resnet_multipliers(RECIPE, width=width, depth=depth, d_in=d, T=T)
    assert m.branch == pytest.approx(math.sqrt(T / (depth * width)), rel=1e-15)
    assert m.input == pytest.approx(1 / math.sqrt(d), rel=1e-15)
    assert m.output == pytest.approx(1 / width, rel=1e-15)  # alpha/sqrt(n), alpha = 1/sqrt(n)
    hs, f, gs = _numpy_resnet(x, U, Ws, v, phi, m)
    for h, h_torch in zip(hs, trace.streams, strict=True):
        np.testing.assert_allclose(h, h_torch.detach().numpy()[0], rtol=1e-10, atol=1e-12)
    assert f == pytest.approx(float(trace.out.detach()), rel=1e-10, abs=1e-14)
    for g, grad in zip(gs, grads, strict=True):
        np.testing.assert_allclose(g, grad.numpy()[0] / m.output, rtol=1e-10, atol=1e-12)
    for wrong in (math.sqrt(1 / (depth * width)), math.sqrt(T / depth)):
        bad, _, _ = _numpy_resnet(x, U, Ws, v, phi, dataclasses.replace(m, branch=wrong))
        assert np.abs(bad[-1] - hs[-1]).max() > 1e-3 * np.abs(hs[-1]).max()


def test_resnet_multipliers_allow_T_zero_and_refuse_bad_T():
    m = resnet_multipliers(RECIPE, width=4, depth=2, d_in=3, T=0.0)
    assert m.branch == 0.0 and m.input == pytest.approx(1 / math.sqrt(3))
    with pytest.raises(ConfigError, match="T must be"):
        resnet_multipliers(RECIPE, width=4, depth=2, d_in=3, T=-1.0)

"""Neural Mean ODE and tangent ODE of 2LP ResNets (chizat Eq. 10-14, 18-21, 24-25).

Tolerances come from the rates: exact identities to float64 rounding; Monte Carlo means within
4 standard errors of R replicates; the finite-vs-limit gap against chizat Thm. 4's
``1/L + sqrt(D)/sqrt(L M)`` with unit constants (RMS norm); depth orders from the ratio of errors
when ``J`` doubles (Euler 2, Heun 4, RK4 16); the lazy limit from Thm. 2's ``1/alpha``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.special import ndtr

from depthscale import data as ds_data
from depthscale.errors import ConfigError
from depthscale.limits import (
    MeanODE,
    lazy_limit,
    rms_error,
    stage_count,
)
from depthscale.limits.mean_ode import balanced_eta_u
from depthscale.models import build
from depthscale.train.finite.mean_ode import train_finite_resnet


def _chizat_data(D: int = 10, n: int = 10, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    data = ds_data.load("chizat", dim=D, n_train=n, seed=seed)
    return data.x_train.double().numpy(), data.y_train.double().numpy()


def _per_node(a: np.ndarray) -> np.ndarray:
    """Finite-net units (L, M, D) as Euler node sets (L + 1, M, D): node j = layer j + 1."""
    return np.concatenate([a, a[-1:]])


# ---- the finite reference is chizat Eq. 24-25 ---------------------------------------------------
def test_finite_resnet_one_gd_step_matches_eq_25_computed_by_hand() -> None:
    """Tiny net (D = 2, M = 2, L = 2, n = 2): forward Eq. 24, backward Eq. 7, gradients Eq. 6,
    update Eq. 25 with LRs eta_u L M and eta_v L M, loss mean_i |h - y|^2 / (2 D)."""
    D, M, L, n = 2, 2, 2, 2
    eta_u, eta_v = 0.7, 1.3
    rng = np.random.default_rng(5)
    X, Y = rng.standard_normal((n, D)), rng.standard_normal((n, D))
    res = train_finite_resnet(X, Y, depth=L, hidden=M, steps=1, eta_u=eta_u, eta_v=eta_v,
                              seed=11)
    U, V = res.U0.copy(), res.V0.copy()  # U[l, j] = u^{j, l+1}, V[l, j] = v^{j, l+1}
    gU, gV = np.zeros_like(U), np.zeros_like(V)
    loss = 0.0
    for i in range(n):
        hs = [X[i]]
        for l in range(L):
            step = sum(V[l, j] * math.tanh(U[l, j] @ hs[-1] / D) for j in range(M))
            hs.append(hs[-1] + step / (L * M))
        loss += float((hs[-1] - Y[i]) @ (hs[-1] - Y[i])) / (2 * D) / n
        b = (hs[-1] - Y[i]) / D
        for l in reversed(range(L)):
            h_prev, b_next = hs[l], b
            b = b_next.copy()
            for j in range(M):
                p = U[l, j] @ h_prev / D
                dt = 1 - math.tanh(p) ** 2
                gU[l, j] += dt * (V[l, j] @ b_next) * h_prev / D / (L * M) / n
                gV[l, j] += math.tanh(p) * b_next / (L * M) / n
                b += U[l, j] * dt * (V[l, j] @ b_next) / D / (L * M)
        assert np.allclose(res.outputs[0][i], hs[-1], rtol=0, atol=1e-13)
    assert res.losses[0] == pytest.approx(loss, rel=1e-12)
    np.testing.assert_allclose(res.U, U - eta_u * L * M * gU, rtol=0, atol=1e-13)
    np.testing.assert_allclose(res.V, V - eta_v * L * M * gV, rtol=0, atol=1e-13)


def test_euler_with_per_layer_particles_reproduces_the_finite_resnet_trajectory() -> None:
    """Forward Euler (Eq. 17) with layer l's units at node l - 1 and LRs (eta_u, eta_v) *is*
    GD on the ResNet with LRs (eta_u L M, eta_v L M): the LR correspondence of Eq. 25 vs 14."""
    X, Y = _chizat_data(D=5, n=4)
    L, M, K = 6, 3, 4
    fin = train_finite_resnet(X, Y, depth=L, hidden=M, steps=K, eta_u=2.0, eta_v=5.0, seed=3)
    ode = MeanODE(5, eta_u=2.0, eta_v=5.0, depth_steps=L, particles=M, method="euler",
                  sampler="iid")
    res = ode.train(X, Y, K, initial=(_per_node(fin.U0), _per_node(fin.V0)))
    np.testing.assert_allclose(res.outputs, fin.outputs, rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.losses, fin.losses, rtol=1e-12)
    np.testing.assert_allclose(res.U[:-1], fin.U, rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.V[:-1], fin.V, rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.forward[-1], fin.forward, rtol=0, atol=1e-12)


def test_finite_resnet_uses_the_mean_ode_plan_multipliers_and_lrs() -> None:
    model, plan = build("chizat2lp", "mean-ode", input_shape=(4,), n_out=4, width=4, depth=3,
                        hidden=5, plan_options={"eta_u_scale": 0.5})
    opt = plan.optimizer(model, "sgd", lr=4.0)
    lrs = sorted({g["lr"] for g in opt.param_groups})
    assert lrs == pytest.approx([0.5 * 4.0 * 15, 4.0 * 15])  # eta L M, eta_u = eta_u_scale eta


# ---- the limit vs finite nets -----------------------------------------------------------------
def test_first_forward_pass_of_the_limit_equals_the_finite_nets_in_expectation() -> None:
    """E[h^L(x)] = x for the ResNet (v^{j,l} is centred and independent of h^{l-1}) and
    h(1, x) = x for the Mean ODE (E[phi(h, Z_0)] = 0). Monte Carlo over R = 200 nets
    (L = M = 16) and R = 200 limits with Q = L M iid particles: means agree within 4 standard
    errors, and the fluctuations match too (both are Monte Carlo sums of L M = Q units: the
    variance ratio lies in [0.7, 1.4], 3.5 sigma of a 200-sample variance). With antithetic
    or Sobol' pairs the limit's first pass is exactly x."""
    D, L, M, R = 4, 16, 16, 200
    X = np.random.default_rng(1).standard_normal((3, D))
    finite = np.empty((R, *X.shape))
    with torch.no_grad():
        for r in range(R):
            net, _ = build("chizat2lp", "mean-ode", input_shape=(D,), n_out=D, width=D,
                           depth=L, hidden=M, seed=r)
            finite[r] = net.double()(torch.from_numpy(X)).numpy()
    limit = np.stack([
        MeanODE(D, depth_steps=4, particles=L * M, sampler="iid", seed=r).train(X, X, 0)
        .outputs[0] for r in range(R)
    ])
    for runs in (finite, limit):
        se = runs.std(axis=0, ddof=1) / math.sqrt(R)
        assert np.all(np.abs(runs.mean(axis=0) - X) <= 4 * se)
    diff = np.abs(finite.mean(axis=0) - limit.mean(axis=0))
    se_diff = np.sqrt(finite.var(axis=0, ddof=1) / R + limit.var(axis=0, ddof=1) / R)
    assert np.all(diff <= 4 * se_diff)
    ratio = finite.var(axis=(0,), ddof=1).mean() / limit.var(axis=(0,), ddof=1).mean()
    assert 0.7 <= ratio <= 1.4
    for sampler in ("antithetic", "sobol"):
        exact = MeanODE(D, depth_steps=4, particles=64, sampler=sampler).train(X, X, 0)
        np.testing.assert_allclose(exact.outputs[0], X, rtol=0, atol=1e-13)


@pytest.fixture(scope="module")
def one_step_limit() -> np.ndarray:
    """h_1(1, x_i) of the Mean ODE after one GD step, Sec. 2.4 setting (RK4, J = 16, 8192
    Sobol' particles per stage point): sampling error ~6e-4 (two seeds differ by 8e-4), depth
    error ~1e-10; a tenth of the finite nets' gap at L = M = 256."""
    X, Y = _chizat_data()
    ode = MeanODE(10, depth_steps=16, particles=8192, coupling="independent", seed=7)
    return ode.train(X, Y, 1).outputs[1]


def test_one_gd_step_of_a_wide_deep_resnet_is_within_the_rate_of_the_limit(
    one_step_limit: np.ndarray,
) -> None:
    """chizat Thm. 4 after one step, Sec. 2.4 setting: at L = M = 256 the RMS gap to the limit
    (mean of 3 seeds) is below 1/L + sqrt(D)/sqrt(L M) (unit constants), and from
    L = M = 64 to 256 it falls by the rate's factor 4 (both terms are 1/L at L = M),
    accepted in [2, 8]."""
    X, Y = _chizat_data()
    D = 10
    gaps = {}
    for L in (64, 256):
        errs = [rms_error(train_finite_resnet(X, Y, depth=L, hidden=L, steps=1, seed=s)
                          .outputs[1], one_step_limit) for s in range(3)]
        gaps[L] = float(np.sqrt(np.mean(np.square(errs))))
    assert gaps[256] <= 1 / 256 + math.sqrt(D) / 256
    assert 2.0 <= gaps[64] / gaps[256] <= 8.0


def test_shared_and_independent_couplings_have_the_same_limit() -> None:
    """Only the marginal laws of Z_k(s) enter Eq. 10-14, so the two couplings estimate the same
    outputs: after K = 10 steps their seed means (2 seeds each) differ by less than 4 standard
    errors, estimated from the seed spreads."""
    X, Y = _chizat_data()
    runs = {
        c: np.stack([MeanODE(10, depth_steps=8, particles=1024, coupling=c, seed=s)
                     .train(X, Y, 10).outputs[-1] for s in range(2)])
        for c in ("shared", "independent")
    }
    var = sum(r.var(axis=0, ddof=1).mean() / 2 for r in runs.values())
    gap = rms_error(runs["shared"].mean(axis=0), runs["independent"].mean(axis=0))
    assert gap <= 4 * math.sqrt(var)


# ---- depth integration ---------------------------------------------------------------------------
def test_rk4_depth_error_is_fourth_order_heun_second_and_euler_first() -> None:
    """Same particles (shared Sobol', Q = 256), K = 5 GD steps; error of h_K(1, x) against
    RK4 at J = 64 when J goes 8 -> 16: ratio ~16 (RK4, accepted >= 10, order > 3.3),
    ~4 (Heun, [3, 5.5]), ~2 (Euler, [1.6, 2.6])."""
    X, Y = _chizat_data()

    def out(method: str, J: int) -> np.ndarray:
        return MeanODE(10, depth_steps=J, particles=256, method=method, seed=1).train(
            X, Y, 5).outputs[-1]

    ref = out("rk4", 64)
    ratio = {m: rms_error(out(m, 8), ref) / rms_error(out(m, 16), ref)
             for m in ("euler", "heun", "rk4")}
    assert 1.6 <= ratio["euler"] <= 2.6
    assert 3.0 <= ratio["heun"] <= 5.5
    assert ratio["rk4"] >= 10.0


# ---- lazy ODE (chizat Sec. 3, Thm. 2) ------------------------------------------------------------
def test_mean_ode_approaches_the_tangent_ode_like_one_over_alpha() -> None:
    """sigma_v = alpha sqrt(D), eta_u = D / alpha^2, eta_v = D (chizat Fig. 5 LRs), K = 5, same
    particles: alpha (U_K - U_0) -> zeta_u and V_K - V_0 -> zeta_v with relative error halving
    when alpha doubles (Thm. 2(ii): O(1/alpha); ratio in [0.4, 0.6]); so the input weights move
    O(1/alpha) (alpha * travel within 5% of |zeta_u| at alpha = 64); the outputs converge at
    least as fast (ratio <= 0.6)."""
    X, Y = _chizat_data()
    D = 10
    errs: dict[str, list[float]] = {"u": [], "v": [], "out": []}
    alphas = (16.0, 32.0, 64.0)
    for a in alphas:
        mean = MeanODE(D, sigma_v=a * math.sqrt(D), eta_u=D / a**2, eta_v=D, depth_steps=8,
                       particles=512, seed=2)
        rm, rt = mean.train(X, Y, 5), lazy_limit(mean, a).train(X, Y, 5)
        errs["u"].append(rms_error(a * (rm.U - rm.U0), rt.zeta_u) / rt.zeta_u_rms[-1])
        errs["v"].append(rms_error(rm.V - rm.V0, rt.zeta_v) / rt.zeta_v_rms[-1])
        errs["out"].append(rms_error(rm.outputs[-1], rt.outputs[-1]))
        if a == alphas[-1]:
            assert a * rm.u_travel[-1] == pytest.approx(rt.zeta_u_rms[-1], rel=0.05)
    for key in ("u", "v"):
        for e1, e2 in zip(errs[key], errs[key][1:], strict=False):
            assert 0.4 <= e2 / e1 <= 0.6
    for e1, e2 in zip(errs["out"], errs["out"][1:], strict=False):
        assert e2 / e1 <= 0.6


def test_default_eta_u_is_chizats_balanced_rule_d_min_1_alpha_minus_2() -> None:
    """chizat Thm. 3 / Sec. 4.4: eta_u = D min(1, D / sigma_v^2) = D min(1, alpha^-2) at
    sigma_v = alpha sqrt(D); the lazy limit of alpha >= 1 then has the tangent LR D."""
    D = 9
    for alpha, want in ((0.0, 9.0), (0.5, 9.0), (1.0, 9.0), (3.0, 1.0), (6.0, 0.25)):
        assert balanced_eta_u(D, alpha * 3.0) == pytest.approx(want)
        assert MeanODE(D, sigma_v=alpha * 3.0)._cfg().eta_u == pytest.approx(want)
    assert MeanODE(D)._cfg().eta_u == pytest.approx(9.0)  # sigma_v = sqrt(D): Sec. 2.4
    assert MeanODE(D, sigma_v=18.0, eta_u=0.7)._cfg().eta_u == pytest.approx(0.7)
    assert lazy_limit(MeanODE(D, sigma_v=18.0), 6.0).eta_u == pytest.approx(9.0)
    with pytest.raises(ConfigError, match="sigma_v must be a finite number >= 0"):
        balanced_eta_u(D, -1.0)


def test_finite_resnet_default_eta_u_follows_alpha() -> None:
    """train_finite_resnet at alpha = 2 without eta_u trains exactly as with eta_u = D / 4."""
    rng = np.random.default_rng(4)
    X, Y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    default = train_finite_resnet(X, Y, depth=3, hidden=2, steps=2, alpha=2.0, seed=1)
    explicit = train_finite_resnet(X, Y, depth=3, hidden=2, steps=2, alpha=2.0, eta_u=1.0,
                                   seed=1)
    other = train_finite_resnet(X, Y, depth=3, hidden=2, steps=2, alpha=2.0, eta_u=4.0, seed=1)
    np.testing.assert_array_equal(default.outputs, explicit.outputs)
    assert np.abs(default.outputs[-1] - other.outputs[-1]).max() > 1e-6


def test_lazy_limit_maps_sigma_v_and_learning_rates_by_eq_5() -> None:
    mean = MeanODE(9, sigma_v=12.0, eta_u=0.5, eta_v=7.0, depth_steps=3, particles=8)
    tangent = lazy_limit(mean, 4.0)
    assert tangent.sigma_v == pytest.approx(3.0)
    assert tangent.eta_u == pytest.approx(0.5 * 16)
    assert tangent.eta_v == pytest.approx(7.0)
    assert (tangent.depth_steps, tangent.particles, tangent.seed) == (3, 8, 0)


# ---- bookkeeping and errors ----------------------------------------------------------------------
def test_result_shapes_and_stage_grid() -> None:
    X, Y = _chizat_data(D=4, n=3)
    res = MeanODE(4, depth_steps=5, particles=16).train(X, Y, 2)
    assert res.outputs.shape == (3, 3, 4) and res.forward.shape == (3, 6, 3, 4)
    assert res.stage_grid.shape == (stage_count("rk4", 5),) == (11,)
    assert res.U.shape == (11, 16, 4) and res.U0.shape == (16, 4)
    assert res.u_travel[0] == 0 and res.u_travel[-1] > 0
    np.testing.assert_allclose(res.forward[:, 0], np.broadcast_to(X, (3, 3, 4)))
    np.testing.assert_allclose(res.forward[:, -1], res.outputs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"method": "midpoint"}, "unknown depth method 'midpoint'"),
        ({"sampler": "halton"}, "unknown sampler 'halton'"),
        ({"coupling": "tied"}, "unknown coupling 'tied'"),
        ({"particles": 20}, "particles = 2 \\* 2\\^m or 6 \\* 2\\^m"),
        ({"particles": 7, "sampler": "antithetic"}, "must be even"),
        ({"depth_steps": 0}, "depth_steps must be an integer >= 1"),
        ({"rho": "relu"}, "unknown rho 'relu'"),
        ({"eta_u": -1.0}, "eta_u must be a finite number >= 0"),
    ],
)
def test_bad_settings_are_config_errors(kwargs: dict[str, object], message: str) -> None:
    X, Y = _chizat_data(D=4, n=3)
    args: dict[str, object] = {"depth_steps": 2, "particles": 16, **kwargs}
    with pytest.raises(ConfigError, match=message):
        MeanODE(4, **args).train(X, Y, 1)  # type: ignore[arg-type]


def test_wrong_data_or_initial_shapes_are_config_errors() -> None:
    X, Y = _chizat_data(D=4, n=3)
    ode = MeanODE(4, depth_steps=2, particles=16)
    with pytest.raises(ConfigError, match=r"shape \(n, D\) = \(n, 4\)"):
        ode.train(X[:, :3], Y[:, :3], 1)
    with pytest.raises(ConfigError, match="initial particles must have shape"):
        ode.train(X, Y, 1, initial=(np.zeros((8, 4)), np.zeros((8, 4))))


# ---- the blocks coupling and float32 (the mean-ode benchmark's method) ---------------------------
def test_blocks_coupling_gives_each_stage_point_an_antithetic_sobol_net() -> None:
    """coupling="blocks": stage point i holds points i Q/2 .. (i + 1) Q/2 of one scrambled Sobol'
    sequence in antithetic pairs. Each block of 2^m points is a net: in every one of the 2D
    coordinates, Phi(z) puts exactly one point in each of the 2^m intervals [k, k + 1) / 2^m.
    The sets differ between stage points, and the particle means of u vanish exactly."""
    D, J, Q = 3, 2, 64
    ode = MeanODE(D, depth_steps=J, particles=Q, coupling="blocks", seed=4)
    U0, V0 = ode.initial_particles()
    S, half = stage_count("rk4", J), Q // 2
    assert U0.shape == V0.shape == (S, Q, D)
    np.testing.assert_array_equal(U0[:, half:], -U0[:, :half])
    np.testing.assert_array_equal(V0[:, half:], V0[:, :half])
    np.testing.assert_allclose(U0.mean(axis=1), 0.0, atol=1e-15)
    sigma = math.sqrt(D)
    cells = np.floor(ndtr(np.concatenate([U0[:, :half], V0[:, :half]], axis=2) / sigma) * half)
    for i in range(S):
        for c in range(2 * D):
            np.testing.assert_array_equal(np.sort(cells[i, :, c]), np.arange(half))
    assert not np.allclose(U0[0], U0[1])
    again = MeanODE(D, depth_steps=J, particles=Q, coupling="blocks", seed=4).initial_particles()
    np.testing.assert_array_equal(again[0], U0)


@pytest.fixture(scope="module")
def five_step_reference() -> np.ndarray:
    """h_5(1, x_i), Sec. 2.4 setting: mean of 4 runs of RK4 J = 8 with 4096 independent Sobol'
    particles per stage point (float64); its standard error (9e-4) is under a tenth of the
    errors of the 256-particle runs it scores."""
    X, Y = _chizat_data()
    return np.mean([MeanODE(10, depth_steps=8, particles=4096, coupling="independent",
                            seed=100 + r).train(X, Y, 5, track_travel=False).outputs[-1]
                    for r in range(4)], axis=0)


def test_blocks_in_float32_is_no_less_accurate_than_independent_float64(
    five_step_reference: np.ndarray,
) -> None:
    """The mean-ode benchmark's method (blocks, float32) against the previous one (independent
    Sobol' sets, float64) at equal particles (RK4 J = 4, Q = 256, K = 5): RMS error over seeds
    0..7 against the reference is no larger (measured 0.0113 vs 0.0165; other seed sets and Q
    up to 1024 give ratios 0.69-0.94). Same seed: float32 moves the outputs by < 1e-5 (measured
    5e-8), far below that sampling error."""
    X, Y = _chizat_data()
    errors: dict[str, float] = {}
    outs: dict[str, np.ndarray] = {}
    for name, kwargs in {"previous": {"coupling": "independent"},
                         "blocks-f32": {"coupling": "blocks", "dtype": "float32"},
                         "blocks-f64": {"coupling": "blocks"}}.items():
        runs = [MeanODE(10, depth_steps=4, particles=256, seed=s, **kwargs)  # type: ignore[arg-type]
                .train(X, Y, 5, track_travel=False).outputs[-1] for s in range(8)]
        outs[name] = runs[0]
        errors[name] = float(np.sqrt(np.mean([rms_error(r, five_step_reference) ** 2
                                               for r in runs])))
    assert errors["blocks-f32"] <= errors["previous"]
    assert rms_error(outs["blocks-f32"], outs["blocks-f64"]) < 1e-5

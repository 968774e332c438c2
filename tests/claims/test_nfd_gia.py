"""nfd Cor. 1 / Thm. 1 checked by hand before any verdict: standard vs decoupled backward.

Before calling the paper's claim refuted we suspect our code. Three independent computations
of the same quantity must agree:

* a hand-written numpy forward/backward/SGD step of a tiny depth-muP ResNet (nfd Eq. 1, App. E
  gradients) against :func:`online_sgd_finite` (torch autograd, the decoupled backward's custom
  Function), exact to float64 rounding;
* the first-step output gap ``f_std^(1) - f_dec^(1) = -eta_c L'_0 (K_std - K_dec)(x0, x1)
  + O(eta_c^2)`` with ``K_std - K_dec = C_0 (Theta_0 - 1) + sum_l (Theta_l - 1)(C_l - C_{l-1})``
  (:func:`depthscale.limits.nfd.ntk_kernel`'s derivation) written here in closed form for ReLU
  (arc-cosine kernels, no quadrature): at L = 1, ``C_0 (pi - theta_0) / (2 pi)``;
* the NFD simulator ("full" minus "none") and finite networks of width 1024, one SGD step.

Tolerances, fixed before running: exact checks at 1e-12. Simulator: 8 independent particle
systems (seeds 0-7), the mean within 4 standard errors (t with 7 dof: a false failure below 1%)
plus ``eta_c^2`` for the O(eta_c^2) remainder (the output is odd in eta_c with antithetic
particles, as in tests/limits/test_limits_nfd.py). Finite nets: 8 seeds at eta_c = 1e-3 (first
order: the remainder is 1e-3 relative), within 4 standard errors. Finite vs solver per step: the
pair-mean gap of 4 antithetic pairs within 4 of its standard errors plus 1/n (the O(1/n)
finite-width bias of a mean) of the solver's.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from depthscale.claims.nfd.series import (
    GAP_BAND,
    finite_outputs,
    finite_run,
    limit_gia_gap,
    nfd_outputs,
    series_route,
    size_series,
    solver_T,
    within_noise,
)
from depthscale.errors import ConfigError
from depthscale.limits.nfd import NFD, ntk_kernel
from depthscale.models import build
from depthscale.stats.fits import loglog_slope
from depthscale.train.finite.nfd import online_sgd_finite


# ---- 1. one SGD step of a tiny net, by hand ------------------------------------------------
def _hand_two_outputs(X: np.ndarray, y: np.ndarray, *, width: int, depth: int, eta_c: float,
                      seed: int, backward: str, T: float = 1.0) -> np.ndarray:
    """[f(x0; theta_0), f(x1; theta_1)] of nfd Eq. 1 (h_0 = U x/sqrt(d), h_l = h_{l-1} +
    sqrt(T/(L n)) W_l relu(h_{l-1}), f = v.h_L/n), one SGD step at LR eta_c n on (x0, y0), MSE.
    Backward through W_l (standard) or the independent copy W~_l,0 (decoupled, nfd Cor. 1)."""
    net, _ = build("resnet1", "depth-mup", input_shape=(X.shape[1],), n_out=1, width=width,
                   depth=depth, seed=seed, plan_options={"T": T}, backward=backward)
    U = net.embed.weight.detach().double().numpy().copy()
    Ws = [b.weight.detach().double().numpy().copy() for b in net.branches]
    Bs = Ws if backward == "standard" else [b.weight_back_init.double().numpy()
                                            for b in net.branches]
    v = net.readout.weight.detach().double().numpy()[0].copy()
    n, d, a = width, X.shape[1], math.sqrt(T / (depth * width))

    def forward(x: np.ndarray, U: np.ndarray, Ws: list[np.ndarray],
                v: np.ndarray) -> tuple[list[np.ndarray], float]:
        hs = [U @ x / math.sqrt(d)]
        for W in Ws:
            hs.append(hs[-1] + a * W @ np.maximum(hs[-1], 0.0))
        return hs, float(v @ hs[-1] / n)

    hs, f0 = forward(X[0], U, Ws, v)
    dv, dh = hs[-1] / n, v / n  # df/dv, df/dh_L
    dWs: list[np.ndarray] = [np.zeros(1)] * depth
    for layer in range(depth, 0, -1):
        dWs[layer - 1] = np.outer(dh, a * np.maximum(hs[layer - 1], 0.0))
        dh = dh + a * (hs[layer - 1] > 0) * (Bs[layer - 1].T @ dh)
    dU = np.outer(dh, X[0] / math.sqrt(d))
    step = eta_c * n * (f0 - y[0])
    _, f1 = forward(X[1], U - step * dU, [W - step * g for W, g in zip(Ws, dWs, strict=True)],
                    v - step * dv)
    return np.array([f0, f1])


@pytest.mark.parametrize("backward", ["standard", "decoupled"])
@pytest.mark.parametrize("depth", [1, 2])
def test_one_sgd_step_of_a_tiny_net_matches_a_hand_computation(backward: str, depth: int):
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((2, 3)), np.array([1.0, -0.5])
    hand = _hand_two_outputs(X, y, width=4, depth=depth, eta_c=0.5, seed=3, backward=backward)
    ours = online_sgd_finite(X, y, width=4, depth=depth, eta_c=0.5, seed=3,
                             backward=backward).outputs
    np.testing.assert_allclose(ours, hand, rtol=0, atol=1e-12)


def test_the_hand_step_sees_the_backward_mode():
    """The two modes share f^(0) exactly and differ after one step (by O(1) at width 4)."""
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((2, 3)), np.array([1.0, -0.5])
    std, dec = (_hand_two_outputs(X, y, width=4, depth=2, eta_c=0.5, seed=3, backward=b)
                for b in ("standard", "decoupled"))
    assert std[0] == dec[0]
    assert abs(std[1] - dec[1]) > 1e-3


# ---- 2. the first-step gap in closed form ----------------------------------------------------
def _relu_pair(c: np.ndarray) -> tuple[float, float]:
    """E[relu(u) relu(u')] and E[1{u > 0} 1{u' > 0}] for (u, u') ~ N(0, c), c 2 x 2
    (the arc-cosine kernels of degree 1 and 0)."""
    s = math.sqrt(c[0, 0] * c[1, 1])
    cos = float(np.clip(c[0, 1] / s, -1.0, 1.0))
    th = math.acos(cos)
    return s / (2 * math.pi) * (math.sin(th) + (math.pi - th) * cos), (math.pi - th) / (2 * math.pi)


def _closed_form_gap(X: np.ndarray, depth: int, T: float = 1.0) -> float:
    """(K_std - K_dec)(x0, x1) = C_0 (Theta_0 - 1) + sum_l (Theta_l - 1)(C_l - C_{l-1}),
    C_l = C_{l-1} + tau E[relu relu](C_{l-1}), Theta_L = 1,
    Theta_{l-1} = Theta_l (1 + tau E[relu' relu'](C_{l-1})) (all entries of the 2 x 2 pair)."""
    tau = T / depth
    C = [X @ X.T / X.shape[1]]
    for _ in range(depth):
        ee = np.array([[_relu_pair(C[-1][np.ix_([i, j], [i, j])])[0] for j in range(2)]
                       for i in range(2)])
        C.append(C[-1] + tau * ee)
    theta, gap = 1.0, 0.0
    for layer in range(depth, 0, -1):
        gap += (theta - 1.0) * (C[layer][0, 1] - C[layer - 1][0, 1])
        theta *= 1.0 + tau * _relu_pair(C[layer - 1])[1]
    return gap + (theta - 1.0) * C[0][0, 1]


def _pair() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal(4)
    return np.stack([x0, 0.8 * x0 + 0.6 * rng.standard_normal(4)]), np.array([1.0, 0.0])


def test_closed_form_at_depth_one_is_c0_times_the_arc_cosine_kernel():
    X, _ = _pair()
    C0 = X @ X.T / 4
    theta = math.acos(C0[0, 1] / math.sqrt(C0[0, 0] * C0[1, 1]))
    assert _closed_form_gap(X, 1) == pytest.approx(C0[0, 1] * (math.pi - theta) / (2 * math.pi),
                                                   rel=1e-12)


@pytest.mark.parametrize("depth", [1, 2, 3, 64])
def test_closed_form_gap_equals_the_ntk_kernels_difference(depth: int):
    X, _ = _pair()
    kernels = [ntk_kernel(X, "relu", 1.0, depth, backward=b)[0, 1]
               for b in ("standard", "decoupled")]
    assert kernels[0] - kernels[1] == pytest.approx(_closed_form_gap(X, depth), rel=1e-10)


def test_the_first_step_gap_does_not_vanish_with_depth():
    """Cor. 1 would need this gap -> 0 as L grows; it converges to a positive constant, its
    successive changes shrinking like 1/L (ratio (1/64 - 1/256)/(1/16 - 1/64) = 0.25; a
    1/sqrt(L) approach would give 0.5): bound 0.35."""
    X, _ = _pair()
    gaps = [_closed_form_gap(X, L) for L in (16, 64, 256)]
    assert min(gaps) > 0.2
    assert abs(gaps[2] - gaps[1]) < 0.35 * abs(gaps[1] - gaps[0])


@pytest.mark.parametrize("depth", [1, 2])
def test_nfd_first_step_full_minus_none_is_the_closed_form_gap(depth: int):
    X, y = _pair()
    eta = 0.05
    est = []
    for seed in range(8):
        runs = {c: NFD(eta_c=eta, depth_steps=depth, particles=2**14, coupling=c, seed=seed,
                       eig_every=None).train(X, y) for c in ("full", "none")}
        lp = runs["none"].lprime[0]
        assert runs["full"].lprime[0] == lp  # f^(0) = 0 in both (antithetic particles)
        est.append((runs["full"].outputs[1] - runs["none"].outputs[1]) / (-eta * lp))
    mean, se = float(np.mean(est)), float(np.std(est, ddof=1) / math.sqrt(8))
    target = _closed_form_gap(X, depth)
    assert abs(mean - target) <= 4 * se + eta**2
    assert target > 10 * se  # the gap is resolved, not zero


@pytest.mark.parametrize("depth", [1, 2])
def test_finite_nets_first_step_gap_is_the_closed_form_gap(depth: int):
    X, y = _pair()
    eta = 1e-3
    est = []
    for seed in range(8):
        out = {b: online_sgd_finite(X, y, width=1024, depth=depth, eta_c=eta, seed=seed,
                                    backward=b).outputs for b in ("standard", "decoupled")}
        assert out["standard"][0] == out["decoupled"][0]  # same forward weights
        est.append((out["standard"][1] - out["decoupled"][1]) / (-eta * (out["standard"][0]
                                                                         - y[0])))
    mean, se = float(np.mean(est)), float(np.std(est, ddof=1) / math.sqrt(8))
    assert abs(mean - _closed_form_gap(X, depth)) <= 4 * se
    assert mean > 4 * se


def test_finite_standard_minus_decoupled_follows_the_solver_full_minus_none_per_step():
    """The two routes of nfd-cor1 measure one quantity: at L = 4, width 1024, the pair-mean
    f_std - f_dec of 4 antithetic pairs matches NFD 'full' - 'none' step by step."""
    kw = {"steps": 4, "dim": 8, "eta_c": 0.2, "stream_seed": 0}
    nets = {b: finite_outputs("resnet1", "depth-mup", width=1024, depth=4, backward=b,
                              pairs=4, seed=0, **kw) for b in ("standard", "decoupled")}
    d = (nets["standard"] - nets["decoupled"]).mean(axis=1)  # (pairs, steps)
    mean, se = d.mean(axis=0), d.std(axis=0, ddof=1) / 2
    lim = (nfd_outputs(4, "full", particles=2**15, **kw)
           - nfd_outputs(4, "none", particles=2**15, **kw))
    assert mean[0] == lim[0] == 0.0  # before any step both gaps are exactly zero
    assert np.all(np.abs(mean - lim) <= 4 * se + 1 / 1024)
    assert np.sqrt(np.mean(lim**2)) > 5 * np.sqrt(np.mean(se**2))  # a resolved gap


# ---- 2b. tanh, the activation of nfd-thm1 and nfd-cor1 (Assumption 1) -------------------------
def _kernel_gap(X: np.ndarray, phi: str, depth: int) -> float:
    """(K_std - K_dec)(x0, x1) by :func:`ntk_kernel` (for tanh its pair expectations are the
    quadrature rule tests/test_activations.py checks against Monte Carlo and Gauss-Hermite)."""
    std, dec = (ntk_kernel(X, phi, 1.0, depth, backward=b)[0, 1]
                for b in ("standard", "decoupled"))
    return float(std - dec)


def test_claims_of_assumption_1_run_tanh_at_every_scale_and_in_their_controls():
    """Assumption 1 (L', phi and phi' Lipschitz) rules out ReLU, whose phi' is a step."""
    from depthscale.claims import CLAIMS

    for cid in ("nfd-thm1", "nfd-cor1", "beyond-joint-limit"):
        c = CLAIMS[cid]
        assert {name: s["phi"] for name, s in c.settings.items()} == dict.fromkeys(
            c.settings, "tanh"), cid
        assert c.control is not None and "phi" not in c.control.settings


def test_the_tanh_first_step_gap_does_not_vanish_with_depth():
    """The first-step standard-minus-decoupled gap with tanh, an independent check of the
    claims' verdict: it tends to a positive constant, its successive changes shrinking like
    1/L (ratio 0.25 between L = 16, 64, 256; bound 0.35, as for ReLU above)."""
    X, _ = _pair()
    gaps = [_kernel_gap(X, "tanh", L) for L in (4, 16, 64, 256)]
    assert min(gaps) > 0.3
    assert abs(gaps[3] - gaps[2]) < 0.35 * abs(gaps[2] - gaps[1])


@pytest.mark.parametrize("depth", [1, 4])
def test_tanh_nfd_first_step_full_minus_none_is_the_kernel_gap(depth: int):
    """As the ReLU test above, the tolerance 4 standard errors over 8 particle systems plus
    eta_c^2: the solver's "full" coupling (Stein's lemma on the particles) holds for tanh."""
    X, y = _pair()
    eta = 0.05
    est = []
    for seed in range(8):
        runs = {c: NFD(phi="tanh", eta_c=eta, depth_steps=depth, particles=2**14, coupling=c,
                       seed=seed, eig_every=None).train(X, y) for c in ("full", "none")}
        lp = runs["none"].lprime[0]
        est.append((runs["full"].outputs[1] - runs["none"].outputs[1]) / (-eta * lp))
    mean, se = float(np.mean(est)), float(np.std(est, ddof=1) / math.sqrt(8))
    target = _kernel_gap(X, "tanh", depth)
    assert abs(mean - target) <= 4 * se + eta**2
    assert target > 10 * se


@pytest.mark.parametrize("depth", [1, 4])
def test_tanh_finite_nets_first_step_gap_is_the_kernel_gap(depth: int):
    X, y = _pair()
    eta = 1e-3
    est = []
    for seed in range(8):
        out = {b: online_sgd_finite(X, y, width=1024, depth=depth, eta_c=eta, seed=seed,
                                    phi="tanh", backward=b).outputs
               for b in ("standard", "decoupled")}
        assert out["standard"][0] == out["decoupled"][0]  # same forward weights
        est.append((out["standard"][1] - out["decoupled"][1]) / (-eta * (out["standard"][0]
                                                                         - y[0])))
    mean, se = float(np.mean(est)), float(np.std(est, ddof=1) / math.sqrt(8))
    assert abs(mean - _kernel_gap(X, "tanh", depth)) <= 4 * se
    assert mean > 4 * se


def test_tanh_finite_standard_minus_decoupled_follows_the_solver_per_step():
    """The test above for ReLU, with the claims' tanh: finite_outputs and nfd_outputs take
    ``phi`` and their pair-mean gaps agree step by step."""
    kw = {"steps": 4, "dim": 8, "eta_c": 0.2, "stream_seed": 0, "phi": "tanh"}
    nets = {b: finite_outputs("resnet1", "depth-mup", width=1024, depth=4, backward=b,
                              pairs=4, seed=0, **kw) for b in ("standard", "decoupled")}
    relu = finite_outputs("resnet1", "depth-mup", width=1024, depth=4, backward="standard",
                          pairs=4, seed=0, **{**kw, "phi": "relu"})
    assert not np.allclose(relu, nets["standard"])  # the activation reached the nets
    d = (nets["standard"] - nets["decoupled"]).mean(axis=1)
    mean, se = d.mean(axis=0), d.std(axis=0, ddof=1) / 2
    lim = (nfd_outputs(4, "full", particles=2**15, **kw)
           - nfd_outputs(4, "none", particles=2**15, **kw))
    assert mean[0] == lim[0] == 0.0
    assert np.all(np.abs(mean - lim) <= 4 * se + 1 / 1024)
    assert np.sqrt(np.mean(lim**2)) > 5 * np.sqrt(np.mean(se**2))


# ---- 3. gaps against size: slope, jackknife CI, route ----------------------------------------
_L = [4, 8, 16, 32]


def _replicates(values: list[float], noise: list[float]) -> np.ndarray:
    """(3 replicates, sizes, 2 steps) whose replicate means are exactly ``values`` per step."""
    base = np.array(values)[None, :, None] * np.ones((3, len(values), 2))
    wiggle = np.array([-1.0, 0.0, 1.0])[:, None, None] * np.array(noise)[None, :, None]
    return base + wiggle


def test_size_series_exact_power_law_has_its_slope_and_a_zero_width_ci():
    s = size_series("1/L", _L, _replicates([1 / L for L in _L], [0, 0, 0, 0]))
    assert s.slope == pytest.approx(-1.0, abs=1e-12)
    assert s.ci == pytest.approx((-1.0, -1.0), abs=1e-12)
    assert s.values == pytest.approx(tuple(1 / L for L in _L), rel=1e-12)
    assert series_route("r", s).finding == "supports"


def test_size_series_jackknife_ci_by_hand():
    rng = np.random.default_rng(5)
    d = 0.2 + 0.05 * rng.standard_normal((3, 4, 2))
    s = size_series("x", _L, d)

    def gap(idx: list[int]) -> list[float]:
        m = d[idx].mean(axis=0)
        return list(np.sqrt((m**2).mean(axis=1)))

    full = loglog_slope(_L, gap([0, 1, 2])).slope
    jack = np.array([loglog_slope(_L, gap([j for j in range(3) if j != i])).slope
                     for i in range(3)])
    half = 4.302652729911275 * math.sqrt(2 / 3 * ((jack - jack.mean()) ** 2).sum())  # t_.975,2
    assert s.slope == pytest.approx(full, rel=1e-12)
    assert s.ci == pytest.approx((full - half, full + half), rel=1e-9)
    se = d.std(axis=0, ddof=1) / math.sqrt(3)
    assert s.noise == pytest.approx(tuple(np.sqrt((se**2).mean(axis=1))), rel=1e-12)


def test_relative_series_divides_by_the_signal():
    d = _replicates([0.1, 0.1, 0.1, 0.1], [0.001] * 4)
    sig = _replicates([0.5, 1.0, 2.0, 4.0], [0.0] * 4)
    s = size_series("rel", _L, d, scale=sig)
    assert s.values == pytest.approx((0.2, 0.1, 0.05, 0.025), rel=1e-12)
    assert s.slope == pytest.approx(-1.0, abs=1e-12)


def test_flat_gap_above_its_noise_contradicts_and_one_at_its_noise_is_undecided():
    flat = size_series("flat", _L, _replicates([0.1, 0.11, 0.1, 0.11], [0.002] * 4))
    route = series_route("r", flat)
    assert route.finding == "contradicts" and flat.ci[0] >= GAP_BAND
    noisy = size_series("noisy", _L, _replicates([0.1, 0.11, 0.1, 0.11], [0.1] * 4))
    assert within_noise(noisy)
    assert series_route("r", noisy).finding == "undecided"
    assert "within 3x its noise" in series_route("r", noisy).evidence


def test_unmeasurable_series_are_undecided():
    one = size_series("one replicate", _L, np.ones((1, 4, 2)))
    assert math.isnan(one.ci[0]) and math.isnan(one.noise[0])
    assert series_route("r", one).finding == "undecided"
    zero = size_series("zero gap", _L, np.zeros((3, 4, 2)))
    assert math.isnan(zero.slope)
    assert "not measurable" in series_route("r", zero).evidence


def test_size_series_rejects_bad_input():
    with pytest.raises(ConfigError, match="replicates"):
        size_series("x", _L, np.ones((3, 3, 2)))
    with pytest.raises(ConfigError, match="stat"):
        size_series("x", _L, np.ones((3, 4, 2)), stat="median")
    with pytest.raises(ConfigError, match="scale"):
        size_series("x", _L, np.ones((3, 4, 2)), scale=np.ones((3, 4, 1)))


# ---- 4. the solver side and the shared runs --------------------------------------------------
def test_solver_horizon_per_recipe():
    assert solver_T("depth-mup", 1.5, 64) == 1.5
    assert solver_T("mup", 1.5, 4) == 6.0  # sqrt(T/L) = 1: tau = T per block
    with pytest.raises(ConfigError, match="depth-mup"):
        solver_T("completep", 1.0, 4)


def test_limit_gia_gap_relative_and_couplings():
    kw = {"steps": 3, "particles": 1024, "dim": 4}
    full = limit_gia_gap([2, 8], **kw)
    rel = limit_gia_gap([2, 8], relative=True, **kw)
    outs = nfd_outputs(8, "full", steps=3, dim=4, particles=1024, eta_c=0.2)
    assert rel[1] == pytest.approx(full[1] / math.sqrt(np.mean(outs**2)), rel=1e-12)
    eq15 = limit_gia_gap([2, 8], coupling="eq15", **kw)
    assert eq15[1] < 0.25 * full[1]  # tau^2 terms vs O(1) responses


def test_finite_outputs_are_memoised_and_not_shared_mutable():
    kw = {"width": 8, "depth": 2, "backward": "standard", "pairs": 1, "seed": 0, "steps": 2,
          "dim": 3, "eta_c": 0.1}
    first = finite_outputs("resnet1", "depth-mup", **kw)
    hits = finite_run.cache_info().hits
    first[:] = 99.0
    again = finite_outputs("resnet1", "depth-mup", **kw)
    assert finite_run.cache_info().hits == hits + 2  # both nets of the pair
    assert again.shape == (1, 2, 2) and not np.any(again == 99.0)


def test_online_sgd_rejects_unknown_models_and_eigs_off_eq1():
    xs, ys = np.ones((2, 3)), np.zeros(2)
    with pytest.raises(ConfigError, match="unknown model"):
        online_sgd_finite(xs, ys, width=4, depth=1, eta_c=0.1, seed=0, model="vit")
    with pytest.raises(ConfigError, match="track_eigs"):
        online_sgd_finite(xs, ys, width=4, depth=1, eta_c=0.1, seed=0, model="resnet2",
                          track_eigs=True)
    for model in ("resnet2", "mlp"):
        out = online_sgd_finite(xs, ys, width=4, depth=2, eta_c=0.1, seed=0, model=model)
        assert np.isfinite(out.outputs).all()


# ---- 5. the claims at smoke ------------------------------------------------------------------
def test_cor1_at_smoke_reports_both_routes_and_both_contrasts(tmp_path):
    from depthscale.claims import CLAIMS, ClaimContext

    c = CLAIMS["nfd-cor1"]
    out = c.run(ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None,
                             seed=0, settings=dict(c.settings["smoke"])))
    assert out.verdict in ("PASS", "FAIL", "REFUTED", "INCONCLUSIVE")
    for part in ("finite nets, standard vs decoupled", "one-layer blocks (Eq. 1)",
                 "two-layer blocks (Eq. 6)", "limit solver, 'full' vs 'none'",
                 "baselines must not fall", "vanilla DNN", "muP-ResNet",
                 "the solver's Eq. 15 terms must fall"):
        assert part in out.reason
    for key in ("one_layer_slope", "one_layer_slope_ci_high", "two_layer_slope",
                "solver_full_slope", "solver_eq15_slope", "vanilla_dnn_slope"):
        assert key in out.measured
    assert out.band == {}
    assert out.figure is not None and out.figure.read_bytes()[:4] == b"\x89PNG"
    assert out.data is not None and "relative_gap" in out.data.read_text().splitlines()[0]

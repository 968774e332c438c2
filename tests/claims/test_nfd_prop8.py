"""nfd-prop8: the coupling coefficient after one SGD step (nfd Eq. 5), by hand on tiny nets,
the two routes on the same weights, its statistics on moderate nets, and the verdict rules."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from depthscale.claims.nfd.handwritten_eq5 import (
    HandWeights,
    coupling_by_hand,
    response_terms,
    step_tau,
)
from depthscale.claims.nfd.root_cause import (
    Prop8Settings,
    coupling_library,
    judge_prop8,
    prop8_measure,
)
from depthscale.errors import ConfigError
from depthscale.models import build

T, ETA, Y = 1.0, 0.2, 1.0


def _paper_weights(width: int, depth: int, phi: str, backward: str, seed: int,
                   d: int) -> HandWeights:
    """The library net of ``seed`` in App. E's units (iid N(0, 1) weights, explicit factors)."""
    net, _ = build("resnet1", "depth-mup", input_shape=(d,), n_out=1, width=width, depth=depth,
                   seed=seed, plan_options={"T": T}, activation=phi, backward=backward)
    tau = step_tau("depth-mup", T, depth)

    def paper(m: torch.nn.Module, w: torch.Tensor, scale: float) -> np.ndarray:
        return (float(m.multiplier) * w.detach().double() * scale).numpy()  # type: ignore[arg-type]

    return HandWeights(
        paper(net.embed, net.embed.weight, math.sqrt(d)),
        np.stack([paper(b, b.weight, math.sqrt(width / tau)) for b in net.branches]),
        np.stack([paper(b, b.backward_weight(), math.sqrt(width / tau)) for b in net.branches]),
        paper(net.readout, net.readout.weight, width)[0])


@pytest.mark.parametrize("backward", ["standard", "decoupled"])
@pytest.mark.parametrize("phi", ["tanh", "identity"])
def test_the_two_routes_agree_on_the_same_weights(backward: str, phi: str) -> None:
    """The library's plan, autograd and SGD step give App. E's update exactly."""
    x = np.random.default_rng(1).standard_normal(4)
    lib = coupling_library(x, Y, width=8, depth=3, backward=backward, seed=3, phi=phi, T=T,
                           eta_c=ETA, dtype=torch.float64)
    hand = coupling_by_hand(x, Y, width=8, depth=3, backward=backward, seed=0, phi=phi, T=T,
                            eta_c=ETA, weights=_paper_weights(8, 3, phi, backward, 3, 4),
                            dtype=np.float64)
    assert lib.lprime == pytest.approx(hand.lprime, rel=1e-12)
    for field in ("coupled", "nearest", "eq5", "response"):
        np.testing.assert_allclose(getattr(lib, field), getattr(hand, field), rtol=1e-9,
                                   atol=1e-13, err_msg=field)


def test_tiny_case_by_explicit_formula() -> None:
    """L = 2, n = 4, phi = id: block 2's forward change through W_2^(0) written out, and its
    pieces: block 1's own update (App. F's one-block piece, with the W_2 W_2^T g_2 term of
    Eq. 5) and the embedding's update carried through the skip."""
    n, L, d = 4, 2, 3
    x = np.array([0.5, -1.0, 2.0])
    w = _paper_weights(n, L, "identity", "standard", 5, d)
    tau, a = T / L, math.sqrt(T / L / n)
    h0 = w.U @ x / math.sqrt(d)
    h1 = h0 + a * w.W[0] @ h0
    h2 = h1 + a * w.W[1] @ h1
    f = w.v @ h2 / n
    g2 = w.v
    g1 = g2 + a * w.W[1].T @ g2
    g0 = g1 + a * w.W[0].T @ g1
    c = -ETA * (f - Y)
    hb0 = h0 + c * (x @ x) / d * g0
    hb1 = hb0 + a * w.W[0] @ hb0 + c * tau * (h0 @ hb0) / n * g1
    delta2 = a * w.W[1] @ (hb1 - h1)
    kappa = delta2 @ g2 / (g2 @ g2) / c
    one_block = a * tau * (h0 @ hb0) / n * (w.W[1] @ g1) @ g2 / (g2 @ g2)
    embedding = a * (w.W[1] @ (g0 + a * w.W[0] @ g0)) @ g2 / (g2 @ g2) * (x @ x) / d
    assert kappa == pytest.approx(one_block + embedding, rel=1e-12)
    ww = a * a * tau * (h0 @ hb0) / n * (w.W[1] @ w.W[1].T @ g2) @ g2 / (g2 @ g2)
    assert one_block == pytest.approx(a * tau * (h0 @ hb0) / n * (w.W[1] @ g2) @ g2 / (g2 @ g2)
                                      + ww, rel=1e-12)
    for out in (coupling_by_hand(x, Y, width=n, depth=L, backward="standard", seed=0,
                                 phi="identity", T=T, eta_c=ETA, weights=w, dtype=np.float64),
                coupling_library(x, Y, width=n, depth=L, backward="standard", seed=5,
                                 phi="identity", T=T, eta_c=ETA, dtype=torch.float64)):
        assert out.coupled[0] == pytest.approx(kappa, rel=1e-9)
        nearest = a * tau * (h0 @ h0) / n * (w.W[1] @ g1) @ g2 / (g2 @ g2)
        assert out.nearest[0] == pytest.approx(nearest, rel=1e-9)
        assert out.eq5[0] == pytest.approx(tau**2 * (h0 @ hb0) / n, rel=1e-9)
        d1 = (x @ x) / d + tau * (h0 @ hb0) / n + tau * (x @ x) / d
        assert out.response[0] == pytest.approx(tau * d1, rel=1e-9)


def test_response_recursion_by_hand() -> None:
    got = response_terms(2.0, 0.5, np.array([1.0, 3.0, 0.0]), np.array([1.0, 0.5, 2.0]))
    k1 = 0.5 * 1.0 * 2.0
    D1 = 2.0 + 0.5 * 1.0 + k1
    k2 = 0.5 * 0.5 * D1
    D2 = D1 + 0.5 * 3.0 + k2
    np.testing.assert_allclose(got, [k1, k2, 0.5 * 2.0 * D2], rtol=1e-14)


def test_moderate_nets_statistics() -> None:
    """Fixed seeds, n = 256, L = 8, tanh (tolerances stated): the one-block piece is Eq. 5's
    term (ratio within [0.8, 1.5]); the coupled coefficient is the all-updates response
    (within [0.8, 1.25]) and several times Eq. 5's; the decoupled one is near zero."""
    x = np.random.default_rng(0).standard_normal(16)
    runs = {b: [coupling_by_hand(x, Y, width=256, depth=8, backward=b, seed=s, T=T, eta_c=ETA)
                for s in range(4)] for b in ("standard", "decoupled")}

    def mean(b: str, field: str) -> float:
        return float(np.mean([getattr(r, field).mean() for r in runs[b]]))

    assert 0.8 <= mean("standard", "nearest") / mean("standard", "eq5") <= 1.5
    assert 0.8 <= mean("standard", "coupled") / mean("standard", "response") <= 1.25
    assert mean("standard", "coupled") > 5 * mean("standard", "eq5")
    assert abs(mean("decoupled", "coupled")) < 0.2 * mean("standard", "coupled")


def _blocks(rng: np.random.Generator, depths: list[int], coupled_power: float,
            noise: float = 0.02) -> dict[str, np.ndarray]:
    L = np.array(depths, dtype=float)
    eq5 = np.tile(0.6 / L**2, (6, 1))

    def noisy(v: np.ndarray) -> np.ndarray:
        return v * (1 + noise * rng.standard_normal(v.shape))

    return {"coupled": noisy(np.tile(0.5 / L**coupled_power, (6, 1))),
            "nearest": noisy(1.1 * eq5), "eq5": eq5,
            "response": noisy(np.tile(0.5 / L**coupled_power, (6, 1))),
            "decoupled": noise * rng.standard_normal((6, len(depths))) / L}


@pytest.mark.parametrize(("power", "verdict"), [(1.0, "REFUTED"), (2.0, "PASS")])
def test_the_verdict_rules(power: float, verdict: str) -> None:
    rng = np.random.default_rng(0)
    depths = [4, 8, 16, 32, 64]
    m = prop8_measure([], depths, {r: _blocks(rng, depths, power)
                                   for r in ("library", "handwritten")})
    j = judge_prop8(m)
    assert j.decision is not None and j.decision[0] == verdict, j.decision
    if verdict == "REFUTED":
        assert j.decision[1].startswith("contradicts Sec. 4.2 on Prop. 8's Eq. (5)")
        assert j.measured["library_coupled_slope"] == pytest.approx(-1.0, abs=0.05)


def test_no_contrast_without_a_decoupled_zero() -> None:
    """A decoupled arm that couples like the standard one: the contrast is not seen, and the
    contradiction is a FAIL."""
    rng = np.random.default_rng(1)
    depths = [4, 8, 16, 32, 64]
    blocks = {r: _blocks(rng, depths, 1.0) for r in ("library", "handwritten")}
    for b in blocks.values():
        b["decoupled"] = b["coupled"].copy()
    j = judge_prop8(prop8_measure([], depths, blocks))
    assert j.decision is not None and j.decision[0] == "FAIL"
    assert "decoupled" in j.decision[1] and "NOT zero" in j.decision[1]


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ConfigError, match="depths >= 2"):
        Prop8Settings("tanh", 4, 1.0, 0.2, 1.0, 16, [1, 4], 4)
    with pytest.raises(ConfigError, match="seeds >= 2"):
        Prop8Settings("tanh", 4, 1.0, 0.2, 1.0, 16, [2, 4], 1)
    x = np.ones(3)
    with pytest.raises(ConfigError, match="tanh or identity"):
        coupling_by_hand(x, Y, width=4, depth=2, backward="standard", seed=0, phi="relu")
    with pytest.raises(ConfigError, match="backward"):
        coupling_by_hand(x, Y, width=4, depth=2, backward="feedback-alignment", seed=0)
    with pytest.raises(ConfigError, match="depth >= 2"):
        coupling_by_hand(x, Y, width=4, depth=1, backward="standard", seed=0)
    with pytest.raises(ConfigError, match="recipe"):
        step_tau("sp", 1.0, 4)

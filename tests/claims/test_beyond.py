"""The open-question claims (CLAIMS.md section D): three-layer blocks and their update readout,
the Adam arm of the transfer study and its spread analysis, the joint-limit paths, and the
Transformer block's readout and transfer study."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from depthscale.claims import CLAIMS, PLANNED, ClaimContext
from depthscale.claims.beyond import adam_tables, joint_widths, transformer_tables
from depthscale.claims.beyond.adam import AdamMeasures, AdamSettings, judge_adam
from depthscale.claims.beyond.joint_limit import JointSettings
from depthscale.claims.beyond.readouts import (
    record_steps,
    slope_readouts,
    slope_readouts_measured,
)
from depthscale.claims.beyond.shared import nfd_view
from depthscale.claims.beyond.spreads import bootstrap_spreads, spreads
from depthscale.claims.beyond.three_layer import (
    JUDGED_ARMS,
    KEYS,
    MIDDLE_LAYERS,
    ThreeLayerMeasures,
    ThreeLayerSettings,
    judge_three_layer,
    three_arms,
)
from depthscale.claims.beyond.transformer import TransformerSettings
from depthscale.claims.nfd import transfer_tables
from depthscale.claims.nfd.collapse import SlopeCI
from depthscale.claims.nfd.transfer import TransferMeasure
from depthscale.claims.registry import read_settings
from depthscale.errors import ConfigError
from depthscale.models import build
from depthscale.models.gpt import GPT
from depthscale.models.mlp import MLPResNet
from depthscale.param import Plan
from depthscale.probes import block_updates, snapshot, transformer_updates
from depthscale.stats.fits import loglog_slope
from depthscale.studies.spec import expand, load_study, study_from_tables

G = torch.Generator().manual_seed(0)
X = torch.randn(64, 20, generator=G)
Y = torch.randint(0, 10, (64,), generator=G)

#: each beyond claim's typed settings record
SETTINGS = {"beyond-3layer": ThreeLayerSettings, "beyond-adam": AdamSettings,
            "beyond-joint-limit": JointSettings, "beyond-transformer": TransformerSettings}
#: beyond-3layer's smoke settings, typed
THREE_SMOKE = read_settings(ThreeLayerSettings, CLAIMS["beyond-3layer"].settings["smoke"])


@pytest.mark.parametrize("claim_id", sorted(SETTINGS))
def test_the_typed_settings_hold_every_key_so_nfds_helpers_read_the_same_mapping(
        claim_id: str) -> None:
    """Every scale's settings, and each with the negative control's, read into the claim's
    typed record with no key left over: the mapping nfd's shared helpers get from it
    (:func:`nfd_view`) is the settings mapping itself, defaults filled in."""
    c = CLAIMS[claim_id]
    for stock in c.stock():
        view = nfd_view(read_settings(SETTINGS[claim_id], stock))
        assert {k: view[k] for k in stock} == dict(stock)
        assert set(view) - set(stock) <= {"fix_recipe", "second_route", "corrected_recipe",
                                          "recipe"}


# ---- the three-layer block ------------------------------------------------------------------
def test_three_layer_block_is_eq6_with_one_more_layer() -> None:
    model, plan = build("resnet3", "depth-mup", input_shape=(20,), n_out=10, width=8, depth=3,
                        seed=1)
    assert isinstance(model, MLPResNet) and model.block == 3
    roles = plan.roles(model)
    assert roles["branches.0.inner.weight"] == "branch_in"
    assert roles["branches.0.middle.0.weight"] == "hidden"
    assert roles["branches.0.outer.weight"] == "branch_out"
    x = X[:5]
    h = x @ model.embed.weight.T / math.sqrt(20)
    relu = torch.relu
    for l in range(3):
        w1, w2, w3 = (model.branches[l].get_submodule(k).weight
                      for k in ("inner", "middle.0", "outer"))
        x1 = h @ w1.T / math.sqrt(8)
        x2 = relu(x1) @ w2.T / math.sqrt(8)
        h = h + relu(x2) @ w3.T / math.sqrt(3 * 8)
    want = h @ model.readout.weight.T / 8  # alpha/sqrt(n) with alpha = 1/sqrt(n)
    tr = model.trace(x)
    torch.testing.assert_close(tr.out, want)
    assert len(tr.layers) == 3 and [len(v) for v in tr.layers] == [2, 2, 2]
    torch.testing.assert_close(tr.internal[2], tr.layers[2][0])


def test_block_sizes_below_one_are_refused() -> None:
    for bad in (0, -2, True, 2.0):
        with pytest.raises(ConfigError, match="block must be"):
            MLPResNet(4, 2, 8, 2, block=bad)  # type: ignore[arg-type]


def _one_step(model_name: str, recipe: str, depth: int, seed: int, *, width: int = 128,
              middle: str | None = None) -> dict[str, float]:
    model, plan = build(model_name, recipe, input_shape=(20,), n_out=10, width=width,
                        depth=depth, seed=seed)
    if middle is not None:
        plan.apply(model, roles={MIDDLE_LAYERS: middle}, seed=seed)
    init = snapshot(model)
    opt = plan.optimizer(model, "sgd", 0.1)
    F.cross_entropy(model(X), Y).backward()
    opt.step()
    return {k: statistics.fmean(v) for k, v in block_updates(model, init, X).items()}


def test_the_fix_gives_the_middle_layer_eq8s_lr_and_keeps_the_draws() -> None:
    L, n = 9, 16
    plain, _ = build("resnet3", "nfd-depth", input_shape=(20,), n_out=10, width=n, depth=L,
                     seed=4)
    fixed, plan = build("resnet3", "nfd-depth", input_shape=(20,), n_out=10, width=n, depth=L,
                        seed=4)
    plan.apply(fixed, roles={MIDDLE_LAYERS: "branch_in"}, seed=4)
    for (name, a), (_, b) in zip(plain.named_parameters(), fixed.named_parameters(), strict=True):
        assert torch.equal(a, b), name
    opt = plan.optimizer(fixed, "sgd", 0.1)
    lr_of = {id(p): g["lr"] for g in opt.param_groups for p in g["params"]}
    params = dict(fixed.named_parameters())
    for name, want in (("branches.0.inner.weight", 0.1 * n * math.sqrt(L)),
                       ("branches.0.middle.0.weight", 0.1 * n * math.sqrt(L)),
                       ("branches.0.outer.weight", 0.1 * n)):
        assert lr_of[id(params[name])] == pytest.approx(want, rel=1e-12), name


@pytest.mark.parametrize(("middle", "band1", "band2"), [
    (None, (-0.65, -0.35), (-0.65, -0.35)),  # depth-muP: both internal layers collapse
    ("branch_in", (-0.15, 0.15), (-0.15, 0.15)),  # sqrt(L) on both: flat
])
def test_first_step_internal_updates_follow_the_derivation(
    middle: str | None, band1: tuple[float, float], band2: tuple[float, float]
) -> None:
    recipe = "depth-mup" if middle is None else "nfd-depth"
    depths = [4, 16, 64]
    ups = [[_one_step("resnet3", recipe, d, s, middle=middle) for s in (0, 1)] for d in depths]
    for key, (low, high) in (("layer1", band1), ("layer2", band2)):
        ys = [statistics.fmean(u[key] for u in per_seed) for per_seed in ups]
        slope = loglog_slope(depths, ys).slope
        assert low <= slope <= high, (key, slope)


def _three_layer_measures(exponents: dict[str, dict[str, float]],
                          early: float = 0.0) -> ThreeLayerMeasures:
    """Rows of three seeds where depth 8 trains twice as fast as depth 2 and every
    update of arm ``tag``, key ``k`` is (seed-jittered) L^exponents[tag][k] x the loss drop
    (so the slope is the exponent at matched loss; at fixed steps depth 8 has dropped twice
    as far); ``early`` is added to the exponent before step 10."""
    steps, depths, seeds = record_steps(30), [2, 8], [0, 1, 2]
    arms = three_arms(THREE_SMOKE)
    rows = [{"arm": tag, "depth": L, "seed": seed, "step": k,
             "running_loss_last10": 3.0 - drop,
             **{f"{key}_update": L ** (exponents[tag][key] + 0.05 * (seed - 1)
                                       + (early if k < 10 else 0.0)) * drop
                for key in KEYS}}
            for tag, _, _ in arms for L in depths for seed in seeds for k in steps
            for drop in [(2 if L == 8 else 1) * k / 16]]
    slopes = slope_readouts(rows, [tag for tag, _, _ in arms], KEYS, depths, seeds, 30)
    return ThreeLayerMeasures(arms, slopes, rows, slope_readouts_measured(slopes, depths))


DERIVED = {"depth_mup": {"layer1": -0.5, "layer2": -0.5, "stream": 0.0},
           "eq8": {"layer1": 0.0, "layer2": -0.5, "stream": 0.0},
           "fix": {"layer1": 0.0, "layer2": 0.0, "stream": 0.0}}


def test_three_layer_judges_seed_intervals_at_matched_loss() -> None:
    s = replace(THREE_SMOKE, steps=30, seeds=3)
    m = _three_layer_measures(DERIVED)
    # seeds give exponents b - 0.05, b, b + 0.05: interval b +- t(2) 0.05 / sqrt(3)
    half = 4.302652729749464 * 0.05 / math.sqrt(3)
    assert m.measured["layer2_slope_depth_mup"] == pytest.approx(-0.5)
    assert m.measured["layer2_slope_depth_mup_ci_high"] == pytest.approx(-0.5 + half)
    assert m.measured["matched_step_fix_L8"] == 15.0  # 3 - 2k/16 <= 3 - 30/16 from k = 15
    assert m.measured["layer2_slope_depth_mup_step30"] == pytest.approx(
        -0.5 + 0.5)  # read at a fixed step: 2 = 4^0.5
    j = judge_three_layer(m, s)
    assert j.decision == ("PASS", ""), j.decision
    assert "layer2 -0.5 [" in j.note
    # the fix arm's layer 2 collapsing too: its interval lies below the flat band
    wrong = judge_three_layer(_three_layer_measures(
        {**DERIVED, "fix": {**DERIVED["fix"], "layer2": -0.5}}), s)
    assert wrong.decision[0] == "FAIL" and "layer2_slope_fix: contradicts" in wrong.decision[1]
    # a slope that is flat only late in the run: undecided between the two loss targets
    moving = judge_three_layer(_three_layer_measures(DERIVED, early=0.5), s)
    assert moving.decision[0] == "INCONCLUSIVE"
    assert "moves with the loss level" in moving.decision[1]


def _two_routes(library: dict[str, dict[str, float]],
                handwritten: dict[str, dict[str, float]]) -> ThreeLayerMeasures:
    """:func:`_three_layer_measures` with a handwritten route over the judged arms."""
    lib, hand = _three_layer_measures(library), _three_layer_measures(handwritten)
    rows = [r for r in hand.rows if r["arm"] in JUDGED_ARMS]
    slopes = slope_readouts(rows, JUDGED_ARMS, KEYS, [2, 8], [0, 1, 2], 30)
    return replace(lib, hand_rows=rows, hand=slopes)


def test_three_layer_two_routes_refute_the_fix_only_together() -> None:
    s = replace(THREE_SMOKE, steps=30, seeds=3)
    # the fix lifts layer 2 from -0.5 to -0.3 in both routes, not to flat: refuted
    lifted = {**DERIVED, "fix": {**DERIVED["fix"], "layer2": -0.3}}
    j = judge_three_layer(_two_routes(lifted, lifted), s)
    assert j.decision[0] == "REFUTED", j.decision
    assert "layer2_slope_fix: refuted" in j.decision[1]
    assert "contrast: seen" in j.decision[1] and "routes agree in value" in j.decision[1]
    # the handwritten route finds layer 2 flat: the routes disagree, our code is suspected
    conflict = judge_three_layer(_two_routes(lifted, DERIVED), s)
    assert conflict.decision[0] == "FAIL" and "disagree in finding" in conflict.decision[1]
    # the negative control: the fix arm without sqrt(L), as depth-muP in both routes; the
    # check sees no lift, so no refutation
    control = {**DERIVED, "fix": DERIVED["depth_mup"]}
    blind = judge_three_layer(_two_routes(control, control), s)
    assert blind.decision[0] == "FAIL" and "contrast: NOT seen" in blind.decision[1]
    # both routes as derived: PASS
    assert judge_three_layer(_two_routes(DERIVED, DERIVED), s).decision == ("PASS", "")


# ---- beyond-adam ------------------------------------------------------------------------------
def test_adam_study_is_the_transfer_study_with_adam() -> None:
    quick = CLAIMS["beyond-adam"].settings["quick"]
    s = read_settings(AdamSettings, quick)
    adam = study_from_tables(adam_tables(s, "adam"))
    assert adam.name == "beyond-adam-adam" and adam.train.optimizer == "adam"
    assert dict(adam.grid)["lr"] == tuple(s.eta_cs_adam)
    sgd = study_from_tables(adam_tables(s, "sgd"))
    transfer = study_from_tables(transfer_tables({**quick, "eta_cs": s.eta_cs_sgd}))
    assert expand(sgd) == expand(transfer)
    with pytest.raises(ConfigError, match="optimizer must be"):
        adam_tables(s, "lion")


def test_adam_example_is_the_claims_quick_adam_study() -> None:
    claim_study = study_from_tables(adam_tables(
        read_settings(AdamSettings, CLAIMS["beyond-adam"].settings["quick"]), "adam"))
    example = load_study(Path(__file__).resolve().parents[2] / "examples" / "beyond_adam.toml")
    assert expand(claim_study) == expand(example)
    assert (claim_study.name, claim_study.analysis) == (example.name, example.analysis)


def _records(optima: dict[tuple[str, int], float], seeds: range) -> list[dict[str, object]]:
    """Runs whose last-epoch loss is (log10 lr - log10 optimum)^2 + seed offset."""
    lrs = [10 ** (k / 4) for k in range(-8, 5)]
    return [{"recipe": r, "depth": L, "seed": s, "lr": lr, "status": "done",
             "epoch_losses": [1.0 + 0.01 * s + (math.log10(lr) - math.log10(opt)) ** 2]}
            for (r, L), opt in optima.items() for s in seeds for lr in lrs]


def test_spread_is_the_optima_range_in_decades() -> None:
    optima = {("depth-mup", 3): 0.3, ("depth-mup", 9): 0.03, ("nfd-depth", 3): 0.2,
              ("nfd-depth", 9): 0.1}
    recs = _records(optima, range(3))
    got = spreads(recs, ("depth-mup", "nfd-depth"), [3, 9])
    assert got["depth-mup"] == pytest.approx(1.0, abs=1e-9)
    assert got["nfd-depth"] == pytest.approx(math.log10(2), abs=1e-9)
    boot = bootstrap_spreads(recs, ("depth-mup", "nfd-depth"), [3, 9], n_boot=20, seed=0)
    assert boot.shape == (20, 2)  # seed offsets do not move a quadratic's minimum
    assert boot[:, 0] == pytest.approx([1.0] * 20) and boot[:, 1] == pytest.approx(
        [math.log10(2)] * 20)
    diverged = [r if (r["depth"], r["recipe"]) != (9, "nfd-depth") else {**r, "status": "failed"}
                for r in recs]
    assert math.isnan(spreads(diverged, ("depth-mup", "nfd-depth"), [3, 9])["nfd-depth"])


def test_removing_the_correction_makes_the_adam_difference_exactly_zero(tmp_path: Path) -> None:
    """The control at smoke size: both arms are the same runs under either optimizer, so each
    spread difference is exactly 0 and the Adam decision is the sweeps' FAIL; the one-step
    routes of both optimizers are measured (equal arms, equal slopes)."""
    c = CLAIMS["beyond-adam"]
    out = c.run(ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None,
                             seed=0, settings=c.settings_for("smoke", control=True)))
    assert out.verdict == "FAIL", out.reason
    for opt in ("sgd", "adam"):
        name = f"{opt}_spread_nfd_minus_depth_mup"
        assert out.measured[name] == 0.0
        assert out.measured[f"{name}_ci_low"] == out.measured[f"{name}_ci_high"] == 0.0
        assert (out.measured[f"{opt}_one_step_slope_depth_mup"]
                == out.measured[f"{opt}_one_step_slope_nfd_depth"])
    assert "no correction acts" in out.reason and (tmp_path / "beyond-adam.csv").exists()
    assert "one adam step" in out.reason and "one sgd step at every depth" in out.reason


def _transfer_measure(optimizer: str, *, boot: dict, spread: dict, noise: float,
                      one_step: dict) -> TransferMeasure:
    """A TransferMeasure carrying only what the two-route decision reads."""
    return TransferMeasure(rows=[], recipes=("depth-mup", "nfd-depth"), optima=[], missing=[],
                           mean_log={}, spread=spread, boot=boot, noise=noise, same_runs=False,
                           flat=[], one_step=one_step, optimizer=optimizer)


def test_the_adam_verdict_is_the_two_route_decision_on_the_adam_runs() -> None:
    """Adam's swept difference above 0 and above the noise, its one-step route predicting
    spreads that overlap the swept ones and a positive difference: REFUTED, said of Adam; the
    SGD runs' own decision (here a lone contradicting route, FAIL) is reported, not judged.
    With Adam's one-step route seeing no difference (equal flat slopes) the routes disagree:
    FAIL, not REFUTED."""
    s = read_settings(AdamSettings, CLAIMS["beyond-adam"].settings["medium"])  # L 3-18, 24 seeds
    span = math.log10(6)
    adam = _transfer_measure(
        "adam", boot={"depth-mup": (0.0, 0.04), "nfd-depth": (0.08, 0.16),
                      "difference": (0.05, 0.14)},
        spread={"depth-mup": 0.02, "nfd-depth": 0.12}, noise=0.04,
        one_step={"depth_mup": SlopeCI((), 0.02, 0.0, 0.04),
                  "nfd_depth": SlopeCI((), 0.15, 0.12, 0.18)})
    sgd = _transfer_measure(
        "sgd", boot={"depth-mup": (0.0, 0.2), "nfd-depth": (0.0, 0.2),
                     "difference": (-0.1, 0.1)},
        spread={"depth-mup": 0.05, "nfd-depth": 0.06}, noise=0.3,
        one_step={"depth_mup": SlopeCI((), 0.0, -0.02, 0.02),
                  "nfd_depth": SlopeCI((), 0.16, 0.14, 0.18)})
    m = AdamMeasures({"sgd": sgd, "adam": adam}, [], {},
                     {"sgd": "sgd note", "adam": "adam note"})
    j = judge_adam(m, s)
    assert j.decision[0] == "REFUTED", j.decision[1]
    assert j.decision[1].startswith("Adam: ") and "one adam step: contradicts" in j.decision[1]
    assert f"[{0.12 * span - 0.04 * span:+.3f}, {0.18 * span:+.3f}]" in j.decision[1]
    assert "SGD, the same decision (reported, not judged" in j.note
    assert "FAIL" in j.note and "only one route contradicts" in j.note
    flat = replace(adam, one_step={"depth_mup": SlopeCI((), 0.02, 0.0, 0.04),
                                   "nfd_depth": SlopeCI((), 0.02, 0.0, 0.04)})
    verdict, evidence = judge_adam(replace(m, by_optimizer={"sgd": sgd, "adam": flat}),
                                   s).decision
    assert verdict == "FAIL" and "routes disagree" in evidence


def test_the_medium_adam_numbers_fail_on_a_lone_route_whose_premise_misses_depth_mup() -> None:
    """beyond-adam at medium, 24 seeds (2026-11-26): the Adam sweeps' difference -0.049
    [-0.073, +0.090] is undecided (and depth-muP's 0.087 is below the 0.131 noise floor: two
    Eq. 8 L = 18 optima sit on the grid's top edge), one Adam step predicts Eq. 8 widening
    the spread ([+0.011, +0.062]), and depth-muP's swept spread [0.063, 0.127] is out of reach
    of its predicted [0.000, 0.022]: a lone contradicting route whose premise misses one arm,
    FAIL."""
    s = read_settings(AdamSettings, CLAIMS["beyond-adam"].settings["medium"])
    adam = _transfer_measure(
        "adam", boot={"depth-mup": (0.0625, 0.1272), "nfd-depth": (0.0247, 0.1887),
                      "difference": (-0.0729, 0.0897)},
        spread={"depth-mup": 0.0868, "nfd-depth": 0.0377}, noise=0.1307,
        one_step={"depth_mup": SlopeCI((), 0.0096, -0.0086, 0.0278),
                  "nfd_depth": SlopeCI((), 0.0610, 0.0424, 0.0796)})
    m = AdamMeasures({"sgd": adam, "adam": adam}, [], {}, {"sgd": "", "adam": ""})
    verdict, evidence = judge_adam(m, s).decision
    assert verdict == "FAIL"
    assert "one adam step: contradicts" in evidence and "[+0.011, +0.062]" in evidence
    assert "only one route contradicts" in evidence
    assert "depth_mup: routes disagree in value" in evidence


# ---- beyond-joint-limit -----------------------------------------------------------------------
def test_joint_paths_give_growing_widths() -> None:
    assert joint_widths(1.0, 32, [4, 8, 16]) == [128, 256, 512]
    assert joint_widths(2.0, 2, [8, 12, 16]) == [128, 288, 512]
    assert joint_widths(0.5, 128, [4, 9, 16, 36]) == [256, 384, 512, 768]
    with pytest.raises(ConfigError, match="widths growing"):
        joint_widths(0.5, 1, [1, 2, 3])  # round(sqrt(2)) = round(sqrt(1)) + 0 = 1


def test_joint_limit_without_its_contrast_fails_and_says_how_many_pairs_would_resolve_it(
) -> None:
    """Standard nets whose error to the sequential limit does not fall on two paths, but the
    decoupled contrast's gap at L = 4 (0.0374) within 3x its noise (0.0251, 16 pairs): the
    check is not shown to see convergence, so FAIL, not REFUTED, and the reason names the
    pairs that would resolve it: the gap net of its noise is sqrt(0.0374^2 - 0.0251^2) =
    0.0277, and 3x the noise at k pairs falls below it once k > 8 x 0.0251^2 x 16 / 0.0277^2
    = 104.9 -> 105."""
    from depthscale.claims.beyond.joint_limit import (
        COMMUTATIVE,
        JointMeasures,
        JointPath,
        judge_joint_limit,
    )
    from depthscale.claims.nfd import SizeSeries

    def series(label: str, values: tuple[float, float], noise: tuple[float, float],
               slope: float, ci: tuple[float, float]) -> SizeSeries:
        value_ci = tuple((v - 2.2 * z, v + 2.2 * z) for v, z in zip(values, noise, strict=True))
        return SizeSeries(label, (4, 64), values, noise, slope, ci, 16, value_ci)

    path = JointPath([4, 64], [128, 2048])
    std = {name: {"seq": series(f"standard nets, {name} vs the sequential limit",
                                (0.039, 0.044), (0.026, 0.0071), slope, ci),
                  "def1": series(f"standard nets, {name} vs Def. 1", (0.05, 0.06),
                                 (0.026, 0.0071), 0.1, (0.0, 0.2))}
           for name, slope, ci in (("n=L", 0.06, (-0.06, 0.19)),
                                   ("n=sqrt(L)", 0.11, (0.03, 0.19)))}
    dec = series("decoupled nets, n=L vs Def. 1", (0.0374, 0.0113), (0.0251, 0.0064), -0.46,
                 (-0.90, -0.02))
    # the solver's "full" at L against the sequential limit: a depth error that falls
    seq = series("solver 'full' at L vs the sequential limit", (0.02, 0.002), (0.0003, 0.0004),
                 -0.83, (-0.9, -0.75))

    def first(value: float, noise: float, pairs: int) -> SizeSeries:
        return SizeSeries("decoupled at L = 4", (4,), (value,), (noise,), math.nan,
                          (math.nan, math.nan), pairs)

    learned = SizeSeries("decoupled vs feedback-alignment", (4,), (0.015,), (0.0014,),
                         math.nan, (math.nan, math.nan), 16)
    m = JointMeasures({"n=L": path, "n=sqrt(L)": path}, "n=L", std, dec,
                      first(0.0374, 0.0251, 16), seq, learned, [], {})
    judged = judge_joint_limit(m)
    assert judged.decision is not None
    verdict, reason = judged.decision
    assert verdict == "FAIL" and "contrast: NOT seen" in reason
    assert "about 105 pairs would resolve it" in reason
    assert "path n=L: contradicts (standard nets, n=L vs the sequential limit" in reason
    assert not reason.startswith("contradicts")  # only a REFUTED names the paper's sentence
    # the paths against Def. 1 (nfd-thm1's question) are reported in the note, not judged
    assert judged.note.startswith("reported, not judged (nfd-thm1's question)")
    assert "standard nets, n=L vs Def. 1: slope +0.10" in judged.note
    # a gap no larger than its noise is not resolved from 0: no number of pairs is promised
    flat = replace(m, dec_first=first(0.02, 0.0251, 16))
    decision = judge_joint_limit(flat).decision
    assert decision is not None and "this run cannot say how many pairs" in decision[1]
    # resolved at L = 4 (more pairs there) and within noise at L = 64: the contrast is seen,
    # the claim REFUTED, its reason opens with Sec. 4.2's commutativity sentence and says
    # over how many pairs
    seen = replace(m, dec_first=first(0.0374, 0.01, 128))
    decision = judge_joint_limit(seen).decision
    assert decision is not None and decision[0] == "REFUTED"
    assert decision[1].startswith(f"contradicts {COMMUTATIVE}; path n=L: contradicts")
    assert "convergence is in fact commutative; see Figure 3'" in COMMUTATIVE
    assert "pairs would resolve" not in decision[1] and "over 128 pairs" in decision[1]
    assert "the sequential limit must be reached by the solver's depths: yes" in decision[1]
    # a decoupled backward whose learned part does not show (feedback alignment), or a
    # solver whose "full" does not reach the sequential limit over its depths, leaves FAIL
    fa = replace(seen, learned=replace(learned, values=(0.002,)))
    decision = judge_joint_limit(fa).decision
    assert decision is not None and decision[0] == "FAIL" and "feedback alignment" in decision[1]
    off = replace(seen, sequential=series("solver", (0.04, 0.035), (0.0003, 0.0007), -0.05,
                                          (-0.1, 0.0)))
    decision = judge_joint_limit(off).decision
    assert decision is not None and decision[0] == "FAIL"
    assert "do not reach the sequential limit" in decision[1]
    # within 3x its noise of the sequential limit at the largest depth: reached
    near = replace(off, sequential=series("solver", (0.04, 0.002), (0.0003, 0.001), -0.05,
                                          (-1.5, 0.5)))
    assert judge_joint_limit(near).decision[0] == "REFUTED"  # type: ignore[index]
    # resolved at L = 4 but resolved from Def. 1 at L = 64 too: not reached, no contrast
    far = replace(seen, dec=series("decoupled", (0.0374, 0.03), (0.0251, 0.0064), -0.1,
                                   (-0.90, 0.5)))
    decision = judge_joint_limit(far).decision
    assert decision is not None and decision[0] == "FAIL"


def test_the_joint_limit_contrast_adds_pairs_only_while_its_first_gap_is_unresolved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sequential design at the contrast's smallest size: blocks of ``pairs`` new network
    seeds, doubled while the gap there is within 3x its noise, stopped at ``contrast_pairs``
    or as soon as it is resolved; no other size gets them. Synthetic nets: output = Def. 1 +
    gap + N(0, 1) per pair and step, so the noise at k pairs is 1/sqrt(k) and a gap of 0.4 is
    resolved (0.4 > 3/sqrt(k)) first at k = 64."""
    from depthscale.claims.beyond import joint_limit

    steps, ref = 50, np.linspace(0.1, 0.6, 50)
    seeds_asked: list[tuple[int, int, int]] = []

    def fake_nets(model: str, recipe: str, *, width: int, depth: int, backward: str,
                  pairs: int, seed: int, **_: object) -> np.ndarray:
        seeds_asked.append((depth, seed, pairs))
        rng = np.random.default_rng(seed * 1000 + depth)
        noise = rng.standard_normal((pairs, 1, steps))
        return np.broadcast_to(ref + 0.42 + noise, (pairs, 2, steps)).copy()

    monkeypatch.setattr(joint_limit, "finite_outputs", fake_nets)
    totals: list[int] = []
    s = {**CLAIMS["beyond-joint-limit"].settings["smoke"], "pairs": 8, "contrast_pairs": 128,
         "steps": steps, "dim": 2, "eta_c": 0.1, "T": 1.0, "phi": "tanh"}
    ctx = ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None, seed=3,
                       settings=s, set_total=totals.append)
    typed = read_settings(JointSettings, s)
    run = joint_limit._JointRun(ctx, typed, {"none": ref, "full": ref})
    path = joint_limit.JointPath([4, 16], [64, 256])
    first = joint_limit._contrast_first(run, path, 10)
    assert first.replicates == 64 and first.values[0] > 3 * first.noise[0]
    # blocks 0 .. 7 of 8 new seeds each, all at L = 4: 8 -> 16 -> 32 -> 64 pairs
    assert seeds_asked == [(4, 3 + 8 * b, 8) for b in range(8)]
    assert totals == [11, 13, 17]
    # no gap: the pairs grow to contrast_pairs and stop there, unresolved
    monkeypatch.setattr(joint_limit, "finite_outputs",
                        lambda *a, pairs, seed, **k: np.broadcast_to(
                            ref + np.random.default_rng(seed).standard_normal((pairs, 1, steps)),
                            (pairs, 2, steps)).copy())
    ctx2 = replace(ctx, out_dir=tmp_path / "nogap")
    none = joint_limit._contrast_first(joint_limit._JointRun(ctx2, typed, run.ref), path, 10)
    assert none.replicates == 128 and none.values[0] <= 3 * none.noise[0]


def test_joint_limit_refuses_a_bad_contrast_before_work(tmp_path: Path) -> None:
    c = CLAIMS["beyond-joint-limit"]
    for bad, says in (({"contrast_path": "n=L^3"}, "contrast_path"),
                      ({"contrast_pairs": 2}, "contrast_pairs 2 is below pairs 4")):
        settings = {**c.settings["smoke"], **bad}
        with pytest.raises(ConfigError, match=says):
            c.run(ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None,
                               seed=0, settings=settings))
        assert list(tmp_path.iterdir()) == []


def test_a_killed_joint_limit_resumes_from_its_stored_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim's work is solver and finite-net outputs, not a study: each is kept as it
    finishes (claims.common.stored_array), so a run killed after some of them trains only the
    rest and measures exactly what an unbroken run does; a changed setting reads none."""
    from depthscale.claims.beyond import joint_limit

    c = CLAIMS["beyond-joint-limit"]

    def ctx(out: Path, **over: object) -> ClaimContext:
        return ClaimContext(scale="smoke", out_dir=out, device="cpu", data_dir=None, seed=0,
                            settings={**c.settings["smoke"], **over})

    real = joint_limit.finite_outputs
    calls = {"n": 0, "kill_after": 10**9}

    def counted(*args: object, **kwargs: object) -> object:
        calls["n"] += 1
        if calls["n"] > calls["kill_after"]:
            raise KeyboardInterrupt  # the kill
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(joint_limit, "finite_outputs", counted)
    whole = c.run(ctx(tmp_path / "whole"))
    nets = calls["n"]
    smoke = c.settings["smoke"]
    limits = len(smoke["limit_depths"]) * smoke["limit_seeds"]  # "full" per depth and seed
    refs = 1 + smoke["limit_seeds"]  # Def. 1 once, the sequential limit per particle seed
    assert len(list((tmp_path / "whole" / joint_limit._STORE).iterdir())) == nets + refs + limits
    calls.update(n=0, kill_after=2)
    with pytest.raises(KeyboardInterrupt):
        c.run(ctx(tmp_path / "resumed"))
    stored = tmp_path / "resumed" / joint_limit._STORE
    kept = sorted(p.name for p in stored.iterdir())
    assert len(kept) == 4 and all(n.endswith(".npy") for n in kept)  # 2 references + 2 nets
    calls.update(n=0, kill_after=10**9)
    resumed = c.run(ctx(tmp_path / "resumed"))
    assert calls["n"] == nets - 2  # the two finished nets are read, not retrained
    assert resumed.verdict == whole.verdict and resumed.measured == whole.measured
    monkeypatch.setattr(joint_limit, "nfd_outputs", None)  # a reference computed fails
    with pytest.raises(TypeError):  # a changed setting reads none of the stored ones
        c.run(ctx(tmp_path / "resumed", eta_c=0.1))


def test_a_rerun_transformer_claim_reads_its_finished_collapse_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The collapse runs' readout rows are kept as each run finishes (stored_rows), so a
    rerun (after a kill) trains none of them again and measures the same; another seed's
    runs are its own."""
    from depthscale.claims.beyond import transformer

    c = CLAIMS["beyond-transformer"]
    bar = {"total": 0, "count": 0}

    def ctx(seed: int = 0) -> ClaimContext:
        return ClaimContext(scale="smoke", out_dir=tmp_path, device="cpu", data_dir=None,
                            seed=seed, settings=c.settings["smoke"],
                            progress=lambda k: bar.update(count=bar["count"] + k),
                            set_total=lambda n: bar.update(total=n))

    first = c.run(ctx())
    kept = list((tmp_path / "beyond-transformer-collapse").iterdir())
    s = c.settings["smoke"]
    assert len(kept) == 2 * len(s["collapse_blocks"]) * s["collapse_seeds"]  # 2 arms
    # one progress bar over both parts: the transfer study's runs, then the collapse runs
    assert bar["count"] == bar["total"] > len(kept)

    def no_training(*args: object, **kwargs: object) -> None:
        raise AssertionError("a finished collapse run was trained again")

    monkeypatch.setattr(transformer, "train", no_training)
    again = c.run(ctx())
    assert again.verdict == first.verdict and again.measured == first.measured
    with pytest.raises(AssertionError, match="trained again"):
        c.run(ctx(seed=1))


def test_the_four_open_questions_are_claims_and_nothing_is_planned() -> None:
    for cid in ("beyond-adam", "beyond-3layer", "beyond-joint-limit", "beyond-transformer"):
        assert cid in CLAIMS and cid not in PLANNED
        assert CLAIMS[cid].control is not None
    assert PLANNED == {}


# ---- beyond-transformer -----------------------------------------------------------------------
TOK = torch.randint(0, 8, (6, 8), generator=G)
TOK_NEXT = torch.randint(0, 8, (6, 8), generator=G)


def _gpt(recipe: str, blocks: int, *, seed: int = 0, bias: bool = False) -> tuple[GPT, Plan]:
    model, plan = build("gpt", recipe, input_shape=(8,), n_out=8, width=16, depth=blocks,
                        seed=seed, heads=2, bias=bias)
    assert isinstance(model, GPT)
    return model, plan


def _first_step(recipe: str, blocks: int, bias: bool) -> dict[str, list[float]]:
    """Own updates after one SGD step at eta_c = 1e-6 in float64: the step is small enough
    that the change of a layer's input (second order in the LR: the layers below moved) is
    about 1e-8 of its own update."""
    model, plan = _gpt(recipe, blocks, seed=3, bias=bias)
    model.double()
    init = snapshot(model)
    opt = plan.optimizer(model, "sgd", 1e-6)
    F.cross_entropy(model(TOK).flatten(0, 1), TOK_NEXT.flatten()).backward()
    opt.step()
    return transformer_updates(model, init, TOK)


@pytest.mark.parametrize("blocks", [1, 3])
def test_eq8_scales_the_first_step_of_qkv_and_fc1_by_sqrt_L_and_leaves_the_streams(
    blocks: int
) -> None:
    """Same draws, same first gradient: only the LR of qkv and fc1 differs, by sqrt(L)."""
    vanilla, eq8 = (_first_step(r, blocks, bias=False) for r in ("depth-mup", "nfd-depth"))
    root = math.sqrt(2 * blocks)
    for key in ("qkv", "q", "k", "v", "fc1"):
        assert eq8[key] == pytest.approx([root * u for u in vanilla[key]], rel=1e-6), key
    for key in ("attn_stream", "mlp_stream"):
        assert eq8[key] == pytest.approx(vanilla[key], rel=1e-6), key


def test_with_biases_eq8_corrects_only_the_weights_of_qkv_and_fc1() -> None:
    """nfd-depth's sqrt(L) is on the weights (Eq. 8); a first layer's bias keeps the vector
    LR, so the own update of a layer with a bias grows by less than sqrt(L)."""
    vanilla, eq8 = (_first_step(r, 3, bias=True) for r in ("depth-mup", "nfd-depth"))
    for key in ("qkv", "fc1"):
        for a, b in zip(vanilla[key], eq8[key], strict=True):
            assert 1.05 < b / a < math.sqrt(6) - 0.05, (key, b / a)


def test_transformer_study_is_the_transfer_study_on_the_bias_free_gpt() -> None:
    s = CLAIMS["beyond-transformer"].settings["quick"]
    study = study_from_tables(transformer_tables(read_settings(TransformerSettings, s)))
    assert (study.name, study.model, study.dataset) == ("beyond-transformer", "gpt", "markov")
    assert dict(study.model_options) == {"heads": 4, "mlp_ratio": 4, "bias": False}
    assert dict(study.data_options) == {**s["data"], "seed": 0}
    assert study.train.batch_size == s["batch"] and study.train.optimizer == "sgd"
    grid = dict(study.grid)
    assert grid["recipe"] == ("depth-mup", "nfd-depth")
    assert grid["depth"] == tuple(s["transfer_blocks"]) and grid["lr"] == tuple(s["eta_cs"])
    resnet = study_from_tables(transfer_tables({**s, "depths": s["transfer_blocks"]}))
    # the resnet study's analysis, on the seed-mean loss the claim judges
    assert study.analysis == replace(resnet.analysis, aggregate="loss")
    assert study.train.epochs == resnet.train.epochs
    example = load_study(Path(__file__).resolve().parents[2] / "examples"
                         / "beyond_transformer.toml")
    assert expand(study) == expand(example)
    assert (study.name, study.analysis) == (example.name, example.analysis)


def test_transformer_claim_refuses_bad_data_options_before_work(tmp_path: Path) -> None:
    c = CLAIMS["beyond-transformer"]
    smoke = c.settings["smoke"]
    with pytest.raises(ConfigError, match="vocab"):
        c.run(ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None, seed=0,
                           settings={**smoke, "data": {**smoke["data"], "vocab": 1}}))
    assert list(tmp_path.iterdir()) == []


def test_transformer_control_makes_the_arms_identical(tmp_path: Path) -> None:
    c = CLAIMS["beyond-transformer"]
    out = c.run(ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None,
                             seed=0, settings=c.settings_for("smoke", control=True)))
    assert out.verdict == "FAIL", out.reason
    m = out.measured
    assert m["spread_nfd_minus_depth_mup"] == 0.0
    assert m["spread_nfd_minus_depth_mup_ci_low"] == m["spread_nfd_minus_depth_mup_ci_high"] == 0.0
    for key in ("qkv", "fc1", "attn_stream", "mlp_stream"):
        assert m[f"{key}_slope_nfd_depth"] == m[f"{key}_slope_depth_mup"], key
        # each slope is read per seed (2 at smoke) with a t-interval, not as a seed-mean point
        low, high = m[f"{key}_slope_depth_mup_ci_low"], m[f"{key}_slope_depth_mup_ci_high"]
        assert low is not None and high is not None and low < m[f"{key}_slope_depth_mup"] < high
    assert "qkv_slope_depth_mup: " in out.reason and "(2 seeds)" in out.reason
    assert "spread_nfd_minus_depth_mup: contradicts" in out.reason
    rows = (tmp_path / "beyond-transformer.csv").read_text().splitlines()
    assert rows[0].startswith("part,") and len(rows) > 1


def _tied_spreads(eq8_recipe: str) -> tuple[Any, TransformerSettings]:
    """Measures whose two arms' optima fall on the same grid points in every resample."""
    from depthscale.claims.beyond.spreads import SpreadEstimate
    from depthscale.claims.beyond.transformer import TransformerMeasures

    arms = (("depth_mup", "depth-mup"), ("nfd_depth", eq8_recipe))
    spread = SpreadEstimate(arms, {"depth_mup": 0.301, "nfd_depth": 0.301},
                            {"depth_mup": (0.301, 0.301), "nfd_depth": (0.301, 0.301)},
                            0.0, (0.0, 0.0))
    m = TransformerMeasures(arms, cast(Any, None), spread, [], "markov", {}, [], {})
    return m, read_settings(TransformerSettings, CLAIMS["beyond-transformer"].settings["quick"])


def test_a_grid_tie_between_different_arms_is_undecided_and_names_the_grid_step() -> None:
    """Different recipes whose optima tie on the eta_c grid: the difference is below the
    grid's step (0.301 decades at quick), not shown absent; identical arms (the control)
    still contradict."""
    from depthscale.claims.beyond.transformer import _spread_finding

    finding, said = _spread_finding(*_tied_spreads("nfd-depth"))
    assert finding == "undecided"
    assert "grid's step (0.301 decades)" in said
    finding, _ = _spread_finding(*_tied_spreads("depth-mup"))
    assert finding == "contradicts"

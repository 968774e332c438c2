"""Claims in parts (issue 42 item 3): nfd-collapse's Eq. 7 and Eq. 8's first-layer lift judged
at the paper's fixed step with the stream under Eq. 8 a reported finding, nfd-transfer's
Eq. 8 arm on the paper's grid with our reading reported, and every REFUTED opening with the
sentence it contradicts; on synthetic numbers."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pytest

from depthscale.claims.beyond.three_layer import BANDS as THREE_BANDS
from depthscale.claims.beyond.three_layer import SENTENCES
from depthscale.claims.nfd.collapse import EQ7, EQ8_LIFT, PARTS, collapse_parts
from depthscale.claims.nfd.optima import (
    FIG5_ROW2,
    PAPER_GRID,
    TransferMeasure,
    deciding_ratio,
    grid_step,
    paper_transfer_decision,
)
from depthscale.claims.nfd.parts import Part, parts_decision, parts_measured
from depthscale.claims.nfd.slopes import (
    SlopeCI,
    SlopeReadouts,
    lift_contrast,
    slope_ci,
    slope_findings_at_fixed_step,
    slopes_decision,
    two_route_decision,
)
from depthscale.claims.nfd.transfer import TransferSettings, judge_transfer
from depthscale.errors import ConfigError


def _readouts(fixed: Mapping[str, tuple[float, ...]],
              matched: Mapping[str, tuple[float, ...]] | None = None) -> SlopeReadouts:
    """Readouts of a 300-step run whose per-seed slopes at step 300 are ``fixed`` and at both
    matched-loss targets ``matched`` (default the same)."""
    matched = matched or fixed
    return SlopeReadouts(
        [100, 200, 300], {n: {300: slope_ci(list(v))} for n, v in fixed.items()},
        {n: {100: slope_ci(list(v)), 300: slope_ci(list(v))} for n, v in matched.items()}, {})


#: the quick/medium picture: Eq. 7 holds, Eq. 8 lifts the first layer, its stream falls
GOOD = {"internal_slope_depth_mup": (-0.44, -0.43, -0.45),
        "stream_slope_depth_mup": (-0.05, -0.04, -0.06),
        "internal_slope_nfd_depth": (-0.08, -0.07, -0.09),
        "stream_slope_nfd_depth": (-0.24, -0.23, -0.25)}
TAGS = ("depth_mup", "nfd_depth")


def test_the_fixed_step_readout_judges_step_300_and_reports_matched_loss() -> None:
    r = _readouts({"s": (0.0, 0.01, -0.01)}, matched={"s": (-0.30, -0.31, -0.29)})
    (finding, text), = slope_findings_at_fixed_step(r, {"s": (-0.15, 0.15)}).values()
    assert finding == "supports"  # the matched-loss slope, out of band, is only reported
    assert text.startswith("at fixed step 300: 0 [") and "at matched loss (reported" in text
    assert slopes_decision({"library": r}, {"s": (-0.15, 0.15)}, "s", "a", "b",
                           "matched")[0] == "FAIL"
    with pytest.raises(ConfigError, match="readout must be one of"):
        slopes_decision({"library": r}, {"s": (-0.15, 0.15)}, "s", "a", "b", "final")


def test_the_stream_under_eq8_is_a_finding_that_cannot_refute_the_claim() -> None:
    """Both routes see Eq. 8's stream fall (in value together, the lift seen): the part that
    is our reading contradicts, reported as a finding; the claim PASSes on the stated
    parts."""
    lib = _readouts(GOOD)
    parts = collapse_parts({"library": lib, "handwritten": lib}, TAGS)
    assert parts["eq8_stream"].decision[0] == "REFUTED" and not parts["eq8_stream"].stated
    assert [parts[k].decision[0] for k in ("eq7", "eq8_lift")] == ["PASS", "PASS"]
    verdict, evidence = parts_decision(parts)
    assert verdict == "PASS", evidence
    assert "eq8_stream (our reading, reported, not judged): contradicts" in evidence
    # a supported part names its numbers too, every route's
    assert ("eq7 (paper): PASS [library internal_slope_depth_mup: at fixed step 300: -0.44 ["
            in evidence and "handwritten stream_slope_depth_mup: at fixed step 300" in evidence)
    assert parts_measured(parts) == {"verdict_eq7": 1.0, "verdict_eq8_lift": 1.0,
                                     "finding_eq8_stream": -1.0}
    # one route alone: the stream's contradiction is a FAIL of that part, the claim PASSes
    assert parts_decision(collapse_parts({"library": lib}, TAGS))[0] == "PASS"


def test_a_stated_part_refuted_opens_the_reason_with_its_equation() -> None:
    """Eq. 8's first layer as collapsed as depth-muP's in both routes: eq8_lift is contradicted
    by both, but the lift contrast is then not seen, so it is a FAIL; with depth-muP's first
    layer flat in both routes while Eq. 8 lifts it further (the contrast seen), Eq. 7 is
    REFUTED and the claim's reason opens with Eq. 7's words."""
    blind = _readouts({**GOOD, "internal_slope_nfd_depth": (-0.44, -0.43, -0.45)})
    parts = collapse_parts({"library": blind, "handwritten": blind}, TAGS)
    assert parts["eq8_lift"].decision[0] == "FAIL" and "may be blind" in parts[
        "eq8_lift"].decision[1]
    flat = _readouts({**GOOD, "internal_slope_depth_mup": (-0.20, -0.19, -0.21),
                      "internal_slope_nfd_depth": (0.05, 0.04, 0.06)})
    parts = collapse_parts({"library": flat, "handwritten": flat}, TAGS)
    assert parts["eq7"].decision[0] == "REFUTED"
    assert parts["eq7"].decision[1].startswith(f"contradicts {EQ7}; ")
    verdict, evidence = parts_decision(parts)
    assert verdict == "REFUTED" and evidence.startswith(f"contradicts {EQ7}; parts: ")
    assert parts_measured(parts)["verdict_eq7"] == -2.0
    assert PARTS["eq8_lift"][2] == EQ8_LIFT


def test_a_stated_fail_outranks_a_refuted_part_and_an_undecided_one_is_inconclusive() -> None:
    said = "Eq. 0: 'x'"
    refuted = Part(("REFUTED", "both routes"), True, said)
    assert parts_decision({"a": refuted, "b": Part(("FAIL", "routes disagree"), True, said)}
                          )[0] == "FAIL"
    assert parts_decision({"a": Part(("PASS", ""), True, said),
                           "b": Part(("INCONCLUSIVE", ""), True, said),
                           "c": Part(("FAIL", ""), False, said)})[0] == "INCONCLUSIVE"
    assert parts_decision({"a": refuted})[1].startswith("contradicts Eq. 0: 'x'; parts: a ")
    with pytest.raises(ValueError, match="at least one part the paper states"):
        parts_decision({"c": Part(("PASS", ""), False, said)})


def test_beyond_3layer_names_a_sentence_for_every_slope_and_its_refuted_opens_with_it() -> None:
    assert set(SENTENCES) == set(THREE_BANDS)
    names = {"stream_slope_fix": (-0.46, -0.45, -0.47), "layer2_slope_fix": (0.0, 0.01, -0.01),
             "layer2_slope_depth_mup": (-0.5, -0.49, -0.51)}
    r = _readouts(names)
    bands = {"stream_slope_fix": (-0.15, 0.15)}
    contrast = lift_contrast({"library": r, "handwritten": r}, "layer2", "depth_mup", "fix")
    verdict, evidence = two_route_decision({"library": r, "handwritten": r}, bands, contrast,
                                           sentences=SENTENCES)
    assert verdict == "REFUTED"
    assert evidence.startswith(f"contradicts {SENTENCES['stream_slope_fix']}; ")
    assert "residual-stream dynamics" in SENTENCES["stream_slope_fix"]


# ---- nfd-transfer: the Eq. 8 arm on the paper's grid ------------------------------------------
def _measure(boot: dict[str, tuple[float, float]], spread: dict[str, float],
             one_step: dict[str, SlopeCI], *, noise: float = 0.04,
             same: bool = False) -> TransferMeasure:
    return TransferMeasure(rows=[], recipes=("depth-mup", "nfd-depth"), optima=[], missing=[],
                           mean_log={}, spread=spread, boot=boot, noise=noise, same_runs=same,
                           flat=[], one_step=one_step)


S = {"depths": [3, 6, 9, 18], "seeds": 24}
#: the medium run at 24 seeds: both arms' spreads below the paper's grid step
MEDIUM = _measure({"depth-mup": (0.0087, 0.0562), "nfd-depth": (0.1197, 0.1909),
                   "difference": (0.0783, 0.1709)}, {"depth-mup": 0.0197, "nfd-depth": 0.1559},
                  {"depth_mup": slope_ci([0.01, 0.035, 0.06]),
                   "nfd_depth": slope_ci([0.15, 0.164, 0.178])})


def test_the_paper_grid_step_is_a_factor_two_and_the_deciding_ratio_reaches_it() -> None:
    assert grid_step(PAPER_GRID) == pytest.approx(math.log10(2))
    s = slope_ci([0.15, 0.16, 0.17])
    assert deciding_ratio(s, math.log10(2)) == pytest.approx(10 ** (math.log10(2) / 0.16))
    assert math.isinf(deciding_ratio(slope_ci([-0.05, 0.0, 0.05]), 0.3))


def test_a_drift_below_the_paper_grid_cannot_decide_and_names_the_depths_that_would() -> None:
    verdict, evidence = paper_transfer_decision(S, MEDIUM)
    ratio = 10 ** (math.log10(2) / MEDIUM.one_step["nfd_depth"].mean)
    assert verdict == "INCONCLUSIVE", evidence
    assert f"L_min >= {ratio:.0f} (depths 3..{math.ceil(3 * ratio)})" in evidence
    assert "LR sweeps: supports" in evidence and "one sgd step: supports" in evidence


def test_a_drift_beyond_the_grid_in_both_routes_refutes_with_the_figures_words() -> None:
    far = _measure({"depth-mup": (0.01, 0.05), "nfd-depth": (0.40, 0.55),
                    "difference": (0.35, 0.50)}, {"depth-mup": 0.03, "nfd-depth": 0.47},
                   {"depth_mup": slope_ci([0.0, 0.01, 0.02]),
                    "nfd_depth": slope_ci([0.58, 0.60, 0.62])})  # predicts 0.60 log10 6 = 0.47
    verdict, evidence = paper_transfer_decision(S, far)
    assert verdict == "REFUTED", evidence
    assert evidence.startswith(f"contradicts {FIG5_ROW2}; ")
    # the sweeps alone beyond the grid: one route, a FAIL
    lone = _measure(far.boot, far.spread, MEDIUM.one_step)
    assert paper_transfer_decision(S, lone)[0] == "FAIL"


def test_the_paper_contrast_on_its_grid_passes_and_the_control_fails() -> None:
    shown = _measure({"depth-mup": (0.35, 0.60), "nfd-depth": (0.02, 0.10),
                      "difference": (-0.50, -0.30)}, {"depth-mup": 0.45, "nfd-depth": 0.05},
                     {"depth_mup": slope_ci([-0.5, -0.45, -0.55]),
                      "nfd_depth": slope_ci([0.0, 0.02, -0.02])})
    assert paper_transfer_decision(S, shown)[0] == "PASS"
    same = _measure(MEDIUM.boot, MEDIUM.spread, MEDIUM.one_step, same=True)
    verdict, evidence = paper_transfer_decision(S, same)
    assert verdict == "FAIL" and "no correction acts" in evidence


def test_the_transfer_claim_judges_the_paper_part_and_reports_ours() -> None:
    """At the medium numbers our reading (Eq. 8 widens the spread, both routes) contradicts,
    reported as a finding; the claim is the paper's part, INCONCLUSIVE, with the depth ratio
    that would decide it and the paper's grid step measured."""
    s = TransferSettings(dataset="mnist1d", width=128, depths=[3, 6, 9, 18],
                         eta_cs=[0.1, 1.0], epochs=3, seeds=24)
    j = judge_transfer(MEDIUM, s)
    assert j.decision is not None and j.decision[0] == "INCONCLUSIVE", j.decision
    assert "narrower (our reading, reported, not judged): contradicts" in j.decision[1]
    assert j.measured["verdict_eq8_transfer"] == 0.0 and j.measured["finding_narrower"] == -1.0
    assert j.measured["paper_grid_step"] == pytest.approx(math.log10(2))
    assert j.measured["deciding_depth_ratio"] == pytest.approx(
        10 ** (math.log10(2) / MEDIUM.one_step["nfd_depth"].mean))
    flat = _measure(MEDIUM.boot, MEDIUM.spread, {**MEDIUM.one_step,
                                                 "nfd_depth": slope_ci([-0.1, 0.0, 0.1])})
    assert "deciding_depth_ratio" not in judge_transfer(flat, s).measured

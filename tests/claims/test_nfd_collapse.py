"""nfd-collapse's readout rule (shared with beyond-3layer): the recorded steps, the matched-loss
step on hand-made loss curves, per-seed slopes and their t-interval by hand, and the findings
at two loss targets."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from scipy import stats

from depthscale.claims import CLAIMS, ClaimContext
from depthscale.claims.common import claim_dataset
from depthscale.claims.nfd.collapse import CollapseSettings, judge_collapse, measure_collapse
from depthscale.claims.nfd.slopes import (
    RouteRuns,
    SlopeCI,
    SlopeReadouts,
    handwritten_layers,
    lift_contrast,
    matched_steps,
    output_step,
    readout_steps,
    record_steps,
    sequential_routes,
    slope_ci,
    slope_findings_at_matched_loss,
    slope_readouts,
    slope_readouts_measured,
    two_route_decision,
)
from depthscale.claims.registry import read_settings
from depthscale.errors import ConfigError
from depthscale.stats.fits import loglog_slope


def _measure(ctx: ClaimContext) -> Any:
    """nfd-collapse's measurement at the context's settings."""
    return measure_collapse(ctx, read_settings(CollapseSettings, ctx.settings))


def _judge(s: dict[str, Any], m: Any) -> Any:
    """nfd-collapse's judgement of ``m`` at settings ``s``."""
    return judge_collapse(m, read_settings(CollapseSettings, s))


#: the 97.5% quantile of Student's t with 2 degrees of freedom
T2 = 4.302652729749464


def test_updates_are_recorded_every_thirtieth_of_the_run_and_at_the_fixed_readouts() -> None:
    assert readout_steps(300) == [100, 200, 300]
    assert record_steps(300) == list(range(10, 301, 10))
    assert record_steps(100) == sorted({*range(3, 101, 3), 33, 66, 100})
    assert record_steps(3) == [1, 2, 3]


def _rows(curves: dict[int, list[float]], steps: list[int], *, seed: int = 0,
          tag: str = "a", update: Any = None) -> list[dict[str, Any]]:
    """Recorded rows of arm ``tag``: per depth its running loss at ``steps``, and updates
    ``update(L, step)`` (default 1)."""
    return [{"arm": tag, "depth": L, "seed": seed, "step": k, "running_loss_last10": loss,
             "internal_update": 1.0 if update is None else update(L, k)}
            for L, losses in curves.items() for k, loss in zip(steps, losses, strict=True)]


def test_matched_step_is_the_first_recorded_step_at_or_below_the_slowest_depths_loss() -> None:
    steps = [10, 20, 30, 40, 50]
    rows = _rows({2: [2.0, 1.8, 1.6, 1.5, 1.4], 4: [1.9, 1.35, 1.5, 1.2, 1.1]}, steps)
    # the target: the larger loss at step 50 (depth 2's 1.4); depth 4 first reaches it at 20
    # (1.35), although its loss rises again at 30
    assert matched_steps(rows, "a", 0, [2, 4], 50) == (1.4, {2: 50, 4: 20})
    assert matched_steps(rows, "a", 0, [2, 4], 30) == (1.6, {2: 30, 4: 20})
    # a depth with no row at the target's step (it diverged) leaves no target
    cut = [r for r in rows if (r["depth"], r["step"]) != (4, 50)]
    target, at = matched_steps(cut, "a", 0, [2, 4], 50)
    assert math.isnan(target) and at == {2: None, 4: None}


def test_per_seed_slopes_at_matched_loss_and_their_t_interval_by_hand() -> None:
    steps = record_steps(30)  # 1 ... 30
    exponents = {0: -0.4, 1: -0.5, 2: -0.6}
    rows = []
    for seed, b in exponents.items():
        # depth 8 trains faster: it reaches the target at step 10, depth 2 at step 30;
        # the update grows with the step, so only the matched steps give L^b
        curves = {2: [3.0 - k / 16 for k in steps], 8: [3.0 - 3 * k / 16 for k in steps]}

        def update(L: int, k: int, b: float = b, seed: int = seed) -> float:
            return (1 + seed) * L ** b * k / (30 if L == 2 else 10)

        rows += _rows(curves, steps, seed=seed, update=update)
    r = slope_readouts(rows, ["a"], ["internal"], [2, 8], [0, 1, 2], 30)
    assert r.readouts == [10, 20, 30]
    for seed, target, at in r.targets["a"][30]:
        assert target == 1.125 and at == {2: 30, 8: 10}, seed
    ci = r.matched["internal_slope_a"][30]
    assert ci.per_seed == pytest.approx([-0.4, -0.5, -0.6], abs=1e-12)
    half = T2 * 0.1 / math.sqrt(3)
    assert (ci.mean, ci.low, ci.high) == pytest.approx((-0.5, -0.5 - half, -0.5 + half))
    # at a fixed step depth 8 is read three times as far into its (faster) run
    fixed = r.fixed["internal_slope_a"][30]
    assert fixed.mean == pytest.approx(-0.5 + math.log(3) / math.log(4))
    m = slope_readouts_measured(r, [2, 8])
    assert m["internal_slope_a"] == pytest.approx(-0.5)
    assert m["internal_slope_a_ci_low"] == pytest.approx(-0.5 - half)
    assert m["internal_slope_a_step30"] == pytest.approx(fixed.mean)
    assert m["loss_target_a_step30"] == 1.125
    assert (m["matched_step_a_L2"], m["matched_step_a_L8"]) == (30.0, 10.0)


def test_one_seed_gives_no_interval() -> None:
    one = slope_ci([-0.5])
    assert one.mean == -0.5 and math.isnan(one.low) and math.isnan(one.high)
    assert math.isnan(slope_ci([-0.5, math.nan]).low)


def _readouts(first: tuple[float, float], last: tuple[float, float]) -> SlopeReadouts:
    def ci(lo: float, hi: float) -> SlopeCI:
        return SlopeCI((lo, hi), (lo + hi) / 2, lo, hi)
    fixed = {10: ci(0.0, 0.1), 30: ci(0.0, 0.1)}
    return SlopeReadouts([10, 20, 30], {"s": fixed}, {"s": {10: ci(*first), 30: ci(*last)}},
                         {"a": {}})


@pytest.mark.parametrize(("first", "last", "want", "moves"), [
    ((-0.1, 0.1), (-0.12, 0.05), "supports", False),
    ((0.3, 0.5), (0.2, 0.4), "contradicts", False),
    ((-0.1, 0.2), (-0.2, 0.1), "undecided", False),  # straddles an edge at both targets
    ((-0.1, 0.2), (-0.1, 0.1), "undecided", True),  # supports at the last target only
    ((0.2, 0.3), (-0.1, 0.1), "undecided", True),  # contradicts at the early target
])
def test_a_slope_is_decided_only_where_both_loss_targets_agree(
    first: tuple[float, float], last: tuple[float, float], want: str, moves: bool
) -> None:
    (finding, text), = slope_findings_at_matched_loss(_readouts(first, last),
                                                      {"s": (-0.15, 0.15)}).values()
    assert finding == want
    assert ("moves with the loss level" in text) == moves


def test_measure_records_every_seed_and_step_and_the_judge_reads_the_fixed_step(
    tmp_path: Path
) -> None:
    s = {**CLAIMS["nfd-collapse"].settings["smoke"], "width": 8, "depths": [2, 4],
         "steps": 6, "seeds": 2}
    ctx = ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None, seed=5,
                       settings=s)
    m = _measure(ctx)
    assert m.seeds == [5, 6] and len(m.rows) == 2 * 2 * 2 * 6
    assert {r["status"] for r in m.rows} == {"ok"}
    j = _judge(s, m)
    for name in ("internal_slope_depth_mup", "stream_slope_nfd_depth"):
        ci = m.slopes.fixed[name][6]
        assert j.measured[name] == pytest.approx(ci.mean)
        assert (j.measured[f"{name}_ci_low"], j.measured[f"{name}_ci_high"]) == pytest.approx(
            (ci.low, ci.high))
        assert ci.low < ci.mean < ci.high
    assert j.bands["internal_slope_depth_mup"] == (-0.65, -0.35)
    assert j.decision is not None
    said = m.slopes.fixed["internal_slope_nfd_depth"][6].text
    assert f"at fixed step 6: {said}" in j.decision[1]
    # the stream under Eq. 8 is our reading: its band is reported in the part, not judged
    assert "stream_slope_nfd_depth" not in j.bands
    assert "eq8_stream (our reading, reported, not judged)" in j.decision[1]
    # the one-step output diagnostic: per seed the log-log slope of output_step over depths
    data = claim_dataset(ctx)
    probe = data.x_train[: s["probe_batch"]]
    steps = [output_step(ctx, data, probe, "nfd-depth", L, 6) for L in (2, 4)]
    assert min(steps) > 0
    out = m.output_slopes["nfd_depth"]
    assert out.per_seed[1] == pytest.approx(loglog_slope([2, 4], steps).slope, rel=1e-9)
    assert j.measured["output_step_slope_nfd_depth"] == pytest.approx(out.mean)
    assert "output's change in one SGD step" in j.note


def test_one_adam_step_moves_the_output_linearly_in_eta_c(tmp_path: Path) -> None:
    """Adam's first step is eta_c times a sign pattern (m / sqrt(v) = g / |g|), so the
    output's change is linear in eta_c to first order (small eta_c: within 1%), and it is not
    the SGD step's change (beyond-adam's one-step route must take the optimizer's own step)."""
    s = {**CLAIMS["nfd-collapse"].settings["smoke"], "width": 16}
    ctx = ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None, seed=0,
                       settings=s)
    data = claim_dataset(ctx)
    probe = data.x_train[:32]
    small, double = (output_step(ctx, data, probe, "nfd-depth", 4, 0, eta, "adam")
                     for eta in (0.001, 0.002))
    assert double / small == pytest.approx(2.0, rel=0.01)
    sgd = output_step(ctx, data, probe, "nfd-depth", 4, 0, 0.001, "sgd")
    assert abs(sgd / small - 1) > 0.5


# ---- the two routes (medium, full) ------------------------------------------------------------
def _route(slopes: dict[str, tuple[float, ...]], moving: tuple[str, ...] = ()) -> SlopeReadouts:
    """A route's readouts whose per-seed slopes at both loss targets are ``slopes`` (at the
    early target the names in ``moving`` sit at 0, flat)."""
    def at(name: str, early: bool) -> SlopeCI:
        per_seed = (0.0, 0.01, -0.01) if early and name in moving else slopes[name]
        return slope_ci(list(per_seed))
    return SlopeReadouts([10, 20, 30], {n: {} for n in slopes},
                         {n: {10: at(n, True), 30: at(n, False)} for n in slopes}, {})


BANDS = {"internal_slope_a": (-0.65, -0.35), "stream_slope_b": (-0.15, 0.15)}
LIB = {"internal_slope_a": (-0.50, -0.48, -0.52), "internal_slope_b": (0.0, 0.02, -0.02),
       "stream_slope_b": (-0.32, -0.30, -0.34)}


def test_two_routes_refute_a_slope_only_when_they_agree_in_value_and_see_the_rule() -> None:
    lib = _route(LIB)
    contrast = lift_contrast({"library": lib, "handwritten": lib}, "internal", "a", "b")
    # the lift b - a: per seed +0.50 each, a zero-width interval above 0
    assert contrast[0] and "library +0.500 [+0.500, +0.500]" in contrast[1]
    same = two_route_decision({"library": lib, "handwritten": lib}, BANDS, contrast)
    assert same[0] == "REFUTED", same
    assert "stream_slope_b: refuted" in same[1] and "routes agree in value" in same[1]
    # the second route falls 2/3 as fast: both contradict, the intervals do not overlap
    half = _route({**LIB, "stream_slope_b": (-0.22, -0.21, -0.23)})
    off = two_route_decision({"library": lib, "handwritten": half}, BANDS, contrast)
    assert off[0] == "FAIL" and "routes disagree in value" in off[1]
    # the second route flat where the library's falls: a conflict in finding
    flat = _route({**LIB, "stream_slope_b": (0.0, 0.01, -0.01)})
    conflict = two_route_decision({"library": lib, "handwritten": flat}, BANDS, contrast)
    assert conflict[0] == "FAIL" and "routes disagree in finding" in conflict[1]
    # a contrast not seen (the rule under test has no effect): the check may be blind
    blind = two_route_decision({"library": lib, "handwritten": lib}, BANDS, (False, "none"))
    assert blind[0] == "FAIL" and "may be blind" in blind[1]
    # one route undecided (its finding moves with the loss level): a lone contradiction
    moving = _route(LIB, moving=("stream_slope_b",))
    lone = two_route_decision({"library": lib, "handwritten": moving}, BANDS, contrast)
    assert lone[0] == "FAIL" and "only one route contradicts" in lone[1]
    # both routes support every band
    good = _route({**LIB, "stream_slope_b": (0.0, 0.01, -0.01)})
    assert two_route_decision({"library": good, "handwritten": good}, BANDS,
                              contrast) == ("PASS", "")


def test_the_lift_contrast_is_a_paired_t_interval_per_route() -> None:
    lib = _route(LIB)
    # the second route's arm b lifted by +0.1, +0.2, +0.6 over a: mean 0.3, t(2) interval
    hand = _route({**LIB, "internal_slope_b": (-0.4, -0.28, 0.08)})
    seen, text = lift_contrast({"library": lib, "handwritten": hand}, "internal", "a", "b")
    half = T2 * statistics.stdev([0.1, 0.2, 0.6]) / math.sqrt(3)
    assert f"handwritten +0.300 [{0.3 - half:+.3f}, {0.3 + half:+.3f}]" in text
    assert seen == (0.3 - half > 0)
    # no lift in one route: not seen
    none = _route({**LIB, "internal_slope_b": LIB["internal_slope_a"]})
    assert not lift_contrast({"library": lib, "handwritten": none}, "internal", "a", "b")[0]


def test_the_handwritten_route_knows_depth_mup_and_eq8_only() -> None:
    assert handwritten_layers("depth-mup") == ()
    assert handwritten_layers("nfd-depth") == (1,)
    assert handwritten_layers("nfd-depth", 2) == (1, 2)
    with pytest.raises(ConfigError, match="second_route = false"):
        handwritten_layers("mup")


def test_the_second_route_reads_handwritten_nets_by_the_same_rule(tmp_path: Path) -> None:
    s = {**CLAIMS["nfd-collapse"].settings["smoke"], "width": 8, "depths": [2, 4],
         "steps": 6, "seeds": 2, "second_route": True}
    ctx = ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None, seed=5,
                       settings=s)
    m = _measure(ctx)
    assert m.hand is not None and m.hand_rows is not None
    assert len(m.hand_rows) == len(m.rows) == 2 * 2 * 2 * 6
    assert {(r["arm"], r["depth"], r["seed"]) for r in m.hand_rows} == {
        (r["arm"], r["depth"], r["seed"]) for r in m.rows}
    j = _judge(s, m)
    # six steps decide nothing: both routes undecided, each named with its interval
    assert j.decision is not None and j.decision[0] == "INCONCLUSIVE"
    assert "library: undecided" in j.decision[1] and "handwritten: undecided" in j.decision[1]
    ci = m.hand.fixed["stream_slope_nfd_depth"][6]  # the paper's fixed step, the last
    assert j.measured["handwritten_stream_slope_nfd_depth"] == pytest.approx(ci.mean)
    # the negative control's arms are one recipe: no sqrt(L) in either route, no lift
    control = {**s, "corrected_recipe": "depth-mup"}
    mc = _measure(ClaimContext(scale="quick", out_dir=tmp_path / "c", device="cpu",
                                       data_dir=None, seed=5, settings=control))
    assert mc.hand is not None
    routes = {"library": mc.slopes, "handwritten": mc.hand}
    seen, text = lift_contrast(routes, "internal", "depth_mup", "nfd_depth")
    assert not seen and "library +0.000 [+0.000, +0.000]" in text
    # a recipe the handwritten nets lack fails before any run
    with pytest.raises(ConfigError, match="second_route = false"):
        _measure(ClaimContext(scale="quick", out_dir=tmp_path / "m", device="cpu",
                                      data_dir=None, seed=5,
                                      settings={**s, "corrected_recipe": "mup"}))
    assert not (tmp_path / "m" / "nfd-collapse-runs").exists()


def _synthetic_runs(jitter: float, calls: list[list[int]]) -> RouteRuns:
    """A route whose every update of arm "a" is L^(-0.5 + jitter (seed mod 3 - 1)) times the
    loss drop (depth 8 training twice as fast as depth 2): its slope at matched loss is
    -0.5 plus the seed's jitter; ``calls`` records the seeds each round trains."""
    def run(seeds: Sequence[int]) -> list[dict[str, Any]]:
        calls.append(list(seeds))
        return [{"arm": "a", "depth": L, "seed": seed, "step": k,
                 "running_loss_last10": 3.0 - drop,
                 "internal_update": L ** (-0.5 + jitter * (seed % 3 - 1)) * drop}
                for L in (2, 8) for seed in seeds for k in record_steps(30)
                for drop in [(2 if L == 8 else 1) * k / 16]]
    return RouteRuns(("a",), run)


def test_a_route_takes_the_next_seed_round_only_while_a_slope_straddles(tmp_path: Path) -> None:
    s = {"depths": [2, 8], "steps": 30, "seeds": 3, "max_seeds": 6}
    ctx = ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None, seed=0,
                       settings=s)
    calls: dict[str, list[list[int]]] = {"tight": [], "loose": []}
    routes = {"tight": _synthetic_runs(0.01, calls["tight"]),
              "loose": _synthetic_runs(0.1, calls["loose"])}
    done = sequential_routes(ctx, routes, {"internal_slope_a": (-0.65, -0.35)}, ("internal",))
    # seeds 0, 1, 2 give -0.5 -+ jitter: t(2) at 97.5% (2 looks) x jitter / sqrt(3)
    half = float(stats.t.ppf(1 - 0.025 / 2, 2)) * 0.1 / math.sqrt(3)
    assert 0.5 - half < 0.35  # the loose route's first interval straddles -0.35
    assert calls == {"tight": [[0, 1, 2]], "loose": [[0, 1, 2], [3, 4, 5]]}
    seeds, rows, read = done["loose"]
    assert seeds == [0, 1, 2, 3, 4, 5] and len(rows) == 6 * 2 * len(record_steps(30))
    assert read.level == pytest.approx(0.975)
    ci = read.matched["internal_slope_a"][30]
    assert ci.per_seed == pytest.approx((-0.6, -0.5, -0.4) * 2)
    assert (ci.low, ci.high) == pytest.approx(
        (-0.5 - float(stats.t.ppf(0.9875, 5)) * statistics.stdev(ci.per_seed) / math.sqrt(6),
         -0.5 + float(stats.t.ppf(0.9875, 5)) * statistics.stdev(ci.per_seed) / math.sqrt(6)))
    assert done["tight"][0] == [0, 1, 2]

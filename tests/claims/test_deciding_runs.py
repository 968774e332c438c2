"""The run that would decide an INCONCLUSIVE claim, named and priced in its reason
(claims.verdicts.deciding_run, RunPrice; laws.deciding): exact texts on tiny cases and made-up
laws on both sides of the band."""

from __future__ import annotations

import math

import pytest

from depthscale.claims import CLAIMS
from depthscale.claims.costs import claim_cost
from depthscale.claims.laws import ablations, ammup, settings
from depthscale.claims.laws.deciding import law_needs, with_deciding_run
from depthscale.claims.laws.gates import law_parts
from depthscale.claims.laws.law import LawResult, probe_law
from depthscale.claims.laws.settings import LAW_BAND
from depthscale.claims.laws.sweeps import effective_depth
from depthscale.claims.registry import Runs, read_settings
from depthscale.claims.verdicts import (
    Judgement,
    RunPrice,
    deciding_run,
    duration,
    samples_to_decide,
)
from depthscale.stats.sweeps import Optimum, optima_power_law
from depthscale.train.budget import human_seconds


def _price(claim_id: str, seconds: float | None = None, scale: str = "quick") -> RunPrice:
    return RunPrice(claim_id, CLAIMS[claim_id].settings["smoke"], "cpu", seconds, scale)


def test_duration_reads_seconds_minutes_then_hours() -> None:
    assert (duration(30), duration(600), duration(7200)) == ("30 s", "10 min",
                                                            human_seconds(7200))


def test_deciding_run_names_its_settings_and_prices_them() -> None:
    assert deciding_run("8 seeds", {"seeds": 8}, None) == "the deciding run: 8 seeds (seeds = 8)"
    price = _price("nfd-fig6", seconds=50.0)
    smoke = CLAIMS["nfd-fig6"].settings["smoke"]
    lower = claim_cost(CLAIMS["nfd-fig6"], {**smoke, "seeds": 4}, "cpu").seconds
    assert price.declared({"seeds": 4}) == lower > price.declared({})
    said = deciding_run("4 repeats", {"seeds": 4}, price, factor=2.0)
    assert said == (f"the deciding run: 4 repeats (seeds = 4), at least {duration(lower)} on cpu "
                    "(its declared runs' lower bound), about 100 s from this run's measured "
                    "50 s x 2")
    assert "(--scale medium)" in deciding_run("x", {}, price, label="--scale medium")
    assert price.items([]) == 0.0


def test_larger_is_the_next_scale_with_settings_of_its_own() -> None:
    larger = _price("laws-widths").larger()
    assert larger is not None and larger[0] == "medium"
    assert larger[1] == dict(CLAIMS["laws-widths"].settings["medium"])
    assert _price("laws-widths", scale="medium").larger()[0] == "full"  # type: ignore[index]
    assert _price("laws-widths", scale="full").larger() is None


def _law(alpha: float, spread: float, depths: tuple[int, ...] = (4, 8, 16, 32),
         edge: tuple[int, ...] = ()) -> LawResult:
    """Optima at mean log10 eta* = -2 + alpha log10 L, three seeds ``spread`` decades apart
    (more at some depths), those at ``edge`` on the LR grid's edge."""
    optima = [Optimum(d, s, 10 ** (-2.0 + alpha * math.log10(d) + off * (1 + (d % 3))), 0.0,
                      d in edge, "running")
              for d in depths for s, off in enumerate((-spread, 0.0, spread))]
    if not edge:
        return probe_law(optima, seed=0)
    law = optima_power_law(optima, seed=0, exclude_edge=True)
    return LawResult(law.optima, law.summaries, law.fit, law.boot_ci, law.signals,
                     law.excluded, law.boot_repeats)


def test_a_law_across_the_band_edge_names_the_seeds_that_decide_it() -> None:
    law = _law(-1.2, 0.15)
    low, high = law.interval
    assert low < LAW_BAND[1] < high
    need, what = law_needs("v", law, 3)
    assert what == "v" and need == samples_to_decide(law.fit.slope, low, high, LAW_BAND, 3)
    assert need is not None and need.needed is not None and need.needed > 3
    judged = ablations.judge_ablations({"v": law, "w": _law(-1.5, 0.0)}, 3,
                                       _price("laws-ablations", seconds=60.0))
    assert judged.decision is not None and judged.decision[0] == "INCONCLUSIVE"
    assert judged.decision[1].startswith(f"v needs {need.said()}; the deciding run: "
                                         f"{need.needed} seeds per study (seeds = {need.needed})")
    assert f"from this run's measured 60 s x {need.needed / 3:.3g}" in judged.decision[1]
    # past a study's run limit the price says so instead of a number
    far = deciding_run("x", {"seeds": 10**5}, _price("laws-ablations"))
    assert "past the bounds every run is checked against" in far and "10,000" in far


def test_a_law_without_three_located_depths_needs_longer_training() -> None:
    law = _law(-1.5, 0.0, edge=(16, 32))
    need, what = law_needs("v", law, 3)
    assert need is None and "fewer than 3 depths" in what
    undecided = Judgement({}, decision=("INCONCLUSIVE", "parts"))
    said = with_deciding_run(undecided, {"v": law}, law_parts({"v": law}), 3,
                             _price("laws-ablations")).decision
    assert said is not None and "more seeds cannot decide it; the deciding run: longer " \
        "training, the next scale's settings (--scale medium), at least" in said[1]
    assert said[1].endswith("; parts")
    passed = Judgement({}, decision=("PASS", "all"))
    assert with_deciding_run(passed, {"v": law}, law_parts({"v": law}), 3, None) is passed


def test_ammup_names_probes_with_widths_growing_with_depth_and_their_cost() -> None:
    s = read_settings(ammup.AmmupSettings, settings.AMMUP["quick"])
    arch = s.archs["cnn1d"]
    probes = ammup.growing_probes(s, arch, [64, 128])
    grid_l = max(effective_depth(arch, d) for d in arch["depths"])
    assert [r.width for r in probes] == [
        16 * math.ceil(32 * effective_depth(arch, d) / grid_l / 16) for d in (64, 128)]
    assert all(isinstance(r, Runs) and r.count == 16 and r.steps == 1 for r in probes)
    grid = _law(-1.5, 0.0, (2, 4, 8, 16))
    a = ammup.ArchAmmup("cnn1d", grid, grid, [], _law(-0.4, 0.0, (2, 4, 8, 16, 64, 128)), 32,
                        probes)
    price = RunPrice("laws-ammup", settings.AMMUP["quick"], "cpu")
    judged = ammup.judge_ammup([a], 16, 3, price)
    assert judged.decision is not None
    assert (f"the deciding run: probes whose width grows with L, L/C at most the grid's "
            f"deepest, at depths 64 (width {probes[0].width}), 128 (width {probes[1].width}), "
            f"at least {duration(price.items(probes))} on cpu") in judged.decision[1]


@pytest.mark.parametrize("claim_id", ["nfd-fig6", "laws-ablations", "laws-widths",
                                      "laws-ammup", "beyond-transformer"])
def test_the_five_claims_price_their_settings(claim_id: str) -> None:
    price = _price(claim_id)
    assert price.declared({}) == claim_cost(CLAIMS[claim_id], price.settings, "cpu").seconds
    assert price.declared({}) > 0


def _scattered_probe_law(alpha: float, scatter: float, spread: float) -> LawResult:
    """AM-muP optima at 6 depths, 16 init seeds ``spread`` decades apart about
    log10 eta* = alpha log10 L, each depth off the line by +-``scatter`` in turn."""
    depths = (4, 6, 8, 10, 14, 18)
    optima = [Optimum(d, s, 10 ** (alpha * math.log10(d) + (-1) ** j * scatter
                                   + spread * (s - 7.5) / 7.5), 0.0, False, "ammup")
              for j, d in enumerate(depths) for s in range(16)]
    return probe_law(optima, seed=0)


def test_ammup_says_probe_seeds_cannot_decide_a_slope_its_depths_scatter() -> None:
    """The depths' scatter about the line, which seeds leave, keeps the AM-muP slope across
    the band's edge: the deciding run must not name more probe seeds (a 1/sqrt(seeds) reading
    would), and names them where the depths lie on the line."""
    grid = _law(-1.5, 0.0, (4, 6, 8, 10, 14, 18))
    price = RunPrice("laws-ammup", settings.AMMUP["quick"], "cpu")
    scattered = _scattered_probe_law(-1.02, 0.05, 0.05)
    low, high = scattered.interval
    assert low < LAW_BAND[1] < high
    assert samples_to_decide(scattered.fit.slope, low, high, LAW_BAND, 16).needed is not None
    said = ammup._deciding([ammup.ArchAmmup("vit", grid, scattered, [])], 16, 3, price)
    assert "vit's AM-muP slope: more probe seeds cannot decide it (the depths scatter" in said
    assert "probe_seeds =" not in said
    on_line = _scattered_probe_law(-1.02, 0.0, 0.6)
    assert on_line.interval[0] < LAW_BAND[1] < on_line.interval[1]
    said = ammup._deciding([ammup.ArchAmmup("vit", grid, on_line, [])], 16, 3, price)
    assert "vit's AM-muP slope needs" in said and "probe_seeds =" in said


def test_ammup_says_seeds_cannot_decide_a_difference_the_grids_depths_scatter() -> None:
    grid = _scattered_probe_law(-1.5, 0.1, 0.02)
    probe = _scattered_probe_law(-1.02, 0.0, 0.3)
    price = RunPrice("laws-ammup", settings.AMMUP["quick"], "cpu")
    said = ammup._deciding([ammup.ArchAmmup("cnn1d", grid, probe, [])], 16, 3, price)
    assert "cnn1d's difference from the grid slope: more seeds cannot decide it" in said
    assert "grid seeds" not in said


def test_a_law_whose_depths_scatter_needs_more_depths_not_seeds_or_longer_training() -> None:
    """laws_deciding_run (the ablations', laws-widths' parts): a part kept across the band's
    edge by its depths' scatter alone is said to need more depths; a part on its line keeps
    its seed count."""
    scattered = _scattered_probe_law(-1.02, 0.05, 0.05)
    need, what = law_needs("v", scattered, 16)
    assert need is None and what.startswith("v: the depths scatter about the line by ")
    judged = ablations.judge_ablations({"v": scattered, "w": _law(-1.2, 0.15)}, 3,
                                       _price("laws-ablations", seconds=60.0))
    assert judged.decision is not None and judged.decision[0] == "INCONCLUSIVE"
    said = judged.decision[1]
    assert "which seeds leave: more depths would narrow it: more seeds cannot decide it" in said
    assert said.startswith("w needs ") and "longer training" not in said

"""The laws claims read a sweep's law through the one analysis ``depthscale fit`` runs
(:func:`depthscale.stats.sweeps.lr_power_law`): the same optima, seed summaries, WLS fit
and seed bootstrap as the analysis steps chained by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from depthscale.claims.laws import fit_law
from depthscale.stats.sweeps import (
    bootstrap_slope_ci,
    lr_power_law,
    optimal_lrs,
    seed_summary,
    wls_power_law,
)


def _records() -> list[dict]:
    rng = np.random.default_rng(1)
    out = []
    for depth in (1, 2, 4, 8):
        centre = math.log10(0.1 * (depth + 2) ** -1.5)
        for seed in range(3):
            shift = 0.1 * rng.normal()
            for lr in np.logspace(-4, 0, 13):
                loss = 1.0 + (math.log10(lr) - centre - shift) ** 2
                out.append({"run_id": f"{depth}-{seed}-{lr}", "depth": depth,
                            "effective_depth": depth + 2, "seed": seed, "lr": float(lr),
                            "status": "done", "running_loss": loss})
    return out


def test_fit_law_is_lr_power_law_on_effective_depth() -> None:
    records = _records()
    law, by_hand = fit_law(records), lr_power_law(records, "running", axis="effective_depth")
    optima = optimal_lrs(records, "running", axis="effective_depth")
    assert law.optima == by_hand.optima == optima
    assert law.summaries == by_hand.summaries == seed_summary(optima)
    assert law.fit == by_hand.fit == wls_power_law(seed_summary(optima))
    assert law.boot_ci == by_hand.boot_ci == bootstrap_slope_ci(optima)
    assert law.fit.slope == pytest.approx(-1.5, abs=0.2)


def test_seed_averaged_optima_have_no_bootstrap() -> None:
    law = lr_power_law(_records(), axis="effective_depth", aggregate="loss")
    assert all(o.seed is None for o in law.optima) and len(law.summaries) == 4
    assert all(math.isnan(v) for v in law.boot_ci)


def test_measured_reports_each_part_its_refits_edges_and_bootstrap() -> None:
    """What the per-part verdicts and the gates read is in measured and the CSV: the part's
    code, alpha at 1/8, 1/4, 1/2 of the run length, the length it is stable from, the optima
    left out on the edge and the bootstrap's degenerate fraction."""
    from depthscale.claims.laws.gates import law_measured, law_parts, law_rows

    records = _records()
    for r in records:
        r["curve_steps"] = list(range(1, 17))
        r["curve_losses"] = [r["running_loss"]] * 16
    law = fit_law(records)
    parts = law_parts({"cnn": law})
    measured = law_measured({"cnn": law}, parts)
    assert measured["verdict_cnn"] == {"supports": 1.0, "undecided": 0.0}[parts["cnn"].verdict]
    assert [s for s, _ in law.length_fits] == [2, 4, 8]
    for key in ("1_8", "1_4", "1_2"):
        assert measured[f"alpha_cnn_at_{key}"] == pytest.approx(law.fit.slope)
    assert measured["alpha_cnn_stable_from_steps"] == 2.0 and measured["steps_cnn"] == 16
    assert measured["edge_excluded_cnn"] == 0.0
    assert measured["boot_repeats_cnn"] == law.boot_repeats
    # 3 seeds at 4 sizes: at least the 1 - (8/9)^4 = 38% of resamples that repeat one seed
    assert 1 - (8 / 9) ** 4 - 0.03 < law.boot_repeats <= 1.0
    assert {"alpha_at_2_steps", "alpha_at_8_steps", "excluded_on_edge", "boot_repeats",
            "verdict"} <= set(law_rows({"cnn": law}, measured)[0])
    assert law_rows({"cnn": law}, measured)[0]["verdict"] == parts["cnn"].verdict

"""Measure and judge shared by the claims that report one law per sweep (laws Table 1: alpha
per architecture; Table 3: per ablation variant; Table 4: per proxy width and epoch): alpha
of eta* ~ L^alpha (Eq. 9) with its t- and bootstrap intervals and R^2 per study, the table of
eta* per effective depth, and the verdict of :func:`~depthscale.claims.laws.gates.law_decision`.
ResNets are fitted against both depth conventions of the paper (Sec. 3.4: L = m + K; Sec. 4.3:
L = number of blocks); the first is banded, the second reported. Optima on the grid's edge or
next to a diverged LR are flagged in the note.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from depthscale.claims.laws.gates import law_decision
from depthscale.claims.laws.law import LawResult
from depthscale.claims.laws.outcome import Measurement
from depthscale.claims.laws.settings import LAW_BAND
from depthscale.claims.verdicts import Band, Judgement

__all__ = ["judge_laws", "law_rows", "measure_laws"]


def measure_laws(results: Mapping[str, LawResult]) -> Measurement:
    """alpha, its t- and bootstrap intervals and R^2 per study (and the fit against blocks for
    ResNets, and on the first half of the steps), the table of eta* per depth, and the note."""
    measured: dict[str, float | None] = {}
    for key, law in results.items():
        measured[f"alpha_{key}"] = law.fit.slope
        measured[f"alpha_{key}_ci_low"] = law.fit.slope_ci[0]
        measured[f"alpha_{key}_ci_high"] = law.fit.slope_ci[1]
        measured[f"alpha_{key}_boot_low"] = law.boot_ci[0]
        measured[f"alpha_{key}_boot_high"] = law.boot_ci[1]
        measured[f"r2_{key}"] = law.fit.r2
        if law.half_fit is not None:
            measured[f"alpha_{key}_half_steps"] = law.half_fit.slope
        if law.blocks_fit is not None:
            measured[f"alpha_{key}_blocks"] = law.blocks_fit.slope
            measured[f"alpha_{key}_blocks_ci_low"] = law.blocks_fit.slope_ci[0]
            measured[f"alpha_{key}_blocks_ci_high"] = law.blocks_fit.slope_ci[1]
    return Measurement(measured, law_rows(results), _notes(results))


def _notes(results: Mapping[str, LawResult]) -> str:
    """Optima on the LR grid's edge or next to a diverged LR, the ResNets' fit against blocks,
    and alpha after half of the steps."""
    notes = []
    edges = [f"{k} L={s.depth}" for k, law in results.items() for s in law.summaries
             if s.any_on_edge]
    if edges:
        notes.append(f"optimum on the LR grid's edge: {', '.join(edges)}")
    beside = sorted({f"{k} L={o.depth}" for k, law in results.items() for o in law.optima
                     if o.next_to_diverged})
    if beside:
        notes.append(f"optimum next to a diverged LR: {', '.join(beside)}")
    notes += [f"{k}: alpha {law.blocks_fit.slope:.3g} against blocks K (Sec. 4.3) vs "
              f"{law.fit.slope:.3g} against L = m + K (Sec. 3.4, banded)"
              for k, law in results.items() if law.blocks_fit is not None]
    halves = [f"{k} {law.half_fit.slope:.3g} -> {law.fit.slope:.3g}"
              for k, law in results.items() if law.half_fit is not None]
    if halves:
        notes.append("alpha after half -> all of the steps: " + ", ".join(halves))
    return "; ".join(notes)


def law_rows(results: Mapping[str, LawResult]) -> list[dict[str, Any]]:
    """The CSV: per study and effective depth, eta*'s seed mean and CI, the grid's signal
    against seed noise and chance, and the study's fit."""
    rows = []
    for key, law in results.items():
        signal = {g.depth: g for g in law.signals}
        beside = {o.depth for o in law.optima if o.next_to_diverged}
        for s in law.summaries:
            g = signal.get(s.depth)
            rows.append({
                "architecture": key, "effective_depth": s.depth,
                "mean_log10_eta_star": s.mean_log10_lr, "ci_low": s.ci_low, "ci_high": s.ci_high,
                "seeds": s.n_seeds, "on_grid_edge": s.any_on_edge,
                "next_to_diverged": s.depth in beside,
                "grid_loss_range": g.loss_range if g else math.nan,
                "seed_spread": g.seed_spread if g else math.nan, "flat": bool(g and g.flat),
                "best_loss": g.best_loss if g else math.nan, "chance_loss": law.chance,
                "learned": bool(g is None or g.learned(law.chance)),
                "alpha": law.fit.slope, "alpha_ci_low": law.fit.slope_ci[0],
                "alpha_ci_high": law.fit.slope_ci[1], "alpha_boot_low": law.boot_ci[0],
                "alpha_boot_high": law.boot_ci[1], "r2": law.fit.r2,
                "alpha_blocks": law.blocks_fit.slope if law.blocks_fit else math.nan,
                "steps": law.steps,
                "alpha_half_steps": law.half_fit.slope if law.half_fit else math.nan,
            })
    return rows


def judge_laws(results: Mapping[str, LawResult], r2_min: float | None = None) -> Judgement:
    """The law band on every study's alpha (and R^2 >= ``r2_min`` when given), the verdict of
    :func:`~depthscale.claims.laws.gates.law_decision`."""
    bands: dict[str, Band] = {}
    for key in results:
        bands[f"alpha_{key}"] = LAW_BAND
        if r2_min is not None:
            bands[f"r2_{key}"] = (r2_min, None)
    return Judgement(bands, law_decision(results, r2_min))

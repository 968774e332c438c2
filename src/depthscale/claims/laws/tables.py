"""Measure and judge shared by the claims that report one law per sweep (laws Table 1: alpha
per architecture; Table 3: per ablation variant; Table 4: per proxy width and epoch): alpha
of eta* ~ L^alpha (Eq. 9) with its t- and bootstrap intervals and R^2 per study, the table of
eta* per effective depth, and the verdict of its parts (one per study,
:func:`~depthscale.claims.laws.gates.parts_verdict`).
ResNets are fitted against both depth conventions of the paper (Sec. 3.4: L = m + K; Sec. 4.3:
L = number of blocks); the first is banded, the second reported. Optima on the grid's edge or
next to a diverged LR are flagged in the note.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from depthscale.claims.laws.gates import PART_CODES, Part, law_parts, parts_verdict, stable_from
from depthscale.claims.laws.law import LawResult
from depthscale.claims.laws.outcome import Measurement
from depthscale.claims.laws.settings import LAW_BAND
from depthscale.claims.verdicts import Band, Judgement

__all__ = ["judge_laws", "law_rows", "measure_laws", "part_codes"]


def measure_laws(results: Mapping[str, LawResult],
                 parts: Mapping[str, Part] | None = None) -> Measurement:
    """alpha, its t- and bootstrap intervals and R^2 per study (and the fit against blocks for
    ResNets, alpha at 1/8, 1/4, 1/2 of the run length, the length from which it stays in its
    interval, the optima left out on the grid's edge, the bootstrap's repeat fraction and,
    given ``parts``, each part's verdict code), the table of eta* per depth, and the note."""
    measured: dict[str, float | None] = dict(part_codes(parts)) if parts else {}
    for key, law in results.items():
        measured[f"alpha_{key}"] = law.fit.slope
        measured[f"alpha_{key}_ci_low"] = law.fit.slope_ci[0]
        measured[f"alpha_{key}_ci_high"] = law.fit.slope_ci[1]
        measured[f"alpha_{key}_boot_low"] = law.boot_ci[0]
        measured[f"alpha_{key}_boot_high"] = law.boot_ci[1]
        measured[f"r2_{key}"] = law.fit.r2
        measured[f"steps_{key}"] = float(law.steps)
        for steps, fit in law.length_fits:
            measured[f"alpha_{key}_at_{_fraction(law.steps, steps)}"] = fit.slope
        since = stable_from(law)
        measured[f"alpha_{key}_stable_from_steps"] = None if since is None else float(since)
        measured[f"edge_excluded_{key}"] = float(len(law.excluded))
        measured[f"boot_repeats_{key}"] = law.boot_repeats
        if law.blocks_fit is not None:
            measured[f"alpha_{key}_blocks"] = law.blocks_fit.slope
            measured[f"alpha_{key}_blocks_ci_low"] = law.blocks_fit.slope_ci[0]
            measured[f"alpha_{key}_blocks_ci_high"] = law.blocks_fit.slope_ci[1]
    verdicts = {k: p.verdict for k, p in (parts or {}).items()}
    return Measurement(measured, law_rows(results, verdicts), _notes(results))


def _fraction(steps: int, at: int) -> str:
    """The name of a refit length: "1/8", "1/4" or "1/2" of the run length (as a key)."""
    return f"1_{round(steps / at)}"


def part_codes(parts: Mapping[str, Part]) -> dict[str, float | None]:
    """``verdict_<part>``: each part's verdict as a number (:data:`PART_CODES`: 1 supports,
    0 undecided, -1 contradicted by one route, -2 by both)."""
    return {f"verdict_{k}": PART_CODES[p.verdict] for k, p in parts.items()}


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
    moving = [f"{k} " + " -> ".join(f"{f.slope:.3g}" for _, f in law.length_fits)
              + f" -> {law.fit.slope:.3g}" for k, law in results.items() if law.length_fits]
    if moving:
        notes.append("alpha at 1/8 -> 1/4 -> 1/2 -> all of the steps: " + ", ".join(moving))
    return "; ".join(notes)


def law_rows(results: Mapping[str, LawResult],
             verdicts: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The CSV: per study and effective depth, eta*'s seed mean and CI, the grid's signal
    against seed noise and chance, the optima left out on the grid's edge, and the study's
    fit (alpha at each refit length too) and verdict."""
    verdicts = verdicts or {}
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
                **{f"alpha_at_{steps}_steps": fit.slope for steps, fit in law.length_fits},
                "excluded_on_edge": sum(o.depth == s.depth for o in law.excluded),
                "boot_repeats": law.boot_repeats,
                "verdict": verdicts.get(key, ""),
            })
    return rows


def judge_laws(results: Mapping[str, LawResult], r2_min: float | None = None,
               parts: Mapping[str, Part] | None = None,
               contrast: tuple[bool, str] | None = None) -> Judgement:
    """The law band on every study's alpha (and R^2 >= ``r2_min`` when given), the verdict of
    :func:`~depthscale.claims.laws.gates.parts_verdict` on ``parts`` (default: one grid-route
    part per study, :func:`~depthscale.claims.laws.gates.law_parts`)."""
    bands: dict[str, Band] = {}
    for key in results:
        bands[f"alpha_{key}"] = LAW_BAND
        if r2_min is not None:
            bands[f"r2_{key}"] = (r2_min, None)
    parts = parts if parts is not None else law_parts(results, r2_min)
    return Judgement({}, bands, parts_verdict(parts, contrast=contrast))

"""The laws claims' verdict rules on a sweep's law (laws Table 1 band on alpha around the
paper's -3/2, Eq. 9), through :mod:`depthscale.claims.verdicts`.

A slope's verdict rests on its interval, not its point: the hull of the fit's t-interval and a
seed-bootstrap interval inside the band supports the law, wholly outside contradicts it, across
an edge is undecided (INCONCLUSIVE); so is any sweep whose loss range over the LR grid does not
exceed its seed-to-seed spread (its argmin is noise), any sweep whose best loss is not below
chance (the label marginal's loss) by more than that spread (nothing was learned, so the argmin
marks where large LRs blow up), and any contradiction that training longer moves toward the
band: alpha refitted on the first half of every run (constant-LR SGD: a half-length run) lying
outside the full-length interval, on the band's side.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from depthscale.claims.laws.law import LawResult
from depthscale.claims.laws.settings import LAW_BAND
from depthscale.claims.verdicts import Decision, findings_verdict, interval_finding

__all__ = ["alpha_finding", "flat_evidence", "law_decision", "trend_evidence"]

_LONGER = ("; longer training or more seeds than this scale has (quick -> medium; medium -> "
           "full, CIFAR on a GPU) would separate the LRs")


def flat_evidence(key: str, law: LawResult) -> str:
    """'' or the sizes whose sweep is flat within seed noise or learned nothing beyond chance,
    with their numbers."""
    parts = []
    flat = law.flat_sizes()
    if flat:
        parts.append(f"{key}: LR grid flat within seed noise at " + ", ".join(
            f"L={g.depth} (loss range {g.loss_range:.3g} <= seed spread {g.seed_spread:.3g})"
            for g in flat))
    untrained = law.untrained_sizes()
    if untrained:
        parts.append(f"{key}: nothing learned beyond chance (loss {law.chance:.3g} of the label "
                     f"marginal) after {law.steps} steps at " + ", ".join(
                         f"L={g.depth} (best loss {g.best_loss:.3g}, seed spread "
                         f"{g.seed_spread:.3g})" for g in untrained)
                     + ": the argmin marks where large LRs blow up, not eta*")
    return "; ".join(parts) + (_LONGER if parts else "")


def _band_distance(x: float, band: tuple[float, float]) -> float:
    return max(band[0] - x, x - band[1], 0.0)


def trend_evidence(key: str, law: LawResult) -> str:
    """'' or, for a slope whose interval lies outside the band, the evidence that training
    longer moves it toward the band: the half-length alpha lies outside the full-length
    interval and farther from the band (the exponent still changes with training length, so
    this length cannot contradict the law)."""
    low, high = law.interval
    if law.half_fit is None or not (math.isfinite(low) and math.isfinite(high)):
        return ""
    a_half, a = law.half_fit.slope, law.fit.slope
    moved = math.isfinite(a_half) and not low <= a_half <= high
    if not (moved and _band_distance(a, LAW_BAND) < _band_distance(a_half, LAW_BAND)):
        return ""
    return (f"{key}: alpha {a_half:.3g} after {law.steps // 2} steps -> {a:.3g} after "
            f"{law.steps}, outside its interval [{low:.3g}, {high:.3g}] and toward the band: "
            "the exponent still changes with training length; train longer (quick -> medium)")


def alpha_finding(key: str, law: LawResult) -> tuple[str, str]:
    """The law band read on the slope's interval; undecided where a sweep is flat or learned
    nothing, or where a contradiction still moves toward the band with training length."""
    low, high = law.interval
    flat = flat_evidence(key, law)
    if flat:
        return "undecided", flat
    finding = interval_finding(low, high, LAW_BAND)
    evidence = (f"alpha {law.fit.slope:.3g}, interval [{low:.3g}, {high:.3g}] (t and seed "
                f"bootstrap) against band {list(LAW_BAND)}")
    trend = trend_evidence(key, law) if finding == "contradicts" else ""
    if trend:
        return "undecided", f"{evidence}; {trend}"
    return finding, evidence


def law_decision(results: Mapping[str, LawResult], r2_min: float | None = None) -> Decision:
    """Every study's alpha interval against the law band, and R^2 >= ``r2_min`` when given
    (undecided, like alpha, where the sweep cannot locate eta*: the R^2 of noise says nothing)."""
    findings = {f"alpha_{k}": alpha_finding(k, law) for k, law in results.items()}
    if r2_min is not None:
        for k, law in results.items():
            ok = math.isfinite(law.fit.r2) and law.fit.r2 >= r2_min
            said = f"R^2 {law.fit.r2:.3g} against >= {r2_min}"
            if not ok and findings[f"alpha_{k}"][0] == "undecided":
                findings[f"r2_{k}"] = ("undecided", f"{said}, of optima the sweep cannot locate")
            else:
                findings[f"r2_{k}"] = ("supports" if ok else "contradicts", said)
    return findings_verdict(findings)

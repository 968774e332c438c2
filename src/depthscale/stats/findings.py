"""Findings and verdicts: measured numbers and their intervals judged against bands fixed
before running (the verdict classes of the claims catalogue), for claims and for the checks a
user runs on a model (``probes.coord_check``, ``probes.lr_transfer_check``).

The verdict is computed from measured values and bands, never asserted. Beyond PASS/FAIL of
the bands, two rules decide the other classes of docs/claims.md:

* :func:`routes_verdict`: a claim measured along independent routes (finite networks and a limit
  solver, say) is REFUTED only when at least two routes contradict it *and* an in-run contrast
  (a setting where the effect must show) shows the check can see the effect; routes that
  disagree are a FAIL (our code is suspected first).
* :func:`noise_gate`: a signal that does not exceed its noise (seed-to-seed spread, a CI that
  spans both sides of the band) makes the claim INCONCLUSIVE, with what would decide it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

__all__ = [
    "ROUTE_FINDINGS", "VERDICTS", "Band", "Decision", "Finding", "Route", "Verdict", "band_verdict",
    "ci_band_decision", "findings_verdict",
    "finite_or_none", "interval_finding", "noise_gate", "routes_verdict", "sign_finding",
]

#: A closed interval [low, high]; None is unbounded on that side.
Band = tuple[float | None, float | None]

#: The verdict classes of docs/claims.md (SKIP: not judged, with why).
Verdict = Literal["PASS", "FAIL", "REFUTED", "UNSTABLE", "INCONCLUSIVE", "SKIP"]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)

#: A verdict with its evidence: (verdict class, evidence text with numbers).
Decision = tuple[Verdict, str]

#: What one route says of the claim.
Finding = Literal["supports", "contradicts", "undecided"]
ROUTE_FINDINGS: tuple[Finding, ...] = get_args(Finding)


@dataclass(frozen=True)
class Route:
    """One independent route to a claim's quantity (finite nets, a limit solver...):
    ``finding`` is "supports", "contradicts" or "undecided" (signal below its noise), and
    ``evidence`` the numbers behind it."""

    name: str
    finding: Finding
    evidence: str

    def __post_init__(self) -> None:
        if self.finding not in ROUTE_FINDINGS:
            raise ValueError(f"route finding must be one of {ROUTE_FINDINGS}, got {self.finding!r}")


def routes_verdict(
    routes: list[Route], *, contrast_seen: bool, contrast_evidence: str
) -> Decision:
    """The verdict of a claim checked along independent routes (docs/claims.md's verdicts).

    PASS when every route supports the claim; INCONCLUSIVE when any route is undecided and none
    contradicts; REFUTED when at least two routes contradict, none supports, and the in-run
    contrast shows the check sees the effect (``contrast_seen``); FAIL otherwise: routes that
    disagree, a single contradicting route, or a contrast that does not show the effect.
    """
    if not routes:
        raise ValueError("routes_verdict needs at least one route")
    said = "; ".join(f"{r.name}: {r.finding} ({r.evidence})" for r in routes)
    findings = [r.finding for r in routes]
    contrast = f"contrast: {'seen' if contrast_seen else 'NOT seen'} ({contrast_evidence})"
    if all(f == "supports" for f in findings):
        return "PASS", said
    n_contra = findings.count("contradicts")
    if n_contra == 0:
        return "INCONCLUSIVE", said
    if n_contra >= 2 and "supports" not in findings and contrast_seen:
        return "REFUTED", f"{said}; {contrast}"
    why = ("routes disagree, our code is suspected first" if "supports" in findings else
           "only one route contradicts" if n_contra < 2 else
           "the contrast does not show the effect, so the check may be blind")
    return "FAIL", f"{said}; {contrast}; {why}"


def interval_finding(low: float, high: float, band: Band) -> Finding:
    """What a confidence interval [low, high] says of a band: "supports" when it lies inside,
    "contradicts" when it lies wholly outside, "undecided" when it straddles an edge or is not
    finite (a fit's verdict rests on its CI, not its point estimate)."""
    lo_b = -math.inf if band[0] is None else band[0]
    hi_b = math.inf if band[1] is None else band[1]
    if not (math.isfinite(low) and math.isfinite(high)):
        return "undecided"
    if lo_b <= low and high <= hi_b:
        return "supports"
    if high < lo_b or low > hi_b:
        return "contradicts"
    return "undecided"


def sign_finding(low: float, high: float, sign: int) -> Finding:
    """What an interval of a difference says of the claim "it is < 0" (``sign`` -1) or "> 0"
    (+1): "supports" when the interval lies strictly on that side of 0, "contradicts" when it
    lies on the other side or is exactly 0 (no effect is not the claimed effect), "undecided"
    when it straddles 0 with width (the seeds do not settle it) or is not finite."""
    if sign not in (-1, 1):
        raise ValueError(f"sign must be -1 or +1, got {sign}")
    if not (math.isfinite(low) and math.isfinite(high)):
        return "undecided"
    lo, hi = (low, high) if sign == 1 else (-high, -low)
    if lo > 0:
        return "supports"
    if hi <= 0 or lo == hi:
        return "contradicts"
    return "undecided"


def findings_verdict(findings: Mapping[str, tuple[Finding, str]]) -> Decision:
    """One verdict from several checks of one route, each (finding, evidence): FAIL if any
    contradicts, else INCONCLUSIVE if any is undecided, else PASS. The evidence names every
    check that did not support the claim."""
    if not findings:
        raise ValueError("findings_verdict needs at least one finding")
    for name, (finding, _) in findings.items():
        if finding not in ROUTE_FINDINGS:
            raise ValueError(f"{name}: finding must be one of {ROUTE_FINDINGS}, got {finding!r}")
    said = "; ".join(f"{name}: {f} ({ev})" for name, (f, ev) in findings.items()
                     if f != "supports")
    kinds = {f for f, _ in findings.values()}
    verdict: Verdict = ("FAIL" if "contradicts" in kinds else
                        "INCONCLUSIVE" if "undecided" in kinds else "PASS")
    return verdict, said


def noise_gate(
    decision: Decision, *, signal: float, noise: float, what: str, decide: str
) -> Decision:
    """INCONCLUSIVE when ``signal`` (the effect the verdict rests on) does not exceed ``noise``
    (its seed-to-seed spread or CI half-width); otherwise ``decision`` unchanged. ``decide``
    says what scale or setting would decide the claim."""
    if math.isfinite(signal) and math.isfinite(noise) and abs(signal) > noise:
        return decision
    return "INCONCLUSIVE", (
        f"{what}: signal {signal:.3g} is not above its noise {noise:.3g}, so the measured "
        f"{decision[0]} is not decided at this scale; {decide}"
        + (f" [{decision[1]}]" if decision[1] else "")
    )


def band_verdict(
    measured: Mapping[str, float | None], bands: Mapping[str, Band]
) -> tuple[Verdict, dict[str, list[float | None]], str]:
    """PASS iff every banded value is finite and inside its closed band [low, high]
    (None = unbounded). Returns (verdict, bands as lists, the reasons for a FAIL)."""
    misses = []
    for name, (low, high) in bands.items():
        v = measured.get(name)
        if v is None or not math.isfinite(v):
            misses.append(f"{name} not measurable")
        elif (low is not None and v < low) or (high is not None and v > high):
            misses.append(f"{name} = {v:.4g} outside [{low}, {high}]")
    verdict: Verdict = "FAIL" if misses else "PASS"
    return verdict, {k: [lo, hi] for k, (lo, hi) in bands.items()}, "; ".join(misses)


def finite_or_none(value: float) -> float | None:
    """JSON-safe measured value: None where a run produced no finite number."""
    return float(value) if math.isfinite(value) else None


def ci_band_decision(
    measured: Mapping[str, float | None],
    bands: Mapping[str, Band],
    cis: Mapping[str, tuple[float, float, float]],
    *,
    decide: str,
) -> Decision:
    """The verdict of values and 95% confidence intervals against their bands (chizat Fig. 2
    and Thm. 2's fitted constants). The names in ``cis`` (``name -> (estimate, low, high)``)
    are judged on their CIs, the other ``bands`` on their ``measured`` values.

    FAIL when a value misses its band (:func:`band_verdict`) or a CI lies wholly outside its
    band or is not finite; else INCONCLUSIVE (:func:`noise_gate`) when a CI straddles a band
    edge (:func:`interval_finding` "undecided"): the signal is the estimate's distance to that
    edge, the noise the CI's extent towards it (the closest call decides, and the evidence
    says whether the estimates lie inside their bands); else PASS. ``decide`` says what scale
    or setting would decide an INCONCLUSIVE claim."""
    text = "; ".join(f"{k} = {v:.3g}, 95% CI [{lo:.3g}, {hi:.3g}], band {list(bands[k])}"
                     for k, (v, lo, hi) in cis.items())
    point, _, misses = band_verdict(measured, {k: b for k, b in bands.items() if k not in cis})
    outside, gates = [misses] if point == "FAIL" else [], []
    for name, (value, lo, hi) in cis.items():
        if not all(math.isfinite(x) for x in (value, lo, hi)):
            outside.append(f"{name} has no finite CI")
            continue
        finding = interval_finding(lo, hi, bands[name])
        if finding == "contradicts":
            outside.append(f"the CI of {name} lies outside its band")
        elif finding == "undecided":
            for edge in bands[name]:
                if edge is not None and lo < edge < hi:
                    noise = (value - lo) if edge <= value else (hi - value)
                    gates.append((abs(value - edge) / max(noise, 1e-300), name, value - edge,
                                  noise))
    if outside:
        return "FAIL", f"{'; '.join(outside)} ({text})"
    if gates:
        _, name, signal, noise = min(gates)
        inside = all(_in_band(v, bands[k]) for k, (v, _, _) in cis.items())
        return noise_gate(("PASS" if inside else "FAIL", text), signal=signal, noise=noise,
                          what=f"the 95% CI of {name} straddles a band edge", decide=decide)
    return "PASS", text


def _in_band(value: float, band: Band) -> bool:
    """Whether ``value`` lies in the closed ``band`` (None = unbounded)."""
    low, high = band
    return (low is None or value >= low) and (high is None or value <= high)

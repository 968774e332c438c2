"""The laws claims' verdict rules on a sweep's law (laws Table 1 band on alpha around the
paper's -3/2, Eq. 9), and the rule that states a claim's verdict from its parts (architectures
or variants), through :mod:`depthscale.claims.verdicts`. A slope's verdict rests on its
interval: the hull of the fit's t-interval and a seed-bootstrap interval inside the band
supports the law, wholly outside contradicts it, across an edge is undecided. A contradiction is
read at 1 - 0.05/m for m parts (Bonferroni, :func:`band_finding`), a support at 95%. The gates that
make a part undecided instead (each with its numbers):

* **edge**: optima on the LR grid's edge are left out of the fit
  (:func:`depthscale.stats.sweeps.edge_excluded`);
* **flat**: at a depth where the seed-mean loss over the whole LR window (every LR tried
  there, both stages of a two-stage grid) varies by no more than the seed spread, the argmin
  is noise; **untrained**: at a depth whose best loss is not below chance by more than that
  spread, the argmin marks where large LRs blow up. Such a depth alone is undecided: it is
  left out of the fit and named; the part is undecided when fewer than 3 depths are left;
* **still moving** (docs/claims.md B): the band applies at the run length n only where alpha is
  shown to have stopped moving there: the seed-paired change of alpha from n/2 to n (the same
  runs read at n/2, constant-LR SGD: the first s steps are an s-step run;
  :func:`~depthscale.claims.laws.law.slope_change`) has a 95% interval inside
  +-:data:`MOVING_MARGIN` (an equivalence test: a change within it, even one that excludes
  0, counts as stopped); past it the part is undecided. alpha at n/8, n/4, n/2 is reported.

Every gate reads an interval over seeds or a fixed design count, never a bare comparison that
float rounding could tip (:func:`depthscale.stats.sweeps.bootstrap_slope`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from depthscale.claims.laws.law import LawResult
from depthscale.claims.laws.settings import LAW_BAND
from depthscale.claims.verdicts import Decision, Finding, interval_finding

__all__ = [
    "MOVING_MARGIN", "PART_CODES", "Part", "alpha_finding", "band_finding", "change_state",
    "edge_evidence", "flat_evidence", "law_decision", "law_parts", "moving_evidence",
    "parts_verdict", "stable_from",
]

#: the largest change of alpha from half the run length to all of it (either sign) that
#: counts as stopped: a third of the band's width, so a change within it cannot carry alpha
#: from the band's middle across an edge
MOVING_MARGIN = 0.3

#: a part's verdict as a number in ``measured`` (``verdict_<part>``)
PART_CODES = {"supports": 1.0, "undecided": 0.0, "contradicts": -1.0, "refutes": -2.0}

_LONGER = ("; longer training or more seeds than this scale has (quick -> medium; medium -> "
           "full, CIFAR on a GPU) would separate the LRs")


def flat_evidence(key: str, law: LawResult) -> str:
    """'' or the depths whose LR window is flat within seed noise or learned nothing beyond
    chance (left out of the fit, :func:`~depthscale.claims.laws.law.gated_depths`), with
    their numbers."""
    parts = []
    flat = law.flat_sizes()
    if flat:
        parts.append(f"{key}: loss over the whole LR window flat within seed noise at " +
                     ", ".join(f"L={g.depth} (max - min of the seed-mean loss over {g.n_lrs} "
                               f"LRs {g.loss_range:.3g} <= seed spread {g.seed_spread:.3g})"
                               for g in flat))
    untrained = law.untrained_sizes()
    if untrained:
        parts.append(f"{key}: nothing learned beyond chance (loss {law.chance:.3g} of the label "
                     f"marginal) after {law.steps} steps at " + ", ".join(
                         f"L={g.depth} (best loss {g.best_loss:.3g}, seed spread "
                         f"{g.seed_spread:.3g})" for g in untrained)
                     + ": the argmin marks where large LRs blow up, not eta*")
    if not parts:
        return ""
    return "; ".join(parts) + " (those depths are left out of the fit, undecided)"


def edge_evidence(key: str, law: LawResult) -> str:
    """'' or how many optima (and at which depths) sit on the grid's edge, left out of the
    fit."""
    if not law.excluded:
        return ""
    where = sorted({o.depth for o in law.excluded})
    return (f"{key}: {len(law.excluded)} of {len(law.optima)} optima on the LR grid's edge "
            f"left out of the fit (L={', '.join(map(str, where))})")


def stable_from(law: LawResult) -> int | None:
    """The shortest refit length (of n/8, n/4, n/2, n) from which every refit up to n lies in
    the interval at n (None where the interval is not finite)."""
    low, high = law.interval
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    since = law.steps
    for steps, fit in reversed(law.length_fits):
        if not (math.isfinite(fit.slope) and low <= fit.slope <= high):
            break
        since = steps
    return since


def _change_said(law: LawResult) -> str:
    """The seed-paired change of alpha from half the run length, in words ('' if none)."""
    c = law.change
    if c is None or not (math.isfinite(c.low) and math.isfinite(c.high)):
        return ""
    return (f"alpha changes by {c.mean:+.3g} [{c.low:+.3g}, {c.high:+.3g}] from {c.steps} to "
            f"{law.steps} steps (paired over {c.n_seeds} seeds at {c.n_depths} depths)")


def change_state(law: LawResult) -> str | None:
    """How alpha's seed-paired change from half the run length reads against
    :data:`MOVING_MARGIN`: "stopped" (95% interval inside the margin), "moving" (past it and
    excluding 0), "untold" (past it and straddling 0, or not measurable: more seeds would
    tell); None where no length is refitted (``law.change`` None)."""
    c = law.change
    if c is None:
        return None
    if not (math.isfinite(c.low) and math.isfinite(c.high)):
        return "untold"
    if c.low >= -MOVING_MARGIN and c.high <= MOVING_MARGIN:
        return "stopped"
    return "moving" if c.low > 0 or c.high < 0 else "untold"


def moving_evidence(key: str, law: LawResult) -> str:
    """'' where alpha is shown to have stopped moving at the run length, or no length is
    refitted (:func:`change_state`), else why the band cannot apply there: alpha still moves,
    or the runs cannot tell (too few depths with paired optima, or an interval past the
    margin that straddles 0)."""
    state, c = change_state(law), law.change
    if state in (None, "stopped") or c is None:
        return ""
    if not (math.isfinite(c.low) and math.isfinite(c.high)):
        return (f"{key}: {c.n_depths} depth(s) have 2+ seeds with an interior optimum at both "
                f"{c.steps} and {law.steps} steps; the change of alpha needs 3, so the runs "
                "cannot tell whether it still moves; more seeds would")
    said = _change_said(law)
    if state == "moving":
        return (f"{key}: {said}, not within +-{MOVING_MARGIN}: the exponent still changes with "
                "training length, so the band cannot apply at this length; train longer "
                "(quick -> medium)")
    return (f"{key}: {said}, reaching past +-{MOVING_MARGIN}: the runs cannot tell whether "
            "alpha has stopped moving; more seeds would")


def _lengths(law: LawResult) -> str:
    """alpha at each refit length and at the run length."""
    if not law.length_fits:
        return ""
    said = ", ".join(f"{f.slope:.3g} at {s}" for s, f in law.length_fits)
    since = stable_from(law)
    return (f"; alpha {said}, {law.fit.slope:.3g} at {law.steps} steps"
            + (f" (within the interval from {since} steps)" if since is not None else ""))


def band_finding(law: LawResult, parts: int = 1) -> tuple[Finding, str]:
    """The law band read on a slope's intervals: "supports" when the 95% interval lies inside
    it (a claim PASSes only if every part supports, so each part at 95% keeps the claim's
    error at 5%); "contradicts" only when the family-wise interval of ``parts`` parts
    (:meth:`~depthscale.claims.laws.law.LawResult.family_interval`, Bonferroni: the claim
    FAILs if any one part contradicts, so each is read at 1 - 0.05/parts) lies wholly outside;
    else "undecided". The second item says how a contradiction at 95% was read ('' if none)."""
    low, high = law.interval
    finding = interval_finding(low, high, LAW_BAND)
    if finding != "contradicts" or parts <= 1:
        return finding, ""
    flo, fhi = law.family_interval(parts)
    finding = interval_finding(flo, fhi, LAW_BAND)
    level = 100 * (1 - 0.05 / parts)
    return finding, (f"outside the band at 95%; at {level:.3g}% ({parts} parts, Bonferroni) "
                     f"[{flo:.3g}, {fhi:.3g}]" + ("" if finding == "contradicts"
                                                 else ", across an edge: undecided"))


def alpha_finding(key: str, law: LawResult, parts: int = 1) -> tuple[Finding, str]:
    """The law band read on the slope's interval over the depths that locate eta*
    (:func:`band_finding`, ``parts``: the claim's parts); undecided where fewer than 3 such
    depths have an interior optimum, or alpha is not shown to have stopped moving with
    training length (:func:`moving_evidence`). Depths left out are named in the evidence."""
    low, high = law.interval
    left_out = "; ".join(e for e in (flat_evidence(key, law), edge_evidence(key, law)) if e)
    if not math.isfinite(law.fit.slope):
        return "undecided", ((left_out or f"{key}: no slope") + ": fewer than 3 depths left "
                             "to fit" + _LONGER)
    finding, family = band_finding(law, parts)
    evidence = (f"alpha {law.fit.slope:.3g}, interval [{low:.3g}, {high:.3g}] (t and seed "
                f"bootstrap) against band {list(LAW_BAND)}" + (f", {family}" if family else "")
                + (f"; {left_out}" if left_out else "") + _lengths(law))
    change = _change_said(law)
    if finding == "undecided":
        return finding, evidence + (f"; {change}" if change else "")
    moving = moving_evidence(key, law)
    if moving:
        return "undecided", f"{evidence}; {moving}"
    return finding, evidence + (f"; {change}, within +-{MOVING_MARGIN}" if change else "")


@dataclass(frozen=True)
class Part:
    """One part of a laws claim (an architecture or a variant): the grid route's finding
    ``(finding, evidence)`` and, where measured, the AM-muP route's (laws Sec. 3.2: eta*
    from update energies at init, no training)."""

    grid: tuple[Finding, str]
    ammup: tuple[Finding, str] | None = None

    @property
    def verdict(self) -> str:
        """"supports" (the grid supports, AM-muP does not contradict), "refutes" (both
        routes contradict), "contradicts" (one route contradicts: a single route or routes
        that disagree), else "undecided"."""
        g = self.grid[0]
        a = self.ammup[0] if self.ammup is not None else "undecided"
        if g == "contradicts" and a == "contradicts":
            return "refutes"
        if "contradicts" in (g, a):
            return "contradicts"
        return "supports" if g == "supports" else "undecided"

    def evidence(self) -> str:
        said = f"grid: {self.grid[0]} ({self.grid[1]})"
        if self.ammup is not None:
            said += f"; AM-muP: {self.ammup[0]} ({self.ammup[1]})"
        return said


def parts_verdict(parts: Mapping[str, Part], *, contrast: tuple[bool, str] | None = None
                  ) -> Decision:
    """The claim's verdict from its parts' verdicts (:attr:`Part.verdict`), every part named
    in the evidence, none dropped:

    * PASS if every part supports;
    * REFUTED if at least two parts are contradicted by both routes (grid and AM-muP), none
      supports, and the ``contrast`` (seen, evidence) shows the check sees another exponent;
    * FAIL if any part contradicts and the claim is not REFUTED (parts that disagree, one
      route, or a contrast not seen);
    * INCONCLUSIVE if no part contradicts and any is undecided.
    """
    if not parts:
        raise ValueError("parts_verdict needs at least one part")
    verdicts = {k: p.verdict for k, p in parts.items()}
    said = "; ".join(f"{k}: {v} [{parts[k].evidence()}]" for k, v in verdicts.items())
    kinds = list(verdicts.values())
    if all(v == "supports" for v in kinds):
        return "PASS", said
    refuting = kinds.count("refutes")
    against = refuting + kinds.count("contradicts")
    if against == 0:
        return "INCONCLUSIVE", said
    seen, contrast_said = contrast if contrast is not None else (False, "not measured")
    tail = (f"; contrast: {'seen' if seen else 'NOT seen'} ({contrast_said})"
            if refuting >= 2 else "")
    if refuting >= 2 and "supports" not in kinds and seen:
        return "REFUTED", said + tail
    why = ("parts disagree" if "supports" in kinds else
           "fewer than two parts contradicted by both routes" if refuting < 2 else
           "the contrast does not show another exponent, so the check may be blind")
    return "FAIL", f"{said}{tail}; {why}"


def law_parts(results: Mapping[str, LawResult], r2_min: float | None = None,
              ammup: Mapping[str, tuple[Finding, str]] | None = None,
              parts: int | None = None) -> dict[str, Part]:
    """Each study's part: its alpha finding (contradictions read family-wise over ``parts``,
    default the studies, :func:`band_finding`; and R^2 >= ``r2_min`` when given: a contradiction
    where R^2 misses it, undecided where eta* cannot be located, the R^2 of noise saying
    nothing), and the AM-muP route's finding where given."""
    out = {}
    for k, law in results.items():
        finding, evidence = alpha_finding(k, law, parts or len(results))
        if r2_min is not None:
            ok = math.isfinite(law.fit.r2) and law.fit.r2 >= r2_min
            said = f"R^2 {law.fit.r2:.3g} against >= {r2_min}"
            if finding == "undecided" or ok:
                evidence += f"; {said}"
            else:
                finding, evidence = "contradicts", f"{evidence}; {said}: not a power law"
        out[k] = Part((finding, evidence), (ammup or {}).get(k))
    return out


def law_decision(results: Mapping[str, LawResult], r2_min: float | None = None) -> Decision:
    """The verdict of the per-study parts (:func:`law_parts`, :func:`parts_verdict`)."""
    return parts_verdict(law_parts(results, r2_min))

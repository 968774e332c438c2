"""The laws claims' findings on a sweep's law, and what the claims of Tables 1, 3 and 4 report.

A slope's interval (the hull of the fit's t-interval and a seed-bootstrap one, Bonferroni over
m parts: :func:`band_finding`) inside the law band on alpha (around the paper's -3/2, Eq. 9)
supports the law, wholly outside contradicts it, across an edge is undecided; a claim's verdict
comes from its parts' (:func:`parts_verdict`). Gates that leave a part undecided instead, each
with its numbers: **edge** (optima on the LR grid's edge leave the fit); **flat** /
**untrained** (a depth whose seed-mean loss varies by no more than the seed spread, or whose
best loss is not below chance by more, leaves the fit; fewer than 3 depths left: undecided);
**still moving** (the seed-paired change of alpha from n/2 to n,
:func:`~depthscale.claims.laws.law.slope_change`, must have its 95% interval inside
+-:data:`MOVING_MARGIN`). Reported per study (:func:`law_measured`, :func:`law_rows`,
:func:`law_note`): alpha against L = m + K (Sec. 3.4) and, for ResNets, against blocks
(Sec. 4.3); alpha at n/8, n/4, n/2.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from depthscale.claims.laws.law import LawResult
from depthscale.claims.laws.settings import LAW_BAND
from depthscale.claims.verdicts import Band, Decision, Finding, Judgement, Rows, interval_finding

__all__ = [
    "MOVING_MARGIN", "PART_CODES", "Part", "alpha_finding", "ammup_finding", "band_finding",
    "change_state", "edge_evidence", "flat_evidence", "judge_laws", "law_decision",
    "law_measured", "law_note", "law_parts", "law_rows", "moving_evidence", "part_codes",
    "parts_verdict", "reported", "stable_from",
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


def law_measured(results: Mapping[str, LawResult],
                 parts: Mapping[str, Part] | None = None) -> dict[str, float | None]:
    """alpha, its t- and bootstrap intervals and R^2 per study (and the fit against blocks for
    ResNets, alpha at 1/8, 1/4, 1/2 of the run length, the length from which it stays in its
    interval, the optima left out on the grid's edge, the bootstrap's repeat fraction and,
    given ``parts``, each part's verdict code)."""
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
    return measured


def _fraction(steps: int, at: int) -> str:
    """The name of a refit length: "1/8", "1/4" or "1/2" of the run length (as a key)."""
    return f"1_{round(steps / at)}"


def part_codes(parts: Mapping[str, Part]) -> dict[str, float | None]:
    """``verdict_<part>``: each part's verdict as a number (:data:`PART_CODES`: 1 supports,
    0 undecided, -1 contradicted by one route, -2 by both)."""
    return {f"verdict_{k}": PART_CODES[p.verdict] for k, p in parts.items()}


def law_note(results: Mapping[str, LawResult]) -> str:
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
              for k, law in results.items()
              if law.blocks_fit is not None and law.blocks_fit != law.fit]  # fit on L, not K
    moving = [f"{k} " + " -> ".join(f"{f.slope:.3g}" for _, f in law.length_fits)
              + f" -> {law.fit.slope:.3g}" for k, law in results.items() if law.length_fits]
    if moving:
        notes.append("alpha at 1/8 -> 1/4 -> 1/2 -> all of the steps: " + ", ".join(moving))
    return "; ".join(notes)


def law_rows(results: Mapping[str, LawResult],
             measured: Mapping[str, float | None] | None = None) -> Rows:
    """The CSV: per study and effective depth, eta*'s seed mean and CI, the grid's signal
    against seed noise and chance, the optima left out on the grid's edge, and the study's
    fit (alpha at each refit length too) and verdict (its ``verdict_<study>`` code in
    ``measured``, :func:`part_codes`; '' where none)."""
    names = {code: name for name, code in PART_CODES.items()}
    verdicts = {k: names[v] for k in results
                if (v := (measured or {}).get(f"verdict_{k}")) is not None and v in names}
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
    :func:`parts_verdict` on ``parts`` (default: one grid-route part per study,
    :func:`law_parts`), the numbers of :func:`law_measured` and the note of :func:`law_note`."""
    bands: dict[str, Band] = {}
    for key in results:
        bands[f"alpha_{key}"] = LAW_BAND
        if r2_min is not None:
            bands[f"r2_{key}"] = (r2_min, None)
    parts = parts if parts is not None else law_parts(results, r2_min)
    return Judgement(reported(law_measured(results, parts)), bands,
                     parts_verdict(parts, contrast=contrast), law_note(results))


def reported(measured: Mapping[str, float | None]) -> dict[str, float | None]:
    """``measured`` with NaN as None (not measured: e.g. no fit), as the outcome reports it."""
    return {k: None if v is None or not math.isfinite(v) else v for k, v in measured.items()}


def ammup_finding(law: LawResult, probe_seeds: int, parts: int = 1) -> tuple[Finding, str]:
    """The AM-muP route's finding on the law band (laws Sec. 3.2): the probe slope's interval
    (t and seed bootstrap over init seeds) inside, outside or across it, a contradiction read
    family-wise over the claim's ``parts`` (:func:`band_finding`)."""
    low, high = law.interval
    finding, family = band_finding(law, parts)
    return (finding, f"AM-muP alpha {law.fit.slope:.3g}, interval [{low:.3g}, {high:.3g}] over "
                     f"{probe_seeds} init seeds, against band {list(LAW_BAND)}"
                     + (f", {family}" if family else ""))

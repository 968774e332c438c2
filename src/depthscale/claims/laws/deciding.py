"""The run that would decide an INCONCLUSIVE laws claim (Tables 3, 4; Sec. 3.2): per undecided
part, the seeds its interval needs to clear the law band's edge
(:func:`~depthscale.claims.verdicts.samples_to_decide`, half-widths shrinking as
1/sqrt(seeds)), or the seeds the still-moving gate's paired change needs to fall within
+-:data:`~depthscale.claims.laws.gates.MOVING_MARGIN` (Student t), or, where no seeds can
(grids flat within seed noise, too few located depths, alpha still moving), longer training:
the next scale; where the depths' scatter about the line alone keeps the interval across the
edge (``sequential.scatter_said``), more depths. Priced by the claim's declared costs and this
run's measured seconds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from depthscale.claims.laws.gates import MOVING_MARGIN, Part, change_state
from depthscale.claims.laws.law import LawResult
from depthscale.claims.laws.sequential import scatter_said
from depthscale.claims.laws.settings import LAW_BAND
from depthscale.claims.verdicts import (
    Judgement,
    RunPrice,
    SampleNeed,
    deciding_run,
    interval_finding,
    samples_to_decide,
)

__all__ = ["law_needs", "laws_deciding_run", "with_deciding_run"]


def law_needs(key: str, law: LawResult, seeds: int) -> tuple[SampleNeed | None, str]:
    """What one undecided part needs: the :class:`SampleNeed` of its alpha interval against
    the law band or, where that lies inside the band, of its seed-paired change against
    +-MOVING_MARGIN; (None, why) where seeds cannot decide it: longer training would or,
    where the depths' scatter about the line alone keeps it undecided, more depths."""
    low, high = law.interval
    if not math.isfinite(law.fit.slope) or not (math.isfinite(low) and math.isfinite(high)):
        return None, f"{key}: fewer than 3 depths locate eta*"
    if interval_finding(low, high, LAW_BAND) == "undecided":
        scattered = _scattered(key, law)
        if scattered is not None:
            return None, scattered
        return samples_to_decide(law.fit.slope, low, high, LAW_BAND, seeds), key
    c, state = law.change, change_state(law)
    if c is None or state in (None, "stopped"):
        return samples_to_decide(law.fit.slope, low, high, LAW_BAND, seeds), key
    if state == "moving" or not (math.isfinite(c.low) and math.isfinite(c.high)):
        return None, f"{key}: alpha still moves with training length, or too few depths pair"
    return samples_to_decide(c.mean, c.low, c.high, (-MOVING_MARGIN, MOVING_MARGIN),
                             c.n_seeds, t_interval=True), f"{key}'s change from half the steps"


def _scattered(key: str, law: LawResult) -> str | None:
    """Where the depths' scatter alone keeps the part's interval across the band's edge
    (:func:`~depthscale.claims.laws.sequential.scatter_said`): why, in words; else None."""
    said = scatter_said(law)
    return None if said is None else f"{key}: {said}"


def laws_deciding_run(results: Mapping[str, LawResult], parts: Mapping[str, Part], seeds: int,
                      price: RunPrice | None,
                      extra: tuple[str, SampleNeed] | None = None) -> str:
    """The reason's words for the run that decides the undecided ``parts`` (``seeds`` per
    study now): the seeds the worst-placed interval needs (:func:`law_needs`; ``extra`` another
    need, e.g. laws-widths' spread), and, for parts seeds cannot decide, longer training: the
    next scale's settings (:meth:`~depthscale.claims.verdicts.RunPrice.larger`)."""
    needs: list[tuple[str, SampleNeed]] = []
    blocked: list[str] = []
    scattered: list[str] = []
    for key, part in parts.items():
        if part.verdict != "undecided":
            continue
        need, what = law_needs(key, results[key], seeds)
        if need is None and what == _scattered(key, results[key]):
            scattered.append(what)
        elif need is None or need.needed is None:
            blocked.append(what if need is None else f"{what}: {need.said()}")
        elif not need.decided:
            needs.append((what, need))
    if extra is not None and not extra[1].decided:
        if extra[1].needed is None:
            blocked.append(f"{extra[0]}: {extra[1].said()}")
        else:
            needs.append(extra)
    said = []
    if needs:
        what, worst = max(needs, key=lambda wn: wn[1].needed or 0)
        assert worst.needed is not None
        said.append(f"{what} needs {worst.said()}; " + deciding_run(
            f"{worst.needed} seeds per study", {"seeds": worst.needed}, price,
            factor=worst.needed / seeds))
    if blocked:
        tail = ("; ".join(blocked) + ": more seeds cannot decide "
                + ("these" if len(blocked) > 1 else "it"))
        larger = price.larger() if price is not None else None
        if larger is not None:
            tail += "; " + deciding_run("longer training, the next scale's settings",
                                        larger[1], price, label=f"--scale {larger[0]}")
        elif price is not None:
            tail += "; longer training than the paper's own (no larger scale is declared)"
        said.append(tail)
    if scattered:
        said.append("; ".join(scattered) + ": more seeds cannot decide "
                    + ("these" if len(scattered) > 1 else "it"))
    return "; ".join(said)


def with_deciding_run(j: Judgement, results: Mapping[str, LawResult],
                      parts: Mapping[str, Part], seeds: int, price: RunPrice | None,
                      extra: tuple[str, SampleNeed] | None = None) -> Judgement:
    """``j`` with, where it is INCONCLUSIVE, the run that would decide it
    (:func:`laws_deciding_run`) leading its reason."""
    if j.decision is None or j.decision[0] != "INCONCLUSIVE":
        return j
    text = laws_deciding_run(results, parts, seeds, price, extra)
    return replace(j, decision=("INCONCLUSIVE", "; ".join(t for t in (text, j.decision[1])
                                                          if t)))

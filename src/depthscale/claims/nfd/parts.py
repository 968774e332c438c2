"""A claim in parts, each with its own verdict (nfd-collapse, nfd-transfer): the parts the
paper states decide the claim, the parts that are our reading of it are reported beside them
as findings and can make it neither REFUTED nor FAIL.

A stated part's REFUTED names the paper's sentence or equation it contradicts
(:func:`~depthscale.claims.nfd.series.name_contradicted`); the claim is FAIL if a stated part
FAILs (our code is suspected first), else REFUTED if one is REFUTED, else INCONCLUSIVE if one
is, else PASS. ``measured`` carries each part's code (:func:`parts_measured`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from depthscale.claims.nfd.series import name_contradicted
from depthscale.claims.verdicts import Decision, Finding, Verdict

__all__ = ["PART_CODES", "Part", "parts_decision", "parts_measured", "reading_finding"]

#: a part's verdict (stated) or finding (our reading) as a number, for ``measured``
PART_CODES: dict[str, float] = {"PASS": 1.0, "supports": 1.0, "INCONCLUSIVE": 0.0,
                                "UNSTABLE": 0.0, "undecided": 0.0, "FAIL": -1.0,
                                "contradicts": -1.0, "REFUTED": -2.0}


@dataclass(frozen=True)
class Part:
    """One part of a claim: its ``decision`` (verdict, evidence), whether the paper states it
    (``stated``; else it is our reading, reported as a finding) and the paper's sentence or
    equation it checks (``sentence``: a stated part's REFUTED opens with it)."""

    decision: Decision
    stated: bool
    sentence: str

    @property
    def named(self) -> Decision:
        """The decision, a REFUTED opening with the sentence it contradicts."""
        return name_contradicted(self.decision, self.sentence)


def reading_finding(decision: Decision) -> Finding:
    """What a part that is our reading says, as a finding: PASS supports, FAIL or REFUTED
    contradicts, anything else is undecided."""
    verdict = decision[0]
    return ("supports" if verdict == "PASS" else
            "contradicts" if verdict in ("FAIL", "REFUTED") else "undecided")


def parts_decision(parts: Mapping[str, Part]) -> Decision:
    """The claim's verdict from its stated parts (module docstring), every part named in the
    evidence with its verdict or finding; a REFUTED opens with the contradicted sentences."""
    stated = {k: p for k, p in parts.items() if p.stated}
    if not stated:
        raise ValueError("parts_decision needs at least one part the paper states")
    kinds = {p.decision[0] for p in stated.values()}
    order: tuple[Verdict, ...] = ("FAIL", "REFUTED", "UNSTABLE", "INCONCLUSIVE")
    verdict: Verdict = next((v for v in order if v in kinds), "PASS")
    said = "; ".join(
        f"{k} (paper): {p.decision[0]} [{p.named[1]}]" if p.stated else
        f"{k} (our reading, reported, not judged): {reading_finding(p.decision)} "
        f"[{p.decision[1]}]" for k, p in parts.items())
    if verdict == "REFUTED":
        refuted = [p.sentence for p in stated.values() if p.decision[0] == "REFUTED"]
        return "REFUTED", f"contradicts {'; and '.join(dict.fromkeys(refuted))}; parts: {said}"
    return verdict, f"parts: {said}"


def parts_measured(parts: Mapping[str, Part]) -> dict[str, float | None]:
    """``verdict_<part>`` of each stated part and ``finding_<part>`` of each part that is our
    reading, as :data:`PART_CODES`."""
    return {(f"verdict_{k}" if p.stated else f"finding_{k}"):
            PART_CODES[p.decision[0] if p.stated else reading_finding(p.decision)]
            for k, p in parts.items()}

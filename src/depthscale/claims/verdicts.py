"""A claim's outcome (:class:`ClaimOutcome`, :func:`claim_outcome`): the verdict, computed by
the rules of :mod:`depthscale.stats.findings` (re-exported here for the claim modules), its
figure and the data behind it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from depthscale.claims.registry import ClaimContext, ClaimOutcome
from depthscale.stats.findings import (
    ROUTE_FINDINGS,
    VERDICTS,
    Band,
    Decision,
    Finding,
    Route,
    Verdict,
    band_verdict,
    ci_band_decision,
    findings_verdict,
    finite_or_none,
    interval_finding,
    noise_gate,
    routes_verdict,
    sign_finding,
)

__all__ = [
    "ROUTE_FINDINGS",
    "VERDICTS",
    "Band",
    "ClaimOutcome",
    "Decision",
    "Finding",
    "Judgement",
    "Route",
    "Rows",
    "Verdict",
    "band_verdict",
    "ci_band_decision",
    "claim_outcome",
    "conclude",
    "findings_verdict",
    "finite_or_none",
    "interval_finding",
    "noise_gate",
    "routes_verdict",
    "sign_finding",
]


#: A claim's data as written to ``<id>.csv``: one dict a row, its keys the columns.
Rows = list[dict[str, Any]]


@dataclass(frozen=True)
class Judgement:
    """What a claim's ``judge_*`` step returns: ``measured`` (reported, and judged against
    ``bands`` fixed before running), the ``decision`` of the verdict rules where findings or
    routes decide instead of the bands (:func:`findings_verdict`, :func:`routes_verdict`,
    :func:`noise_gate`...), and a ``note`` for the reason."""

    measured: dict[str, float | None]
    bands: dict[str, Band] = field(default_factory=dict)
    decision: Decision | None = None
    note: str = ""


def claim_outcome(
    ctx: ClaimContext,
    claim_id: str,
    measured: Mapping[str, float | None],
    bands: Mapping[str, Band],
    rows: list[dict[str, Any]],
    fig: Any,
    note: str = "",
    decision: Decision | None = None,
) -> ClaimOutcome:
    """The usual end of a runner: verdict from the bands, the figure as ``<id>.png`` and the
    data behind it as ``<id>.csv`` in the output folder, a reason joining misses and ``note``.
    ``decision`` (from :func:`routes_verdict` or :func:`noise_gate`) replaces the band verdict;
    its evidence leads the reason."""
    from depthscale.io.atomic import write_csv
    from depthscale.report import figures

    verdict, band, misses = band_verdict(measured, bands)
    evidence = ""
    if decision is not None:
        verdict, evidence = decision
    return ClaimOutcome(
        verdict, dict(measured), band, "; ".join(r for r in (evidence, misses, note) if r),
        figures.save_figure(fig, ctx.path(claim_id, ".png")),
        write_csv(ctx.path(claim_id, ".csv"), rows),
    )


def conclude(ctx: ClaimContext, claim_id: str, judgement: Judgement, rows: Rows,
             fig: Any) -> ClaimOutcome:
    """How every claim runner ends: the verdict of ``judgement``, ``fig`` as
    ``<claim_id>.png`` and ``rows`` as ``<claim_id>.csv`` (:func:`claim_outcome`)."""
    return claim_outcome(ctx, claim_id, judgement.measured, judgement.bands, rows, fig,
                         judgement.note, decision=judgement.decision)

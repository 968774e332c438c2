"""What every nfd runner ends with: its :class:`Judgement` (the measured values, their bands,
the decision of the verdict rules, a note) turned into the claim's outcome, figure and CSV by
:func:`~depthscale.claims.verdicts.claim_outcome`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from matplotlib.figure import Figure

from depthscale.claims.registry import ClaimContext
from depthscale.claims.verdicts import Band, ClaimOutcome, Decision, claim_outcome

__all__ = ["Judgement", "Rows", "conclude"]

#: A claim's data as written to ``<id>.csv``: one dict a row, its keys the columns.
Rows = list[dict[str, Any]]


@dataclass(frozen=True)
class Judgement:
    """A ``judge_*`` function's result: ``measured`` (reported, and judged against ``bands``
    fixed before running), ``decision`` where findings or routes decide instead of the bands
    (:func:`~depthscale.claims.verdicts.findings_verdict`,
    :func:`~depthscale.claims.verdicts.routes_verdict`), and a ``note`` for the reason."""

    measured: dict[str, float | None]
    bands: dict[str, Band] = field(default_factory=dict)
    decision: Decision | None = None
    note: str = ""


def conclude(ctx: ClaimContext, claim_id: str, judgement: Judgement, rows: Rows,
             fig: Figure) -> ClaimOutcome:
    """The verdict of ``judgement``, ``fig`` as ``<claim_id>.png`` and ``rows`` as
    ``<claim_id>.csv`` in the claim's output folder."""
    return claim_outcome(ctx, claim_id, judgement.measured, judgement.bands, rows, fig,
                         judgement.note, decision=judgement.decision)

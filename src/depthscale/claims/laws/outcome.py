"""What crosses the laws runners' steps (settings -> measure -> judge -> draw): a
:class:`Measurement` (numbers and CSV rows, no verdict), the shared
:class:`~depthscale.claims.verdicts.Judgement` (bands and the verdict), and :func:`finish`,
which writes both with the figure through :func:`~depthscale.claims.verdicts.claim_outcome`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from matplotlib.figure import Figure

from depthscale.claims.registry import ClaimContext
from depthscale.claims.verdicts import ClaimOutcome, Judgement, claim_outcome

__all__ = ["Measurement", "finish"]


@dataclass(frozen=True)
class Measurement:
    """A claim's measured values (in report order), the rows of its CSV and a note for the
    reason (what the numbers flag without deciding: grid edges, other conventions...)."""

    measured: dict[str, float | None]
    rows: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""


def finish(ctx: ClaimContext, claim_id: str, measurement: Measurement, judgement: Judgement,
           fig: Figure) -> ClaimOutcome:
    """The outcome: the verdict, ``<id>.png`` and ``<id>.csv`` in the output folder."""
    measured = {k: None if v is None or not math.isfinite(v) else v
                for k, v in measurement.measured.items()}  # NaN: not measured (e.g. no fit)
    return claim_outcome(ctx, claim_id, measured, judgement.bands, measurement.rows,
                         fig, measurement.note, decision=judgement.decision)

"""Verdicts of claims: measured numbers judged against bands fixed before running.

The verdict is computed from measured values and bands, never asserted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from depthscale.claims.registry import ClaimContext

__all__ = ["Band", "ClaimOutcome", "band_verdict", "claim_outcome", "finite_or_none"]

#: A closed interval [low, high]; None is unbounded on that side.
Band = tuple[float | None, float | None]


@dataclass
class ClaimOutcome:
    """A claim's result. ``verdict`` is PASS/FAIL (computed) or SKIP (with ``reason``)."""

    verdict: str
    measured: dict[str, float | None] = field(default_factory=dict)
    band: dict[str, list[float | None]] = field(default_factory=dict)
    reason: str = ""
    figure: Path | None = None
    data: Path | None = None


def band_verdict(
    measured: Mapping[str, float | None], bands: Mapping[str, Band]
) -> tuple[str, dict[str, list[float | None]], str]:
    """PASS iff every banded value is finite and inside its closed band [low, high]
    (None = unbounded). Returns (verdict, bands as lists, the reasons for a FAIL)."""
    misses = []
    for name, (low, high) in bands.items():
        v = measured.get(name)
        if v is None or not math.isfinite(v):
            misses.append(f"{name} not measurable")
        elif (low is not None and v < low) or (high is not None and v > high):
            misses.append(f"{name} = {v:.4g} outside [{low}, {high}]")
    verdict = "FAIL" if misses else "PASS"
    return verdict, {k: [lo, hi] for k, (lo, hi) in bands.items()}, "; ".join(misses)


def finite_or_none(value: float) -> float | None:
    """JSON-safe measured value: None where a run produced no finite number."""
    return float(value) if math.isfinite(value) else None


def claim_outcome(
    ctx: ClaimContext,
    claim_id: str,
    measured: Mapping[str, float | None],
    bands: Mapping[str, Band],
    rows: list[dict[str, Any]],
    fig: Any,
    note: str = "",
) -> ClaimOutcome:
    """The usual end of a runner: verdict from the bands, the figure as ``<id>.png`` and the
    data behind it as ``<id>.csv`` in the output folder, a reason joining misses and ``note``."""
    from depthscale.report import figures, write_csv

    verdict, band, misses = band_verdict(measured, bands)
    return ClaimOutcome(
        verdict, dict(measured), band, "; ".join(r for r in (misses, note) if r),
        figures.save_figure(fig, ctx.path(claim_id, ".png")),
        write_csv(ctx.path(claim_id, ".csv"), rows),
    )

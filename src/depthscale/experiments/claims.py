"""The registry of reproducible claims (one per row of shared/CLAIMS.md) and their verdicts.

A claim runner gets a :class:`ClaimContext` (scale, output folder, device, data, seed, its
settings) and returns a :class:`ClaimOutcome`: measured numbers, the bands they are judged by,
and the figure and CSV it wrote. The verdict is computed from measured values and bands, never
asserted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from depthscale.errors import ConfigError

__all__ = [
    "CLAIMS",
    "PLANNED",
    "SCALES",
    "Claim",
    "ClaimContext",
    "ClaimOutcome",
    "band_verdict",
    "claim",
    "claim_outcome",
    "finite_or_none",
]

SCALES = ("quick", "full")

#: Rows of CLAIMS.md that later issues implement: id -> what it waits for.
PLANNED: dict[str, str] = {
    cid: "the open-question studies of CLAIMS.md section D (a later issue)"
    for cid in ("beyond-adam", "beyond-3layer", "beyond-transformer", "beyond-joint-limit")
}

Band = tuple[float | None, float | None]


@dataclass
class ClaimContext:
    """What a claim runner may use. ``settings`` are the claim's settings at this scale."""

    scale: str
    out_dir: Path
    device: str
    data_dir: Path | None
    seed: int
    settings: dict[str, Any]
    progress: Callable[[int], None] = lambda _k: None
    set_total: Callable[[int], None] = lambda _k: None
    #: processes a claim's sweeps may use (``depthscale reproduce --workers``)
    workers: int = 1

    def path(self, claim_id: str, suffix: str) -> Path:
        """Where this claim writes its figure (``.png``) or data (``.csv``)."""
        return self.out_dir / f"{claim_id}{suffix}"


@dataclass
class ClaimOutcome:
    """A claim's result. ``verdict`` is PASS/FAIL (computed) or SKIP (with ``reason``)."""

    verdict: str
    measured: dict[str, float | None] = field(default_factory=dict)
    band: dict[str, list[float | None]] = field(default_factory=dict)
    reason: str = ""
    figure: Path | None = None
    data: Path | None = None


@dataclass(frozen=True)
class Claim:
    """One row of CLAIMS.md: id, paper, what it says, and its runner with quick/full settings."""

    id: str
    paper: str
    title: str
    run: Callable[[ClaimContext], ClaimOutcome]
    settings: Mapping[str, Mapping[str, Any]]


CLAIMS: dict[str, Claim] = {}


def claim(
    claim_id: str,
    paper: str,
    title: str,
    *,
    quick: Mapping[str, Any],
    full: Mapping[str, Any],
    smoke: Mapping[str, Any],
) -> Callable[[Callable[[ClaimContext], ClaimOutcome]], Callable[[ClaimContext], ClaimOutcome]]:
    """Decorator that registers a claim runner under ``claim_id``.

    ``smoke`` are tiny settings (seconds, on small data) with which the test suite runs every
    registered runner end to end; they are never a scale a user selects.
    """

    Runner = Callable[[ClaimContext], ClaimOutcome]

    def register(fn: Runner) -> Runner:
        if claim_id in CLAIMS:
            raise ConfigError(f"claim {claim_id!r} registered twice")
        CLAIMS[claim_id] = Claim(
            claim_id, paper, title, fn, {"quick": quick, "full": full, "smoke": smoke}
        )
        return fn

    return register


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

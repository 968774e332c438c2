"""The registry of reproducible claims, one per row of shared/CLAIMS.md.

A claim runner gets a :class:`ClaimContext` (scale, output folder, device, data, seed, its
settings) and returns a :class:`~depthscale.claims.verdicts.ClaimOutcome`
(:mod:`depthscale.claims.verdicts` computes it from measured values and bands).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from depthscale.claims.verdicts import ClaimOutcome
from depthscale.errors import ConfigError

__all__ = ["CLAIMS", "PLANNED", "SCALES", "Claim", "ClaimContext", "claim"]

SCALES = ("quick", "full")

#: Rows of CLAIMS.md that later issues implement: id -> what it waits for.
PLANNED: dict[str, str] = {
    cid: "the open-question studies of CLAIMS.md section D (a later issue)"
    for cid in ("beyond-adam", "beyond-3layer", "beyond-transformer", "beyond-joint-limit")
}


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

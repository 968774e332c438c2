"""What a benchmark returns: our time against a baseline run in the same process."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["BenchResult", "best_time"]


@dataclass(frozen=True)
class BenchResult:
    """One benchmark: ``ratio = baseline_seconds / ours_seconds`` (> 1: we are faster).

    ``extra`` holds accuracy figures and settings (errors, sizes, which baseline ran).
    """

    name: str
    baseline: str
    baseline_seconds: float
    ours_seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.baseline_seconds / self.ours_seconds

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ratio"] = self.ratio
        return out


def best_time(fn: Callable[[], object], repeats: int = 5, warmup: int = 1) -> float:
    """Minimum wall time of ``fn()`` over ``repeats`` runs after ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best

"""What would decide an undecided interval: how many samples (seeds, repeats) an interval that
straddles a band edge needs before it clears that edge, its half-width shrinking as
1/sqrt(samples) at the same spread (:func:`samples_to_decide`).

The claims price the run this names (:func:`depthscale.claims.verdicts.deciding_run`), so an
INCONCLUSIVE reason says which run would decide it and what it would cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from depthscale.stats.findings import Band

__all__ = ["SampleNeed", "samples_to_decide"]


@dataclass(frozen=True)
class SampleNeed:
    """What an interval needs to clear a band edge: ``n`` samples now, ``needed`` samples
    (``n`` where the interval crosses no edge; None where more samples cannot decide, the
    estimate being on the edge or not finite), the ``edge`` that decides, the estimate's
    ``distance`` to it and the interval's ``half_width`` towards it."""

    n: int
    needed: int | None
    edge: float | None
    distance: float
    half_width: float

    @property
    def decided(self) -> bool:
        """Whether the interval already crosses no band edge."""
        return self.needed == self.n

    def said(self, samples: str = "seeds") -> str:
        """In words, with the numbers it comes from."""
        if self.decided:
            return f"decided at {self.n} {samples}"
        if self.needed is None:
            return (f"the estimate lies on the band edge {self.edge:.3g} (distance "
                    f"{self.distance:.3g}): more {samples} cannot decide it")
        return (f"{self.needed} {samples} (now {self.n}): the interval's half-width "
                f"{self.half_width:.3g} towards the edge {self.edge:.3g}, shrinking as "
                f"1/sqrt({samples}), falls below the estimate's distance {self.distance:.3g}")


def _needed(n: int, half: float, distance: float, t_interval: bool, level: float,
            cap: int) -> int | None:
    """The fewest samples m > n with half-width(m) < distance (None past ``cap``)."""
    from scipy import stats

    if not (math.isfinite(half) and math.isfinite(distance)) or distance <= 0:
        return None
    if not t_interval or n < 2:
        m = math.floor(n * (half / distance) ** 2) + 1
        return max(m, n + 1) if m <= cap else None
    q = 1.0 - (1.0 - level) / 2.0
    spread = half * math.sqrt(n) / float(stats.t.ppf(q, n - 1))
    # t(m - 1) >= z, so no m below the z rule's count clears the edge: start there
    m = max(n + 1, math.ceil((float(stats.norm.ppf(q)) * spread / distance) ** 2))
    while m <= cap:
        if float(stats.t.ppf(q, m - 1)) * spread / math.sqrt(m) < distance:
            return m
        m += 1
    return None


def samples_to_decide(estimate: float, low: float, high: float, band: Band, n: int, *,
                      t_interval: bool = False, level: float = 0.95,
                      cap: int = 1_000_000) -> SampleNeed:
    """How many samples the interval [low, high] around ``estimate`` from ``n`` samples needs
    to cross none of ``band``'s edges (None = unbounded), at the same spread: per edge inside
    the interval, its half-width h towards the edge against the estimate's distance d; the
    z rule n' = floor(n (h/d)^2) + 1, or with ``t_interval`` (a Student-t interval over the
    samples at ``level``) the fewest n' with t(n'-1) s / sqrt(n') < d, s = h sqrt(n) / t(n-1).
    The edge needing the most decides; ``needed`` None where d = 0 or past ``cap``."""
    if n < 1:
        raise ValueError(f"samples_to_decide needs n >= 1, got {n}")
    worst: SampleNeed | None = None
    for edge in band:
        if edge is None or not low < edge < high:
            continue
        half = (estimate - low) if edge <= estimate else (high - estimate)
        distance = abs(estimate - edge)
        need = SampleNeed(n, _needed(n, half, distance, t_interval, level, cap), edge,
                          distance, half)
        if worst is None or need.needed is None or (
                worst.needed is not None and need.needed > worst.needed):
            worst = need
            if need.needed is None:
                break
    return worst if worst is not None else SampleNeed(n, n, None, math.nan, math.nan)

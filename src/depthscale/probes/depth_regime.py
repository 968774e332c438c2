"""Which depths of a sweep are in the residual regime, read from the structure before training.

CompleteP's depth statements (the branch multiplier 1/L, Dey et al. 2025; the Euler picture of
nfd Eq. 1 and Prop. 2) are about a stream made by identity-skip additions h + f(h)/L. A
*projected* addition, whose skip path holds a weight of its own (a ResNet's 1x1 conv + BN
opening a stage), restarts the stream from a Theta(1) map of it. The coordinate check's
layer means pool every addition, so while projected additions are a large share of them the
pooled slope mixes two populations whose proportions change with depth (measured in
docs/how-it-works.md, "The depth regime"). A depth is *in the regime* when at most
:data:`MAX_PROJECTED` of its residual additions are projected; a model without projected
additions is in it at every depth."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from depthscale.errors import ConfigError
from depthscale.param.inspect import Structure

__all__ = ["MAX_PROJECTED", "DepthRegime", "depth_regime", "projected_additions"]

#: The largest share of projected residual additions at which a depth is in the regime.
MAX_PROJECTED = 0.25
#: How far past the grid's largest depth a depth in the regime is looked for.
_SEARCH = 4


def projected_additions(st: Structure) -> tuple[int, int]:
    """(projected additions, residual additions) of a structure: an addition is projected
    when its skip path holds a unit that no branch holds (a projection shortcut, role
    ``hidden``); parallel branches summed into one stream (Falcon) are not projections."""
    in_branches = {u for b in st.branches for u in b.modules}
    return sum(bool(set(b.shortcut) - in_branches) for b in st.branches), len(st.branches)


def _in_regime(counts: tuple[int, int] | None) -> bool:
    return counts is None or counts[1] == 0 or counts[0] <= MAX_PROJECTED * counts[1]


@dataclass(frozen=True)
class DepthRegime:
    """The depths asked, those kept (in the regime) and, per depth whose structure was read,
    ``(projected, residual additions)``."""

    asked: tuple[int, ...]
    kept: tuple[int, ...]
    counts: Mapping[int, tuple[int, int]]

    @property
    def dropped(self) -> tuple[int, ...]:
        return tuple(d for d in self.asked if d not in self.kept)

    def why(self) -> str:
        """Why the dropped depths are outside the regime."""
        said = ", ".join(f"{d} ({self.counts[d][0]} of {self.counts[d][1]})"
                         for d in self.dropped)
        return (f"more than {MAX_PROJECTED:g} of their residual additions have a projection "
                f"shortcut (depth: projected of all: {said})")

    def note(self) -> str:
        """What was dropped and why (empty when every depth is kept)."""
        if not self.dropped:
            return ""
        return (f"depths {list(self.dropped)} left out of the depth fit, outside the residual "
                f"regime: {self.why()}; fitted over {list(self.kept)}")


def depth_regime(
    depths: Sequence[int], structures: Mapping[int, Structure | None],
    build: Callable[[int], Structure | None] | None = None, *, minimum: int = 2,
) -> DepthRegime:
    """The depths of ``depths`` in the regime (module docstring), from each depth's
    ``structures`` (None: not read, kept). Fewer than ``minimum`` kept is a ConfigError that
    names a grid in the regime: the grid scaled by the smallest depth above it in the regime,
    found with ``build(depth) -> Structure`` up to :data:`_SEARCH` times the largest depth."""
    counts = {d: projected_additions(s) for d, s in structures.items() if s is not None}
    kept = tuple(d for d in depths if _in_regime(counts.get(d)))
    regime = DepthRegime(tuple(depths), kept, counts)
    if len(kept) >= minimum:
        return regime
    low = min(depths)
    start = next((d for d in range(low + 1, _SEARCH * max(depths) + 1)
                  if build is not None and _in_regime(_read(build, d))), None)
    grid = [start * d // low for d in sorted(depths)] if start is not None else []
    fix = ("" if start is None else
           f"; pass depths={grid} (--depths {','.join(map(str, grid))}), the grid scaled to "
           f"start at {start}, the smallest depth in the regime")
    raise ConfigError(
        f"only {list(kept)} of the depths {list(depths)} are in the residual regime, and a "
        f"depth slope needs {minimum} depths: at {list(regime.dropped)} {regime.why()}{fix}")


def _read(build: Callable[[int], Structure | None], depth: int) -> tuple[int, int] | None:
    with torch.random.fork_rng(devices=[]):
        st = build(depth)
    return None if st is None else projected_additions(st)


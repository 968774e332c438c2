"""nfd-fig2's reading of the T sweep (nfd Fig. 2a): which T is best, and whether the largest
T is worse, from mean losses and diverged fractions."""

from __future__ import annotations

import math

from depthscale.claims.nfd.horizon import fig2_best


def test_fig2_best_T_skips_horizons_where_a_seed_diverged() -> None:
    """nfd Fig. 2a read per T: a T where a seed diverged is never the best, and makes the
    largest T worse than the best even when its surviving seeds' mean loss is lowest."""
    # seeds 1 and 2 of the quick run: T = 32 lowest mean loss over 2 of 3 seeds, 1 diverged
    losses = [1.30, 1.20, 1.10, 1.00, 0.98, 0.96, 0.95]
    assert fig2_best(losses, [0, 0, 0, 0, 0, 0, 1 / 3]) == (5, True)
    # no divergence: the plain argmin; the largest T worse only if its loss is higher
    assert fig2_best(losses, [0] * 7) == (6, False)
    assert fig2_best([1.3, 0.9, 1.0], [0, 0, 0]) == (1, True)
    # T does not enter the net (the control): equal losses, the first T is best, not interior
    assert fig2_best([1.0, 1.0, 1.0], [0, 0, 0]) == (0, False)
    # nothing stable: the largest T, not worse than itself
    assert fig2_best([math.nan, math.nan], [1, 1]) == (1, False)

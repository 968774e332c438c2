"""A coordinate check cannot pass a run that blew up (issue 24): non-finite sizes are counted
and named, never dropped from the fits."""

from __future__ import annotations

import math

import torch

from depthscale.models import build
from depthscale.probes import coord_check

G = torch.Generator().manual_seed(0)
X = torch.randn(32, 20, generator=G)
Y = torch.randint(0, 10, (32,), generator=G)


def _make(w: int, d: int, s: int):  # type: ignore[no-untyped-def]
    return build("resnet1", "completep", input_shape=(20,), n_out=10, width=w, depth=d, seed=s)


def test_a_blown_up_run_is_not_a_pass_and_the_count_is_named() -> None:
    rep = coord_check(_make, X, Y, widths=[16, 32, 64], depths=[2, 4, 8], base_width=16,
                      base_depth=2, lr=1e12, seeds=[0, 1], steps=2)
    blown = [f for f in rep.fits if not math.isfinite(f.slope)]
    assert blown, rep.table()
    assert rep.verdict != "PASS", rep.evidence
    assert "not finite" in rep.evidence and "blew up" in rep.evidence
    assert any("not finite" in f.why for f in blown)


def test_the_same_check_at_a_sane_rate_has_no_blown_series() -> None:
    rep = coord_check(_make, X, Y, widths=[16, 32, 64], base_width=16, base_depth=2, lr=0.1,
                      seeds=[0, 1], steps=2)
    assert all(math.isfinite(f.slope) or math.isnan(f.slope) for f in rep.fits)
    assert "not finite" not in rep.evidence


def test_a_factory_that_ignores_the_width_is_refused() -> None:
    import pytest

    from depthscale.errors import ConfigError

    def fixed_width(w: int, d: int, s: int):  # type: ignore[no-untyped-def]
        return _make(16, d, s)

    with pytest.raises(ConfigError, match="does not build the width it is given"):
        coord_check(fixed_width, X, Y, widths=[16, 32], base_width=16, base_depth=2, lr=0.1,
                    seeds=[0])

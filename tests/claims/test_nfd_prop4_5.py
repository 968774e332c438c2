"""nfd-prop4-5's Prop. 5 half: C_t' - C_t is PSD for any kernel flow whose drift is a Gram
matrix E[phi phi'], right or wrong, so the gap is also checked against a second route (the
covariance ODE, ``method="ode"``) to 1e-6. The judge is pure: made-up rows either side."""

from __future__ import annotations

from pathlib import Path

import pytest

from depthscale.claims import CLAIMS
from depthscale.claims.nfd import positivity
from depthscale.claims.registry import ClaimContext, read_settings


def _rows(gap_eig: float, route: float) -> list[positivity.EigenRow]:
    return [positivity.EigenRow("C_t", 1.0, "", 0.1, 0.0),
            positivity.EigenRow("C_t' - C_t", 1.0, 2.0, gap_eig, "", route)]


@pytest.mark.parametrize(("gap_eig", "route", "verdict"), [
    (0.01, 0.9e-6, "PASS"), (0.01, 1.1e-6, "FAIL"), (-2e-8, 1e-9, "FAIL")])
def test_prop5_bands_on_made_up_rows(gap_eig: float, route: float, verdict: str,
                                     tmp_path: Path) -> None:
    """A PSD gap that differs from the ODE route's by more than 1e-6 fails, as does a gap
    whose smallest eigenvalue is below -1e-8."""
    judged = positivity.judge_prop4_5(_rows(gap_eig, route))
    assert judged.bands["nested_gap_route_difference"] == (None, 1e-6)
    inside = all((lo is None or judged.measured[k] >= lo) and  # type: ignore[operator]
                 (hi is None or judged.measured[k] <= hi)  # type: ignore[operator]
                 for k, (lo, hi) in judged.bands.items())
    assert inside == (verdict == "PASS")


def test_smoke_gaps_are_the_ode_routes_to_rounding(tmp_path: Path) -> None:
    """At smoke size (6 points, t in 0.5, 1, 2) the relu-flow path's gaps equal the covariance
    ODE's to 1e-9 and are PSD; the claim passes."""
    c = CLAIMS["nfd-prop4-5"]
    ctx = ClaimContext("quick", tmp_path, "cpu", None, 0, dict(c.settings["smoke"]))
    rows = positivity.measure_prop4_5(
        ctx, read_settings(positivity.Prop45Settings, ctx.settings))
    gaps = [r for r in rows if r.kind != "C_t"]
    assert len(gaps) == 3
    assert all(isinstance(r.route_difference, float) and r.route_difference < 1e-9
               for r in gaps)
    assert all(r.min_eigenvalue > 0 for r in gaps)

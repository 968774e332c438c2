"""The slopes a transferring parameterization must meet in a coordinate check
(:func:`~depthscale.probes.coord_check.coord_check`): per (layer type, quantity, axis) a band
around the exponent its recipe implies, read from the rule table (muP: Yang & Hu 2021; nfd
Eq. 1, 6 and Prop. 2; CompleteP's 1/L branches)."""

from __future__ import annotations

import math
from dataclasses import replace

from depthscale.errors import ConfigError
from depthscale.param import Plan
from depthscale.stats.findings import Band

__all__ = ["FLAT", "WEIGHT", "expected_bands"]

#: |slope| <= 0.15: a size that the recipe keeps Theta(1).
FLAT = 0.15


def _depth_exponent(plan: Plan, role: str) -> float | None:
    """How the init size a*b of ``role`` scales with L in ``plan``'s recipe (the branch's
    depth multiplier: -1/2 for depth-muP, -1 for CompleteP, 0 without one)."""
    try:
        rule = plan.rule(role)
    except ConfigError:
        return None
    if rule.init != "normal":
        return None
    size = [rule.a(d) * rule.b(d) for d in (replace(plan, depth=plan.depth).dims(plan.width),
                                             replace(plan, depth=2 * plan.depth).dims(
                                                 plan.width))]
    return math.log2(size[1] / size[0]) if min(size) > 0 else None


#: the key of :func:`expected_bands` for every weight's own update vs width
WEIGHT = "weight"


def expected_bands(plan: Plan) -> dict[tuple[str, str, str], tuple[Band, str]]:
    """The slope bands a transferring parameterization must meet, (layer type, quantity, axis)
    -> (band, reason), with the tolerance |slope - expected| <= :data:`FLAT`.

    Against width (muP, Yang & Hu 2021; nfd Eq. 1): every activation and update is Theta(1),
    except the output at init, which may shrink (mean-field muP: logits ~ n^-1/2) but not grow;
    and every weight's aligned own update ``|W^(k) - W^(0)| |x|`` is Theta(1) (muP's maximal
    update, Yang & Hu 2021; TP-V), under the key ``("weight", "own_aligned", "width")`` (the
    own update itself, ``W^(k) x - W^(0) x``, is reported without a band: see the module
    docstring).
    Against depth (nfd Eq. 1 and 6; CompleteP): the input, internal layers and output are
    Theta(1) at init and after the steps; so is the stream at the last block, h_L -> h_T (nfd
    Eq. 1, Prop. 2: the stream is Theta(1) at a fixed relative depth l/L, here l = L); each
    branch's output and its update scale as the recipe's branch multiplier, L^e with e read
    from the rule table (depth-muP -1/2, CompleteP -1; a recipe without one, such as SP or muP,
    is judged by the stream). The stream at relative depth ~1/2 is reported without a band.
    """
    flat: Band = (-FLAT, FLAT)
    bands: dict[tuple[str, str, str], tuple[Band, str]] = {}
    for axis in ("width", "depth"):
        for t in ("input", "hidden", "branch_in", "output"):
            for q in ("act", "update"):
                bands[(t, q, axis)] = (flat, f"Theta(1) in {axis}")
        for q in ("act", "update"):
            bands[("stream", q, axis)] = (flat, f"Theta(1) in {axis} at the last block (nfd "
                                                "Eq. 1, Prop. 2: h_L -> h_T at l/L = 1)")
        bands[("output", "act", axis)] = ((None, FLAT), f"output at init must not grow with "
                                                        f"{axis}")
        for t in ("branch", "branch_out"):
            for q in ("act", "update"):
                bands[(t, q, "width")] = (flat, "Theta(1) in width")
    bands[(WEIGHT, "own_aligned", "width")] = (
        flat, "muP: each weight's own update is Theta(1) in width when its change aligns with "
              "its input, |W^(k) - W^(0)| |x| (the maximal update; Yang & Hu 2021, TP-V)")
    for t in ("branch", "branch_out"):
        e = _depth_exponent(plan, t)
        if e is None:
            continue
        for q in ("act", "update"):
            bands[(t, q, "depth")] = ((e - FLAT, e + FLAT),
                                      f"branch multiplier of {plan.recipe.name}: L^{e:g}")
    return bands

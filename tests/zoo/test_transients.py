"""Finite-size transients that the zoo's sweeps step around, measured so that the choice stays
honest: where a model's sweep starts above the zoo's default sizes, a test here shows that at
the default sizes a correct plan's slope is still moving towards the band (a slope that does
not move would be a plan error, not a transient)."""

from __future__ import annotations

from typing import Any

import pytest
from architectures import BY_NAME, Arch
from test_zoo import ten_lines
from torch import nn

import depthscale as ds


def _output_update_slope(arch: Arch, widths: tuple[int, int], seeds: int,
                         recipe: str = "completep") -> Any:
    """The fit of the logits' one-step update vs width over ``widths`` (depth 1, Adam 3e-3,
    as test_zoo's (c)) under ``recipe``, ``base=`` the narrower model."""
    data = arch.data()
    x, y = data.x_train[:8], data.y_train[:8]

    def make(width: int, depth: int, seed: int) -> tuple[nn.Module, ds.param.Plan]:
        model = arch.tensor_model(arch.build(width, depth, seed))
        base = arch.tensor_model(arch.build(min(widths), depth, seed))
        return model, ten_lines(arch, model, x, recipe, seed=seed, base=base)

    rep = ds.probes.coord_check(make, x, y, widths=widths, depths=(), base_width=min(widths),
                                base_depth=1, lr=3e-3, optimizer="adam", seeds=range(seeds))
    return rep.fit("output", "update", "width")


def test_mamba2_output_update_flattens_with_width() -> None:
    """hf-mamba2's coordinate check runs at widths 64-256 (arch_moe_ssm.py): at 32-128 a
    CompleteP plan reads FAIL on the output's update (-0.28 [-0.37, -0.18] at 3 seeds, untied
    head), as the gated RMSNorm before out_proj (gain ~1/0.35 at every width) enlarges the
    part of the update not aligned with the readout, which falls as n^-1/2. A transient: over
    32 -> 64 the slope's interval lies below 0, over 256 -> 512 inside the band (3 seeds: -0.29
    [-0.48, -0.10] and -0.07 [-0.15, +0.00]). A plan with a width error keeps its slope: SP's
    lies above the band there."""
    arch = BY_NAME["hf-mamba2"]
    narrow = _output_update_slope(arch, (32, 64), seeds=3)
    wide = _output_update_slope(arch, (256, 512), seeds=3)
    assert narrow.ci_high < 0, narrow.text()
    assert wide.finding == "supports", wide.text()
    control = _output_update_slope(arch, (256, 512), seeds=3, recipe="sp")
    assert control.ci_low > wide.ci_high, (control.text(), wide.text())


@pytest.mark.slow
def test_mamba2_depth_sweep_past_the_transient() -> None:
    """hf-mamba2 over 16-64 blocks at width 32 (2 seeds, as test_zoo's (c)): CompleteP not
    FAIL. Over 4-16 blocks (width 64) it FAILs on the stream's update (-0.30 [-0.37, -0.23]):
    the blocks' gated RMSNorm makes the Euler error of the first blocks large (width 32, 2
    seeds, untied: the stream's update 0.0104, 0.0086, 0.0072, 0.0069, 0.0066 at 4-64 blocks;
    with the norm's division removed 0.0048, 0.0045, 0.0042 at 4-16)."""
    arch = BY_NAME["hf-mamba2"]
    data = arch.data()
    x, y = data.x_train[:8], data.y_train[:8]

    def make(width: int, depth: int, seed: int) -> tuple[nn.Module, ds.param.Plan]:
        model = arch.tensor_model(arch.build(width, depth, seed))
        return model, ten_lines(arch, model, x, "completep", seed=seed,
                                base=arch.tensor_model(arch.build(width, depth, seed)))

    rep = ds.probes.coord_check(make, x, y, depths=(16, 32, 64), base_width=32, base_depth=1,
                                lr=3e-3, optimizer="adam", seeds=range(2))
    assert rep.verdict != "FAIL", rep.evidence

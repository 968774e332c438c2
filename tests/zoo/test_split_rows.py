"""Readout-like rows inside one weight, on a real model (issue 40): hf-mamba's x_proj is split
into dt (width/16 rows, growing) and B, C (state size 8 each, fixed). Planned as hidden rows,
an SGD step moves B and C by a factor that grows with width; found by comparison with the
model at the base width and given the recipe's output-rule gradient scale
(:mod:`depthscale.param.usage`), x_proj's update no longer contradicts CompleteP's band.
Widths 64-256: at 32 the dt projection has rank 2, a finite-size transient of its own."""

from __future__ import annotations

from typing import Any

import pytest
from architectures import BY_NAME
from test_zoo import factory

import depthscale as ds
import depthscale.param.usage as usage_module

X_PROJ = "model.backbone.layers.*.mixer.x_proj"


def _sgd_check(seeds: int = 3) -> Any:
    arch = BY_NAME["hf-mamba"]
    data = arch.data()
    x, y = data.x_train[:8], data.y_train[:8]
    return ds.probes.coord_check(factory(arch, "completep", x), x, y, widths=(64, 128, 256),
                                 depths=(), base_width=64, base_depth=1, lr=0.1,
                                 optimizer="sgd", seeds=range(seeds))


def _x_proj(rep: Any) -> str:
    return str(rep.fit(X_PROJ, "own_aligned", "width").finding)


def test_mamba_x_proj_keeps_its_sgd_band_with_readout_rows() -> None:
    """Measured (3 seeds): x_proj -0.12 [-0.32, +0.08] with the rows found, +0.59 [+0.22,
    +0.87] without them (the control below)."""
    rep = _sgd_check()
    assert rep.verdict != "FAIL", rep.evidence
    assert _x_proj(rep) != "contradicts", rep.evidence


def test_mamba_x_proj_fails_its_sgd_band_without_readout_rows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: no row found fixed, the whole matrix planned as hidden."""
    monkeypatch.setattr(usage_module, "fixed_rows", lambda blocks, base_blocks: ())
    rep = _sgd_check()
    assert rep.verdict == "FAIL"
    assert _x_proj(rep) == "contradicts", rep.evidence

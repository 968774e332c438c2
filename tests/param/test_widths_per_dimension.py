"""Dimensions that do not grow with width, found without ``base=`` (issue 40): guessed from the
sizes with a warning that names them, or found by comparison with the model at another width
(``auto_base``, what coord_check, lr_transfer_check and the CLI's factories use). A finite
dimension gets no width factor (muP's definition; TP-V Sec. 7): its rule is evaluated at n = 1.
The expected values are exact (completep, Adam, absorbed form c_adam x a)."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from depthscale.param import plan
from depthscale.param.widths import auto_base


class DWBlockNet(nn.Module):
    """Stem, one residual block x + pw(dw(x)) with a 3x3 depthwise conv, pooled head."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(1, c, 2, stride=2)
        self.dw = nn.Conv2d(c, c, 3, padding=1, groups=c)
        self.pw = nn.Conv2d(c, c, 1)
        self.head = nn.Linear(c, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = x + self.pw(F.gelu(self.dw(x)))
        return self.head(x.mean((2, 3)))


class TokenMixer(nn.Module):
    """Embedding of ``patches`` tokens, one token-mixing branch (patches -> 5 -> patches)."""

    def __init__(self, c: int, patches: int = 7) -> None:
        super().__init__()
        self.embed = nn.Linear(4, c)
        self.norm = nn.LayerNorm(c)
        self.tok1, self.tok2 = nn.Linear(patches, 5), nn.Linear(5, patches)
        self.head = nn.Linear(c, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        h = self.tok2(F.gelu(self.tok1(self.norm(x).transpose(1, 2)))).transpose(1, 2)
        return self.head((x + h).mean(1))


def _c_adam(model: nn.Module, width: int, **apply: object) -> tuple[dict[str, float], list[str]]:
    p = plan("completep", width=width, depth=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p.apply(model, seed=0, **apply)  # type: ignore[arg-type]
    said = [str(w.message) for w in caught if "NOT growing" in str(w.message)]
    return {s.name: s.c_adam for s in p.resolve(model) if s.c_adam is not None}, said


def test_a_depthwise_kernel_gets_no_width_factor_without_base_and_apply_says_so() -> None:
    x = torch.randn(2, 1, 8, 8)
    for c in (16, 32, 64):
        lrs, said = _c_adam(DWBlockNet(c), c, example_input=x)
        # branch_in a = 1/sqrt(9), c_adam 1/sqrt(n) frozen at n = 1: 1/3 at every width
        # (before: 1/(3 sqrt(c)), falling with width)
        assert lrs["dw.weight"] == pytest.approx(1 / 3, rel=1e-12)
        # the 1x1 conv's fan-in grows: a = 1/sqrt(c), c_adam = 1/sqrt(c): 1/c
        assert lrs["pw.weight"] == pytest.approx(1 / c, rel=1e-12)
        assert len(said) == 1 and "dw.weight (fan-in 1 channel(s) x kernel 3x3)" in said[0]
        assert "pw.weight" not in said[0] and "base=" in said[0]


def test_a_token_mixing_matrix_is_finite_in_both_dims_without_base() -> None:
    x = torch.randn(2, 7, 4)
    for c in (16, 32):
        lrs, said = _c_adam(TokenMixer(c), c, example_input=x)
        assert lrs["tok1.weight"] == pytest.approx(1 / math.sqrt(7), rel=1e-12)  # was /sqrt(c)
        assert lrs["tok2.weight"] == pytest.approx(1 / math.sqrt(5), rel=1e-12)  # T/L = 1
        assert "tok1.weight (fan-in 7, fan-out 5)" in said[0]
        assert "tok2.weight (fan-in 5, fan-out 7)" in said[0]


def test_auto_base_finds_a_finite_dim_the_sizes_alone_take_as_growing() -> None:
    """16 patches at width 32 are width/2, which the sizes alone take as growing; compared with
    the model at width 64 (still 16 patches) they are finite: no width factor, no warning."""
    x = torch.randn(2, 16, 4)
    guessed, said = _c_adam(TokenMixer(32, 16), 32, example_input=x)
    assert guessed["tok1.weight"] == pytest.approx(1 / math.sqrt(16 * 32), rel=1e-12)
    assert "tok2.weight (fan-in 5)" in said[0] and "tok1" not in said[0]
    with auto_base(lambda: TokenMixer(64, 16)):
        found, said = _c_adam(TokenMixer(32, 16), 32, example_input=x)
    assert found["tok1.weight"] == pytest.approx(1 / 4, rel=1e-12)  # 1/sqrt(16), n = 1
    assert found["embed.weight"] == pytest.approx(guessed["embed.weight"], rel=1e-12)
    assert said == []


def test_explicit_base_keeps_mups_base_shapes() -> None:
    """base= freezes the finite dims at the base's width (mup's base shapes), as before."""
    x = torch.randn(2, 1, 8, 8)
    lrs, said = _c_adam(DWBlockNet(64), 64, example_input=x, base=DWBlockNet(16))
    assert lrs["dw.weight"] == pytest.approx(1 / (3 * 4), rel=1e-12)  # c_adam 1/sqrt(16)
    assert said == []

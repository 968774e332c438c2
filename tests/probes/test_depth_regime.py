"""The depth regime of the coordinate check (depthscale.probes.depth_regime): depths at which
more than a quarter of the residual additions have a projection shortcut are left out of the
depth fit before any training, said in the report; fewer than two left is a ConfigError that
names depths in the regime. Tiny residual MLPs: two stages of ``depth`` blocks, the second
opened by a block whose skip is a learned matrix (projected share 1/(2 depth)), or not."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from torch import nn

import depthscale as ds
from depthscale.errors import ConfigError
from depthscale.probes.depth_regime import MAX_PROJECTED, projected_additions

G = torch.Generator().manual_seed(0)
X = torch.randn(32, 12, generator=G)
Y = torch.randint(0, 5, (32,), generator=G)


class Block(nn.Module):
    def __init__(self, n: int, projected: bool) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(n, n, bias=False), nn.Linear(n, n, bias=False)
        self.skip = nn.Linear(n, n, bias=False) if projected else None

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        s = h if self.skip is None else self.skip(h)
        return s + self.fc2(torch.relu(self.fc1(h)))


class Staged(nn.Module):
    def __init__(self, n: int, depth: int, projected: bool) -> None:
        super().__init__()
        self.inp, self.out = nn.Linear(12, n, bias=False), nn.Linear(n, 5, bias=False)
        self.blocks = nn.Sequential(*(Block(n, projected and i == depth)
                                      for i in range(2 * depth)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.blocks(self.inp(x)))


class Parallel(nn.Module):
    """x + a(x) + b(x): two parallel branches, no projection."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.inp, self.a, self.b = (nn.Linear(12, n), nn.Linear(n, n), nn.Linear(n, n))
        self.out = nn.Linear(n, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        return self.out(h + self.a(h) + self.b(h))


def factory(projected: bool, wrong_depth: bool = False) -> Any:
    def make(width: int, depth: int, seed: int) -> Any:
        torch.manual_seed(seed)
        model = Staged(width, depth, projected)
        st = ds.param.inspect(model, X)
        if wrong_depth:  # the branch multiplier of depth 1 at every depth: exponent 0, not -1
            p = ds.param.plan("completep", width=st.width, depth=1)
            with warnings.catch_warnings():  # every role by hand: the plan's depth is used
                warnings.simplefilter("ignore")
                p.apply(model, roles=st.roles, example_input=X, seed=seed)
            return model, p, st
        p = ds.param.plan("completep", st)
        p.apply(model, structure=st, example_input=X, seed=seed)
        return model, p, st
    return make


def check(make: Any, depths: tuple[int, ...]) -> ds.probes.CoordReport:
    return ds.probes.coord_check(make, X, Y, depths=depths, base_width=32, lr=3e-3,
                                 optimizer="adam", seeds=range(2))


def test_projected_additions_counts_projection_shortcuts_only() -> None:
    assert projected_additions(ds.param.inspect(Staged(16, 2, True), X)) == (1, 4)
    assert projected_additions(ds.param.inspect(Staged(16, 2, False), X)) == (0, 4)
    assert projected_additions(ds.param.inspect(Parallel(16), X)) == (0, 2)
    assert MAX_PROJECTED == 0.25


def test_depths_outside_the_regime_are_left_out_and_said() -> None:
    rep = check(factory(projected=True), (1, 2, 4))
    assert {p.depth for p in rep.points} == {2, 4}  # depth 1 (1 of 2 projected) not trained
    assert "[1] left out" in rep.depth_regime and "1 (1 of 2)" in rep.depth_regime
    assert rep.depth_regime in rep.evidence
    assert rep.summary()["depth_regime"] == rep.depth_regime
    assert rep.fit("stream", "act", "depth").sizes == (2, 4)


def test_too_few_depths_in_the_regime_is_refused_with_a_grid_that_works() -> None:
    with pytest.raises(ConfigError, match=r"depths=\[2, 4\] \(--depths 2,4\)"):
        check(factory(projected=True), (1, 2))


def test_a_model_without_projections_keeps_every_depth() -> None:
    rep = check(factory(projected=False), (1, 2, 4))
    assert rep.depth_regime == ""
    assert {p.depth for p in rep.points} == {1, 2, 4}


def test_a_wrong_depth_exponent_still_fails_on_the_kept_depths() -> None:
    """The negative control: the regime rule never turns a plan error into a pass."""
    rep = check(factory(projected=True, wrong_depth=True), (1, 2, 4, 8))
    assert rep.depth_regime and {p.depth for p in rep.points} == {2, 4, 8}
    assert rep.verdict == "FAIL", rep.evidence
    assert rep.fit("branch_out", "act", "depth").finding == "contradicts"

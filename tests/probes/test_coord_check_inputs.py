"""coord_check refuses sweeps that cannot give a slope, before any model is built; it takes a
tuple of positional inputs and a tuple output."""

from __future__ import annotations

import pytest
import torch

from depthscale.errors import ConfigError
from depthscale.models import build
from depthscale.param import inspect, plan
from depthscale.probes import coord_check, measure_point

X = torch.randn(8, 4, generator=torch.Generator().manual_seed(0))
Y = torch.randint(0, 2, (8,), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"widths": [64, 64]}, r"widths must be at least two distinct sizes .* got \[64, 64\]"),
        ({"widths": [64]}, r"widths must be at least two distinct sizes .* got \[64\]"),
        ({"depths": [2, 4, 2]}, r"depths must be at least two distinct sizes .* got \[2, 4, 2\]"),
        ({"depths": [4]}, r"depths must be at least two distinct"),
        ({"widths": [16, 32], "depths": [3, 3]}, r"depths must be at least two distinct"),
        ({}, "coord_check needs widths or depths"),
        ({"widths": [16, 0]}, r"widths\[1\] must be a whole number >= 1, got 0"),
        ({"widths": ["16", 32]}, r"widths\[0\] must be a whole number >= 1, got '16'"),
        ({"depths": [2, 4], "seeds": []}, "at least one seed"),
        ({"depths": [2, 4], "lr": float("nan")}, "lr must be a finite number > 0"),
        ({"depths": [2, 4], "steps": 0}, "steps must be a whole number >= 1"),
    ],
)
def test_sweeps_without_a_slope_are_refused_before_any_work(kwargs: dict[str, object],
                                                            message: str) -> None:
    built: list[tuple[int, int, int]] = []

    def make(w: int, d: int, s: int):  # type: ignore[no-untyped-def]
        built.append((w, d, s))
        return build("resnet1", "depth-mup", input_shape=(4,), n_out=2, width=w, depth=d, seed=s)

    with pytest.raises(ConfigError, match=message):
        coord_check(make, X, Y, base_width=8, base_depth=2, **kwargs)  # type: ignore[arg-type]
    assert built == []


def test_a_single_axis_sweep_is_still_fine() -> None:
    rep = coord_check(lambda w, d, s: build("resnet1", "depth-mup", input_shape=(4,), n_out=2,
                                            width=w, depth=d, seed=s),
                      X, Y, depths=[2, 4], base_width=8, seeds=[0])
    assert {(f.quantity, f.axis) for f in rep.fits} == {("act", "depth"), ("update", "depth")}
    assert [p.depth for p in rep.points] == [2, 4]
    # one seed gives no interval, so no band is decided
    assert rep.verdict == "INCONCLUSIVE" and "one seed gives no interval" in rep.evidence


class _TwoInputs(torch.nn.Module):
    """Positional inputs (x, scale) and a tuple output (logits, hidden): a residual MLP."""

    def __init__(self, n: int, depth: int) -> None:
        super().__init__()
        self.inp = torch.nn.Linear(4, n)
        self.fc1 = torch.nn.ModuleList(torch.nn.Linear(n, n) for _ in range(depth))
        self.fc2 = torch.nn.ModuleList(torch.nn.Linear(n, n) for _ in range(depth))
        self.out = torch.nn.Linear(n, 2)

    def forward(self, x: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.inp(x * scale)
        for a, b in zip(self.fc1, self.fc2, strict=True):
            h = h + b(torch.relu(a(h)))
        return self.out(h), h


def test_a_tuple_input_and_a_tuple_output() -> None:
    scale = torch.rand(8, 1, generator=torch.Generator().manual_seed(2)) + 0.5

    def make(w: int, d: int, s: int):  # type: ignore[no-untyped-def]
        torch.manual_seed(s)
        model = _TwoInputs(w, d)
        p = plan("completep", width=w, depth=inspect(model, (X, scale)).depth)
        p.apply(model, example_input=(X, scale), seed=s)
        return model, p

    model, p = make(8, 2, 0)
    with torch.no_grad():
        logits = model(X, scale)[0]
    sizes = measure_point(model, p, (X, scale), Y, lr=0.01, optimizer="adam")
    assert sizes.values["act"]["output"] == pytest.approx(
        [float(logits.pow(2).mean().sqrt())], rel=1e-6)
    rep = coord_check(make, (X, scale), Y, widths=[8, 16], base_depth=2, lr=0.01,
                      optimizer="adam", seeds=[0, 1])
    assert {(f.layer_type, f.axis) for f in rep.fits} >= {("stream", "width"),
                                                           ("fc1.*", "width")}

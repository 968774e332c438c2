"""Coordinate check over width and depth: activation and update sizes with fitted slopes.

For each (width, depth) a fresh model is built, its residual-stream states h_0..h_L recorded on
a fixed batch (``model.trace``), a few optimizer steps taken on that batch, and the states
recorded again. A parameterization that transfers keeps both the activation RMS and the
update RMS flat: log-log slopes near 0 in width and in depth.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from depthscale.errors import ConfigError
from depthscale.fits import loglog_slope
from depthscale.param import Plan
from depthscale.param.checks import number, whole
from depthscale.train.loop import loss_fn

__all__ = ["CoordPoint", "CoordReport", "coord_check", "measure_point"]

#: make(width, depth, seed) -> (model, plan), the model initialised by the plan.
ModelFactory = Callable[[int, int, int], tuple[nn.Module, Plan]]


@dataclass(frozen=True)
class CoordPoint:
    """Per-layer RMS of h_l at init and of h_l^(k) - h_l^(0) after ``steps`` steps; ``axis``
    says which sweep ("width" or "depth") the point belongs to."""

    axis: str
    width: int
    depth: int
    act_rms: list[float]
    update_rms: list[float]

    @property
    def act_mean(self) -> float:
        return sum(self.act_rms) / len(self.act_rms)

    @property
    def update_mean(self) -> float:
        return sum(self.update_rms) / len(self.update_rms)


@dataclass
class CoordReport:
    """All points plus log-log slopes of the layer-mean sizes vs width and vs depth."""

    points: list[CoordPoint]
    slopes: dict[str, float] = field(default_factory=dict)

    def rows(self) -> list[dict[str, float]]:
        """One row per (width, depth, layer) for a CSV."""
        return [
            {"sweep": p.axis, "width": p.width, "depth": p.depth, "layer": i, "act_rms": a,
             "update_rms": u}
            for p in self.points
            for i, (a, u) in enumerate(zip(p.act_rms, p.update_rms, strict=True))
        ]


def _rms(t: torch.Tensor) -> float:
    return float(t.pow(2).mean().sqrt())


def measure_point(
    model: nn.Module,
    plan: Plan,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    lr: float,
    optimizer: str = "sgd",
    loss: str = "ce",
    steps: int = 1,
) -> tuple[list[float], list[float]]:
    """(activation RMS per layer at init, update RMS per layer after ``steps`` steps on x)."""
    if not hasattr(model, "trace"):
        raise ConfigError(f"{type(model).__name__} has no trace(); coord-check needs an MLP model")
    with torch.no_grad():
        before = [h.clone() for h in model.trace(x).streams]  # type: ignore[operator]
    opt = plan.optimizer(model, optimizer, lr)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss_fn(loss, model(x), y).backward()
        opt.step()
    with torch.no_grad():
        after = model.trace(x).streams  # type: ignore[operator]
    return [_rms(h) for h in before], [_rms(a - b) for a, b in zip(after, before, strict=True)]


def coord_check(
    make: ModelFactory,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    widths: Sequence[int] = (),
    depths: Sequence[int] = (),
    base_width: int = 64,
    base_depth: int = 8,
    lr: float = 0.1,
    optimizer: str = "sgd",
    loss: str = "ce",
    steps: int = 1,
    seeds: Sequence[int] = (0, 1, 2),
    progress: Callable[[int], None] | None = None,
) -> CoordReport:
    """Sweep ``widths`` at ``base_depth`` and ``depths`` at ``base_width``, sizes averaged
    over ``seeds`` (one model per seed).

    Slopes (keys ``act_vs_width``, ``update_vs_width``, ``act_vs_depth``, ``update_vs_depth``)
    are fitted on the layer-mean RMS; a sweep with fewer than two sizes has no slope, and one
    whose sizes overflow (non-finite) gets slope +inf: the parameterization blew up.
    A sweep that is given needs at least two distinct sizes and no repeats (a slope from one
    size is meaningless); an empty one is skipped, but not both. Bad sizes, ``seeds``,
    ``steps`` or ``lr`` are a ConfigError before any model is built.
    """
    for axis, sizes in (("widths", widths), ("depths", depths)):
        checked = [whole(f"{axis}[{i}]", s) for i, s in enumerate(sizes)]
        if checked and (len(set(checked)) < 2 or len(set(checked)) != len(checked)):
            raise ConfigError(
                f"{axis} must be at least two distinct sizes without repeats (a log-log slope "
                f"needs them), got {list(sizes)}; pass e.g. {axis}=[64, 128, 256], or none to "
                "skip that sweep"
            )
    if len(widths) == 0 and len(depths) == 0:
        raise ConfigError("coord_check needs widths or depths to sweep (at least two sizes)")
    whole("base_width", base_width)
    whole("base_depth", base_depth)
    whole("steps", steps)
    number("lr", lr)
    if len(seeds) == 0:
        raise ConfigError("coord_check needs at least one seed, got none")
    report = CoordReport(points=[])
    for axis, sizes in (("width", widths), ("depth", depths)):
        pts = []
        for s in sizes:
            w, d = (s, base_depth) if axis == "width" else (base_width, s)
            runs = []
            for seed in seeds:
                model, plan = make(w, d, seed)
                runs.append(measure_point(
                    model, plan, x, y, lr=lr, optimizer=optimizer, loss=loss, steps=steps
                ))
                if progress is not None:
                    progress(1)
            acts = [sum(v) / len(runs) for v in zip(*(r[0] for r in runs), strict=True)]
            ups = [sum(v) / len(runs) for v in zip(*(r[1] for r in runs), strict=True)]
            pts.append(CoordPoint(axis, w, d, acts, ups))
        report.points.extend(pts)
        if len(pts) >= 2:
            for key, values in (("act", [p.act_mean for p in pts]),
                                ("update", [p.update_mean for p in pts])):
                finite = all(math.isfinite(v) and v > 0 for v in values)
                slope = loglog_slope(sizes, values).slope if finite else math.inf
                report.slopes[f"{key}_vs_{axis}"] = slope
    return report

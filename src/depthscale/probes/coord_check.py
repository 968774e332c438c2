"""Coordinate check of any model over width and depth, with a verdict and a lazy-block
diagnostic (docs/how-it-works.md, "The coordinate check").

For each (width, depth, seed) the factory builds a planned model; :func:`inspect` reads its
branches and roles, one recorded forward pass on a fixed batch measures each layer type
(``input``, ``branch_in``/``hidden``, ``branch``/``branch_out``, ``stream`` = h_L after the
last addition, ``stream_mid``, ``output``) and every weight's own update (nfd Eq. 27), before
and after ``steps`` optimizer steps. The stream is judged at the last block because the
theory's statement is at fixed relative depth l/L (nfd Eq. 1, Prop. 2); a weight's update is
judged at full alignment (``own_aligned``) because a finite step's unaligned part falls as
n^-1/2 (muP, Yang & Hu 2021). Slopes against width and depth get 95% seed-bootstrap
intervals judged against the bands of :func:`expected_bands`."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch
from torch import nn

from depthscale.calls import call_model, logits_of
from depthscale.errors import ConfigError
from depthscale.param import Plan
from depthscale.param.checks import number, whole
from depthscale.param.dataflow import copy_input
from depthscale.param.given import current
from depthscale.param.inspect import Structure, inspect
from depthscale.probes.coord_bands import FLAT, WEIGHT, expected_bands
from depthscale.probes.depth_regime import depth_regime
from depthscale.probes.factory_sizes import (
    build_read,
    check_factory,
    structure_of,
    with_auto_base,
)
from depthscale.probes.forward_record import (
    LAYER_TYPES,
    record_pass,
    unit_weight,
    weight_layout,
)
from depthscale.stats.findings import Band, Finding, findings_verdict, interval_finding
from depthscale.stats.fits import loglog_slope
from depthscale.train.loop import loss_fn

__all__ = [
    "LAYER_TYPES",
    "LAZY",
    "CoordPoint",
    "CoordReport",
    "LazyFinding",
    "SlopeFit",
    "coord_check",
    "measure_point",
    "unit_weight",
]

#: make(width, depth, seed) -> (model, plan), the model initialised by the plan; or (model,
#: plan, structure) to give the :class:`Structure` instead of ``inspect(model, x)``.
ModelFactory = Callable[[int, int, int],
                        "tuple[nn.Module, Plan] | tuple[nn.Module, Plan, Structure]"]
#: make_optimizer(model, plan, lr) -> a torch optimizer (instead of ``plan.optimizer``).
OptimizerFactory = Callable[[nn.Module, Plan, float], torch.optim.Optimizer]

#: Types of internal features of a residual branch (the lazy diagnostic's layers).
_INTERNAL = ("branch_in", "hidden")
#: Roles whose layer outputs are recorded as their own layer type.
_TYPED = ("input", "branch_in", "hidden")
#: Own-update slope vs depth at or below which a block's internal features are "lazy".
LAZY = -0.35
_N_BOOT = 2000


# ---- measuring one model --------------------------------------------------------------------

@dataclass(frozen=True)
class Sizes:
    """RMS sizes of one model: ``values[quantity][key]`` lists one number per layer in call
    order. Quantities: ``act`` (at init) and ``update`` (change after the steps) per layer type;
    the own update (the change of a weight's output due to that weight's change) per internal
    layer type of a branch (``own_update``, the lazy diagnostic's), per role of every weight
    (``weight_own_update``) and per weight (``unit_own_update``, keyed ``h.*.attn.qkv``); one
    number per use."""

    values: dict[str, dict[str, list[float]]]

    def mean(self, quantity: str, layer_type: str) -> float:
        v = self.values.get(quantity, {}).get(layer_type, [])
        return sum(v) / len(v) if v else math.nan


def _rms(t: torch.Tensor) -> float:
    return float(t.detach().double().pow(2).mean().sqrt())


def _optimizer(model: nn.Module, plan: Plan, optimizer: str | OptimizerFactory,
               lr: float) -> torch.optim.Optimizer:
    if isinstance(optimizer, str):
        return plan.optimizer(model, optimizer, lr)
    return optimizer(model, plan, lr)


def measure_point(
    model: nn.Module,
    plan: Plan,
    x: Any,
    y: torch.Tensor,
    *,
    lr: float,
    optimizer: str | OptimizerFactory = "sgd",
    loss: str = "ce",
    steps: int = 1,
    structure: Structure | None = None,
) -> Sizes:
    """Activation, update and own-update sizes of every recorded layer of ``model`` (see the
    module docstring) after ``steps`` steps of ``plan.optimizer(model, optimizer, lr)`` on
    ``(x, y)``; ``optimizer`` may instead be a callable ``(model, plan, lr) -> optimizer`` (own
    param groups). ``x`` is a tensor, a tuple of positional arguments or a dict of keyword
    arguments. ``structure`` is ``ds.param.inspect(model, x)`` (computed when not given; one
    read before ``apply`` is brought up to the attention scale apply set,
    :func:`~depthscale.param.given.current`). The model is measured and trained in training
    mode (its mode is restored at the end)."""
    st = inspect(model, x) if structure is None else current(structure, model)
    lay = weight_layout(model, st)
    initial = {id(p): p.detach().clone() for p in lay.params.values()}
    was_training = model.training
    model.train()  # also keeps fused inference fast paths (nn.TransformerEncoderLayer) off
    try:
        before = record_pass(model, x, lay, None)
        opt = _optimizer(model, plan, optimizer, lr)
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            loss_fn(loss, logits_of(call_model(model, copy_input(x))), y).backward()
            opt.step()
        opt.zero_grad(set_to_none=True)
        after = record_pass(model, x, lay, initial)
    finally:
        model.train(was_training)
    values: dict[str, dict[str, list[float]]] = {"act": {}, "update": {}, "own_update": {},
                                                 "unit_own_update": {}, "unit_own_aligned": {}}

    def add(layer_type: str, b: torch.Tensor, a: torch.Tensor) -> None:
        values["act"].setdefault(layer_type, []).append(_rms(b))
        if a.shape == b.shape:  # a routed expert's tokens may change with the step: no update
            values["update"].setdefault(layer_type, []).append(_rms(a - b))

    later = after.by_use()
    for o in before.outs:  # call order
        a = later.get((o.unit, o.use))
        role = lay.role[o.unit]
        if role in _TYPED and a is not None and o.value is not None and a.value is not None:
            add(role, o.value, a.value)
    for k in sorted(before.found):
        if k in after.found:
            add(lay.branch_types[k], before.found[k][0], after.found[k][0])
    if before.order:
        n = len(before.order)
        for t, k in (("stream_mid", before.order[math.ceil(n / 2) - 1]),
                     ("stream", before.order[-1])):
            if k in after.found:
                add(t, before.found[k][1], after.found[k][1])
    add("output", before.out, after.out)
    for a in after.outs:
        if a.own is not None:
            own = _rms(a.own)
            values["unit_own_update"].setdefault(lay.group[a.unit], []).append(own)
            if a.unit in lay.internal:
                values["own_update"].setdefault(lay.role[a.unit], []).append(own)
        if a.aligned is not None:
            values["unit_own_aligned"].setdefault(lay.group[a.unit], []).append(_rms(a.aligned))
    return Sizes({q: v for q, v in values.items() if v})


# ---- fits, bands and the verdict ------------------------------------------------------------

@dataclass(frozen=True)
class SlopeFit:
    """Log-log slope of the layer-mean ``quantity`` of ``layer_type`` against ``axis``, fitted
    on the seed means, with its 95% seed-bootstrap interval; ``band`` the slopes the recipe
    allows (None: not judged), ``finding`` what the interval says of it, ``why`` the band's
    reason."""

    layer_type: str
    quantity: str
    axis: str
    sizes: tuple[int, ...]
    means: tuple[float, ...]
    slope: float
    ci_low: float
    ci_high: float
    band: Band | None = None
    finding: Finding | None = None
    why: str = ""

    @property
    def name(self) -> str:
        return f"{self.layer_type} {self.quantity}_vs_{self.axis}"

    def text(self) -> str:
        """``stream update_vs_depth -0.02 [-0.05, +0.01] in [-0.15, 0.15]``."""
        band = "" if self.band is None else f" in [{_edge(self.band[0])}, {_edge(self.band[1])}]"
        return f"{self.name} {_num(self.slope)} [{_num(self.ci_low)}, {_num(self.ci_high)}]{band}"


def _num(v: float) -> str:
    return f"{v:+.2f}" if math.isfinite(v) else str(v)


def _edge(v: float | None) -> str:
    return "-inf" if v is None else f"{v:g}"


def bootstrap_slope(
    sizes: Sequence[int], per_seed: Sequence[Sequence[float]], *, n_boot: int = _N_BOOT,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(slope, 2.5%, 97.5%) of log10 mean_y on log10 size: the slope on the seed means and its
    percentile interval when each size's seeds are resampled with replacement (``n_boot``
    times, generator ``seed``), widened about the slope by :func:`small_sample_factor` (with k
    seeds a plain percentile interval covers too little). One seed gives no interval (NaN)."""
    y = np.asarray(per_seed, dtype=float)  # (sizes, seeds)
    slope = loglog_slope(sizes, y.mean(axis=1)).slope
    if y.shape[1] < 2:
        return slope, math.nan, math.nan
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, y.shape[1], size=(n_boot, *y.shape))
    means = np.take_along_axis(y[None, :, :].repeat(n_boot, 0), idx, axis=2).mean(axis=2)
    lx = np.log10(np.asarray(sizes, dtype=float))
    ly = np.log10(means)
    dx = lx - lx.mean()
    slopes = (dx * (ly - ly.mean(axis=1, keepdims=True))).sum(axis=1) / (dx**2).sum()
    low, high = np.percentile(slopes, [2.5, 97.5])
    f = small_sample_factor(y.shape[0], y.shape[1])
    return slope, float(slope - f * (slope - low)), float(slope + f * (high - slope))


def small_sample_factor(n_sizes: int, n_seeds: int) -> float:
    """How much a seed-bootstrap interval is widened: t_{0.975, m (k-1)} / z_{0.975} x
    sqrt(k / (k-1)) for m sizes of k seeds (the Student-t quantile of the pooled within-size
    degrees of freedom, and the bootstrap's plug-in variance (k-1)/k undone), which brings
    its coverage to the nominal 95% for seed noise of any size."""
    import scipy.stats

    k = n_seeds
    return float(scipy.stats.t.ppf(0.975, n_sizes * (k - 1)) / scipy.stats.norm.ppf(0.975)
                 * math.sqrt(k / (k - 1)))


@dataclass(frozen=True)
class LazyFinding:
    """The lazy-vs-complete diagnostic of one internal layer type: the slope of its own update
    (nfd Eq. 27) vs depth with its interval, the label ("lazy": the interval lies at or below
    :data:`LAZY`; "complete": at or above -:data:`FLAT`; else "undecided") and the share of
    the layer's whole update that its own weights cause, at the deepest model."""

    layer_type: str
    fit: SlopeFit
    label: str
    own_share: float

    def text(self) -> str:
        return (f"{self.layer_type}: {self.label} (own update vs depth {_num(self.fit.slope)} "
                f"[{_num(self.fit.ci_low)}, {_num(self.fit.ci_high)}]; own/whole update "
                f"{self.own_share:.2f} at depth {self.fit.sizes[-1]})")


@dataclass(frozen=True)
class CoordPoint:
    """One model measured: the sweep (``axis`` "width" or "depth") it belongs to, its sizes and
    seed."""

    axis: str
    width: int
    depth: int
    seed: int
    sizes: Sizes

    def mean(self, quantity: str, layer_type: str) -> float:
        return self.sizes.mean(quantity, layer_type)


@dataclass
class CoordReport:
    """All points, the slope fits, the verdict (PASS/FAIL/INCONCLUSIVE) with its evidence,
    and the lazy-vs-complete diagnostic."""

    points: list[CoordPoint]
    recipe: str
    optimizer: str
    fits: list[SlopeFit] = field(default_factory=list)
    lazy: list[LazyFinding] = field(default_factory=list)
    verdict: str = "INCONCLUSIVE"
    evidence: str = ""
    #: the depths left out of the depth fit, outside the residual regime, and why ("": none)
    depth_regime: str = ""

    def fit(self, layer_type: str, quantity: str, axis: str) -> SlopeFit:
        """The fit of ``quantity`` of ``layer_type`` vs ``axis``; KeyError if not measured."""
        for f in self.fits:
            if (f.layer_type, f.quantity, f.axis) == (layer_type, quantity, axis):
                return f
        raise KeyError(f"no fit of {layer_type} {quantity} vs {axis}")

    def rows(self) -> list[dict[str, Any]]:
        """One row per (sweep, width, depth, seed, layer type, layer) for a CSV, then one per
        (..., weight, use) with its own update and aligned own update (``layer_type`` is the
        weight's name, ``layer`` the use)."""
        rows = []
        for p in self.points:
            acts = p.sizes.values["act"]
            for t in (t for t in LAYER_TYPES if t in acts):
                for i, (a, u) in enumerate(zip(acts[t], p.sizes.values["update"][t],
                                               strict=True)):
                    rows.append({"sweep": p.axis, "width": p.width, "depth": p.depth,
                                 "seed": p.seed, "layer_type": t, "layer": i, "act_rms": a,
                                 "update_rms": u, "own_update_rms": None,
                                 "own_aligned_rms": None})
            aligned = p.sizes.values.get("unit_own_aligned", {})
            for w, owns in p.sizes.values.get("unit_own_update", {}).items():
                for i, own in enumerate(owns):
                    al = aligned.get(w, [])
                    rows.append({"sweep": p.axis, "width": p.width, "depth": p.depth,
                                 "seed": p.seed, "layer_type": w, "layer": i, "act_rms": None,
                                 "update_rms": None, "own_update_rms": own,
                                 "own_aligned_rms": al[i] if i < len(al) else None})
        return rows

    def summary(self) -> dict[str, Any]:
        """The verdict, evidence, fits and lazy diagnostic as plain data (for JSON)."""
        def finite(v: float) -> float | None:
            return v if math.isfinite(v) else None

        return {
            "verdict": self.verdict, "evidence": self.evidence, "recipe": self.recipe,
            "optimizer": self.optimizer, "depth_regime": self.depth_regime,
            "fits": [{"layer_type": f.layer_type, "quantity": f.quantity, "axis": f.axis,
                      "sizes": list(f.sizes), "means": [finite(m) for m in f.means],
                      "slope": finite(f.slope), "ci_low": finite(f.ci_low),
                      "ci_high": finite(f.ci_high),
                      "band": None if f.band is None else list(f.band),
                      "finding": f.finding, "why": f.why} for f in self.fits],
            "lazy": [{"layer_type": z.layer_type, "label": z.label, "slope": finite(z.fit.slope),
                      "ci_low": finite(z.fit.ci_low), "ci_high": finite(z.fit.ci_high),
                      "own_share": finite(z.own_share)} for z in self.lazy],
        }

    def table(self) -> str:
        """The verdict table: one line per fit (slope, interval, band, finding), then the lazy
        diagnostic and the verdict with its evidence."""
        shown = [f for f in self.fits if not (f.quantity == "own_update" and f.axis == "depth")]
        w = max([11, *(len(f.layer_type) for f in shown)])
        lines = [f"{'layer type':<{w}} {'fit':<19} {'slope':>6}  {'95% CI':<16} {'band':<16} "
                 "finding"]
        for f in shown:  # the own update vs depth is the lazy diagnostic's line
            ci = f"[{_num(f.ci_low)}, {_num(f.ci_high)}]"
            band = "-" if f.band is None else f"[{_edge(f.band[0])}, {_edge(f.band[1])}]"
            lines.append(f"{f.layer_type:<{w}} {f.quantity + '_vs_' + f.axis:<19} "
                         f"{_num(f.slope):>6}  {ci:<16} {band:<16} {f.finding or '-'}")
        for z in self.lazy:
            lines.append("lazy/complete " + z.text())
        lines.append(f"{self.verdict}: {self.evidence}")
        return "\n".join(lines)


def _judge(report: CoordReport, n_seeds: int) -> None:
    """The verdict from the fits that have a band (each interval judged by
    :func:`interval_finding`; a size that overflowed is a contradiction), and the evidence."""

    findings: dict[str, tuple[Finding, str]] = {}
    for f in report.fits:
        if f.finding is not None:
            findings[f.name] = (f.finding, f.text())
    if not findings:
        report.verdict, report.evidence = "INCONCLUSIVE", "no measured size has a stated band"
        return
    verdict, said = findings_verdict(findings)
    n_ok = sum(v[0] == "supports" for v in findings.values())
    lead = (f"{n_ok} of {len(findings)} slopes lie inside their bands (log-log fits of the "
            f"layer-mean RMS on {n_seeds} seed(s) per size, 95% seed-bootstrap intervals, "
            f"tolerance {FLAT} around the recipe's exponent)")
    blown = sum(not math.isfinite(x) for p in report.points for per in p.sizes.values.values()
                for v in per.values() for x in v)
    if blown:
        total = sum(len(v) for p in report.points for per in p.sizes.values.values()
                    for v in per.values())
        lead += (f"; {blown} of {total} measured sizes are not finite: the run blew up "
                 "(lower the learning rate)")
    if verdict == "INCONCLUSIVE" and n_seeds < 2:
        lead += "; one seed gives no interval: pass seeds=[0, 1, 2]"
    if blown and verdict == "PASS":  # an unbanded series blew up: never a pass
        verdict = "FAIL"
    others = "; ".join(f.text() for f in report.fits if f.finding == "supports")
    report.verdict = verdict
    report.evidence = ". ".join(p for p in (lead, said and f"Outside or undecided: {said}",
                                            others and f"Inside: {others}",
                                            report.depth_regime) if p) + "."


def _fit(axis: str, sizes: Sequence[int], pts: list[list[CoordPoint]], quantity: str,
         layer_type: str, band: tuple[Band, str] | None) -> SlopeFit | None:
    """The slope fit of one (quantity, layer type) over a sweep; None if it was measured at no
    point. A value that is NaN or infinite (a run that blew up) is never dropped: the fit is a
    contradiction that names how many values were not finite; a quantity measured at some
    points only, or zero somewhere, is undecided."""
    raw = [[p.sizes.values.get(quantity, {}).get(layer_type, []) for p in at_size]
           for at_size in pts]
    if not any(v for row in raw for v in row):
        return None
    b, why = band if band is not None else (None, "")
    n_values = sum(len(v) for row in raw for v in row)
    n_bad = sum(not math.isfinite(x) for row in raw for v in row for x in v)
    per_seed = [[p.mean(quantity, layer_type) for p in at_size] for at_size in pts]
    means = tuple(float(np.mean(row)) for row in per_seed)
    if n_bad or not all(v for row in raw for v in row):
        finding: Finding | None = "contradicts" if n_bad else "undecided"
        note = (f"; {n_bad} of {n_values} measured values not finite (overflowed: the run "
                "blew up)"
                if n_bad else "; measured at some sizes or seeds only: no slope")
        slope = math.inf if n_bad else math.nan
        return SlopeFit(layer_type, quantity, axis, tuple(sizes), means, slope, slope, slope, b,
                        None if b is None else finding, why + note)
    if not all(v > 0 for row in per_seed for v in row):
        return SlopeFit(layer_type, quantity, axis, tuple(sizes), means, math.nan, math.nan,
                        math.nan, b, None if b is None else "undecided",
                        why + "; zero at some size: no slope")
    slope, low, high = bootstrap_slope(sizes, per_seed)
    finding = None if b is None else interval_finding(low, high, b)
    return SlopeFit(layer_type, quantity, axis, tuple(sizes), means, slope, low, high, b,
                    finding, why)


def coord_check(
    make: ModelFactory,
    x: Any,
    y: torch.Tensor,
    *,
    widths: Sequence[int] = (),
    depths: Sequence[int] = (),
    base_width: int = 64,
    base_depth: int = 8,
    lr: float = 0.1,
    optimizer: str | OptimizerFactory = "sgd",
    loss: str = "ce",
    steps: int = 1,
    seeds: Sequence[int] = (0, 1, 2),
    progress: Callable[[int], None] | None = None,
) -> CoordReport:
    """Sweep ``widths`` at ``base_depth`` and ``depths`` at ``base_width`` (one model per seed from
    ``make``), measure each (:func:`measure_point`), fit the slopes, judge them against
    :func:`expected_bands` of the plan's recipe and run the lazy diagnostic on the depth sweep.

    ``x``: a tensor, a tuple of positional or a dict of keyword arguments; the model may return a
    tensor, a tuple, a dict with "logits" or a Hugging Face output. ``make`` may return ``(model,
    plan, structure)`` to pass the :class:`Structure` it read; ``optimizer`` is a name for
    ``plan.optimizer`` or a callable ``(model, plan, lr) -> optimizer``. A given sweep needs two
    distinct sizes and no repeats (an empty one is skipped, not both). Bad sizes, ``seeds``,
    ``steps`` or ``lr``, or a factory that does not build the sizes it is given
    (:mod:`~depthscale.probes.factory_sizes`), are a ConfigError before training. Depths outside
    the residual regime (:mod:`~depthscale.probes.depth_regime`) leave the depth sweep, said in
    the report's ``depth_regime``; fewer than two left is a ConfigError naming depths that work.
    """
    _check_sweep(widths, depths, base_width, base_depth, steps, lr, seeds)
    make = with_auto_base(make, widths, base_width)
    found = check_factory(make, [*((w, base_depth) for w in widths),
                                 *((base_width, d) for d in depths)], seeds[0], x)
    regime = None
    if depths:
        regime = depth_regime(
            depths, {d: found.get((base_width, d)) for d in depths},
            lambda d: structure_of(make(base_width, d, seeds[0]), x))
        depths = regime.kept
    sweeps, first_plan = _measure_sweeps(
        make, x, y, {"width": widths, "depth": depths}, base_width, base_depth, seeds,
        lambda model, plan, structure: measure_point(
            model, plan, x, y, lr=lr, optimizer=optimizer, loss=loss, steps=steps,
            structure=structure), progress)
    name = optimizer if isinstance(optimizer, str) else getattr(optimizer, "__name__",
                                                                   "custom optimizer")
    points = [p for _, by_size in sweeps.values() for at_size in by_size for p in at_size]
    report = CoordReport(points, first_plan.recipe.name, name,
                         depth_regime="" if regime is None else regime.note())
    _fit_sweeps(report, sweeps, expected_bands(first_plan))
    _judge(report, len(seeds))
    return report


#: per axis ("width", "depth"): the sorted sizes and, per size, one point per seed
Sweeps = dict[str, tuple[list[int], list[list[CoordPoint]]]]


def _check_sweep(widths: Sequence[int], depths: Sequence[int], base_width: int,
                 base_depth: int, steps: int, lr: float, seeds: Sequence[int]) -> None:
    """ConfigError for sizes, steps, lr or seeds :func:`coord_check` cannot use."""
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


def _measure_sweeps(
    make: ModelFactory, x: Any, y: torch.Tensor, sizes_of: Mapping[str, Sequence[int]],
    base_width: int, base_depth: int, seeds: Sequence[int],
    measure: Callable[[nn.Module, Plan, Structure | None], Sizes],
    progress: Callable[[int], None] | None,
) -> tuple[Sweeps, Plan]:
    """Build one model per (axis, size, seed) with ``make`` and measure it; the sweeps and the
    first model's plan (whose recipe sets the bands)."""
    sweeps: Sweeps = {}
    first_plan: Plan | None = None
    for axis, sizes in sizes_of.items():
        if not sizes:
            continue
        order = sorted(sizes)
        by_size = []
        for s in order:
            w, d = (s, base_depth) if axis == "width" else (base_width, s)
            at_size = []
            for seed in seeds:
                made, structure = build_read(make, w, d, seed)
                model, plan = made[0], made[1]
                first_plan = first_plan or plan
                at_size.append(CoordPoint(axis, w, d, int(seed), measure(model, plan, structure)))
                if progress is not None:
                    progress(1)
            by_size.append(at_size)
        sweeps[axis] = (order, by_size)
    assert first_plan is not None
    return sweeps, first_plan


def _fit_sweeps(report: CoordReport, sweeps: Sweeps,
                bands: Mapping[tuple[str, str, str], tuple[Band, str]]) -> None:
    """The slopes of every measured quantity (each layer type's activations and updates, each
    weight's own update in width, the internal own updates in depth with the lazy diagnostic),
    appended to ``report``."""
    for axis, (order, by_size) in sweeps.items():
        for t in LAYER_TYPES:
            for q in ("act", "update"):
                fit = _fit(axis, order, by_size, q, t, bands.get((t, q, axis)))
                if fit is not None:
                    report.fits.append(fit)
    if "width" in sweeps:  # every weight's own update (muP: Theta(1) in width)
        order, by_size = sweeps["width"]
        weights = dict.fromkeys(u for at_size in by_size for p in at_size
                                for u in p.sizes.values.get("unit_own_update", {}))
        for weight in weights:
            for stored, q in (("unit_own_aligned", "own_aligned"),
                              ("unit_own_update", "own_update")):
                fit = _fit("width", order, by_size, stored, weight,
                           bands.get((WEIGHT, q, "width")))
                if fit is not None:
                    report.fits.append(replace(fit, quantity=q))
    if "depth" in sweeps:
        order, by_size = sweeps["depth"]
        for t in _INTERNAL:
            fit = _fit("depth", order, by_size, "own_update", t, None)
            if fit is None or not math.isfinite(fit.slope):
                continue
            report.fits.append(fit)
            share = float(np.mean([p.mean("own_update", t) / p.mean("update", t)
                                   for p in by_size[-1]]))
            report.lazy.append(LazyFinding(t, fit, _lazy_label(fit), share))


def _lazy_label(fit: SlopeFit) -> str:
    """"lazy" if the own-update slope's interval lies at or below :data:`LAZY`, "complete" if
    at or above -:data:`FLAT`, else "undecided"."""

    if interval_finding(fit.ci_low, fit.ci_high, (None, LAZY)) == "supports":
        return "lazy"
    if interval_finding(fit.ci_low, fit.ci_high, (-FLAT, None)) == "supports":
        return "complete"
    return "undecided"

"""Coordinate check of any model over width and depth, with a verdict and a lazy-block
diagnostic.

For each (width, depth, seed) the user's factory builds a fresh model (plan applied);
:func:`depthscale.param.inspect` finds its residual branches and the role of every layer, and
forward hooks record on a fixed batch, per layer type:

* ``input``: the output of each input layer (embedding, stem);
* ``branch_in`` / ``hidden``: the output of each internal layer of a branch (its features) and
  of plain hidden layers;
* ``branch`` / ``branch_out``: each residual branch's output, the operand added to the stream;
* ``stream``: the residual stream after each addition;
* ``output``: the model's output (logits of any rank, e.g. ``(B, T, V)``).

The residual additions are found by marking the output of each branch's last layer (a forward
hook) and following it, through a :class:`~torch.overrides.TorchFunctionMode`, to the first
addition with a tensor that is not a parameter: no method or attribute of the model is needed.
Then ``steps`` optimizer steps are taken on that batch and everything is recorded again: the
RMS at init is the *activation* size, the RMS of the change the *update* size. The model stays
in training mode throughout (BatchNorm uses batch statistics); build it without dropout, or the
"update" also holds the difference of two dropout masks.

The verdict fits log-log slopes of both, per layer type, against width and against depth, with
a 95% seed-bootstrap interval, and judges each interval against a band
(:func:`expected_bands`) with :func:`~depthscale.findings.interval_finding`. The lazy
diagnostic (CompleteP's "complete feature learning"; nfd Sec. 4, Eq. 27) measures each internal
layer's *own* update, the change of its output that its weight update causes,
``f(x^(k); theta^(k)) - f(x^(k); theta^(0))``, and how it scales with depth.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.func import functional_call
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_map

from depthscale.errors import ConfigError
from depthscale.findings import Band, findings_verdict, interval_finding
from depthscale.fits import loglog_slope
from depthscale.param import Plan
from depthscale.param.checks import number, whole
from depthscale.param.inspect import ADDITIONS, Structure, inspect, tensors_in
from depthscale.train.loop import loss_fn

__all__ = [
    "FLAT",
    "LAYER_TYPES",
    "LAZY",
    "CoordPoint",
    "CoordReport",
    "LazyFinding",
    "SlopeFit",
    "coord_check",
    "expected_bands",
    "measure_point",
]

#: make(width, depth, seed) -> (model, plan), the model initialised by the plan.
ModelFactory = Callable[[int, int, int], tuple[nn.Module, Plan]]

#: Layer types in the order of a forward pass.
LAYER_TYPES = ("input", "hidden", "branch_in", "branch", "branch_out", "stream", "output")
#: Types of internal features of a residual branch (the lazy diagnostic's layers).
_INTERNAL = ("branch_in", "hidden")
#: |slope| <= 0.15: a size that the recipe keeps Theta(1).
FLAT = 0.15
#: Own-update slope vs depth at or below which a block's internal features are "lazy".
LAZY = -0.35
_N_BOOT = 2000


# ---- measuring one model -------------------------------------------------------------------

@dataclass(frozen=True)
class Sizes:
    """RMS sizes of one model: ``values[quantity][layer_type]`` lists one number per layer in
    call order; quantities are ``act`` (at init), ``update`` (change after the steps) and
    ``own_update`` (internal layers only: the change due to the layer's own weights)."""

    values: dict[str, dict[str, list[float]]]

    def mean(self, quantity: str, layer_type: str) -> float:
        v = self.values.get(quantity, {}).get(layer_type, [])
        return sum(v) / len(v) if v else math.nan


def _rms(t: torch.Tensor) -> float:
    return float(t.detach().double().pow(2).mean().sqrt())


def _first_tensor(out: Any) -> torch.Tensor:
    """The model's output tensor (the first one of a tuple, dict or Hugging Face output)."""
    for t in tensors_in(out):
        return t
    raise ConfigError(f"the model returned no tensor ({type(out).__name__}); coord_check needs "
                      "its logits")


def _layer_types(st: Structure) -> tuple[dict[str, str], dict[str, int], list[str], set[str]]:
    """(module -> layer type of the recorded layers, branch writer -> branch index, the type of
    each branch's output, the internal layers of branches)."""
    module_role: dict[str, str] = {}
    for name, role in st.roles.items():
        mod, _, own = name.rpartition(".")
        if own == "weight":
            module_role[mod] = role
    in_branch = {m for b in st.branches for m in b.modules}
    types = {m: r for m, r in module_role.items() if r in ("input", "branch_in", "hidden")}
    writers: dict[str, int] = {}
    branch_types = []
    for b in st.branches:
        for w in b.writers:
            writers.setdefault(w, b.index)
        roles = {module_role.get(w) for w in b.writers}
        branch_types.append("branch" if "branch" in roles else "branch_out")
    # internal layers of a branch get the own-update measurement; plain hidden layers do not
    internal = {m for m, r in types.items() if r == "branch_in" or (r == "hidden"
                                                                    and m in in_branch)}
    return types, writers, branch_types, internal


class _Tap(TorchFunctionMode):
    """Follows each branch's output (marked by a hook on its last layer) through the ops after
    it to the residual addition, and keeps (branch operand, stream after the addition)."""

    def __init__(self) -> None:
        super().__init__()
        self.marks: dict[int, frozenset[int]] = {}
        self.keep: list[torch.Tensor] = []  # keeps marked ids unique while the pass runs
        self.found: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def mark(self, t: torch.Tensor, branches: frozenset[int]) -> None:
        self.keep.append(t)
        self.marks[id(t)] = self.marks.get(id(t), frozenset()) | branches

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        ins = list(tensors_in((args, kwargs)))
        marked = [t for t in ins if id(t) in self.marks]
        residual = func in ADDITIONS and len(ins) == 2 and len(marked) == 1
        # an in-place addition overwrites its operand: keep the branch's value first
        operand = marked[0].detach().clone() if residual else None
        out = func(*args, **kwargs)
        if not marked:
            return out
        if residual and isinstance(out, torch.Tensor) and operand is not None:
            branch = marked[0]
            stream = ins[1] if ins[0] is branch else ins[0]
            if not isinstance(stream, nn.Parameter) and stream.shape == out.shape:
                for k in self.marks[id(branch)]:
                    self.found.setdefault(k, (operand, out.detach().clone()))
                self.marks.pop(id(out), None)  # the sum is the stream, not the branch
                return out
        ks = frozenset().union(*(self.marks[id(t)] for t in marked))
        for t in tensors_in(out):
            self.mark(t, ks)
        return out


@dataclass
class _Pass:
    """What one recorded forward pass saw."""

    outputs: dict[str, torch.Tensor] = field(default_factory=dict)
    inputs: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    tap: _Tap = field(default_factory=_Tap)
    out: torch.Tensor | None = None


@contextmanager
def _recording(model: nn.Module, types: dict[str, str], writers: dict[str, int],
               keep_inputs: set[str]) -> Iterator[_Pass]:
    """Forward hooks on the typed layers and branch writers, the tap active; hooks removed on
    exit. Only a module's first call in the pass is recorded."""
    rec = _Pass()
    modules = dict(model.named_modules())
    handles = []

    def hook(name: str) -> Any:
        def after(_m: nn.Module, args: Any, kwargs: Any, output: Any) -> None:
            if name in writers:
                for t in tensors_in(output):
                    rec.tap.mark(t, frozenset({writers[name]}))
            if name in types and name not in rec.outputs:
                rec.outputs[name] = _first_tensor(output).detach().clone()
                if name in keep_inputs:
                    rec.inputs[name] = tree_map(
                        lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v,
                        (args, kwargs))
        return after

    for name in {*types, *writers}:
        handles.append(modules[name].register_forward_hook(hook(name), with_kwargs=True))
    try:
        with rec.tap:
            yield rec
    finally:
        for h in handles:
            h.remove()


def _forward(model: nn.Module, x: torch.Tensor, types: dict[str, str],
             writers: dict[str, int], keep_inputs: set[str]) -> _Pass:
    with torch.no_grad(), _recording(model, types, writers, keep_inputs) as rec:
        rec.out = _first_tensor(model(x)).detach().clone()
    missing = sorted(set(writers.values()) - set(rec.tap.found))
    if missing:
        raise ConfigError(
            f"coord_check could not find the residual addition of branch(es) {missing} (written "
            f"by {', '.join(w for w, k in writers.items() if k in missing)}) in the forward pass; "
            "its output must be added to a tensor that is not a parameter"
        )
    return rec


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
    structure: Structure | None = None,
) -> Sizes:
    """Activation and update sizes of every recorded layer of ``model`` (see the module
    docstring) after ``steps`` steps of ``plan.optimizer(model, optimizer, lr)`` on ``(x, y)``.
    ``structure`` is ``ds.param.inspect(model, x)`` (computed when not given)."""
    st = inspect(model, x) if structure is None else structure
    types, writers, branch_types, internal = _layer_types(st)
    modules = dict(model.named_modules())
    initial = {m: {k: p.detach().clone() for k, p in modules[m].named_parameters()}
               for m in internal}
    before = _forward(model, x, types, writers, set())
    opt = plan.optimizer(model, optimizer, lr)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss_fn(loss, _first_tensor(model(x)), y).backward()
        opt.step()
    opt.zero_grad(set_to_none=True)
    after = _forward(model, x, types, writers, internal)
    values: dict[str, dict[str, list[float]]] = {"act": {}, "update": {}, "own_update": {}}

    def add(layer_type: str, b: torch.Tensor, a: torch.Tensor) -> None:
        values["act"].setdefault(layer_type, []).append(_rms(b))
        values["update"].setdefault(layer_type, []).append(_rms(a - b))

    for name in before.outputs:  # call order
        add(types[name], before.outputs[name], after.outputs[name])
    for k in sorted(before.tap.found):
        add(branch_types[k], before.tap.found[k][0], after.tap.found[k][0])
    for k in sorted(before.tap.found):
        add("stream", before.tap.found[k][1], after.tap.found[k][1])
    assert before.out is not None and after.out is not None
    add("output", before.out, after.out)
    with torch.no_grad():
        for name in before.outputs:
            if name in internal:
                args, kwargs = after.inputs[name]
                frozen = _first_tensor(functional_call(modules[name], initial[name], args,
                                                       kwargs))
                values["own_update"].setdefault(types[name], []).append(
                    _rms(after.outputs[name] - frozen))
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
    finding: str | None = None
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
    times, generator ``seed``). One seed gives no interval (NaN)."""
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
    return slope, float(low), float(high)


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


def expected_bands(plan: Plan) -> dict[tuple[str, str, str], tuple[Band, str]]:
    """The slope bands a transferring parameterization must meet, (layer type, quantity, axis)
    -> (band, reason), with the tolerance |slope - expected| <= :data:`FLAT`.

    Against width (muP, Yang & Hu 2021; nfd Eq. 1): every activation and update is Theta(1),
    except the output at init, which may shrink (mean-field muP: logits ~ n^-1/2) but not grow.
    Against depth (nfd Eq. 1 and 6; CompleteP): the stream, input, internal layers and output
    are Theta(1) at init and after the steps; each branch's output and its update scale as the
    recipe's branch multiplier, L^e with e read from the rule table (depth-muP -1/2, CompleteP
    -1; a recipe without one, such as SP or muP, is judged by the stream).
    """
    flat: Band = (-FLAT, FLAT)
    bands: dict[tuple[str, str, str], tuple[Band, str]] = {}
    for axis in ("width", "depth"):
        for t in ("input", "hidden", "branch_in", "stream", "output"):
            for q in ("act", "update"):
                bands[(t, q, axis)] = (flat, f"Theta(1) in {axis}")
        bands[("output", "act", axis)] = ((None, FLAT), f"output at init must not grow with "
                                                        f"{axis}")
        for t in ("branch", "branch_out"):
            for q in ("act", "update"):
                bands[(t, q, "width")] = (flat, "Theta(1) in width")
    for t in ("branch", "branch_out"):
        e = _depth_exponent(plan, t)
        if e is None:
            continue
        for q in ("act", "update"):
            bands[(t, q, "depth")] = ((e - FLAT, e + FLAT),
                                      f"branch multiplier of {plan.recipe.name}: L^{e:g}")
    return bands


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

    def fit(self, layer_type: str, quantity: str, axis: str) -> SlopeFit:
        """The fit of ``quantity`` of ``layer_type`` vs ``axis``; KeyError if not measured."""
        for f in self.fits:
            if (f.layer_type, f.quantity, f.axis) == (layer_type, quantity, axis):
                return f
        raise KeyError(f"no fit of {layer_type} {quantity} vs {axis}")

    def rows(self) -> list[dict[str, Any]]:
        """One row per (sweep, width, depth, seed, layer type, layer) for a CSV."""
        rows = []
        for p in self.points:
            acts = p.sizes.values["act"]
            for t in (t for t in LAYER_TYPES if t in acts):
                own = p.sizes.values.get("own_update", {}).get(t)
                for i, (a, u) in enumerate(zip(acts[t], p.sizes.values["update"][t],
                                               strict=True)):
                    rows.append({"sweep": p.axis, "width": p.width, "depth": p.depth,
                                 "seed": p.seed, "layer_type": t, "layer": i, "act_rms": a,
                                 "update_rms": u, "own_update_rms": None if own is None
                                 else own[i]})
        return rows

    def summary(self) -> dict[str, Any]:
        """The verdict, evidence, fits and lazy diagnostic as plain data (for JSON)."""
        def finite(v: float) -> float | None:
            return v if math.isfinite(v) else None

        return {
            "verdict": self.verdict, "evidence": self.evidence, "recipe": self.recipe,
            "optimizer": self.optimizer,
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
        lines = [f"{'layer type':<11} {'fit':<16} {'slope':>6}  {'95% CI':<16} {'band':<16} "
                 "finding"]
        for f in self.fits:
            if f.quantity == "own_update":
                continue
            ci = f"[{_num(f.ci_low)}, {_num(f.ci_high)}]"
            band = "-" if f.band is None else f"[{_edge(f.band[0])}, {_edge(f.band[1])}]"
            lines.append(f"{f.layer_type:<11} {f.quantity + '_vs_' + f.axis:<16} "
                         f"{_num(f.slope):>6}  {ci:<16} {band:<16} {f.finding or '-'}")
        for z in self.lazy:
            lines.append("lazy/complete " + z.text())
        lines.append(f"{self.verdict}: {self.evidence}")
        return "\n".join(lines)


def _judge(report: CoordReport, n_seeds: int) -> None:
    """The verdict from the fits that have a band (each interval judged by
    :func:`interval_finding`; a size that overflowed is a contradiction), and the evidence."""

    findings: dict[str, tuple[str, str]] = {}
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
    if verdict == "INCONCLUSIVE" and n_seeds < 2:
        lead += "; one seed gives no interval: pass seeds=[0, 1, 2]"
    others = "; ".join(f.text() for f in report.fits if f.finding == "supports")
    report.verdict = verdict
    report.evidence = ". ".join(p for p in (lead, said and f"Outside or undecided: {said}",
                                            others and f"Inside: {others}") if p) + "."


def _fit(axis: str, sizes: Sequence[int], pts: list[list[CoordPoint]], quantity: str,
         layer_type: str, band: tuple[Band, str] | None) -> SlopeFit | None:
    """The slope fit of one (quantity, layer type) over a sweep; None if it was not measured."""

    per_seed = [[p.mean(quantity, layer_type) for p in at_size] for at_size in pts]
    if any(math.isnan(v) for row in per_seed for v in row):
        return None
    means = tuple(float(np.mean(row)) for row in per_seed)
    finite = all(math.isfinite(v) for row in per_seed for v in row)
    positive = all(v > 0 for row in per_seed for v in row)
    b, why = band if band is not None else (None, "")
    if not (finite and positive):
        finding: str | None = "contradicts" if not finite else "undecided"
        slope = math.inf if not finite else math.nan
        return SlopeFit(layer_type, quantity, axis, tuple(sizes), means, slope, slope, slope, b,
                        None if b is None else finding,
                        why + ("; overflowed (non-finite)" if not finite else "; zero at some "
                               "size: no slope"))
    slope, low, high = bootstrap_slope(sizes, per_seed)
    finding = None if b is None else interval_finding(low, high, b)
    return SlopeFit(layer_type, quantity, axis, tuple(sizes), means, slope, low, high, b,
                    finding, why)


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
    """Sweep ``widths`` at ``base_depth`` and ``depths`` at ``base_width`` (one model per seed
    from ``make``), measure each (:func:`measure_point`), fit the slopes, judge them against
    :func:`expected_bands` of the plan's recipe and run the lazy diagnostic on the depth sweep.

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
    points: list[CoordPoint] = []
    sweeps: dict[str, tuple[list[int], list[list[CoordPoint]]]] = {}
    first_plan: Plan | None = None
    for axis, sizes in (("width", widths), ("depth", depths)):
        if not sizes:
            continue
        order = sorted(sizes)
        by_size = []
        for s in order:
            w, d = (s, base_depth) if axis == "width" else (base_width, s)
            at_size = []
            for seed in seeds:
                model, plan = make(w, d, seed)
                first_plan = first_plan or plan
                sizes_ = measure_point(model, plan, x, y, lr=lr, optimizer=optimizer,
                                       loss=loss, steps=steps)
                at_size.append(CoordPoint(axis, w, d, int(seed), sizes_))
                if progress is not None:
                    progress(1)
            by_size.append(at_size)
            points.extend(at_size)
        sweeps[axis] = (order, by_size)
    assert first_plan is not None
    report = CoordReport(points, first_plan.recipe.name, optimizer)
    bands = expected_bands(first_plan)
    for axis, (order, by_size) in sweeps.items():
        for t in LAYER_TYPES:
            for q in ("act", "update"):
                fit = _fit(axis, order, by_size, q, t, bands.get((t, q, axis)))
                if fit is not None:
                    report.fits.append(fit)
    if "depth" in sweeps:
        order, by_size = sweeps["depth"]
        for t in _INTERNAL:
            fit = _fit("depth", order, by_size, "own_update", t, None)
            if fit is None or not math.isfinite(fit.slope):
                continue
            report.fits.append(fit)
            label = _lazy_label(fit)
            deepest = by_size[-1]
            share = float(np.mean([p.mean("own_update", t) / p.mean("update", t)
                                   for p in deepest]))
            report.lazy.append(LazyFinding(t, fit, label, share))
    _judge(report, len(seeds))
    return report


def _lazy_label(fit: SlopeFit) -> str:
    """"lazy" if the own-update slope's interval lies at or below :data:`LAZY`, "complete" if
    at or above -:data:`FLAT`, else "undecided"."""

    if interval_finding(fit.ci_low, fit.ci_high, (None, LAZY)) == "supports":
        return "lazy"
    if interval_finding(fit.ci_low, fit.ci_high, (-FLAT, None)) == "supports":
        return "complete"
    return "undecided"

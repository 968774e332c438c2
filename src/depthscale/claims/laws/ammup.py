"""laws-ammup (laws Sec. 3.2, Eq. 7-9): the AM-muP eta* solving S_bar(eta) = 1, read from the
linearised one-step update energy at init without training (``probes.update_energy``), scales
like L^(-3/2) and agrees with the grid-searched slope of the same architecture."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from depthscale.claims.laws import sequential, settings
from depthscale.claims.laws.deciding import with_deciding_run
from depthscale.claims.laws.gates import ammup_finding, flat_evidence, law_parts, reported
from depthscale.claims.laws.law import LawResult, ammup_law
from depthscale.claims.laws.settings import LAW_BAND, Arch
from depthscale.claims.laws.sweeps import SweepSettings, effective_depth, study_costs
from depthscale.claims.registry import ClaimContext, Runs, claim, read_settings
from depthscale.claims.verdicts import (
    Band,
    ClaimOutcome,
    Finding,
    Judgement,
    Rows,
    RunPrice,
    conclude,
    deciding_run,
    findings_verdict,
    interval_finding,
    samples_to_decide,
)
from depthscale.report import figures

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["AmmupDepth", "AmmupSettings", "ArchAmmup", "draw_ammup", "judge_ammup",
           "laws_ammup", "measure_ammup"]

#: the band on AM-muP alpha - grid alpha
_AGREEMENT: Band = (-0.5, 0.5)


@dataclass(frozen=True, kw_only=True)
class AmmupSettings(SweepSettings):
    """laws-ammup's settings: the sweep budget of the grid route (:class:`SweepSettings`),
    the ``archs`` (typed mappings, :data:`~depthscale.claims.laws.settings.Arch`: their
    Table 1 sweeps), the probes' ``probe_seeds`` init seeds on a batch of ``batch``, and
    ``deep_depths``: per architecture, depths probed beyond the grid's (no training)."""

    archs: Mapping[str, Arch]
    probe_seeds: int
    batch: int
    deep_depths: Mapping[str, list[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class AmmupDepth:
    """One depth's row: the AM-muP eta* (geometric mean over init seeds), the standard
    deviation of its log10 over the seeds, and the grid-searched eta* at that depth."""

    architecture: str
    depth: int
    effective_depth: int
    eta_star_ammup: float
    log10_eta_ammup_sd: float
    eta_star_grid: float


@dataclass(frozen=True)
class ArchAmmup:
    """One architecture: its Table 1 law (``grid``), the AM-muP law over init seeds
    (``probe``), a row per depth, and (where ``deep_depths`` names more depths) the AM-muP law
    over the grid's depths and those together (``deep``: probes need no training), and
    ``growing``: the probes at those depths with widths that grow with L (:func:`growing_probes`).
    """

    key: str
    grid: LawResult
    probe: LawResult
    depths: list[AmmupDepth]
    deep: LawResult | None = None
    width: int | None = None
    growing: tuple[Runs, ...] = ()


def growing_probes(s: AmmupSettings, arch: Arch, deep: Sequence[int]) -> tuple[Runs, ...]:
    """The probes at the ``deep`` depths with widths growing with L: the width C L / L_grid
    (rounded up to a multiple of 16), so L/C stays at most the grid's deepest L_grid/C, where
    the law band was read; ``probe_seeds`` each on a batch of ``batch`` (one forward and
    backward)."""
    width = int(arch["width"])
    grid_l = max(effective_depth(arch, d) for d in arch["depths"])
    return tuple(Runs(arch["model"], 16 * math.ceil(width * effective_depth(arch, d)
                                                    / grid_l / 16),
                      d, arch["dataset"], count=s.probe_seeds, steps=1, batch=s.batch,
                      options=arch.get("options", {}), data={**s.data, **arch.get("data", {})})
                 for d in deep)


def _measure_arch(ctx: ClaimContext, s: AmmupSettings, key: str, arch: Arch) -> ArchAmmup:
    """One architecture's grid-search law and its AM-muP probes at every depth."""
    grid = sequential.table1_law(ctx, key, arch)
    grid_by_eff = {su.depth: 10**su.mean_log10_lr for su in grid.summaries}
    probe, etas_by_depth = ammup_law(ctx, s, arch, probe_seeds=s.probe_seeds, batch=s.batch)
    depths = []
    for depth, etas in zip(arch["depths"], etas_by_depth, strict=True):
        eff = effective_depth(arch, depth)
        sd = float(np.std(np.log10(etas), ddof=1)) if len(etas) > 1 else math.nan
        depths.append(AmmupDepth(key, depth, eff, float(np.exp(np.mean(np.log(etas)))), sd,
                                 grid_by_eff.get(eff, math.nan)))
    extra = sorted(set(s.deep_depths.get(key, [])) - set(arch["depths"]))
    deep = ammup_law(ctx, s, {**arch, "depths": sorted([*arch["depths"], *extra])},
                     probe_seeds=s.probe_seeds, batch=s.batch)[0] if extra else None
    return ArchAmmup(key, grid, probe, depths, deep, arch["width"],
                     growing_probes(s, arch, extra) if extra else ())


def measure_ammup(ctx: ClaimContext, s: AmmupSettings) -> list[ArchAmmup]:
    """Every listed architecture's grid-search law and AM-muP probes."""
    return [_measure_arch(ctx, s, key, arch) for key, arch in s.archs.items()]


def ammup_csv(arches: Sequence[ArchAmmup]) -> Rows:
    """The CSV: a row per architecture and depth (:class:`AmmupDepth`)."""
    return [asdict(r) for a in arches for r in a.depths]


def ammup_measured(arches: Sequence[ArchAmmup]) -> dict[str, float | None]:
    """The AM-muP slope with its interval, the grid slope, their difference and its interval
    ([AM low - grid high, AM high - grid low]) per architecture."""
    measured: dict[str, float | None] = {}
    for a in arches:
        (am_lo, am_hi), (gr_lo, gr_hi) = a.probe.interval, a.grid.interval
        pred, grid = a.probe.fit.slope, a.grid.fit.slope
        measured |= {f"alpha_ammup_{a.key}": pred, f"alpha_ammup_{a.key}_low": am_lo,
                     f"alpha_ammup_{a.key}_high": am_hi, f"alpha_grid_{a.key}": grid,
                     f"alpha_difference_{a.key}": pred - grid,
                     f"alpha_difference_{a.key}_low": am_lo - gr_hi,
                     f"alpha_difference_{a.key}_high": am_hi - gr_lo}
        if a.deep is not None:
            (d_lo, d_hi) = a.deep.interval
            measured |= {f"alpha_ammup_deep_{a.key}": a.deep.fit.slope,
                         f"alpha_ammup_deep_{a.key}_low": d_lo,
                         f"alpha_ammup_deep_{a.key}_high": d_hi}
    return measured


def judge_ammup(arches: Sequence[ArchAmmup], probe_seeds: int, seeds: int = 1,
                price: RunPrice | None = None) -> Judgement:
    """The AM-muP slope's interval in the law band (a contradiction read family-wise over the
    architectures) and its difference from the grid slope within +-0.5 (undecided where the
    grid sweep cannot locate eta*). The deeper probes' slope (``deep_depths``) is reported in
    the reason, not judged: there L reaches the width, outside the regime where Sec. 3.3's
    finite-width terms stay an L-independent 1 + O(1/C) prefactor; the run that would judge
    it probes with widths growing with L (:attr:`ArchAmmup.growing`). An INCONCLUSIVE verdict
    names the run that decides it (:func:`_deciding`), ``seeds`` and ``probe_seeds`` now."""
    bands: dict[str, Band] = {}
    findings: dict[str, tuple[Finding, str]] = {}
    for a in arches:
        (am_lo, am_hi), (gr_lo, gr_hi) = a.probe.interval, a.grid.interval
        pred, grid = a.probe.fit.slope, a.grid.fit.slope
        bands |= {f"alpha_ammup_{a.key}": LAW_BAND, f"alpha_difference_{a.key}": _AGREEMENT}
        findings[f"alpha_ammup_{a.key}"] = ammup_finding(a.probe, probe_seeds, len(arches))
        flat = flat_evidence(a.key, a.grid)
        no_grid = not math.isfinite(grid)
        findings[f"alpha_difference_{a.key}"] = (
            "undecided", flat or f"{a.key}: no grid slope (fewer than 3 depths located)"
        ) if no_grid else (
            interval_finding(am_lo - gr_hi, am_hi - gr_lo, _AGREEMENT),
            f"AM-muP - grid alpha {pred - grid:+.3g}, interval [{am_lo - gr_hi:+.3g}, "
            f"{am_hi - gr_lo:+.3g}], against +-0.5" + (f"; {flat}" if flat else ""))
    verdict, said = findings_verdict(findings)
    deep = "; ".join(
        f"{a.key} over all depths to L = {max(su.depth for su in a.deep.summaries)} at width "
        f"{a.width}, reported, not judged (L of the width's order, where Sec. 3.3's 1 + O(1/C) "
        "prefactor need not hold): " + ammup_finding(a.deep, probe_seeds, len(arches))[1]
        + "; " + deciding_run(
            "probes whose width grows with L, L/C at most the grid's deepest, at depths "
            + ", ".join(f"{r.depth} (width {r.width})" for r in a.growing), {}, price,
            seconds=None if price is None else price.items(a.growing))
        for a in arches if a.deep is not None)
    if verdict == "INCONCLUSIVE":
        said = "; ".join(x for x in (_deciding(arches, probe_seeds, seeds, price), said) if x)
    return Judgement(reported(ammup_measured(arches)), bands,
                     (verdict, "; ".join(x for x in (said, deep) if x)))


def _deciding(arches: Sequence[ArchAmmup], probe_seeds: int, seeds: int,
              price: RunPrice | None) -> str:
    """The run that decides the undecided findings: the probe seeds the AM-muP slope's
    interval needs, the grid seeds the difference's needs
    (:func:`~depthscale.claims.verdicts.samples_to_decide`), or, where the grid locates eta*
    at fewer than 3 depths, longer training (the laws parts' rule,
    :func:`~depthscale.claims.laws.deciding.with_deciding_run`)."""
    said = []
    for a in arches:
        (am_lo, am_hi), (gr_lo, gr_hi) = a.probe.interval, a.grid.interval
        pred, grid = a.probe.fit.slope, a.grid.fit.slope
        need = samples_to_decide(pred, am_lo, am_hi, LAW_BAND, probe_seeds)
        scattered = sequential.scatter_said(a.probe, len(arches))
        if scattered is not None:
            said.append(f"{a.key}'s AM-muP slope: more probe seeds cannot decide it ({scattered})")
        elif not need.decided and need.needed is not None:
            said.append(f"{a.key}'s AM-muP slope needs {need.said('probe seeds')}; "
                        + deciding_run(f"{need.needed} probe seeds",
                                       {"probe_seeds": need.needed}, price))
        elif not need.decided:
            said.append(f"{a.key}'s AM-muP slope: {need.said('probe seeds')}")
        if not math.isfinite(grid):
            grid_said = with_deciding_run(Judgement({}, decision=("INCONCLUSIVE", "")),
                                          {a.key: a.grid}, law_parts({a.key: a.grid}), seeds,
                                          price).decision
            said.append(grid_said[1] if grid_said else "")
            continue
        diff = samples_to_decide(pred - grid, am_lo - gr_hi, am_hi - gr_lo, _AGREEMENT, seeds)
        if not diff.decided and _scatter_blocks_difference(a, pred - grid):
            said.append(f"{a.key}'s difference from the grid slope: more seeds cannot decide it "
                        "(the depths' scatter about each route's line, which seeds leave, "
                        "keeps its interval across the edge: more depths would narrow it)")
        elif not diff.decided and diff.needed is not None:
            said.append(f"{a.key}'s difference from the grid slope needs {diff.said()}; "
                        + deciding_run(
                            f"{diff.needed} grid seeds", {"seeds": diff.needed}, price,
                            factor=diff.needed / seeds))
        elif not diff.decided:
            said.append(f"{a.key}'s difference from the grid slope: {diff.said()}")
    return "; ".join(x for x in said if x)


def _scatter_blocks_difference(a: ArchAmmup, difference: float) -> bool:
    """Whether the depths' scatter alone (:func:`~depthscale.claims.laws.sequential.floor_share`
    of each route's slope variance, read from its interval's half-width) keeps the difference's
    interval across the nearest edge of the agreement band however many seeds are added."""
    floor = math.fsum(((hi - lo) / 2) ** 2 * sequential.floor_share(law)
                      for law in (a.probe, a.grid)
                      for lo, hi in [law.interval] if math.isfinite(hi - lo))
    distance = min(abs(edge - difference) for edge in _AGREEMENT if edge is not None)
    return floor > 0 and math.sqrt(floor) >= distance


def draw_ammup(arches: Sequence[ArchAmmup]) -> Figure:
    """One log-log panel per architecture: the AM-muP eta* (geometric mean over init seeds)
    and the grid-searched eta* against effective depth, with both slopes."""
    fig, axes = figures.new_figure(ncols=len(arches))
    for ax, a in zip(axes, arches, strict=True):
        Ls = [r.effective_depth for r in a.depths]
        ax.loglog(Ls, [r.eta_star_ammup for r in a.depths], "s-",
                  label=f"AM-muP (slope {a.probe.fit.slope:.2f})")
        ax.loglog(Ls, [r.eta_star_grid for r in a.depths], "o--",
                  label=f"grid search (slope {a.grid.fit.slope:.2f})")
        figures.label_log_ticks(ax, Ls)
        ax.set_xlabel("effective depth L")
        ax.set_ylabel("eta*")
        ax.set_title(f"laws Sec. 3.2: AM-muP ({a.key})", fontsize=9)
        ax.legend(fontsize=7)
    return fig


def ammup_cost(settings: Mapping[str, Any], device: str) -> list[dict[str, Any] | Runs]:
    """The grid route's Table 1 studies at their first stage
    (:func:`~depthscale.claims.laws.sweeps.study_costs`) and the probes: ``probe_seeds``
    networks at every depth (``deep_depths`` too), one forward and backward each."""
    s = read_settings(AmmupSettings, settings)
    probes = [Runs(arch["model"], int(arch["width"]), d, arch["dataset"], count=s.probe_seeds,
                   steps=1, batch=s.batch, options=arch.get("options", {}),
                   data={**s.data, **arch.get("data", {})})
              for key, arch in s.archs.items()
              for d in sorted({*arch["depths"], *s.deep_depths.get(key, [])})]
    return [*study_costs(s, s.archs, device), *probes]


@claim(
    "laws-ammup", "laws",
    "AM-muP: eta* solving S_bar(eta) = 1 scales like L^(-3/2), without training",
    **settings.AMMUP,
    cost=ammup_cost,
    headline=dict(
        metric=("alpha_ammup_cnn1d", "alpha_ammup_cnn2d"),
        ci=("{metric}_low", "{metric}_high"),
        label="slope of the AM-muP eta* (S_bar(eta) = 1) vs L, no training",
        paper="eta* = Theta(L^(-3/2)): slope -3/2",
        ref="Sec. 3.2-3.5, Eq. 9",
        statement="The AM-muP learning rate eta* is defined by S_bar(eta*) = 1, S_bar the mean "
                  "over depth units of E[(Delta z)^2] (Eq. 9); for CNNs, ResNets and Transformers "
                  "eta* = kappa L^(-3/2) to leading order (Sec. 3.2-3.5).",
    ),
)
def laws_ammup(ctx: ClaimContext) -> ClaimOutcome:
    """laws Sec. 3.2: for each depth and init seed, eta*_AM = (mean_l A_l)^(-1/2) from the
    linearised one-step pre-activation change at init (probes.update_energy), fitted against
    effective depth like the grid optima (seeds -> mean log10 eta, WLS slope with its t- and
    seed-bootstrap intervals). Findings on intervals: the AM-muP slope in [-1.9, -1.0], and its
    difference from the grid-searched slope of the same architecture within +-0.5 (the interval
    of the difference is [AM low - grid high, AM high - grid low]; undecided where the grid
    sweep locates eta* at fewer than 3 depths; depths it cannot locate are left out of the grid
    fit, see :func:`~depthscale.claims.laws.gates.flat_evidence`), and where ``deep_depths``
    names deeper nets (no training, so far deeper than the grid), the AM-muP slope over all the
    depths, reported (L reaches the width there). Every listed architecture is banded."""
    s = read_settings(AmmupSettings, ctx.settings)
    arches = measure_ammup(ctx, s)
    j = judge_ammup(arches, s.probe_seeds, s.seed_count(),
                    RunPrice.of(ctx, "laws-ammup", ctx.spent_seconds))
    fig = draw_ammup(arches)
    rows = ammup_csv(arches)
    return conclude(ctx, "laws-ammup", j, rows, fig)

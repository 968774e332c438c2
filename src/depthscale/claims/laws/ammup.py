"""laws-ammup (laws Sec. 3.2, Eq. 7-9): the AM-muP eta* solving S_bar(eta) = 1, read from the
linearised one-step update energy at init without training (``probes.update_energy``), scales
like L^(-3/2) and agrees with the grid-searched slope of the same architecture."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from depthscale.claims.laws import figures, settings
from depthscale.claims.laws.gates import band_finding, flat_evidence
from depthscale.claims.laws.law import LawResult, probe_law, table1_law
from depthscale.claims.laws.outcome import Measurement, finish
from depthscale.claims.laws.settings import LAW_BAND, Arch
from depthscale.claims.laws.sweeps import effective_depth, laws_cost, sweep_recipe
from depthscale.claims.registry import ClaimContext, claim
from depthscale.claims.verdicts import (
    Band,
    ClaimOutcome,
    Finding,
    Judgement,
    findings_verdict,
    interval_finding,
)
from depthscale.data import Dataset
from depthscale.models import build
from depthscale.probes import update_energy
from depthscale.stats.sweeps import Optimum

__all__ = ["AmmupDepth", "ArchAmmup", "ammup_finding", "judge_ammup", "laws_ammup",
           "measure_ammup", "probe_arch"]

#: the band on AM-muP alpha - grid alpha
_AGREEMENT: Band = (-0.5, 0.5)


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
    over the grid's depths and those together (``deep``: probes need no training)."""

    key: str
    grid: LawResult
    probe: LawResult
    depths: list[AmmupDepth]
    deep: LawResult | None = None
    width: int | None = None


def _probe_etas(ctx: ClaimContext, arch: Arch, data: Dataset, depth: int, eff: int) -> list[float]:
    """eta*_AM = (mean_l A_l)^(-1/2) at ``depth`` for each init seed, divided by the negative
    control's extra LR multiplier L^lr_depth_exponent (1 without it)."""
    s, b = ctx.settings, ctx.settings["batch"]
    etas = []
    for seed in range(ctx.seed, ctx.seed + s["probe_seeds"]):
        net, plan = build(arch["model"], sweep_recipe(s, arch), input_shape=data.sample_shape,
                          n_out=data.n_out, width=arch["width"], depth=depth, seed=seed,
                          **arch.get("options", {}))
        g = torch.Generator().manual_seed(seed)
        idx = torch.randperm(len(data.x_train), generator=g)
        xb, yb = data.x_train[idx[:b]], data.y_train[idx[:b]]
        xe = data.x_train[idx[b : 2 * b]]
        lr_multiplier = eff ** s.get("lr_depth_exponent", 0.0)  # the control's
        etas.append(update_energy(net, plan, xb, yb, xe).eta_star / lr_multiplier)
    return etas


#: probe_arch's results in this process: laws-table1's AM-muP route and laws-ammup probe the
#: same architectures with the same seeds (deterministic, no training)
_PROBES: dict[str, tuple[LawResult, list[list[float]]]] = {}


def probe_arch(ctx: ClaimContext, arch: Arch) -> tuple[LawResult, list[list[float]]]:
    """The AM-muP law of ``arch`` over its depths and ``probe_seeds`` init seeds (no
    training), and the probes' eta* per depth (computed once per process and inputs)."""
    s = ctx.settings
    key = json.dumps([arch, ctx.seed, str(ctx.data_dir), sweep_recipe(s, arch),
                      s.get("lr_depth_exponent", 0.0), s["probe_seeds"], s["batch"]],
                     sort_keys=True, default=str)
    if key not in _PROBES:
        _PROBES[key] = _probe_arch(ctx, arch)
    law, etas = _PROBES[key]
    return law, [list(e) for e in etas]


def _probe_arch(ctx: ClaimContext, arch: Arch) -> tuple[LawResult, list[list[float]]]:
    from depthscale.data import load

    data = load(arch["dataset"], data_dir=ctx.data_dir, seed=ctx.seed)
    probes: list[Optimum] = []
    etas_by_depth = []
    for depth in arch["depths"]:
        eff = effective_depth(arch, depth)
        etas = _probe_etas(ctx, arch, data, depth, eff)
        seeds = range(ctx.seed, ctx.seed + len(etas))
        probes += [Optimum(eff, seed, eta, eta, False, "ammup")
                   for seed, eta in zip(seeds, etas, strict=True)]
        etas_by_depth.append(etas)
    return probe_law(probes, seed=ctx.seed), etas_by_depth


def ammup_finding(law: LawResult, probe_seeds: int, parts: int = 1) -> tuple[Finding, str]:
    """The AM-muP route's finding on the law band: the probe slope's interval (t and seed
    bootstrap over init seeds) inside, outside or across it, a contradiction read family-wise
    over the claim's ``parts`` (:func:`~depthscale.claims.laws.gates.band_finding`)."""
    low, high = law.interval
    finding, family = band_finding(law, parts)
    return (finding, f"AM-muP alpha {law.fit.slope:.3g}, interval [{low:.3g}, {high:.3g}] over "
                     f"{probe_seeds} init seeds, against band {list(LAW_BAND)}"
                     + (f", {family}" if family else ""))


def _measure_arch(ctx: ClaimContext, key: str, arch: Arch) -> ArchAmmup:
    """One architecture's grid-search law and its AM-muP probes at every depth."""
    grid = table1_law(ctx, key, arch)
    grid_by_eff = {su.depth: 10**su.mean_log10_lr for su in grid.summaries}
    probe, etas_by_depth = probe_arch(ctx, arch)
    depths = []
    for depth, etas in zip(arch["depths"], etas_by_depth, strict=True):
        eff = effective_depth(arch, depth)
        sd = float(np.std(np.log10(etas), ddof=1)) if len(etas) > 1 else math.nan
        depths.append(AmmupDepth(key, depth, eff, float(np.exp(np.mean(np.log(etas)))), sd,
                                 grid_by_eff.get(eff, math.nan)))
    extra = sorted(set(ctx.settings.get("deep_depths", {}).get(key, [])) - set(arch["depths"]))
    deep = probe_arch(ctx, {**arch, "depths": sorted([*arch["depths"], *extra])})[0] if (
        extra) else None
    return ArchAmmup(key, grid, probe, depths, deep, arch["width"])


def measure_ammup(ctx: ClaimContext) -> list[ArchAmmup]:
    """Every listed architecture's grid-search law and AM-muP probes."""
    return [_measure_arch(ctx, key, arch) for key, arch in ctx.settings["archs"].items()]


def ammup_measurement(arches: Sequence[ArchAmmup]) -> Measurement:
    """The AM-muP slope with its interval, the grid slope, their difference and its interval
    ([AM low - grid high, AM high - grid low]) per architecture; a CSV row per depth."""
    measured: dict[str, float | None] = {}
    rows: list[dict[str, Any]] = []
    for a in arches:
        (am_lo, am_hi), (gr_lo, gr_hi) = a.probe.interval, a.grid.interval
        pred, grid = a.probe.fit.slope, a.grid.fit.slope
        rows += [asdict(r) for r in a.depths]
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
    return Measurement(measured, rows)


def judge_ammup(arches: Sequence[ArchAmmup], probe_seeds: int) -> Judgement:
    """The AM-muP slope's interval in the law band (a contradiction read family-wise over the
    architectures) and its difference from the grid slope within +-0.5 (undecided where the
    grid sweep cannot locate eta*). The deeper probes' slope (``deep_depths``) is reported in
    the reason, not judged: there L reaches the width, outside the regime where Sec. 3.3's
    finite-width terms stay an L-independent 1 + O(1/C) prefactor."""
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
        for a in arches if a.deep is not None)
    return Judgement({}, bands, (verdict, "; ".join(x for x in (said, deep) if x)))


@claim(
    "laws-ammup", "laws",
    "AM-muP: eta* solving S_bar(eta) = 1 scales like L^(-3/2), without training",
    **settings.AMMUP,
    cost=laws_cost,
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
    arches = measure_ammup(ctx)
    return finish(ctx, "laws-ammup", ammup_measurement(arches),
                  judge_ammup(arches, ctx.settings["probe_seeds"]), figures.ammup_figure(arches))

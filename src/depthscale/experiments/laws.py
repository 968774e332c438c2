"""Claims of the depth LR-law paper (laws): the L^(-3/2) law, zero-shot transfer, AM-muP.

Each architecture's sweep is a study (``depthscale.experiments.study``) written as TOML into
``OUT/<study>/spec.toml`` and run through :func:`run_study` into that folder's results store:
killed and rerun, a claim runs only the missing runs, and claims that need the same sweep share
it. ``depthscale sweep OUT/<study>/spec.toml`` + ``depthscale fit OUT/<study>`` reproduce any
of them by hand. Protocol (laws Sec. 4.1, CLAIMS.md B): log-spaced LR grid, one epoch of SGD
(batch 128, cross-entropy), eta* minimising the epoch-averaged running loss, refined by a
parabola in log LR, seeds -> mean and 95% CI of log10 eta*, weighted least squares against the
effective depth L = m + K.
"""

from __future__ import annotations

import contextlib
import math
import statistics
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from depthscale.experiments.analysis import (
    LawFit,
    SeedSummary,
    optimal_lrs,
    seed_summary,
    wls_power_law,
)
from depthscale.experiments.claims import (
    ClaimContext,
    ClaimOutcome,
    claim,
    claim_outcome,
)
from depthscale.experiments.store import open_store
from depthscale.experiments.sweep import run_study
from depthscale.fits import loglog_slope
from depthscale.models import build, create
from depthscale.probes import update_energy
from depthscale.report import figures

__all__ = ["study_toml"]

_LAW_BAND = (-1.9, -1.0)


def study_toml(name: str, arch: dict[str, Any], *, seeds: int, epochs: float,
               data: dict[str, Any]) -> str:
    """The TOML of one architecture's depth x LR study (laws Sec. 4.1 protocol)."""
    lo, hi, num = arch["lr_logspace"]
    lines = [
        "[study]", f'name = "{name}"', f'model = "{arch["model"]}"', 'recipe = "laws"',
        f'dataset = "{arch["dataset"]}"', "[model]",
        *(f"{k} = {_toml(v)}" for k, v in arch.get("options", {}).items()),
        "[data]", *(f"{k} = {_toml(v)}" for k, v in data.items()),
        "[train]", 'optimizer = "sgd"', f"epochs = {epochs}", "batch_size = 128", 'loss = "ce"',
        "[grid]", f"depth = {arch['depths']}", f"width = [{arch['width']}]",
        f"seed = {list(range(seeds))}", f"lr = {{ logspace = [{lo}, {hi}, {num}] }}",
        "[analysis]", 'criterion = "running"', 'axis = "depth"',
    ]
    return "\n".join(lines) + "\n"


def _toml(v: Any) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(v)


def _study(ctx: ClaimContext, key: str, arch: dict[str, Any]) -> tuple[list[SeedSummary], LawFit]:
    """Run (or resume) one architecture's sweep under ``ctx.out_dir`` and fit its law."""
    s = ctx.settings
    name = f"laws-{key}"
    folder = ctx.out_dir / name
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / "spec.toml"
    spec.write_text(study_toml(name, arch, seeds=s["seeds"], epochs=s["epochs"],
                               data={**s.get("data", {}), **arch.get("data", {})}))

    @contextlib.contextmanager
    def progress(total: int) -> Iterator[Callable[[int], None]]:
        ctx.set_total(total)
        yield ctx.progress

    run_study(spec, folder, progress=progress)
    with open_store(folder, readonly=True) as store:
        records = [dict(r) for r in store.records()]
    eff = {}
    for d in arch["depths"]:
        net = create(arch["model"], input_shape=tuple(arch["input_shape"]), n_out=10,
                     width=arch["width"], depth=d, **arch.get("options", {}))
        eff[d] = int(net.effective_depth)
    for r in records:
        r["effective_depth"] = eff[int(r["depth"])]
    summaries = seed_summary(optimal_lrs(records, "running", axis="effective_depth"))
    return summaries, wls_power_law(summaries)


_MNIST1D_HALF = {"n_train": 2000}  # quick: half of MNIST-1D's training set per epoch
_ARCHS_QUICK: dict[str, dict[str, Any]] = {
    "cnn1d": {"model": "cnn1d", "dataset": "mnist1d", "input_shape": [1, 40], "width": 32,
              "depths": [2, 3, 4, 6, 8, 12], "lr_logspace": [-3, 0.5, 12],
              "data": _MNIST1D_HALF},
    "convresnet1d": {"model": "convresnet1d", "dataset": "mnist1d", "input_shape": [1, 40],
                     "width": 32, "depths": [1, 2, 4, 8, 16], "lr_logspace": [-3, 0.5, 12],
                     "data": _MNIST1D_HALF},
    "cnn2d": {"model": "cnn2d", "dataset": "digits", "input_shape": [1, 8, 8], "width": 32,
              "depths": [2, 3, 4, 6, 8], "lr_logspace": [-3, 0.5, 12]},
    "vit": {"model": "vit", "dataset": "mnist1d", "input_shape": [1, 40], "width": 32,
            "depths": [1, 2, 3, 4, 6], "lr_logspace": [-4, 0, 12],
            "options": {"patch_size": 4, "heads": 4}, "data": _MNIST1D_HALF},
}
_ARCHS_FULL: dict[str, dict[str, Any]] = {
    "cnn2d": {"model": "cnn2d", "dataset": "cifar10", "input_shape": [3, 32, 32], "width": 64,
              "depths": [2, 3, 4, 6, 8, 12, 16, 24], "lr_logspace": [-4, 1, 80]},
    "convresnet2d": {"model": "convresnet2d", "dataset": "cifar10", "input_shape": [3, 32, 32],
                     "width": 64, "depths": [2, 4, 8, 16, 32, 64], "lr_logspace": [-4, 1, 80]},
    "vit": {"model": "vit", "dataset": "cifar10", "input_shape": [3, 32, 32], "width": 192,
            "depths": [2, 4, 6, 8, 12, 16], "lr_logspace": [-5, 0, 80],
            "options": {"patch_size": 4, "heads": 3}},
}


def _law_figure(results: dict[str, tuple[list[SeedSummary], LawFit]]) -> Any:
    fig, axes = figures.new_figure(ncols=len(results), width=3.4)
    for ax, (key, (summ, fit)) in zip(axes, results.items(), strict=True):
        xs = [s.depth for s in summ]
        ys = [10**s.mean_log10_lr for s in summ]
        low = [10**s.mean_log10_lr - 10**s.ci_low if math.isfinite(s.ci_low) else 0 for s in summ]
        high = [10**s.ci_high - 10**s.mean_log10_lr if math.isfinite(s.ci_high) else 0
                for s in summ]
        ax.errorbar(xs, ys, yerr=[low, high], fmt="o", label="eta* (95% CI)")
        grid = np.geomspace(min(xs), max(xs), 50)
        ax.plot(grid, 10**fit.intercept * grid**fit.slope, "--",
                label=f"alpha = {fit.slope:.2f} (R^2 {fit.r2:.2f})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        figures.label_log_ticks(ax, xs)
        ax.set_xlabel("effective depth L")
        ax.set_title(key, fontsize=9)
        ax.legend(fontsize=6)
    return fig


def _rows(results: dict[str, tuple[list[SeedSummary], LawFit]]) -> list[dict[str, Any]]:
    return [{"architecture": key, "effective_depth": s.depth, "mean_log10_eta_star":
             s.mean_log10_lr, "ci_low": s.ci_low, "ci_high": s.ci_high, "seeds": s.n_seeds,
             "on_grid_edge": s.any_on_edge, "alpha": fit.slope, "alpha_ci_low": fit.slope_ci[0],
             "alpha_ci_high": fit.slope_ci[1], "r2": fit.r2}
            for key, (summ, fit) in results.items() for s in summ]


@claim(
    "laws-table1", "laws",
    "The optimal LR follows eta* ~ L^alpha with alpha near -3/2 for CNNs, ResNets and ViTs",
    quick={"archs": _ARCHS_QUICK, "seeds": 2, "epochs": 1, "data": {}},
    full={"archs": _ARCHS_FULL, "seeds": 3, "epochs": 1, "data": {}},
    smoke={"archs": {"cnn1d": {**_ARCHS_QUICK["cnn1d"], "width": 8, "depths": [1, 2, 3],
                               "lr_logspace": [-2, 0, 3]}},
           "seeds": 1, "epochs": 0.1, "data": {"n_train": 256, "n_test": 64}},
)
def laws_table1(ctx: ClaimContext) -> ClaimOutcome:
    """laws Table 1: alpha (WLS slope of log10 eta* on log10 L, weights 1/SEM^2) per
    architecture, with its CI and R^2; band [-1.9, -1.0] for each."""
    results = {key: _study(ctx, key, arch) for key, arch in ctx.settings["archs"].items()}
    measured: dict[str, float | None] = {}
    for key, (_, fit) in results.items():
        measured[f"alpha_{key}"] = fit.slope
        measured[f"alpha_{key}_ci_low"] = fit.slope_ci[0]
        measured[f"alpha_{key}_ci_high"] = fit.slope_ci[1]
        measured[f"r2_{key}"] = fit.r2
    bands = {f"alpha_{key}": _LAW_BAND for key in results}
    edges = [f"{k} L={s.depth}" for k, (summ, _) in results.items() for s in summ
             if s.any_on_edge]
    note = f"optimum on the LR grid's edge: {', '.join(edges)}" if edges else ""
    return claim_outcome(ctx, "laws-table1", measured, bands, _rows(results), _law_figure(results),
                   note)


@claim(
    "laws-transfer", "laws",
    "Zero-shot eta(L) = eta(L0)(L/L0)^(-3/2) beats raw transfer of the tuned LR",
    quick={"archs": {"cnn1d": _ARCHS_QUICK["cnn1d"]}, "source_depth": 4, "seeds": 2,
           "epochs": 1, "data": {}},
    full={"archs": {"vit": _ARCHS_FULL["vit"]}, "source_depth": 12, "seeds": 3, "epochs": 1,
          "data": {}},
    smoke={"archs": {"cnn1d": {**_ARCHS_QUICK["cnn1d"], "width": 8, "depths": [1, 2, 3],
                               "lr_logspace": [-2, 0, 3]}},
           "source_depth": 2, "seeds": 1, "epochs": 0.1, "data": {"n_train": 256, "n_test": 64}},
)
def laws_transfer(ctx: ClaimContext) -> ClaimOutcome:
    """laws Table 5: calibrate eta* at the source depth, predict the other depths with the
    -3/2 law on effective depth, compare with their own grid-searched eta* (the oracle):
    median |log10 eta_pred - log10 eta_oracle| for scaled vs raw (eta unchanged) transfer.
    Band: scaled error - raw error <= -0.01 decades (scaled must be better)."""
    s = ctx.settings
    ((key, arch),) = s["archs"].items()
    summaries, _ = _study(ctx, key, arch)
    source_eff = int(create(arch["model"], input_shape=tuple(arch["input_shape"]), n_out=10,
                            width=arch["width"], depth=s["source_depth"],
                            **arch.get("options", {})).effective_depth)
    by_depth = {su.depth: su.mean_log10_lr for su in summaries}
    log_eta0 = by_depth[source_eff]
    rows, scaled_err, raw_err = [], [], []
    for depth_eff, oracle in by_depth.items():
        if depth_eff == source_eff:
            continue
        scaled = log_eta0 - 1.5 * math.log10(depth_eff / source_eff)
        scaled_err.append(abs(scaled - oracle))
        raw_err.append(abs(log_eta0 - oracle))
        rows.append({"effective_depth": depth_eff, "log10_oracle": oracle, "log10_scaled": scaled,
                     "log10_raw": log_eta0, "scaled_error": scaled_err[-1],
                     "raw_error": raw_err[-1]})
    med_s, med_r = statistics.median(scaled_err), statistics.median(raw_err)
    measured = {"median_error_scaled": med_s, "median_error_raw": med_r,
                "scaled_minus_raw": med_s - med_r}
    bands = {"scaled_minus_raw": (None, -0.01)}
    fig, axes = figures.new_figure()
    ax = axes[0]
    Ls = [r["effective_depth"] for r in rows]
    ax.semilogx(Ls, [r["log10_oracle"] for r in rows], "ko", label="oracle (grid search)")
    ax.semilogx(Ls, [r["log10_scaled"] for r in rows], "s", label="(L/L0)^(-3/2) transfer")
    ax.semilogx(Ls, [r["log10_raw"] for r in rows], "x", label="raw transfer")
    ax.axvline(source_eff, color="grey", ls=":", lw=1)
    ax.set_xlabel("effective depth L")
    ax.set_ylabel("log10 eta")
    ax.set_title(f"laws Table 5 ({key}, source L0 = {source_eff})", fontsize=9)
    ax.legend(fontsize=7)
    return claim_outcome(ctx, "laws-transfer", measured, bands, rows, fig)


@claim(
    "laws-ammup", "laws",
    "AM-muP: eta* solving S_bar(eta) = 1 scales like L^(-3/2), without training",
    quick={"archs": {"cnn1d": _ARCHS_QUICK["cnn1d"]}, "probe_seeds": 3, "batch": 128,
           "seeds": 2, "epochs": 1, "data": {}},
    full={"archs": {"cnn2d": _ARCHS_FULL["cnn2d"]}, "probe_seeds": 8, "batch": 128,
          "seeds": 3, "epochs": 1, "data": {}},
    smoke={"archs": {"cnn1d": {**_ARCHS_QUICK["cnn1d"], "width": 8, "depths": [1, 2, 3],
                               "lr_logspace": [-2, 0, 3]}},
           "probe_seeds": 1, "batch": 16, "seeds": 1, "epochs": 0.1,
           "data": {"n_train": 256, "n_test": 64}},
)
def laws_ammup(ctx: ClaimContext) -> ClaimOutcome:
    """laws Sec. 3.2: for each depth, eta*_AM = (mean_l A_l)^(-1/2) from the linearised
    one-step pre-activation change at init (probes.update_energy, averaged over init seeds and
    batches), its log-log slope against effective depth (band [-1.9, -1.0]), and its agreement
    with the grid-searched eta* of the same architecture: |slope_AM - slope_grid| <= 0.5."""
    from depthscale.data import load

    s = ctx.settings
    ((key, arch),) = s["archs"].items()
    summaries, grid_fit = _study(ctx, key, arch)
    data = load(arch["dataset"], data_dir=ctx.data_dir, seed=ctx.seed)
    b = s["batch"]
    rows = []
    for depth in arch["depths"]:
        etas = []
        for seed in range(s["probe_seeds"]):
            net, plan = build(arch["model"], "laws", input_shape=data.sample_shape,
                              n_out=data.n_out, width=arch["width"], depth=depth, seed=seed,
                              **arch.get("options", {}))
            g = torch.Generator().manual_seed(seed)
            idx = torch.randperm(len(data.x_train), generator=g)
            xb, yb = data.x_train[idx[:b]], data.y_train[idx[:b]]
            xe = data.x_train[idx[b : 2 * b]]
            etas.append(update_energy(net, plan, xb, yb, xe).eta_star)
        rows.append({"depth": depth, "effective_depth": int(net.effective_depth),
                     "eta_star_ammup": float(np.exp(np.mean(np.log(etas))))})
    pred = loglog_slope([r["effective_depth"] for r in rows],
                        [r["eta_star_ammup"] for r in rows]).slope
    grid_by_eff = {su.depth: 10**su.mean_log10_lr for su in summaries}
    for r in rows:
        r["eta_star_grid"] = grid_by_eff.get(r["effective_depth"], math.nan)
    measured = {"alpha_ammup": pred, "alpha_grid": grid_fit.slope,
                "alpha_difference": abs(pred - grid_fit.slope)}
    bands = {"alpha_ammup": _LAW_BAND, "alpha_difference": (None, 0.5)}
    fig, axes = figures.new_figure()
    ax = axes[0]
    Ls = [r["effective_depth"] for r in rows]
    ax.loglog(Ls, [r["eta_star_ammup"] for r in rows], "s-", label=f"AM-muP (slope {pred:.2f})")
    ax.loglog(Ls, [r["eta_star_grid"] for r in rows], "o--",
              label=f"grid search (slope {grid_fit.slope:.2f})")
    figures.label_log_ticks(ax, Ls)
    ax.set_xlabel("effective depth L")
    ax.set_ylabel("eta*")
    ax.set_title(f"laws Sec. 3.2: AM-muP ({key})", fontsize=9)
    ax.legend(fontsize=7)
    return claim_outcome(ctx, "laws-ammup", measured, bands, rows, fig)

"""``depthscale sweep``, ``status``, ``fit`` and ``transfer``: studies of many runs and
what they say about the optimal learning rate."""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from depthscale.cli.common import (
    finite_float,
    fmt,
    int_list,
    json_safe,
    progress,
)
from depthscale.errors import ConfigError


def _cmd_sweep(args: argparse.Namespace) -> int:
    from depthscale.studies.spec import load_study
    from depthscale.studies.sweep import run_study

    study = load_study(args.spec)  # a bad spec fails here, before the progress bar
    name = study.name
    result = run_study(
        study, args.out, backend=args.backend, workers=args.workers, address=args.address,
        progress=lambda total: progress(f"sweep {name}", total), retries=args.retries,
        retry_failed=args.retry_failed, wait=args.wait, batch_lrs=args.batch_lrs,
    )
    c = result.counts
    batched = (f"; {result.batched} in {result.groups} batched LR group(s)"
               if args.batch_lrs else "")
    print(f"sweep {result.name}: {result.planned} runs; {result.skipped} already in {args.out}, "
          f"{result.ran} run now ({c['done']} done, {c['diverged']} diverged, "
          f"{c['failed']} failed{batched}); see 'depthscale status {args.out}'")
    summary = result.summary
    if summary is not None and summary.failed:
        print(f"depthscale: error: {summary.failed} run(s) failed (see 'depthscale status "
              f"{args.out}'); fix the cause and rerun with --retry-failed", file=sys.stderr)
        return 1
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    from depthscale.studies.store import open_store

    with open_store(args.dir, readonly=True) as store:
        for line in store.summary().lines(str(args.dir)):
            print(line)
        if args.csv is not None:
            print(f"CSV: {store.export_csv(args.csv)}")
        if args.parquet is not None:
            print(f"Parquet: {store.export_parquet(args.parquet)}")
    return 0


def _cmd_fit(args: argparse.Namespace) -> int:
    """Analyse a finished (or partial) sweep as its ``[analysis]`` says (flags override): the
    optimal LR per size with its power-law fit and spread (laws Sec. 4.1, nfd Fig. 5 row 2),
    per group if asked, or the best value of another swept setting per size (nfd Fig. 2)."""
    from depthscale.io.outputs import check_output_dir
    from depthscale.studies.runner import effective_depth
    from depthscale.studies.store import open_store

    # fit.json goes beside the study unless --out says otherwise (then DIR is only read)
    out = args.out or check_output_dir(args.dir, "DIR (where fit.json goes without --out)")
    with open_store(args.dir, readonly=True) as store:
        finished = [r for r in store.records(planned_only=True)
                    if r.status in ("done", "diverged")]
    done = [dict(r) for r in finished]
    if not done:
        raise ConfigError(f"no finished runs in {args.dir}; run 'depthscale sweep' first")
    analysis = _fit_analysis(args)
    axis = analysis.axis
    if args.effective_depth:
        sizes: dict[int, int] = {}
        for r, rec in zip(done, finished, strict=True):
            if r["depth"] not in sizes:
                sizes[r["depth"]] = effective_depth(rec.spec)
            r["effective_depth"] = sizes[r["depth"]]
        axis = "effective_depth"
    out.mkdir(parents=True, exist_ok=True)
    if analysis.optimize == "lr":
        _fit_lr(done, analysis, axis, out)
    else:
        _fit_scan(done, analysis, axis, out)
    print(f"fit.json and fit.png in {out}")
    return 0


def _fit_analysis(args: argparse.Namespace) -> Any:
    """The study's ``[analysis]`` (from DIR/study.toml, defaults without one), the command-line
    options replacing its keys, validated against the study's grid axes."""
    from depthscale.studies.spec import AnalysisSpec, load_study, parse_analysis

    path = args.dir / "study.toml"
    study = load_study(path, check_cost=False) if path.exists() else None  # its runs are done
    base = study.analysis if study is not None else AnalysisSpec()
    flags = {k: getattr(args, k) for k in ("criterion", "axis", "optimize", "group", "aggregate")
             if getattr(args, k) is not None}
    table = {k: v for k, v in asdict(base).items() if v is not None}
    if "optimize" in flags and "aggregate" not in flags:
        table.pop("aggregate")  # its default follows optimize
    table.update(flags)
    source = str(path) + (" with the fit options" if flags else "")
    return parse_analysis(table, axes=None if study is None else [k for k, _ in study.grid],
                          source=source)


def _write_fit(out: Path, payload: dict[str, Any], fig: Any) -> None:
    from depthscale.io.atomic import atomic_write
    from depthscale.report.figures import save_figure

    with atomic_write(out / "fit.json") as fh:
        json.dump(json_safe(payload), fh, indent=2, allow_nan=False)
    save_figure(fig, out / "fit.png")


def _fit_lr(done: list[dict[str, Any]], analysis: Any, axis: str, out: Path) -> None:
    """eta* per (group, size), its spread and weighted power law per group (laws Sec. 4.1):
    :func:`~depthscale.stats.sweeps.optimal_lrs`, then per group
    :func:`~depthscale.stats.sweeps.optima_power_law`, the analysis the laws claims run
    (:func:`~depthscale.stats.sweeps.lr_power_law`)."""
    from depthscale.report.figures import new_figure
    from depthscale.stats.sweeps import grid_signals, lr_spread, optimal_lrs, seed_summary

    group, criterion = analysis.group, analysis.criterion
    optima = optimal_lrs(done, criterion, axis=axis, group=group, aggregate=analysis.aggregate)
    if not optima:
        raise ConfigError("every run diverged: no optimal LR to fit")
    summaries = seed_summary(optima)
    spreads = lr_spread(summaries)
    signals = {(g.group, g.depth): g for g in grid_signals(done, criterion, axis, group=group)}
    _print_optima(summaries, signals, optima, group, axis, criterion)
    if analysis.aggregate == "loss":
        print("(one eta* per size: the loss was averaged over the seeds before minimising)")
    fig, axes = new_figure()
    ax = axes[0]
    groups = [_fit_group(ax, g, spread, summaries, optima, analysis, axis)
              for g, spread in spreads.items()]
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(axis)
    ax.set_ylabel("eta*")
    ax.legend(fontsize=7)
    single = groups[0] if group is None else {}
    payload = {"axis": axis, "criterion": criterion, "optimize": "lr", "group": group,
               "aggregate": analysis.aggregate, "slope": single.get("slope"),
               "slope_ci": single.get("slope_ci"),
               "slope_bootstrap_ci": single.get("slope_bootstrap_ci"),
               "intercept": single.get("intercept"),
               "r2": single.get("r2"), "spread_log10_lr": single.get("spread_log10_lr"),
               "groups": groups, "per_size": [vars(s) for s in summaries],
               "grid_signals": [vars(g) for g in signals.values()],
               "optima": [vars(o) for o in optima]}
    _write_fit(out, payload, fig)


def _print_optima(summaries: list[Any], signals: dict[tuple[Any, int], Any], optima: list[Any],
                  group: str | None, axis: str, criterion: str) -> None:
    """The table of mean log10 eta* per (group, size) with its CI, edge and grid flags."""
    from rich.console import Console
    from rich.table import Table

    beside = {(o.group, o.depth) for o in optima if o.next_to_diverged}
    table = Table(title=f"eta* per {axis} ({criterion} criterion)")
    for col in (*([group] if group else []), axis, "mean log10 eta*", "95% CI", "seeds",
                "edge?", "next to diverged?", "loss range / seed spread"):
        table.add_column(col)
    for su in summaries:
        ci = f"[{fmt(su.ci_low)}, {fmt(su.ci_high)}]" if math.isfinite(su.sem) else "-"
        sig = signals.get((su.group, su.depth))
        flat = "-" if sig is None else (f"{sig.loss_range:.3g} / {sig.seed_spread:.3g}"
                                        + (" FLAT: eta* is noise" if sig.flat else ""))
        table.add_row(*([str(su.group)] if group else []), str(su.depth),
                      f"{su.mean_log10_lr:+.3f}", ci, str(su.n_seeds),
                      "yes" if su.any_on_edge else "",
                      "yes" if (su.group, su.depth) in beside else "", flat)
    Console().print(table)


def _fit_group(ax: Any, g: Any, spread: float, summaries: list[Any], optima: list[Any],
               analysis: Any, axis: str) -> dict[str, Any]:
    """One group's power law of eta* (printed, drawn on ``ax``) and its fit.json entry."""
    from depthscale.stats.sweeps import optima_power_law

    group = analysis.group
    part = [s for s in summaries if s.group == g]
    name = f"{group} {g}: " if group else ""
    # the laws claims' analysis (stats.sweeps.lr_power_law): WLS law and its seed bootstrap
    law = optima_power_law([o for o in optima if o.group == g]) if len(part) >= 3 else None
    fit = None if law is None else law.fit
    boot = (math.nan, math.nan) if law is None else law.boot_ci
    if fit is None:
        print(f"{name}no power-law fit (needs >= 3 sizes, has {len(part)})")
    else:
        weights = ("equal weights: one optimum per size" if any(math.isnan(s.sem) for s in part)
                   else "weights 1/SEM^2, each size's seed variance moderated toward the others'")
        print(f"{name}log10 eta* = {fit.intercept:+.3f} + ({fit.slope:+.3f}) log10 {axis}; "
              f"slope 95% CI [{fmt(fit.slope_ci[0])}, {fmt(fit.slope_ci[1])}], R^2 "
              f"{fit.r2:.3f} (weighted least squares, {weights})")
        if analysis.aggregate == "optima":
            print(f"{name}slope 95% seed-bootstrap interval [{fmt(boot[0])}, "
                  f"{fmt(boot[1])}]")
    print(f"{name}spread of log10 eta* across {axis}s (max - min): {spread:.3f} decades")
    xs = [s.depth for s in part]
    ys = [10**s.mean_log10_lr for s in part]
    err = [[10**s.mean_log10_lr - 10**s.ci_low for s in part],
           [10**s.ci_high - 10**s.mean_log10_lr for s in part]]
    has_ci = all(map(math.isfinite, err[0]))
    line = ax.errorbar(xs, ys, yerr=err if has_ci else None, fmt="o",
                       label=f"{name}{'mean eta* (95% CI)' if has_ci else 'eta*'}")
    if fit is not None:
        grid = [min(xs) * (max(xs) / min(xs)) ** (i / 49) for i in range(50)]
        ax.plot(grid, [10**fit.intercept * x**fit.slope for x in grid], "--",
                color=line.lines[0].get_color(), label=f"{name}WLS slope {fit.slope:.2f}")
    return {"group": g, "spread_log10_lr": spread, "n_sizes": len(part),
            "slope": None if fit is None else fit.slope,
            "slope_ci": None if fit is None else list(fit.slope_ci),
            "slope_bootstrap_ci": [v if math.isfinite(v) else None for v in boot],
            "intercept": None if fit is None else fit.intercept,
            "r2": None if fit is None else fit.r2}


def _fit_scan(done: list[dict[str, Any]], analysis: Any, axis: str, out: Path) -> None:
    """The criterion against a swept setting per (group, size), best value flagged (nfd Fig. 2)."""
    from rich.console import Console
    from rich.table import Table

    from depthscale.report.figures import new_figure
    from depthscale.stats.sweeps import scan_axis

    key, group, criterion = analysis.optimize, analysis.group, analysis.criterion
    scans = scan_axis(done, key, criterion, axis=axis, group=group)
    table = Table(title=f"{criterion} loss vs {key} per {axis} (mean over seeds that finished)")
    for col in (*([group] if group else []), axis, key, "loss", "diverged", "runs", "best"):
        table.add_column(col)
    for sc in scans:
        for i, value in enumerate(sc.values):
            best = ""
            if i == sc.best_index:
                best = "<- best (interior)" if sc.interior else "<- best (grid edge)"
            table.add_row(*([str(sc.group)] if group else []), str(sc.depth), f"{value:g}"
                          if isinstance(value, float) else str(value), fmt(sc.losses[i], ".4f"),
                          f"{sc.diverged[i]:.2f}", str(sc.n_runs[i]), best)
    Console().print(table)
    fig, axes = new_figure()
    ax = axes[0]
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0
                  for sc in scans for v in sc.values)
    for sc in scans:
        name = f"{group} {sc.group}, " if group else ""
        if sc.best_index is None:
            print(f"{name}{axis} {sc.depth}: every run diverged")
        else:
            where = "interior" if sc.interior else "on the grid's edge"
            best = f"{sc.best:g}" if isinstance(sc.best, float) else sc.best
            print(f"{name}{axis} {sc.depth}: best {key} = {best} ({where}), {criterion} loss "
                  f"{sc.losses[sc.best_index]:.4f}")
        xs = list(sc.values) if numeric else [str(v) for v in sc.values]
        line = ax.plot(xs, sc.losses, "o-", label=f"{name}{axis} {sc.depth}")[0]
        if sc.best_index is not None:
            ax.plot([xs[sc.best_index]], [sc.losses[sc.best_index]], "*", ms=12,
                    color=line.get_color())
    if numeric:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(key)
    ax.set_ylabel(f"{criterion} loss (mean over seeds)")
    ax.legend(fontsize=7)
    payload = {"axis": axis, "criterion": criterion, "optimize": key, "group": group,
               "aggregate": analysis.aggregate,
               "scans": [{"group": sc.group, axis: sc.depth, "values": list(sc.values),
                          "losses": list(sc.losses), "diverged": list(sc.diverged),
                          "n_runs": list(sc.n_runs), "best": sc.best, "interior": sc.interior}
                         for sc in scans]}
    _write_fit(out, payload, fig)


def _cmd_transfer(args: argparse.Namespace) -> int:
    from depthscale.param import transfer_lr

    # every prediction is checked (finite, > 0) before anything is printed
    preds = [(depth, transfer_lr(args.rule, args.lr, args.from_depth, depth, args.from_width,
                                 args.to_width, optimizer=args.optimizer))
             for depth in args.to_depth]
    for depth, t in preds:
        print(f"depth {args.from_depth:g} -> {depth}: lr {args.lr:.6g} -> {t.lr:.6g}")
    print(f"rule {args.rule} ({args.optimizer}): {preds[-1][1].formula}")
    return 0


def register(sub: Any) -> None:
    """Add this module's commands to the ``depthscale`` subparsers."""
    from depthscale.param import TRANSFER_RULES

    sw = sub.add_parser("sweep", help="run a study spec (TOML grid of runs) into a results store")
    sw.add_argument("spec", type=Path, help="study spec (see examples/quick_resnet_depth_lr.toml)")
    sw.add_argument("--out", type=Path, required=True,
                    help="study folder (results.sqlite); rerun to resume")
    sw.add_argument("--backend", default="local", choices=("local", "ray"),
                    help="local: in-process (--workers 1) or a process pool; ray: Ray tasks")
    sw.add_argument("--workers", type=int, default=1,
                    help="parallel runs (local pool size; CPUs of a new local Ray instance)")
    sw.add_argument("--address", default=None,
                    help="Ray cluster to join: HOST:PORT or auto (default: start one locally)")
    sw.add_argument("--retries", type=int, default=3,
                    help="times a run whose worker was lost is resubmitted")
    sw.add_argument("--retry-failed", action="store_true",
                    help="rerun runs recorded as failed (done/diverged runs are never rerun)")
    sw.add_argument("--wait", type=finite_float, default=5.0,
                    help="seconds to wait for another process using --out before giving up")
    sw.add_argument("--batch-lrs", action="store_true",
                    help="train runs that differ only in lr as one batched group per task "
                         "(plain SGD; models without BatchNorm, dropout or decoupled backward; "
                         "other runs go one by one). Off by default: metrics then equal "
                         "one-by-one runs only to float rounding, a group is one task (less "
                         "parallelism with --workers), and the CPU gain depends on width (about "
                         "2x at width 32, 1.2-1.4x at width 128: 'depthscale bench "
                         "batched-sweep')")
    sw.set_defaults(func=_cmd_sweep, output_dirs=("out",))

    st = sub.add_parser("status", help="progress of a study folder; export its runs")
    st.add_argument("dir", type=Path, help="study folder given to 'depthscale sweep --out'")
    st.add_argument("--csv", type=Path, default=None,
                    help="write every run as CSV here")
    st.add_argument("--parquet", type=Path, default=None,
                    help="write every run as Parquet here (needs pyarrow)")
    st.set_defaults(func=_cmd_status,
                    output_files={"csv": "runs-csv", "parquet": "runs-parquet"})

    fi = sub.add_parser("fit", help="optimal LR (or other setting) per size of a sweep, with "
                        "its power-law fit and spread")
    fi.add_argument("dir", type=Path, help="a sweep's output folder")
    fi.add_argument("--criterion", default=None, choices=("running", "final", "last-epoch"),
                    help="the loss minimised: epoch-averaged running loss, final train-set "
                    "loss, or mean loss over the last epoch (default: the study's [analysis])")
    fi.add_argument("--axis", default=None, choices=("depth", "width"),
                    help="the size axis (default: the study's [analysis], else depth)")
    fi.add_argument("--group", default=None,
                    help="grid axis analysed separately per value, e.g. recipe")
    fi.add_argument("--optimize", default=None,
                    help="grid axis to optimise over: lr (default) or e.g. plan.T")
    fi.add_argument("--aggregate", default=None, choices=("optima", "loss"),
                    help="seeds: optimum per seed then mean log10 eta* (optima), or the optimum "
                    "of the seed-mean loss (loss)")
    fi.add_argument("--effective-depth", action="store_true",
                    help="fit against the effective depth L = m + K (laws Sec. 3.4)")
    fi.add_argument("--out", type=Path, default=None,
                    help="where fit.json/png go (default DIR)")
    fi.set_defaults(func=_cmd_fit, output_dirs=("out",))

    tr = sub.add_parser("transfer", help="predict the LR at another depth (and width)")
    tr.add_argument("--rule", required=True, choices=tuple(TRANSFER_RULES))
    tr.add_argument("--lr", type=finite_float, required=True, help="tuned LR at --from-depth")
    tr.add_argument("--from-depth", type=finite_float, required=True,
                    help="source depth (effective depth L = m + K for --rule laws)")
    tr.add_argument("--to-depth", type=int_list, required=True, help="target depth(s), e.g. 6,8")
    tr.add_argument("--from-width", type=finite_float, default=None)
    tr.add_argument("--to-width", type=finite_float, default=None)
    tr.add_argument("--optimizer", default="sgd", choices=("sgd", "adam"),
                    help="the optimizer the LR was tuned with (Adam follows the rule table's "
                         "Adam LR; laws is SGD only)")
    tr.set_defaults(func=_cmd_transfer)

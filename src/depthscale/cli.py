"""The ``depthscale`` command. Thin: parse, validate, call the library, print.

User mistakes (unknown names, impossible sizes, non-finite LRs, missing data) print one line
and exit with code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, NoReturn

from depthscale.errors import ConfigError, DepthscaleError

__all__ = ["main"]

_DEFAULT_DATASET = "mnist1d"


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"depthscale: error: {message} (see '{self.prog} --help')\n")
        raise SystemExit(2)


def _finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite, got {text}")
    return value


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


def _model_flags(p: argparse.ArgumentParser) -> None:
    """The flags explain, train and coord-check share."""
    from depthscale.data import DATASETS
    from depthscale.models import MODELS
    from depthscale.param import RECIPES

    p.add_argument("--model", default="resnet1", help=f"one of: {', '.join(MODELS)}")
    p.add_argument("--param", default="depth-mup", help=f"recipe, one of: {', '.join(RECIPES)}")
    p.add_argument("--width", type=int, default=128, help="width n (channels for CNNs)")
    p.add_argument("--depth", type=int, default=8, help="depth L (residual blocks / layers)")
    p.add_argument("--lr", type=_finite_float, default=0.1,
                   help="base learning rate (eta_c; each parameter trains at lr x c)")
    p.add_argument("--T", type=_finite_float, default=1.0, help="time horizon T (nfd Eq. 1)")
    p.add_argument("--hidden", type=int, default=None, help="hidden width M (chizat2lp)")
    p.add_argument("--dataset", default=_DEFAULT_DATASET, help=f"one of: {', '.join(DATASETS)}")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="folder with the official CIFAR files (cifar-10-batches-py/...)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--seed", type=int, default=0, help="seed of init and data order")


def _build(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    from depthscale.data import load
    from depthscale.models import build

    data = load(args.dataset, data_dir=args.data_dir, seed=args.seed)
    options: dict[str, Any] = {}
    plan_options: dict[str, Any] = {"T": args.T}
    if args.hidden is not None:
        options["hidden"] = args.hidden
    if getattr(args, "backward", "standard") != "standard":
        options["backward"] = args.backward
    model, plan = build(
        args.model, args.param, input_shape=data.sample_shape, n_out=data.n_out,
        width=args.width, depth=args.depth, seed=args.seed, plan_options=plan_options, **options,
    )
    return model, plan, data


def _status(message: str) -> Any:
    """A rich spinner on stderr for work without a step count."""
    from rich.console import Console

    return Console(stderr=True).status(message)


@contextmanager
def _progress(description: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr; yields advance(k)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(),
                  TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                  console=console) as bar:
        task = bar.add_task(description, total=total)
        yield lambda k: bar.advance(task, k)


# ---- commands ---------------------------------------------------------------------------------
def _cmd_explain(args: argparse.Namespace) -> int:
    model, plan, _ = _build(args)
    print(plan.explain(model))
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from depthscale.report import atomic_write, write_csv
    from depthscale.train import TrainConfig, train

    model, plan, data = _build(args)
    if (args.steps is None) == (args.epochs is None):
        if args.steps is None and args.epochs is None:
            args.epochs = 1.0
        else:
            raise ConfigError("give --steps or --epochs, not both")
    cfg = TrainConfig(optimizer=args.optimizer, lr=args.lr, steps=args.steps, epochs=args.epochs,
                      batch_size=args.batch_size, loss=args.loss, momentum=args.momentum,
                      weight_decay=args.weight_decay, seed=args.seed, device=args.device,
                      eval_every=args.eval_every)
    cfg.validate()
    per_epoch = math.ceil(len(data.x_train) / min(cfg.batch_size, len(data.x_train)))
    total = cfg.steps or max(1, round((cfg.epochs or 1) * per_epoch))
    with _progress(f"train {args.model} ({args.param})", total) as advance:
        res = train(model, plan, data, cfg, progress=advance)
    args.out.mkdir(parents=True, exist_ok=True)
    summary = {
        "model": args.model, "param": args.param, "width": args.width, "depth": args.depth,
        "dataset": args.dataset, "T": args.T, "config": asdict(cfg), "status": res.status,
        "steps_done": res.steps_done, "diverged_at": res.diverged_at, "final": res.final,
        "epoch_losses": res.epoch_losses, "evals": res.evals, "seconds": res.seconds,
    }
    with atomic_write(args.out / "metrics.json") as fh:
        json.dump(summary, fh, indent=2)
    write_csv(args.out / "losses.csv", [{"step": i + 1, "train_loss": v}
                                        for i, v in enumerate(res.losses)])
    finals = ", ".join(f"{k} {v:.4g}" for k, v in res.final.items())
    print(f"{res.status}: {res.steps_done} steps in {res.seconds:.1f}s"
          + (f"; {finals}" if finals else f" (diverged at step {res.diverged_at})")
          + f"; metrics in {args.out}")
    return 0


def _cmd_coord_check(args: argparse.Namespace) -> int:
    from depthscale.data import load
    from depthscale.models import build
    from depthscale.probes import coord_check
    from depthscale.report import write_csv
    from depthscale.report.figures import new_figure, save_figure

    data = load(args.dataset, data_dir=args.data_dir, seed=args.seed)
    x, y = data.x_train[: args.batch_size], data.y_train[: args.batch_size]
    device = args.device

    def make(w: int, d: int, seed: int) -> tuple[Any, Any]:
        model, plan = build(args.model, args.param, input_shape=data.sample_shape,
                            n_out=data.n_out, width=w, depth=d, seed=seed,
                            plan_options={"T": args.T})
        return model.to(device), plan

    total = (len(args.widths) + len(args.depths)) * args.seeds
    with _progress(f"coord-check {args.model} ({args.param})", total) as advance:
        report = coord_check(make, x.to(device), y.to(device), widths=args.widths,
                             depths=args.depths, base_width=args.width, base_depth=args.depth,
                             lr=args.lr, steps=args.steps, seeds=range(args.seeds),
                             progress=advance)
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "coord_check.csv", report.rows())
    fig, axes = new_figure(ncols=2, nrows=2)
    for row, axis, sizes in ((0, "width", args.widths), (1, "depth", args.depths)):
        pts = [p for p in report.points if p.axis == axis]
        for col, key in ((0, "act"), (1, "update")):
            ax = axes[2 * row + col]
            ax.loglog(sizes, [getattr(p, f"{key}_mean") for p in pts], "o-")
            slope = report.slopes.get(f"{key}_vs_{axis}", float("nan"))
            ax.set_title(f"{key} RMS vs {axis} (slope {slope:.2f})", fontsize=8)
            ax.set_xlabel(axis)
    save_figure(fig, args.out / "coord_check.png")
    for k, v in report.slopes.items():
        print(f"{k:>16}: slope {v:+.3f}")
    print(f"data and figure in {args.out}")
    return 0


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from depthscale.experiments import CLAIMS, PLANNED, reproduce, select_claims
    from depthscale.report import console_table

    if args.list:
        for cid, c in CLAIMS.items():
            print(f"{cid:16} {c.title}")
        for cid, why in PLANNED.items():
            print(f"{cid:16} (planned: needs {why})")
        return 0
    select_claims(args.claims)  # validate before any work
    console = Console(stderr=True)
    with Progress(TextColumn("{task.description:<14}"), BarColumn(),
                  TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                  console=console) as bar:

        def on_claim(cid: str) -> tuple[Callable[[int], None], Callable[[int], None]]:
            task = bar.add_task(cid, total=None)
            return (lambda k: bar.advance(task, k)), (lambda n: bar.update(task, total=n))

        results, crashed = reproduce(args.claims, scale=args.scale, out_dir=args.out,
                                     device=args.device, data_dir=args.data_dir, seed=args.seed,
                                     workers=args.workers, on_claim=on_claim)
    Console().print(console_table(results))
    print(f"report: {args.out / 'index.html'}")
    if crashed:
        print(f"depthscale: error: claim(s) crashed: {', '.join(crashed)} (see claims.json)",
              file=sys.stderr)
        return 1
    if args.strict and any(r["verdict"] == "FAIL" for r in results):
        return 1
    return 0


def _cmd_fit(args: argparse.Namespace) -> int:
    """Analyse a finished (or partial) sweep as its ``[analysis]`` says (flags override): the
    optimal LR per size with its power-law fit and spread (laws Sec. 4.1, nfd Fig. 5 row 2),
    per group if asked, or the best value of another swept setting per size (nfd Fig. 2)."""
    from depthscale.experiments.store import open_store
    from depthscale.models import create

    with open_store(args.dir, readonly=True) as store:
        records = [dict(r) for r in store.records(planned_only=True)]
    done = [r for r in records if r["status"] in ("done", "diverged")]
    if not done:
        raise ConfigError(f"no finished runs in {args.dir}; run 'depthscale sweep' first")
    analysis = _fit_analysis(args)
    axis = analysis.axis
    if args.effective_depth:
        sizes: dict[int, int] = {}
        for r in done:
            if r["depth"] not in sizes:
                net = create(r["model"], input_shape=(1, 8), n_out=2, width=r["width"],
                             depth=r["depth"])
                sizes[r["depth"]] = int(getattr(net, "effective_depth", r["depth"]))
            r["effective_depth"] = sizes[r["depth"]]
        axis = "effective_depth"
    out = args.out or args.dir
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
    from depthscale.experiments.study import AnalysisSpec, load_study, parse_analysis

    path = args.dir / "study.toml"
    study = load_study(path) if path.exists() else None
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


def _json_safe(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_json_safe(v) for v in x]
    return x


def _write_fit(out: Path, payload: dict[str, Any], fig: Any) -> None:
    from depthscale.report import atomic_write
    from depthscale.report.figures import save_figure

    with atomic_write(out / "fit.json") as fh:
        json.dump(_json_safe(payload), fh, indent=2, allow_nan=False)
    save_figure(fig, out / "fit.png")


def _fmt(x: float, spec: str = "+.3f") -> str:
    return format(x, spec) if math.isfinite(x) else "-"


def _fit_lr(done: list[dict[str, Any]], analysis: Any, axis: str, out: Path) -> None:
    """eta* per (group, size), its spread and weighted power law per group (laws Sec. 4.1)."""
    from rich.console import Console
    from rich.table import Table

    from depthscale.experiments.analysis import lr_spread, optimal_lrs, seed_summary, wls_power_law
    from depthscale.report.figures import new_figure

    group, criterion = analysis.group, analysis.criterion
    optima = optimal_lrs(done, criterion, axis=axis, group=group, aggregate=analysis.aggregate)
    if not optima:
        raise ConfigError("every run diverged: no optimal LR to fit")
    summaries = seed_summary(optima)
    spreads = lr_spread(summaries)
    table = Table(title=f"eta* per {axis} ({criterion} criterion)")
    for col in (*([group] if group else []), axis, "mean log10 eta*", "95% CI", "seeds",
                "edge?"):
        table.add_column(col)
    for su in summaries:
        ci = f"[{_fmt(su.ci_low)}, {_fmt(su.ci_high)}]" if math.isfinite(su.sem) else "-"
        table.add_row(*([str(su.group)] if group else []), str(su.depth),
                      f"{su.mean_log10_lr:+.3f}", ci, str(su.n_seeds),
                      "yes" if su.any_on_edge else "")
    Console().print(table)
    if analysis.aggregate == "loss":
        print("(one eta* per size: the loss was averaged over the seeds before minimising)")
    fig, axes = new_figure()
    ax = axes[0]
    groups = []
    for g, spread in spreads.items():
        part = [s for s in summaries if s.group == g]
        name = f"{group} {g}: " if group else ""
        fit = wls_power_law(part) if len(part) >= 3 else None
        if fit is None:
            print(f"{name}no power-law fit (needs >= 3 sizes, has {len(part)})")
        else:
            weights = ("equal weights: one optimum per size" if any(math.isnan(s.sem)
                       for s in part) else "weights 1/SEM^2")
            print(f"{name}log10 eta* = {fit.intercept:+.3f} + ({fit.slope:+.3f}) log10 {axis}; "
                  f"slope 95% CI [{_fmt(fit.slope_ci[0])}, {_fmt(fit.slope_ci[1])}], R^2 "
                  f"{fit.r2:.3f} (weighted least squares, {weights})")
        print(f"{name}spread of log10 eta* across {axis}s (max - min): {spread:.3f} decades")
        entry = {"group": g, "spread_log10_lr": spread, "n_sizes": len(part),
                 "slope": None if fit is None else fit.slope,
                 "slope_ci": None if fit is None else list(fit.slope_ci),
                 "intercept": None if fit is None else fit.intercept,
                 "r2": None if fit is None else fit.r2}
        groups.append(entry)
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
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(axis)
    ax.set_ylabel("eta*")
    ax.legend(fontsize=7)
    single = groups[0] if group is None else {}
    payload = {"axis": axis, "criterion": criterion, "optimize": "lr", "group": group,
               "aggregate": analysis.aggregate, "slope": single.get("slope"),
               "slope_ci": single.get("slope_ci"), "intercept": single.get("intercept"),
               "r2": single.get("r2"), "spread_log10_lr": single.get("spread_log10_lr"),
               "groups": groups, "per_size": [vars(s) for s in summaries],
               "optima": [vars(o) for o in optima]}
    _write_fit(out, payload, fig)


def _fit_scan(done: list[dict[str, Any]], analysis: Any, axis: str, out: Path) -> None:
    """The criterion against a swept setting per (group, size), best value flagged (nfd Fig. 2)."""
    from rich.console import Console
    from rich.table import Table

    from depthscale.experiments.analysis import scan_axis
    from depthscale.report.figures import new_figure

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
                          if isinstance(value, float) else str(value), _fmt(sc.losses[i], ".4f"),
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

    for depth in args.to_depth:
        t = transfer_lr(args.rule, args.lr, args.from_depth, depth, args.from_width,
                        args.to_width)
        print(f"depth {args.from_depth:g} -> {depth}: lr {args.lr:.6g} -> {t.lr:.6g}")
    print(f"rule {args.rule}: {t.formula}")
    return 0


def _limit_inputs(args: argparse.Namespace) -> Any:
    import numpy as np

    if args.dataset is None:
        return np.random.default_rng(args.seed).standard_normal((args.inputs, args.dim))
    from depthscale.data import load

    data = load(args.dataset, data_dir=args.data_dir, seed=args.seed)
    return data.x_train[: args.inputs].flatten(1).double().numpy()


def _cmd_limit(args: argparse.Namespace) -> int:
    import numpy as np

    from depthscale import limits
    from depthscale.report import write_csv
    from depthscale.report.figures import new_figure, save_figure

    args.out.mkdir(parents=True, exist_ok=True)
    if args.particles is None:
        args.particles = 10_000 if args.solver == "sde" else 4096
    if args.solver == "nfd":
        return _limit_nfd(args)
    if args.solver == "mean-ode":
        return _limit_mean_ode(args)
    X = _limit_inputs(args)
    if args.solver == "kernel":
        with _status(f"NNGP kernel ODE for {len(X)} inputs"):
            K = limits.nngp_kernel(X, args.phi, args.T)
        np.save(args.out / "kernel.npy", K)
        print(f"C_T ({len(X)} x {len(X)}, phi={args.phi}, T={args.T:g}) in "
              f"{args.out / 'kernel.npy'}; min eigenvalue {limits.min_eigenvalue(K):.6g}")
        if args.depth:
            E = limits.nngp_kernel_euler(X, args.phi, args.T, args.depth)
            rel = float(np.linalg.norm(E - K) / np.linalg.norm(K))
            print(f"finite-depth recursion at L={args.depth}: relative error {rel:.3e}")
        return 0
    steps = args.depth_steps or 200
    with _status(f"forward SDE: {args.particles} particles x {steps} steps"):
        res = limits.forward_sde(X, args.phi, args.T, steps, args.particles, args.seed)
    ode = limits.kernel_path(X, args.phi, res.times)
    rows = [{"t": float(t), "input": i, "sde_variance": float(c[i, i]),
             "ode_variance": float(o[i, i])}
            for t, c, o in zip(res.times, res.cov_path, ode, strict=True) for i in range(len(X))]
    write_csv(args.out / "sde_variance.csv", rows)
    fig, axes = new_figure()
    for i in range(min(len(X), 4)):
        axes[0].plot(res.times, res.cov_path[:, i, i], label=f"particles, input {i}")
        axes[0].plot(res.times, ode[:, i, i], "k--", lw=0.8)
    axes[0].set_xlabel("t")
    axes[0].set_ylabel("E[h_t^2] (dashed: kernel ODE)")
    axes[0].legend(fontsize=7)
    save_figure(fig, args.out / "sde_variance.png")
    print(f"forward SDE, {args.particles} particles x {steps} steps: terminal variance "
          f"{np.diag(res.cov_path[-1]).round(5).tolist()} vs ODE "
          f"{np.diag(ode[-1]).round(5).tolist()}; data and figure in {args.out}")
    return 0


def _limit_nfd(args: argparse.Namespace) -> int:
    """Online SGD in the joint limit (nfd Def. 1) on a teacher stream; outputs and losses."""
    from depthscale import limits
    from depthscale.experiments.nfd_limits import teacher_stream
    from depthscale.report import write_csv
    from depthscale.report.figures import new_figure, save_figure

    xs, ys = teacher_stream(args.steps, dim=args.dim, seed=args.seed)
    depth_steps = args.depth_steps or 64
    sim = limits.NFD(phi=args.phi, T=args.T, eta_c=args.eta_c, depth_steps=depth_steps,
                     particles=args.particles, coupling=args.coupling, seed=args.seed)
    with _status(f"NFD: {args.steps} online steps, {args.particles} particles, "
                 f"{depth_steps} depth steps"):
        res = sim.train(xs, ys)
    rows = [{"step": k, "y": float(y), "f": float(f), "f_se": float(se), "loss": float(lo)}
            for k, (y, f, se, lo) in enumerate(zip(ys, res.outputs, res.output_se, res.losses,
                                                    strict=True))]
    write_csv(args.out / "nfd.csv", rows)
    fig, axes = new_figure()
    axes[0].semilogy(range(len(rows)), [r["loss"] + 1e-300 for r in rows], "o-")
    axes[0].set_xlabel("online step k")
    axes[0].set_ylabel("L(f^(k), y^(k))")
    axes[0].set_title(f"NFD limit, coupling={args.coupling}", fontsize=9)
    save_figure(fig, args.out / "nfd.png")
    print(f"NFD ({args.coupling}): mean loss of the last quarter "
          f"{float(res.losses[-max(1, len(rows) // 4):].mean()):.4g}; data in {args.out}")
    return 0


def _limit_mean_ode(args: argparse.Namespace) -> int:
    """GD on Chizat's Neural Mean ODE (Eq. 10-14), 2LP blocks, on his synthetic data."""
    from depthscale import limits
    from depthscale.data import load
    from depthscale.report import write_csv
    from depthscale.report.figures import new_figure, save_figure

    data = load("chizat", dim=args.dim, n_train=args.inputs, seed=args.seed)
    X, Y = data.x_train.double().numpy(), data.y_train.double().numpy()
    depth_steps = args.depth_steps or 16
    solver = limits.MeanODE(args.dim, rho=args.phi, depth_steps=depth_steps,
                            particles=args.particles, seed=args.seed)
    with _status(f"Neural Mean ODE: {args.steps} GD steps, {depth_steps} depth steps, "
                 f"{args.particles} particles"):
        res = solver.train(X, Y, args.steps)
    write_csv(args.out / "mean_ode.csv",
              [{"step": k, "loss": float(v)} for k, v in enumerate(res.losses)])
    fig, axes = new_figure()
    axes[0].semilogy(range(len(res.losses)), res.losses, "o-", ms=2)
    axes[0].set_xlabel("GD step k")
    axes[0].set_ylabel("mean |h(1, x) - y|^2 / (2D)")
    axes[0].set_title("Neural Mean ODE (chizat Eq. 10-14)", fontsize=9)
    save_figure(fig, args.out / "mean_ode.png")
    print(f"Neural Mean ODE: loss {res.losses[0]:.4g} -> {res.losses[-1]:.4g} after {args.steps} "
          f"steps; data in {args.out}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from depthscale.benchmarks import BENCHMARKS, run_benchmarks

    names = args.names or list(BENCHMARKS)
    with _status(f"running benchmarks: {', '.join(names)}"):
        results = run_benchmarks(names, quick=args.quick, json_path=args.json)
    for r in results:
        print(f"{r.name:>14}: ours {r.ours_seconds:.4g}s, baseline ({r.baseline}) "
              f"{r.baseline_seconds:.4g}s, ratio baseline/ours {r.ratio:.3f}")
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from depthscale.experiments.study import load_study
    from depthscale.experiments.sweep import run_study

    name = load_study(args.spec).name  # a bad spec fails here, before the progress bar
    result = run_study(
        args.spec, args.out, backend=args.backend, workers=args.workers, address=args.address,
        progress=lambda total: _progress(f"sweep {name}", total), retries=args.retries,
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
    from depthscale.experiments.store import open_store

    with open_store(args.dir, readonly=True) as store:
        for line in store.summary().lines(str(args.dir)):
            print(line)
        if args.csv is not None:
            print(f"CSV: {store.export_csv(args.csv)}")
        if args.parquet is not None:
            print(f"Parquet: {store.export_parquet(args.parquet)}")
    return 0


# ---- parser -----------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    from depthscale.models import BACKWARD_MODES
    from depthscale.train import LOSSES

    p = _Parser(prog="depthscale", description="Scale residual networks in depth and width.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    e = sub.add_parser("explain", help="print the per-parameter plan (role, a, b, c, source)")
    _model_flags(e)
    e.set_defaults(func=_cmd_explain)

    t = sub.add_parser("train", help="train one model; metrics to a folder")
    _model_flags(t)
    t.add_argument("--optimizer", default="sgd", choices=("sgd", "adam"))
    t.add_argument("--loss", default="ce", choices=LOSSES)
    t.add_argument("--steps", type=int, default=None)
    t.add_argument("--epochs", type=_finite_float, default=None, help="(default 1 epoch)")
    t.add_argument("--batch-size", type=int, default=128, help="1 = online SGD")
    t.add_argument("--momentum", type=_finite_float, default=0.0)
    t.add_argument("--weight-decay", type=_finite_float, default=0.0)
    t.add_argument("--eval-every", type=int, default=0, help="steps between test evaluations")
    t.add_argument("--backward", default="standard", choices=BACKWARD_MODES,
                   help="decoupled backward pass for the GIA experiments (nfd Cor. 1)")
    t.add_argument("--out", type=Path, default=Path("runs/train"))
    t.set_defaults(func=_cmd_train)

    c = sub.add_parser("coord-check", help="activation/update sizes over width and depth")
    _model_flags(c)
    c.add_argument("--widths", type=_int_list, default=[64, 128, 256, 512])
    c.add_argument("--depths", type=_int_list, default=[2, 4, 8, 16, 32])
    c.add_argument("--steps", type=int, default=1, help="optimizer steps before measuring")
    c.add_argument("--seeds", type=int, default=3, help="models averaged per size")
    c.add_argument("--batch-size", type=int, default=128)
    c.add_argument("--out", type=Path, default=Path("runs/coord-check"))
    c.set_defaults(func=_cmd_coord_check)

    r = sub.add_parser("reproduce", help="run paper claims; verdicts, figures, data, HTML")
    r.add_argument("claims", nargs="*", help="claim ids (default: all registered)")
    r.add_argument("--scale", default="quick", choices=("quick", "full"))
    r.add_argument("--out", type=Path, default=Path("reproduce-out"))
    r.add_argument("--device", default="cpu")
    r.add_argument("--data-dir", type=Path, default=None)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--workers", type=int, default=1,
                   help="processes for the claims' LR sweeps (results do not depend on it)")
    r.add_argument("--strict", action="store_true", help="exit 1 if any claim FAILs")
    r.add_argument("--list", action="store_true", help="list the claims and exit")
    r.set_defaults(func=_cmd_reproduce)

    from depthscale.param import TRANSFER_RULES

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
    fi.add_argument("--out", type=Path, default=None, help="where fit.json/png go (default DIR)")
    fi.set_defaults(func=_cmd_fit)

    tr = sub.add_parser("transfer", help="predict the LR at another depth (and width)")
    tr.add_argument("--rule", required=True, choices=tuple(TRANSFER_RULES))
    tr.add_argument("--lr", type=_finite_float, required=True, help="tuned LR at --from-depth")
    tr.add_argument("--from-depth", type=_finite_float, required=True,
                    help="source depth (effective depth L = m + K for --rule laws)")
    tr.add_argument("--to-depth", type=_int_list, required=True, help="target depth(s), e.g. 6,8")
    tr.add_argument("--from-width", type=_finite_float, default=None)
    tr.add_argument("--to-width", type=_finite_float, default=None)
    tr.set_defaults(func=_cmd_transfer)

    lim = sub.add_parser("limit", help="infinite-width/depth solvers (nfd Prop. 2-3)")
    lim.add_argument("solver", choices=("kernel", "sde", "nfd", "mean-ode"),
                     help="kernel: NNGP kernel ODE C_T; sde: forward McKean-Vlasov particles; "
                     "nfd: online SGD in the joint limit (Def. 1) on a teacher stream; "
                     "mean-ode: GD on Chizat's Neural Mean ODE (2LP blocks, --phi tanh)")
    lim.add_argument("--phi", default="relu", help="activation (relu, erf, tanh, gelu, identity)")
    lim.add_argument("--T", type=_finite_float, default=1.0, help="time horizon T")
    lim.add_argument("--dataset", default=None, help="take inputs from this dataset "
                     "(default: Gaussian inputs)")
    lim.add_argument("--data-dir", type=Path, default=None)
    lim.add_argument("--inputs", type=int, default=8, help="number of inputs N")
    lim.add_argument("--dim", type=int, default=16, help="input dimension of Gaussian inputs")
    lim.add_argument("--depth", type=int, default=0,
                     help="kernel: also compare with the finite-depth recursion at this L")
    lim.add_argument("--depth-steps", type=int, default=None,
                     help="depth grid (default 200 for sde, 64 for nfd)")
    lim.add_argument("--steps", type=int, default=50, help="nfd, mean-ode: training steps K")
    lim.add_argument("--eta-c", type=_finite_float, default=0.1, help="nfd: eta_c")
    lim.add_argument("--coupling", default="none", choices=("none", "eq15", "full"),
                     help="nfd: none = Def. 1 (decoupled), eq15 = paper's tau^2 terms, "
                     "full = standard backprop's response terms")
    lim.add_argument("--particles", type=int, default=None,
                     help="particles (default 10000 for sde; 4096 for nfd and mean-ode)")
    lim.add_argument("--seed", type=int, default=0)
    lim.add_argument("--out", type=Path, default=Path("runs/limit"))
    lim.set_defaults(func=_cmd_limit)

    b = sub.add_parser("bench", help="performance ratios against baselines")
    b.add_argument("names", nargs="*", help="benchmark names (default: all)")
    b.add_argument("--json", type=Path, default=None, help="write results as JSON here")
    b.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    b.set_defaults(func=_cmd_bench)

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
    sw.add_argument("--wait", type=_finite_float, default=5.0,
                    help="seconds to wait for another process using --out before giving up")
    sw.add_argument("--batch-lrs", action="store_true",
                    help="train runs that differ only in lr as one batched group per task "
                         "(plain SGD; models without BatchNorm, dropout or decoupled backward; "
                         "other runs go one by one). Off by default: metrics then equal "
                         "one-by-one runs only to float rounding, a group is one task (less "
                         "parallelism with --workers), and the CPU gain depends on width (about "
                         "2x at width 32, 1.2-1.4x at width 128: 'depthscale bench "
                         "batched-sweep')")
    sw.set_defaults(func=_cmd_sweep)

    st = sub.add_parser("status", help="progress of a study folder; export its runs")
    st.add_argument("dir", type=Path, help="study folder given to 'depthscale sweep --out'")
    st.add_argument("--csv", type=Path, default=None, help="write every run as CSV here")
    st.add_argument("--parquet", type=Path, default=None,
                    help="write every run as Parquet here (needs pyarrow)")
    st.set_defaults(func=_cmd_status)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``depthscale`` command; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        return int(args.func(args))
    except DepthscaleError as exc:
        print(f"depthscale: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("depthscale: interrupted; finished results are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

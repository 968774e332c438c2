"""``depthscale explain``, ``train`` and ``coord-check``: one model of ours, its plan and
its training."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from depthscale.cli.common import (
    Interrupts,
    build_from_args,
    decay,
    deferred_interrupts,
    finite_float,
    int_list,
    json_safe,
    model_flags,
    momentum,
    note_batch,
    option_flags,
    positive_int,
    progress,
    rate,
)
from depthscale.errors import ConfigError


def _cmd_explain(args: argparse.Namespace) -> int:
    model, plan, _ = build_from_args(args)
    print(plan.explain(model))
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    """Train one model. A Ctrl-C stops after the current step and keeps every finished step
    (metrics.json, losses.csv), however many more Ctrl-Cs follow while they are written; a
    third Ctrl-C during a step stops at once and keeps nothing."""
    with deferred_interrupts() as interrupts:
        try:
            prepared = _prepare_train(args)
            if interrupts.requested:
                raise KeyboardInterrupt
            res = _run_train(args, *prepared, interrupts)
        except _Interrupted as exc:
            interrupts.saving()
            _write_train(args, exc.cfg, exc.result)
            print(f"depthscale: interrupted after {exc.result.steps_done} of {exc.total} steps; "
                  f"kept {args.out / 'metrics.json'} (status interrupted) and losses.csv of "
                  "those steps", file=sys.stderr)
            return 130
        except KeyboardInterrupt:  # before the first step, or a third Ctrl-C
            print("depthscale: interrupted before the first training step; nothing was kept",
                  file=sys.stderr)
            return 130
        interrupts.saving()
        cfg = prepared[3]
        _write_train(args, cfg, res)
    finals = ", ".join(f"{k} {v:.4g}" for k, v in res.final.items())
    print(f"{res.status}: {res.steps_done} steps in {res.seconds:.1f}s"
          + (f"; {finals}" if finals
             else f" (diverged at step {res.diverged_at}: {res.diverged_reason})")
          + f"; metrics in {args.out}")
    return 0


class _Interrupted(Exception):
    """Training stopped by Ctrl-C after at least one step: what finished, to be written."""

    def __init__(self, result: Any, cfg: Any, total: int) -> None:
        super().__init__("interrupted")
        self.result, self.cfg, self.total = result, cfg, total


def _prepare_train(args: argparse.Namespace) -> tuple[Any, Any, Any, Any, int]:
    """(model, plan, data, config, total steps), every check done before any step: the
    training settings, then the run's size and time (:func:`build_from_args`), then the
    data against the model."""
    from depthscale.train import TrainConfig, check_data
    from depthscale.train.budget import steps_of

    if (args.steps is None) == (args.epochs is None):
        if args.steps is None and args.epochs is None:
            args.epochs = 1.0
        else:
            raise ConfigError("give --steps or --epochs, not both")
    cfg = TrainConfig(optimizer=args.optimizer, lr=args.lr, steps=args.steps,
                      epochs=args.epochs, batch_size=args.batch_size, loss=args.loss,
                      momentum=args.momentum, weight_decay=args.weight_decay,
                      seed=args.seed, device=args.device, eval_every=args.eval_every,
                      divergence_factor=args.divergence_factor)
    cfg.validate()
    model, plan, data = build_from_args(args, cfg)
    check_data(model, data, cfg.loss)  # train() checks again; here before the progress bar
    note_batch(cfg.batch_size, data)
    total = steps_of(steps=cfg.steps, epochs=cfg.epochs, n_train=len(data.x_train),
                     batch_size=cfg.batch_size)
    return model, plan, data, cfg, total


def _run_train(args: argparse.Namespace, model: Any, plan: Any, data: Any, cfg: Any,
               total: int, interrupts: Interrupts) -> Any:
    """The training run under a progress bar; a Ctrl-C after a finished step is
    :class:`_Interrupted` carrying what finished."""
    from depthscale.train import TrainInterrupted, train

    try:
        with progress(f"train {args.model} ({args.param})", total,
                      interrupts=interrupts) as advance:
            return train(model, plan, data, cfg, progress=advance)
    except TrainInterrupted as exc:
        if exc.result.steps_done == 0:
            raise KeyboardInterrupt from None
        raise _Interrupted(exc.result, cfg, total) from None


def _write_train(args: argparse.Namespace, cfg: Any, res: Any) -> None:
    """metrics.json (settings, status, summary) and losses.csv (one row per step) in --out."""
    from depthscale.io.atomic import atomic_write, write_csv

    args.out.mkdir(parents=True, exist_ok=True)
    summary = {
        "model": args.model, "param": args.param, "width": args.width, "depth": args.depth,
        "dataset": args.dataset, "T": args.T, "config": asdict(cfg), "status": res.status,
        "steps_done": res.steps_done, "diverged_at": res.diverged_at,
        "diverged_reason": res.diverged_reason, "final": res.final,
        "epoch_losses": res.epoch_losses, "evals": res.evals, "seconds": res.seconds,
    }
    with atomic_write(args.out / "metrics.json") as fh:
        json.dump(summary, fh, indent=2)
    write_csv(args.out / "losses.csv", [{"step": i + 1, "train_loss": v}
                                        for i, v in enumerate(res.losses)])


def _float_list(text: str) -> list[float]:
    values = [rate(v) for v in text.split(",") if v.strip()]
    if not values:
        raise argparse.ArgumentTypeError("expected at least one number")
    return values


def _model_factory(args: argparse.Namespace, data: Any, example: Any, *, runs: int,
                   batch_size: int) -> Callable[..., Any]:
    """make(width, depth, seed) -> (model, plan) for ``--model``: a registry model or the
    user's factory, built with its plan by :func:`depthscale.models.build` (a factory's model
    is inspected on ``example``, a batch of the data: roles, residual branches and their
    count; it is built once here, at the smallest sizes, so its boundary checks come before
    any work). First the bounds of every run (:func:`depthscale.train.budget.run_cost`): the
    largest size, and ``runs`` trainings of ``--steps`` steps of ``batch_size`` examples at
    it (``--force`` lifts them)."""
    from depthscale.models import build, is_factory
    from depthscale.param import RECIPES
    from depthscale.train.budget import LIMITS, run_cost

    if args.param not in RECIPES:
        raise ConfigError(f"unknown recipe {args.param!r}; choose one of: {', '.join(RECIPES)}")
    options: dict[str, Any] = {} if args.hidden is None else {"hidden": args.hidden}
    user = is_factory(args.model)
    run_cost(args.model, input_shape=data.sample_shape, n_out=data.n_out,
             width=max([args.width, *getattr(args, "widths", [])]),
             depth=max([args.depth, *getattr(args, "depths", [])]), options=options,
             batch_size=batch_size, steps=args.steps, runs=runs, device=args.device,
             limits=None if args.force else LIMITS, what=f"{args.command} {args.model}",
             lower="--width(s) or --depth(s)")

    def make(w: int, d: int, seed: int) -> tuple[Any, Any]:
        model, p = build(args.model, args.param, input_shape=data.sample_shape,
                         n_out=data.n_out, width=w, depth=d, seed=seed,
                         plan_options={"T": args.T}, example_input=example if user else None,
                         **options)
        return model.to(args.device), p
    make.__qualname__ = args.model  # what a refusal names
    if user:  # the factory's boundary checks (forward, one training step) before any work
        make(min([args.width, *getattr(args, "widths", [])]),
             min([args.depth, *getattr(args, "depths", [])]), args.seed)
    return make


def _check_model_name(name: str) -> None:
    """A bad ``--model`` (unknown name, factory that does not import or has the wrong
    signature) fails before any data is read."""
    from depthscale.models import MODELS, is_factory, resolve_factory

    if is_factory(name):
        resolve_factory(name)
    elif name not in MODELS:
        raise ConfigError(f"unknown model {name!r}; choose one of: {', '.join(MODELS)}, or a "
                          "factory 'package.module:function'")


def _write_summary(args: argparse.Namespace, name: str, summary: dict[str, Any]) -> None:
    """``--out/name``: the command's settings (its flags) and a check's summary, as JSON."""
    from depthscale.io.atomic import atomic_write

    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
                if k not in ("func", "output_dirs", "command")}
    with atomic_write(args.out / name) as fh:
        json.dump(json_safe({"settings": settings, **summary}), fh, indent=2)


def _cmd_coord_check(args: argparse.Namespace) -> int:
    from depthscale.data import load
    from depthscale.io.atomic import write_csv
    from depthscale.probes import LAYER_TYPES, coord_check
    from depthscale.report.figures import label_log_ticks, new_figure, save_figure

    _check_model_name(args.model)
    data = load(args.dataset, data_dir=args.data_dir, seed=args.seed)
    note_batch(args.batch_size, data)
    x, y = data.x_train[: args.batch_size], data.y_train[: args.batch_size]
    total = (len(args.widths) + len(args.depths)) * args.seeds
    make = _model_factory(args, data, x, runs=total, batch_size=len(x))
    device = args.device
    with progress(f"coord-check {args.model} ({args.param}, {args.optimizer})", total) as advance:
        report = coord_check(make, x.to(device), y.to(device), widths=args.widths,
                             depths=args.depths, base_width=args.width, base_depth=args.depth,
                             lr=args.lr, optimizer=args.optimizer, loss=args.loss,
                             steps=args.steps, seeds=range(args.seeds), progress=advance)
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "coord_check.csv", report.rows())
    _write_summary(args, "coord_check.json", report.summary())
    types = [t for t in LAYER_TYPES if any(f.layer_type == t for f in report.fits)]
    axes_used = [a for a in ("width", "depth") if any(f.axis == a for f in report.fits)]
    fig, axes = new_figure(ncols=len(axes_used), nrows=len(types), width=3.6, height=2.8)
    for row, t in enumerate(types):
        for col, axis in enumerate(axes_used):
            ax = axes[row * len(axes_used) + col]
            for q, style in (("act", "o-"), ("update", "s--")):
                try:
                    f = report.fit(t, q, axis)
                except KeyError:
                    continue
                ax.loglog(f.sizes, f.means, style, label=f"{q} (slope {f.slope:+.2f})")
                label_log_ticks(ax, f.sizes)
            ax.set_title(f"{t} vs {axis}", fontsize=8)
            ax.set_xlabel(axis)
            ax.legend(fontsize=6)
    save_figure(fig, args.out / "coord_check.png")
    print(report.table())
    print(f"data and figure in {args.out}")
    return 0


def _cmd_transfer_check(args: argparse.Namespace) -> int:
    from depthscale.data import load
    from depthscale.io.atomic import write_csv
    from depthscale.probes import lr_transfer_check
    from depthscale.probes.lr_transfer import check_lr_grid
    from depthscale.report.figures import new_figure, save_figure

    _check_model_name(args.model)
    check_lr_grid(args.lrs)
    data = load(args.dataset, data_dir=args.data_dir, seed=args.seed)
    note_batch(args.batch_size, data)
    sizes = len(set(args.depths)) + len(set(args.widths))
    total = sizes * len(args.lrs) * args.seeds
    make = _model_factory(args, data, data.x_train[: args.batch_size], runs=total,
                          batch_size=min(args.batch_size, len(data.x_train)))
    with progress(f"transfer-check {args.model} ({args.param}, {args.optimizer})",
                  total) as advance:
        report = lr_transfer_check(
            make, data, args.lrs, depths=args.depths, widths=args.widths or (),
            base_width=args.width, base_depth=args.depth, optimizer=args.optimizer,
            steps=args.steps, batch_size=args.batch_size, loss=args.loss,
            seeds=range(args.seeds), criterion=args.criterion, tolerance=args.tolerance,
            device=args.device, progress=advance)
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "transfer_check.csv", report.rows())
    _write_summary(args, "transfer_check.json", report.summary())
    fig, axes = new_figure()
    key = "running_loss" if args.criterion == "running" else "final_train_loss"
    for s in report.sizes:
        runs = [r for r in report.records if (r["width"], r["depth"]) == (s.width, s.depth)]
        lrs = sorted({r["lr"] for r in runs})
        means = []
        for lr in lrs:
            vals = [r[key] for r in runs if r["lr"] == lr]
            means.append(sum(vals) / len(vals) if all(v is not None for v in vals)
                         else math.nan)
        line = axes[0].semilogx(lrs, means, "o-", label=s.label)[0]
        axes[0].axvline(s.optimum.lr, color=line.get_color(), ls=":")
    axes[0].set_xlabel("base learning rate")
    axes[0].set_ylabel(f"{args.criterion} loss (seed mean)")
    axes[0].set_title(f"drift {report.drift:.2f} decades: {report.verdict}", fontsize=8)
    axes[0].legend(fontsize=6)
    save_figure(fig, args.out / "transfer_check.png")
    print(report.table())
    print(f"data and figure in {args.out}")
    return 0


def _sizes_or_none(text: str) -> list[int]:
    """Comma-separated sizes, or ``none`` for no sweep along that axis."""
    return [] if text.strip().lower() == "none" else int_list(text)


def register(sub: Any) -> None:
    """Add this module's commands to the ``depthscale`` subparsers."""
    from depthscale.models import BACKWARD_MODES, MODELS
    from depthscale.train import LOSSES

    e = sub.add_parser("explain", help="print the per-parameter plan (role, a, b, c, source)")
    model_flags(e)
    option_flags(e)
    e.set_defaults(func=_cmd_explain)

    t = sub.add_parser("train", help="train one model; metrics to a folder")
    model_flags(t)
    option_flags(t)
    t.add_argument("--optimizer", default="sgd", choices=("sgd", "adam"))
    t.add_argument("--loss", default="ce", choices=LOSSES)
    t.add_argument("--steps", type=positive_int, default=None)
    t.add_argument("--epochs", type=finite_float, default=None, help="(default 1 epoch)")
    t.add_argument("--batch-size", type=positive_int, default=128, help="1 = online SGD")
    t.add_argument("--momentum", type=momentum, default=0.0, help="SGD only, in [0, 1)")
    t.add_argument("--weight-decay", type=decay, default=0.0,
                   help=">= 0, with --lr x --weight-decay < 1")
    t.add_argument("--eval-every", type=int, default=0, help="steps between test evaluations")
    t.add_argument("--divergence-factor", type=finite_float, default=10.0,
                   help="diverged when the running loss exceeds this x the initial loss "
                        "(default 10)")
    t.add_argument("--backward", default="standard", choices=BACKWARD_MODES,
                   help="decoupled backward pass for the GIA experiments (nfd Cor. 1)")
    t.add_argument("--out", type=Path, default=Path("runs/train"))
    t.set_defaults(func=_cmd_train, output_dirs=("out",))

    model_help = (f"a model of ours ({', '.join(MODELS)}) or your own factory, an importable "
                  "'module:function' taking (input_shape, n_out, width, depth, **options) and "
                  "returning an nn.Module (the plan is read from its structure and applied)")
    c = sub.add_parser("coord-check", help="activation/update sizes over width and depth, "
                                           "with a verdict")
    model_flags(c)
    c.add_argument("--optimizer", default="sgd", choices=("sgd", "adam"))
    c.add_argument("--loss", default="ce", choices=LOSSES)
    c.add_argument("--widths", type=int_list, default=[64, 128, 256, 512])
    c.add_argument("--depths", type=_sizes_or_none, default=[2, 4, 8, 16, 32],
                   help="depths compared at --width, or none (a net without residual branches)")
    c.add_argument("--steps", type=positive_int, default=1, help="optimizer steps before measuring")
    c.add_argument("--seeds", type=positive_int, default=3, help="models per size (the CI's seeds)")
    c.add_argument("--batch-size", type=positive_int, default=128)
    c.add_argument("--out", type=Path, default=Path("runs/coord-check"))
    c.set_defaults(func=_cmd_coord_check, output_dirs=("out",))

    tc = sub.add_parser("transfer-check", help="LR sweep at two or three depths (and widths): "
                                               "the optimum's drift in decades, with a verdict")
    model_flags(tc)
    tc.add_argument("--optimizer", default="sgd", choices=("sgd", "adam"))
    tc.add_argument("--loss", default="ce", choices=LOSSES)
    tc.add_argument("--lrs", type=_float_list, default=[0.01, 0.03, 0.1, 0.3, 1.0],
                    help="base learning rates (log-spaced, at least three)")
    tc.add_argument("--depths", type=_sizes_or_none, default=[2, 8],
                    help="depths compared at --width, or none (widths only)")
    tc.add_argument("--widths", type=int_list, default=[],
                    help="widths compared at --depth (default none)")
    tc.add_argument("--steps", type=positive_int, default=100, help="training steps per run")
    tc.add_argument("--seeds", type=positive_int, default=3, help="seeds per (size, LR)")
    tc.add_argument("--batch-size", type=positive_int, default=64)
    tc.add_argument("--criterion", default="running", choices=("running", "final"),
                    help="running: mean training loss over the steps; final: at the end")
    tc.add_argument("--tolerance", type=finite_float, default=0.3,
                    help="drift (decades of LR) a PASS must stay under (default 0.3)")
    tc.add_argument("--out", type=Path, default=Path("runs/transfer-check"))
    tc.set_defaults(func=_cmd_transfer_check, output_dirs=("out",))
    for p in (c, tc):
        for action in p._actions:
            if action.dest == "model":
                action.help = model_help

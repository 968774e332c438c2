"""``depthscale explain``, ``train`` and ``coord-check``: one model of ours, its plan and
its training."""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from depthscale.cli.common import (
    build_from_args,
    finite_float,
    int_list,
    model_flags,
    option_flags,
    progress,
)
from depthscale.errors import ConfigError


def _cmd_explain(args: argparse.Namespace) -> int:
    model, plan, _ = build_from_args(args)
    print(plan.explain(model))
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    """Train one model; an interrupt keeps the finished steps (metrics.json, losses.csv)."""
    from depthscale.train import TrainConfig, TrainInterrupted, check_data, train

    nothing_kept = "depthscale: interrupted before the first training step; nothing was kept"
    try:
        model, plan, data = build_from_args(args)
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
        check_data(model, data, cfg.loss)  # train() checks again; here before the progress bar
        per_epoch = math.ceil(len(data.x_train) / min(cfg.batch_size, len(data.x_train)))
        total = cfg.steps or max(1, round((cfg.epochs or 1) * per_epoch))
        with progress(f"train {args.model} ({args.param})", total) as advance:
            res = train(model, plan, data, cfg, progress=advance)
    except TrainInterrupted as exc:
        res = exc.result
        if res.steps_done == 0:
            print(nothing_kept, file=sys.stderr)
            return 130
        _write_train(args, cfg, res)
        print(f"depthscale: interrupted after {res.steps_done} of {total} steps; kept "
              f"{args.out / 'metrics.json'} (status interrupted) and losses.csv of those steps",
              file=sys.stderr)
        return 130
    except KeyboardInterrupt:  # while loading data or building the model
        print(nothing_kept, file=sys.stderr)
        return 130
    _write_train(args, cfg, res)
    finals = ", ".join(f"{k} {v:.4g}" for k, v in res.final.items())
    print(f"{res.status}: {res.steps_done} steps in {res.seconds:.1f}s"
          + (f"; {finals}" if finals
             else f" (diverged at step {res.diverged_at}: {res.diverged_reason})")
          + f"; metrics in {args.out}")
    return 0


def _write_train(args: argparse.Namespace, cfg: Any, res: Any) -> None:
    """metrics.json (settings, status, summary) and losses.csv (one row per step) in --out."""
    from depthscale.report import atomic_write, write_csv

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
    with progress(f"coord-check {args.model} ({args.param})", total) as advance:
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


def register(sub: Any) -> None:
    """Add this module's commands to the ``depthscale`` subparsers."""
    from depthscale.models import BACKWARD_MODES
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
    t.add_argument("--steps", type=int, default=None)
    t.add_argument("--epochs", type=finite_float, default=None, help="(default 1 epoch)")
    t.add_argument("--batch-size", type=int, default=128, help="1 = online SGD")
    t.add_argument("--momentum", type=finite_float, default=0.0)
    t.add_argument("--weight-decay", type=finite_float, default=0.0)
    t.add_argument("--eval-every", type=int, default=0, help="steps between test evaluations")
    t.add_argument("--divergence-factor", type=finite_float, default=10.0,
                   help="diverged when the running loss exceeds this x the initial loss "
                        "(default 10)")
    t.add_argument("--backward", default="standard", choices=BACKWARD_MODES,
                   help="decoupled backward pass for the GIA experiments (nfd Cor. 1)")
    t.add_argument("--out", type=Path, default=Path("runs/train"))
    t.set_defaults(func=_cmd_train, output_dirs=("out",))

    c = sub.add_parser("coord-check", help="activation/update sizes over width and depth")
    model_flags(c)
    c.add_argument("--widths", type=int_list, default=[64, 128, 256, 512])
    c.add_argument("--depths", type=int_list, default=[2, 4, 8, 16, 32])
    c.add_argument("--steps", type=int, default=1, help="optimizer steps before measuring")
    c.add_argument("--seeds", type=int, default=3, help="models averaged per size")
    c.add_argument("--batch-size", type=int, default=128)
    c.add_argument("--out", type=Path, default=Path("runs/coord-check"))
    c.set_defaults(func=_cmd_coord_check, output_dirs=("out",))

"""``depthscale reproduce``: the papers' claims, verdicts and the HTML report."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from depthscale.cli.common import positive_int, seed_value

#: seconds per unit of a ``--budget``
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def duration(text: str) -> float:
    """A time budget: a positive number with a unit, s, m or h (``90s``, ``45m``, ``1.5h``),
    in seconds."""
    number, unit = text.strip()[:-1], text.strip()[-1:].lower()
    try:
        value = float(number) * _UNITS[unit]
    except (KeyError, ValueError):
        raise argparse.ArgumentTypeError(f"a budget is a number with a unit s, m or h (90s, "
                                         f"45m, 1.5h), got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"a budget must be a positive, finite time, got "
                                         f"{text!r}")
    return value


def setting_change(text: str) -> Any:
    """One ``--set PATH=VALUE`` (:func:`~depthscale.claims.changes.parse_change`)."""
    from depthscale.claims.changes import parse_change
    from depthscale.errors import ConfigError

    try:
        return parse_change(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _cmd_reproduce(args: argparse.Namespace) -> int:
    import torch
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from depthscale.claims import CLAIMS, PLANNED, reproduce, select_claims
    from depthscale.claims.reproduce import check_reproduce
    from depthscale.report import console_table

    if args.list:
        for cid, c in CLAIMS.items():
            control = f"\n{'':16} negative control: {c.control.what}" if c.control else ""
            print(f"{cid:16} {c.title}{control}")
        for cid, why in PLANNED.items():
            print(f"{cid:16} (planned: needs {why})")
        return 0
    # every check before the progress bar: the claims, the --set values and their bounds
    check_reproduce(args.claims, scale=args.scale, device=args.device, seeds=args.seeds,
                    control=args.control, workers=args.workers, budget_seconds=args.budget,
                    changes=args.set, from_stored=args.from_stored, force=args.force,
                    ray_address=args.ray)
    console = Console(stderr=True)
    if args.device.startswith("cuda") and not args.batch_lrs and torch.cuda.is_available():
        console.print("hint: on a GPU one small sweep run leaves the device idle; --batch-lrs "
                      "trains each LR group as one run (the laws sweeps: minutes, not hours)")
    skipped: list[tuple[str, dict[str, Any] | None]] = []
    with Progress(TextColumn("{task.description:<14}"), BarColumn(),
                  TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                  console=console) as bar:

        def on_claim(cid: str) -> tuple[Callable[[int], None], Callable[[int], None]]:
            task = bar.add_task(cid, total=None)
            return (lambda k: bar.advance(task, k)), (lambda n: bar.update(task, total=n))

        def on_kept(cid: str) -> None:
            console.print(f"{cid}: kept from {args.out / 'claims.json'} (same scale, seed, "
                          "budget, LR batching and version; --rerun to run it again)")

        def on_skip(record: dict[str, Any], kept: dict[str, Any] | None) -> None:
            skipped.append((record["id"], kept))
            if kept is not None:
                console.print(f"{record['id']}: SKIP ({record['reason']}); not written: "
                              f"{args.out / 'claims.json'} keeps its earlier {kept['verdict']} "
                              f"({kept['scale']}, seed {kept.get('seed')})", highlight=False)
            elif args.from_stored:
                console.print(f"{record['id']}: SKIP ({record['reason']})", highlight=False)

        results, crashed = reproduce(args.claims, scale=args.scale, out_dir=args.out,
                                     device=args.device, data_dir=args.data_dir, seed=args.seed,
                                     seeds=args.seeds, control=args.control,
                                     workers=args.workers, on_claim=on_claim, rerun=args.rerun,
                                     on_kept=on_kept, budget_seconds=args.budget,
                                     batch_lrs=args.batch_lrs, changes=args.set,
                                     from_stored=args.from_stored, on_skip=on_skip,
                                     force=args.force, ray_address=args.ray)
    Console().print(console_table(results, details=args.details))
    print(f"report: {args.out / 'index.html'}")
    if crashed:
        print(f"depthscale: error: claim(s) crashed: {', '.join(crashed)} (see claims.json, "
              "or the line above where an earlier verdict was kept)", file=sys.stderr)
        return 1
    # a SKIP kept out of claims.json, or any SKIP of --from-stored: not judged now
    unjudged = [cid + ("" if kept is None else f" (earlier {kept['verdict']} kept)")
                for cid, kept in skipped if kept is not None or args.from_stored]
    if unjudged:
        print(f"depthscale: error: not judged now (SKIP, the reasons above): "
              f"{', '.join(unjudged)}", file=sys.stderr)
        return 1
    if args.strict:
        ran = {f"{cid}/control" if args.control else cid for cid in select_claims(args.claims)}
        expected = "FAIL" if args.control else "PASS"
        off = [f"{r['id']} {r['verdict']}" for r in results
               if r["id"] in ran and r["verdict"] != expected]
        if off:
            print(f"depthscale: --strict: not {expected}: {', '.join(off)}", file=sys.stderr)
            return 1
    return 0


def register(sub: Any) -> None:
    """Add this module's commands to the ``depthscale`` subparsers."""
    r = sub.add_parser("reproduce", help="run paper claims; verdicts, figures, data, HTML")
    r.add_argument("claims", nargs="*", help="claim ids (default: all registered)")
    r.add_argument("--scale", default="quick", choices=("quick", "medium", "full"),
                   help="quick: CPU minutes; medium: about 30 CPU minutes a claim where quick "
                   "cannot decide; full: the paper's setting (CIFAR, a GPU)")
    r.add_argument("--out", type=Path, default=Path("reproduce-out"))
    r.add_argument("--device", default="cpu")
    r.add_argument("--data-dir", type=Path, default=None)
    r.add_argument("--seed", type=seed_value, default=0, help="base seed (first one with --seeds)")
    r.add_argument("--seeds", type=positive_int, default=1,
                   help="rerun each claim at N base seeds; UNSTABLE where verdicts differ")
    r.add_argument("--control", action="store_true",
                   help="run each claim's negative control (a deliberately wrong setting "
                   "under which a check that can fail gives FAIL) instead of the claim")
    r.add_argument("--workers", type=positive_int, default=1,
                   help="processes for the claims' LR sweeps (results do not depend on it); "
                   "with --ray local: the CPUs of that instance")
    r.add_argument("--ray", default=None, metavar="ADDRESS",
                   help="run every claim's study sweeps as Ray tasks on this cluster: HOST:PORT "
                   "(of 'ray start --head'; ray://HOST:PORT for Ray Client), auto (the cluster "
                   "'ray start' started on this machine) or local (a new instance here). This "
                   "process still writes every result, so a run resumes with or without --ray, "
                   "and the results equal a local run's (docs/performance.md)")
    r.add_argument("--budget", type=duration, default=None,
                   help="each claim's time budget (90s, 45m, 1.5h): the sequential designs "
                   "(the laws sweeps, nfd-fig2's seed rounds) start no further round of seeds "
                   "that would exceed it (measured s/run x runs in the round); other claims "
                   "ignore it")
    r.add_argument("--batch-lrs", action="store_true",
                   help="train each group of sweep runs that differ only in LR as one batched "
                   "run (equal to one-by-one runs to float rounding): on a GPU a group costs "
                   "about one run; on a CPU the gain is small (README, Performance)")
    r.add_argument("--set", action="append", type=setting_change, default=[],
                   metavar="PATH=VALUE",
                   help="change one of the scale's settings (repeatable): a dotted path and a "
                   "JSON value, e.g. --set seeds=8 --set 'archs.cnn1d.seed_rounds=[4,8,16]'; "
                   "null removes an entry of a nested table (--set archs.vit=null). Every path "
                   "must exist in each chosen claim's settings, each value have its setting's "
                   "type and range (from its values at every scale), and the changed claim "
                   "stay within the bounds of every run (--force); the record says what "
                   "changed")
    r.add_argument("--force", action="store_true",
                   help="run a claim changed by --set over the bounds of every run (100,000 "
                   "blocks, 8 GiB of parameter state, a day at the least unless its scale "
                   "takes longer) anyway")
    r.add_argument("--from-stored", action="store_true",
                   help="judge the chosen claims again from the runs stored in --out alone, "
                   "training nothing (a missing run makes the claim a SKIP that names it, exit "
                   "1, a verdict already in claims.json kept): e.g. a GPU machine's runs, "
                   "copied here, with its --device, --set, --budget and --workers")
    r.add_argument("--rerun", action="store_true",
                   help="run every chosen claim again, even those claims.json in --out already "
                   "holds from the same scale, seed, budget, LR batching and version (by default a "
                   "rerun into the "
                   "same folder resumes: only what is missing runs)")
    r.add_argument("--strict", action="store_true",
                   help="exit 1 if a chosen claim is not PASS (with --control: not FAIL); a "
                   "SKIP (missing data, a crash) counts as not PASS")
    r.add_argument("--details", action="store_true",
                   help="the console table lists every measured value against its band, not "
                   "only each claim's headline (index.html always has both)")
    r.add_argument("--list", action="store_true", help="list the claims and exit")
    r.set_defaults(func=_cmd_reproduce, output_dirs=("out",))

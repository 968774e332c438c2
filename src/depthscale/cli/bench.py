"""``depthscale bench``: performance ratios against baselines run in the same process."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from depthscale.cli.common import status


def _cmd_bench(args: argparse.Namespace) -> int:
    from depthscale.benchmarks import BENCHMARKS, run_benchmarks

    names = args.names or list(BENCHMARKS)
    with status(f"running benchmarks: {', '.join(names)}"):
        results = run_benchmarks(names, quick=args.quick, json_path=args.json,
                                 device=args.device)
    for r in results:
        print(f"{r.name:>14}: ours {r.ours_seconds:.4g}s, baseline ({r.baseline}) "
              f"{r.baseline_seconds:.4g}s, ratio baseline/ours {r.ratio:.3f}")
    return 0


def register(sub: Any) -> None:
    """Add this module's commands to the ``depthscale`` subparsers."""
    b = sub.add_parser("bench", help="performance ratios against baselines")
    b.add_argument("names", nargs="*", help="benchmark names (default: all)")
    b.add_argument("--json", type=Path, default=None, help="write results as JSON here")
    b.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    b.add_argument("--device", default="cpu",
                   help="cpu (default) or cuda: the batched sweep against its loop on that device")
    b.set_defaults(func=_cmd_bench, output_files={"json": "bench-json"})

"""The ``depthscale`` command. Thin: parse, validate, call the library, print.

One module per command group (:mod:`~depthscale.cli.model`, :mod:`~depthscale.cli.studies`,
:mod:`~depthscale.cli.claims`, :mod:`~depthscale.cli.limits`, :mod:`~depthscale.cli.bench`).
User mistakes (unknown names, impossible sizes, non-finite LRs, missing data) print one line
and exit with code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from depthscale.cli import bench, claims, limits, model, studies
from depthscale.cli.common import Parser, check_outputs
from depthscale.cli.flags import check_unread
from depthscale.errors import DepthscaleError

__all__ = ["main"]


def parser() -> argparse.ArgumentParser:
    """The ``depthscale`` argument parser with every command."""
    p = Parser(prog="depthscale", description="Scale residual networks in depth and width.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for group in (model, claims, studies, limits, bench):
        group.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``depthscale`` command; returns the exit code. The current folder is
    importable, as under ``python -m``, so ``--model mymodule:make`` finds the user's file."""
    p = parser()
    words = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(words)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        check_unread(p, words, args)
        check_outputs(args)
        # once, before any work (reproduce --from-stored names the stored runs' device)
        if isinstance(getattr(args, "device", None), str) and not getattr(args, "from_stored",
                                                                          False):
            from depthscale.train.loop import resolve_device

            resolve_device(args.device)
        return int(args.func(args))
    except DepthscaleError as exc:
        print(f"depthscale: error: {exc}", file=sys.stderr)
        return 2
    except (MemoryError, RuntimeError) as exc:  # an allocation past the bounds, under --force
        if not _out_of_memory(exc):
            raise
        print(f"depthscale: error: out of memory ({' '.join(str(exc).split())[:200]}); lower "
              "the sizes (the bounds that --force overrode were there for this)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("depthscale: interrupted; finished results are kept", file=sys.stderr)
        return 130


def _out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocation that failed (Python's, torch's CPU or CUDA one)."""
    text = str(exc)
    return isinstance(exc, MemoryError) or "can't allocate memory" in text or (
        "out of memory" in text)


def run() -> NoReturn:
    """The ``depthscale`` program: :func:`main`, then exit with its code. Once the command has
    finished (its results written), a late Ctrl-C is ignored, so it cannot turn the exit code
    into a kill during the interpreter's shutdown."""
    import signal

    code = main()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise SystemExit(code)

"""Flags a command would accept and then not read: refused before any work.

A flag the user typed that the chosen command or mode never reads (``limit kernel
--particles``, ``train --optimizer adam --momentum 0.9``, ``transfer-check --lr``) would be
silently ignored, and the run would not be the one asked for. :data:`UNREAD` says, per
command, which flags go unread in which mode and why; :func:`check_unread` compares it with
the flags typed on the command line.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from depthscale.errors import ConfigError

__all__ = ["LIMIT_READS", "UNREAD", "check_unread", "typed_flags"]

#: flags a mode does not read: command -> (args -> {dest: why it is not read})
Unread = Callable[[argparse.Namespace], dict[str, str]]

#: the flags each `limit` solver reads (of those some solver does not)
LIMIT_READS: dict[str, set[str]] = {
    "kernel": {"phi", "T", "dataset", "data_dir", "inputs", "dim", "depth", "seed"},
    "sde": {"phi", "T", "dataset", "data_dir", "inputs", "dim", "depth_steps", "increments",
            "dtype", "particles", "seed"},
    "nfd": {"phi", "T", "dim", "steps", "eta_c", "depth_steps", "particles", "coupling",
            "seed"},
    "mean-ode": {"phi", "dim", "inputs", "depth_steps", "particles", "steps", "seed"},
}


def _limit(args: argparse.Namespace) -> dict[str, str]:
    """Each solver's own flags; ``--dim`` only for Gaussian inputs (kernel, sde)."""
    reads = set(LIMIT_READS[args.solver])
    if args.solver in ("kernel", "sde") and args.dataset is not None:
        reads.discard("dim")
    unread = {}
    for dest in set().union(*LIMIT_READS.values()) - reads:
        users = [s for s, r in LIMIT_READS.items() if dest in r]
        unread[dest] = ("--dataset gives the inputs" if dest == "dim" else
                        f"only 'limit {' / '.join(users)}' uses it")
    return unread


def _sgd_only(args: argparse.Namespace) -> dict[str, str]:
    """Momentum is plain SGD's: Adam keeps its own moments."""
    if getattr(args, "optimizer", "sgd") == "adam":
        return {"momentum": "with --optimizer adam: momentum is an SGD setting, Adam keeps its "
                            "own moments"}
    return {}


def _explain(_args: argparse.Namespace) -> dict[str, str]:
    return {"lr": "explain prints the plan's multipliers, not a training run",
            "device": "explain builds the model on the CPU and trains nothing"}


def _transfer_check(_args: argparse.Namespace) -> dict[str, str]:
    return {"lr": "transfer-check sweeps the LRs of --lrs"}


def _reproduce(args: argparse.Namespace) -> dict[str, str]:
    """Under ``--ray`` with a cluster's address, the cluster's CPUs run the sweeps."""
    if getattr(args, "ray", None) not in (None, "local"):
        return {"workers": "with --ray ADDRESS the cluster's CPUs run the sweeps; --workers "
                           "sizes only --ray local"}
    return {}


#: per command, the flags that go unread in the mode its other flags choose
UNREAD: dict[str, Unread] = {
    "limit": _limit,
    "train": _sgd_only,
    "explain": _explain,
    "transfer-check": _transfer_check,
    "reproduce": _reproduce,
}


def typed_flags(parser: argparse.ArgumentParser, argv: Sequence[str]) -> dict[str, str]:
    """The option flags typed in ``argv`` for the subcommand ``argv`` names: dest -> its flag
    (``--flag=value`` and unambiguous prefixes, which argparse accepts, included)."""
    sub = _subparser(parser, argv)
    options = sub._option_string_actions
    typed: dict[str, str] = {}
    for token in argv:
        if token == "--":
            break
        if not token.startswith("--"):
            continue
        name = token.split("=", 1)[0]
        action = options.get(name)
        if action is None:
            matches = {a for flag, a in options.items() if flag.startswith(name)}
            action = matches.pop() if len(matches) == 1 else None
        if action is not None:
            typed.setdefault(action.dest, action.option_strings[-1])
    return typed


def check_unread(parser: argparse.ArgumentParser, argv: Sequence[str],
                 args: argparse.Namespace) -> None:
    """ConfigError naming every typed flag that the command's mode does not read, with why."""
    unread = UNREAD.get(getattr(args, "command", ""))
    if unread is None:
        return
    typed = typed_flags(parser, argv)
    found = [(typed[dest], why) for dest, why in unread(args).items() if dest in typed]
    if found:
        command = args.command + (f" {args.solver}" if args.command == "limit" else "")
        listed = "; ".join(f"{command} does not read {flag} ({why})"
                           for flag, why in sorted(found))
        raise ConfigError(f"{listed}; drop {'it' if len(found) == 1 else 'them'}")


def _subparser(parser: argparse.ArgumentParser,
               argv: Sequence[str]) -> argparse.ArgumentParser:
    """The subcommand's parser: the command is the first word of ``argv``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            sub: argparse.ArgumentParser = action.choices[argv[0]]
            return sub
    raise ValueError("the parser has no subcommands")

"""What the commands share: the one-line-error parser, argument types, model flags,
progress displays and JSON helpers."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from depthscale.errors import ConfigError

__all__ = [
    "DEFAULT_DATASET",
    "Interrupts",
    "Parser",
    "build_from_args",
    "check_outputs",
    "decay",
    "deferred_interrupts",
    "finite_float",
    "fmt",
    "int_list",
    "json_safe",
    "key_value",
    "model_flags",
    "momentum",
    "note_batch",
    "option_flags",
    "positive_int",
    "progress",
    "rate",
    "seed_value",
    "status",
]

DEFAULT_DATASET = "mnist1d"


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"depthscale: error: {message} (see '{self.prog} --help')\n")
        raise SystemExit(2)


def finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be finite, got {text}")
    return value


def rate(text: str) -> float:
    """A learning rate: a finite number > 0 and at most float32's largest
    (:data:`depthscale.param.optim.MAX_RATE`: torch holds each rate as a float32)."""
    from depthscale.param.optim import MAX_RATE, RATE_RULE

    value = finite_float(text)
    if not 0 < value <= MAX_RATE:
        raise argparse.ArgumentTypeError(f"a learning rate must be > 0 and {RATE_RULE}, got "
                                         f"{text}")
    return value


def decay(text: str) -> float:
    """A weight decay: a finite number >= 0, at most float32's largest (as :func:`rate`); its
    product with the learning rate is checked with the other training settings."""
    from depthscale.param.optim import MAX_RATE, RATE_RULE

    value = finite_float(text)
    if not 0 <= value <= MAX_RATE:
        raise argparse.ArgumentTypeError(f"a weight decay must be >= 0 and {RATE_RULE}, got "
                                         f"{text}")
    return value


def momentum(text: str) -> float:
    """SGD's momentum: a number in [0, 1)."""
    value = finite_float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"momentum must be in [0, 1) (at 1 or more the "
                                         f"velocity never decays), got {text}")
    return value


#: seeds a user may type: torch, numpy and Python all take 0 .. 2^63 - 1
MAX_SEED = 2**63 - 1


def seed_value(text: str) -> int:
    """A seed: a whole number from 0 to 2^63 - 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a seed is a whole number, got {text!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"a seed is a whole number from 0 to 2^63 - 1, got "
                                         f"{text}")
    return value


def positive_int(text: str) -> int:
    """A count or size: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


def key_value(text: str) -> tuple[str, Any]:
    """``KEY=VALUE``: VALUE becomes a bool (``true``/``false``), an int, a float, or text
    (quotes stripped), as TOML would read it in a study spec."""
    key, sep, raw = text.partition("=")
    key, raw = key.strip(), raw.strip()
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    if raw in ("true", "false"):
        return key, raw == "true"
    for kind in (int, float):
        try:
            return key, kind(raw)
        except ValueError:
            pass
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        raw = raw[1:-1]
    return key, raw


def check_outputs(args: argparse.Namespace) -> None:
    """The one check of everything a command will write, before it does any work: each dest
    named in the command's ``output_dirs`` must be a folder that can be created and written,
    each in ``output_files`` (dest -> output kind, :data:`~depthscale.io.outputs.OUTPUT_KINDS`)
    a file that can, over nothing but that kind's earlier output (:mod:`depthscale.io.outputs`),
    and no two of them the same file; else ConfigError."""
    from depthscale.io.outputs import check_output_dir, check_output_file

    for dest in getattr(args, "output_dirs", ()):
        if getattr(args, dest) is not None:
            check_output_dir(getattr(args, dest), _flag(dest))
    seen: dict[Path, str] = {}
    for dest, kind in getattr(args, "output_files", {}).items():
        if getattr(args, dest) is not None:
            path = check_output_file(getattr(args, dest), _flag(dest), kind).resolve()
            if path in seen:
                raise ConfigError(f"{seen[path]} and {_flag(dest)} name the same file {path}; "
                                  "give each its own")
            seen[path] = _flag(dest)


def note_batch(batch_size: int, data: Any) -> None:
    """One line on stderr when ``--batch-size`` is over the training examples: every step then
    uses all of them (full-batch), which is not what the number says."""
    n = len(data.x_train)
    if batch_size > n:
        print(f"depthscale: note: --batch-size {batch_size:,} is over the {n:,} training "
              f"examples of the data; each batch holds all {n:,}", file=sys.stderr)


def _flag(dest: str) -> str:
    return f"--{dest.replace('_', '-')}"


def model_flags(p: argparse.ArgumentParser) -> None:
    """The flags explain, train and coord-check share."""
    from depthscale.data import DATASETS
    from depthscale.models import MODELS
    from depthscale.param import RECIPES

    p.add_argument("--model", default="resnet1",
                   help=f"one of: {', '.join(MODELS)}, or a factory package.module:function")
    p.add_argument("--param", default="depth-mup", help=f"recipe, one of: {', '.join(RECIPES)}")
    p.add_argument("--width", type=positive_int, default=128,
                   help="width n (channels for CNNs)")
    p.add_argument("--depth", type=positive_int, default=8,
                   help="depth L (residual blocks / layers)")
    p.add_argument("--lr", type=rate, default=0.1,
                   help="base learning rate (eta_c; each parameter trains at lr x c)")
    p.add_argument("--T", type=finite_float, default=1.0, help="time horizon T (nfd Eq. 1)")
    p.add_argument("--hidden", type=int, default=None, help="hidden width M (chizat2lp)")
    p.add_argument("--dataset", default=DEFAULT_DATASET, help=f"one of: {', '.join(DATASETS)}")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="folder with the official CIFAR files (cifar-10-batches-py/...)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--seed", type=seed_value, default=0, help="seed of init and data order")
    p.add_argument("--force", action="store_true",
                   help="run over the bounds (100,000 blocks, 8 GiB of parameter state, a "
                   "day at the least) anyway")


def option_flags(p: argparse.ArgumentParser) -> None:
    """Model and dataset options, and roles for a user model (explain, train)."""
    p.add_argument("--model-option", type=key_value, action="append", default=[],
                   metavar="KEY=VALUE", help="a model option, e.g. heads=2 or tied=true "
                   "(repeatable)")
    p.add_argument("--data-option", type=key_value, action="append", default=[],
                   metavar="KEY=VALUE", help="a dataset option, e.g. context=32 (repeatable)")
    p.add_argument("--role", type=key_value, action="append", default=[],
                   metavar="PATTERN=ROLE", help="role of the parameters a glob matches, for a "
                   "model that does not declare them (repeatable)")


def build_from_args(args: argparse.Namespace, training: Any = None) -> tuple[Any, Any, Any]:
    """(model, plan, data) from the model flags (and :func:`option_flags` where given).
    ``--model`` may be a factory ``package.module:function``; its model is inspected on a few
    training inputs, as a study's user model is. Before the model is built, its size and (with
    ``training``, a TrainConfig) its training time go through the bounds of every run
    (:func:`depthscale.train.budget.run_cost`; ``--force`` lifts them)."""
    from depthscale.data import load
    from depthscale.models import MODELS, build, is_factory
    from depthscale.param import RECIPES
    from depthscale.train.budget import LIMITS, run_cost

    # the names first: a wrong one is said before the data are made (MNIST-1D: seconds)
    if args.param not in RECIPES:
        raise ConfigError(f"unknown recipe {args.param!r}; choose one of: {', '.join(RECIPES)}")
    if not is_factory(args.model) and args.model not in MODELS:
        raise ConfigError(f"unknown model {args.model!r}; choose one of: {', '.join(MODELS)}, "
                          "or a factory 'package.module:function'")
    data_options = dict(getattr(args, "data_option", []))
    for own in ("seed", "data_dir"):
        if own in data_options:
            raise ConfigError(f"--data-option {own}=...: the data's {own} is --"
                              f"{own.replace('_', '-')}, not a data option")
    data = load(args.dataset, data_dir=args.data_dir, seed=args.seed, **data_options)
    options: dict[str, Any] = dict(getattr(args, "model_option", []))
    plan_options: dict[str, Any] = {"T": args.T}
    if args.hidden is not None:
        options["hidden"] = args.hidden
    if getattr(args, "backward", "standard") != "standard":
        options["backward"] = args.backward
    roles = {k: str(v) for k, v in getattr(args, "role", [])} or None
    example = data.x_train[:8] if is_factory(args.model) else None
    run_cost(args.model, input_shape=data.sample_shape, n_out=data.n_out, width=args.width,
             depth=args.depth, options=options, device=args.device,
             limits=None if args.force else LIMITS, what=f"{args.command} {args.model}",
             lower_time="--steps or --epochs",
             **({} if training is None else {
                 "batch_size": training.batch_size, "steps": training.steps,
                 "epochs": training.epochs, "n_train": len(data.x_train)}))
    model, plan = build(
        args.model, args.param, input_shape=data.sample_shape, n_out=data.n_out,
        width=args.width, depth=args.depth, seed=args.seed, plan_options=plan_options,
        roles=roles, example_input=example, **options,
    )
    return model, plan, data


def status(message: str) -> Any:
    """A rich spinner on stderr for work without a step count."""
    from rich.console import Console

    return Console(stderr=True).status(message)


class Interrupts:
    """Ctrl-C as a request to stop, not an exception (see :func:`deferred_interrupts`): each
    SIGINT is counted, the work polls :attr:`requested` at safe points (a finished step) and
    stops there, so what it writes next is written whole. While working, a third Ctrl-C raises
    KeyboardInterrupt at once (the way out of a step that hangs); after :meth:`saving`, every
    Ctrl-C is ignored until the files are written."""

    def __init__(self) -> None:
        self.count = 0
        self._saving = False
        self._told = False

    @property
    def requested(self) -> bool:
        """Whether a Ctrl-C came."""
        return self.count > 0

    def saving(self) -> None:
        """From now on, Ctrl-C waits for the files being written."""
        self._saving = True

    def on_sigint(self, _signum: int, _frame: Any) -> None:
        self.count += 1
        if self._saving:
            if not self._told:
                self._told = True
                sys.stderr.write("\ndepthscale: writing the finished steps; one moment\n")
            return
        if self.count == 1:
            sys.stderr.write("\ndepthscale: stopping after this step and keeping what finished "
                             "(Ctrl-C twice more stops at once and keeps nothing)\n")
        elif self.count >= 3:
            raise KeyboardInterrupt


@contextmanager
def deferred_interrupts() -> Iterator[Interrupts]:
    """Inside, Ctrl-C is an :class:`Interrupts` request; the previous SIGINT handler is back
    afterwards. Outside the main thread (where Python delivers signals) nothing changes."""
    import signal
    import threading

    interrupts = Interrupts()
    if threading.current_thread() is not threading.main_thread():
        yield interrupts
        return
    previous = signal.signal(signal.SIGINT, interrupts.on_sigint)
    try:
        yield interrupts
    finally:  # None: the previous handler was not Python's; restore the default one
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)


@contextmanager
def progress(description: str, total: int | None, *,
             interrupts: Interrupts | None = None) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr; yields advance(k). With ``interrupts``
    (:func:`deferred_interrupts`), ``advance`` raises KeyboardInterrupt once a Ctrl-C was
    requested: at a finished step, never inside the bar's own locked updates."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(),
                  TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                  console=console) as bar:
        task = bar.add_task(description, total=total)

        def advance(k: int) -> None:
            if interrupts is not None and interrupts.requested:
                raise KeyboardInterrupt
            bar.advance(task, k)

        yield advance


def json_safe(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [json_safe(v) for v in x]
    return x


def fmt(x: float, spec: str = "+.3f") -> str:
    return format(x, spec) if math.isfinite(x) else "-"

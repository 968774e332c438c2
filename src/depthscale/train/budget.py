"""The size and time bounds of a run, checked before any work: :func:`run_cost` is the one place
every entry point (the model commands, study specs, ``reproduce --set``) asks what a run
costs, and is refused with the estimate and its override when it is over a bound.

The bounds: at most :data:`MAX_DEPTH` blocks (each is Python objects), at most
:data:`MAX_PARAMETER_BYTES` of parameter state (weights, gradients and two Adam moments in
float32: 16 bytes a parameter), and a time under :data:`MAX_SECONDS`. The time is a lower bound
on purpose (a refusal must never be a guess): every optimizer step costs at least
:data:`STEP_OVERHEAD` seconds of Python and kernel launches, plus 6 floating point operations
per parameter and example (2 forward, 4 backward, dense layers; convolutions reuse each weight
over positions and cost more) at :data:`FLOPS` of the device, well above what this code reaches
on it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from depthscale.errors import ConfigError

__all__ = ["BYTES_PER_PARAMETER", "DEPTH_STEP_SECONDS", "FLOPS", "LIMITS", "MAX_DEPTH",
           "MAX_PARAMETER_BYTES", "MAX_SECONDS", "SOLVERS", "STEP_OVERHEAD", "Limits",
           "Override", "RunCost", "human_seconds", "run_cost", "solver_cost",
           "steps_of", "training_seconds"]

#: the longest run a command starts without ``--force``
MAX_SECONDS = 24 * 3600.0
#: the most residual blocks a command builds without ``--force`` (each is Python objects)
MAX_DEPTH = 100_000
#: the most parameter memory a command allocates without ``--force``
MAX_PARAMETER_BYTES = 8 * 2**30
#: weights, gradients and two Adam moments in float32
BYTES_PER_PARAMETER = 16
#: seconds an optimizer step takes at the very least (a tiny model's step takes longer)
STEP_OVERHEAD = 1e-4
#: floating-point operations per second assumed per device (optimistic)
FLOPS: dict[str, float] = {"cpu": 1e11, "cuda": 1e15}

#: how a refusal says what lifts it: a text ("pass --force"), or a function of the bound
#: ("depth", "memory" or "time") and the value that would be needed
Override = str | Callable[[str, float], str]


@dataclass(frozen=True)
class Limits:
    """The bounds :func:`run_cost` checks; ``seconds`` None: the caller adds the runs' times
    up and checks the sum itself."""

    depth: float = MAX_DEPTH
    bytes: float = MAX_PARAMETER_BYTES
    seconds: float | None = MAX_SECONDS


#: the bounds of every command
LIMITS = Limits()


@dataclass(frozen=True)
class RunCost:
    """What :func:`run_cost` found: the parameters of one run's model (``at_least``: a lower
    bound, the model was too large to count), their state in bytes, and a lower bound on the
    seconds of all its runs with its formula."""

    parameters: int
    at_least: bool
    steps: int
    seconds: float
    formula: str

    @property
    def bytes(self) -> int:
        """The parameter state: :data:`BYTES_PER_PARAMETER` a parameter."""
        return BYTES_PER_PARAMETER * self.parameters


def steps_of(*, steps: int | None, epochs: float | None, n_train: int | None,
             batch_size: int) -> int:
    """The optimizer steps of a run as the training loop counts them: ``steps``, or
    ``epochs`` x ceil(n_train / batch) rounded (at least 1); 0 for a run that does not train
    (neither given)."""
    if steps is not None:
        return int(steps)
    if epochs is None:
        return 0
    if n_train is None:
        raise ConfigError("a run given in epochs needs the number of training examples")
    per_epoch = math.ceil(n_train / max(1, min(batch_size, n_train)))
    return max(1, round(float(epochs) * per_epoch))


def run_cost(model: str, *, input_shape: tuple[int, ...], n_out: int, width: int, depth: int,
             options: Mapping[str, Any] | None = None, batch_size: int = 1,
             steps: int | None = None, epochs: float | None = None, n_train: int | None = None,
             runs: int = 1, device: str = "cpu", limits: Limits | None = LIMITS,
             what: str | None = None, lower: str = "--width or --depth",
             lower_time: str = "--steps", override: Override = "pass --force") -> RunCost:
    """The parameters, parameter bytes and lower-bound seconds of ``runs`` runs of ``model``
    at these sizes, each training ``steps`` steps (or ``epochs`` over ``n_train`` examples) of
    ``batch_size`` examples on ``device``; nothing is allocated.

    Unless ``limits`` is None (forced), a ConfigError before any work when the model has more
    than ``limits.depth`` blocks or ``limits.bytes`` of parameter state, or the runs would take
    over ``limits.seconds``; the message gives the estimate, what to ``lower`` and the
    ``override``. A model of the registry is counted exactly (a model the registry cannot
    build at these sizes is that model's ConfigError); a user factory is bounded below by one
    width x width matrix per block."""
    from depthscale.models.registry import parameter_count

    what = what or f"{model} at width {width:,} and depth {depth:,}"
    if limits is not None and depth > limits.depth:
        raise ConfigError(
            f"depth {depth:,} is over the {limits.depth:,.0f} blocks a run builds without "
            f"confirmation (each block is Python objects: minutes and GiBs before the first "
            f"step); lower {lower}, or {_say(override, 'depth', depth)}")
    # width x depth bounds every model below: counted exactly only where that bound fits (a
    # huge width overflows even the meta allocator)
    floor = depth * width
    over = limits is not None and BYTES_PER_PARAMETER * floor > limits.bytes
    count = floor if over else parameter_count(model, input_shape=input_shape, n_out=n_out,
                                               width=width, depth=depth, **dict(options or {}))
    need = BYTES_PER_PARAMETER * count
    if limits is not None and need > limits.bytes:
        raise ConfigError(
            f"{what} has {'at least ' if over else ''}{count:,} parameters: "
            f"{need / 2**30:,.1f} GiB for weights, gradients and Adam's moments, over the "
            f"{limits.bytes / 2**30:,.0f} GiB a run allocates without confirmation; lower "
            f"{lower}, or {_say(override, 'memory', need / 2**30)}")
    total = steps_of(steps=steps, epochs=epochs, n_train=n_train, batch_size=batch_size)
    batch = batch_size if n_train is None else min(batch_size, n_train)
    seconds, formula = training_seconds(parameters=count, batch_size=batch, steps=total,
                                        runs=runs, device=device)
    _check_time(what, seconds, formula, limits, lower_time, override)
    return RunCost(count, over, total, seconds, formula)


#: a lower bound on the time of one depth stage of one training step of the nfd and mean-ode
#: solvers (a few numpy calls, each slower than this at the smallest sizes)
DEPTH_STEP_SECONDS = 2e-5
#: the solvers :func:`solver_cost` knows
SOLVERS = ("kernel", "sde", "nfd", "mean-ode", "coupling", "coupling-path")


def solver_cost(kind: str, *, inputs: int = 1, dim: int = 1, particles: int = 1,
                depth_steps: int = 1, steps: int = 1, runs: int = 1,
                limits: Limits | None = LIMITS, what: str | None = None,
                override: Override = "pass --force") -> RunCost:
    """The memory and lower-bound seconds of ``runs`` runs of limit solver ``kind`` (float64,
    a few working copies): kernel 64 N^2 bytes (the N x N covariance), sde 32 (P N + steps N^2),
    nfd 32 P L K (particles x depth steps x training steps: each particle keeps every past
    increment, nfd Def. 1), mean-ode 64 (Q + N) (L + 1) D + 16 Q N (particles and inputs x
    depth stages x dimension, and a stage's particle-input preactivations); a
    finite net coupled to its SDE (nfd Prop. 2, ``particles`` its width n) 8 n^2 with explicit
    weights ("coupling", 2 n^2 L FLOPs a trial), 8 (L + 1) n without ("coupling-path"); nfd,
    mean-ode and coupling-path take at least :data:`DEPTH_STEP_SECONDS` a depth stage of a
    training step.
    Unless ``limits`` is None, a ConfigError over ``limits.bytes`` or ``limits.seconds``, with
    the estimate, its formula and the ``override``. ``RunCost.parameters`` holds the bytes."""
    n, p, L = inputs, particles, depth_steps
    if kind == "kernel":
        need, formula = 64 * n * n, f"64 bytes x inputs^2 = 64 x {n:,}^2"
    elif kind == "sde":
        need, formula = 32 * (p * n + L * n * n), (
            f"32 bytes x (particles x inputs + steps x inputs^2) = 32 x ({p:,} x {n:,} + "
            f"{L:,} x {n:,}^2)")
    elif kind == "nfd":
        need, formula = 32 * p * L * steps, (
            f"32 bytes x particles x depth steps x steps = 32 x {p:,} x {L:,} x {steps:,}")
    elif kind == "mean-ode":
        need, formula = 64 * (p + n) * (L + 1) * dim + 16 * p * n, (
            f"64 bytes x (particles + inputs) x (depth steps + 1) x dim + 16 bytes x particles "
            f"x inputs = 64 x ({p:,} + {n:,}) x {L + 1:,} x {dim:,} + 16 x {p:,} x {n:,}")
    elif kind == "coupling":
        need, formula = 8 * p * p, f"8 bytes x width^2 (one float64 W_l) = 8 x {p:,}^2"
    elif kind == "coupling-path":
        need, formula = 8 * (L + 1) * p, (
            f"8 bytes x (depth + 1) x width (the path of h) = 8 x {L + 1:,} x {p:,}")
    else:
        raise ConfigError(f"unknown solver {kind!r}; choose one of: {', '.join(SOLVERS)}")
    what = what or f"limit {kind}"
    if limits is not None and need > limits.bytes:
        raise ConfigError(f"{what} at these sizes needs about {need / 2**30:,.1f} GiB "
                          f"({formula}), over the {limits.bytes / 2**30:,.0f} GiB a run uses "
                          f"without confirmation; lower the sizes, or "
                          f"{_say(override, 'memory', need / 2**30)}")
    timed = kind in ("nfd", "mean-ode", "coupling-path")
    seconds = runs * steps * (L + 1) * DEPTH_STEP_SECONDS if timed else 0.0
    when = (f"{runs:,} run(s) x {steps:,} steps x {L + 1:,} depth stages x "
            f"{DEPTH_STEP_SECONDS:g} s")
    if kind == "coupling":  # one width x width product a layer
        seconds = runs * L * 2.0 * p * p / FLOPS["cpu"]
        when = f"{runs:,} run(s) x {L:,} layers x 2 x {p:,}^2 / {FLOPS['cpu']:.0e} FLOP/s"
    _check_time(what, seconds, when, limits, "the steps", override)
    return RunCost(need, False, steps, seconds, when)


def _check_time(what: str, seconds: float, formula: str, limits: Limits | None, lower: str,
                override: Override) -> None:
    """ConfigError when ``seconds`` (a lower bound) is over ``limits.seconds``: the estimate,
    its formula, what to lower and the ``override``."""
    if limits is not None and limits.seconds is not None and seconds > limits.seconds:
        raise ConfigError(
            f"{what} would take at least {human_seconds(seconds)} ({formula}), over the "
            f"{limits.seconds / 3600:,.0f} h a run starts without confirmation; lower "
            f"{lower}, or {_say(override, 'time', seconds / 3600)}")


def _say(override: Override, bound: str, need: float) -> str:
    return override if isinstance(override, str) else override(bound, need)


def training_seconds(*, parameters: int, batch_size: int, steps: int, runs: int = 1,
                     device: str = "cpu") -> tuple[float, str]:
    """A lower bound on the time of ``runs`` trainings of ``steps`` steps each, and its
    formula as text."""
    rate = FLOPS["cuda" if device.startswith("cuda") else "cpu"]
    per_step = STEP_OVERHEAD + 6.0 * parameters * batch_size / rate
    formula = (f"{runs:,} run(s) x {steps:,} steps x (1e-4 s + 6 x {parameters:,} parameters x "
               f"{batch_size:,} examples / {rate:.0e} FLOP/s)")
    return runs * steps * per_step, formula


def human_seconds(seconds: float) -> str:
    """``seconds`` as hours under two days, else days."""
    if seconds < 48 * 3600:
        return f"{seconds / 3600:,.1f} h"
    days = seconds / 86400
    return f"{days:,.0f} days" if days < 1e6 else f"{days:.1e} days"

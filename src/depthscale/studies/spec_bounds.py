"""The size bounds of a study, checked when its spec is read, before any run: the number of
runs, each run's depth and parameter memory, and the time they take in all. Each refusal
names the confirmation (``[study] max_runs``, ``max_depth``, ``max_gib``, ``max_hours``) that
lets a larger study run."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from depthscale.errors import ConfigError
from depthscale.studies.spec_records import StudySpec, combination, expand

if TYPE_CHECKING:
    from depthscale.train.budget import Limits, Override

__all__ = ["MAX_RUNS", "GridCost", "check_grid_cost", "check_grid_size", "grid_cost"]

#: the most runs a study's grid may expand to unless its [study] max_runs says more
MAX_RUNS = 10_000


class _Checks(Protocol):
    """What the spec reader's validator offers these checks."""

    def fail(self, key: str, message: str) -> NoReturn: ...
    def integer(self, key: str, value: Any, minimum: int) -> int: ...
    def number(self, key: str, value: Any) -> float: ...


def check_grid_size(spec: StudySpec, max_runs: Any, v: _Checks) -> None:
    """ConfigError when the grid holds more than :data:`MAX_RUNS` runs (or the spec's own
    ``[study] max_runs``, the confirmation of a larger grid)."""
    limit = MAX_RUNS if max_runs is None else v.integer("study.max_runs", max_runs, 1)
    if spec.n_runs > limit:
        shape = " x ".join(f"{len(values)} {key}" for key, values in spec.grid)
        v.fail("[grid]", f"expands to {spec.n_runs:,} runs ({shape}), over the {limit:,} a "
               f"study runs without confirmation; shrink the grid or confirm with [study] "
               f"max_runs = {spec.n_runs}")


def check_grid_cost(spec: StudySpec, study: Mapping[str, Any], v: _Checks) -> None:
    """Every run of the grid through the bounds of every run (:func:`grid_cost`), before any
    run: each within the depth and parameter memory a run has, or the spec's ``[study]
    max_depth`` / ``max_gib``; their lower-bound times added up within 24 hours, or ``[study]
    max_hours``. Each refusal names the combination and the confirmation."""
    from depthscale.train.budget import MAX_DEPTH, MAX_PARAMETER_BYTES, MAX_SECONDS, Limits

    def given(key: str, default: float) -> float:
        value = study.get(key)
        return default if value is None else v.number(f"study.{key}", value)

    limits = Limits(depth=given("max_depth", MAX_DEPTH),
                    bytes=given("max_gib", MAX_PARAMETER_BYTES / 2**30) * 2**30, seconds=None)
    hours_limit = given("max_hours", MAX_SECONDS / 3600)

    def confirm(bound: str, need: float) -> str:
        key = {"depth": "max_depth", "memory": "max_gib", "time": "max_hours"}[bound]
        return f"confirm with [study] {key} = {math.ceil(need)}"

    try:
        cost = grid_cost(spec, limits=limits, override=confirm,
                         lower="the grid's width or depth")
    except ConfigError as exc:
        v.fail("[grid]", str(exc))
    hours = cost.seconds / 3600
    if hours > hours_limit:
        v.fail("[grid]", f"{cost.steps:,} optimizer steps in all ({spec.n_runs:,} runs) take "
               f"at least {hours:,.0f} h ({cost.formula}), over the {hours_limit:,.0f} h a study "
               "runs without confirmation; lower steps, epochs or the grid, or confirm with "
               f"[study] max_hours = {math.ceil(hours)}")


@dataclass(frozen=True)
class GridCost:
    """What a study's runs cost: lower-bound ``seconds`` in all, their optimizer ``steps``, the
    time's ``formula``, and the largest run's parameter ``bytes`` and ``depth``."""

    seconds: float
    steps: int
    formula: str
    bytes: int
    depth: int


def grid_cost(spec: StudySpec, *, limits: Limits | None, override: Override,
              lower: str) -> GridCost:
    """The lower-bound seconds of all of ``spec``'s runs, their optimizer steps and the
    formula, and its largest run, each run through :func:`~depthscale.train.budget.run_cost`
    (``limits``, its ``seconds`` aside: the sum is the caller's to judge). Each distinct
    model (width, depth, model and data options) is built once on ``meta``; a ConfigError
    names the grid combination of a run over a bound or whose model cannot be built."""
    from depthscale.data.registry import data_shape
    from depthscale.train.budget import (
        BYTES_PER_PARAMETER,
        FLOPS,
        run_cost,
        steps_of,
        training_seconds,
    )

    per_run = None if limits is None else replace(limits, seconds=None)
    counts: dict[str, int] = {}
    seconds, total_steps, largest, deepest = 0.0, 0, 0, 0
    for run in expand(spec):
        data = {k: v for k, v in run.data_options if k not in ("seed", "n_test")}
        key = json.dumps([run.width, run.depth, run.model_options, sorted(data.items())],
                         default=str)
        try:
            shape = data_shape(run.dataset, **data)
            if key not in counts:
                counts[key] = run_cost(
                    run.model, input_shape=shape.sample_shape, n_out=shape.n_out,
                    width=run.width, depth=run.depth, options=dict(run.model_options),
                    limits=per_run, lower=lower, override=override).parameters
            steps = steps_of(steps=run.steps, epochs=run.epochs, n_train=shape.n_train,
                             batch_size=run.batch_size)
        except ConfigError as exc:
            raise ConfigError(f"gives a run that cannot be made ({combination(spec, run)}): "
                              f"{exc}") from None
        seconds += training_seconds(parameters=counts[key],
                                    batch_size=min(run.batch_size, shape.n_train), steps=steps,
                                    device=run.device)[0]
        total_steps += steps
        largest, deepest = max(largest, counts[key]), max(deepest, run.depth)
    rate = FLOPS["cuda" if spec.train.device.startswith("cuda") else "cpu"]
    return GridCost(seconds, total_steps,
                    f"each step 1e-4 s + 6 x parameters x batch / {rate:.0e} FLOP/s",
                    BYTES_PER_PARAMETER * largest, deepest)

"""The size bounds of a study, checked when its spec is read, before the grid is expanded: the
number of runs, and the optimizer steps they take in all. Each refusal names the
confirmation (``[study] max_runs`` / ``max_hours``) that lets a larger study run."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

if TYPE_CHECKING:
    from depthscale.studies.spec import StudySpec

__all__ = ["MAX_RUNS", "check_grid_size", "check_grid_steps"]

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


def check_grid_steps(spec: StudySpec, max_hours: Any, v: _Checks) -> None:
    """ConfigError when the grid's optimizer steps (counted where ``steps`` is given) would
    surely take over 24 hours at :data:`~depthscale.train.budget.STEP_OVERHEAD` each, unless
    ``[study] max_hours`` confirms a longer study."""
    from depthscale.train.budget import MAX_SECONDS, STEP_OVERHEAD

    swept: Sequence[Any] | None = dict(spec.grid).get("steps")
    if swept is not None:
        total = spec.n_runs // len(swept) * sum(int(x) for x in swept)
    elif spec.train.steps is not None:
        total = spec.n_runs * int(spec.train.steps)
    else:
        return  # epochs: the step count needs the data; each run's loop bounds itself
    hours = total * STEP_OVERHEAD / 3600
    limit = MAX_SECONDS / 3600 if max_hours is None else v.number("study.max_hours", max_hours)
    if hours > limit:
        v.fail("[grid]", f"{total:,} optimizer steps in all take at least {hours:,.0f} h "
               f"(1e-4 s a step), over the {limit:,.0f} h a study runs without confirmation; "
               f"lower steps or the grid, or confirm with [study] max_hours = {math.ceil(hours)}")

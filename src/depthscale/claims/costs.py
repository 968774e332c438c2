"""What a claim's settings cost, bounded before a changed claim runs (``reproduce --set``).

A claim declares its cost next to its settings (``@claim(..., cost=...)``,
:data:`~depthscale.claims.registry.Cost`): the networks it makes
(:class:`~depthscale.claims.registry.Runs`), the limit solvers it runs
(:class:`~depthscale.claims.registry.Solver`) and the studies it runs (their tables). Each
goes through the bounds of every run (:func:`depthscale.train.budget.run_cost`,
:func:`~depthscale.train.budget.solver_cost`; a study through the spec reader's
:func:`~depthscale.studies.spec_bounds.grid_cost`): a network over the depth or the memory a
run has, or a claim whose runs would surely take longer than a day, is
refused; each bound is raised to what the scale's own settings make where they make more (the
full scale's nets and CPU hours are the paper's). The time is the lower bound every command
uses; a sequential design's later rounds are not counted.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from depthscale.claims.changes import SettingChange, apply_changes, describe_changes
from depthscale.claims.registry import CLAIMS, Claim, Runs, Solver
from depthscale.errors import ConfigError
from depthscale.train.budget import Limits

__all__ = ["ClaimCost", "check_claim_cost", "claim_cost"]

_OVERRIDE = "pass --force"


@dataclass(frozen=True)
class ClaimCost:
    """What a claim's settings make: the lower-bound ``seconds`` of all its runs, and its
    largest network's parameter ``bytes`` and ``depth``."""

    seconds: float
    bytes: int
    depth: int


def claim_cost(claim: Claim, settings: Mapping[str, Any], device: str, *,
               limits: Limits | None = None) -> ClaimCost:
    """The :class:`ClaimCost` of ``claim``'s ``settings`` on ``device`` (nothing where the
    claim declares no cost); with ``limits``, a ConfigError naming the claim for a network
    over its depth or bytes, and for one that cannot be built."""
    from depthscale.data.registry import data_shape
    from depthscale.studies.spec import study_from_tables
    from depthscale.studies.spec_bounds import grid_cost
    from depthscale.train.budget import run_cost, solver_cost

    total = ClaimCost(0.0, 0, 0)
    if claim.cost is None:
        return total
    per_run = None if limits is None else replace(limits, seconds=None)
    for item in claim.cost(settings, device):
        where = ""
        try:
            if isinstance(item, Runs):
                data = {k: v for k, v in item.data.items() if k != "dir"}
                shape = data_shape(item.dataset, **data)
                run = run_cost(item.model, input_shape=shape.sample_shape, n_out=shape.n_out,
                               width=item.width, depth=item.depth, options=item.options,
                               batch_size=item.batch, steps=item.steps, epochs=item.epochs,
                               n_train=shape.n_train, runs=item.count, device=device,
                               limits=per_run, lower="the sizes set", override=_OVERRIDE)
                one = ClaimCost(run.seconds, run.bytes, item.depth)
            elif isinstance(item, Solver):
                run = solver_cost(item.kind, inputs=item.inputs, dim=item.dim,
                                  particles=item.particles, depth_steps=item.depth_steps,
                                  steps=item.steps, runs=item.count, limits=per_run,
                                  what=f"its {item.kind} solver", override=_OVERRIDE)
                one = ClaimCost(run.seconds, run.parameters, 0)
            else:
                name = item.get("study", {}).get("name", "its study")
                spec = study_from_tables(item, source=f"{claim.id}'s study {name}",
                                         check_cost=False)
                where = f"study {name} "
                grid = grid_cost(spec, limits=per_run, override=_OVERRIDE,
                                 lower="the sizes set")
                one = ClaimCost(grid.seconds, grid.bytes, grid.depth)
        except ConfigError as exc:
            raise ConfigError(f"{claim.id}: {where}{exc}") from None
        total = ClaimCost(total.seconds + one.seconds, max(total.bytes, one.bytes),
                          max(total.depth, one.depth))
    return total


@functools.cache
def _stock_cost(claim_id: str, scale: str, control: bool, device: str) -> ClaimCost:
    claim = CLAIMS[claim_id]
    return claim_cost(claim, claim.settings_for(scale, control=control), device)


def check_claim_cost(claim_id: str, scale: str, control: bool,
                     changes: Sequence[SettingChange], device: str) -> None:
    """ConfigError, before any work, when claim ``claim_id`` under ``changes`` makes a network
    over the depth or parameter memory of every run, or its runs would surely take over a day
    (:func:`claim_cost`), each bound raised to what the scale's own settings make where they
    make more; the message names the override (``--force``)."""
    from depthscale.train.budget import LIMITS, human_seconds

    claim = CLAIMS[claim_id]
    if claim.cost is None or not changes:
        return
    stock = _stock_cost(claim_id, scale, control, device)
    limits = Limits(depth=max(LIMITS.depth, stock.depth), bytes=max(LIMITS.bytes, stock.bytes),
                    seconds=max(LIMITS.seconds or 0.0, stock.seconds))
    settings = apply_changes(claim.settings_for(scale, control=control), changes, claim_id)
    cost = claim_cost(claim, settings, device, limits=limits)
    if limits.seconds is not None and cost.seconds > limits.seconds:
        own = (f"the {scale} settings' own {human_seconds(stock.seconds)}"
               if stock.seconds > (LIMITS.seconds or 0.0)
               else f"the {(LIMITS.seconds or 0.0) / 3600:.0f} h a changed claim starts")
        raise ConfigError(f"{claim_id} under --set {describe_changes(changes)} would take at "
                          f"least {human_seconds(cost.seconds)} on {device} (its runs' lower "
                          f"bound, as every command counts it), over {own}; lower the sizes "
                          f"set, or {_OVERRIDE}")

"""The plan's sizes must be the model's: the width n and depth L the rules scale by (nfd Eq. 1;
L the residual branches K, laws Sec. 3.4) and the block width M (chizat Eq. 24-25).

A depthscale model states them (``width``, ``plan_depth``: the L of the rule table, residual
branches K or hidden layers of a plain net, ``hidden``). For any other module with residual
branches that :func:`~depthscale.param.inspect` read, the width is the residual stream's and
the depth the number of branches. Otherwise the width is read from its weight shapes (the plan's
width must be one of its layer sizes) and the depth, when it has residual branches, from the
parameters whose role writes into the stream (``branch``, ``branch_out``): one per branch, or
fewer branches than writers where a block adds several at once, but never fewer than the blocks
they sit in. A plain net's rules do not depend on depth. A mismatch is refused with the
``plan(...)`` call that fits; where every role was given by hand, it is a warning and the
plan's sizes are used. :func:`plan_sizes` takes a plan's sizes from a structure.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

from torch import nn

from depthscale.errors import ConfigError
from depthscale.param.checks import whole
from depthscale.param.evaluate import PlanSettings, call_text, settings_of
from depthscale.param.inspect import Structure, block_key, plain_width
from depthscale.param.walk import params

__all__ = ["check_sizes", "plan_sizes"]

# The warnings name the caller of the code that called Plan.apply, as they always have:
# warn <- _check_* <- check_sizes <- apply_plan <- Plan.apply <- caller <- its caller.
_STACKLEVEL = 6


def check_sizes(plan: PlanSettings, model: nn.Module, role_of: Mapping[str, str],
                structure: Structure | None = None, explicit: bool = False) -> None:
    """A ConfigError (a warning when ``explicit``: every role given by hand) if ``plan`` was
    not made for ``model``'s sizes (module docstring)."""
    if (structure is not None and structure.depth and getattr(model, "width", None) is None
            and getattr(model, "plan_depth", None) is None):
        _check_inspected(plan, model, structure, explicit)
        return
    problems: list[str] = []
    match: dict[str, int] = {}
    for attr, plan_attr, want in (
        ("width", "width", plan.width),
        ("plan_depth", "depth", plan.depth),
        ("hidden", "hidden", plan.hidden),
    ):
        have = getattr(model, attr, None)
        if have is not None and have != want:
            match[plan_attr] = have
            problems.append(f"model {attr} is {have} but the plan was made for "
                            f"{plan_attr}={want}")
    if getattr(model, "width", None) is None:
        _check_width(plan, model, role_of, problems, match)
    if getattr(model, "plan_depth", None) is None:
        _check_writers(plan, role_of, explicit, problems, match)
    if problems:
        raise ConfigError(
            f"the plan does not fit this {type(model).__name__}: {'; '.join(problems)}; "
            f"build the matching plan: ds.param.{call_text({**settings_of(plan), **match})}"
        )


def plan_sizes(structure: object, width: object, depth: object) -> tuple[object, object]:
    """The ``width`` and ``depth`` a plan is bound to: as given, or the residual stream's width
    and the number of residual branches of ``structure`` (what inspect read), which a value
    given too must equal. A structure without branches gives ``depth=1`` unless one is given:
    a plain net's rules do not depend on depth (a depthscale ``PlainMLP`` states its own)."""
    if structure is None:
        missing = [f"{k}=" for k, v in (("width", width), ("depth", depth)) if v is None]
        if missing:
            raise ConfigError(
                f"plan() needs {' and '.join(missing)}: the model's width n and its number of "
                "residual branches L, or structure=ds.param.inspect(model, x) to take both "
                "from the model")
        return width, depth
    if not isinstance(structure, Structure):
        raise ConfigError(f"structure must be the Structure ds.param.inspect(model, x) returns, "
                          f"got a {type(structure).__name__}")
    if width is None:
        if structure.width < 1:
            raise ConfigError("the structure has width 0 (inspect found no weight matrix in "
                              "the model): pass width= for the plan")
        width = structure.width
    elif whole("width", width) != structure.width:
        raise ConfigError(
            f"width={width} but the structure has width {structure.width} (the residual "
            f"stream's width inspect found); leave width out to take the structure's, or "
            f"inspect the model of width {width}")
    if not structure.depth:  # no residual branch: a width-only plan
        return width, 1 if depth is None else depth
    if depth is None:
        depth = structure.depth
    elif whole("depth", depth, minimum=0) != structure.depth:
        raise ConfigError(
            f"depth={depth} but the structure has {structure.depth} residual branches (the L "
            "the rules scale by; a Transformer block holds two); leave depth out to take the "
            "structure's, or inspect the model of that depth")
    return width, depth


def _check_inspected(plan: PlanSettings, model: nn.Module, structure: Structure,
                     explicit: bool) -> None:
    """The residual stream's width and the number of branches inspect found."""
    if (structure.width, structure.depth) == (plan.width, plan.depth):
        return
    match = {"width": structure.width, "depth": structure.depth}
    if explicit:  # every role given by hand: the user's sizes win
        warnings.warn(
            f"inspect found width {structure.width} and {structure.depth} residual "
            f"branches, but every role was given by hand and the plan says width="
            f"{plan.width}, depth={plan.depth}: the plan's sizes are used",
            UserWarning, stacklevel=_STACKLEVEL)
        return
    raise ConfigError(
        f"the plan does not fit this {type(model).__name__}: inspect found width "
        f"{structure.width} and {structure.depth} residual branches in "
        f"{len(structure.blocks)} blocks (effective depth "
        f"{structure.effective_depth} = {structure.plain_layers} plain layers + "
        f"{structure.depth} branches, laws Sec. 3.4), but the plan was made for "
        f"width={plan.width}, depth={plan.depth}; build the matching plan: "
        f"ds.param.{call_text({**settings_of(plan), **match})}"
    )


def _check_width(plan: PlanSettings, model: nn.Module, role_of: Mapping[str, str],
                 problems: list[str], match: dict[str, int]) -> None:
    """The plan's width must be one of the model's layer sizes."""
    sizes: set[int] = set()
    for full, _, _, p in params(model):
        if full.endswith("weight") and p.ndim >= 2:
            if role_of[full] != "output":
                sizes.add(int(p.shape[0]))
            if role_of[full] != "input":
                sizes.add(int(p.shape[1]))
    if sizes and plan.width not in sizes:
        match["width"] = plain_width(model)
        problems.append(f"no layer has width {plan.width} (layer sizes "
                        f"{sorted(sizes)}, most common {match['width']})")


def _check_writers(plan: PlanSettings, role_of: Mapping[str, str], explicit: bool,
                   problems: list[str], match: dict[str, int]) -> None:
    """One writer per branch, except where branches share a block and one addition
    (x + attn(h) + mlp(h) computed as x + (attn + mlp)): K lies in [blocks, writers]."""
    writers = [n for n, r in role_of.items() if r in ("branch", "branch_out")]
    blocks = {block_key((n.rpartition(".")[0] or n,)) for n in writers}
    if not writers or len(blocks) <= plan.depth <= len(writers):
        return
    if explicit:
        warnings.warn(
            f"{len(writers)} parameters write residual branches but the plan says "
            f"depth={plan.depth}; every role was given by hand, so the plan's depth is "
            "used (a block applied several times? pass example_input= and inspect "
            "counts its uses)", UserWarning, stacklevel=_STACKLEVEL)
        return
    match["depth"] = len(writers)
    count = (f"{len(writers)}" if len(blocks) == len(writers) else
             f"{len(blocks)} to {len(writers)}")
    problems.append(
        f"it has {count} residual branches, not {plan.depth} ({len(writers)} "
        f"parameters with role branch/branch_out, e.g. {writers[0]}, in "
        f"{len(blocks)} blocks; ds.param.inspect(model, x).depth counts them, and "
        "a block applied several times once per use: pass example_input=)")

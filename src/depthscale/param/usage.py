"""How a model uses a parameter, beyond its role: what a plan must know to give a rule the
right sizes and to realise it in the model's own form.

A :class:`Usage` per parameter comes from :func:`depthscale.param.inspect` (and, for the
dimensions that grow with width, from a second model at another width);
:func:`depthscale.param.evaluate.adjusted` turns a role's native rule into the rule for that use
(``Plan`` then realises it in the model's own form). Tied readouts get a forward multiplier
(:func:`set_readouts`), mup's ``MuSharedReadout`` in the mean-field form of nfd Eq. 1.
"""

from __future__ import annotations

import functools
import math
import weakref
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from depthscale.errors import ConfigError
from depthscale.param.inspect import Structure

__all__ = ["RowBlocks", "Usage", "fixed_rows", "set_branch_outputs", "set_readouts",
           "set_row_scales", "usages"]

_READOUT = "_depthscale_readout"  # the module attribute holding a tied readout's multiplier
_BRANCH = "_depthscale_branch"  # the module attribute holding a weightless branch's multiplier
_ROWS = "_depthscale_rows"  # the module attribute: {own parameter: (row blocks, gradient scale)}
_FIXED = ("", "fan_in", "both")
#: blocks ``[start, stop)`` of a matrix's rows (its output features)
RowBlocks = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Usage:
    """What a rule needs to know of one parameter besides its role.

    ``fan_in``: what its matrix use contracts (None: read from the module). ``uses``: how many
    times the forward applies it (a block shared over depth: k > 1). ``scale``: a constant the
    model itself multiplies its output by (Gemma's sqrt(n) on the embedding): the plan's form
    takes it as the parameter's multiplier. ``keep``: the model's own values are kept (a gain:
    norm weights, Gemma's 1 + w, layer-scale gammas; no width or depth rule applies to them).
    ``fixed`` names the dimensions that do not grow with width (``"fan_in"``: a depthwise
    kernel; ``"both"``: a token-mixing matrix, an output bias) and ``base`` the width at which
    their width factors are frozen (muP's base shapes, TP-V Sec. 7). ``normed``: a branch's
    last layer whose output a normalisation divides out before the addition (MobileNetV2's
    project conv before its BatchNorm): the norm's gain carries the branch multiplier, so the
    layer's own multiplier drops it. ``rows``: blocks ``[start, stop)`` of output rows that
    do not grow while the fan-in does (Mamba's x_proj: B, C beside dt), frozen at ``base``
    (:func:`depthscale.param.evaluate.rows_scale`)."""

    fan_in: int | None = None
    uses: int = 1
    scale: float = 1.0
    keep: bool = False
    fixed: str = ""
    base: int | None = None
    normed: bool = False
    rows: RowBlocks = ()

    def to_json(self) -> dict[str, Any]:
        """The fields that differ from the default (what PlanState stores)."""
        default = Usage()
        return {k: v for k, v in asdict(self).items() if getattr(default, k) != v}

    @classmethod
    def from_json(cls, entry: Any) -> Usage:
        """A Usage from :meth:`to_json`; a ConfigError for anything else."""
        names = set(asdict(cls()))
        if not isinstance(entry, dict) or not set(entry) <= names:
            raise ConfigError(f"a plan usage entry must be a dict with keys among {sorted(names)}"
                              f", got {entry!r}")
        rows = entry.get("rows", ())
        if not (isinstance(rows, (list, tuple)) and all(
                isinstance(r, (list, tuple)) and len(r) == 2
                and all(isinstance(i, int) for i in r) and 0 <= r[0] < r[1] for r in rows)):
            raise ConfigError(f"invalid plan usage entry {entry!r}: rows are [start, stop] pairs")
        usage = cls(**{**entry, "rows": tuple((int(a), int(b)) for a, b in rows)})
        if (usage.fixed not in _FIXED or usage.uses < 1 or not usage.scale > 0
                or (usage.rows and not usage.base)):
            raise ConfigError(f"invalid plan usage entry {entry!r}")
        return usage


def usages(structure: Structure, base: Structure | None = None,
           shapes: dict[str, tuple[int, ...]] | None = None,
           base_shapes: dict[str, tuple[int, ...]] | None = None) -> dict[str, Usage]:
    """The usage of every parameter ``structure`` classified; with ``base`` (the same model at
    another width, and the parameter shapes of both), the dimensions that do not grow."""
    out: dict[str, Usage] = {}
    gained = set(structure.branch_gains.values())
    normed = {w + ".weight" if w + ".weight" in structure.roles else w
              for b in structure.branches if b.index in gained for w in b.writers}
    for name, role in structure.roles.items():
        fixed, n0, rows = "", None, RowBlocks()
        if base is not None and shapes and base_shapes and name in base_shapes:
            fixed = _fixed_dims(shapes[name], base_shapes[name], structure.fan_in.get(name),
                                base.fan_in.get(name))
            if not fixed and structure.fan_in.get(name) != base.fan_in.get(name):
                rows = fixed_rows(structure.splits.get(name, ()), base.splits.get(name, ()))
            n0 = base.width if fixed or rows else None
        out[name] = Usage(
            fan_in=structure.fan_in.get(name),
            uses=structure.uses.get(name, 1),
            scale=(structure.input_scale if role == "input" else
                   structure.output_scale if role == "output"
                   and name not in structure.routers else 1.0),
            keep=name in structure.gains or name in structure.conventions,
            fixed=fixed,
            base=n0,
            normed=name in normed,
            rows=rows,
        )
    return out


def fixed_rows(blocks: RowBlocks, base_blocks: RowBlocks) -> RowBlocks:
    """The row blocks of a split output whose size is the same in the base model (two splits
    into as many blocks): the rows whose number does not grow with width."""
    if len(blocks) != len(base_blocks):
        return ()
    return tuple(b for b, b0 in zip(blocks, base_blocks, strict=True)
                 if b[1] - b[0] == b0[1] - b0[0])


def _fixed_dims(shape: tuple[int, ...], base_shape: tuple[int, ...], fan_in: int | None,
                base_fan_in: int | None) -> str:
    """Which dimensions of a parameter do not grow between the base model and this one."""
    numel, base_numel = math.prod(shape), math.prod(base_shape)
    if len(shape) <= 1 or fan_in is None or base_fan_in is None:
        return "both" if numel == base_numel else ""
    fan_out, base_fan_out = numel // fan_in, base_numel // base_fan_in
    if fan_in == base_fan_in and fan_out == base_fan_out:
        return "both"
    if fan_in == base_fan_in:
        return "fan_in"
    return ""


def _readout_hook(module: nn.Module, args: Any, output: Any) -> Any:
    """Multiply a tied readout's logits by its multiplier (a bias is left as it is)."""
    m = vars(module).get(_READOUT)
    if not isinstance(m, float) or not hasattr(output, "mul"):
        return output
    bias = getattr(module, "bias", None)
    if isinstance(bias, nn.Parameter):
        return (output - bias) * m + bias
    return output * m


def set_readouts(model: nn.Module, readouts: dict[str, float]) -> None:
    """Give each named module its readout multiplier (a forward hook, registered once; the
    value lives on the module, so deepcopy, pickling and a reload keep it)."""
    modules = dict(model.named_modules())
    for name, m in readouts.items():
        module = modules.get(name)
        if module is None:
            raise ConfigError(f"the plan names a tied readout {name!r} the model does not have")
        if _READOUT not in vars(module):
            module.register_forward_hook(_readout_hook)
        object.__setattr__(module, _READOUT, float(m))


def _branch_hook(module: nn.Module, args: Any, output: Any) -> Any:
    """Multiply a weightless branch's output by its branch multiplier."""
    m = vars(module).get(_BRANCH)
    if not isinstance(m, float) or not hasattr(output, "mul"):
        return output
    return output * m


def set_branch_outputs(model: nn.Module, multipliers: dict[str, float]) -> None:
    """Give each named module, whose output is a residual branch that holds no weight, the
    branch multiplier (a forward hook, registered once; the value lives on the module)."""
    modules = dict(model.named_modules())
    for name, m in multipliers.items():
        module = modules.get(name)
        if module is None:
            raise ConfigError(f"the plan names a branch output {name!r} the model does not "
                              "have")
        if _BRANCH not in vars(module):
            module.register_forward_hook(_branch_hook)
        object.__setattr__(module, _BRANCH, float(m))


#: id of a parameter -> the parameter itself, for those whose gradient hook is registered
_HOOKED: dict[int, weakref.ref[torch.Tensor]] = {}


def _scale_rows(module_ref: weakref.ref[nn.Module], p_name: str, grad: torch.Tensor,
                ) -> torch.Tensor:
    """The gradient of ``module``'s parameter ``p_name`` with its readout-like row blocks
    times their scale (what the module holds now: none after a plan without them)."""
    module = module_ref()
    entry = vars(module).get(_ROWS, {}).get(p_name) if module is not None else None
    if entry is None:
        return grad
    blocks, scale = entry
    grad = grad.clone()
    for start, stop in blocks:
        grad[start:stop] *= scale
    return grad


def _rows_pre_hook(module: nn.Module, args: Any) -> None:
    """Before each forward: a gradient hook on each parameter with row scales that has none
    yet (a deepcopy or an unpickled model gets its own at its first forward)."""
    for p_name in vars(module).get(_ROWS, {}):
        p = module._parameters.get(p_name)
        if p is None or not p.requires_grad:
            continue
        seen = _HOOKED.get(id(p))
        if seen is not None and seen() is p:
            continue
        p.register_hook(functools.partial(_scale_rows, weakref.ref(module), p_name))
        _HOOKED[id(p)] = weakref.ref(p, _forget)


def _forget(ref: weakref.ref[torch.Tensor]) -> None:
    """A hooked parameter was freed: drop its entry (unless a newer one holds the id)."""
    for key, held in list(_HOOKED.items()):
        if held is ref:
            del _HOOKED[key]


def set_row_scales(model: nn.Module, scales: dict[str, tuple[RowBlocks, float]]) -> None:
    """Give each named parameter's readout-like row blocks their gradient scale (a tensor hook,
    registered from a forward pre-hook of its module; the values live on the module, so
    deepcopy, pickling and a reload keep them); every other module's earlier scales are
    cleared. Under SGD the scale is the blocks' LR factor; Adam, invariant to a constant
    gradient scale, sees it only through its eps."""
    modules = dict(model.named_modules())
    for module in modules.values():
        if _ROWS in vars(module):
            object.__setattr__(module, _ROWS, {})
    for full, (blocks, scale) in scales.items():
        owner, _, p_name = full.rpartition(".")
        module = modules.get(owner)
        if module is None or not isinstance(module._parameters.get(p_name), nn.Parameter):
            raise ConfigError(f"the plan names row scales for {full!r}, a parameter the model "
                              "does not have")
        if _ROWS not in vars(module):
            module.register_forward_pre_hook(_rows_pre_hook)
            object.__setattr__(module, _ROWS, {})
        vars(module)[_ROWS][p_name] = (tuple(blocks), float(scale))

"""The recorded forward pass of the coordinate check (:mod:`depthscale.probes.coord_check`):
which weight is which unit, and a ``TorchDispatchMode`` that finds each weight's uses, its layer
outputs and the residual additions by how the forward uses the parameters (no module hooks), so
``nn.MultiheadAttention`` and raw ``x @ W`` weights are seen; plus the module-level recording of
whole modules' own updates (probes.block_updates)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map

from depthscale.calls import call_model, logits_of
from depthscale.errors import ConfigError
from depthscale.param.dataflow import copy_input, tensors_in
from depthscale.param.inspect import Structure

__all__ = ["LAYER_TYPES", "MATRIX_ROLES", "Layout", "ModulePass", "Pass", "first_tensor",
           "module_forward", "module_hooks", "record_pass", "unit_weight", "weight_layout"]

#: Layer types in the order of a forward pass.
LAYER_TYPES = ("input", "hidden", "branch_in", "branch", "branch_out", "stream_mid", "stream",
               "output")
#: Roles of weights: matrices the forward multiplies activations by.
MATRIX_ROLES = frozenset({"input", "hidden", "branch", "branch_in", "branch_out", "output"})

# ---- which weight is which unit -------------------------------------------------------------

def unit_weight(model: nn.Module, unit: str) -> str | None:
    """The parameter name of ``unit``'s weight: ``f"{unit}.weight"`` when the model has that
    parameter, else ``unit`` itself when it names a parameter (a raw ``nn.Parameter`` such as
    ``blocks.0.W2`` or ``self_attn.in_proj_weight``), else None."""
    names = {n for n, _ in model.named_parameters()}
    for name in (f"{unit}.weight" if unit else "weight", unit):
        if name in names:
            return name
    return None


def _unit_of_param(name: str) -> str:
    """The unit a weight parameter belongs to: its module for a module's ``weight``, else
    the parameter's full name."""
    module, _, own = name.rpartition(".")
    return module if own == "weight" and module else name


def _template(unit: str) -> str:
    """The unit's name with its numeric path components (block indices) as ``*``."""
    return ".".join("*" if part.isdigit() else part for part in unit.split("."))


@dataclass(frozen=True)
class Layout:
    """What the recorder needs from a :class:`Structure`, by unit."""

    unit_of: dict[int, str]  # id(weight parameter) -> unit
    params: dict[str, nn.Parameter]  # unit -> its weight
    role: dict[str, str]  # unit -> role of its weight
    quota: dict[str, int]  # uses recorded per unit
    writers: dict[str, tuple[int, ...]]  # writer unit -> the branch of its k-th use
    branch_types: tuple[str, ...]  # per branch: "branch" or "branch_out"
    internal: frozenset[str]  # units inside a branch whose own update the lazy diagnostic reads
    group: dict[str, str]  # unit -> the name its own-update fit pools it under
    #: the constants the model multiplies q or k by for its attention scale (OPT's q *
    #: head_dim^-0.5): they scale the attention logits, so a layer's output is not followed
    #: through them (muP: q Theta(1), the logits 1/d_head; TP-V Sec. 8)
    stops: frozenset[float] = frozenset()
    #: module -> the branch its output is (a branch that holds no weight: Structure.branch_outputs)
    outputs: dict[str, int] = field(default_factory=dict)


def weight_layout(model: nn.Module, st: Structure) -> Layout:
    params = dict(model.named_parameters())
    role: dict[str, str] = {}
    unit_params: dict[str, nn.Parameter] = {}
    for name, r in st.roles.items():
        p = params.get(name)
        if r in MATRIX_ROLES and p is not None and p.ndim >= 2 and p.requires_grad:
            unit = _unit_of_param(name)
            role[unit], unit_params[unit] = r, p
    in_branches = Counter(m for b in st.branches for m in dict.fromkeys(b.modules))
    writers: dict[str, list[int]] = {}
    branch_types = []
    for b in st.branches:
        for w in b.writers:
            wname = unit_weight(model, w)
            if wname is None:
                raise ConfigError(
                    f"branch {b.index} is written by {w!r}, which names no weight of the model "
                    f"(neither {w + '.weight'!r} nor a parameter {w!r}); a Structure names a "
                    "weight by its module (for a module's weight) or its parameter name"
                )
            unit = _unit_of_param(wname)
            unit_params.setdefault(unit, params[wname])
            role.setdefault(unit, st.roles.get(wname, "branch_out"))
            writers.setdefault(unit, []).append(b.index)
        kinds = {role.get(_unit_of_param(unit_weight(model, w) or w)) for w in b.writers}
        branch_types.append("branch" if "branch" in kinds else "branch_out")
    quota = {u: max(1, in_branches.get(u, 0), len(writers.get(u, ()))) for u in unit_params}
    internal = frozenset(u for u, r in role.items() if r == "branch_in" or (
        r == "hidden" and u in in_branches))
    names: dict[tuple[str, str], list[str]] = {}
    for u, r in role.items():
        names.setdefault((r, _template(u) if u in in_branches else u), []).append(u)
    plain = Counter(t for _, t in names)
    group = {u: t if plain[t] == 1 and t not in LAYER_TYPES else f"{t} ({r})"
             for (r, t), us in names.items() for u in us}
    return Layout({id(p): u for u, p in unit_params.items()}, unit_params, role, quota,
                   {u: tuple(ks) for u, ks in writers.items()}, tuple(branch_types), internal,
                   group, frozenset(c for a in st.attention for c in a.factors[:a.qk]),
                   dict(st.branch_outputs))


# ---- the recorded forward pass --------------------------------------------------------------

_aten = torch.ops.aten
#: ops a layer's output is followed through when they read nothing else of the data:
#: reshapes and copies (any view that keeps every element) ...
_RESHAPES = {_aten._unsafe_view.default, _aten.clone.default, _aten._to_copy.default}
#: ... and elementwise affine epilogues (a forward multiplier, a bias), in place or not
_AFFINE = {_aten.add, _aten.sub, _aten.mul, _aten.div, _aten.add_, _aten.sub_, _aten.mul_,
           _aten.div_}
_SCALINGS = {_aten.mul, _aten.div, _aten.mul_, _aten.div_}
#: the residual additions' candidates
_ADDS = {_aten.add.Tensor, _aten.add_.Tensor}


def _mutates(func: Any) -> bool:
    return any(a.alias_info is not None and a.alias_info.is_write
               for a in func._schema.arguments)


#: the shadow passes of a use after the steps: its weight at init (the own update is the
#: output minus this), and |W - W0| and zero in its place on |x| (the aligned own update is
#: their difference)
_VARIANTS = ("initial", "delta", "zero")


def _first(res: Any) -> torch.Tensor:
    return next(x for x in tree_leaves(res) if isinstance(x, torch.Tensor))


@dataclass
class _Out:
    """One use of a unit's weight: the tensor holding its output (followed through epilogues),
    its shadows (after the steps only: :data:`_VARIANTS`), and, once the output is read, its
    snapshot, own update and aligned own update."""

    unit: str
    use: int
    tensor: torch.Tensor
    shadows: dict[str, torch.Tensor]
    value: torch.Tensor | None = None
    own: torch.Tensor | None = None
    aligned: torch.Tensor | None = None


class _Recorder(TorchDispatchMode):
    """Records one forward pass (see the module docstring): the output of every use of a
    unit's weight, the residual additions of the branches (operand and stream after it, in
    pass order) and, given the initial weights, every use's own update and aligned own
    update."""

    def __init__(self, layout: Layout, inputs: list[torch.Tensor],
                 initial: dict[int, torch.Tensor] | None) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.layout = layout
        self.keep: list[torch.Tensor] = list(inputs)  # keeps ids unique while the pass runs
        self.data: set[int] = {id(t) for t in inputs}
        self.derived: dict[int, frozenset[str]] = {
            i: frozenset({u}) for i, u in layout.unit_of.items()}
        self.shadowing = initial is not None
        # (variant, id of a derived tensor, unit) -> that tensor with the unit's weight swapped
        self.alt: dict[tuple[str, int, str], torch.Tensor] = {}
        if initial is not None:
            for i, u in layout.unit_of.items():
                w, w0 = layout.params[u].detach(), initial[i]
                self.alt[("initial", i, u)] = w0
                self.alt[("delta", i, u)] = (w - w0).abs()
                self.alt[("zero", i, u)] = torch.zeros_like(w0)
        self.uses: Counter[str] = Counter()
        self.pending: dict[int, list[_Out]] = {}
        self.outs: list[_Out] = []
        self.marks: dict[int, frozenset[int]] = {}
        self.found: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.order: list[int] = []  # branches in the order of their additions

    # -- bookkeeping --------------------------------------------------------------------------
    def snap(self, o: _Out) -> None:
        if o.value is None:
            o.value = o.tensor.detach().clone()
            sh = o.shadows
            if sh.get("initial") is not None and sh["initial"].shape == o.value.shape:
                o.own = o.value - sh["initial"]
            if "delta" in sh and "zero" in sh and sh["delta"].shape == o.value.shape:
                o.aligned = (sh["delta"] - sh["zero"]).abs()
        self.pending.pop(id(o.tensor), None)

    def finish(self) -> None:
        for outs in list(self.pending.values()):
            for o in outs:
                self.snap(o)

    def _shadow(self, variant: str, func: Any, args: Any, kwargs: Any, unit: str) -> Any:
        """``func`` on its arguments with every tensor derived from ``unit``'s weight replaced
        by its ``variant`` version (and, for "delta" and "zero", the data by its magnitude)."""
        absolute = variant != "initial"

        def swap(v: Any) -> Any:
            if not isinstance(v, torch.Tensor):
                return v
            alt = self.alt.get((variant, id(v), unit))
            if alt is not None:
                return alt
            if absolute and id(v) in self.data and v.is_floating_point():
                return v.abs()
            return v

        a, k = tree_map(swap, (args, kwargs))
        return func(*a, **k)

    def _follow_or_settle(self, func: Any, ins: list[torch.Tensor], held: list[torch.Tensor],
                          units: frozenset[str], outs: list[torch.Tensor] | None,
                          args: Any = ()) -> torch.Tensor | None:
        """The one pending output this op carries on (a reshape or affine op of it alone), or
        None after snapshotting every pending output the op consumes."""
        if len(held) == 1 and not units and self._follows(func, ins, held[0], outs, args):
            return held[0]
        for t in held:
            for o in list(self.pending.get(id(t), ())):
                self.snap(o)
        return None

    def _follows(self, func: Any, ins: list[torch.Tensor], t: torch.Tensor,
                 outs: list[torch.Tensor] | None, args: Any = ()) -> bool:
        """Whether ``func`` continues the layer output ``t`` (a reshape, or an affine epilogue
        without another data input); ``outs`` is None before an in-place op runs."""
        if sum(x is t for x in ins) != 1 or any(id(x) in self.data for x in ins if x is not t):
            return False
        if func.overloadpacket in _AFFINE:
            if self._attention_constant(func, t, args):
                return False
            return outs is None or (len(outs) == 1 and outs[0].shape == t.shape)
        if outs is None or len(outs) != 1 or outs[0].numel() != t.numel():
            return False
        return bool(func.is_view) or func in _RESHAPES

    def _attention_constant(self, func: Any, t: torch.Tensor, args: Any) -> bool:
        """Whether ``func`` multiplies ``t`` by one of the layout's attention constants."""
        if not self.layout.stops or func.overloadpacket not in _SCALINGS:
            return False
        others = [x for x in tree_leaves(args) if x is not t]
        other = others[0] if len(others) == 1 else None
        if isinstance(other, torch.Tensor) and other.numel() == 1:
            other = float(other)
        if not isinstance(other, (int, float)) or other == 0:
            return False
        c = 1 / other if func.overloadpacket in (_aten.div, _aten.div_) else float(other)
        return any(math.isclose(c, s, rel_tol=1e-6) for s in self.layout.stops)

    def _selects(self, units: frozenset[str], ins: list[torch.Tensor]) -> bool:
        """Whether the op selects matrices of stacked experts ((E, out, in) weights) by
        routing indices: every data input is an index, so the result is still a weight."""
        return all(self.layout.params[u].ndim >= 3 for u in units) and all(
            not t.is_floating_point() for t in ins if id(t) in self.data)

    def mark(self, t: torch.Tensor, branches: frozenset[int]) -> None:
        self.marks[id(t)] = self.marks.get(id(t), frozenset()) | branches

    # -- every ATen op of the pass -----------------------------------------------------------
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        ins = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        data_in = any(id(t) in self.data for t in ins)
        units = frozenset().union(*(self.derived[id(t)] for t in ins if id(t) in self.derived))
        held = list({id(t): t for t in ins if id(t) in self.pending}.values())
        mutating = _mutates(func)
        # an op that writes into its input: decide before it runs, and snapshot what it ends
        follow: torch.Tensor | None = None
        if mutating:
            follow = self._follow_or_settle(func, ins, held, units, None, args)
        marked = [t for t in ins if id(t) in self.marks]
        residual = (func in _ADDS and len(ins) == 2 and len(marked) == 1
                    and id(ins[1] if ins[0] is marked[0] else ins[0]) in self.data)
        # an in-place addition overwrites its operand: keep the branch's value first
        operand = marked[0].detach().clone() if residual else None
        out = func(*args, **kwargs)
        outs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        self.keep.extend(ins)
        self.keep.extend(outs)
        if data_in:
            self.data.update(id(t) for t in outs)
        if not mutating and held:
            follow = self._follow_or_settle(func, ins, held, units, outs, args)
        if follow is not None:
            self._follow(follow, func, args, kwargs, outs, mutating)
        elif units and data_in and outs and not self._selects(units, ins):
            self._use(units, func, args, kwargs, outs, mutating)
        elif units:
            self._derive(units, func, args, kwargs, ins, outs, mutating)
        if residual and operand is not None and outs:
            branch = marked[0]
            stream = ins[1] if ins[0] is branch else ins[0]
            if stream.shape == outs[0].shape:
                for k in sorted(self.marks[id(branch)]):
                    if k not in self.found:
                        self.found[k] = (operand, outs[0].detach().clone())
                        self.order.append(k)
                self.marks.pop(id(outs[0]), None)  # the sum is the stream, not the branch
                return out
        if marked:
            ks = frozenset().union(*(self.marks[id(t)] for t in marked))
            for t in outs:
                self.mark(t, ks)
        return out

    def _follow(self, t: torch.Tensor, func: Any, args: Any, kwargs: Any,
                outs: list[torch.Tensor], mutating: bool) -> None:
        moved = self.pending.pop(id(t))
        for o in moved:
            for variant, shadow in list(o.shadows.items()):
                def swap(v: Any, shadow: torch.Tensor = shadow) -> Any:
                    return shadow if v is t else v

                a, k = tree_map(swap, (args, kwargs))
                res = func(*a, **k)
                if not mutating:
                    o.shadows[variant] = _first(res)
            if not mutating:
                o.tensor = outs[0]
        self.pending[id(moved[0].tensor)] = moved

    def _use(self, units: frozenset[str], func: Any, args: Any, kwargs: Any,
             outs: list[torch.Tensor], mutating: bool) -> None:
        for u in sorted(units):
            k = self.uses[u]
            self.uses[u] += 1
            branches = self.layout.writers.get(u, ())
            if k < len(branches):
                for t in outs:
                    self.mark(t, frozenset({branches[k]}))
            if k >= self.layout.quota.get(u, 1):
                continue
            shadows = {}
            if self.shadowing and not mutating:
                shadows = {v: _first(self._shadow(v, func, args, kwargs, u)) for v in _VARIANTS}
            o = _Out(u, k, outs[0], shadows)
            self.outs.append(o)
            if mutating:
                self.snap(o)
            else:
                self.pending.setdefault(id(outs[0]), []).append(o)

    def _derive(self, units: frozenset[str], func: Any, args: Any, kwargs: Any,
                ins: list[torch.Tensor], outs: list[torch.Tensor], mutating: bool) -> None:
        for t in outs:
            self.derived[id(t)] = units
        if not self.shadowing or mutating:
            return
        for u in units:
            for variant in _VARIANTS:
                if not any((variant, id(t), u) in self.alt for t in ins):
                    continue
                res = [x for x in tree_leaves(self._shadow(variant, func, args, kwargs, u))
                       if isinstance(x, torch.Tensor)]
                for t, alt in zip(outs, res, strict=False):
                    self.alt[(variant, id(t), u)] = alt


@dataclass
class Pass:
    """What one recorded forward pass saw: the uses of the weights (pass order), each branch's
    (operand, stream after its addition), the branches in the order of their additions, and
    the model's output."""

    outs: list[_Out]
    found: dict[int, tuple[torch.Tensor, torch.Tensor]]
    order: list[int]
    out: torch.Tensor

    def by_use(self) -> dict[tuple[str, int], _Out]:
        return {(o.unit, o.use): o for o in self.outs}


def record_pass(model: nn.Module, x: Any, layout: Layout,
            initial: dict[int, torch.Tensor] | None) -> Pass:
    """One recorded forward pass on a copy of ``x`` without gradients (see the module
    docstring)."""
    x = copy_input(x)
    rec = _Recorder(layout, list(tensors_in(x)), initial)
    modules = dict(model.named_modules())

    def marker(k: int) -> Any:  # a branch without a weight: marked at its module's output
        def after(_m: nn.Module, _args: Any, output: Any) -> None:
            if isinstance(output, torch.Tensor):
                rec.keep.append(output)
                rec.mark(output, frozenset({k}))
        return after

    handles = [modules[m].register_forward_hook(marker(k))
               for m, k in layout.outputs.items() if m in modules]
    try:
        with torch.no_grad():
            with rec:
                out = logits_of(call_model(model, x))
            rec.finish()
            out = out.detach().clone()
    finally:
        for h in handles:
            h.remove()
    findable = {k for ks in layout.writers.values() for k in ks} | set(layout.outputs.values())
    missing = sorted(findable - set(rec.found))
    if missing:
        names = sorted({u for u, ks in layout.writers.items() if set(ks) & set(missing)})
        raise ConfigError(
            f"coord_check could not find the residual addition of branch(es) {missing} (written "
            f"by {', '.join(names) or 'no weight'}) in the forward pass; a use of the writer's "
            "weight must lead to an addition with a tensor computed from the input"
        )
    return Pass(rec.outs, rec.found, rec.order, out)


# ---- module-level recording (the own update of whole modules; probes.block_updates) ---------

@dataclass
class ModulePass:
    """Outputs (and inputs) of named modules' first calls, and the model's output."""

    outputs: dict[str, torch.Tensor] = field(default_factory=dict)
    inputs: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    out: torch.Tensor | None = None


def first_tensor(out: Any) -> torch.Tensor:
    """A module's output tensor (the first one of a tuple, dict or Hugging Face output)."""
    for t in tensors_in(out):
        return t
    raise ConfigError(f"the model returned no tensor ({type(out).__name__}); coord_check needs "
                      "its logits")


@contextmanager
def module_hooks(model: nn.Module, names: set[str], keep_inputs: set[str]
                  ) -> Iterator[ModulePass]:
    rec = ModulePass()
    modules = dict(model.named_modules())
    handles = []

    def hook(name: str) -> Any:
        def after(_m: nn.Module, args: Any, kwargs: Any, output: Any) -> None:
            if name not in rec.outputs:
                rec.outputs[name] = first_tensor(output).detach().clone()
                if name in keep_inputs:
                    rec.inputs[name] = tree_map(
                        lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v,
                        (args, kwargs))
        return after

    for name in names:
        handles.append(modules[name].register_forward_hook(hook(name), with_kwargs=True))
    try:
        yield rec
    finally:
        for h in handles:
            h.remove()


def module_forward(model: nn.Module, x: Any, types: dict[str, str], writers: dict[str, int],
             keep_inputs: set[str]) -> ModulePass:
    """The outputs of the modules named in ``types`` (their first call) and the inputs of those
    in ``keep_inputs``, by forward hooks on a pass over a copy of ``x``, for an own update of
    a whole module by ``functional_call``. ``writers`` must be empty (residual additions are
    found by :func:`measure_point`)."""
    if writers:
        raise ValueError("module_forward records modules only; measure_point finds the additions")
    with torch.no_grad(), module_hooks(model, set(types), keep_inputs) as rec:
        rec.out = logits_of(call_model(model, copy_input(x))).detach().clone()
    return rec

"""The data flow of one forward pass, as :func:`depthscale.param.inspect` reads it: a
``TorchFunctionMode`` (:class:`Recorder`) that sees every torch op with its tensors and records,
per tensor, what it was computed from (:class:`TensorInfo`), and per parameter each *use*: the
op that consumed it and how (:class:`Use`: matrix, lookup, added, gain, bias, shift,
score_bias, other), with the fan-in the op contracts; and the additions of two activations
(:class:`Addition`), the candidates for residual branches. :mod:`depthscale.param.inspect`
turns the record into roles.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from depthscale.param.contract import CONV_T as _CONV_T
from depthscale.param.contract import CONVS as _CONVS
from depthscale.param.contract import GROUPED as _GROUPED
from depthscale.param.contract import contracted as _contracted
from depthscale.param.contract import fan_in as _fan_in
from depthscale.param.contract import fan_out as _fan_out
from depthscale.param.ops import ADDITIONS, NORM_OPS, SPLITS
from depthscale.param.ops import CATS as _CATS
from depthscale.param.ops import DIVS as _DIVS
from depthscale.param.ops import GAINS as _GAINS
from depthscale.param.ops import LOOKUPS as _LOOKUPS
from depthscale.param.ops import MASKS as _MASKS
from depthscale.param.ops import MATMULS as _MATMULS
from depthscale.param.ops import MHA as _MHA
from depthscale.param.ops import PROBS as _PROBS
from depthscale.param.ops import SAME as _SAME
from depthscale.param.ops import SOFTMAX as _SOFTMAX
from depthscale.param.rows import Rows, part_rows, whole_blocks

__all__ = ["ADDITIONS", "NORM_OPS", "Addition", "AttentionCall", "Recorder", "TensorInfo", "Use",
           "attention_calls", "call_args", "copy_input", "module_stack", "tensors_in"]


@dataclass(frozen=True)
class AttentionCall:
    """One attention, measured from the forward: the innermost module that ran it (``""`` for
    the model itself), the head width ``d_head`` (what q . k contracts), the kernel's ``scale``
    argument (None: torch's default 1/sqrt(d_head); 1.0 for scores written by hand) and
    ``factors``, the constants multiplied into q, k or the scores outside the kernel (OPT's
    q * head_dim^-0.5, Bloom's ``baddbmm(..., alpha=1/sqrt(d))``). ``kind``: ``"sdpa"``,
    ``"mha"`` (``nn.MultiheadAttention``: ``fixed``, it takes no scale) or ``"scores"`` (q @ k^T
    then a softmax). ``attribute``: the float attribute of the module that holds one of the
    constants (OPT's ``scaling``), ``power`` how many times it enters; "" when none or
    several could."""

    module: str
    d_head: int
    scale: float | None
    fixed: bool = False
    factors: tuple[float, ...] = ()
    kind: str = "sdpa"
    attribute: str = ""
    value: float = 0.0  # the attribute's value: one of the constants
    power: int = 1
    qk: int = 0  # how many of ``factors``, first, were multiplied into q and k
    #: (weight, start, stop): the output features of the one matrix that computes q (a fused
    #: q, k, v projection's q part; a Linear's rows); None where not known
    query: tuple[str, int, int] | None = None

    @property
    def effective_scale(self) -> float:
        """The constant the attention logits q . k are multiplied by."""
        kernel = 1 / math.sqrt(self.d_head) if self.scale is None else self.scale
        return kernel * math.prod(self.factors)

    def text(self) -> str:
        """The scale for a person: its value and the constants it is the product of."""
        kernel = "1/sqrt(d_head)" if self.scale is None else f"{self.scale:.4g}"
        parts = ([] if self.kind == "scores" else [kernel]) + [f"{c:.4g}" for c in self.factors]
        where = f" = {' x '.join(parts)}" if len(parts) > 1 or self.scale is None else ""
        held = f"; {self.attribute} = {self.value:.4g}" if self.attribute else ""
        return f"{self.effective_scale:.4g}{where}{held}"


@dataclass(frozen=True)
class TensorInfo:
    """What the recorder knows of one tensor. ``data``: computed from the model's input;
    ``anc`` the ids of the data tensors it came from; ``uses``/``last`` the layer uses it passed
    through and the most recent ones; ``params`` (non-data tensors) the parameters it is a view
    or function of; ``scale`` the constant it equals times its last layer use's output (None:
    not a constant multiple); ``after_sum``/``normed``: computed from a residual sum without a
    layer use since, and normalised on the way (post-LN); ``factor`` the numbers it was
    multiplied by since its last layer use or normalisation, through ops that keep values and
    elementwise gains (T5's d_model^-0.5 before its readout); ``carriers`` the modules (inner
    first) whose output it equals up to such ops, where a multiplier can be placed."""

    data: bool = False
    anc: frozenset[int] = frozenset()
    uses: frozenset[int] = frozenset()
    last: frozenset[int] = frozenset()
    params: frozenset[str] = frozenset()
    scale: float | None = 1.0
    after_sum: bool = False
    normed: bool = False
    tail: frozenset[str] = frozenset()  # gains of normalisations since the last layer use
    #: attention scores q @ k^T (until their softmax): (d_head, the constants multiplied in)
    score: tuple[int, tuple[float, ...], int, Any] | None = None  # ... how many on q, k; q's rows
    factor: float = 1.0  # constants multiplied in since the last layer use or normalisation
    carriers: tuple[str, ...] = ()  # modules whose output this is, up to gains and constants
    #: computed only from a softmax or sigmoid of layer outputs (routing probabilities, their
    #: top-k and renormalisation): weights that select, not values written to the stream
    gate: bool = False
    #: a function of parameters only in which two of them were multiplied together (a
    #: factorised table): not a table read by indexing
    mixed: bool = False
    #: the tables added to it before any layer use (a position bias added to a mask): score
    #: biases where it is added to attention scores
    added: frozenset[int] = frozenset()
    rows: Rows = None  # the rows of its last layer's weight it comes from (:mod:`.rows`)


@dataclass(frozen=True)
class Use:
    """One use of a parameter by an op: the unit it counts as, the parameter, what kind of use
    (matrix, lookup, added, gain, bias, shift, score_bias: added to attention scores, other),
    its fan-in, and what its input had passed through."""

    index: int
    unit: str
    param: str
    kind: str
    fan_in: int
    input: TensorInfo
    op: str
    partner: str = ""  # bias/shift: the weight it belongs to
    module: str = ""  # the innermost module running when it was used
    fan_out: int = 0  # a matrix use: the size of the feature dim it writes (0: not known)
    out_axis: int = -1  # ... and that dim's index in the op's output (a conv's: 1)


@dataclass(frozen=True)
class Addition:
    """An addition of two data tensors: each operand's id and record before the op, and the
    sum."""

    a: int
    b: int
    ia: TensorInfo
    ib: TensorInfo
    out: torch.Tensor
    time: int = 0  # the number of uses recorded before it
    module: str = ""  # the innermost module running when it was made


def _op_name(func: Any) -> str:
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or str(func)
    module = getattr(func, "__module__", "") or ""
    prefix = "torch.nn.functional." if module.endswith("functional") else (
        "torch.Tensor." if "Tensor" not in name and module == "torch._tensor" else "torch.")
    return name if name.startswith(("Tensor.", "_TensorBase.")) else prefix + name


class Recorder(TorchFunctionMode):
    """Records data flow and parameter uses during one forward pass (module docstring)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.info: dict[int, TensorInfo] = {}
        self.keep: list[Any] = []  # keeps ids unique while the pass runs
        self.adds: list[Addition] = []
        self.uses: list[Use] = []
        self.stack: list[str] = []  # names of the modules whose forward is running
        self.attention: dict[str, AttentionCall] = {}
        self.param_name: dict[int, str] = {}
        self.params: dict[int, nn.Parameter] = {}
        self.by_name: dict[str, nn.Parameter] = {}
        for name, p in model.named_parameters():
            self.param_name.setdefault(id(p), name)
            self.params[id(p)] = p
            self.by_name[name] = p
        self.owners: dict[str, dict[int, str]] = {
            name: {id(p): n for n, p in m.named_parameters(recurse=False)}
            for name, m in model.named_modules()}
        self.use_out: dict[int, int] = {}  # use -> id of its op's output
        self.planned = {name for name, m in model.named_modules() if hasattr(m, "multiplier")}
        # modules whose output a plan's forward hook multiplies (param.usage: a tied readout's
        # or a weightless branch's multiplier): not the model's own constant
        self.hooked = {name for name, m in model.named_modules()
                       if {"_depthscale_readout", "_depthscale_branch"} & set(vars(m))}
        self.calls: Counter[str] = Counter()  # module -> forward calls in the pass
        self.routers: set[int] = set()  # uses whose output became a per-token gate
        self.stacked: set[str] = set()  # parameters of stacked experts, indexed per expert
        self.splits: dict[str, tuple[tuple[int, int], ...]] = {}  # x_proj: dt, B, C blocks

    def returned(self, name: str, output: Any) -> None:
        """Module ``name`` returned ``output``: a data tensor records it as a carrier."""
        if isinstance(output, torch.Tensor) and self.get(output).data:
            info = self.get(output)
            self.set(output, replace(info, carriers=(*info.carriers, name)))

    # ---- tensor records -------------------------------------------------------------------
    def get(self, t: torch.Tensor) -> TensorInfo:
        if id(t) in self.params:
            return TensorInfo(params=frozenset({self.param_name[id(t)]}))
        return self.info.get(id(t), TensorInfo())

    def set(self, t: torch.Tensor, info: TensorInfo) -> None:
        self.keep.append(t)
        self.info[id(t)] = info

    def mark_input(self, t: torch.Tensor) -> None:
        self.set(t, TensorInfo(data=True))

    def merge(self, tensors: list[torch.Tensor]) -> TensorInfo:
        """The record of a tensor computed from ``tensors`` by an op with no layer use. Index
        tensors (integer or bool data: routing indices, masks) select values without carrying
        any, so where values are selected their layers are not the result's last ones; the
        result is a gate when every value operand is one."""
        infos = [(t, self.get(t)) for t in tensors]
        data = [(t, i) for t, i in infos if i.data]
        if not data:
            return TensorInfo(params=frozenset().union(*(i.params for _, i in infos)),
                              mixed=any(i.mixed for _, i in infos))
        values = [(t, i) for t, i in data if t.is_floating_point() or t.is_complex()]
        value_ids = {id(t) for t, _ in values}
        anc: set[int] = set()
        uses: set[int] = set()
        last: set[int] = set()
        for t, i in data:
            anc |= i.anc | {id(t)}
            uses |= i.uses
            if not values or id(t) in value_ids:
                last |= i.last
        return TensorInfo(True, frozenset(anc), frozenset(uses), frozenset(last), frozenset(),
                     None, any(i.after_sum for _, i in data), any(i.normed for _, i in data),
                     frozenset().union(*(i.tail for _, i in data)),
                     factor=data[0][1].factor if len(data) == 1 else 1.0,
                     gate=all(i.gate for _, i in values or data),
                     added=frozenset() if uses else frozenset().union(
                         *(i.added for _, i in data)),
                     rows=rows.pop() if len(rows := {i.rows for _, i in values}) == 1 else None)

    # ---- uses -----------------------------------------------------------------------------
    def unit(self, p: nn.Parameter) -> tuple[str, str]:
        """(unit, parameter name) of ``p`` as used now: the innermost running module that holds
        it names it (a tied head is its own unit), else its first name."""
        for mod in reversed(self.stack):
            own = self.owners.get(mod, {}).get(id(p))
            if own is not None:
                return (mod if own == "weight" else f"{mod}.{own}" if mod else own,
                        self.param_name[id(p)])
        full = self.param_name[id(p)]
        mod, _, own = full.rpartition(".")
        return (mod if own == "weight" and mod else full), full

    def use(self, p_name: str, kind: str, fan_in: int, given: TensorInfo, op: str,
            partner: str = "", fan_out: tuple[int, int] = (0, -1)) -> Use:
        unit, full = self.unit(self.by_name[p_name])
        module = self.stack[-1] if self.stack else ""
        u = Use(len(self.uses), unit, full, kind, fan_in, given, op, partner, module, *fan_out)
        self.uses.append(u)
        return u

    # ---- the op hook ----------------------------------------------------------------------
    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        ins = list(tensors_in((args, kwargs)))
        if not ins:
            return out
        outs = list(tensors_in(out))
        infos = [self.get(t) for t in ins]
        data = [t for t, i in zip(ins, infos, strict=True) if i.data]
        if func is F.scaled_dot_product_attention:
            self._sdpa(args, kwargs)
        if not data:  # a function of parameters and constants (W.T, a slice of a table)
            merged = self.merge(ins)
            if (func in _MATMULS or func in _CONVS) and sum(bool(i.params) for i in infos) > 1:
                merged = replace(merged, mixed=True)
            if (func in _LOOKUPS and outs and id(ins[0]) in self.params and ins[0].ndim >= 3
                    and outs[0].ndim < ins[0].ndim):
                self.stacked.update(merged.params)  # one expert's matrix of a stack
            for t in outs:
                self.set(t, merged)
            return out
        held = [(t, i) for t, i in zip(ins, infos, strict=True) if not i.data and i.params]
        first = len(self.uses)
        parts: list[Rows] = []
        for t, scores in self._scores_plus(func, args, kwargs, data):
            self._looked_up_bias(t, scores)
        if func is _MHA:
            info = self._attention_op(args, kwargs, data)
        elif held:
            info = self._param_op(func, args, kwargs, data, held)
        else:
            info = self.merge(data)
            if (func in ADDITIONS and len(data) == 2 and len(ins) == 2 and outs
                    and all(self.get(d).score is None for d in data)):
                a, b = data
                self.keep.extend((a, b))
                self.adds.append(Addition(id(a), id(b), self.get(a), self.get(b), outs[0],
                                          len(self.uses), self.stack[-1] if self.stack else ""))
                ia, ib = self.get(a), self.get(b)
                scale = ia.scale if ia.scale == ib.scale else None
                info = replace(info, scale=scale, after_sum=True, normed=False,
                               tail=frozenset())
            elif func in _GAINS and len(data) == 1:
                info = self._scaled(func, info, args, data[0])
            elif func in _GAINS and len(data) == 2 and (gated := self._gated(data)):
                info = gated
            elif func in _SAME and len(data) == 1:
                x = self.get(data[0])
                info = replace(info, scale=x.scale, factor=x.factor, carriers=x.carriers)
                parts = part_rows(func, args, data[0], x.rows, outs)
                ws = {self.uses[i].param for i in x.last if self.uses[i].kind == "matrix"}
                if func in SPLITS and len(ws) == 1 and (cut := whole_blocks(parts, x.rows)):
                    self.splits.setdefault(ws.pop(), cut)  # a matrix's output in row blocks
            else:  # any other op: a constant does not pass it
                info = replace(info, factor=1.0)
            if func in _PROBS and len(data) == 1 and info.last:
                info = replace(info, gate=True)
        score = self._score(func, args, kwargs, data, held)
        if score is not None:
            info = replace(info, score=score)
        if func in _SOFTMAX and len(data) == 1 and self.get(data[0]).score is not None:
            d_head, factors, qk, query = self.get(data[0]).score  # type: ignore[misc]
            module = self.stack[-1] if self.stack else ""
            self.attention.setdefault(module, AttentionCall(
                module, d_head, 1.0, factors=factors, kind="scores", qk=qk, query=query))
        for j, t in enumerate(outs):
            self.set(t, replace(info, rows=parts[j]) if parts else info)
        for i in range(first, len(self.uses)):
            self.use_out[i] = id(outs[0]) if outs else -1
        return out

    def _gated(self, data: list[torch.Tensor]) -> TensorInfo | None:
        """``values * gate`` where the gate is one weight per token (a routing probability
        broadcast over the features: a mixture of experts' top-k weights, a sigmoid-gated
        shared expert): the product is the values' layers' output, and the layers that made
        the gate are recorded as routers (:attr:`routers`); None for any other product."""
        a, b = data
        for values, gate in ((a, b), (b, a)):
            ig = self.get(gate)
            if (ig.gate and not self.get(values).gate and gate.ndim >= 1 and values.ndim >= 1
                    and gate.shape[-1] == 1 and values.shape[-1] > 1):
                self.routers |= set(ig.last)
                merged = self.merge([values, gate])
                return replace(merged, last=self.get(values).last, gate=False)
        return None

    def _constant(self, func: Any, args: Any, x: torch.Tensor) -> float | None:
        """``c`` when the op computes ``x * c`` (``x / c``: ``1/c``) with a constant ``c`` (a
        number or a one-element tensor that carries neither data nor parameters)."""
        others = [a for a in args if a is not x]
        other = others[0] if len(others) == 1 else None
        constant = isinstance(other, torch.Tensor) and other.numel() == 1 and not (
            self.get(other).data or self.get(other).params)
        if not (isinstance(other, (int, float)) or constant) or float(other) == 0:  # type: ignore[arg-type]
            return None
        c = float(other)  # type: ignore[arg-type]
        if func in _DIVS:
            return 1 / c if args[0] is x else None
        return c

    def _scaled(self, func: Any, info: TensorInfo, args: Any, x: torch.Tensor) -> TensorInfo:
        """``x * c`` or ``x / c`` with a constant ``c`` keeps track of the constant."""
        scale = self.get(x).scale
        info = replace(info, carriers=self.get(x).carriers, rows=self.get(x).rows)
        if self.stack and self.stack[-1] in self.hooked:
            x_info = self.get(x)
            return replace(info, scale=x_info.scale, factor=x_info.factor)
        if self.stack and self.stack[-1] in self.planned and any(
                self.uses[i].module == self.stack[-1] for i in info.last):
            return info  # a depthscale layer's own multiplier (set by the plan): not the model's
        c = self._constant(func, args, x)
        factor = self.get(x).factor
        if c is not None:
            return replace(info, scale=None if scale is None else scale * c, factor=factor * c)
        return replace(info, scale=None, factor=factor)

    # ---- attention ------------------------------------------------------------------------
    def _factor(self, t: Any) -> float | None:
        """The constant ``t`` (q or k) was multiplied by since its projection (None: none
        known; a rotation such as RoPE or a normalisation leaves it unknown, read as 1)."""
        if not isinstance(t, torch.Tensor):
            return None
        info = self.get(t)
        return info.scale if info.data and info.last and info.scale not in (None, 1.0) else None

    def _sdpa(self, args: Any, kwargs: Any) -> None:
        """``F.scaled_dot_product_attention``: its ``scale`` argument and the constants q and k
        were multiplied by on the way from their projections (OPT's q * head_dim^-0.5)."""
        q = kwargs.get("query", args[0] if args else None)
        k = kwargs.get("key", args[1] if len(args) > 1 else None)
        if not isinstance(q, torch.Tensor):
            return
        scale = kwargs.get("scale", args[6] if len(args) > 6 else None)
        factors = tuple(c for c in (self._factor(q), self._factor(k)) if c is not None)
        module = self.stack[-1] if self.stack else ""
        self.attention.setdefault(module, AttentionCall(
            module, int(q.shape[-1]), None if scale is None else float(scale),
            factors=factors, qk=len(factors), query=self._query(q)))

    def _query(self, q: torch.Tensor) -> tuple[str, int, int] | None:
        """(weight, start, stop): the rows of the one matrix q comes from (None: not known)."""
        info = self.get(q)
        weights = {self.uses[i].param for i in info.last if self.uses[i].kind == "matrix"}
        return (weights.pop(), *info.rows) if info.rows and len(weights) == 1 else None

    def _score(self, func: Any, args: Any, kwargs: Any, data: list[torch.Tensor],
               held: list[tuple[torch.Tensor, TensorInfo]]
               ) -> tuple[int, tuple[float, ...], int, Any] | None:
        """The attention-score record of the op's output: a product of two activations that
        both come from layers (q @ k^T by ``matmul``, ``bmm``, ``baddbmm`` or ``einsum``)
        starts one (d_head the contracted size; the constants q and k carry and ``alpha``);
        a layout op, a constant factor or an added mask or bias keeps it; anything else ends
        it. A softmax of scores is an attention (:class:`AttentionCall`, kind "scores")."""
        infos = [self.get(t) for t in data]
        if func in _MATMULS and func is not F.linear and not held and len(data) == 2:
            if any(i.score is not None or not i.last for i in infos):
                return None
            alpha = kwargs.get("alpha", 1.0)
            qk = [c for c in (self._factor(data[0]), self._factor(data[1])) if c is not None]
            consts = qk + ([float(alpha)] if isinstance(alpha, (int, float)) and alpha != 1
                           else [])
            return _contracted(func, args, data), tuple(consts), len(qk), self._query(data[0])
        carriers = [(t, i.score) for t, i in zip(data, infos, strict=True) if i.score]
        if len(carriers) != 1:
            return None
        x, score = carriers[0]
        if func in _SAME and len(data) == 1:
            return score
        if func in _GAINS and len(data) == 1 and not held:
            c = self._constant(func, args, x)
            return None if c is None else (score[0], score[1] + (c,), *score[2:])
        if func in _MASKS and all(self.uses[j].kind == "score_bias" for t, i in
                                  zip(data, infos, strict=True) if t is not x for j in i.uses):
            return score
        return None

    def _layer(self, given: TensorInfo, new: list[Use], writers: list[Use]) -> TensorInfo:
        ids = frozenset(u.index for u in new)
        one = writers[0] if len(writers) == 1 else None
        return TensorInfo(True, given.anc, given.uses | ids,
                          frozenset(u.index for u in writers) or given.last, frozenset(), 1.0,
                          rows=(0, one.fan_out) if one and one.fan_out and one.out_axis == -1
                          else None)

    def _param_op(self, func: Any, args: Any, kwargs: Any, data: list[torch.Tensor],
                  held: list[tuple[torch.Tensor, TensorInfo]]) -> TensorInfo:
        """An op that combines activations with parameters: record the uses."""
        given = self.merge(data)
        op = _op_name(func)
        names = [(t, sorted(i.params)) for t, i in held]
        added = self._score_biases(func, args, kwargs, data, held)
        if added is not None:
            for t, ps in names:
                kind = "score_bias" if any(t is b for b in added) and not self.get(t).mixed \
                    else "other"
                for p in ps:
                    self.use(p, kind, 1, given, op)
            return replace(given, scale=self.get(data[0]).scale if len(data) == 1 else None,
                           factor=1.0)
        if func in _MATMULS or func in _CONVS or func in _CONV_T or func in _GROUPED:
            matrices: list[Use] = []
            biases: list[tuple[str, int]] = []
            for t, ps in names:
                for p in ps:
                    if self._ndim(p) >= 3 and t.ndim >= 3 and func in _GROUPED:
                        self.stacked.add(p)  # every expert's matrix in one call
                    if self._ndim(p) >= 2 and t.ndim >= 2:
                        matrices.append(self.use(p, "matrix", _fan_in(func, args, t), given, op,
                                                 fan_out=_fan_out(func, args, t)))
                    else:
                        biases.append((p, 1))
            for p, _ in biases:
                self.use(p, "bias", 1, given, op, matrices[0].param if matrices else "")
            if not matrices:
                return replace(given, factor=1.0)
            return self._layer(given, matrices, matrices)
        if func in _LOOKUPS and data and all(d.dtype in (torch.long, torch.int, torch.bool)
                                             or d.dtype == torch.int64 for d in data):
            stacked = sorted(p for _, ps in names for p in ps if self._ndim(p) >= 3)
            if stacked:  # experts' matrices stacked (E, out, in), selected by routing indices
                self.stacked.update(stacked)
                return TensorInfo(params=frozenset(stacked))
            uses = [self.use(p, "lookup", 1, given, op) for _, ps in names for p in ps]
            return self._layer(given, uses, uses)
        if func in ADDITIONS or func in _CATS:
            last = [self.uses[i] for i in sorted(given.last)]
            tables: set[int] = set()
            for t, ps in names:
                for p in ps:
                    kind = "bias" if t.ndim <= 1 or self._ndim(p) <= 1 else "added"
                    u = self.use(p, kind, 1, given, op, last[0].param if last and kind == "bias"
                                 else "")
                    if kind == "added" and not given.uses:
                        tables.add(u.index)
            return replace(given, scale=self.get(data[0]).scale if len(data) == 1 else None,
                           factor=1.0, added=given.added | tables)
        if func in _GAINS:
            for _, ps in names:
                for p in ps:
                    self.use(p, "gain", 1, given, op)
            x = self.get(data[0])
            return replace(given, scale=None, normed=given.after_sum, factor=x.factor,
                           carriers=x.carriers if len(data) == 1 else ())
        if func in NORM_OPS:
            gains: set[str] = set()
            weight = kwargs.get("weight", args[2] if len(args) > 2 else None)
            if func in (F.batch_norm, F.instance_norm):  # (x, mean, var, weight, ...)
                weight = kwargs.get("weight", args[3] if len(args) > 3 else None)
            for t, ps in sorted(names, key=lambda tp: tp[0] is not weight):  # the gain first
                for p in ps:
                    kind = "gain" if t is weight else "shift"
                    self.use(p, kind, 1, given, op, "" if kind == "gain" else next(
                        iter(sorted(gains)), ""))
                    if kind == "gain":
                        gains.add(p)
            return TensorInfo(True, given.anc, given.uses, given.last, frozenset(), None,
                         given.after_sum, given.after_sum, frozenset(gains) or frozenset({""}))
        for _, ps in names:
            for p in ps:
                self.use(p, "other", 1, given, op)
        return replace(given, factor=1.0)

    def _score_biases(self, func: Any, args: Any, kwargs: Any, data: list[torch.Tensor],
                      held: list[tuple[torch.Tensor, TensorInfo]]) -> list[torch.Tensor] | None:
        """The parameter tensors an op adds to attention scores: the ``attn_mask`` of
        ``F.scaled_dot_product_attention``, or what an addition adds to q @ k^T before its
        softmax (a relative position bias); None for an op that adds nothing to scores."""
        if func is F.scaled_dot_product_attention:
            mask = kwargs.get("attn_mask", args[3] if len(args) > 3 else None)
            return [t for t, _ in held if t is mask]
        if func in ADDITIONS and any(self.get(d).score is not None for d in data):
            return [t for t, _ in held]
        return None

    def _scores_plus(self, func: Any, args: Any, kwargs: Any, data: list[torch.Tensor]
                     ) -> list[tuple[torch.Tensor, TensorInfo]]:
        """(activation, the scores' record) for what an op adds to attention scores: a data
        ``attn_mask`` of ``F.scaled_dot_product_attention`` (the scores: q and k), or the
        other operand of an addition to scores."""
        if func is F.scaled_dot_product_attention:
            mask = kwargs.get("attn_mask", args[3] if len(args) > 3 else None)
            qk = [t for t in data[:2] if t is not mask]
            return [(t, self.merge(qk)) for t in data if t is mask]
        if func in ADDITIONS and len(data) == 2:
            return [(b, self.get(a)) for a, b in (data, data[::-1])
                    if self.get(a).score is not None and self.get(b).score is None]
        return []

    def _looked_up_bias(self, t: torch.Tensor, scores: TensorInfo) -> None:
        """``t`` is added to attention scores: where lookups alone made it (a table indexed by
        positions that come with the data), they are score biases of those scores, not input
        layers; so are the tables added to it before (a position bias added to a mask)."""
        made, added = self.get(t).uses, self.get(t).added
        if all(self.uses[i].kind in ("lookup", "score_bias") for i in made):
            for i in made | added:
                self.uses[i] = replace(self.uses[i], kind="score_bias", input=scores)

    def _ndim(self, p_name: str) -> int:
        return self.by_name[p_name].ndim

    def _attention_op(self, args: Any, kwargs: Any, data: list[torch.Tensor]) -> TensorInfo:
        """``F.multi_head_attention_forward``: the packed input projection reads the input, the
        output projection writes the result; torch fixes the scale at 1/sqrt(d_head)."""
        names = ["query", "key", "value", "embed_dim_to_check", "num_heads", "in_proj_weight",
                 "in_proj_bias", "bias_k", "bias_v", "add_zero_attn", "dropout_p",
                 "out_proj_weight", "out_proj_bias"]
        bound = dict(zip(names, args, strict=False)) | kwargs
        given = self.merge(data)
        op = "torch.nn.functional.multi_head_attention_forward"
        reads: list[Use] = []
        projections = [bound.get("in_proj_weight")] + [
            kwargs.get(k) for k in ("q_proj_weight", "k_proj_weight", "v_proj_weight")]
        for w in projections:
            if isinstance(w, torch.Tensor) and self.get(w).params:
                for p in sorted(self.get(w).params):
                    reads.append(self.use(p, "matrix", int(w.shape[-1]), given, op))
        for key in ("in_proj_bias", "bias_k", "bias_v"):
            b = bound.get(key)
            if isinstance(b, torch.Tensor) and self.get(b).params:
                for p in sorted(self.get(b).params):
                    self.use(p, "bias", 1, given, op, reads[0].param if reads else "")
        inner = self._layer(given, reads, reads)
        writes: list[Use] = []
        w = bound.get("out_proj_weight")
        if isinstance(w, torch.Tensor) and self.get(w).params:
            for p in sorted(self.get(w).params):
                writes.append(self.use(p, "matrix", int(w.shape[-1]), inner, op,
                                       fan_out=(int(w.shape[0]), -1)))
        b = bound.get("out_proj_bias")
        if isinstance(b, torch.Tensor) and self.get(b).params:
            for p in sorted(self.get(b).params):
                self.use(p, "bias", 1, inner, op, writes[0].param if writes else "")
        heads = int(bound.get("num_heads", 1))
        module = self.stack[-1] if self.stack else ""
        embed = int(data[0].shape[-1])
        self.attention.setdefault(module, AttentionCall(module, embed // max(heads, 1), None,
                                                        fixed=True, kind="mha"))
        return self._layer(inner, writes, writes)


def attention_calls(model: nn.Module, rec: Recorder) -> tuple[AttentionCall, ...]:
    """The recorded attention calls, each with the float attribute of its module that holds
    one of its constants (``attribute``; a number equal to two attributes names neither):
    where the model keeps its scale, which ``apply`` can set. A kernel ``scale`` passed as 1
    (or multiplied into hand-written scores) is such a constant only where the call has no
    other (T5's ``scaling = 1.0``, under SDPA or eager)."""
    found = []
    modules = dict(model.named_modules())
    for call in rec.attention.values():
        module = modules.get(call.module)
        consts = [c for c in (*call.factors, *(() if call.scale is None else (call.scale,)))
                  if c != 1.0]
        if not consts and ((call.kind == "sdpa" and call.scale == 1.0) or call.factors):
            consts = [1.0]  # only ones, passed or multiplied in (T5's ``scaling = 1.0``)
        if call.fixed or module is None or not consts:
            found.append(call)
            continue
        names = [n for n, v in vars(module).items() if type(v) is float
                 and any(math.isclose(v, c, rel_tol=1e-6) for c in consts)]
        if len(names) != 1:
            found.append(call)
            continue
        value = float(vars(module)[names[0]])
        power = sum(math.isclose(value, c, rel_tol=1e-6) for c in consts)
        found.append(replace(call, attribute=names[0], value=value, power=power))
    return tuple(found)


def tensors_in(obj: Any) -> Iterator[torch.Tensor]:
    """Every tensor in ``obj``: nested tuples, lists and dicts, and a Hugging Face output."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from tensors_in(x)
    elif isinstance(obj, Mapping):
        for x in obj.values():
            yield from tensors_in(x)
    elif callable(getattr(obj, "to_tuple", None)):  # a Hugging Face ModelOutput
        yield from tensors_in(obj.to_tuple())


def copy_input(x: Any) -> Any:
    """``x`` with every tensor cloned (nested tuples, lists and dicts; other values kept), so
    a forward that writes into its input leaves the caller's tensors unchanged."""
    if isinstance(x, torch.Tensor):
        return x.detach().clone().requires_grad_(x.requires_grad)
    if isinstance(x, Mapping):
        return {k: copy_input(v) for k, v in x.items()}
    if isinstance(x, tuple) and hasattr(x, "_fields"):  # a named tuple
        return type(x)(*(copy_input(v) for v in x))
    if isinstance(x, (tuple, list)):
        return type(x)(copy_input(v) for v in x)
    return x


def call_args(example_input: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(args, kwargs)`` a model is called with: a tensor, a tuple of positional arguments or
    a dict of keyword arguments."""
    if isinstance(example_input, Mapping):
        return (), dict(example_input)
    if isinstance(example_input, tuple):
        return example_input, {}
    return (example_input,), {}


@contextmanager
def module_stack(model: nn.Module, rec: Recorder) -> Iterator[None]:
    """Pre/post hooks that keep ``rec.stack``, the modules whose forward is running."""
    handles = []

    def push(name: str) -> Any:
        def before(_m: nn.Module, _args: Any) -> None:
            rec.stack.append(name)
        return before

    def pop(name: str) -> Any:
        def after(_m: nn.Module, _args: Any, output: Any) -> None:
            if rec.stack:
                rec.stack.pop()
            rec.calls[name] += 1
            rec.returned(name, output)
        return after

    for name, module in model.named_modules():
        handles.append(module.register_forward_pre_hook(push(name)))
        handles.append(module.register_forward_hook(pop(name), always_call=True))
    try:
        yield
    finally:
        for h in handles:
            h.remove()

"""Structure inference: the roles, residual branches, width and effective depth of any
``nn.Module``, read from how one real forward pass *uses* each parameter.

:func:`inspect` runs the model once on an example input under a ``TorchFunctionMode`` that sees
every torch op with its tensors. A parameter is classified by the op that consumes it, not by
the type of module that holds it:

* a **matrix use**: the parameter (or a view of it: ``W.T``, a slice) multiplies activations in
  ``F.linear``, ``matmul``/``@``, ``mm``, ``bmm``, ``addmm``, ``einsum``, a convolution or
  ``F.multi_head_attention_forward`` (its packed ``in_proj_weight`` reads the input, its
  ``out_proj`` writes the output). Its fan-in is what the op contracts;
* a **lookup**: rows selected by the data (``F.embedding``, indexing): an input layer with
  fan-in 1 (nfd Eq. 1: h0 = U x with x one-hot);
* **added** to activations: a learned positional embedding, class token or token-type table
  indexed by a constant (role ``token``), or a bias;
* a **gain**: multiplied elementwise (a norm's gain, Gemma's ``1 + w``, a layer-scale gamma:
  role ``norm``, whose values the plan keeps) or a normalisation op's weight/shift;
* anything else is not guessed: the parameter is *unclassified*, with the op named.

Each use is a node of the data flow; a tensor records the uses it passed through. A **residual
branch** is an addition ``s + f(s)`` whose one operand ``s`` (the stream) is an ancestor of the
other, or whose operands share an ancestor (a projection shortcut): the uses the branch operand
passed through since the stream are the branch. A block applied L times (shared weights) makes
L uses of each weight and L branches. Roles follow from position (laws Sec. 3.4, nfd Eq. 1 and
6): a use in a branch that reads the stream is ``branch_in``, one that writes into the addition
``branch_out`` (``branch`` when it does both), the use that first makes the stream is ``input``,
the use that writes the output is ``output``; a matrix used both as input lookup and as readout
is a **tied** embedding (its readout is listed in ``readouts``). Names in branches are *units*:
the module name when the parameter is the module's ``weight``, else the full parameter name.

The **effective depth** is the laws paper's L = m + K (Sec. 3.4-3.5): m layer uses on the main
path (input, plain hidden layers, output) plus K residual branches. Calls of
``F.scaled_dot_product_attention`` and ``nn.MultiheadAttention`` are recorded with the head
width and scale, so a plan can check the attention scale (muP: 1/d_head, TP-V Sec. 8).
"""

from __future__ import annotations

import math
import operator
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from depthscale.errors import ConfigError

__all__ = ["AttentionCall", "Branch", "Structure", "inspect"]

#: the torch functions and operators that add two tensors (a residual addition's candidates)
ADDITIONS = {torch.add, torch.Tensor.add, torch.Tensor.add_, torch.Tensor.__add__,
             torch.Tensor.__iadd__, torch.Tensor.__radd__, operator.add, operator.iadd}
_MATMULS = {F.linear, torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__,
            torch.Tensor.__rmatmul__, torch.mm, torch.Tensor.mm, torch.bmm, torch.Tensor.bmm,
            torch.addmm, torch.Tensor.addmm, torch.baddbmm, torch.Tensor.baddbmm, torch.einsum}
_CONVS = {F.conv1d, F.conv2d, F.conv3d}
_CONV_T = {F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d}
_LOOKUPS = {F.embedding, torch.Tensor.__getitem__, torch.index_select,
            torch.Tensor.index_select, torch.take, torch.Tensor.take}
_NORMS = {F.layer_norm, F.group_norm, F.batch_norm, F.instance_norm, torch.layer_norm,
          *((F.rms_norm,) if hasattr(F, "rms_norm") else ())}
_GAINS = {torch.mul, torch.Tensor.mul, torch.Tensor.mul_, torch.Tensor.__mul__,
          torch.Tensor.__rmul__, torch.Tensor.__imul__, operator.mul, torch.div,
          torch.Tensor.div, torch.Tensor.__truediv__, torch.Tensor.div_}
_CATS = {torch.cat, torch.concat, torch.stack}
#: ops that keep a tensor's values (up to layout), so a constant scale passes through them
_SAME = {torch.Tensor.view, torch.Tensor.reshape, torch.reshape, torch.Tensor.transpose,
         torch.transpose, torch.Tensor.permute, torch.permute, torch.Tensor.contiguous,
         torch.Tensor.to, torch.Tensor.float, torch.Tensor.type_as, F.dropout,
         torch.Tensor.flatten, torch.flatten, torch.Tensor.unsqueeze, torch.Tensor.squeeze,
         torch.Tensor.expand, torch.Tensor.clone, torch.Tensor.__getitem__}
_MHA = F.multi_head_attention_forward


@dataclass(frozen=True)
class Branch:
    """One residual branch: the units it passes through (in call order), those that read the
    stream and those that write into the residual addition; ``shortcut`` the units of a
    projection shortcut (empty for the identity); ``width`` the stream width at the addition.
    A unit is a module name (for its ``weight``) or a full parameter name (module docstring)."""

    index: int
    modules: tuple[str, ...]
    readers: tuple[str, ...]
    writers: tuple[str, ...]
    shortcut: tuple[str, ...]
    width: int


@dataclass(frozen=True)
class AttentionCall:
    """One attention call: the innermost module that made it (``""`` for the model itself), the
    head width ``d_head`` and the ``scale`` used (None: torch's default 1/sqrt(d_head));
    ``fixed`` when the module hard-codes it (``nn.MultiheadAttention`` has no scale argument)."""

    module: str
    d_head: int
    scale: float | None
    fixed: bool = False

    @property
    def effective_scale(self) -> float:
        """The softmax scale the call used."""
        return 1 / math.sqrt(self.d_head) if self.scale is None else self.scale


@dataclass(frozen=True)
class Structure:
    """What :func:`inspect` found. ``roles`` maps every parameter name (as
    ``model.named_parameters()`` gives it) to a role of :data:`depthscale.param.ROLES`;
    ``reasons`` says why, per parameter; ``unclassified`` names parameters it could not place
    with the reason; ``tied`` lists names that share a parameter with another (the parameter's
    role is that of its first name); ``readouts`` maps the module that reads the output out
    with a tied input table to that table's parameter name; ``blocks`` groups branches by their
    common unit prefix; ``attention`` the attention calls, one per calling module.

    ``fan_in`` is each weight's fan-in as its first matrix use contracts it (1 for a lookup);
    ``uses`` the number of matrix uses of a weight applied more than once (a shared block);
    ``input_scale`` a constant the model multiplies its embedding by before the first block
    (Gemma's sqrt(n); 1 when none); ``post_ln`` whether a normalisation sits on the residual
    stream after an addition (post-LN, as BERT or ``norm_first=False``); ``gains`` the
    parameters used as elementwise gains (norm gains, layer-scale gammas: the plan keeps their
    values); ``branch_gains`` the gains of normalisations that end a branch (after its last
    layer, as a ResNet's bn2: role ``branch_gain``, which carries the branch multiplier the
    norm divides out) and ``unscaled`` the branches that end in a normalisation without a gain
    (no parameter can carry their multiplier)."""

    roles: dict[str, str]
    reasons: dict[str, str]
    branches: tuple[Branch, ...]
    blocks: dict[str, tuple[int, ...]]
    width: int
    depth: int
    plain_layers: int
    effective_depth: int
    unclassified: dict[str, str] = field(default_factory=dict)
    tied: dict[str, str] = field(default_factory=dict)
    attention: tuple[AttentionCall, ...] = ()
    fan_in: dict[str, int] = field(default_factory=dict)
    uses: dict[str, int] = field(default_factory=dict)
    readouts: dict[str, str] = field(default_factory=dict)
    input_scale: float = 1.0
    post_ln: bool = False
    gains: tuple[str, ...] = ()
    branch_gains: dict[str, int] = field(default_factory=dict)
    unscaled: tuple[int, ...] = ()

    def summary(self) -> str:
        """A few lines for a person: sizes, blocks and every role with its count."""
        counts = Counter(self.roles.values())
        lines = [
            f"width {self.width}, {self.depth} residual branches in {len(self.blocks)} blocks, "
            f"effective depth {self.effective_depth} = {self.plain_layers} plain layers + "
            f"{self.depth} branches (laws Sec. 3.4)",
            "roles: " + ", ".join(f"{r} {n}" for r, n in sorted(counts.items())),
        ]
        if self.tied or self.readouts:
            lines.append("tied: " + ", ".join(
                [f"{a} = {b}" for a, b in self.tied.items()]
                + [f"{m} reads out with {p}" for m, p in self.readouts.items()]))
        if self.uses:
            lines.append("shared: " + ", ".join(f"{p} used {k} times"
                                                for p, k in self.uses.items()))
        if self.input_scale != 1.0:
            lines.append(f"input scale: the embedding is multiplied by {self.input_scale:.4g} "
                         "before the first block")
        if self.post_ln:
            lines.append("post-LN: a normalisation sits on the residual stream after an addition")
        if self.attention:
            lines.append("attention: " + ", ".join(
                f"{a.module or '(model)'} (d_head {a.d_head}, scale "
                f"{'default 1/sqrt(d_head)' if a.scale is None else f'{a.scale:.4g}'}"
                f"{', fixed by the module' if a.fixed else ''})"
                for a in self.attention))
        if self.unclassified:
            lines.append("not classified: " + "; ".join(f"{k} ({v})"
                                                         for k, v in self.unclassified.items()))
        return "\n".join(lines)


@dataclass(frozen=True)
class _Info:
    """What the recorder knows of one tensor. ``data``: computed from the model's input;
    ``anc`` the ids of the data tensors it came from; ``uses``/``last`` the layer uses it passed
    through and the most recent ones; ``params`` (non-data tensors) the parameters it is a view
    or function of; ``scale`` the constant it equals times its last layer use's output (None:
    not a constant multiple); ``after_sum``/``normed``: computed from a residual sum without a
    layer use since, and normalised on the way (post-LN)."""

    data: bool = False
    anc: frozenset[int] = frozenset()
    uses: frozenset[int] = frozenset()
    last: frozenset[int] = frozenset()
    params: frozenset[str] = frozenset()
    scale: float | None = 1.0
    after_sum: bool = False
    normed: bool = False
    tail: frozenset[str] = frozenset()  # gains of normalisations since the last layer use


@dataclass(frozen=True)
class _Use:
    """One use of a parameter by an op: the unit it counts as, the parameter, what kind of use
    (matrix, lookup, added, gain, bias, shift, other), its fan-in, and what its input had passed
    through."""

    index: int
    unit: str
    param: str
    kind: str
    fan_in: int
    input: _Info
    op: str
    partner: str = ""  # bias/shift: the weight it belongs to
    module: str = ""  # the innermost module running when it was used


@dataclass(frozen=True)
class _Add:
    """An addition of two data tensors: each operand's id and record before the op, and the
    sum."""

    a: int
    b: int
    ia: _Info
    ib: _Info
    out: torch.Tensor
    time: int = 0  # the number of uses recorded before it


def _op_name(func: Any) -> str:
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or str(func)
    module = getattr(func, "__module__", "") or ""
    prefix = "torch.nn.functional." if module.endswith("functional") else (
        "torch.Tensor." if "Tensor" not in name and module == "torch._tensor" else "torch.")
    return name if name.startswith(("Tensor.", "_TensorBase.")) else prefix + name


class _Recorder(TorchFunctionMode):
    """Records data flow and parameter uses during one forward pass (module docstring)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.info: dict[int, _Info] = {}
        self.keep: list[Any] = []  # keeps ids unique while the pass runs
        self.adds: list[_Add] = []
        self.uses: list[_Use] = []
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
        self.sums: set[int] = set()
        self.use_out: dict[int, int] = {}  # use -> id of its op's output
        self.planned = {name for name, m in model.named_modules() if hasattr(m, "multiplier")}

    # ---- tensor records -------------------------------------------------------------------
    def get(self, t: torch.Tensor) -> _Info:
        if id(t) in self.params:
            return _Info(params=frozenset({self.param_name[id(t)]}))
        return self.info.get(id(t), _Info())

    def set(self, t: torch.Tensor, info: _Info) -> None:
        self.keep.append(t)
        self.info[id(t)] = info

    def mark_input(self, t: torch.Tensor) -> None:
        self.set(t, _Info(data=True))

    def merge(self, tensors: list[torch.Tensor]) -> _Info:
        """The record of a tensor computed from ``tensors`` by an op with no layer use."""
        infos = [(t, self.get(t)) for t in tensors]
        data = [(t, i) for t, i in infos if i.data]
        if not data:
            return _Info(params=frozenset().union(*(i.params for _, i in infos)))
        anc: set[int] = set()
        uses: set[int] = set()
        last: set[int] = set()
        for t, i in data:
            anc |= i.anc | {id(t)}
            uses |= i.uses
            last |= i.last
        return _Info(True, frozenset(anc), frozenset(uses), frozenset(last), frozenset(),
                     None, any(i.after_sum for _, i in data), any(i.normed for _, i in data),
                     frozenset().union(*(i.tail for _, i in data)))

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

    def use(self, p_name: str, kind: str, fan_in: int, given: _Info, op: str,
            partner: str = "") -> _Use:
        unit, full = self.unit(self.by_name[p_name])
        module = self.stack[-1] if self.stack else ""
        u = _Use(len(self.uses), unit, full, kind, fan_in, given, op, partner, module)
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
            scale = kwargs.get("scale", args[6] if len(args) > 6 else None)
            module = self.stack[-1] if self.stack else ""
            self.attention.setdefault(module, AttentionCall(
                module, int(ins[0].shape[-1]), None if scale is None else float(scale)))
        if not data:  # a function of parameters and constants (W.T, a slice of a table)
            merged = self.merge(ins)
            for t in outs:
                self.set(t, merged)
            return out
        held = [(t, i) for t, i in zip(ins, infos, strict=True) if not i.data and i.params]
        first = len(self.uses)
        if func is _MHA:
            info = self._attention_op(args, kwargs, data)
        elif held:
            info = self._param_op(func, args, kwargs, data, held)
        else:
            info = self.merge(data)
            if func in ADDITIONS and len(data) == 2 and len(ins) == 2 and outs:
                a, b = data
                self.keep.extend((a, b))
                self.adds.append(_Add(id(a), id(b), self.get(a), self.get(b), outs[0],
                                      len(self.uses)))
                self.sums.add(id(outs[0]))
                ia, ib = self.get(a), self.get(b)
                scale = ia.scale if ia.scale == ib.scale else None
                info = replace(info, scale=scale, after_sum=True, normed=False,
                               tail=frozenset())
            elif func in _GAINS and len(data) == 1:
                info = self._scaled(info, args, data[0])
            elif func in _SAME and len(data) == 1:
                info = replace(info, scale=self.get(data[0]).scale)
        for t in outs:
            self.set(t, info)
        for i in range(first, len(self.uses)):
            self.use_out[i] = id(outs[0]) if outs else -1
        return out

    def _scaled(self, info: _Info, args: Any, x: torch.Tensor) -> _Info:
        """``x * c`` or ``x / c`` with a constant ``c`` (a number or a one-element tensor that
        carries neither data nor parameters) keeps track of the constant."""
        others = [a for a in args if a is not x]
        scale = self.get(x).scale
        if self.stack and self.stack[-1] in self.planned and any(
                self.uses[i].module == self.stack[-1] for i in info.last):
            return info  # a depthscale layer's own multiplier (set by the plan): not the model's
        c: float | None = None
        other = others[0] if len(others) == 1 else None
        constant = isinstance(other, torch.Tensor) and other.numel() == 1 and not (
            self.get(other).data or self.get(other).params)
        if isinstance(other, (int, float)) or constant:
            c = float(other)  # type: ignore[arg-type]
        if c is not None and scale is not None and c != 0 and args[0] is x:
            return replace(info, scale=scale * c)
        return replace(info, scale=None)

    def _layer(self, given: _Info, new: list[_Use], writers: list[_Use]) -> _Info:
        ids = frozenset(u.index for u in new)
        return _Info(True, given.anc, given.uses | ids,
                     frozenset(u.index for u in writers) or given.last, frozenset(), 1.0)

    def _param_op(self, func: Any, args: Any, kwargs: Any, data: list[torch.Tensor],
                  held: list[tuple[torch.Tensor, _Info]]) -> _Info:
        """An op that combines activations with parameters: record the uses."""
        given = self.merge(data)
        op = _op_name(func)
        names = [(t, sorted(i.params)) for t, i in held]
        if func in _MATMULS or func in _CONVS or func in _CONV_T:
            matrices: list[_Use] = []
            biases: list[tuple[str, int]] = []
            for t, ps in names:
                for p in ps:
                    if self._ndim(p) >= 2 and t.ndim >= 2:
                        matrices.append(self.use(p, "matrix", _fan_in(func, args, t), given, op))
                    else:
                        biases.append((p, 1))
            for p, _ in biases:
                self.use(p, "bias", 1, given, op, matrices[0].param if matrices else "")
            if not matrices:
                return given
            return self._layer(given, matrices, matrices)
        if func in _LOOKUPS and data and all(d.dtype in (torch.long, torch.int, torch.bool)
                                             or d.dtype == torch.int64 for d in data):
            uses = [self.use(p, "lookup", 1, given, op) for _, ps in names for p in ps]
            return self._layer(given, uses, uses)
        if func in ADDITIONS or func in _CATS:
            last = [self.uses[i] for i in sorted(given.last)]
            for t, ps in names:
                for p in ps:
                    kind = "bias" if t.ndim <= 1 or self._ndim(p) <= 1 else "added"
                    self.use(p, kind, 1, given, op, last[0].param if last and kind == "bias"
                             else "")
            return replace(given, scale=self.get(data[0]).scale if len(data) == 1 else None)
        if func in _GAINS:
            for _, ps in names:
                for p in ps:
                    self.use(p, "gain", 1, given, op)
            return replace(given, scale=None, normed=given.after_sum)
        if func in _NORMS:
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
            return _Info(True, given.anc, given.uses, given.last, frozenset(), None,
                         given.after_sum, given.after_sum, frozenset(gains) or frozenset({""}))
        for _, ps in names:
            for p in ps:
                self.use(p, "other", 1, given, op)
        return given

    def _ndim(self, p_name: str) -> int:
        return self.by_name[p_name].ndim

    def _attention_op(self, args: Any, kwargs: Any, data: list[torch.Tensor]) -> _Info:
        """``F.multi_head_attention_forward``: the packed input projection reads the input, the
        output projection writes the result; torch fixes the scale at 1/sqrt(d_head)."""
        names = ["query", "key", "value", "embed_dim_to_check", "num_heads", "in_proj_weight",
                 "in_proj_bias", "bias_k", "bias_v", "add_zero_attn", "dropout_p",
                 "out_proj_weight", "out_proj_bias"]
        bound = dict(zip(names, args, strict=False)) | kwargs
        given = self.merge(data)
        op = "torch.nn.functional.multi_head_attention_forward"
        reads: list[_Use] = []
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
        writes: list[_Use] = []
        w = bound.get("out_proj_weight")
        if isinstance(w, torch.Tensor) and self.get(w).params:
            for p in sorted(self.get(w).params):
                writes.append(self.use(p, "matrix", int(w.shape[-1]), inner, op))
        b = bound.get("out_proj_bias")
        if isinstance(b, torch.Tensor) and self.get(b).params:
            for p in sorted(self.get(b).params):
                self.use(p, "bias", 1, inner, op, writes[0].param if writes else "")
        heads = int(bound.get("num_heads", 1))
        module = self.stack[-1] if self.stack else ""
        embed = int(data[0].shape[-1])
        self.attention.setdefault(module, AttentionCall(module, embed // max(heads, 1), None,
                                                        fixed=True))
        return self._layer(inner, writes, writes)


def _fan_in(func: Any, args: Any, w: torch.Tensor) -> int:
    """The number of inputs a matrix use of ``w`` contracts, per op."""
    if func in _CONVS:
        return int(math.prod(w.shape[1:]))
    if func in _CONV_T:
        stride = args[3] if len(args) > 3 else 1
        strides = stride if isinstance(stride, (tuple, list)) else (stride,) * (w.ndim - 2)
        return max(1, int(w.shape[0] * math.prod(w.shape[2:]) // math.prod(strides)))
    if func is F.linear:
        return int(w.shape[-1])
    if func is torch.einsum:
        return _einsum_fan_in(args, w)
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if func in (torch.addmm, torch.Tensor.addmm, torch.baddbmm, torch.Tensor.baddbmm):
        tensors = tensors[1:3]
    if len(tensors) >= 2 and tensors[-1] is w:  # x @ W: W's rows are the inputs
        return int(w.shape[-2]) if w.ndim >= 2 else int(w.shape[0])
    return int(w.shape[-1])  # W @ x


def _einsum_fan_in(args: Any, w: torch.Tensor) -> int:
    """The product of ``w``'s dimensions that the einsum sums over."""
    equation, *operands = args
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = list(operands[0])
    lhs, _, rhs = str(equation).replace(" ", "").partition("->")
    terms = lhs.split(",")
    idx = next(i for i, t in enumerate(operands) if t is w)
    if not rhs:
        counts = Counter(lhs.replace(",", ""))
        rhs = "".join(sorted(c for c, k in counts.items() if k == 1 and c.isalpha()))
    size = 1
    for letter, dim in zip(terms[idx], w.shape, strict=False):
        if letter.isalpha() and letter not in rhs:
            size *= int(dim)
    return size


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


def call_args(example_input: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(args, kwargs)`` a model is called with: a tensor, a tuple of positional arguments or
    a dict of keyword arguments."""
    if isinstance(example_input, Mapping):
        return (), dict(example_input)
    if isinstance(example_input, tuple):
        return example_input, {}
    return (example_input,), {}


@contextmanager
def _stack(model: nn.Module, rec: _Recorder) -> Iterator[None]:
    """Pre/post hooks that keep ``rec.stack``, the modules whose forward is running."""
    handles = []

    def push(name: str) -> Any:
        def before(_m: nn.Module, _args: Any) -> None:
            rec.stack.append(name)
        return before

    def pop(_m: nn.Module, _args: Any, _output: Any) -> None:
        if rec.stack:
            rec.stack.pop()

    for name, module in model.named_modules():
        handles.append(module.register_forward_pre_hook(push(name)))
        handles.append(module.register_forward_hook(pop, always_call=True))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def inspect(model: nn.Module, example_input: Any) -> Structure:
    """The structure of ``model`` (see the module docstring), from one forward pass on
    ``example_input`` (a tensor, a tuple of positional arguments, or a dict of keyword
    arguments). Parameters are not changed (no gradients); every module's train/eval mode is
    restored. A forward pass that fails is a ConfigError naming the error.
    """
    args, kwargs = call_args(example_input)
    rec = _Recorder(model)
    for t in tensors_in((args, kwargs)):
        rec.mark_input(t)
    modes = {m: m.training for m in model.modules()}
    model.eval()
    try:
        with torch.no_grad(), _stack(model, rec), rec:
            output = model(*args, **kwargs)
    except Exception as exc:
        message = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        raise ConfigError(f"inspect: the model's forward pass on the example input failed "
                          f"({message}); pass an input the model accepts") from None
    finally:
        for m, training in modes.items():
            m.training = training
    logits = next((t for t in tensors_in(output) if rec.get(t).data), None)
    return _analyse(model, rec, _Info() if logits is None else rec.get(logits))


def _residual(add: _Add, layer_uses: set[int]
              ) -> tuple[_Info, _Info, frozenset[int], int] | None:
    """``(stream, branch operand, shortcut uses, stream id)`` if ``add`` is a residual
    addition."""
    ia, ib = add.ia, add.ib
    if add.a in ib.anc and ib.uses - ia.uses:
        stream, branch, shortcut, sid = ia, ib, frozenset[int](), add.a
    elif add.b in ia.anc and ia.uses - ib.uses:
        stream, branch, shortcut, sid = ib, ia, frozenset[int](), add.b
    elif ia.anc & ib.anc and ia.uses - ib.uses and ib.uses - ia.uses:
        new_a, new_b = ia.uses - ib.uses, ib.uses - ia.uses  # projection shortcut: fewer new
        stream, branch, shortcut, sid = ((ia, ib, new_a, add.a) if len(new_a) <= len(new_b)
                                         else (ib, ia, new_b, add.b))
    else:
        return None
    if not (branch.uses - stream.uses - shortcut) & layer_uses:
        return None
    return stream, branch, shortcut, sid


def block_key(members: tuple[str, ...]) -> str:
    """The block a branch belongs to: its unit path up to the first numeric component
    (``h.0``, ``layers.3``, ``layer1.0``), else the members' common prefix."""
    parts = members[0].split(".")
    for i, part in enumerate(parts):
        if part.isdigit():
            return ".".join(parts[: i + 1])
    common = [p for p in zip(*(m.split(".") for m in members), strict=False)
              if len(set(p)) == 1]
    return ".".join(p[0] for p in common) or members[0]


_WEIGHT_KINDS = ("matrix", "lookup")


def _analyse(model: nn.Module, rec: _Recorder, out: _Info) -> Structure:
    uses = rec.uses
    layer_uses = {u.index for u in uses if u.kind in _WEIGHT_KINDS}
    branches: list[Branch] = []
    branch_of: dict[int, int] = {}  # use -> branch
    reads: set[int] = set()
    writes: set[int] = set()
    shortcut_uses: set[int] = set()
    first_stream: _Info | None = None
    post_ln = False
    input_scale = 1.0
    branch_gains: dict[str, int] = {}  # gain of a normalisation ending a branch -> branch
    in_branch: set[int] = set()  # bias, gain and shift uses inside a branch
    unscaled: list[int] = []  # branches ending in a normalisation without a gain
    for add in rec.adds:
        found = _residual(add, layer_uses)
        if found is None:
            continue
        stream, branch, shortcut, sid = found
        if first_stream is None:
            first_stream = stream
            if stream.scale is not None and not math.isclose(stream.scale, 1.0):
                input_scale = stream.scale
        post_ln = post_ln or stream.normed
        for g in sorted(branch.tail):
            if g:
                branch_gains.setdefault(g, len(branches))
            else:
                unscaled.append(len(branches))
        inside = sorted((branch.uses - stream.uses - shortcut) & layer_uses)
        writer_ids = [i for i in inside if i in branch.last]
        reader_ids = [i for i in inside if not uses[i].input.last & set(inside)]
        units = tuple(dict.fromkeys(uses[i].unit for i in inside))
        width = int(add.out.shape[1] if add.out.ndim == 4 or (
            add.out.ndim == 3 and any(uses[i].op.endswith("conv1d") for i in writer_ids))
            else add.out.shape[-1])
        k = len(branches)
        branches.append(Branch(k, units, tuple(dict.fromkeys(uses[i].unit for i in reader_ids)),
                               tuple(dict.fromkeys(uses[i].unit for i in writer_ids)),
                               tuple(dict.fromkeys(uses[i].unit for i in sorted(shortcut))),
                               width))
        for i in inside:
            branch_of.setdefault(i, k)
        # the biases and norms inside the branch: used before the addition on what was
        # computed from the stream (not on the shortcut), and not making the stream itself
        # (a post-LN norm)
        lo = max(stream.uses, default=-1)
        for u in uses[lo + 1: add.time]:
            if (u.kind not in _WEIGHT_KINDS and sid in u.input.anc
                    and not u.input.uses & shortcut and rec.use_out.get(u.index) != sid):
                in_branch.add(u.index)
        reads.update(reader_ids)
        writes.update(writer_ids)
        shortcut_uses |= set(shortcut)

    def position(u: _Use) -> tuple[str, str]:
        """The role of one layer use and the reason."""
        if u.kind == "lookup":
            return "input", "rows looked up by the input (an embedding: fan-in 1)"
        if u.index in branch_of:
            b = branch_of[u.index]
            r, w = u.index in reads, u.index in writes
            if r and w:
                return "branch", f"reads the stream and writes residual branch {b}"
            if w:
                return "branch_out", f"writes into residual branch {b}'s addition"
            if r:
                return "branch_in", f"reads the residual stream in branch {b}"
            return "hidden", f"internal layer of residual branch {b}"
        if u.index in shortcut_uses:
            return "hidden", "projection shortcut of a residual block"
        if first_stream is not None and u.index in first_stream.last:
            return "input", "makes the residual stream from the data"
        if u.index in out.last:
            return "output", "writes the model's output"
        if not u.input.uses:
            return "input", "first layer to read the data"
        return "hidden", "plain layer outside any residual branch"

    by_param: dict[str, list[_Use]] = {}
    for u in uses:
        by_param.setdefault(u.param, []).append(u)
    roles: dict[str, str] = {}
    reasons: dict[str, str] = {}
    unclassified: dict[str, str] = {}
    fan_in: dict[str, int] = {}
    counts: dict[str, int] = {}
    readouts: dict[str, str] = {}
    gains: list[str] = []
    main_uses = 0
    for u in uses:
        if u.kind in _WEIGHT_KINDS and u.index not in branch_of and u.index not in shortcut_uses:
            main_uses += 1
    for name, p_uses in by_param.items():
        weights = [u for u in p_uses if u.kind in _WEIGHT_KINDS]
        if weights:
            placed = [(u, *position(u)) for u in weights]
            u0, role, why = placed[0]
            fan_in[name] = u0.fan_in
            outputs = [u for u, r, _ in placed if r == "output"]
            if role == "input" and outputs:
                readouts[outputs[0].unit] = name
                why += f"; also read out by {outputs[0].unit} (tied embedding)"
            elif len(weights) > 1 and len({r for _, r, _ in placed}) == 1:
                counts[name] = len(weights)
                why += f" ({len(weights)} uses: a shared weight)"
            elif len(weights) > 1:
                why += " (also used as " + ", ".join(sorted({r for _, r, _ in placed[1:]})) + ")"
            roles[name], reasons[name] = role, why
            continue
        kinds = {u.kind for u in p_uses}
        if len(p_uses) > 1 and len(kinds) == 1:
            counts[name] = len(p_uses)  # a bias or gain of a shared block
        if "other" in kinds:
            ops = sorted({u.op for u in p_uses if u.kind == "other"})
            unclassified[name] = (f"used by {', '.join(ops)}, which inspect does not read as a "
                                  "matrix, lookup, bias, gain or token")
        elif "gain" in kinds and name in branch_gains:
            roles[name], reasons[name] = "branch_gain", (
                f"gain of the normalisation that ends residual branch {branch_gains[name]} "
                "(after its last layer): it carries the branch multiplier")
        elif "gain" in kinds:
            roles[name], reasons[name] = "norm", "multiplies activations elementwise (a gain)"
            if all(u.index in in_branch for u in p_uses) and _is_norm_op(p_uses):
                roles[name], reasons[name] = "branch_norm", "normalisation gain inside a branch"
            gains.append(name)
        elif "added" in kinds:
            roles[name], reasons[name] = "token", ("added to the activations (learned positional "
                                                   "embedding, class or token-type table)")
        elif "shift" in kinds and any(u.partner in branch_gains for u in p_uses):
            roles[name], reasons[name] = "branch_bias", (
                "shift of the normalisation that ends a residual branch")
        elif "shift" in kinds and all(u.index in in_branch for u in p_uses):
            roles[name], reasons[name] = "branch_vector", "normalisation shift inside a branch"
        elif "shift" in kinds:
            roles[name], reasons[name] = "vector", "normalisation shift"
        else:  # bias
            partner = next((u.partner for u in p_uses if u.partner), "")
            roles[name], reasons[name] = "vector", "bias vector"
            if all(u.index in in_branch for u in p_uses):
                roles[name], reasons[name] = "branch_vector", "bias inside a residual branch"
            if partner in roles:
                if roles[partner] in ("branch", "branch_out"):
                    roles[name], reasons[name] = "branch_bias", (
                        f"bias of {partner}, which writes a residual branch")
                elif roles[partner] == "output":
                    roles[name], reasons[name] = "output_bias", f"bias of the readout {partner}"
    # biases whose weight was classified after them
    for name, p_uses in by_param.items():
        partner = next((u.partner for u in p_uses if u.partner), "")
        if roles.get(name) in ("vector", "branch_vector") and roles.get(partner) in (
                "branch", "branch_out"):
            roles[name], reasons[name] = "branch_bias", (
                f"bias of {partner}, which writes a residual branch")
    tied: dict[str, str] = {}
    first = {id(p): n for n, p in reversed(list(model.named_parameters(remove_duplicate=False)))}
    for n, p in model.named_parameters(remove_duplicate=False):
        if first[id(p)] != n:
            tied[n] = first[id(p)]
    for n in dict(model.named_parameters()):
        if n not in roles and n not in unclassified:
            unclassified[n] = "never used in the forward pass on the example input"
    blocks: dict[str, list[int]] = {}
    for b in branches:
        blocks.setdefault(block_key(b.modules), []).append(b.index)
    widths = Counter(b.width for b in branches)
    width = widths.most_common(1)[0][0] if widths else plain_width(model)
    return Structure(
        roles, reasons, tuple(branches), {k: tuple(v) for k, v in blocks.items()}, width,
        len(branches), main_uses, main_uses + len(branches), unclassified, tied,
        tuple(rec.attention.values()), fan_in, counts, readouts, input_scale, post_ln,
        tuple(gains), branch_gains, tuple(unscaled))


def _is_norm_op(p_uses: list[_Use]) -> bool:
    """Whether a gain's uses are normalisations' (torch's ops or a module named like a norm):
    a layer-scale gamma inside a branch is not a norm gain."""
    return all(u.op.split(".")[-1] in _NORM_NAMES or "norm" in u.module.lower()
               for u in p_uses)


_NORM_NAMES = {getattr(f, "__name__", "") for f in _NORMS}


def plain_width(model: nn.Module) -> int:
    """The most common output size of the Linear/Conv layers of a net without branches."""
    sizes = Counter(int(p.shape[0]) for n, p in model.named_parameters()
                    if n.endswith("weight") and p.ndim >= 2)
    return sizes.most_common(1)[0][0] if sizes else 0


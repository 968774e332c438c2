"""Structure inference: the roles, residual branches, width and effective depth of any
``nn.Module``, read from one real forward pass.

:func:`inspect` runs the model once on an example input under a ``TorchFunctionMode`` that
records the data flow between tensors: which tensors each tensor was computed from, and which
modules with parameters it passed through. No tracing of Python control flow is needed, so
models that ``torch.fx`` cannot trace (data-dependent branches, Hugging Face models) work too.

A **residual branch** is an addition ``s + f(s)`` whose one operand ``s`` (the stream) is an
ancestor of the other, or whose operands share an ancestor (a projection shortcut): the modules
the branch operand passed through since the stream are the branch. Roles follow from position
(laws Sec. 3.4, nfd Eq. 1 and 6): a branch module that reads the stream is ``branch_in``, one
that writes into the addition is ``branch_out`` (``branch`` when it does both), the module that
first makes the stream is ``input`` (a learned positional embedding or class token is
``token``), the module that reads the final stream and writes the output is ``output``,
normalisation gains are ``norm``, biases ``vector`` (``branch_bias`` for the bias of a layer that
writes into a residual addition); any other weight is ``hidden``. Calls of
``F.scaled_dot_product_attention`` are recorded with the calling module, the head width
(``q.shape[-1]``) and the ``scale`` passed, so a plan can check the attention scale. The
**effective depth** is the laws paper's L = m + K (Sec. 3.4-3.5): m plain weight layers on the
main path (input, hidden layers outside branches, output) plus K residual branches, so a
Transformer block (attention + MLP branch) counts 2.
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


@dataclass(frozen=True)
class Branch:
    """One residual branch: the modules it passes through (in call order), those that read the
    stream and those that write into the residual addition; ``shortcut`` the modules of a
    projection shortcut (empty for the identity); ``width`` the stream width at the addition."""

    index: int
    modules: tuple[str, ...]
    readers: tuple[str, ...]
    writers: tuple[str, ...]
    shortcut: tuple[str, ...]
    width: int


@dataclass(frozen=True)
class AttentionCall:
    """One call of ``F.scaled_dot_product_attention``: the innermost module that made it (``""``
    for the model itself), the head width ``d_head = q.shape[-1]`` and the ``scale`` argument
    (None: torch's default 1/sqrt(d_head))."""

    module: str
    d_head: int
    scale: float | None

    @property
    def effective_scale(self) -> float:
        """The softmax scale the call used."""
        return 1 / math.sqrt(self.d_head) if self.scale is None else self.scale


@dataclass(frozen=True)
class Structure:
    """What :func:`inspect` found. ``roles`` maps every parameter name (as
    ``model.named_parameters()`` gives it) to a role of :data:`depthscale.param.ROLES`;
    ``reasons`` says why, per parameter; ``unclassified`` names parameters it could not place
    (never used in the forward pass) with the reason; ``tied`` lists modules that share a
    parameter with another (tied embeddings; the parameter's role is that of its first name,
    the input embedding of a GPT-2-style model); ``blocks`` groups branches by their common
    module prefix (a Transformer block has two branches); ``attention`` the calls of
    ``F.scaled_dot_product_attention``, one per calling module."""

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

    def summary(self) -> str:
        """A few lines for a person: sizes, blocks and every role with its count."""
        counts = Counter(self.roles.values())
        lines = [
            f"width {self.width}, {self.depth} residual branches in {len(self.blocks)} blocks, "
            f"effective depth {self.effective_depth} = {self.plain_layers} plain layers + "
            f"{self.depth} branches (laws Sec. 3.4)",
            "roles: " + ", ".join(f"{r} {n}" for r, n in sorted(counts.items())),
        ]
        if self.tied:
            lines.append("tied: " + ", ".join(f"{a} = {b}" for a, b in self.tied.items()))
        if self.attention:
            lines.append("attention: " + ", ".join(
                f"{a.module or '(model)'} (d_head {a.d_head}, scale "
                f"{'default 1/sqrt(d_head)' if a.scale is None else f'{a.scale:.4g}'})"
                for a in self.attention))
        if self.unclassified:
            lines.append("not classified: " + "; ".join(f"{k} ({v})"
                                                         for k, v in self.unclassified.items()))
        return "\n".join(lines)


_NORM_TYPES: tuple[type[nn.Module], ...] = (
    nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._BatchNorm, nn.LocalResponseNorm,
    *((nn.RMSNorm,) if hasattr(nn, "RMSNorm") else ()),
)


def _is_norm(module: nn.Module) -> bool:
    """LayerNorm, RMSNorm, BatchNorm, GroupNorm, or any module named like one whose weights
    are vectors (e.g. a Hugging Face ``LlamaRMSNorm``)."""
    if isinstance(module, _NORM_TYPES):
        return True
    own = [p for _, p in module.named_parameters(recurse=False)]
    return "norm" in type(module).__name__.lower() and bool(own) and all(p.ndim == 1
                                                                          for p in own)


@dataclass(frozen=True)
class _Info:
    """What the recorder knows of one tensor: its ancestors (tensor ids), the modules with
    parameters it passed through, and the most recent non-norm ones."""

    anc: frozenset[int] = frozenset()
    mods: frozenset[str] = frozenset()
    last: frozenset[str] = frozenset()


@dataclass(frozen=True)
class _Call:
    """One call of a module with parameters: its name and what its inputs had passed through."""

    module: str
    input_anc: frozenset[int]
    input_last: frozenset[str]


@dataclass(frozen=True)
class _Add:
    """An addition of two tensors: each operand's id and record before the op, and the sum."""

    a: int
    b: int
    ia: _Info
    ib: _Info
    out: torch.Tensor


class _Recorder(TorchFunctionMode):
    """Records data flow during one forward pass (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.info: dict[int, _Info] = {}
        self.keep: list[torch.Tensor] = []  # keeps ids unique while the pass runs
        self.adds: list[_Add] = []
        self.used: set[int] = set()  # ids of every tensor an op read (parameters included)
        self.stack: list[str] = []  # names of the modules whose forward is running
        self.attention: dict[str, AttentionCall] = {}

    def get(self, t: torch.Tensor) -> _Info:
        return self.info.get(id(t), _Info())

    def merge(self, tensors: list[torch.Tensor]) -> _Info:
        anc: set[int] = set()
        mods: set[str] = set()
        last: set[str] = set()
        for t in tensors:
            i = self.get(t)
            anc |= i.anc | {id(t)}
            mods |= i.mods
            last |= i.last
        return _Info(frozenset(anc), frozenset(mods), frozenset(last))

    def set(self, t: torch.Tensor, info: _Info) -> None:
        self.keep.append(t)
        self.info[id(t)] = info

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        ins = list(tensors_in((args, kwargs)))
        if not ins:
            return out
        outs = list(tensors_in(out))
        self.used.update(id(t) for t in ins)
        if func is F.scaled_dot_product_attention:
            scale = kwargs.get("scale", args[6] if len(args) > 6 else None)
            module = self.stack[-1] if self.stack else ""
            self.attention.setdefault(module, AttentionCall(
                module, int(ins[0].shape[-1]), None if scale is None else float(scale)))
        if func in ADDITIONS and len(ins) == 2 and outs:
            a, b = ins
            self.keep.extend((a, b))
            self.adds.append(_Add(id(a), id(b), self.get(a), self.get(b), outs[0]))
        merged = self.merge(ins)
        for t in outs:
            self.set(t, merged)
        return out


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


@contextmanager
def _hooks(model: nn.Module, rec: _Recorder, calls: list[_Call]) -> Iterator[None]:
    """Forward hooks on every layer (a module with a weight of its own): its outputs are marked
    as having passed through it (and, unless it is a norm, as its most recent weight layer)."""
    handles = []

    def hook(name: str, norm: bool) -> Any:
        def after(_m: nn.Module, args: Any, kwargs: Any, output: Any) -> None:
            seen = rec.merge(list(tensors_in((args, kwargs))))
            calls.append(_Call(name, seen.anc, seen.last))
            for t in tensors_in(output):
                i = rec.get(t)
                rec.set(t, _Info(i.anc, i.mods | {name},
                                 i.last if norm else frozenset({name})))
        return after

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
        # layers (a weight of their own): a module that merely holds tensors it uses directly
        # (a class token) is not one, and its outputs are not marked as passing through it
        if isinstance(getattr(module, "weight", None), nn.Parameter):
            handles.append(module.register_forward_hook(hook(name, _is_norm(module)),
                                                        with_kwargs=True))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def inspect(model: nn.Module, example_input: Any) -> Structure:
    """The structure of ``model`` (see the module docstring), from one forward pass on
    ``example_input`` (a tensor, a tuple of positional arguments, or a dict of keyword
    arguments). Parameters are not changed (no gradients; train/eval mode restored). A forward
    pass that fails is a ConfigError naming the error.
    """
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}
    if isinstance(example_input, Mapping):
        kwargs = dict(example_input)
    elif isinstance(example_input, tuple):
        args = example_input
    else:
        args = (example_input,)
    rec = _Recorder()
    inputs = {id(t) for t in tensors_in((args, kwargs))}
    calls: list[_Call] = []
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), _hooks(model, rec, calls), rec:
            output = model(*args, **kwargs)
    except Exception as exc:
        message = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        raise ConfigError(f"inspect: the model's forward pass on the example input failed "
                          f"({message}); pass an input the model accepts") from None
    finally:
        model.train(was_training)
    found = _analyse(model, rec, calls, inputs, rec.merge(list(tensors_in(output))))
    return replace(found, attention=tuple(rec.attention.values()))


_CONV_TYPES = (nn.Conv1d, nn.Conv2d, nn.Conv3d)


def _is_conv(module: nn.Module) -> bool:
    return isinstance(module, _CONV_TYPES) or type(module).__name__ == "ScaledConv"


def _residual(add: _Add, weight_mods: set[str]) -> tuple[_Info, _Info, frozenset[str]] | None:
    """``(stream, branch operand, shortcut modules)`` if ``add`` is a residual addition."""
    ia, ib = add.ia, add.ib
    if add.a in ib.anc and ib.mods - ia.mods:
        stream, branch, shortcut = ia, ib, frozenset[str]()
    elif add.b in ia.anc and ia.mods - ib.mods:
        stream, branch, shortcut = ib, ia, frozenset[str]()
    elif ia.anc & ib.anc and ia.mods - ib.mods and ib.mods - ia.mods:
        new_a, new_b = ia.mods - ib.mods, ib.mods - ia.mods  # projection shortcut: fewer new
        stream, branch, shortcut = (ia, ib, new_a) if len(new_a) <= len(new_b) else (ib, ia,
                                                                                     new_b)
    else:
        return None
    if not (branch.mods - stream.mods - shortcut) & weight_mods:
        return None  # only norms (or nothing) with parameters on the way: not a branch
    return stream, branch, shortcut


def block_key(members: tuple[str, ...]) -> str:
    """The block a branch belongs to: its module path up to the first numeric component
    (``h.0``, ``layers.3``, ``layer1.0``), else the members' common prefix."""
    parts = members[0].split(".")
    for i, part in enumerate(parts):
        if part.isdigit():
            return ".".join(parts[: i + 1])
    common = [p for p in zip(*(m.split(".") for m in members), strict=False)
              if len(set(p)) == 1]
    return ".".join(p[0] for p in common) or members[0]


def _analyse(model: nn.Module, rec: _Recorder, calls: list[_Call], inputs: set[int],
             out: _Info) -> Structure:
    modules = dict(model.named_modules())
    called = list(dict.fromkeys(c.module for c in calls))
    order = {name: i for i, name in enumerate(called)}
    weight_mods = {m for m in called if not _is_norm(modules[m])}
    first_call = {c.module: c for c in reversed(calls)}  # the first call of each module wins

    branches: list[Branch] = []
    branch_of: dict[str, int] = {}
    shortcut_mods: set[str] = set()
    first_stream: _Info | None = None
    for add in rec.adds:
        found = _residual(add, weight_mods)
        if found is None:
            continue
        stream, branch, shortcut = found
        first_stream = first_stream or stream
        inside = branch.mods - stream.mods - shortcut
        members = tuple(sorted(inside, key=lambda m: order.get(m, len(order))))
        writers = tuple(m for m in members if m in branch.last)
        readers = tuple(m for m in members if m in weight_mods
                        and not first_call[m].input_last & inside)
        conv = any(_is_conv(modules[m]) for m in writers)
        width = int(add.out.shape[1] if conv or add.out.ndim == 4 else add.out.shape[-1])
        branches.append(Branch(len(branches), members, readers, writers,
                               tuple(sorted(shortcut)), width))
        for m in members:
            branch_of.setdefault(m, len(branches) - 1)
        shortcut_mods |= shortcut

    params = dict(model.named_parameters())
    names = {id(p): n for n, p in params.items()}
    roles: dict[str, str] = {}
    reasons: dict[str, str] = {}
    unclassified: dict[str, str] = {}
    tied: dict[str, str] = {}
    for mod_name, module in modules.items():
        for p_name, p in module.named_parameters(recurse=False):
            full = f"{mod_name}.{p_name}" if mod_name else p_name
            if names.get(id(p)) != full:
                tied[full] = names.get(id(p), "?")
                continue
            if mod_name not in order and id(p) not in rec.used:
                unclassified[full] = "never used in the forward pass on the example input"
                continue
            roles[full], reasons[full] = _role(mod_name, p_name, p, module, branches,
                                               branch_of, shortcut_mods, first_stream, out,
                                               first_call, inputs, order)
    main = [m for m in called if m in weight_mods and m not in branch_of
            and m not in shortcut_mods and roles.get(f"{m}.weight") in ("input", "hidden",
                                                                         "output")]
    blocks: dict[str, list[int]] = {}
    for b in branches:
        blocks.setdefault(block_key(b.modules), []).append(b.index)
    widths = Counter(b.width for b in branches)
    width = widths.most_common(1)[0][0] if widths else plain_width(model)
    return Structure(roles, reasons, tuple(branches),
                     {k: tuple(v) for k, v in blocks.items()}, width, len(branches), len(main),
                     len(main) + len(branches), unclassified, tied)


def _role(mod_name: str, p_name: str, p: torch.Tensor, module: nn.Module,
          branches: list[Branch], branch_of: dict[str, int], shortcut_mods: set[str],
          first_stream: _Info | None, out: _Info, first_call: dict[str, _Call],
          inputs: set[int], order: dict[str, int]) -> tuple[str, str]:
    """The role of one parameter and the reason, from its module's place in the data flow."""
    if _is_norm(module):
        return ("norm", "normalisation gain") if p.ndim == 1 and p_name != "bias" else (
            "vector", "normalisation shift")
    if p.ndim <= 1:
        if mod_name not in branch_of:
            return "vector", "bias or gain vector"
        b = branches[branch_of[mod_name]]
        if p_name == "bias" and mod_name in b.writers:
            return "branch_bias", f"bias of the layer that writes residual branch {b.index}"
        return "vector", f"bias or gain vector of residual branch {b.index}"
    if mod_name not in order or not p_name.endswith("weight"):
        return "token", "a tensor used directly (class token or learned positional embedding)"
    if mod_name in branch_of:
        b = branches[branch_of[mod_name]]
        reads, writes = mod_name in b.readers, mod_name in b.writers
        if reads and writes:
            return "branch", f"reads the stream and writes residual branch {b.index}"
        if writes:
            return "branch_out", f"writes into residual branch {b.index}'s addition"
        if reads:
            return "branch_in", f"reads the residual stream in branch {b.index}"
        return "hidden", f"internal layer of residual branch {b.index}"
    if mod_name in shortcut_mods:
        return "hidden", "projection shortcut of a residual block"
    from_data = bool(first_call[mod_name].input_anc & inputs)
    if isinstance(module, nn.Embedding):
        return (("input", "embedding of the model's input") if from_data else
                ("token", "embedding not indexed by the input (positions)"))
    if first_stream is not None and mod_name in first_stream.last:
        return "input", "makes the residual stream from the data"
    if mod_name in out.last:
        return "output", "writes the model's output"
    if first_stream is None and from_data and order[mod_name] == min(
            order[m] for m in order if first_call[m].input_anc & inputs):
        return "input", "first layer to read the data"
    return "hidden", "plain layer outside any residual branch"


def plain_width(model: nn.Module) -> int:
    """The most common output size of the Linear/Conv layers of a net without branches."""
    sizes = Counter(int(p.shape[0]) for n, p in model.named_parameters()
                    if n.endswith("weight") and p.ndim >= 2)
    return sizes.most_common(1)[0][0] if sizes else 0

"""Structure inference: the roles, residual branches, width and effective depth of any
``nn.Module``, read from how one real forward pass *uses* each parameter (docs/how-it-works.md,
"How inspect reads a model").

A parameter is classified by the op that consumes it, not by its module: a **matrix use**
(``F.linear``, ``@``, ``einsum``, a convolution, multi-head attention, experts' grouped product;
fan-in what the op contracts), a **lookup** (an input layer of fan-in 1, nfd Eq. 1), **added**
(a token table or a bias; to attention scores: a bias), a **gain** (kept by the plan) or
unclassified with the op named. A **residual branch** is an addition ``s + f(s)`` whose operand
``s`` is an ancestor of the other or shares one with it (a projection shortcut); a branch with
no weight counts too (CompleteP's 1/L multiplies every branch). Roles follow from position
(laws Sec. 3.4, nfd Eq. 1 and 6): ``branch_in`` reads the stream, ``branch_out`` writes the
addition, ``input`` makes the first stream, ``output`` writes the logits. The effective depth is
the laws paper's L = m + K (Sec. 3.4-3.5); attention is recorded with the scale the forward
computes (muP: 1/d_head).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from depthscale.calls import logits_of
from depthscale.errors import ConfigError
from depthscale.param.dataflow import (
    NORM_OPS,
    Addition,
    AttentionCall,
    Recorder,
    TensorInfo,
    Use,
    attention_calls,
    call_args,
    copy_input,
    module_stack,
    tensors_in,
)

__all__ = ["AttentionCall", "Branch", "Structure", "inspect"]

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
class Structure:
    """What :func:`inspect` found; each field in full: docs/how-it-works.md.

    ``roles``: every parameter name -> a role of :data:`depthscale.param.ROLES`, with ``reasons``;
    ``unclassified``: names it could not place, with the reason; ``tied``: names sharing a
    parameter with another; ``readouts``: module reading the output with a tied input table ->
    that table's name; ``blocks``: branches by unit prefix; ``attention``: the attention calls;
    ``fan_in``: each weight's fan-in as its first matrix use contracts it (1 for a lookup);
    ``uses``: matrix uses of a weight applied more than once; ``input_scale`` / ``output_scale``:
    constants multiplied into the embedding / the readout (1 when none); ``post_ln``: a norm on the
    stream after an addition; ``gains``: elementwise gains (kept); ``branch_gains``: gains of norms
    ending a branch (role ``branch_gain``); ``unscaled``: branches ending in a norm without a gain;
    ``branch_outputs``: weightless branch outputs; ``routers``: mixture-of-experts routers (role
    ``output``); ``conventions``: biases whose init is the model's own (:func:`conventions`)."""

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
    output_scale: float = 1.0
    branch_outputs: dict[str, int] = field(default_factory=dict)
    routers: tuple[str, ...] = ()
    conventions: dict[str, str] = field(default_factory=dict)
    #: every parameter's shape (``Plan.apply(model, structure=...)`` checks it is this model's)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    #: weight -> the row blocks (output features) a split cut its output into (Mamba's x_proj:
    #: dt, B, C), whose growth with width :func:`~depthscale.param.usage.usages` compares
    splits: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)

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
        if self.output_scale != 1.0:
            lines.append(f"output scale: the readout is multiplied by {self.output_scale:.4g}")
        if self.branch_outputs:
            lines.append("branches without a weight: " + ", ".join(
                f"{b} (output of {m})" for m, b in self.branch_outputs.items()))
        if self.post_ln:
            lines.append("post-LN: a normalisation sits on the residual stream after an addition")
        if self.attention:
            lines.append("attention: " + ", ".join(
                f"{a.module or '(model)'} (d_head {a.d_head}, scale {a.text()}"
                f"{', fixed by the module' if a.fixed else ''})"
                for a in self.attention))
        if self.conventions:
            lines.append("kept inits: " + "; ".join(f"{k} ({v})"
                                                     for k, v in self.conventions.items()))
        if self.unclassified:
            lines.append("not classified: " + "; ".join(f"{k} ({v})"
                                                         for k, v in self.unclassified.items()))
        return "\n".join(lines)


def inspect(model: nn.Module, example_input: Any) -> Structure:
    """The structure of ``model`` (see the module docstring), from one forward pass on
    ``example_input`` (a tensor, a tuple of positional arguments, or a dict of keyword
    arguments), run on a copy of it. Parameters are not changed (no gradients); every module's
    train/eval mode is restored. A forward pass that fails is a ConfigError naming the error.
    The readout writes the logits: the output itself, its ``.logits`` (a ModelOutput), its
    ``"logits"`` entry or a tuple's first element; any other output is a ConfigError.
    """
    args, kwargs = call_args(copy_input(example_input))
    rec = Recorder(model)
    for t in tensors_in((args, kwargs)):
        rec.mark_input(t)
    modes = {m: m.training for m in model.modules()}
    model.eval()
    try:
        with torch.no_grad(), module_stack(model, rec), rec:
            output = model(*args, **kwargs)
    except Exception as exc:
        message = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        raise ConfigError(f"inspect: the model's forward pass on the example input failed "
                          f"({message}); pass an input the model accepts") from None
    finally:
        for m, training in modes.items():
            m.training = training
    try:
        logits = logits_of(output)
    except ConfigError as exc:
        raise ConfigError(f"inspect: {exc}; the readout is the layer that writes it") from None
    return _analyse(model, rec, rec.get(logits) if rec.get(logits).data else TensorInfo())


def _residual(add: Addition, layer_uses: set[int]
              ) -> tuple[TensorInfo, TensorInfo, frozenset[int], int, bool] | None:
    """``(stream, branch operand, shortcut uses, stream id, weightless)`` if ``add`` is a
    residual addition; ``weightless`` when the branch holds no layer use (a candidate only:
    :func:`_flow` keeps it where it sits on the stream)."""
    ia, ib = add.ia, add.ib
    if add.a in ib.anc and ib.uses - ia.uses:
        stream, branch, shortcut, sid = ia, ib, frozenset[int](), add.a
    elif add.b in ia.anc and ia.uses - ib.uses:
        stream, branch, shortcut, sid = ib, ia, frozenset[int](), add.b
    elif ia.anc & ib.anc and ia.uses - ib.uses and ib.uses - ia.uses:
        new_a, new_b = ia.uses - ib.uses, ib.uses - ia.uses  # projection shortcut: fewer new
        stream, branch, shortcut, sid = ((ia, ib, new_a, add.a) if len(new_a) <= len(new_b)
                                         else (ib, ia, new_b, add.b))
    elif add.a in ib.anc:
        stream, branch, shortcut, sid = ia, ib, frozenset[int](), add.a
    elif add.b in ia.anc:
        stream, branch, shortcut, sid = ib, ia, frozenset[int](), add.b
    else:
        return None
    weightless = not (branch.uses - stream.uses - shortcut) & layer_uses
    return stream, branch, shortcut, sid, weightless


def _on_stream(add: Addition, stream: TensorInfo, sid: int, kept: list[tuple[Addition, int]],
               layer_uses: set[int]) -> bool:
    """Whether a weightless addition sits on the residual stream of the branches ``kept``
    (addition, stream id): its sum flows into their stream, or its stream comes from their sum
    or is their stream, with no layer use between (a GELU's inner ``x + c x^3`` does not)."""
    mine = (add.ia.uses | add.ib.uses) & layer_uses
    for other, osid in kept:
        theirs = (other.ia.uses | other.ib.uses) & layer_uses
        s_other = other.ia if osid == other.a else other.ib
        if id(add.out) == osid or (id(add.out) in s_other.anc
                                   and s_other.uses & layer_uses == mine):
            return True
        if sid in (id(other.out), osid) or (id(other.out) in stream.anc
                                            and stream.uses & layer_uses == theirs):
            return True
    return False


def block_key(members: tuple[str, ...]) -> str:
    """The block a branch belongs to: its unit path up to the first run of numeric components
    (``h.0``, ``layers.3``, ``layer1.0``, ``block.0.2`` for a stage's layer), else the
    members' common prefix."""
    if not members:
        return ""
    parts = members[0].split(".")
    for i, part in enumerate(parts):
        if part.isdigit():
            end = i + 1
            while end < len(parts) and parts[end].isdigit():
                end += 1
            return ".".join(parts[:end])
    common = [p for p in zip(*(m.split(".") for m in members), strict=False)
              if len(set(p)) == 1]
    return ".".join(p[0] for p in common) or members[0]


def _sub_key(key: str, members: tuple[str, ...]) -> str:
    """The next numbered module below ``key`` on the branch's first unit (a stage's
    ``blocks.1`` in ``layers.0.blocks.1.attention``), "" if none."""
    rest = members[0][len(key) + 1:].split(".") if members and key else []
    for i, part in enumerate(rest):
        if part.isdigit():
            return f"{key}.{'.'.join(rest[: i + 1])}"
    return ""


def _blocks(branches: list[Branch]) -> dict[str, list[int]]:
    """Branches grouped by :func:`block_key`; a group whose branches sit in numbered modules
    one level down that repeat the same units (a stage holding its blocks: Swin's
    ``layers.0.blocks.k``, not T5's ``block.0.layer.k`` of different sublayers) is split
    into those modules."""
    groups: dict[str, list[Branch]] = {}
    for b in branches:
        groups.setdefault(block_key(b.modules), []).append(b)
    out: dict[str, list[int]] = {}
    for key, members in groups.items():
        subs: dict[str, list[Branch]] = {}
        for b in members:
            subs.setdefault(_sub_key(key, b.modules), []).append(b)
        shapes = {tuple(tuple(m[len(sub):] for m in b.modules) for b in bs)
                  for sub, bs in subs.items()}
        if len(subs) > 1 and "" not in subs and len(shapes) == 1:
            for sub, bs in subs.items():
                out[sub] = [b.index for b in bs]
        else:
            out[key] = [b.index for b in members]
    return out


_WEIGHT_KINDS = ("matrix", "lookup")


@dataclass
class _Flow:
    """What the residual additions of one forward pass show: the branches, which layer uses
    sit in which branch and read or write it, the projection shortcuts, the first stream (what
    the input layers make), and the norms, biases and gains in and at the end of branches."""

    branches: list[Branch] = field(default_factory=list)
    branch_of: dict[int, int] = field(default_factory=dict)  # use -> branch
    reads: set[int] = field(default_factory=set)
    writes: set[int] = field(default_factory=set)
    shortcut_uses: set[int] = field(default_factory=set)
    first_stream: TensorInfo | None = None
    post_ln: bool = False
    input_scale: float = 1.0
    branch_gains: dict[str, int] = field(default_factory=dict)  # gain ending a branch -> branch
    in_branch: set[int] = field(default_factory=set)  # bias, gain and shift uses in a branch
    unscaled: list[int] = field(default_factory=list)  # branches nothing can scale
    branch_outputs: dict[str, int] = field(default_factory=dict)  # weightless: its module
    matrices: set[int] = field(default_factory=set)  # the matrix uses (not lookups)
    routers: set[int] = field(default_factory=set)  # uses whose output only gates experts


def _accepted(rec: Recorder, layer_uses: set[int]) -> list[tuple[Addition, tuple[
        TensorInfo, TensorInfo, frozenset[int], int, bool]]]:
    """The residual additions of the pass in order: every one whose branch holds a layer use,
    and the weightless ones on their stream (:func:`_on_stream`, to a fixed point)."""
    found = [(add, r) for add in rec.adds if (r := _residual(add, layer_uses)) is not None]
    found = [(add, r) for i, (add, r) in enumerate(found)
             if not _inside(add, found[i + 1:], rec.routers)]
    keep = {i for i, (_, r) in enumerate(found) if not r[4]}
    while True:
        kept = [(found[i][0], found[i][1][3]) for i in sorted(keep)]
        new = {i for i, (add, r) in enumerate(found) if i not in keep
               and _on_stream(add, r[0], r[3], kept, layer_uses)}
        if not new:
            return [found[i] for i in sorted(keep)]
        keep |= new


def _inside(add: Addition, later: list[tuple[Addition, tuple[
        TensorInfo, TensorInfo, frozenset[int], int, bool]]], routers: set[int]) -> bool:
    """Whether the sum joins routed experts to another path (a shared expert) inside a later
    addition's branch operand (up to ops without a layer), not its stream: one MoE branch.
    Parallel paths without a router (GPT-J, Falcon: x + (attn(h) + mlp(h))) stay a branch
    each, as in the model's own additions x + attn(h) + mlp(h)."""
    if not (add.ia.uses | add.ib.uses) & routers:
        return False
    s, made = id(add.out), add.ia.last | add.ib.last
    return any(s in branch.anc and s not in stream.anc and s != sid and branch.last <= made
               for _, (stream, branch, _, sid, _) in later)


def _carrier(rec: Recorder, branch: TensorInfo) -> str:
    """The module (called once in the pass) whose output the weightless branch is, up to
    gains and constants; "" if none."""
    return next((m for m in branch.carriers if rec.calls[m] == 1), "")


def _flow(rec: Recorder) -> _Flow:
    """The residual branches of the recorded pass (module docstring), in addition order."""
    uses = rec.uses
    layer_uses = {u.index for u in uses if u.kind in _WEIGHT_KINDS}
    flow = _Flow(matrices={u.index for u in uses if u.kind == "matrix"}, routers=set(rec.routers))
    for add, (stream, branch, shortcut, sid, weightless) in _accepted(rec, layer_uses):
        if flow.first_stream is None:
            flow.first_stream = stream
            if stream.scale is not None and not math.isclose(stream.scale, 1.0):
                flow.input_scale = stream.scale
        flow.post_ln = flow.post_ln or stream.normed
        k = len(flow.branches)
        if weightless:
            carrier = _carrier(rec, branch)
            if carrier:
                flow.branch_outputs[carrier] = k
            else:
                flow.unscaled.append(k)
            unit = (carrier or add.module or f"branch {k}",)
            flow.branches.append(Branch(k, unit, (), (), (), _width(add.out, [], uses)))
        else:
            for g in sorted(branch.tail):
                if g:
                    flow.branch_gains.setdefault(g, k)
                else:
                    flow.unscaled.append(k)
            # not the uses made before the stream began (an encoder's, read by a decoder's
            # cross-attention)
            start = min(stream.uses, default=-1)
            inside = sorted(i for i in (branch.uses - stream.uses - shortcut) & layer_uses
                            if i > start)
            writer_ids = [i for i in inside if i in branch.last]
            reader_ids = [i for i in inside if not uses[i].input.last & set(inside)]
            flow.branches.append(Branch(
                k, _units(uses, inside), _units(uses, reader_ids), _units(uses, writer_ids),
                _units(uses, sorted(shortcut)), _width(add.out, writer_ids, uses)))
            for i in inside:
                flow.branch_of.setdefault(i, k)
            flow.reads.update(reader_ids)
            flow.writes.update(writer_ids)
            flow.shortcut_uses |= set(shortcut)
        # the biases and norms inside the branch: used before the addition on what was
        # computed from the stream (not on the shortcut), and not making the stream itself
        # (a post-LN norm)
        lo = max(stream.uses, default=-1)
        for u in uses[lo + 1: add.time]:
            if (u.kind not in _WEIGHT_KINDS and sid in u.input.anc
                    and not u.input.uses & shortcut and rec.use_out.get(u.index) != sid):
                flow.in_branch.add(u.index)
    return flow


def _width(out: torch.Tensor, writer_ids: list[int], uses: list[Use]) -> int:
    """The stream width at a residual addition: the feature size the branch's writers write
    (a Linear's or conv's output features) where the sum has it in the place the writer put
    it, whatever the layout (NCHW, channel-last NHWC, tokens); without such a writer (a
    Mixer's token-mixing writes the token dim, transposed back), channels of an image (or of
    a conv1d's output), else the last dimension."""
    sizes = Counter(u.fan_out for u in (uses[i] for i in writer_ids)
                    if u.fan_out and -out.ndim <= u.out_axis < out.ndim
                    and out.shape[u.out_axis] == u.fan_out)
    if sizes:
        return int(sizes.most_common(1)[0][0])
    return int(out.shape[1] if out.ndim == 4 or (
        out.ndim == 3 and any(uses[i].op.endswith("conv1d") for i in writer_ids))
        else out.shape[-1])


def _units(uses: list[Use], ids: list[int]) -> tuple[str, ...]:
    """The units of the uses ``ids``, each once, in order."""
    return tuple(dict.fromkeys(uses[i].unit for i in ids))


def _position(u: Use, flow: _Flow, out: TensorInfo) -> tuple[str, str]:
    """The role of one layer use and the reason."""
    if u.kind == "lookup":
        return "input", "rows looked up by the input (an embedding: fan-in 1)"
    if u.index in flow.branch_of:
        b = flow.branch_of[u.index]
        r, w = u.index in flow.reads, u.index in flow.writes
        if u.index in flow.routers and not w:
            return "output", (f"router of residual branch {b}: its softmax/sigmoid weights "
                              "gate the experts' outputs (a readout of width-sized input to "
                              "a fixed number of experts: muP's output rule, fan-in n)")
        if r and w:
            return "branch", f"reads the stream and writes residual branch {b}"
        if w:
            return "branch_out", f"writes into residual branch {b}'s addition"
        if r:
            return "branch_in", f"reads the residual stream in branch {b}"
        return "hidden", f"internal layer of residual branch {b}"
    if u.index in flow.shortcut_uses:
        return "hidden", "projection shortcut of a residual block"
    if flow.first_stream is not None and u.index in flow.first_stream.last:
        if not u.input.uses & flow.matrices:
            return "input", "makes the residual stream from the data"
        return "hidden", ("makes the residual stream from what earlier layers computed (a "
                          "channel-changing block's projection): a hidden layer")
    if u.index in out.last:
        return "output", "writes the model's output"
    if not u.input.uses:
        return "input", "first layer to read the data"
    return "hidden", "plain layer outside any residual branch"


@dataclass
class _Roles:
    """The classification of every used parameter (the fields of :class:`Structure` that
    come from it)."""

    roles: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    unclassified: dict[str, str] = field(default_factory=dict)
    fan_in: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    readouts: dict[str, str] = field(default_factory=dict)
    gains: list[str] = field(default_factory=list)

    def assign(self, name: str, role: str, why: str) -> None:
        self.roles[name], self.reasons[name] = role, why


def _weight_role(found: _Roles, name: str, weights: list[Use], flow: _Flow,
                 out: TensorInfo, stacked: set[str]) -> None:
    """A matrix or lookup: the role of its first use; a second use as the readout makes it a
    tied embedding, more uses of one role a shared weight (not a stack of experts' matrices
    indexed per expert: each use is another expert's slice)."""
    placed = [(u, *_position(u, flow, out)) for u in weights]
    u0, role, why = placed[0]
    found.fan_in[name] = u0.fan_in
    outputs = [u for u, r, _ in placed if r == "output"]
    if role == "input" and outputs:
        found.readouts[outputs[0].unit] = name
        why += f"; also read out by {outputs[0].unit} (tied embedding)"
    elif name in stacked:
        why += (f" (stacked experts: {len(weights)} uses, one per expert selected)"
                if len(weights) > 1 else " (stacked experts, in one grouped product)")
    elif len(weights) > 1 and len({r for _, r, _ in placed}) == 1:
        found.counts[name] = len(weights)
        why += f" ({len(weights)} uses: a shared weight)"
    elif len(weights) > 1:
        why += " (also used as " + ", ".join(sorted({r for _, r, _ in placed[1:]})) + ")"
    found.assign(name, role, why)


#: ops that join a parameter to the sequence as entries of its own (dataflow's concatenations)
_JOINS = frozenset({"cat", "concat", "stack"})


def _vector_role(found: _Roles, name: str, p_uses: list[Use], flow: _Flow) -> None:
    """A parameter used elementwise: a gain, a token table, a normalisation's shift or a
    bias, by where it sits; any other use is left unclassified, naming the op."""
    kinds = {u.kind for u in p_uses}
    inside = all(u.index in flow.in_branch for u in p_uses)
    if len(p_uses) > 1 and len(kinds) == 1:
        found.counts[name] = len(p_uses)  # a bias or gain of a shared block
    if "score_bias" in kinds and len(kinds) > 1:
        ops = sorted({u.op for u in p_uses})
        found.unclassified[name] = (f"added to attention scores and also used otherwise (by "
                                    f"{', '.join(ops)}): neither a score bias nor a "
                                    "parameter of its other use alone")
    elif "other" in kinds:
        ops = sorted({u.op for u in p_uses if u.kind == "other"})
        found.unclassified[name] = (f"used by {', '.join(ops)}, which inspect does not read as "
                                    "a matrix, lookup, bias, gain or token")
    elif "gain" in kinds and name in flow.branch_gains:
        found.assign(name, "branch_gain", f"gain of the normalisation that ends residual branch "
                  f"{flow.branch_gains[name]} (after its last layer): it carries the branch "
                  "multiplier")
    elif "gain" in kinds:
        found.assign(name, "norm", "multiplies activations elementwise (a gain)")
        if inside:  # its gradient carries the branch multiplier, whatever op uses it
            found.assign(name, "branch_norm", "normalisation gain inside a branch"
                         if _is_norm_op(p_uses) else "gain inside a branch (a layer scale, "
                         "an SSM's decay or skip): its gradient carries the branch multiplier")
        found.gains.append(name)
    elif "score_bias" in kinds:
        found.assign(name, "branch_vector" if inside else "vector", _SCORE_BIAS + (
            ", inside a residual branch" if inside else ""))
    elif "added" in kinds and all(u.op.rpartition(".")[2] in _JOINS for u in p_uses):
        found.assign(name, "class_token", "joined to the sequence as positions of its own (a "
                  "class or register token): an embedding row read by a constant index")
    elif "added" in kinds:
        found.assign(name, "token", "added to the activations (learned positional embedding, "
                  "token-type table)")
    elif "shift" in kinds and any(u.partner in flow.branch_gains for u in p_uses):
        found.assign(name, "branch_bias", "shift of the normalisation that ends a residual branch")
    elif "shift" in kinds and inside:
        found.assign(name, "branch_vector", "normalisation shift inside a branch")
    elif "shift" in kinds:
        found.assign(name, "vector", "normalisation shift")
    else:
        _bias_role(found, name, p_uses, inside)


_SCORE_BIAS = ("added to attention scores (a relative position bias: no width dimension, a "
               "bias of the logits, trained like a bias: TP-V Table 3)")


def _bias_role(found: _Roles, name: str, p_uses: list[Use], inside: bool) -> None:
    """A bias: inside a branch, of a layer that writes a branch, of the readout, or plain."""
    partner = next((u.partner for u in p_uses if u.partner), "")
    found.assign(name, "vector", "bias vector")
    if inside:
        found.assign(name, "branch_vector", "bias inside a residual branch")
    if partner in found.roles:
        if found.roles[partner] in ("branch", "branch_out"):
            found.assign(name, "branch_bias", f"bias of {partner}, which writes a residual branch")
        elif found.roles[partner] == "output":
            found.assign(name, "output_bias", f"bias of the readout {partner}")


def _classify(rec: Recorder, flow: _Flow, out: TensorInfo) -> _Roles:
    """The role of every parameter the pass used, by its uses (module docstring)."""
    by_param: dict[str, list[Use]] = {}
    for u in rec.uses:
        by_param.setdefault(u.param, []).append(u)
    found = _Roles()
    for name, p_uses in by_param.items():
        weights = [u for u in p_uses if u.kind in _WEIGHT_KINDS]
        if weights:
            _weight_role(found, name, weights, flow, out, rec.stacked)
        else:
            _vector_role(found, name, p_uses, flow)
    # biases whose weight was classified after them
    for name, p_uses in by_param.items():
        partner = next((u.partner for u in p_uses if u.partner), "")
        if found.roles.get(name) in ("vector", "branch_vector") and found.roles.get(
                partner) in ("branch", "branch_out"):
            found.assign(name, "branch_bias", f"bias of {partner}, which writes a residual branch")
    return found


def _tied(model: nn.Module) -> dict[str, str]:
    """Every name of a shared parameter but its first, mapped to the first."""
    named = list(model.named_parameters(remove_duplicate=False))
    first = {id(p): n for n, p in reversed(named)}
    return {n: first[id(p)] for n, p in named if first[id(p)] != n}


def _analyse(model: nn.Module, rec: Recorder, out: TensorInfo) -> Structure:
    """The :class:`Structure` of a recorded forward pass whose output is ``out``."""
    flow = _flow(rec)
    found = _classify(rec, flow, out)
    main_uses = sum(1 for u in rec.uses if u.kind in _WEIGHT_KINDS
                    and u.index not in flow.branch_of and u.index not in flow.shortcut_uses)
    for n in dict(model.named_parameters()):
        if n not in found.roles and n not in found.unclassified:
            found.unclassified[n] = "never used in the forward pass on the example input"
    blocks = _blocks(flow.branches)
    widths = Counter(b.width for b in flow.branches)
    width = widths.most_common(1)[0][0] if widths else plain_width(model)
    return Structure(
        found.roles, found.reasons, tuple(flow.branches), {k: tuple(v) for k, v in blocks.items()},
        width, len(flow.branches), main_uses, main_uses + len(flow.branches), found.unclassified,
        _tied(model), attention_calls(model, rec), found.fan_in, found.counts, found.readouts,
        flow.input_scale, flow.post_ln, tuple(found.gains), flow.branch_gains,
        tuple(flow.unscaled), _output_scale(rec, out), flow.branch_outputs,
        tuple(sorted({u.param for u in rec.uses if u.index in flow.routers
                      and found.roles.get(u.param) == "output"})),
        conventions(model, found.roles),
        {n: tuple(p.shape) for n, p in model.named_parameters()},
        {w: b for w, b in rec.splits.items() if found.roles.get(w) in _SPLIT_ROLES})


_BIAS_ROLES = ("vector", "branch_vector", "branch_bias", "output_bias")
#: roles of matrices inside the net, whose row blocks may differ in growth
_SPLIT_ROLES = ("hidden", "branch", "branch_in", "branch_out")


def conventions(model: nn.Module, roles: dict[str, str]) -> dict[str, str]:
    """The biases whose init no recipe's zero init may replace: values that are neither zero
    nor a zero-mean random draw (|mean| > 4 std/sqrt(k) over k entries: a draw's mean is
    std/sqrt(k)), such as Mamba's dt bias softplus^-1(dt), dt in [dt_min, dt_max] (Gu and Dao
    2023, Sec. 3.6), or a constant (an LSTM's forget-gate 1)."""
    found = {}
    for name, p in model.named_parameters():
        if roles.get(name) not in _BIAS_ROLES or not p.numel():
            continue
        v = p.detach().double().flatten()
        mean = float(v.mean())
        std = float(v.std()) if v.numel() > 1 else 0.0
        if math.isfinite(mean) and mean != 0 and abs(mean) > 4 * std / math.sqrt(v.numel()):
            found[name] = (f"init mean {mean:.3g}, std {std:.3g}: not zero nor a zero-mean "
                           "draw, the model's own convention")
    return found


def _output_scale(rec: Recorder, out: TensorInfo) -> float:
    """The constant the model multiplies into its readout: the numbers the readout's input
    was multiplied by since its last layer or normalisation, times those after the readout's
    matrix (1 where the readouts disagree or none is found)."""
    readers = [u for u in rec.uses if u.index in out.last and u.kind == "matrix"]
    before = {u.input.factor for u in readers}
    if len(before) != 1:
        return 1.0
    after = out.scale if out.scale is not None else 1.0
    c = before.pop() * after
    return 1.0 if math.isclose(c, 1.0) else c


def _is_norm_op(p_uses: list[Use]) -> bool:
    """Whether a gain's uses are normalisations' (torch's ops or a module named like a norm):
    a layer-scale gamma inside a branch is not a norm gain."""
    return all(u.op.split(".")[-1] in _NORM_NAMES or "norm" in u.module.lower()
               for u in p_uses)


_NORM_NAMES = {getattr(f, "__name__", "") for f in NORM_OPS}


def plain_width(model: nn.Module) -> int:
    """The most common output size of the Linear/Conv layers of a net without branches."""
    sizes = Counter(int(p.shape[0]) for n, p in model.named_parameters()
                    if n.endswith("weight") and p.ndim >= 2)
    return sizes.most_common(1)[0][0] if sizes else 0


"""A GPT-style decoder-only Transformer on token ids (Radford et al. 2019), written with
depthscale layers so that a plan sets every multiplier.

tokens (B, T) -> z_0 = embed(tokens) + pos[:T] -> D blocks of two residual updates each
(causal multi-head attention, then a 2-layer MLP; pre-LN by default, laws Sec. 3.1) -> final
LayerNorm -> unembedding -> logits (B, T, vocab), one next-token distribution per position.

Roles: the token embedding is a :class:`TokenEmbedding` (role ``input``), a
:class:`~depthscale.models.ScaledLinear` from one-hot tokens, so its fan-in is the vocabulary
size V (nfd Eq. 1's input layer U x / sqrt(d) with d = V; never the width), computed as a
lookup. The learned positional embedding has role ``token``; attention ``qkv`` and MLP ``fc1``
are ``branch_in``, attention ``proj`` and MLP ``fc2`` ``branch_out``; the unembedding
``output``. LayerNorm gains are ``norm``, biases ``vector`` (both found by the plan itself).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from depthscale.activations import activation as get_activation
from depthscale.errors import ConfigError
from depthscale.models.layers import ScaledLinear, in_branch
from depthscale.models.mlp import Trace
from depthscale.models.vit import NORM_STYLES, FeedForward, TransformerBlock, _dropout
from depthscale.param.checks import number, whole

__all__ = ["GPT", "CausalSelfAttention", "TokenEmbedding"]


class TokenEmbedding(ScaledLinear):
    """``a * onehot(tokens) W^T``: a :class:`ScaledLinear` (vocab -> width, role ``input``)
    evaluated as a lookup of the columns of ``W`` (width x vocab). Its input is one-hot, so its
    fan-in is 1 (nfd Eq. 1's h0 = U x / sqrt(d) with |x| = 1), as for an ``nn.Embedding``."""

    one_hot_input = True

    def __init__(self, vocab: int, width: int) -> None:
        super().__init__(vocab, width, "input")

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.dtype != torch.int64:
            raise ConfigError(
                f"the GPT takes int64 token ids of shape (batch, seq), got {tokens.dtype} "
                f"{tuple(tokens.shape)}; load a token dataset (markov, pytext)"
            )
        return F.embedding(tokens, self.weight.T) * self.multiplier


class CausalSelfAttention(nn.Module):
    """Causal multi-head self-attention, the first residual branch of a block:
    [q, k, v] = qkv(z) (``branch_in``), per head softmax(q k^T * attention_scale + causal mask)
    v, heads concatenated and projected by ``proj`` (``branch_out``).

    ``attention_scale`` defaults to 1/sqrt(attention_head_dim) (Vaswani et al. 2017); a plan
    may set it (muP-family recipes use 1/d_head, Yang et al. TP-V)."""

    def __init__(self, width: int, heads: int, *, bias: bool) -> None:
        super().__init__()
        self.heads = heads
        self.attention_head_dim: int = width // heads
        self.attention_scale: float = 1 / math.sqrt(self.attention_head_dim)
        self.qkv = ScaledLinear(width, 3 * width, "branch_in", bias=bias)
        self.proj = ScaledLinear(width, width, "branch_out", bias=bias)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        n, t, width = z.shape
        qkv = self.qkv(z).reshape(n, t, 3, self.heads, self.attention_head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (n, heads, t, head_dim)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                             scale=self.attention_scale)
        result: torch.Tensor = self.proj(out.transpose(1, 2).reshape(n, t, width))
        return result


class _MLP(FeedForward):
    """The MLP branch of :class:`~depthscale.models.vit.FeedForward` (fc2(drop(phi(fc1(z))))),
    with or without biases."""

    def __init__(self, width: int, hidden: int, phi: Any, dropout: float, *, bias: bool) -> None:
        nn.Module.__init__(self)
        self.phi = phi
        self.fc1 = ScaledLinear(width, hidden, "branch_in", bias=bias)
        self.fc2 = ScaledLinear(hidden, width, "branch_out", bias=bias)
        self.drop = _dropout(dropout)


class _Block(TransformerBlock):
    """A :class:`~depthscale.models.vit.TransformerBlock` (same residual updates, pre- or
    post-LN) whose attention is causal and whose layers may drop their biases."""

    def __init__(self, width: int, heads: int, hidden: int, *, norm: str, phi: Any,
                 dropout: float, bias: bool) -> None:
        nn.Module.__init__(self)
        self.pre = norm == "pre"
        self.ln1 = nn.LayerNorm(width, bias=bias)
        self.attn = CausalSelfAttention(width, heads, bias=bias)
        self.ln2 = nn.LayerNorm(width, bias=bias)
        self.mlp = _MLP(width, hidden, phi, dropout, bias=bias)
        self.drop = _dropout(dropout)
        if self.pre:  # the norms sit inside the branches (post-LN: on the stream)
            in_branch(self.ln1, self.ln2)


class GPT(nn.Module):
    """GPT-style decoder-only Transformer: ``depth`` = D blocks; logits (B, T, vocab).

    ``tied=True`` reads the logits out with the embedding matrix (h W_E, Press & Wolf 2017):
    one parameter, trained by the ``input`` rule; the readout multiplies by the ``output``
    rule's ``a`` (fan-in = width) of the plan recorded on the model (rescaled when the plan
    absorbed the embedding's multiplier, so both forms compute the same function), the
    multiplier an untied head would get. ``plan_depth = 2 D`` (residual branches, the rule
    table's L) and ``effective_depth = 2 D + 2`` (laws Sec. 3.4-3.5: embedding and
    unembedding are one plain unit each, a block counts 2), as
    :class:`~depthscale.models.ViT` declares them; tied or not, since tying shares a
    parameter, not a layer of the forward path.
    """

    #: AM-muP depth units (laws App. D, Eq. 36/40): the states after each attention and MLP
    #: unit, without the embedding and the logits (probes.update_energy)
    am_units = "sub-blocks"

    def __init__(
        self,
        vocab: int,
        width: int,
        depth: int,
        *,
        context: int = 64,
        heads: int = 4,
        mlp_ratio: int = 4,
        norm: str = "pre",
        tied: bool = False,
        bias: bool = True,
        activation: str = "gelu",
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        vocab, width, depth, context, heads, mlp_ratio = (
            whole(name, v) for name, v in (("vocab", vocab), ("width", width), ("depth", depth),
                                           ("context", context), ("heads", heads),
                                           ("mlp_ratio", mlp_ratio)))
        if width % heads:
            raise ConfigError(
                f"width must be divisible by heads, got width={width}, heads={heads}"
            )
        if norm not in NORM_STYLES:
            raise ConfigError(f"norm must be one of {', '.join(NORM_STYLES)}, got {norm!r}")
        for name, flag in (("tied", tied), ("bias", bias)):
            if not isinstance(flag, bool):
                raise ConfigError(f"{name} must be true or false, got {flag!r}")
        dropout = number("dropout", dropout, low_closed=True, high=1.0)
        phi = get_activation(activation)
        self.activation_name = activation
        self.vocab, self.context, self.tied = vocab, context, tied
        self.width, self.depth, self.norm_style = width, depth, norm
        self.plan_depth = 2 * depth  # residual branches K (the rule table's L)
        self.effective_depth = 2 * depth + 2  # laws Sec. 3.4-3.5: m = 2 plain units + K
        self.embed = TokenEmbedding(vocab, width)
        self.pos_embed = nn.Parameter(torch.empty(1, context, width))
        nn.init.trunc_normal_(self.pos_embed, std=0.02)  # until a plan draws it (role token)
        self.param_roles = {"pos_embed": "token"}
        self.drop = _dropout(dropout)
        self.blocks = nn.ModuleList(
            _Block(width, heads, mlp_ratio * width, norm=norm, phi=phi, dropout=dropout,
                   bias=bias)
            for _ in range(depth)
        )
        self.final_norm = nn.LayerNorm(width, bias=bias)
        self.head = None if tied else ScaledLinear(width, vocab, "output", bias=bias)
        self._tied_cache: tuple[object, float] | None = None

    @classmethod
    def from_shape(cls, input_shape: tuple[int, ...], n_out: int, width: int, depth: int,
                   **options: Any) -> GPT:
        """The registry's builder: per-sample input ``(seq,)`` of token ids, ``n_out`` = vocab;
        ``context`` (the positional table's length) defaults to ``seq``."""
        if len(input_shape) != 1:
            raise ConfigError(
                f"the GPT takes token sequences, a per-sample shape (seq,), got shape "
                f"{tuple(input_shape)}; use a token dataset (markov, pytext)"
            )
        context = options.pop("context", input_shape[0])
        if whole("context", context) < input_shape[0]:
            raise ConfigError(
                f"context={context} is shorter than the data's sequences of {input_shape[0]} "
                "tokens; raise context or cut shorter windows"
            )
        return cls(n_out, width, depth, context=context, **options)

    def tied_multiplier(self) -> float:
        """The tied readout's multiplier: the ``output`` rule's a (fan-in = width) times
        ``embed.multiplier / a_input``, from the plan recorded on the model (1 without one)."""
        from depthscale.param import RECIPES, Plan, PlanState

        state = PlanState.of(self)
        if state is None:
            return 1.0
        if self._tied_cache is None or self._tied_cache[0] is not state:
            settings = dict(state.settings)
            p = Plan(RECIPES[settings.pop("recipe")], **settings)
            a_out = p.spec("readout", "output", (self.vocab, self.width)).a
            role = state.roles.get("embed.weight", "input")
            a_in = p.spec("embed.weight", role, tuple(self.embed.weight.shape), fan_in=1).a
            self._tied_cache = (state, a_out / a_in)
        assert self._tied_cache is not None
        return self._tied_cache[1] * self.embed.multiplier

    def embed_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        """z_0 = embed(tokens) + pos[:T]."""
        t = tokens.shape[-1]
        if t > self.context:
            raise ConfigError(
                f"sequences of {t} tokens do not fit the GPT's context of {self.context}; "
                "build it with a larger context option"
            )
        result: torch.Tensor = self.drop(self.embed(tokens) + self.pos_embed[:, :t])
        return result

    def readout(self, z: torch.Tensor) -> torch.Tensor:
        """Logits from the last stream: head(LN(z)), or a_tied LN(z) W_E when tied."""
        h = self.final_norm(z)
        if self.head is not None:
            return cast(torch.Tensor, self.head(h))
        return F.linear(h, self.embed.weight.T) * self.tied_multiplier()

    def trace(self, tokens: torch.Tensor) -> Trace:
        """Forward pass that keeps the stream after the embedding and after each of the 2 D
        residual updates (``streams``) and each branch output (``increments``)."""
        z = self.embed_tokens(tokens)
        tr = Trace(out=z, streams=[z])
        for blk in cast("Iterable[_Block]", self.blocks):
            for ln, branch in ((blk.ln1, blk.attn), (blk.ln2, blk.mlp)):
                z, delta = blk.update(ln, branch, z)
                tr.increments.append(delta)
                tr.streams.append(z)
        tr.out = self.readout(z)
        return tr

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        z = self.embed_tokens(tokens)
        for blk in self.blocks:
            z = blk(z)
        return self.readout(z)

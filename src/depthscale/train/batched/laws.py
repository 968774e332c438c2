"""Hand-batched forwards of the laws models, for :mod:`depthscale.train.batched.program`: the G
members of a batched run as one program instead of ``vmap`` over the model.

* :class:`~depthscale.models.PlainCNN` (laws Eq. 3) and :class:`~depthscale.models.ConvResNet`
  (laws Eq. 4), 1D and 2D: the members' activations side by side on the channel axis,
  ``[B, G*C, ...]``; every convolution is one grouped convolution whose G groups are the
  members' weights (the first, on shared data, an ordinary one with G*C_out channels); the
  linear head a batched matmul over ``[G, out, in]``.
* :class:`~depthscale.models.ViT` (laws Sec. 3.1, 3.5): every :class:`ScaledLinear` a batched
  matmul over ``[G, B*T, in]``, attention on ``[G*B, heads, T, head_dim]``, each member's
  LayerNorm gain and shift applied to the normalized rows.

Autograd differentiates these programs. Only the classes themselves (not subclasses) without
BatchNorm or active dropout and with standard-backward :class:`ScaledLinear` s are covered;
anything else gets None, and ``vmap``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from depthscale.models.cnn import ConvBlock, ConvResNet, PlainCNN
from depthscale.models.layers import ScaledConv, ScaledLinear
from depthscale.models.vit import Attention, FeedForward, TransformerBlock, ViT
from depthscale.train.batched.linear import Forward, Tensors, stacked_linear

__all__ = ["laws_forward"]



#: floats of one activation tensor (all members) above which an evaluation (no gradient) runs in
#: chunks of rows: an evaluation pass over a whole test set at once would make every activation
#: G times the test set's (~100 MB for cnn1d, G = 20), out of cache and freshly page-faulted
EVAL_FLOATS = 2**21


def _in_chunks(forward: Forward, floats_per_position: int) -> Forward:
    """``forward`` that, without autograd, takes the rows in chunks of at most
    ``EVAL_FLOATS / (G floats_per_position positions)`` (each row's outputs are the same either
    way); ``positions`` is the product of the input's spatial axes."""

    def chunked(params: Tensors, x: torch.Tensor, per_member: bool) -> torch.Tensor:
        g = params["head.weight"].shape[0]
        axis = 1 if per_member else 0
        positions = math.prod(x.shape[axis + 2:])
        rows = max(1, EVAL_FLOATS // (g * floats_per_position * positions))
        if torch.is_grad_enabled() or x.shape[axis] <= rows:
            return forward(params, x, per_member)
        return torch.cat([forward(params, part, per_member)
                          for part in x.split(rows, dim=axis)], dim=1)

    return chunked


def _identity(module: nn.Module) -> bool:
    """A BatchNorm or dropout slot left empty (``nn.Identity``), or dropout with p = 0."""
    if isinstance(module, nn.Identity):
        return True
    return isinstance(module, nn.modules.dropout._DropoutNd) and module.p == 0


# ---- convolutional nets (laws Eq. 3, 4) -------------------------------------------------------


class _Convs:
    """The operations of a stacked conv net on ``[B, G*C, ...]`` activations."""

    def __init__(self, params: Tensors, convs: dict[str, ScaledConv], g: int) -> None:
        self.params, self.convs, self.g = params, convs, g

    def conv(self, name: str, z: torch.Tensor, shared: bool = False) -> torch.Tensor:
        """``a conv(pad(z), W_g)`` for every member g at once: one grouped convolution (or, on
        an input all members share, one convolution with every member's output channels). The
        multiplier scales the (small) weight rather than the output, zero padding is the
        convolution's own and circular padding one concatenation (the loop rounds its product
        with ``a`` and its padding differently: agreement to float rounding, not to the bit)."""
        layer = self.convs[name]
        w = self.params[f"{name}.weight"].flatten(0, 1) * layer.multiplier  # [G*C_out, C_in, k.]
        conv = F.conv1d if layer.dims == 1 else F.conv2d
        pads = layer._pad  # (left, right) per spatial axis, last axis first
        if layer.padding == "circular":
            for axis in range(layer.dims):
                left, right = pads[2 * axis], pads[2 * axis + 1]
                dim = z.dim() - 1 - axis
                parts = [z.narrow(dim, z.shape[dim] - left, left)] if left else []
                parts += [z] + ([z.narrow(dim, 0, right)] if right else [])
                z = torch.cat(parts, dim) if len(parts) > 1 else z
            padding: Any = 0
        elif len(set(pads)) == 1:
            padding = pads[0]
        else:  # an even kernel pads one more on the right
            z, padding = F.pad(z, pads), 0
        y = conv(z, w, padding=padding, groups=1 if shared else self.g)
        if layer.bias is not None:
            y = y + self.params[f"{name}.bias"].reshape(1, -1, *([1] * layer.dims))
        return y

    def gap(self, z: torch.Tensor) -> torch.Tensor:
        """Global average pooling, ``[B, G*C, ...] -> [G, B, C]``."""
        b = z.shape[0]
        return z.flatten(2).mean(-1).view(b, self.g, -1).transpose(0, 1)


def _members_on_channels(x: torch.Tensor, per_member: bool) -> tuple[torch.Tensor, bool]:
    """The input as the first convolution reads it: ``[B, C, ...]`` shared by all members, or
    ``[G, B, C, ...]`` moved to ``[B, G*C, ...]``; and whether it is shared."""
    if not per_member:
        return x, True
    return x.transpose(0, 1).flatten(1, 2), False


def _conv_forward(model: nn.Module) -> Forward | None:
    """The stacked forward of a :class:`PlainCNN` (laws Eq. 3) or :class:`ConvResNet` (laws
    Eq. 4) without normalization or dropout, or None."""
    convs = {name: m for name, m in model.named_modules() if isinstance(m, ScaledConv)}
    heads = [m for m in model.modules() if isinstance(m, ScaledLinear)]
    if any(type(m) is not ScaledConv for m in convs.values()) or len(heads) != 1 or (
            type(heads[0]) is not ScaledLinear or heads[0].backward_mode != "standard"):
        return None
    head: ScaledLinear = heads[0]
    sigma = cast("Callable[[torch.Tensor], torch.Tensor]", model.sigma)

    if type(model) is PlainCNN:
        norms = [*model.norms, model.last_norm, model.drop]
        if not all(_identity(m) for m in norms):
            return None
        hidden = [f"hidden_convs.{i}" for i in range(len(model.hidden_convs))]

        def cnn(ops: _Convs, x: torch.Tensor, shared: bool) -> torch.Tensor:
            # laws Eq. 3: z_1 = conv_1(x), z_l = conv_l(sigma(z_{l-1})), f = head(GAP(sigma(z_L)))
            z = ops.conv("input_conv", x, shared)
            for name in hidden:
                z = ops.conv(name, sigma(z))
            return stacked_linear(ops.params, "head", head, ops.gap(sigma(z)))

        program = cnn
    elif type(model) is ConvResNet:
        blocks = list(model.blocks)
        if not all(type(b) is ConvBlock and all(
                _identity(m) for m in b.children() if not isinstance(m, ScaledConv))
                for b in blocks):
            return None
        names = [[f"blocks.{i}.conv"] if model.block == 1 else
                 [f"blocks.{i}.conv1", f"blocks.{i}.conv2"] for i in range(len(blocks))]

        def resnet(ops: _Convs, x: torch.Tensor, shared: bool) -> torch.Tensor:
            # laws Eq. 4: h_0 = stem(x), h_l = h_{l-1} + F_l(h_{l-1}), f = head(GAP(sigma(h_K)))
            # with F(h) = conv(sigma(h)) or conv2(sigma(conv1(sigma(h))))
            h = ops.conv("stem", x, shared)
            for block in names:
                u = h
                for name in block:
                    u = ops.conv(name, sigma(u))
                h = h + u
            return stacked_linear(ops.params, "head", head, ops.gap(sigma(h)))

        program = resnet
    else:
        return None

    def forward(params: Tensors, x: torch.Tensor, per_member: bool) -> torch.Tensor:
        g = params["head.weight"].shape[0]
        data, shared = _members_on_channels(x, per_member)
        return program(_Convs(params, convs, g), data, shared)

    return _in_chunks(forward, max(m.weight.shape[0] for m in convs.values()))


# ---- the Vision Transformer (laws Sec. 3.1, 3.5) ----------------------------------------------


def _layer_norm(params: Tensors, name: str, ln: nn.LayerNorm, z: torch.Tensor) -> torch.Tensor:
    """LayerNorm of ``z`` ``[G, ..., W]`` with each member's gain and shift ``[G, W]``."""
    y = F.layer_norm(z, ln.normalized_shape, eps=ln.eps)
    shape = (z.shape[0], *[1] * (z.dim() - 2), z.shape[-1])
    return torch.addcmul(params[f"{name}.bias"].view(shape), y,
                         params[f"{name}.weight"].view(shape))


def _vit_forward(model: nn.Module) -> Forward | None:
    """The stacked forward of a :class:`ViT` without dropout whose blocks are the plain
    :class:`TransformerBlock` (self-attention, feedforward, affine LayerNorms), or None."""
    if type(model) is not ViT:
        return None
    assert isinstance(model, ViT)
    linears = {n: m for n, m in model.named_modules() if isinstance(m, ScaledLinear)}
    if any(type(m) is not ScaledLinear or m.backward_mode != "standard"
           for m in linears.values()):
        return None
    lns = [m for m in model.modules() if isinstance(m, nn.LayerNorm)]
    if not all(type(m) is nn.LayerNorm and m.elementwise_affine and m.bias is not None
               for m in lns):
        return None
    blocks: list[TransformerBlock] = list(model.blocks)  # type: ignore[arg-type]
    for b in blocks:
        if (type(b) is not TransformerBlock or type(b.attn) is not Attention
                or type(b.mlp) is not FeedForward or not _identity(b.drop)
                or not _identity(b.mlp.drop)):
            return None
    if not _identity(model.drop):
        return None

    def lin(p: Tensors, name: str, z: torch.Tensor) -> torch.Tensor:
        """A linear layer on ``[G, B, T, in]``."""
        g, b, t, _ = z.shape
        return stacked_linear(p, name, linears[name], z.reshape(g, b * t, -1)).view(g, b, t, -1)

    def attention(p: Tensors, i: int, z: torch.Tensor) -> torch.Tensor:
        # softmax(q k^T attention_scale) v per head, heads concatenated, then proj
        attn = blocks[i].attn
        assert isinstance(attn, Attention)
        g, b, t, width = z.shape
        qkv = lin(p, f"blocks.{i}.attn.qkv", z).reshape(g * b, t, 3, attn.heads, attn.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).flatten(1, 2).unbind(0)  # [G*B*heads, T, d]
        # batched matmuls rather than the fused kernel the loop calls, whose blocking costs far
        # more than the arithmetic at T ~ 10, d ~ 8 (same values to float rounding); the scores
        # are kept transposed, [keys, queries], as softmax over a short last axis is slow
        scores = torch.baddbmm(q.new_empty(()).expand(q.shape[0], t, t), k, q.mT, beta=0,
                               alpha=attn.attention_scale)
        out = torch.bmm(torch.softmax(scores, 1).mT, v).view(g * b, attn.heads, t, attn.head_dim)
        return lin(p, f"blocks.{i}.attn.proj", out.transpose(1, 2).reshape(g, b, t, width))

    def feedforward(p: Tensors, i: int, z: torch.Tensor) -> torch.Tensor:
        # FFN(z) = fc2(phi(fc1(z)))
        return lin(p, f"blocks.{i}.mlp.fc2", blocks[i].mlp.phi(lin(p, f"blocks.{i}.mlp.fc1", z)))

    def forward(p: Tensors, x: torch.Tensor, per_member: bool) -> torch.Tensor:
        g = p["head.weight"].shape[0]
        # z_0 = [cls; patch_proj(patches(x))] + pos
        if per_member:
            b = x.shape[1]
            patches = model.patches(x.flatten(0, 1)).view(g, b * model.n_patches, -1)
        else:
            b = x.shape[0]
            patches = model.patches(x).flatten(0, 1)
        z = stacked_linear(p, "patch_proj", linears["patch_proj"], patches)
        z = z.view(g, b, model.n_patches, -1)
        cls = p["cls_token"].expand(g, b, 1, z.shape[-1])
        z = torch.cat((cls, z), dim=2) + p["pos_embed"]
        for i, blk in enumerate(blocks):
            # pre-LN: z <- z + Attn(LN_1(z)), z <- z + FFN(LN_2(z)); post-LN: z <- LN(z + ...)
            for ln_name, ln, branch in (("ln1", blk.ln1, attention), ("ln2", blk.ln2, feedforward)):
                name = f"blocks.{i}.{ln_name}"
                assert isinstance(ln, nn.LayerNorm)
                if blk.pre:
                    z = z + branch(p, i, _layer_norm(p, name, ln, z))
                else:
                    z = _layer_norm(p, name, ln, z + branch(p, i, z))
        cls_out = _layer_norm(p, "final_norm", model.final_norm, z[:, :, 0])
        return stacked_linear(p, "head", linears["head"], cls_out)

    # per input position (the patches' positions): the widest activation per token
    tokens, positions = model.n_patches + 1, model.n_patches * model.patch_size ** len(model.grid)
    heads = [m.heads for m in model.modules() if isinstance(m, Attention)]
    widest = max([m.weight.shape[0] for m in linears.values()] + [tokens * h for h in heads])
    return _in_chunks(forward, max(1, tokens * widest // positions))


def laws_forward(model: nn.Module) -> Forward | None:
    """The hand-batched forward of a laws model (:class:`PlainCNN`, :class:`ConvResNet`,
    :class:`ViT`; see the module docstring), or None where it has none."""
    found: Any = _conv_forward(model)
    return found if found is not None else _vit_forward(model)

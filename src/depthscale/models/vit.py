"""The Vision Transformer of laws Sec. 3.1 and 3.5 (Dosovitskiy et al. 2020), for images and
1D signals alike.

Patch projection, a class token (role ``class_token``) and learned positional embeddings
(role ``token``), D blocks of two residual updates each (laws Sec. 3.1: z <- z + Attn(LN(z)),
z <- z + FFN(LN(z)), or the post-norm variant), a final LayerNorm on the class token and a
linear head. Multipliers come from a plan; every weight is a :class:`ScaledLinear` with a role.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from depthscale.activations import activation as get_activation
from depthscale.errors import ConfigError
from depthscale.models.layers import ScaledLinear, in_branch
from depthscale.models.mlp import Trace

__all__ = ["Attention", "FeedForward", "TransformerBlock", "ViT"]

NORM_STYLES = ("pre", "post")


def _dropout(p: float) -> nn.Module:
    return nn.Dropout(p) if p > 0 else nn.Identity()


class Attention(nn.Module):
    """Multi-head self-attention, the first residual branch of a Transformer block (laws Sec.
    3.1): [q, k, v] = qkv(z) (role ``branch_in``), per head softmax(q k^T attention_scale) v,
    heads concatenated and projected by ``proj`` (role ``branch_out``). ``attention_scale`` is
    1/sqrt(head_dim) until a plan sets it (``plan.attention_scale(attention_head_dim)``: muP's
    1/head_dim under the muP family, TP-V)."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = width // heads
        self.attention_head_dim: int = self.head_dim
        self.attention_scale: float = 1 / math.sqrt(self.head_dim)
        self.qkv = ScaledLinear(width, 3 * width, "branch_in", bias=True)
        self.proj = ScaledLinear(width, width, "branch_out", bias=True)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        n, t, width = z.shape
        qkv = self.qkv(z).reshape(n, t, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # each (n, heads, t, head_dim)
        # softmax(q k^T * attention_scale) v, fused where the backend allows
        out = F.scaled_dot_product_attention(q, k, v, scale=self.attention_scale)
        result: torch.Tensor = self.proj(out.transpose(1, 2).reshape(n, t, width))
        return result


class FeedForward(nn.Module):
    """The position-wise feedforward branch FFN(z) = fc2(drop(phi(fc1(z)))) of laws Sec. 3.1;
    ``fc1`` (width -> mlp_ratio width) has role ``branch_in``, ``fc2`` role ``branch_out``."""

    def __init__(
        self, width: int, hidden: int, phi: Callable[[torch.Tensor], torch.Tensor], dropout: float
    ) -> None:
        super().__init__()
        self.phi = phi
        self.fc1 = ScaledLinear(width, hidden, "branch_in", bias=True)
        self.fc2 = ScaledLinear(hidden, width, "branch_out", bias=True)
        self.drop = _dropout(dropout)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        result: torch.Tensor = self.fc2(self.drop(self.phi(self.fc1(z))))
        return result


class TransformerBlock(nn.Module):
    """One Transformer block: two sequential residual updates, two depth units (laws Sec. 3.1).

    * ``norm="pre"``:  z <- z + Attn(LN_1(z)), z <- z + FFN(LN_2(z)).
    * ``norm="post"``: z <- LN_1(z + Attn(z)), z <- LN_2(z + FFN(z)).

    Dropout (if any) acts on each branch output before the addition.
    """

    attn: nn.Module  # self-attention (the GPT's block puts its causal one here)

    def __init__(
        self,
        width: int,
        heads: int,
        hidden: int,
        *,
        norm: str,
        phi: Callable[[torch.Tensor], torch.Tensor],
        dropout: float,
    ) -> None:
        super().__init__()
        self.pre = norm == "pre"
        self.ln1 = nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = FeedForward(width, hidden, phi, dropout)
        self.drop = _dropout(dropout)
        if self.pre:  # the norms sit inside the branches (post-LN: on the stream)
            in_branch(self.ln1, self.ln2)

    def update(
        self, ln: nn.Module, branch: nn.Module, z: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One residual update with branch ``branch``: the new stream and the branch output."""
        if self.pre:
            delta = self.drop(branch(ln(z)))
            return z + delta, delta
        delta = self.drop(branch(z))
        return ln(z + delta), delta

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        z, _ = self.update(self.ln1, self.attn, z)
        z, _ = self.update(self.ln2, self.mlp, z)
        return z


class ViT(nn.Module):
    """Vision Transformer (laws Sec. 3.1, 3.5; Dosovitskiy et al. 2020) on images ``(C, H, W)``
    or 1D signals ``(C, length)``.

    z_0 = [cls; patch_proj(patches(x))] + pos (patch projection role ``input``, ``cls_token``
    role ``class_token``, ``pos_embed`` role ``token``), D :class:`TransformerBlock` s, then
    f = head(LN(z_D[class token])) (role ``output``). ``depth`` is D; the rule table's L is the
    number of residual branches, ``plan_depth = 2 D``, and the effective depth of laws Sec. 3.5
    is L_tr = 2 D + 2 (stem and head counted as one unit each).
    """

    #: AM-muP depth units (laws App. D, Eq. 36/40): the states after each attention and MLP
    #: unit, without the embedding and the logits (probes.update_energy)
    am_units = "sub-blocks"

    def __init__(
        self,
        input_shape: tuple[int, ...],
        n_out: int,
        width: int,
        depth: int,
        *,
        patch_size: int = 4,
        heads: int = 4,
        mlp_ratio: int = 4,
        norm: str = "pre",
        activation: str = "gelu",
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        input_shape = tuple(input_shape)
        if len(input_shape) not in (2, 3):
            raise ConfigError(
                "ViT expects per-sample inputs of shape (channels, length) or "
                f"(channels, height, width), got shape {input_shape}"
            )
        for name, v in (
            ("input shape entries", min(input_shape)), ("output size", n_out), ("width", width),
            ("depth", depth), ("patch size", patch_size), ("heads", heads),
        ):
            if v < 1:
                raise ConfigError(f"{name} must be >= 1, got {v}")
        if width % heads:
            raise ConfigError(
                f"width must be divisible by heads, got width={width}, heads={heads}"
            )
        hidden = mlp_ratio * width
        if hidden < 1 or hidden != int(hidden):
            raise ConfigError(
                f"mlp_ratio * width must be a whole number >= 1, got mlp_ratio={mlp_ratio}"
            )
        if norm not in NORM_STYLES:
            raise ConfigError(f"norm must be one of {', '.join(NORM_STYLES)}, got {norm!r}")
        if not 0.0 <= dropout < 1.0:
            raise ConfigError(f"dropout must be in [0, 1), got {dropout}")
        channels, *spatial = input_shape
        if any(s % patch_size for s in spatial):
            raise ConfigError(
                f"input size {tuple(spatial)} is not divisible by patch_size={patch_size}; "
                "pick a patch size that divides every spatial dimension"
            )
        phi = get_activation(activation)
        self.activation_name = activation
        self.width, self.depth, self.norm_style = width, depth, norm
        self.plan_depth = 2 * depth  # residual branches K (the rule table's L)
        self.effective_depth = 2 * depth + 2  # laws Sec. 3.1/3.5: L_tr = 2 D + O(1)
        self.patch_size = patch_size
        self.grid = tuple(s // patch_size for s in spatial)
        self.n_patches = math.prod(self.grid)
        self.patch_dim = channels * patch_size ** len(spatial)

        self.patch_proj = ScaledLinear(self.patch_dim, width, "input", bias=True)
        self.cls_token = nn.Parameter(torch.empty(1, 1, width))
        self.pos_embed = nn.Parameter(torch.empty(1, self.n_patches + 1, width))
        nn.init.trunc_normal_(self.cls_token, std=0.02)  # laws Sec. 3.1: small-variance init
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        self.param_roles = {"cls_token": "class_token", "pos_embed": "token"}
        self.drop = _dropout(dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(width, heads, int(hidden), norm=norm, phi=phi, dropout=dropout)
            for _ in range(depth)
        )
        self.final_norm = nn.LayerNorm(width)
        self.head = ScaledLinear(width, n_out, "output", bias=True)

    def patches(self, x: torch.Tensor) -> torch.Tensor:
        """Non-overlapping patches, flattened channel-major: (N, C, *spatial) -> (N, P, C p^d)."""
        p = self.patch_size
        n, c = x.shape[:2]
        if len(self.grid) == 1:
            x = x.reshape(n, c, self.grid[0], p).permute(0, 2, 1, 3)
        else:
            gh, gw = self.grid
            x = x.reshape(n, c, gh, p, gw, p).permute(0, 2, 4, 1, 3, 5)
        return x.reshape(n, self.n_patches, self.patch_dim)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """z_0 = [cls; patch_proj(patches(x))] + pos, the token representations of the stem."""
        z = self.patch_proj(self.patches(x))
        cls = self.cls_token.expand(z.shape[0], -1, -1)
        result: torch.Tensor = self.drop(torch.cat((cls, z), dim=1) + self.pos_embed)
        return result

    def trace(self, x: torch.Tensor) -> Trace:
        """Forward pass that keeps the stream after the stem and after each of the 2 D residual
        updates (``streams``, 2 D + 1 of them) and each branch output (``increments``)."""
        z = self.embed(x)
        tr = Trace(out=z, streams=[z])
        for blk in cast("Iterable[TransformerBlock]", self.blocks):
            for ln, branch in ((blk.ln1, blk.attn), (blk.ln2, blk.mlp)):
                z, delta = blk.update(ln, branch, z)
                tr.increments.append(delta)
                tr.streams.append(z)
        tr.out = self.head(self.final_norm(z[:, 0]))
        return tr

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.embed(x)
        for blk in self.blocks:
            z = blk(z)
        result: torch.Tensor = self.head(self.final_norm(z[:, 0]))
        return result

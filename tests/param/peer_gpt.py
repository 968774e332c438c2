"""The peers of ``test_peer_agreement.py``, written from their published rules (no depthscale
code): a pre-LN GPT in plain torch with the peers' explicit multipliers, and the per-parameter
rules by which each peer scales its settings from a base model to a scaled one.

* muP as the ``mup`` package applies it (Yang et al. 2022, TP-V Table 3 and 8): a parameter is
  *matrix-like* (two dimensions grow with width), *vector-like* (one) or *scalar-like* (none),
  read from its shape in the base and the scaled model. MuSGD multiplies a vector-like
  parameter's LR by its width multiplier and divides a matrix-like one's by its fan-in/fan-out
  multiplier ratio; MuAdam divides a matrix-like parameter's LR by its fan-in multiplier; both
  leave a scalar-like one (the readout's bias) at the base LR and (``decoupled_wd=False``)
  scale the weight decay by the inverse of the LR factor, so lr * wd per step is kept. Hidden
  weights keep the fan-in init std (x 1/sqrt(fan-in multiplier)); the readout (MuReadout, or
  MuSharedReadout on the embedding table) multiplies its input by output_mult / width_mult and
  keeps its weight's init std; attention scores are scaled by 1/d_head.
* CompleteP as nanoGPT-mup's completep branch writes it (Dey et al. 2025, depth exponent
  alpha = 1): the same width rules for Adam (hidden weights' LR and decoupled decay / and x
  width_mult), every residual branch's output (bias included) x 1/depth_mult^alpha, Adam LR of
  everything inside a branch x depth_mult^(alpha - 1) (1 at alpha = 1), Adam eps x
  1/(width_mult depth_mult^alpha), logits / width_mult. It defines no SGD rule; under SGD the
  peer takes TP-VI's depth LR factor depth_mult^(2 alpha - 1) (Yang et al. 2023; the SGD form
  of the Adam factor above) for every parameter inside a branch, with the weight decay again
  scaled by the inverse LR factor.

The peer GPT computes, for canonical parameters (``wte`` (vocab, n), ``wpe`` (ctx, n),
``h.{i}.{ln1,qkv,proj,ln2,fc,out}.{w,b}``, ``ln_f.{w,b}``, ``head.{w,b}``):
z0 = input_mult wte[tokens] + wpe; per block z += res_mult proj(attn(qkv(LN1 z))),
z += res_mult out(gelu(fc(LN2 z))); logits = (out_mult LN_f z) head^T + head_b, or
(out_mult LN_f z) wte^T when tied."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch
import torch.nn.functional as F

#: the layer outputs the peer records (per block ``h.{i}.``), and ``logits``
LAYERS = ("embed", "ln1", "qkv", "proj", "ln2", "fc", "out", "ln_f", "logits")


@dataclass(frozen=True)
class Config:
    """The peer's explicit multipliers and sizes."""

    n: int
    blocks: int
    heads: int
    tied: bool
    attn_scale: float
    res_mult: float = 1.0
    out_mult: float = 1.0
    input_mult: float = 1.0


def forward(p: dict[str, torch.Tensor], tokens: torch.Tensor,
            cfg: Config) -> dict[str, torch.Tensor]:
    """Every recorded layer output (``embed``, ``h.{i}.qkv``, ..., ``ln_f``, ``logits``)."""
    out: dict[str, torch.Tensor] = {}
    b, t = tokens.shape
    n, hd = cfg.n, cfg.n // cfg.heads

    def ln(x: torch.Tensor, name: str) -> torch.Tensor:
        return F.layer_norm(x, (n,), p[f"{name}.w"], p.get(f"{name}.b"), 1e-5)

    def heads(x: torch.Tensor) -> torch.Tensor:
        return x.reshape(b, t, cfg.heads, hd).transpose(1, 2)

    out["embed"] = cfg.input_mult * p["wte"][tokens]
    z = out["embed"] + p["wpe"][:t]
    for i in range(cfg.blocks):
        h = f"h.{i}."
        out[h + "ln1"] = ln(z, h + "ln1")
        out[h + "qkv"] = F.linear(out[h + "ln1"], p[h + "qkv.w"], p.get(h + "qkv.b"))
        q, k, v = (heads(x) for x in out[h + "qkv"].split(n, dim=-1))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=cfg.attn_scale)
        y = y.transpose(1, 2).reshape(b, t, n)
        out[h + "proj"] = cfg.res_mult * F.linear(y, p[h + "proj.w"], p.get(h + "proj.b"))
        z = z + out[h + "proj"]
        out[h + "ln2"] = ln(z, h + "ln2")
        out[h + "fc"] = F.linear(out[h + "ln2"], p[h + "fc.w"], p.get(h + "fc.b"))
        out[h + "out"] = cfg.res_mult * F.linear(F.gelu(out[h + "fc"]), p[h + "out.w"],
                                                  p.get(h + "out.b"))
        z = z + out[h + "out"]
    out["ln_f"] = ln(z, "ln_f")
    read = out["ln_f"] * cfg.out_mult
    out["logits"] = (F.linear(read, p["wte"]) if cfg.tied
                     else F.linear(read, p["head.w"], p.get("head.b")))
    return out


def group(name: str) -> str:
    """The parameter's group: its name without the block index (``h.3.qkv.w`` -> ``h.qkv.w``)."""
    return re.sub(r"^h\.\d+\.", "h.", name)


def base_name(name: str, blocks: int, base_blocks: int) -> str:
    """The base model's parameter or layer at the same relative depth (block i -> i B0 // B)."""
    m = re.match(r"^h\.(\d+)\.(.*)$", name)
    return name if m is None else f"h.{int(m[1]) * base_blocks // blocks}.{m[2]}"


def init_kind(name: str) -> str:
    """``zeros`` for biases, ``ones`` for LayerNorm gains, else ``normal``."""
    if name.endswith(".b"):
        return "zeros"
    return "ones" if re.search(r"(ln1|ln2|ln_f)\.w$", name) else "normal"


@dataclass(frozen=True)
class Scaling:
    """A peer and its size change: ``width_mult`` = n/n0, ``depth_mult`` = blocks/blocks0."""

    peer: str  # "mup" or "completep"
    width_mult: float
    depth_mult: float = 1.0
    alpha: float = 1.0  # CompleteP's depth exponent (nanoGPT-mup depth_alpha_exp)


@dataclass(frozen=True)
class Rule:
    """One parameter's settings in the scaled model relative to the base model (scaled/base):
    its own LR, weight decay, Adam eps and init std, and the forward multiplier it is used
    with (the readout's output_mult/width_mult, the branch's 1/depth_mult^alpha)."""

    lr: float
    wd: float
    eps: float
    init: float
    mult: float


def rule(name: str, base_shape: tuple[int, ...], shape: tuple[int, ...], optimizer: str,
         s: Scaling) -> Rule:
    """The peer's rule for canonical parameter ``name`` (shapes in the layout (out, in))."""
    grows = [c != b for b, c in zip(base_shape, shape, strict=True)]
    mult_of = [c / b for b, c in zip(base_shape, shape, strict=True)]
    ninf = sum(grows)
    sgd = optimizer == "sgd"
    if ninf == 2:  # matrix-like: mup divides by the fan-in (/fan-out) multiplier
        fan_out, fan_in = mult_of[0], mult_of[1]
        lr = fan_out / fan_in if sgd else 1 / fan_in
        init = 1 / math.sqrt(fan_in)
    elif ninf == 1:  # vector-like: MuSGD x its width multiplier, MuAdam x 1
        lr = next(m for m, g in zip(mult_of, grows, strict=True) if g) if sgd else 1.0
        init = 1.0
    elif ninf == 0:  # scalar-like (the readout's bias): the base LR
        lr, init = 1.0, 1.0
    else:
        raise ValueError(f"{name}: more than two dimensions grow")
    mult = 1 / s.width_mult if name == "head.w" else 1.0  # MuReadout: x output_mult/width_mult
    eps = 1.0
    if s.peer == "completep":
        in_branch = name.startswith("h.")
        writes = bool(re.search(r"\.(proj|out)\.[wb]$", name))
        if writes:
            mult /= s.depth_mult ** s.alpha  # x + branch(x) / depth_mult^alpha
        if in_branch:  # TP-VI's depth LR factor on everything inside a branch
            lr *= s.depth_mult ** ((2 * s.alpha - 1) if sgd else (s.alpha - 1))
        eps = 1 / (s.width_mult * s.depth_mult ** s.alpha) if not sgd else 1.0
    elif s.peer != "mup":
        raise ValueError(f"unknown peer {s.peer!r}")
    return Rule(lr=lr, wd=1 / lr, eps=eps, init=init, mult=mult)


def effective_lr_ratio(r: Rule, optimizer: str) -> float:
    """scaled/base of the LR of the effective weight ``mult * W``: an SGD step on W moves it by
    lr mult^2 per unit of its gradient, an Adam step by lr mult."""
    return r.lr * r.mult ** (2 if optimizer == "sgd" else 1)


def attention_ratio(d_head0: int, d_head: int) -> float:
    """muP's attention 1/d_head (TP-V): scaled/base of the softmax scale."""
    return d_head0 / d_head


def readout_ratio(s: Scaling) -> float:
    """MuSharedReadout / nanoGPT's tied readout: the logits' multiplier / width_mult."""
    return 1 / s.width_mult

"""Zoo entries for channel-last and inverted-residual vision backbones (issue 40).

Swin (Liu et al. 2021) as torchvision lays it out keeps its stream as (B, H, W, C) and windows
it; its Linear layers act on the last dimension, so the stream's width is the channel dim, not
``shape[1]``. Hugging Face's Swin keeps (B, H*W, C) between its layers and holds a relative
position bias table passed to attention as a mask. A ConvNeXt whose stream stays channel-last
(the depthwise conv permutes in and out). MobileNetV2 (Sandler et al. 2018): inverted residual
blocks (1x1 expand -> depthwise 3x3 -> 1x1 project, linear bottleneck), added to the input only
where stride and channels allow; the first block (a channel change) is a plain stack of layers,
and its projection is a hidden layer, not a second input layer.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from architectures import CLASSES, IMAGE, Arch, Truth, _r, seeded
from torch import nn

__all__ = ["ARCHS"]

PATCH, WINDOW = 2, 2  # 8x8 digits -> a 4x4 grid of patches, 2x2 windows


# ---- Swin, torchvision's layout: the stream is (B, H, W, C) ------------------------------------

class WindowAttention(nn.Module):
    """Multi-head self-attention inside non-overlapping windows of the (B, H, W, C) grid, with
    a learned relative position bias per head and, when shifted, a cyclic shift and its mask."""

    def __init__(self, width: int, heads: int, shift: int) -> None:
        super().__init__()
        self.heads, self.shift = heads, shift
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.relative_position_bias_table = nn.Parameter(
            torch.zeros((2 * WINDOW - 1) ** 2, heads))
        coords = torch.stack(torch.meshgrid(torch.arange(WINDOW), torch.arange(WINDOW),
                                            indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + WINDOW - 1
        self.register_buffer("index", rel[..., 0] * (2 * WINDOW - 1) + rel[..., 1],
                             persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, h, w, c = x.shape
        if self.shift:
            x = torch.roll(x, (-self.shift, -self.shift), dims=(1, 2))
        win = x.view(b, h // WINDOW, WINDOW, w // WINDOW, WINDOW, c).permute(0, 1, 3, 2, 4, 5)
        win = win.reshape(-1, WINDOW * WINDOW, c)
        qkv = self.qkv(win).reshape(win.shape[0], -1, 3, self.heads, c // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        q = q * (c // self.heads) ** -0.5
        attn = q @ k.transpose(-2, -1)
        bias = self.relative_position_bias_table[self.index.flatten()]
        attn = attn + bias.view(WINDOW * WINDOW, WINDOW * WINDOW, -1).permute(2, 0, 1)
        if self.shift:
            attn = attn + self._mask(h, w, x.device).repeat(b, 1, 1).unsqueeze(1)
        out = (attn.softmax(-1) @ v).transpose(1, 2).reshape(win.shape[0], -1, c)
        out = self.proj(out).view(b, h // WINDOW, w // WINDOW, WINDOW, WINDOW, c)
        out = out.permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, c)
        return torch.roll(out, (self.shift, self.shift), dims=(1, 2)) if self.shift else out

    def _mask(self, h: int, w: int, device: torch.device) -> torch.Tensor:
        """-100 between positions that the cyclic shift brought from different regions."""
        region = torch.zeros(h, w, device=device)
        cuts = (slice(0, -WINDOW), slice(-WINDOW, -self.shift), slice(-self.shift, None))
        for i, (hs, ws) in enumerate((a, b) for a in cuts for b in cuts):
            region[hs, ws] = i
        ids = region.view(h // WINDOW, WINDOW, w // WINDOW, WINDOW).permute(0, 2, 1, 3)
        ids = ids.reshape(-1, WINDOW * WINDOW)
        diff = ids[:, None, :] - ids[:, :, None]
        return diff.masked_fill(diff != 0, -100.0).masked_fill(diff == 0, 0.0)


class SwinBlock(nn.Module):
    """x + attn(norm1(x)), then x + mlp(norm2(x)) (MLP ratio 2), on the (B, H, W, C) stream."""

    def __init__(self, width: int, shift: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = WindowAttention(width, 2, shift)
        self.fc1, self.fc2 = nn.Linear(width, 2 * width), nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class SwinNHWC(nn.Module):
    """Patch embedding (conv, then channel-last LayerNorm), one stage of ``depth`` blocks
    (shifted windows in every second one), a final norm, a pooled linear head."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.patch = nn.Conv2d(IMAGE[0], width, PATCH, stride=PATCH)
        self.patch_norm = nn.LayerNorm(width)
        self.blocks = nn.Sequential(*(SwinBlock(width, (i % 2) * WINDOW // 2)
                                      for i in range(depth)))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, CLASSES)
        for m in self.modules():  # torchvision's Swin: truncated normal 0.02, zero biases
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)
            elif isinstance(m, WindowAttention):
                nn.init.trunc_normal_(m.relative_position_bias_table, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_norm(self.patch(x).permute(0, 2, 3, 1))  # (B, H, W, C)
        x = self.norm(self.blocks(x))
        return self.head(x.mean(dim=(1, 2)))


def build_swin_nhwc(width: int, depth: int, seed: int) -> nn.Module:
    with seeded(seed):
        return SwinNHWC(width, depth)


def _swin_nhwc_truth(width: int, depth: int) -> Truth:
    return Truth(width, 2 * depth, depth, False, {
        "patch.weight": _r("input"), "head.weight": _r("output"),
        "blocks.*.attn.qkv.weight": _r("branch_in"),
        "blocks.*.attn.proj.weight": _r("branch_out"),
        "blocks.*.attn.relative_position_bias_table": _r("branch_vector"),
        "blocks.*.fc1.weight": _r("branch_in"), "blocks.*.fc2.weight": _r("branch_out"),
        "blocks.*.norm?.weight": _r("branch_norm")},
        notes="stream (B, H, W, C): the width is the channel dim (last), not shape[1] (the "
              "grid's height); attention + MLP branch per block; relative position bias "
              "table added to the scores")


# ---- ConvNeXt with a channel-last stream ---------------------------------------------------

class ChannelLastBlock(nn.Module):
    """ConvNeXt's block on a (B, H, W, C) stream: depthwise 7x7 (permuted to NCHW and back),
    LayerNorm, Linear up (x4), GELU, Linear down, layer scale, added to the input."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(width, width, 7, padding=3, groups=width)
        self.norm = nn.LayerNorm(width)
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
        self.gamma = nn.Parameter(1e-6 * torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.dwconv(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
        return x + self.gamma * self.down(F.gelu(self.up(self.norm(h))))


class ConvNeXtNHWC(nn.Module):
    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(IMAGE[0], width, 2, stride=2)
        self.stem_norm = nn.LayerNorm(width)
        self.blocks = nn.Sequential(*(ChannelLastBlock(width) for _ in range(depth)))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, CLASSES)
        for m in self.modules():  # timm's ConvNeXt: truncated normal 0.02, zero biases
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem_norm(self.stem(x).permute(0, 2, 3, 1))  # (B, 4, 4, C) from here on
        return self.head(self.norm(self.blocks(x).mean(dim=(1, 2))))


def build_convnext_nhwc(width: int, depth: int, seed: int) -> nn.Module:
    with seeded(seed):
        return ConvNeXtNHWC(width, depth)


def _convnext_nhwc_truth(width: int, depth: int) -> Truth:
    return Truth(width, depth, depth, False, {
        "stem.weight": _r("input"), "head.weight": _r("output"),
        "blocks.*.dwconv.weight": _r("branch_in"), "blocks.*.up.weight": _r("hidden"),
        "blocks.*.down.weight": _r("hidden", "branch_out"),
        "blocks.*.gamma": _r("branch_norm")},
        kept=("blocks.*.gamma",),
        notes="stream (B, H, W, C) between blocks; one branch per block; layer scale 1e-6; "
              "the depthwise conv reads the stream (permuted to NCHW)")


# ---- Hugging Face Swin: (B, H*W, C) between layers ------------------------------------------

def build_hf_swin(width: int, depth: int, seed: int) -> nn.Module:
    """One stage of ``depth`` Swin layers (a second stage would merge the 4x4 grid to 2x2 at
    twice the width): patch 2, window 2, MLP ratio 2, 2 heads."""
    import transformers

    with seeded(seed), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = transformers.SwinConfig(
            image_size=IMAGE[1], patch_size=PATCH, num_channels=IMAGE[0], embed_dim=width,
            depths=[depth], num_heads=[2], window_size=WINDOW, mlp_ratio=2.0,
            drop_path_rate=0.0, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
            num_labels=CLASSES, attn_implementation="sdpa")
        return transformers.SwinForImageClassification(cfg)


_SWIN = "swin.encoder.layers.0.blocks.*"


def _hf_swin_truth(width: int, depth: int) -> Truth:
    return Truth(width, 2 * depth, depth, False, {
        "swin.embeddings.patch_embeddings.projection.weight": _r("input"),
        "classifier.weight": _r("output"),
        f"{_SWIN}.attention.[qkv]_proj.weight": _r("branch_in"),
        f"{_SWIN}.attention.o_proj.weight": _r("branch_out"),
        f"{_SWIN}.mlp.fc1.weight": _r("branch_in"), f"{_SWIN}.mlp.fc2.weight": _r("branch_out"),
        f"{_SWIN}.layernorm_*.weight": _r("branch_norm"),
        f"{_SWIN}.attention.relative_position_bias.relative_position_bias_table":
            _r("branch_vector")},
        notes="stream (B, H*W, C) between layers, viewed as (B, H, W, C) and windowed inside the "
              "attention branch; the relative position bias table reaches the scores as "
              "F.scaled_dot_product_attention's mask")


# ---- MobileNetV2 from Hugging Face's layers --------------------------------------------------

def build_hf_mobilenetv2(width: int, depth: int, seed: int) -> nn.Module:
    """``MobileNetV2ForImageClassification`` with depth_multiplier width/32, shortened as a user
    does it: the model is made without memory (its 16 fixed layers are not kept), then given
    Hugging Face's own stem (3x3 conv to ``width``, depthwise, 1x1 project to width/2), one
    inverted residual that changes the channels (width/2 -> width, no addition), ``depth``
    residual ones at ``width`` (expand 6x), the final 1x1 conv (to 4 x width, the model's
    1280 at this scale) and a classifier, all with the model's own init (N(0, 0.02) convs
    and linears, BatchNorm 1 and 0)."""
    import transformers
    from transformers.models.mobilenet_v2 import modeling_mobilenet_v2 as hf

    with seeded(seed), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = transformers.MobileNetV2Config(
            num_channels=IMAGE[0], image_size=IMAGE[1], depth_multiplier=width / 32,
            classifier_dropout_prob=0.0, num_labels=CLASSES)
        with torch.device("meta"):
            model = transformers.MobileNetV2ForImageClassification(cfg)
        body = model.mobilenet_v2
        half = hf.apply_depth_multiplier(cfg, 16)
        body.conv_stem = hf.MobileNetV2Stem(cfg, IMAGE[0], width, half)
        body.layer = nn.ModuleList([
            hf.MobileNetV2InvertedResidual(cfg, half, width, stride=1),
            *(hf.MobileNetV2InvertedResidual(cfg, width, width, stride=1)
              for _ in range(depth))])
        body.conv_1x1 = hf.MobileNetV2ConvLayer(cfg, width, 4 * width, kernel_size=1)
        model.classifier = nn.Linear(4 * width, CLASSES)
        for m in model.modules():
            model._init_weights(m)
        return model


_MB = "mobilenet_v2.layer"


def _hf_mobilenetv2_truth(width: int, depth: int) -> Truth:
    conv = "convolution.weight"
    return Truth(width, depth, depth, False, {
        f"mobilenet_v2.conv_stem.first_conv.{conv}": _r("input"),
        f"mobilenet_v2.conv_stem.conv_3x3.{conv}": _r("hidden"),
        f"mobilenet_v2.conv_stem.reduce_1x1.{conv}": _r("hidden"),
        f"{_MB}.0.*.{conv}": _r("hidden"),  # channel change: no residual addition
        f"{_MB}.[1-9]*.expand_1x1.{conv}": _r("branch_in"),
        f"{_MB}.[1-9]*.conv_3x3.{conv}": _r("hidden"),
        f"{_MB}.[1-9]*.reduce_1x1.{conv}": _r("branch_out"),
        f"mobilenet_v2.conv_1x1.{conv}": _r("hidden"),
        "classifier.weight": _r("output")},
        notes="inverted residuals: 1x1 expand (6x) -> depthwise 3x3 -> 1x1 project (BatchNorm, "
              "no activation: a linear bottleneck), added to the input where the channels stay; "
              "layer 0 changes them (width/2 -> width), so its projection is a hidden layer on "
              "the main path; the stem's depthwise and the final 1x1 conv are hidden too")


ARCHS: list[Arch] = [
    Arch("swin-nhwc", build_swin_nhwc, "images", _swin_nhwc_truth),
    Arch("convnext-nhwc", build_convnext_nhwc, "images", _convnext_nhwc_truth),
    Arch("hf-swin", build_hf_swin, "images", _hf_swin_truth, logits="logits", hf=True),
    Arch("hf-mobilenetv2", build_hf_mobilenetv2, "images", _hf_mobilenetv2_truth,
         logits="logits", hf=True),
]


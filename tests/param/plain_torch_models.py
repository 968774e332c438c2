"""User models in plain torch, as a practitioner writes them (no depthscale code): a GPT
(pre-LN blocks x + attn(ln1(x)), x + mlp(ln2(x)), causal attention through
F.scaled_dot_product_attention, tied or untied embeddings, with or without biases) and a
torchvision-style ResNet (in-place ``out += identity``, projection shortcuts)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    """Pre-LN block: x + attn(ln1(x)), then x + mlp(ln2(x))."""

    def __init__(self, n: int, heads: int, bias: bool, scale: float | None = None) -> None:
        super().__init__()
        self.heads, self.scale = heads, scale
        self.ln1, self.ln2 = nn.LayerNorm(n, bias=bias), nn.LayerNorm(n, bias=bias)
        self.qkv = nn.Linear(n, 3 * n, bias=bias)
        self.proj = nn.Linear(n, n, bias=bias)
        self.fc = nn.Linear(n, 4 * n, bias=bias)
        self.out = nn.Linear(4 * n, n, bias=bias)

    def attn(self, x: torch.Tensor) -> torch.Tensor:
        b, t, n = x.shape
        q, k, v = self.qkv(x).split(n, dim=-1)
        q, k, v = (z.view(b, t, self.heads, n // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
        return self.proj(y.transpose(1, 2).reshape(b, t, n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """Token and position embeddings, ``blocks`` pre-LN blocks, a final LayerNorm, a head.
    ``scale`` is the softmax scale passed to F.scaled_dot_product_attention (None: torch's
    1/sqrt(d_head))."""

    def __init__(self, vocab: int = 50, n: int = 32, blocks: int = 3, ctx: int = 16,
                 tied: bool = True, bias: bool = True, heads: int = 4,
                 scale: float | None = None) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, n), nn.Embedding(ctx, n)
        self.h = nn.ModuleList(Block(n, heads, bias, scale) for _ in range(blocks))
        self.ln_f = nn.LayerNorm(n, bias=bias)
        self.lm_head = nn.Linear(n, vocab, bias=False)
        if tied:
            self.lm_head.weight = self.wte.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class Bottleneck(nn.Module):
    """torchvision-style basic block: in-place ``out += identity``, projection shortcut."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                         nn.BatchNorm2d(cout)) if stride != 1 or cin != cout
                           else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        out += identity
        return F.relu(out)


def resnet() -> nn.Sequential:
    """Stem conv + BN, three basic blocks (8 -> 8, 8 -> 16 with stride 2, 16 -> 16), pool, head."""
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                         nn.ReLU(), Bottleneck(8, 8, 1), Bottleneck(8, 16, 2),
                         Bottleneck(16, 16, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(16, 10))

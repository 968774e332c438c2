"""The muP family's rule for a class token (role ``class_token``: a raw vector joined to the
sequence as a position of its own), issue 40 (b). At its position it is the whole input, an
embedding row read by a constant index: an input weight of fan_in 1 (TP-V Table 3), drawn as
the input rule draws an embedding, N(0, 1) with Adam LR x 1. Before, it was a ``token`` drawn at
0.02 with the same LR, so one Adam step moved it by lr/0.02 of itself; a ViT's head reads only
that position, and CompleteP's width check FAILed on a correct plan (hf-vit: stream update
-0.35 [-0.51, -0.19] per width octave). A position table added to the patches keeps 0.02."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import depthscale as ds

PATCH, GRID, HEADS, CLASSES = 2, 4, 2, 10  # 8x8 images in 2x2 patches: 16 patches + CLS


class Block(nn.Module):
    """Pre-LN encoder block (no mask): x + attn(ln1 x), x + mlp(ln2 x); q, k, v separate, the
    softmax scale in a float attribute (the plan sets it to muP's 1/d_head)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.scaling = (n // HEADS) ** -0.5
        self.ln1, self.ln2 = nn.LayerNorm(n), nn.LayerNorm(n)
        self.q, self.k, self.v, self.o = (nn.Linear(n, n) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(n, 4 * n), nn.Linear(4 * n, n)

    def attn(self, x: torch.Tensor) -> torch.Tensor:
        b, t, n = x.shape
        q, k, v = (f(x).view(b, t, HEADS, n // HEADS).transpose(1, 2)
                   for f in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, scale=self.scaling)
        return self.o(y.transpose(1, 2).reshape(b, t, n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyViT(nn.Module):
    """A ViT as a user writes one: patch projection, a class token and positions as raw
    parameters at 0.02, pre-LN blocks, the head on the class token after a final LayerNorm."""

    def __init__(self, n: int, blocks: int) -> None:
        super().__init__()
        self.patch = nn.Linear(PATCH * PATCH, n)
        self.cls = nn.Parameter(0.02 * torch.randn(1, 1, n))
        self.pos = nn.Parameter(0.02 * torch.randn(1, GRID * GRID + 1, n))
        self.blocks = nn.ModuleList(Block(n) for _ in range(blocks))
        self.ln = nn.LayerNorm(n)
        self.head = nn.Linear(n, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b = x.shape[0]
        p = x.reshape(b, GRID, PATCH, GRID, PATCH).permute(0, 1, 3, 2, 4)
        z = self.patch(p.reshape(b, GRID * GRID, PATCH * PATCH))
        z = torch.cat([self.cls.expand(b, -1, -1), z], dim=1) + self.pos
        for block in self.blocks:
            z = block(z)
        return self.head(self.ln(z[:, 0]))


def _digits() -> tuple[torch.Tensor, torch.Tensor]:
    data = ds.data.load("digits", seed=0, n_train=256, n_test=64)
    return data.x_train[:8], data.y_train[:8]


def _make(recipe: str, x: torch.Tensor):  # type: ignore[no-untyped-def]
    def make(width: int, depth: int, seed: int) -> tuple[nn.Module, ds.param.Plan]:
        torch.manual_seed(seed)
        model = TinyViT(width, depth)
        st = ds.param.inspect(model, x)
        p = ds.param.plan(recipe, width=st.width, depth=st.depth)
        p.apply(model, structure=st, example_input=x, seed=seed)
        return model, p
    return make


@pytest.mark.parametrize("recipe", ["mup", "depth-mup", "completep"])
def test_a_class_token_takes_the_relative_adam_step_of_an_embedding_row(recipe: str) -> None:
    """Per Adam step a weight moves by about lr c_adam per entry; relative to its init std
    that is lr c_adam / b. An embedding row (input rule, fan_in 1) has c_adam / b = 1; the
    class token, read by a constant index, must have the same (0.02 gave 50). The positions,
    added to the patch projection's output, stay a ``token`` at 0.02; SP keeps 0.02 for both."""
    x, _ = _digits()
    model = TinyViT(64, 2)
    st = ds.param.inspect(model, x)
    assert (st.roles["cls"], st.roles["pos"]) == ("class_token", "token")
    p = ds.param.plan(recipe, width=st.width, depth=st.depth)
    p.apply(model, structure=st, example_input=x, seed=0)
    lr = 1e-3
    groups = {id(q): g for g in p.optimizer(model, "adam", lr=lr).param_groups
              for q in g["params"]}
    relative = groups[id(model.cls)]["lr"] / float(model.cls.detach().std())
    assert math.isclose(relative, lr, rel_tol=0.25), relative / lr
    assert float(model.pos.detach().std()) < 0.05
    sp = TinyViT(64, 2)
    ds.param.plan("sp", width=64, depth=st.depth).apply(sp, example_input=x, seed=0)
    assert float(sp.cls.detach().std()) < 0.05


def test_a_cls_readout_vit_passes_the_width_check_under_completep() -> None:
    """CompleteP, Adam at lr 3e-3, one step, widths 32-256 at one block, seeds 0-3: every
    width slope lies in its band (PASS), and SP on the same model FAILs. With the token at
    0.02 (the old rule) the stream update fell, -0.21 [-0.41, +0.11] per octave, output -0.38
    [-0.63, -0.01] (INCONCLUSIVE; at the zoo's widths 32-128 and 2 seeds, -0.36 [-0.50, -0.22]
    and FAIL); drawn as an embedding row +0.05 [+0.01, +0.08] (PASS)."""
    x, y = _digits()
    seen = {}
    for recipe in ("completep", "sp"):
        seen[recipe] = ds.probes.coord_check(
            _make(recipe, x), x, y, widths=(32, 64, 128, 256), depths=(), base_width=64,
            base_depth=1, lr=3e-3, optimizer="adam", seeds=range(4))
    stream = seen["completep"].fit("stream", "update", "width")
    assert stream.finding == "supports", seen["completep"].table()
    assert seen["completep"].verdict == "PASS", seen["completep"].evidence
    assert seen["sp"].verdict == "FAIL", seen["sp"].evidence

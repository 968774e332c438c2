"""Your own Transformer, planned and checked: the README's "ten lines" as a script.

A GPT in plain torch (no depthscale layers, no roles written by hand) on the `markov` token
data; CompleteP with AdamW. Run: ``python examples/own_transformer.py`` (about a minute on a
laptop CPU; ``--tiny`` for a few seconds).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch import nn

import depthscale as ds


class Block(nn.Module):
    """Pre-LN block: causal attention branch, then an MLP branch."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.attention_head_dim = width // heads  # apply sets attention_scale from the recipe
        self.attention_scale = self.attention_head_dim ** -0.5
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc, self.out = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, n = x.shape
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2)
                   for z in self.qkv(self.ln1(x)).split(n, dim=-1))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           scale=self.attention_scale)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, n))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab: int, context: int, width: int, blocks: int, heads: int = 2) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Parameter(torch.zeros(context, width))
        self.blocks = nn.Sequential(*(Block(width, heads) for _ in range(blocks)))
        self.ln_f, self.head = nn.LayerNorm(width), nn.Linear(width, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.wte(tokens) + self.wpe[: tokens.shape[1]]
        return self.head(self.ln_f(self.blocks(x)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="smallest sizes (a smoke run)")
    tiny = parser.parse_args().tiny
    data = ds.data.load("markov", vocab=16, context=16, n_train=512 if tiny else 2048)
    x, y = data.x_train[:8], data.y_train[:8]

    def make(width: int, blocks: int, seed: int
             ) -> tuple[nn.Module, ds.param.Plan, ds.param.Structure]:
        torch.manual_seed(seed)
        model = GPT(16, 16, width, blocks)
        # --- the ten lines -------------------------------------------------------------------
        st = ds.param.inspect(model, x)                    # branches, roles, width, depth
        p = ds.param.plan("completep", st)                 # width and depth from the structure
        p.apply(model, structure=st, example_input=x, seed=seed)  # init, multipliers, attention
        return model, p, st                                # the checks reuse st, not read again

    model, p, _ = make(64, 2, 0)
    print(ds.param.inspect(model, x).summary())          # as apply left it (attention scale)
    opt = p.optimizer(model, "adam", lr=3e-3, weight_decay=0.1)  # per-role LR, eps, decay
    print(f"AdamW with {len(opt.param_groups)} parameter groups")
    widths, depths = ([64, 128], [1, 2]) if tiny else ([32, 64, 128], [1, 2, 4])
    rep = ds.probes.coord_check(make, x, y, widths=widths, depths=depths, base_width=64,
                                base_depth=1, lr=3e-3, optimizer="adam",
                                seeds=range(3))
    print(rep.table())
    lrs = [10 ** (k / 2) for k in range(-6, 2)]       # 1e-3 .. 3, half-decade steps
    chk = ds.probes.lr_transfer_check(make, data, lrs, depths=depths,
                                      base_width=64, optimizer="adam",
                                      steps=10 if tiny else 60, seeds=range(2 if tiny else 3))
    print(chk.table())
    print(ds.param.transfer_lr("completep", 3e-3, 2, 8, 64, 256, optimizer="adam"))


if __name__ == "__main__":
    main()

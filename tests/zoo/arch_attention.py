"""Zoo entries whose attention scale is not a kernel argument (issue 40): Hugging Face OPT, which
multiplies q by head_dim^-0.5 and calls attention with scaling 1.0, and Bloom, whose hand-written
ALiBi attention computes ``baddbmm(alibi, q, k^T, beta, alpha=1/sqrt(head_dim))`` then a softmax
(no ``F.scaled_dot_product_attention``). Both tied, pre-LN, built from tiny configs. And a
plain-torch GPT whose q, k, v come from one fused projection cut by ``split``, q then
multiplied by its ``scale`` attribute, attention called with scale 1."""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.nn.functional as F
from architectures import CONTEXT, HEADS, VOCAB, Arch, _r, _transformer_truth, seeded
from torch import nn

__all__ = ["ARCHS", "build_bloom", "build_fused_qkv", "build_opt"]


def _hf_eager(config_name: str, model_name: str, seed: int, attn: str, **config: Any
              ) -> nn.Module:
    import transformers

    with seeded(seed), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = getattr(transformers, config_name)(attn_implementation=attn, **config)
        return getattr(transformers, model_name)(cfg)


def build_opt(width: int, depth: int, seed: int) -> nn.Module:
    # pre-LN (do_layer_norm_before), learned positions (offset 2), lm_head tied to embed_tokens
    return _hf_eager("OPTConfig", "OPTForCausalLM", seed, "sdpa", vocab_size=VOCAB,
                     hidden_size=width, word_embed_proj_dim=width, num_hidden_layers=depth,
                     ffn_dim=4 * width, num_attention_heads=HEADS,
                     max_position_embeddings=CONTEXT, dropout=0.0, attention_dropout=0.0,
                     pad_token_id=0, bos_token_id=0, eos_token_id=0)


def build_bloom(width: int, depth: int, seed: int) -> nn.Module:
    # Bloom has no SDPA path: its own attention (ALiBi through baddbmm) is the one it runs
    return _hf_eager("BloomConfig", "BloomForCausalLM", seed, "eager", vocab_size=VOCAB,
                     hidden_size=width, n_layer=depth, n_head=HEADS, hidden_dropout=0.0,
                     attention_dropout=0.0, pad_token_id=0, bos_token_id=0, eos_token_id=0)


class FusedBlock(nn.Module):
    """x + proj(attn), attn from q, k, v = qkv(LN(x)).split(n), q * scale, SDPA(scale=1);
    then x + fc2(gelu(fc1(LN(x))))."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.scale = (n // HEADS) ** -0.5
        self.ln1, self.ln2 = nn.LayerNorm(n), nn.LayerNorm(n)
        self.qkv, self.proj = nn.Linear(n, 3 * n), nn.Linear(n, n)
        self.fc1, self.fc2 = nn.Linear(n, 4 * n), nn.Linear(4 * n, n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, n = x.shape
        q, k, v = (y.view(b, t, HEADS, n // HEADS).transpose(1, 2)
                   for y in self.qkv(self.ln1(x)).split(n, dim=-1))
        a = F.scaled_dot_product_attention(q * self.scale, k, v, is_causal=True, scale=1.0)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, n))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class FusedGPT(nn.Module):
    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.emb, self.pos = nn.Embedding(VOCAB, width), nn.Parameter(torch.zeros(CONTEXT, width))
        self.blocks = nn.Sequential(*(FusedBlock(width) for _ in range(depth)))
        self.ln, self.head = nn.LayerNorm(width), nn.Linear(width, VOCAB)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.emb(ids) + self.pos[: ids.shape[1]]
        return self.head(self.ln(self.blocks(h)))


def build_fused_qkv(width: int, depth: int, seed: int) -> nn.Module:
    with seeded(seed):
        return FusedGPT(width, depth)


_FUSED_ROLES = {"emb.weight": _r("input"), "pos": _r("token"), "head.weight": _r("output"),
                "blocks.*.qkv.weight": _r("branch_in"), "blocks.*.proj.weight": _r("branch_out"),
                "blocks.*.fc1.weight": _r("branch_in"), "blocks.*.fc2.weight": _r("branch_out"),
                "blocks.*.ln?.weight": _r("branch_norm"), "ln.weight": _r("norm")}

_OPT_ROLES = {"model.decoder.embed_tokens.weight": _r("input"),
              "model.decoder.embed_positions.weight": _r("token"),
              "model.decoder.layers.*.self_attn.q_proj.weight": _r("branch_in"),
              "model.decoder.layers.*.self_attn.k_proj.weight": _r("branch_in"),
              "model.decoder.layers.*.self_attn.v_proj.weight": _r("branch_in"),
              "model.decoder.layers.*.self_attn.out_proj.weight": _r("branch_out"),
              "model.decoder.layers.*.fc1.weight": _r("branch_in"),
              "model.decoder.layers.*.fc2.weight": _r("branch_out"),
              "model.decoder.layers.*_layer_norm.weight": _r("branch_norm"),
              "model.decoder.final_layer_norm.weight": _r("norm")}
_BLOOM_ROLES = {"transformer.word_embeddings.weight": _r("input"),
                "transformer.word_embeddings_layernorm.weight": _r("norm"),
                "transformer.h.*.self_attention.query_key_value.weight": _r("branch_in"),
                "transformer.h.*.self_attention.dense.weight": _r("branch_out"),
                "transformer.h.*.mlp.dense_h_to_4h.weight": _r("branch_in"),
                "transformer.h.*.mlp.dense_4h_to_h.weight": _r("branch_out"),
                "transformer.h.*_layernorm.weight": _r("branch_norm"),
                "transformer.ln_f.weight": _r("norm")}

ARCHS: list[Arch] = [
    Arch("hf-opt", build_opt, "tokens",
         _transformer_truth(True, _OPT_ROLES,
                            notes="pre-LN, learned positions, tied; q multiplied by "
                                  "head_dim^-0.5 (its `scaling`) before attention called "
                                  "with scaling 1.0"),
         logits="logits", inputs="input_ids", hf=True),
    Arch("hf-bloom", build_bloom, "tokens",
         _transformer_truth(True, _BLOOM_ROLES,
                            notes="pre-LN, LayerNorm after the embedding, tied; hand-written "
                                  "ALiBi attention: baddbmm(alibi, q, k^T, alpha="
                                  "inv_norm_factor) then softmax"),
         logits="logits", inputs="input_ids", hf=True),
    Arch("fused-qkv", build_fused_qkv, "tokens",
         _transformer_truth(False, _FUSED_ROLES,
                            notes="pre-LN, untied; q, k, v = qkv(x).split(width), q times its "
                                  "`scale` (head_dim^-0.5), SDPA with scale 1")),
]

"""Zoo entries whose attention scale is not a kernel argument (issue 40): Hugging Face OPT, which
multiplies q by head_dim^-0.5 and calls attention with scaling 1.0, and Bloom, whose hand-written
ALiBi attention computes ``baddbmm(alibi, q, k^T, beta, alpha=1/sqrt(head_dim))`` then a softmax
(no ``F.scaled_dot_product_attention``). Both tied, pre-LN, built from tiny configs."""

from __future__ import annotations

import warnings
from typing import Any

from architectures import CONTEXT, HEADS, VOCAB, Arch, _r, _transformer_truth, seeded
from torch import nn

__all__ = ["ARCHS", "build_bloom", "build_opt"]


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
]

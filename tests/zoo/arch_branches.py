"""Zoo entries for branch counting and readout constants (issue 40): PoolFormer, whose
token-mixing branch (pooling minus identity) holds no weight, and T5, an encoder-decoder whose
tied head reads ``d_model^-0.5`` times the decoder's output. Both from Hugging Face configs
(nothing is downloaded), with the true structure written by hand."""

from __future__ import annotations

import warnings
from typing import Any

import torch
from architectures import CONTEXT, IMAGE, VOCAB, Arch, Truth, _r, seeded
from torch import nn

# ---- PoolFormer (Yu et al. 2022, MetaFormer) -------------------------------------------------


def build_poolformer(width: int, depth: int, seed: int) -> nn.Module:
    """One stage of ``depth`` PoolFormer blocks on the 8x8 digits (2x2 patches), layer scale
    on (1e-5, the model's default), a pooled GroupNorm + linear head."""
    import transformers

    with seeded(seed), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = transformers.PoolFormerConfig(
            num_channels=IMAGE[0], patch_size=2, stride=2, pool_size=3, mlp_ratio=2.0,
            depths=[depth], hidden_sizes=[width], patch_sizes=[2], strides=[2], padding=[0],
            num_encoder_blocks=1, num_labels=10, drop_path_rate=0.0, hidden_dropout_prob=0.0)
        return transformers.PoolFormerForImageClassification(cfg)


def _poolformer_truth(width: int, depth: int) -> Truth:
    layer = "poolformer.encoder.block.0.*"
    return Truth(width, 2 * depth, depth, False, {
        "poolformer.encoder.patch_embeddings.0.projection.weight": _r("input"),
        "classifier.weight": _r("output"),
        f"{layer}.output.conv1.weight": _r("branch_in"),
        f"{layer}.output.conv2.weight": _r("branch_out"),
        f"{layer}.before_norm.weight": _r("branch_norm"),
        f"{layer}.after_norm.weight": _r("branch_norm"),
        f"{layer}.layer_scale_?": _r("branch_norm")},
        kept=(f"{layer}.layer_scale_?",),
        notes="two branches per block: x + gamma1 (pool(norm(x)) - norm(x)), which holds no "
              "weight, and x + gamma2 MLP(norm(x)) (1x1 convs); layer scale 1e-5")


# ---- T5 (Raffel et al. 2020) ---------------------------------------------------------------


class T5LM(nn.Module):
    """A user's adapter: the tokens in, the decoder reading them shifted right, logits out."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.t5 = model

    def forward(self, ids: torch.Tensor) -> Any:
        return self.t5(input_ids=ids, decoder_input_ids=self.t5._shift_right(ids)).logits


def build_t5(width: int, depth: int, seed: int) -> nn.Module:
    """``depth`` encoder and ``depth`` decoder blocks, 2 heads of width/2, ReLU MLP (2x),
    tied embeddings: the decoder's output is multiplied by d_model^-0.5 before the head."""
    import transformers

    with seeded(seed), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = transformers.T5Config(
            vocab_size=VOCAB, d_model=width, d_kv=width // 2, d_ff=2 * width,
            num_layers=depth, num_decoder_layers=depth, num_heads=2,
            relative_attention_num_buckets=8, relative_attention_max_distance=CONTEXT,
            dropout_rate=0.0, feed_forward_proj="relu", tie_word_embeddings=True,
            decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
            attn_implementation="sdpa")
        return T5LM(transformers.T5ForConditionalGeneration(cfg))


_T5_BIAS = "t5.*.block.0.layer.0.SelfAttention.relative_attention_bias.weight"


def _t5_truth(width: int, depth: int) -> Truth:
    return Truth(width, 5 * depth, 2 * depth, True, {
        "t5.shared.weight": _r("input"),
        "t5.*.block.*.layer.0.SelfAttention.q.weight": _r("branch_in"),
        "t5.*.block.*.layer.0.SelfAttention.o.weight": _r("branch_out"),
        "t5.decoder.block.*.layer.1.EncDecAttention.[qkv].weight": _r("branch_in"),
        "t5.decoder.block.*.layer.1.EncDecAttention.o.weight": _r("branch_out"),
        "t5.*.block.*.layer.*.DenseReluDense.wi.weight": _r("branch_in"),
        "t5.*.block.*.layer.*.DenseReluDense.wo.weight": _r("branch_out"),
        "t5.*.block.*.layer.*.layer_norm.weight": _r("branch_norm"),
        "t5.*.final_layer_norm.weight": _r("norm"),
        _T5_BIAS: _r("branch_vector")},
        notes="encoder blocks: self-attention + MLP branch; decoder blocks: self-attention, "
              "cross-attention (k, v read the encoder's output) + MLP; tied head reads the "
              "decoder output x d_model^-0.5; RMSNorm without a shift; relative position "
              "bias tables (buckets x heads, no width dimension) added to attention scores")


ARCHS: list[Arch] = [
    Arch("hf-poolformer", build_poolformer, "images", _poolformer_truth,
         logits="logits", hf=True),
    Arch("hf-t5", build_t5, "tokens", _t5_truth, hf=True),
]

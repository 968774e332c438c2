"""Zoo entries for the remaining families (issue 40): decoder LMs with a parallel residual
(GPT-NeoX, Phi) or other norms (StableLM's LayerNorm, OLMo's LayerNorm without a gain),
encoder-decoders (BART post-LN with learned positions, Pegasus pre-LN with frozen sinusoidal
positions), and vision models (ViT with its CLS token and positions as raw parameters, a
Hugging Face ResNet). All built from their Hugging Face configs (nothing is downloaded), tiny,
with the true structure written by hand."""

from __future__ import annotations

import warnings
from typing import Any

import torch
from architectures import (
    _LLAMA_ROLES,
    CONTEXT,
    HEADS,
    IMAGE,
    VOCAB,
    Arch,
    Truth,
    _r,
    _transformer_truth,
    seeded,
)
from torch import nn

__all__ = ["ARCHS", "Seq2SeqLM"]

_SPECIAL = {"bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0}


def _hf(config_name: str, model_name: str, seed: int, **config: Any) -> nn.Module:
    import transformers

    with seeded(seed), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = getattr(transformers, config_name)(**config)
        return getattr(transformers, model_name)(cfg)


# ---- decoder LMs ---------------------------------------------------------------------------

def build_neox(width: int, depth: int, seed: int) -> nn.Module:
    # parallel residual x + attn(ln1 x) + mlp(ln2 x); rotary on a quarter of each head
    return _hf("GPTNeoXConfig", "GPTNeoXForCausalLM", seed, vocab_size=VOCAB,
               hidden_size=width, num_hidden_layers=depth, num_attention_heads=HEADS,
               intermediate_size=4 * width, max_position_embeddings=CONTEXT, rotary_pct=0.25,
               use_parallel_residual=True, hidden_dropout=0.0, attention_dropout=0.0,
               tie_word_embeddings=False, attn_implementation="sdpa", **_SPECIAL)


def build_phi(width: int, depth: int, seed: int) -> nn.Module:
    # x + attn(ln x) + mlp(ln x) with ONE LayerNorm; rotary on half of each head
    return _hf("PhiConfig", "PhiForCausalLM", seed, vocab_size=VOCAB, hidden_size=width,
               num_hidden_layers=depth, num_attention_heads=HEADS,
               intermediate_size=4 * width, max_position_embeddings=CONTEXT,
               partial_rotary_factor=0.5, resid_pdrop=0.0, embd_pdrop=0.0,
               attention_dropout=0.0, tie_word_embeddings=False, attn_implementation="sdpa",
               **_SPECIAL)


def build_stablelm(width: int, depth: int, seed: int) -> nn.Module:
    # Llama layout with LayerNorm (gain and shift) and rotary on a quarter of each head
    return _hf("StableLmConfig", "StableLmForCausalLM", seed, vocab_size=VOCAB,
               hidden_size=width, num_hidden_layers=depth, num_attention_heads=HEADS,
               num_key_value_heads=HEADS, intermediate_size=2 * width,
               max_position_embeddings=CONTEXT, partial_rotary_factor=0.25,
               tie_word_embeddings=False, attn_implementation="sdpa", **_SPECIAL)


def build_olmo(width: int, depth: int, seed: int) -> nn.Module:
    # Llama layout with a LayerNorm that has no gain and no shift
    return _hf("OlmoConfig", "OlmoForCausalLM", seed, vocab_size=VOCAB, hidden_size=width,
               num_hidden_layers=depth, num_attention_heads=HEADS, num_key_value_heads=HEADS,
               intermediate_size=2 * width, max_position_embeddings=CONTEXT,
               tie_word_embeddings=False, attn_implementation="sdpa", **_SPECIAL)


def _parallel_truth(roles: dict[str, frozenset[str]], notes: str
                    ) -> Any:
    def truth(width: int, depth: int) -> Truth:
        return Truth(width, 2 * depth, depth, False, roles, notes=notes)
    return truth


_NEOX = "gpt_neox.layers.*"
_NEOX_ROLES = {"gpt_neox.embed_in.weight": _r("input"), "lm_head.weight": _r("output"),
               f"{_NEOX}.attention.query_key_value.weight": _r("branch_in"),
               f"{_NEOX}.attention.dense.weight": _r("branch_out"),
               f"{_NEOX}.mlp.dense_h_to_4h.weight": _r("branch_in"),
               f"{_NEOX}.mlp.dense_4h_to_h.weight": _r("branch_out"),
               f"{_NEOX}_layernorm.weight": _r("branch_norm"),
               "gpt_neox.final_layer_norm.weight": _r("norm")}
_PHI_ROLES = {"model.embed_tokens.weight": _r("input"), "lm_head.weight": _r("output"),
              "model.layers.*.self_attn.[qkv]_proj.weight": _r("branch_in"),
              "model.layers.*.self_attn.dense.weight": _r("branch_out"),
              "model.layers.*.mlp.fc1.weight": _r("branch_in"),
              "model.layers.*.mlp.fc2.weight": _r("branch_out"),
              "model.layers.*.input_layernorm.weight": _r("branch_norm"),
              "model.final_layernorm.weight": _r("norm")}
_OLMO_ROLES = {k: v for k, v in _LLAMA_ROLES.items() if "norm" not in k}


# ---- encoder-decoders ----------------------------------------------------------------------

class Seq2SeqLM(nn.Module):
    """A user's adapter: the tokens in (to the encoder, and shifted right by one with token 0
    in front to the decoder), the logits out."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.seq2seq = model

    def forward(self, ids: torch.Tensor) -> Any:
        start = torch.zeros_like(ids[:, :1])
        decoder_ids = torch.cat([start, ids[:, :-1]], dim=1)
        return self.seq2seq(input_ids=ids, decoder_input_ids=decoder_ids).logits


def _seq2seq(config_name: str, model_name: str, width: int, depth: int, seed: int,
             **extra: Any) -> nn.Module:
    return Seq2SeqLM(_hf(
        config_name, model_name, seed, vocab_size=VOCAB, d_model=width, encoder_layers=depth,
        decoder_layers=depth, encoder_attention_heads=HEADS, decoder_attention_heads=HEADS,
        encoder_ffn_dim=2 * width, decoder_ffn_dim=2 * width,
        max_position_embeddings=CONTEXT, dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0, decoder_start_token_id=0, forced_eos_token_id=None,
        attn_implementation="sdpa", **_SPECIAL, **extra))


def build_bart(width: int, depth: int, seed: int) -> nn.Module:
    # post-LN, learned positions (offset 2), LayerNorm after the embeddings, tied
    return _seq2seq("BartConfig", "BartForConditionalGeneration", width, depth, seed,
                    scale_embedding=False, tie_word_embeddings=True)


def build_pegasus(width: int, depth: int, seed: int) -> nn.Module:
    # pre-LN, frozen sinusoidal positions, embeddings x sqrt(d_model), final LayerNorms, tied
    return _seq2seq("PegasusConfig", "PegasusForConditionalGeneration", width, depth, seed,
                    scale_embedding=True, tie_word_embeddings=True)


def _seq2seq_roles(pre_ln: bool) -> dict[str, frozenset[str]]:
    layers = "seq2seq.model.*coder.layers.*"
    norm = _r("branch_norm") if pre_ln else _r("norm")
    return {"seq2seq.model.shared.weight": _r("input"),
            f"{layers}.self_attn.[qkv]_proj.weight": _r("branch_in"),
            f"{layers}.self_attn.out_proj.weight": _r("branch_out"),
            "seq2seq.model.decoder.layers.*.encoder_attn.[qkv]_proj.weight": _r("branch_in"),
            "seq2seq.model.decoder.layers.*.encoder_attn.out_proj.weight": _r("branch_out"),
            f"{layers}.fc1.weight": _r("branch_in"), f"{layers}.fc2.weight": _r("branch_out"),
            f"{layers}_layer_norm.weight": norm}


def _seq2seq_truth(pre_ln: bool, notes: str, kept: tuple[str, ...] = ()) -> Any:
    roles = _seq2seq_roles(pre_ln)
    if pre_ln:
        roles["seq2seq.model.*coder.layer_norm.weight"] = _r("norm")
    else:
        roles["seq2seq.model.*coder.embed_positions.weight"] = _r("token")
        roles["seq2seq.model.*coder.layernorm_embedding.weight"] = _r("norm")

    def truth(width: int, depth: int) -> Truth:
        return Truth(width, 5 * depth, 2 * depth, True, roles, kept, notes, not pre_ln)
    return truth


# ---- vision --------------------------------------------------------------------------------

def build_vit(width: int, depth: int, seed: int) -> nn.Module:
    # 8x8 digits in 2x2 patches: 16 patches + the CLS token
    return _hf("ViTConfig", "ViTForImageClassification", seed, hidden_size=width,
               num_hidden_layers=depth, num_attention_heads=HEADS,
               intermediate_size=4 * width, image_size=IMAGE[1], patch_size=2,
               num_channels=IMAGE[0], num_labels=10, hidden_dropout_prob=0.0,
               attention_probs_dropout_prob=0.0, attn_implementation="sdpa")


def build_hf_resnet(width: int, depth: int, seed: int) -> nn.Module:
    # one stage of `depth` basic blocks at `width`; stem width/2 (7x7 stride 2 + max-pool)
    return _hf("ResNetConfig", "ResNetForImageClassification", seed, num_channels=IMAGE[0],
               embedding_size=width // 2, hidden_sizes=[width], depths=[depth],
               layer_type="basic", num_labels=10, downsample_in_first_stage=False)


def _vit_truth(width: int, depth: int) -> Truth:
    layers = "vit.layers.*"
    return Truth(width, 2 * depth, depth, False, {
        "vit.embeddings.patch_embeddings.projection.weight": _r("input"),
        "vit.embeddings.cls_token": _r("class_token"),
        "vit.embeddings.position_embeddings": _r("token"),
        f"{layers}.attention.[qkv]_proj.weight": _r("branch_in"),
        f"{layers}.attention.o_proj.weight": _r("branch_out"),
        f"{layers}.mlp.fc1.weight": _r("branch_in"), f"{layers}.mlp.fc2.weight": _r("branch_out"),
        f"{layers}.layernorm_*.weight": _r("branch_norm"),
        "vit.layernorm.weight": _r("norm"), "classifier.weight": _r("output")},
        notes="pre-LN; patch conv (2x2) as input layer; CLS token and position embeddings "
              "raw parameters added before the first block; the head reads the CLS token")


def _hf_resnet_truth(width: int, depth: int) -> Truth:
    layers = "resnet.encoder.stages.0.layers"
    return Truth(width, depth, depth, False, {
        "resnet.embedder.embedder.convolution.weight": _r("input"),
        f"{layers}.*.layer.0.convolution.weight": _r("branch_in"),
        f"{layers}.*.layer.1.normalization.weight": _r("branch_gain"),
        f"{layers}.0.shortcut.convolution.weight": _r("hidden"),
        "classifier.1.weight": _r("output")},
        notes="basic blocks (conv-BN-ReLU, conv-BN) in one stage; BatchNorm ends each branch; "
              "projection shortcut (1x1 conv + BN, width/2 -> width) in the first block")


ARCHS: list[Arch] = [
    Arch("hf-gpt-neox", build_neox, "tokens",
         _parallel_truth(_NEOX_ROLES,
                         "parallel residual x + (mlp(ln2 x) + attn(ln1 x)): two branches per "
                         "block, each counted once (as tests/param's GPT-J-style block); "
                         "rotary on a quarter of each head; untied lm_head"),
         logits="logits", inputs="input_ids", hf=True),
    Arch("hf-phi", build_phi, "tokens",
         _parallel_truth(_PHI_ROLES,
                         "parallel attention + MLP reading one LayerNorm, summed then added "
                         "to the stream: two branches per block, each counted once; rotary "
                         "on half of each head; final LayerNorm; lm_head with a bias"),
         logits="logits", inputs="input_ids", hf=True),
    Arch("hf-stablelm", build_stablelm, "tokens",
         _transformer_truth(False, {**_LLAMA_ROLES, "lm_head.weight": _r("output")},
                            notes="pre-LayerNorm (gain and shift), SwiGLU, rotary on a "
                                  "quarter of each head"),
         logits="logits", inputs="input_ids", hf=True),
    Arch("hf-olmo", build_olmo, "tokens",
         _transformer_truth(False, {**_OLMO_ROLES, "lm_head.weight": _r("output")},
                            notes="pre-LayerNorm without gain or shift (no norm parameter), "
                                  "SwiGLU"),
         logits="logits", inputs="input_ids", hf=True),
    Arch("hf-bart", build_bart, "tokens",
         _seq2seq_truth(False, "post-LN encoder-decoder: encoder blocks self-attention + MLP, "
                               "decoder blocks self-, cross-attention + MLP; learned positions "
                               "(offset 2) and a LayerNorm after the embeddings; tied"),
         hf=True, coord_depths=()),
    Arch("hf-pegasus", build_pegasus, "tokens",
         _seq2seq_truth(True, "pre-LN encoder-decoder, final LayerNorms; frozen sinusoidal "
                              "positions (requires_grad=False: kept); embeddings x "
                              "sqrt(d_model); tied",
                        kept=("seq2seq.model.*coder.embed_positions.weight",)),
         hf=True),
    Arch("hf-resnet", build_hf_resnet, "images", _hf_resnet_truth, logits="logits", hf=True),
    # CLS readout: the class token alone feeds the head. With it drawn at 0.02 under the muP
    # family (before issue 40 (b)) CompleteP's width check FAILed: stream update -0.35 per
    # width octave (tests/param/test_token_rule.py has the mechanism on a tiny model)
    Arch("hf-vit", build_vit, "images", _vit_truth, logits="logits", hf=True),
]

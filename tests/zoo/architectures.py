"""The architecture zoo: models nobody wrote for depthscale, each with the structure it truly has.

Every entry is an :class:`Arch`: ``build(width, depth, seed)`` makes the model with the model's
own init (deterministic given the seed; the global RNG is left as it was), ``example(batch,
seed)`` the inputs it is called with (a tensor, a tuple of arguments or a dict of keyword
arguments) and cross-entropy targets, ``truth(width, depth)`` what :func:`depthscale.param.
inspect` must find (:class:`Truth`), ``logits`` how the logits are read from the output, and
``widths``/``depths`` the natural sizes to sweep. ``depth`` is the number of blocks (layers) of
the model; the number of residual branches follows from it (a Transformer block has two).

Sizes are tiny: token models have a vocabulary of 16 and a context of 16 (``markov`` data,
next-token targets), image models read the 8x8 scikit-learn digits (1 channel, 10 classes).
``tensor_model`` wraps a model whose inputs or outputs are not plain tensors (Hugging Face
models: keyword ``input_ids`` in, ``.logits`` out) into the tensor-in, logits-out module the
probes and the training loop call, as a user would.

Everything here is written for this zoo from the architectures' published descriptions; the
Hugging Face models are built from a config (nothing is downloaded).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import math
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import depthscale as ds

ROOT = Path(__file__).resolve().parents[2]
VOCAB, CONTEXT = 16, 16  # token models
IMAGE, CLASSES = (1, 8, 8), 10  # image models (scikit-learn digits)
HEADS = 2


# ---- records ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Truth:
    """The true structure of one model.

    ``width`` is the residual stream's width (a plain net's layer width), ``branches`` the
    number of residual branches (``ds.param.plan(depth=...)`` must receive it; 0 for a net
    without residual additions, where a width-only plan applies), ``blocks`` the number of
    blocks the branches sit in (an int, or the set of counts that describe the model equally
    well: one block module applied L times is 1 block by modules, L by applications),
    ``tied`` whether the input embedding is also the readout; ``post_ln`` whether a
    normalisation sits on the stream after each addition (BERT, ``norm_first=False``): the
    depth recipes are derived for pre-LN blocks, so a plan must either keep the depth bands or
    warn that it cannot. ``roles`` maps glob patterns over parameter names (as
    ``model.named_parameters()`` gives them) to the roles a correct reading may give every
    parameter they match. ``kept`` lists glob patterns of parameters whose own init is a
    convention no scaling rule replaces (Gemma's RMSNorm ``1 + w`` with w = 0, a layer scale):
    ``plan.apply`` must leave them as the model made them. ``notes`` says what is special."""

    width: int
    branches: int
    blocks: int | frozenset[int]
    tied: bool
    roles: dict[str, frozenset[str]] = field(default_factory=dict)
    kept: tuple[str, ...] = ()
    notes: str = ""
    post_ln: bool = False

    def blocks_ok(self, found: int) -> bool:
        return found in self.blocks if isinstance(self.blocks, frozenset) else (
            found == self.blocks)


@dataclass(frozen=True)
class Refusal:
    """A model that cannot be planned as it is: ``plan.apply(model, example_input=x)`` must
    raise a ConfigError whose message contains every string of ``names`` (the parameter and
    the fix to pass); with ``fix`` (the ``roles=`` patterns the message asks for) it applies."""

    names: tuple[str, ...]
    fix: dict[str, str]
    why: str


@dataclass(frozen=True)
class Arch:
    """One architecture of the zoo (see the module docstring)."""

    name: str
    build: Callable[[int, int, int], nn.Module]
    domain: str  # "tokens" (markov, next-token targets) or "images" (digits, class labels)
    truth: Callable[[int, int], Truth]
    logits: str = "tensor"  # "tensor": the output is the logits; "logits": out.logits
    inputs: str = "tensor"  # "tensor": model(x); "input_ids": model(input_ids=x)
    widths: tuple[int, ...] = (32, 64, 128)
    depths: tuple[int, ...] = (1, 2, 4)
    #: the depths of the coordinate check: 4-16, as at 1-2 blocks the stream's update is still
    #: dominated by the input layer's own update (correct CompleteP plans: stream update vs
    #: depth -0.23 over depths 1-4 on the own GPT, -0.18 to -0.22 over 2-8 on residual MLPs,
    #: shared or not; flat over 4-16); none for a net without branches, and none for post-LN
    #: (the depth bands are derived for pre-LN blocks: see Truth.post_ln)
    coord_depths: tuple[int, ...] = (4, 8, 16)
    hf: bool = False
    refusal: Refusal | None = None

    @property
    def n_out(self) -> int:
        return VOCAB if self.domain == "tokens" else CLASSES

    def data(self, n_train: int = 256, seed: int = 0) -> ds.data.Dataset:
        """The training data (a :class:`depthscale.data.Dataset`) for this model."""
        return _data(self.domain, n_train, seed)

    def call(self, x: torch.Tensor) -> Any:
        """What the model is called with for a batch ``x`` of the data."""
        return {"input_ids": x} if self.inputs == "input_ids" else x

    def example(self, batch: int = 8, seed: int = 0) -> tuple[Any, torch.Tensor]:
        """(inputs the model is called with, cross-entropy targets for its logits)."""
        d = self.data(seed=seed)
        return self.call(d.x_train[:batch]), d.y_train[:batch]

    def read(self, out: Any) -> torch.Tensor:
        """The logits in the model's output: last axis classes (tokens: ``(B, T, V)``)."""
        return out.logits if self.logits == "logits" else out

    def forward(self, model: nn.Module, inputs: Any) -> torch.Tensor:
        """The logits of ``model`` called on ``inputs`` (as :meth:`example` gives them)."""
        if isinstance(inputs, dict):
            return self.read(model(**inputs))
        if isinstance(inputs, tuple):
            return self.read(model(*inputs))
        return self.read(model(inputs))

    def tensor_model(self, model: nn.Module) -> nn.Module:
        """``model`` as a module that takes a batch tensor and returns the logits tensor (the
        model itself when it already does)."""
        if self.inputs == "tensor" and self.logits == "tensor":
            return model
        return Logits(model, self.inputs, self.logits)


class Logits(nn.Module):
    """A user's adapter: tensor in (passed as ``key=x`` unless key is "tensor"), logits out."""

    def __init__(self, model: nn.Module, key: str, read: str) -> None:
        super().__init__()
        self.model, self.key, self.read = model, key, read

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.model(**{self.key: x}) if self.key != "tensor" else self.model(x)
        return out.logits if self.read == "logits" else out


@functools.lru_cache(maxsize=8)
def _data(domain: str, n_train: int, seed: int) -> ds.data.Dataset:
    if domain == "tokens":
        return ds.data.load("markov", seed=seed, n_train=n_train, n_test=64, vocab=VOCAB,
                            context=CONTEXT)
    return ds.data.load("digits", seed=seed, n_train=n_train, n_test=64)


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """The global RNG seeded for a model's own init, restored afterwards."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def causal_mask(t: int) -> torch.Tensor:
    """Additive causal mask (-inf above the diagonal), as nn.Transformer makes it."""
    return torch.triu(torch.full((t, t), float("-inf")), diagonal=1)


def _r(*roles: str) -> frozenset[str]:
    return frozenset(roles)


def _transformer_truth(tied: bool, roles: dict[str, frozenset[str]] | None = None,
                       kept: tuple[str, ...] = (), notes: str = "",
                       post_ln: bool = False) -> Callable[[int, int], Truth]:
    def truth(width: int, depth: int) -> Truth:
        return Truth(width, 2 * depth, depth, tied, roles or {}, kept,
                     notes or "pre-LN Transformer: attention + MLP branch per block", post_ln)
    return truth


# ---- (1) the plain-torch GPT of examples/own_transformer.py --------------------------------

@functools.lru_cache(maxsize=1)
def _own_transformer() -> Any:
    path = ROOT / "examples" / "own_transformer.py"
    spec = importlib.util.spec_from_file_location("zoo_own_transformer", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def build_own_gpt(width: int, depth: int, seed: int) -> nn.Module:
    with seeded(seed):
        return _own_transformer().GPT(VOCAB, CONTEXT, width, depth, heads=HEADS)


# ---- (2)-(8) Hugging Face models from configs ------------------------------------------------

def _hf(config_name: str, model_name: str, seed: int, **config: Any) -> nn.Module:
    import transformers

    with seeded(seed), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = getattr(transformers, config_name)(attn_implementation="sdpa", **config)
        return getattr(transformers, model_name)(cfg)


_SPECIAL = {"bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0}


def build_gpt2(width: int, depth: int, seed: int, tied: bool = True) -> nn.Module:
    return _hf("GPT2Config", "GPT2LMHeadModel", seed, vocab_size=VOCAB, n_positions=CONTEXT,
               n_embd=width, n_layer=depth, n_head=HEADS, resid_pdrop=0.0, embd_pdrop=0.0,
               attn_pdrop=0.0, tie_word_embeddings=tied, bos_token_id=0, eos_token_id=0)


def _llama_like(config_name: str, model_name: str, width: int, depth: int, seed: int,
                **extra: Any) -> nn.Module:
    return _hf(config_name, model_name, seed, vocab_size=VOCAB, hidden_size=width,
               intermediate_size=2 * width, num_hidden_layers=depth,
               num_attention_heads=HEADS, max_position_embeddings=CONTEXT, **_SPECIAL, **extra)


def build_llama(width: int, depth: int, seed: int) -> nn.Module:
    return _llama_like("LlamaConfig", "LlamaForCausalLM", width, depth, seed,
                       num_key_value_heads=HEADS, tie_word_embeddings=False)


def build_mistral(width: int, depth: int, seed: int) -> nn.Module:
    # grouped-query attention (one key/value head), no sliding window at this context
    return _llama_like("MistralConfig", "MistralForCausalLM", width, depth, seed,
                       num_key_value_heads=1, sliding_window=None, tie_word_embeddings=False)


def build_qwen2(width: int, depth: int, seed: int) -> nn.Module:
    # q/k/v biases; tied embeddings, as the small Qwen2 checkpoints ship
    return _llama_like("Qwen2Config", "Qwen2ForCausalLM", width, depth, seed,
                       num_key_value_heads=1, tie_word_embeddings=True,
                       use_sliding_window=False)


def build_gemma(width: int, depth: int, seed: int) -> nn.Module:
    # tied; RMSNorm computes x_hat * (1 + w) with w = 0; embeddings scaled by sqrt(width)
    return _llama_like("GemmaConfig", "GemmaForCausalLM", width, depth, seed,
                       num_key_value_heads=1, head_dim=width // HEADS,
                       tie_word_embeddings=True, hidden_activation="gelu_pytorch_tanh")


def build_bert(width: int, depth: int, seed: int) -> nn.Module:
    return _hf("BertConfig", "BertForMaskedLM", seed, vocab_size=VOCAB, hidden_size=width,
               num_hidden_layers=depth, num_attention_heads=HEADS,
               intermediate_size=4 * width, max_position_embeddings=CONTEXT,
               type_vocab_size=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
               pad_token_id=0, tie_word_embeddings=True)


# ---- (9), (10) nn.TransformerEncoder, pre- and post-LN --------------------------------------

class EncoderLM(nn.Module):
    """Token embedding + learned positions, ``nn.TransformerEncoder`` (causal), a head."""

    def __init__(self, width: int, depth: int, norm_first: bool) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, width)
        self.pos = nn.Parameter(0.02 * torch.randn(CONTEXT, width))
        layer = nn.TransformerEncoderLayer(width, HEADS, dim_feedforward=4 * width,
                                           dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False,
                                             norm=nn.LayerNorm(width) if norm_first else None)
        self.head = nn.Linear(width, VOCAB)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        x = self.embed(ids) + self.pos[:t]
        x = self.encoder(x, mask=causal_mask(t).to(x.device), is_causal=True)
        return self.head(x)


def build_encoder_pre(width: int, depth: int, seed: int) -> nn.Module:
    with seeded(seed), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return EncoderLM(width, depth, norm_first=True)


def build_encoder_post(width: int, depth: int, seed: int) -> nn.Module:
    with seeded(seed), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return EncoderLM(width, depth, norm_first=False)


# ---- (11) a block calling nn.MultiheadAttention directly ------------------------------------

class MHABlock(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, HEADS, batch_first=True)
        self.fc1, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, attn_mask=causal_mask(x.shape[1]).to(x.device),
                         need_weights=False)
        x = x + a
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class MHALM(nn.Module):
    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, width)
        self.pos = nn.Embedding(CONTEXT, width)
        self.blocks = nn.ModuleList(MHABlock(width) for _ in range(depth))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, VOCAB, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def build_mha(width: int, depth: int, seed: int) -> nn.Module:
    with seeded(seed):
        return MHALM(width, depth)


# ---- (12) ConvNeXt-style blocks with layer scale -------------------------------------------

class ConvNeXtBlock(nn.Module):
    """depthwise 7x7 -> LayerNorm -> 1x1 up (x4) -> GELU -> 1x1 down -> gamma -> + x."""

    def __init__(self, width: int, layer_scale: float = 1e-6) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(width, width, 7, padding=3, groups=width)
        self.norm = nn.LayerNorm(width)
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
        self.gamma = nn.Parameter(layer_scale * torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.dwconv(x).permute(0, 2, 3, 1)  # (B, H, W, C)
        h = self.gamma * self.down(F.gelu(self.up(self.norm(h))))
        return x + h.permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(IMAGE[0], width, 2, stride=2)  # patchify 8x8 -> 4x4
        self.stem_norm = nn.LayerNorm(width)
        self.stages = nn.Sequential(*(ConvNeXtBlock(width) for _ in range(depth)))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem_norm(self.stem(x).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        x = self.stages(x)
        return self.head(self.norm(x.mean(dim=(2, 3))))


def build_convnext(width: int, depth: int, seed: int) -> nn.Module:
    with seeded(seed):
        return ConvNeXt(width, depth)


# ---- (13) MLP-Mixer ----------------------------------------------------------------------------

PATCHES, TOKEN_HIDDEN = 16, 32  # 8x8 image, 2x2 patches; token-mixing hidden size (fixed)


class MixerBlock(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.token1, self.token2 = nn.Linear(PATCHES, TOKEN_HIDDEN), nn.Linear(TOKEN_HIDDEN,
                                                                             PATCHES)
        self.channel1, self.channel2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, patches, width)
        h = self.norm1(x).transpose(1, 2)
        x = x + self.token2(F.gelu(self.token1(h))).transpose(1, 2)
        return x + self.channel2(F.gelu(self.channel1(self.norm2(x))))


class Mixer(nn.Module):
    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.patch = nn.Conv2d(IMAGE[0], width, 2, stride=2)
        self.blocks = nn.Sequential(*(MixerBlock(width) for _ in range(depth)))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2)  # (B, 16, width)
        return self.head(self.norm(self.blocks(x)).mean(dim=1))


def build_mixer(width: int, depth: int, seed: int) -> nn.Module:
    with seeded(seed):
        return Mixer(width, depth)


# ---- (14) U-Net with concatenated skips ------------------------------------------------------

def _conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU())


class UNet(nn.Module):
    """``depth`` levels (8x8 -> 4x4 -> ...), every level ``width`` channels; the decoder
    concatenates each level's encoder features (no residual addition); pooled head."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.inc = _conv(IMAGE[0], width)
        self.down = nn.ModuleList(_conv(width, width) for _ in range(depth))
        self.up = nn.ModuleList(nn.ConvTranspose2d(width, width, 2, stride=2)
                                for _ in range(depth))
        self.merge = nn.ModuleList(_conv(2 * width, width) for _ in range(depth))
        self.head = nn.Linear(width, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inc(x)
        skips = []
        for down in self.down:
            skips.append(x)
            x = down(F.max_pool2d(x, 2))
        for up, merge, skip in zip(self.up, self.merge, reversed(skips), strict=True):
            x = merge(torch.cat([up(x), skip], dim=1))
        return self.head(x.mean(dim=(2, 3)))


def build_unet(width: int, depth: int, seed: int) -> nn.Module:
    with seeded(seed):
        return UNet(width, depth)


# ---- (15) a weight-shared block applied depth times -----------------------------------------

class SharedBlockNet(nn.Module):
    """ONE pre-LN residual MLP block, applied ``depth`` times (ALBERT / universal style)."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.depth = depth
        self.inp = nn.Linear(math.prod(IMAGE), width)
        self.norm = nn.LayerNorm(width)
        self.fc1, self.fc2 = nn.Linear(width, 2 * width), nn.Linear(2 * width, width)
        self.out_norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, CLASSES)

    def block(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(self.norm(x))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inp(x.flatten(1))
        for _ in range(self.depth):
            x = x + self.block(x)
        return self.head(self.out_norm(x))


def build_shared(width: int, depth: int, seed: int) -> nn.Module:
    with seeded(seed):
        return SharedBlockNet(width, depth)


# ---- (16) a residual MLP with raw parameters used as x @ W ----------------------------------

class RawBlock(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(width, 2 * width) / math.sqrt(width))
        self.w2 = nn.Parameter(torch.randn(2 * width, width) / math.sqrt(2 * width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.relu(x @ self.w1) @ self.w2


class RawMLP(nn.Module):
    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        d_in = math.prod(IMAGE)
        self.w_in = nn.Parameter(torch.randn(d_in, width) / math.sqrt(d_in))
        self.blocks = nn.ModuleList(RawBlock(width) for _ in range(depth))
        self.w_out = nn.Parameter(torch.randn(width, CLASSES) / math.sqrt(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1) @ self.w_in
        for block in self.blocks:
            x = block(x)
        return x @ self.w_out


def build_raw(width: int, depth: int, seed: int) -> nn.Module:
    with seeded(seed):
        return RawMLP(width, depth)


# ---- (17) torchvision-style ResNet -----------------------------------------------------------

class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return F.relu(out)


class ResNet(nn.Module):
    """Stem (width/2 channels), a first block with a projection shortcut (width/2 -> width,
    stride 2), then ``depth - 1`` identity blocks at ``width``; pooled linear head."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(IMAGE[0], width // 2, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width // 2)
        self.layer1 = nn.Sequential(BasicBlock(width // 2, width, 2),
                                    *(BasicBlock(width, width) for _ in range(depth - 1)))
        self.fc = nn.Linear(width, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer1(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def build_resnet(width: int, depth: int, seed: int) -> nn.Module:
    with seeded(seed):
        return ResNet(width, depth)


# ---- (18) a parameter the example input never uses (a refusal) -----------------------------

class SegmentGPT(nn.Module):
    """The plain-torch GPT with a segment embedding used only when ``segments`` is passed: on
    a token-only example the forward pass never touches it, so nothing says what it is."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.gpt = _own_transformer().GPT(VOCAB, CONTEXT, width, depth, heads=HEADS)
        self.segment = nn.Embedding(2, width)

    def forward(self, ids: torch.Tensor, segments: torch.Tensor | None = None) -> torch.Tensor:
        x = self.gpt.wte(ids) + self.gpt.wpe[: ids.shape[1]]
        if segments is not None:
            x = x + self.segment(segments)
        return self.gpt.head(self.gpt.ln_f(self.gpt.blocks(x)))


def build_segment(width: int, depth: int, seed: int) -> nn.Module:
    with seeded(seed):
        return SegmentGPT(width, depth)


# ---- the zoo ---------------------------------------------------------------------------------

_GPT_ROLES = {"wte.weight": _r("input"), "head.weight": _r("output"),
              "blocks.*.qkv.weight": _r("branch_in"), "blocks.*.proj.weight": _r("branch_out"),
              "blocks.*.fc.weight": _r("branch_in"), "blocks.*.out.weight": _r("branch_out"),
              "blocks.*.ln?.weight": _r("branch_norm")}  # pre-LN: inside the branches
_LLAMA_ROLES = {"model.embed_tokens.weight": _r("input"),
                "model.layers.*.self_attn.q_proj.weight": _r("branch_in"),
                "model.layers.*.self_attn.k_proj.weight": _r("branch_in"),
                "model.layers.*.self_attn.v_proj.weight": _r("branch_in"),
                "model.layers.*.self_attn.o_proj.weight": _r("branch_out"),
                "model.layers.*.mlp.gate_proj.weight": _r("branch_in"),
                "model.layers.*.mlp.up_proj.weight": _r("branch_in"),
                "model.layers.*.mlp.down_proj.weight": _r("branch_out"),
                "model.layers.*norm.weight": _r("branch_norm"),  # pre-norms: inside
                "model.norm.weight": _r("norm")}
_GPT2_ROLES = {"transformer.wte.weight": _r("input"),
               "transformer.wpe.weight": _r("token"),
               "transformer.h.*.attn.c_attn.weight": _r("branch_in"),
               "transformer.h.*.attn.c_proj.weight": _r("branch_out"),
               "transformer.h.*.mlp.c_fc.weight": _r("branch_in"),
               "transformer.h.*.mlp.c_proj.weight": _r("branch_out")}
_ENCODER_ROLES = {"embed.weight": _r("input"), "pos": _r("token"), "head.weight": _r("output"),
                  "encoder.layers.*.self_attn.in_proj_weight": _r("branch_in"),
                  "encoder.layers.*.self_attn.out_proj.weight": _r("branch_out"),
                  "encoder.layers.*.linear1.weight": _r("branch_in"),
                  "encoder.layers.*.linear2.weight": _r("branch_out")}


def _plain(width: int, depth: int) -> Truth:
    return Truth(width, 0, 0, False, {"inc.0.weight": _r("input"), "head.weight": _r("output"),
                                      "down.*.0.weight": _r("hidden"),
                                      "merge.*.0.weight": _r("hidden"),
                                      "up.*.weight": _r("hidden")},
                 notes="no residual addition (concatenated skips): a width-only plan; "
                       "every level has `width` channels")


ZOO: list[Arch] = [
    Arch("own-gpt", build_own_gpt, "tokens",
         _transformer_truth(False, {**_GPT_ROLES, "wpe": _r("token")},
                            notes="examples/own_transformer.py: pre-LN, learned positions as a "
                                  "raw parameter, attention_head_dim set")),
    Arch("hf-gpt2-tied", build_gpt2, "tokens",
         _transformer_truth(True, _GPT2_ROLES, notes="pre-LN, Conv1D (weights stored in x out),"
                                                     " lm_head tied to wte"),
         logits="logits", inputs="input_ids", hf=True),
    Arch("hf-gpt2-untied", functools.partial(build_gpt2, tied=False), "tokens",
         _transformer_truth(False, {**_GPT2_ROLES, "lm_head.weight": _r("output")},
                            notes="pre-LN, Conv1D, tie_word_embeddings=False"),
         logits="logits", inputs="input_ids", hf=True),
    Arch("hf-llama", build_llama, "tokens",
         _transformer_truth(False, {**_LLAMA_ROLES, "lm_head.weight": _r("output")},
                            notes="pre-RMSNorm, SwiGLU MLP (gate and up both read the stream)"),
         logits="logits", inputs="input_ids", hf=True),
    Arch("hf-mistral", build_mistral, "tokens",
         _transformer_truth(False, {**_LLAMA_ROLES, "lm_head.weight": _r("output")},
                            notes="pre-RMSNorm, SwiGLU, grouped-query attention (1 kv head)"),
         logits="logits", inputs="input_ids", hf=True),
    Arch("hf-qwen2", build_qwen2, "tokens",
         _transformer_truth(True, _LLAMA_ROLES, notes="pre-RMSNorm, SwiGLU, q/k/v biases, "
                                                      "1 kv head, tied embeddings"),
         logits="logits", inputs="input_ids", hf=True),
    Arch("hf-gemma", build_gemma, "tokens",
         _transformer_truth(True, _LLAMA_ROLES, kept=("model.layers.*norm.weight",
                                                      "model.norm.weight"),
                            notes="tied; RMSNorm x_hat * (1 + w), w = 0 (gain 1); embeddings "
                                  "x sqrt(width); 1 kv head"),
         logits="logits", inputs="input_ids", hf=True),
    Arch("hf-bert", build_bert, "tokens",
         _transformer_truth(True, {
             "bert.embeddings.word_embeddings.weight": _r("input"),
             "bert.embeddings.position_embeddings.weight": _r("token", "input"),
             "bert.embeddings.token_type_embeddings.weight": _r("token", "input"),
             "bert.encoder.layer.*.attention.self.query.weight": _r("branch_in"),
             "bert.encoder.layer.*.attention.output.dense.weight": _r("branch_out"),
             "bert.encoder.layer.*.intermediate.dense.weight": _r("branch_in"),
             "bert.encoder.layer.*.output.dense.weight": _r("branch_out")},
             notes="post-LN; word + position + token-type embeddings summed before the first "
                   "block (inputs, not branches); MLM head transform + tied decoder",
             post_ln=True),
         logits="logits", inputs="input_ids", hf=True, coord_depths=()),
    Arch("torch-encoder-preln", build_encoder_pre, "tokens",
         _transformer_truth(False, _ENCODER_ROLES,
                            notes="nn.TransformerEncoder(norm_first=True): nn.MultiheadAttention"
                                  " inside, final LayerNorm")),
    Arch("torch-encoder-postln", build_encoder_post, "tokens",
         _transformer_truth(False, _ENCODER_ROLES,
                            notes="nn.TransformerEncoder(norm_first=False): post-LN, "
                                  "nn.MultiheadAttention inside", post_ln=True),
         coord_depths=()),
    Arch("mha-block", build_mha, "tokens",
         _transformer_truth(False, {
             "embed.weight": _r("input"), "pos.weight": _r("token"), "head.weight": _r("output"),
             "blocks.*.attn.in_proj_weight": _r("branch_in"),
             "blocks.*.attn.out_proj.weight": _r("branch_out"),
             "blocks.*.fc1.weight": _r("branch_in"), "blocks.*.fc2.weight": _r("branch_out")},
             notes="pre-LN block calling nn.MultiheadAttention (in_proj_weight a raw parameter "
                   "used by F.multi_head_attention_forward)")),
    Arch("convnext", build_convnext, "images",
         lambda w, d: Truth(w, d, d, False, {
             "stem.weight": _r("input"), "head.weight": _r("output"),
             "stages.*.dwconv.weight": _r("branch_in"), "stages.*.up.weight": _r("hidden"),
             "stages.*.down.weight": _r("hidden", "branch_out"),
             "stages.*.gamma": _r("branch_norm")},
             kept=("stages.*.gamma",),
             notes="one branch per block; layer scale gamma = 1e-6 multiplies the branch "
                   "(the model's convention); depthwise conv reads the stream")),
    Arch("mlp-mixer", build_mixer, "images",
         lambda w, d: Truth(w, 2 * d, d, False, {
             "patch.weight": _r("input"), "head.weight": _r("output"),
             "blocks.*.channel1.weight": _r("branch_in"),
             "blocks.*.channel2.weight": _r("branch_out")},
             notes="token-mixing + channel-mixing branch per block; the token-mixing MLP's "
                   f"dims ({PATCHES} patches, hidden {TOKEN_HIDDEN}) are fixed: they do not "
                   "grow with width")),
    Arch("unet", build_unet, "images", _plain, depths=(1, 2, 3), coord_depths=()),
    Arch("shared-block", build_shared, "images",
         lambda w, d: Truth(w, d, frozenset({1, d}), False, {
             "inp.weight": _r("input"), "head.weight": _r("output"),
             "fc1.weight": _r("branch_in"), "fc2.weight": _r("branch_out")},
             notes="ONE block module applied `depth` times: `depth` branches (what the plan "
                   "receives); 1 block by modules or `depth` by applications")),
    Arch("raw-mlp", build_raw, "images",
         lambda w, d: Truth(w, d, d, False, {
             "w_in": _r("input"), "w_out": _r("output"),
             "blocks.*.w1": _r("branch_in"), "blocks.*.w2": _r("branch_out")},
             notes="raw nn.Parameter weights used as x @ W (stored in x out: fan-in is dim 0)")),
    Arch("resnet", build_resnet, "images",
         lambda w, d: Truth(w, d, d, False, {
             "conv1.weight": _r("input"), "fc.weight": _r("output"),
             "layer1.*.conv1.weight": _r("branch_in"),
             "layer1.0.downsample.0.weight": _r("hidden")},
             notes="BasicBlock, BatchNorm ends each branch (bn2 writes the addition), "
                   "projection shortcut in block 0 (width/2 -> width, stride 2), in-place "
                   "`out += identity`")),
    Arch("segment-gpt", build_segment, "tokens",
         _transformer_truth(False, notes="own GPT + a segment embedding the token-only "
                                         "example never uses"),
         refusal=Refusal(("segment.weight", "roles="), {"segment.*": "token"},
                         "a parameter the example input never reaches cannot be classified "
                         "from the forward pass: apply must name it and the roles= to pass")),
]

# issue 40's second round, one file per mechanism: OPT and Bloom (the attention scale measured
# from the forward), PoolFormer and T5 (weightless branches, readout constants), channel-last
# and inverted-residual vision backbones, widths per dimension and seed-stable verdicts, MoE
# and state-space models, and the remaining families
for _module in ("arch_attention", "arch_branches", "arch_vision", "arch_backbones",
                "arch_moe_ssm", "arch_more"):
    ZOO += importlib.import_module(_module).ARCHS
BY_NAME = {a.name: a for a in ZOO}

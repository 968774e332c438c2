"""Zoo entries for widths per dimension and seed-stable verdicts (issue 40): Hugging Face
ConvNeXt (a 7x7 depthwise kernel whose fan-in 49 does not grow with width) and Falcon (a
parallel attention + MLP block, multi-query), torchvision's ResNet-18 layout and a DenseNet
(concatenation, no residual addition), both written here in plain torch from their published
descriptions (He et al. 2016; Huang et al. 2017) with torchvision's layout and init."""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from architectures import CONTEXT, HEADS, IMAGE, VOCAB, Arch, Truth, _r, seeded
from torch import nn

__all__ = ["ARCHS", "build_convnext_hf", "build_densenet", "build_falcon", "build_tv_resnet"]


# ---- ConvNeXt (Liu et al. 2022), Hugging Face ------------------------------------------------

def build_convnext_hf(width: int, depth: int, seed: int) -> nn.Module:
    """One stage of ``depth`` ConvNeXt blocks on the 8x8 digits (2x2 patchify stem), layer
    scale 1e-6 (the model's default), pooled LayerNorm + linear head."""
    import transformers

    with seeded(seed), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = transformers.ConvNextConfig(
            num_channels=IMAGE[0], patch_size=2, num_stages=1, hidden_sizes=[width],
            depths=[depth], num_labels=10, drop_path_rate=0.0, image_size=IMAGE[1])
        return transformers.ConvNextForImageClassification(cfg)


def _convnext_truth(width: int, depth: int) -> Truth:
    layer = "convnext.encoder.stages.0.layers.*"
    return Truth(width, depth, depth, False, {
        "convnext.embeddings.patch_embeddings.weight": _r("input"),
        "classifier.weight": _r("output"),
        f"{layer}.dwconv.weight": _r("branch_in"),
        f"{layer}.pwconv1.weight": _r("hidden", "branch_in"),
        f"{layer}.pwconv2.weight": _r("branch_out", "hidden"),
        f"{layer}.layer_scale_parameter": _r("branch_norm")},
        kept=(f"{layer}.layer_scale_parameter",),
        notes="one branch per block: x + gamma pwconv2(gelu(pwconv1(LN(dwconv(x))))); the "
              "depthwise kernel's fan-in 7x7 = 49 does not grow with width; layer scale 1e-6")


# ---- Falcon (Almazrouei et al. 2023), Hugging Face -------------------------------------------

def build_falcon(width: int, depth: int, seed: int) -> nn.Module:
    """Falcon-7B's block: one LayerNorm feeding attention and MLP in parallel, whose outputs are
    summed onto the stream in one addition; multi-query attention (one key/value head),
    rotary positions, no biases, tied embeddings."""
    import transformers

    with seeded(seed), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = transformers.FalconConfig(
            vocab_size=VOCAB, hidden_size=width, num_hidden_layers=depth,
            num_attention_heads=HEADS, multi_query=True, parallel_attn=True,
            new_decoder_architecture=False, bias=False, alibi=False,
            max_position_embeddings=CONTEXT, hidden_dropout=0.0, attention_dropout=0.0,
            bos_token_id=0, eos_token_id=0, pad_token_id=0, tie_word_embeddings=True,
            attn_implementation="sdpa")
        return transformers.FalconForCausalLM(cfg)


def _falcon_truth(width: int, depth: int) -> Truth:
    layer = "transformer.h.*"
    return Truth(width, 2 * depth, depth, True, {
        "transformer.word_embeddings.weight": _r("input"),
        f"{layer}.self_attention.query_key_value.weight": _r("branch_in"),
        f"{layer}.self_attention.dense.weight": _r("branch_out"),
        f"{layer}.mlp.dense_h_to_4h.weight": _r("branch_in"),
        f"{layer}.mlp.dense_4h_to_h.weight": _r("branch_out"),
        f"{layer}.input_layernorm.weight": _r("branch_norm"),
        "transformer.ln_f.weight": _r("norm")},
        notes="parallel block: x + attn(LN(x)) + mlp(LN(x)), one LayerNorm read by both "
              "branches, two branches per block (each a writer of its own); multi-query "
              "(q: width, k and v: one head), rotary, tied head")


# ---- ResNet-18 layout (He et al. 2016), torchvision's init, plain torch ----------------------

class BasicBlock(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN, + identity or a 1x1 stride-2 projection with BN, ReLU."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + identity)


class TVResNet(nn.Module):
    """torchvision's ResNet-18 at width w (its 64): stem conv-BN-ReLU (3x3, stride 1 and no max
    pool on 8x8 images, as the CIFAR variants), 4 stages of ``depth`` BasicBlocks at w, 2w,
    4w, 8w channels (stages 2-4 start with a stride-2 projection), global pool, fc. Init as
    torchvision's: kaiming normal (fan_out, ReLU) convs, BN gamma 1 and beta 0
    (zero_init_residual=False), the fc's own Linear init."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(IMAGE[0], width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        stages, cin = [], width
        for i in range(4):
            cout = width * 2 ** i
            blocks = [BasicBlock(cin, cout, 1 if i == 0 else 2)]
            blocks += [BasicBlock(cout, cout, 1) for _ in range(depth - 1)]
            stages.append(nn.Sequential(*blocks))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Linear(8 * width, 10)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def build_tv_resnet(width: int, depth: int, seed: int) -> nn.Module:
    with seeded(seed):
        return TVResNet(width, depth)


def _tv_resnet_truth(width: int, depth: int) -> Truth:
    return Truth(width, 4 * depth, 4 * depth, False, {
        "conv1.weight": _r("input"), "fc.weight": _r("output"),
        "layer?.*.conv1.weight": _r("branch_in"),
        "layer?.*.bn2.weight": _r("branch_gain"),
        "layer[234].0.downsample.0.weight": _r("hidden")},
        notes="4 stages x `depth` BasicBlocks (one branch each) at w, 2w, 4w, 8w channels: "
              "the stream's width is read at stage 1 (every stage's channels are a multiple "
              "of it); BN ends each branch; stride-2 projection shortcuts open stages 2-4")


# ---- DenseNet (Huang et al. 2017), torchvision's layout, plain torch -------------------------

class DenseLayer(nn.Module):
    """BN-ReLU-conv1x1 (4 growth) - BN-ReLU-conv3x3 (growth); its output is concatenated."""

    def __init__(self, cin: int, growth: int) -> None:
        super().__init__()
        self.norm1, self.conv1 = nn.BatchNorm2d(cin), nn.Conv2d(cin, 4 * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(4 * growth)
        self.conv2 = nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.relu(self.norm1(x)))
        return torch.cat([x, self.conv2(F.relu(self.norm2(h)))], dim=1)


class DenseNet(nn.Module):
    """Stem conv (width channels), two dense blocks of ``depth`` layers (growth width/4, so
    every channel count is a multiple of width/4), a transition between them (BN-ReLU-
    conv1x1 halving the channels, 2x2 average pool), final BN-ReLU, pool, fc. Init as
    torchvision's: kaiming normal convs (fan_in), BN 1 and 0, fc bias 0."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        growth = width // 4
        self.stem = nn.Conv2d(IMAGE[0], width, 3, padding=1, bias=False)
        c = width
        self.block1 = nn.Sequential(*(DenseLayer(c + i * growth, growth) for i in range(depth)))
        c += depth * growth
        self.trans_norm, self.trans = nn.BatchNorm2d(c), nn.Conv2d(c, c // 2, 1, bias=False)
        c //= 2
        self.block2 = nn.Sequential(*(DenseLayer(c + i * growth, growth) for i in range(depth)))
        c += depth * growth
        self.norm = nn.BatchNorm2d(c)
        self.fc = nn.Linear(c, 10)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        nn.init.zeros_(self.fc.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.block1(self.stem(x))
        x = F.avg_pool2d(self.trans(F.relu(self.trans_norm(x))), 2)
        x = F.relu(self.norm(self.block2(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def build_densenet(width: int, depth: int, seed: int) -> nn.Module:
    with seeded(seed):
        return DenseNet(width, depth)


def _densenet_truth(width: int, depth: int) -> Truth:
    return Truth(width, 0, 0, False, {
        "stem.weight": _r("input"), "fc.weight": _r("output"),
        "block?.*.conv?.weight": _r("hidden"), "trans.weight": _r("hidden")},
        notes="no residual addition (each layer's output is concatenated): a width-only plan; "
              "every channel count is a multiple of width/4 (growth), the concatenated fan-in "
              "grows with the layers as well as with width")


ARCHS: list[Arch] = [
    Arch("hf-convnext", build_convnext_hf, "images", _convnext_truth, logits="logits",
         hf=True),
    Arch("hf-falcon", build_falcon, "tokens", _falcon_truth, logits="logits",
         inputs="input_ids", hf=True),
    # test_zoo's (c) sweeps depth at width 64, where 4-16 blocks per stage (8w channels) are
    # too slow; the depth sweep at width 16 (and its depth regime) is test_zoo_widths.py's
    Arch("tv-resnet18", build_tv_resnet, "images", _tv_resnet_truth, widths=(16, 32, 64),
         coord_depths=()),
    Arch("densenet", build_densenet, "images", _densenet_truth, depths=(1, 2, 3),
         coord_depths=()),
]

"""Issue 40: channel-last and inverted-residual vision backbones.

The stream's width is the feature size the branches' layers write, whatever the layout (a
(B, H, W, C) stream, as torchvision's Swin keeps it, is not read as H); a layer that makes the
stream from what earlier layers computed (the projection of MobileNetV2's first, channel-
changing block) is a hidden layer, not a second input layer; and a branch's last layer whose
output a normalisation divides out before the addition takes no branch multiplier of its own:
the norm's gain carries it (once). Every value is exact."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from depthscale.param import PlanState, inspect, plan
from depthscale.param.usage import Usage

GRID = 4  # a 4x4 grid of positions: a size that a layout-based reading takes for the width


class ChannelLast(nn.Module):
    """A stem conv, then the stream kept as (B, H, W, C): residual MLP blocks on the last dim
    (LayerNorm, Linear up, GELU, Linear down), pooled into a head."""

    def __init__(self, n: int, blocks: int = 2) -> None:
        super().__init__()
        self.stem = nn.Conv2d(1, n, 2, stride=2)
        self.norms = nn.ModuleList(nn.LayerNorm(n) for _ in range(blocks))
        self.up = nn.ModuleList(nn.Linear(n, 2 * n) for _ in range(blocks))
        self.down = nn.ModuleList(nn.Linear(2 * n, n) for _ in range(blocks))
        self.head = nn.Linear(n, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x).permute(0, 2, 3, 1)  # (B, GRID, GRID, n)
        for norm, up, down in zip(self.norms, self.up, self.down, strict=True):
            h = h + down(F.gelu(up(norm(h))))
        return self.head(h.mean(dim=(1, 2)))


def _image(batch: int = 4) -> torch.Tensor:
    return torch.randn(batch, 1, 2 * GRID, 2 * GRID, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("n", [32, 48])
def test_a_channel_last_stream_is_as_wide_as_its_channels(n: int) -> None:
    """Sum (B, 4, 4, n): width n (the layout-based reading gave shape[1] = 4 at every n)."""
    torch.manual_seed(0)
    model = ChannelLast(n)
    st = inspect(model, _image())
    assert (st.width, st.depth) == (n, 2)
    assert [b.width for b in st.branches] == [n, n]
    assert st.roles["stem.weight"] == "input"
    assert st.roles["up.0.weight"] == "branch_in"
    assert st.roles["down.1.weight"] == "branch_out"
    plan("completep", width=n, depth=2).apply(model, example_input=_image(), seed=0)
    assert PlanState.of(model).settings["width"] == n  # the true width is not refused


def test_a_channels_first_stream_keeps_its_channel_width() -> None:
    """The same reading on NCHW: a 1x1-conv residual branch on (B, 48, 4, 4) is 48 wide, a
    conv1d branch on (B, 24, 8) 24 wide."""

    class Convs(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem, self.a, self.b = (nn.Conv2d(1, 48, 2, stride=2), nn.Conv2d(48, 96, 1),
                                         nn.Conv2d(96, 48, 1))
            self.stem1, self.c = nn.Conv1d(48, 24, 1), nn.Conv1d(24, 24, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.stem(x)
            h = h + self.b(F.relu(self.a(h)))
            s = self.stem1(h.flatten(2)[..., :8])  # (B, 24, 8)
            return (s + self.c(s)).mean()

    st = inspect(Convs(), _image())
    assert [b.width for b in st.branches] == [48, 24]


class TokenMixer(nn.Module):
    """(B, 16 tokens, n): a token-mixing branch (Linear over the 16 tokens, on the transposed
    stream, transposed back) and a channel MLP branch, as an MLP-Mixer block."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.inp = nn.Linear(4, n)
        self.tok1, self.tok2 = nn.Linear(16, 32), nn.Linear(32, 16)
        self.ch1, self.ch2 = nn.Linear(n, 2 * n), nn.Linear(2 * n, n)
        self.head = nn.Linear(n, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x.reshape(x.shape[0], 16, 4))
        h = h + self.tok2(F.gelu(self.tok1(h.transpose(1, 2)))).transpose(1, 2)
        h = h + self.ch2(F.gelu(self.ch1(h)))
        return self.head(h.mean(dim=1))


def test_a_branch_writing_another_dim_does_not_set_the_width() -> None:
    """The token-mixing branch writes 16 features along the token dim: where its sum has them
    (dim 1) is not where it wrote them (last), so its width is the stream's, 48."""
    st = inspect(TokenMixer(48), _image())
    assert (st.width, [b.width for b in st.branches]) == (48, [48, 48])


class Inverted(nn.Module):
    """MobileNetV2's layout in plain torch: a stem conv (1 -> n), then an inverted residual
    that changes the channels (n -> n/2: 1x1 expand to 3n, depthwise 3x3, 1x1 project; no
    addition) and ``blocks`` residual ones at n/2 (expand 3n, depthwise, project + input);
    BatchNorm after every conv (eps 1e-3, the model's), ReLU6 but after the projections."""

    def __init__(self, n: int = 32, blocks: int = 2) -> None:
        super().__init__()
        half = n // 2
        self.stem = nn.Sequential(nn.Conv2d(1, n, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(n, eps=1e-3), nn.ReLU6())
        self.blocks = nn.ModuleList(
            [_inverted(n, half, 3 * n)] + [_inverted(half, half, 3 * n) for _ in range(blocks)])
        self.head = nn.Linear(half, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        h = self.blocks[0](h)  # channels change: no residual addition
        for block in self.blocks[1:]:
            h = h + block(h)
        return self.head(h.mean(dim=(2, 3)))


def _inverted(cin: int, cout: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden, eps=1e-3), nn.ReLU6(),
        nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False),
        nn.BatchNorm2d(hidden, eps=1e-3), nn.ReLU6(),
        nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout, eps=1e-3))


def test_inverted_residuals_project_into_a_branch_and_the_first_one_is_hidden() -> None:
    """Roles: stem input; block 0 (no addition) hidden throughout, its projection too (it was
    read as a second input layer: its input had passed the stem and the expand conv);
    residual blocks expand branch_in, depthwise hidden, project branch_out, whose BatchNorm
    gain ends the branch (branch_gain)."""
    torch.manual_seed(0)
    model = Inverted(32, 2)
    st = inspect(model, _image())
    assert (st.width, st.depth, len(st.blocks)) == (16, 2, 2)
    roles = {n: r for n, r in st.roles.items() if n.endswith("weight")}
    assert roles == {
        "stem.0.weight": "input", "stem.1.weight": "norm",
        "blocks.0.0.weight": "hidden", "blocks.0.1.weight": "norm",
        "blocks.0.3.weight": "hidden", "blocks.0.4.weight": "norm",
        "blocks.0.6.weight": "hidden", "blocks.0.7.weight": "norm",
        **{k: v for b in (1, 2) for k, v in {
            f"blocks.{b}.0.weight": "branch_in", f"blocks.{b}.1.weight": "branch_norm",
            f"blocks.{b}.3.weight": "hidden", f"blocks.{b}.4.weight": "branch_norm",
            f"blocks.{b}.6.weight": "branch_out",
            f"blocks.{b}.7.weight": "branch_gain"}.items()},
        "head.weight": "output"}
    assert "makes the residual stream from what earlier layers computed" in (
        st.reasons["blocks.0.6.weight"])


def test_the_layer_before_a_branch_ending_norm_takes_no_branch_multiplier() -> None:
    """CompleteP at L = 4 (T = 1): the BatchNorm gain that ends each branch is 1/4, and the
    projection before it keeps the width rule alone, multiplier 1/sqrt(fan_in) = 1/sqrt(96)
    (it was (1/4)/sqrt(96): the branch multiplier twice, which the norm's eps then shows);
    its Adam LR is unchanged (1/sqrt(n), as the expand conv's)."""
    torch.manual_seed(0)
    model = Inverted(32, 4)
    x = _image()
    st = inspect(model, x)
    p = plan("completep", width=st.width, depth=st.depth)
    usage = p.spec("blocks.1.6.weight", "branch_out", (16, 96, 1, 1), 96, Usage(normed=True))
    plain = p.spec("blocks.1.6.weight", "branch_out", (16, 96, 1, 1), 96)
    assert math.isclose(usage.a, 1 / math.sqrt(96)) and math.isclose(plain.a, 0.25 / math.sqrt(96))
    assert usage.c_adam == plain.c_adam and usage.eps == plain.eps
    p.apply(model, example_input=x, seed=0)
    state = PlanState.of(model)
    assert state.usage["blocks.1.6.weight"] == Usage(fan_in=96, normed=True)
    assert "blocks.1.0.weight" not in state.usage or not state.usage["blocks.1.0.weight"].normed
    assert torch.equal(model.blocks[1][7].weight.detach(), torch.full((16,), 0.25))
    std = float(model.blocks[1][6].weight.std())
    assert abs(std * math.sqrt(96) - 1) < 0.1  # 1536 draws of N(0, 1/96)


class Sub(nn.Module):
    """x + fc2(relu(fc1(x))): one residual branch."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(n, 2 * n), nn.Linear(2 * n, n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.relu(self.fc1(x)))


class Pair(nn.Module):
    """Two branches of different kinds (``mix``, ``mlp``), as a Swin layer's attention + MLP."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.mix, self.mlp = Sub(n), Sub(n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.mix(x))


class Staged(nn.Module):
    """``stages.s.blocks.k``: stages of repeated blocks (Swin's ``layers.0.blocks.k``), or, with
    ``t5=True``, ``block.k.layer.j``: blocks whose numbered sublayers differ (T5)."""

    def __init__(self, n: int = 16, stages: int = 2, blocks: int = 3, t5: bool = False) -> None:
        super().__init__()
        self.inp, self.head = nn.Linear(8, n), nn.Linear(n, 4)
        if t5:
            self.block = nn.ModuleList(nn.ModuleDict({"layer": nn.ModuleList(
                [Sub(n), Pair(n)])}) for _ in range(blocks))
        else:
            self.stages = nn.ModuleList(nn.ModuleDict({"blocks": nn.ModuleList(
                Pair(n) for _ in range(blocks))}) for _ in range(stages))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        if hasattr(self, "block"):
            for blk in self.block:
                for sub in blk["layer"]:
                    h = sub(h)
        else:
            for stage in self.stages:
                for blk in stage["blocks"]:
                    h = blk(h)
        return self.head(h)


def test_a_stage_of_repeated_blocks_counts_its_blocks() -> None:
    """2 stages of 3 two-branch blocks: 12 branches in 6 blocks (``stages.s.blocks.k``; the
    first numbered module alone gave 2); 3 T5-like blocks, each ``layer.0`` (one branch) and
    ``layer.1`` (two): 9 branches in 3 blocks, not split into their different sublayers."""
    x = torch.randn(4, 8)
    st = inspect(Staged(), x)
    assert (st.depth, sorted(st.blocks)) == (12, [f"stages.{s}.blocks.{k}" for s in (0, 1)
                                                  for k in range(3)])
    assert all(len(v) == 2 for v in st.blocks.values())
    st = inspect(Staged(t5=True), x)
    assert (st.depth, sorted(st.blocks)) == (9, ["block.0", "block.1", "block.2"])


def test_hugging_face_mobilenetv2_reads_every_inverted_residual_as_what_it_is() -> None:
    """The whole model (16 inverted residuals, depth_multiplier 0.5, 8x8 input): the 10 with
    an addition (stride 1, same channels) are branches, expand branch_in, depthwise hidden,
    project branch_out; the 6 that change channels or stride (layers 0, 2, 5, 9, 12, 15) are
    plain hidden layers throughout, layer 0's projection too (it makes the first stream);
    the stem's first conv is the one input layer, the classifier the output."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.MobileNetV2Config(num_channels=1, image_size=8, depth_multiplier=0.5,
                                         classifier_dropout_prob=0.0, num_labels=10)
    model = transformers.MobileNetV2ForImageClassification(cfg)
    st = inspect(model, _image())
    plain = {0, 2, 5, 9, 12, 15}
    assert st.depth == 10
    assert [b.width for b in st.branches] == [16, 16, 16, 32, 32, 32, 48, 48, 80, 80]
    want = {f"layer.{i}.{c}": "hidden" if i in plain or c == "conv_3x3" else
            {"expand_1x1": "branch_in", "reduce_1x1": "branch_out"}[c]
            for i in range(16) for c in ("expand_1x1", "conv_3x3", "reduce_1x1")}
    want |= {"conv_stem.first_conv": "input", "conv_stem.conv_3x3": "hidden",
             "conv_stem.reduce_1x1": "hidden", "conv_1x1": "hidden"}
    found = {k: st.roles[f"mobilenet_v2.{k}.convolution.weight"] for k in want}
    assert found == want
    assert st.roles["classifier.weight"] == "output"
    assert list(st.roles.values()).count("input") == 1

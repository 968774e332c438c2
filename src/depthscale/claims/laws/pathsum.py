"""PathSum (Chen, Wu, Wang, Hanin, ICLR 2024, arXiv 2402.17440), the rule laws Fig. 3(b)
compares against: the maximal LR of a network whose computation graph is a DAG is eta* ~=
c (sum over the input-output paths p of L_p^3)^(-1/2), L_p the weighted (linear, conv) layers
on path p; identity skips add none, and a CNN's extra 1/q (kernel size) is constant in depth.

For a ResNet of m weighted layers outside its K blocks, each block a branch of b weighted
layers beside a skip of s (0: identity), a path takes the branch at j of the K blocks:
sum_p L_p^3 = sum_{j=0}^{K} C(K, j) (m + b j + s (K - j))^3, an exact integer here.
"""

from __future__ import annotations

import math
from typing import Any

from torch import nn

from depthscale.errors import ConfigError
from depthscale.models import create
from depthscale.models.layers import ScaledConv, ScaledLinear

__all__ = ["log10_path_sum", "path_sum", "resnet_layers"]


def path_sum(blocks: int, outside: int, branch: int, skip: int = 0) -> int:
    """sum_p L_p^3 over the 2^K paths of a ResNet of ``blocks`` K, ``outside`` m weighted
    layers on every path, ``branch`` b per residual branch and ``skip`` s per skip edge:
    sum_{j=0}^{K} C(K, j) (m + b j + s (K - j))^3 (module docstring)."""
    for name, v in (("blocks", blocks), ("outside", outside), ("branch", branch),
                    ("skip", skip)):
        if v < 0:
            raise ConfigError(f"path_sum: {name} must be >= 0 (a count of layers), got {v}")
    return sum(math.comb(blocks, j) * (outside + branch * j + skip * (blocks - j)) ** 3
               for j in range(blocks + 1))


def log10_path_sum(blocks: int, outside: int, branch: int, skip: int = 0) -> float:
    """log10 of :func:`path_sum` (of the exact integer: no overflow at any depth)."""
    total = path_sum(blocks, outside, branch, skip)
    if total <= 0:
        raise ConfigError(f"path_sum is 0 at blocks {blocks}, outside {outside}, branch "
                          f"{branch}, skip {skip}: no path carries a weighted layer")
    return math.log10(total)


def _weighted(module: nn.Module) -> int:
    """The weighted layers (:class:`ScaledConv`, :class:`ScaledLinear`) in ``module``."""
    return sum(isinstance(m, ScaledConv | ScaledLinear) for m in module.modules())


def resnet_layers(arch: dict[str, Any]) -> tuple[int, int]:
    """(m, b) of the ResNet ``arch`` (a laws Arch of a ``convresnet*`` model), counted on the
    model as built at K = 1 and K = 2: the weighted layers outside the residual blocks (stem,
    head) and those inside one block (its branch F_l). The skip is the identity
    (:class:`~depthscale.models.cnn.ConvResNet`: h_l = h_{l-1} + F_l(h_{l-1}), laws Eq. 4):
    no projection shortcut, so s = 0 in :func:`path_sum`."""
    counts = []
    for k in (1, 2):
        net = create(arch["model"], input_shape=tuple(arch["input_shape"]), n_out=10,
                     width=arch["width"], depth=k, **arch.get("options", {}))
        blocks = getattr(net, "blocks", None)
        if not isinstance(blocks, nn.ModuleList) or len(blocks) != k:
            raise ConfigError(f"PathSum needs a ResNet with residual 'blocks' (convresnet1d, "
                              f"convresnet2d), got model {arch['model']!r}")
        in_blocks = [_weighted(b) for b in blocks]
        counts.append((_weighted(net) - sum(in_blocks), in_blocks[0]))
    if counts[0] != counts[1]:
        raise ConfigError(f"model {arch['model']!r}: its layers outside the blocks or per "
                          f"block change with depth ({counts}); PathSum's sum needs them fixed")
    return counts[0]

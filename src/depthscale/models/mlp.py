"""Fully connected models of nfd, written as the paper writes them.

* :class:`MLPResNet` with one-layer blocks, pre-activation (nfd Eq. 1) or post-activation
  (nfd Eq. 9), with two-layer blocks (nfd Eq. 6), and with blocks of three or more internal
  layers (Eq. 6 extended, nfd open question 4).
* :class:`PlainMLP`, the "vanilla DNN" baseline of nfd Fig. 4a.

Multipliers come from a plan; every weight is a :class:`ScaledLinear` with a role.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import torch
from torch import nn

from depthscale.activations import activation as get_activation
from depthscale.errors import ConfigError
from depthscale.models.layers import ScaledLinear

__all__ = ["MLPResNet", "PlainMLP", "Trace"]


@dataclass
class Trace:
    """Intermediate values of one forward pass.

    ``streams[l]`` is h_l (l = 0..L). For blocks of two or more layers ``internal[l-1]`` is the
    (first) internal representation x_l of nfd Eq. 6, ``layers[l-1]`` every internal
    representation of block l in order (x_{l,1}, ..., x_{l,k-1} for k layers) and
    ``increments[l-1]`` the branch output h_l - h_{l-1}.
    """

    out: torch.Tensor
    streams: list[torch.Tensor] = field(default_factory=list)
    internal: list[torch.Tensor] = field(default_factory=list)
    layers: list[list[torch.Tensor]] = field(default_factory=list)
    increments: list[torch.Tensor] = field(default_factory=list)


def _check_sizes(d_in: int, d_out: int, width: int, depth: int) -> None:
    for name, v in (("input size", d_in), ("output size", d_out), ("width", width)):
        if v < 1:
            raise ConfigError(f"{name} must be >= 1, got {v}")
    if depth < 1:
        raise ConfigError(f"depth must be >= 1, got {depth}")


class MLPResNet(nn.Module):
    """ResNet on vectors (nfd Eq. 1, 6, 9).

    * ``block=1, style="pre"`` (Eq. 1): h_l = h_{l-1} + a W_l phi(h_{l-1}).
    * ``block=1, style="post"`` (Eq. 9): h_0 = phi(a U x), h_l = h_{l-1} + phi(a W_l h_{l-1});
      with the plan's a = sqrt(T/(L n)) inside phi this is Eq. 9's sqrt(T/L) phi(W h/sqrt(n)) only
      for positively homogeneous phi, so only ReLU and identity are accepted.
    * ``block=2`` (Eq. 6): x_l = a_1 W_{l,1} h_{l-1}, h_l = h_{l-1} + a_2 W_{l,2} phi(x_l).
    * ``block=k >= 3`` (Eq. 6 extended): x_{l,1} = a_1 W_{l,1} h_{l-1},
      x_{l,j} = a_j W_{l,j} phi(x_{l,j-1}), h_l = h_{l-1} + a_k W_{l,k} phi(x_{l,k-1}); W_{l,1} has
      role ``branch_in``, the middle layers ``hidden`` (the plan's 1/sqrt(n) rule, no depth factor:
      depth-muP and Eq. 8 say nothing of them; a plan's ``roles`` can override it), W_{l,k}
      ``branch_out``.

    Input h_0 = a U x and output f = a v^T h_L. ``backward="decoupled"`` or
    ``"feedback-alignment"`` applies to the residual-branch layers (nfd Cor. 1).
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        width: int,
        depth: int,
        *,
        block: int = 1,
        style: str = "pre",
        activation: str = "relu",
        backward: str = "standard",
    ) -> None:
        super().__init__()
        _check_sizes(d_in, d_out, width, depth)
        if isinstance(block, bool) or not isinstance(block, int) or block < 1:
            raise ConfigError(f"block must be the number of layers per residual block, a whole "
                              f"number >= 1 (1: nfd Eq. 1, 2: Eq. 6), got {block!r}")
        if style not in ("pre", "post"):
            raise ConfigError(f"style must be 'pre' or 'post', got {style!r}")
        if style == "post" and (block != 1 or activation not in ("relu", "identity")):
            raise ConfigError(
                "post-activation (nfd Eq. 9) is built for one-layer blocks with relu or identity "
                f"(positively homogeneous phi); got block={block}, activation={activation!r}"
            )
        self.phi = get_activation(activation)
        self.width, self.depth, self.block, self.style = width, depth, block, style
        self.plan_depth = depth
        self.effective_depth = depth + 2  # laws Sec. 3.4: m = 2 plain layers (stem, head) + K
        self.embed = ScaledLinear(d_in, width, "input")
        if block == 1:
            self.branches = nn.ModuleList(
                ScaledLinear(width, width, "branch", backward=backward) for _ in range(depth)
            )
        else:
            self.branches = nn.ModuleList(
                nn.ModuleDict({
                    "inner": ScaledLinear(width, width, "branch_in", backward=backward),
                    **({"middle": nn.ModuleList(
                        ScaledLinear(width, width, "hidden", backward=backward)
                        for _ in range(block - 2))} if block > 2 else {}),
                    "outer": ScaledLinear(width, width, "branch_out", backward=backward),
                })
                for _ in range(depth)
            )
        self.readout = ScaledLinear(width, d_out, "output")

    def trace(self, x: torch.Tensor) -> Trace:
        """Forward pass that keeps every residual-stream state (and internal x_l)."""
        x = x.flatten(1)
        h = self.embed(x)
        if self.style == "post":
            h = self.phi(h)
        tr = Trace(out=h, streams=[h])
        for branch in self.branches:
            if self.block >= 2:
                parts = cast(nn.ModuleDict, branch)
                inner = parts["inner"](h)
                xs = [inner]
                middle: list[nn.Module] = (list(cast(nn.ModuleList, parts["middle"]))
                                           if self.block > 2 else [])
                for layer in middle:
                    xs.append(layer(self.phi(xs[-1])))
                delta = parts["outer"](self.phi(xs[-1]))
                tr.internal.append(inner)
                tr.layers.append(xs)
            elif self.style == "pre":
                delta = branch(self.phi(h))
            else:
                delta = self.phi(branch(h))
            tr.increments.append(delta)
            h = h + delta
            tr.streams.append(h)
        tr.out = self.readout(h)
        return tr

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.trace(x).out


class PlainMLP(nn.Module):
    """The vanilla deep network of nfd Fig. 4a: z_0 = a U x, z_l = a W_l phi(z_{l-1}) for
    l = 1..L, output a v^T phi(z_L). ``depth`` counts the n x n hidden matrices, as L counts
    residual blocks in :class:`MLPResNet`."""

    def __init__(
        self,
        d_in: int,
        d_out: int,
        width: int,
        depth: int,
        *,
        activation: str = "relu",
        backward: str = "standard",
    ) -> None:
        super().__init__()
        _check_sizes(d_in, d_out, width, depth)
        self.phi = get_activation(activation)
        self.width, self.depth, self.plan_depth = width, depth, depth
        self.effective_depth = depth + 2
        self.embed = ScaledLinear(d_in, width, "input")
        self.layers = nn.ModuleList(
            ScaledLinear(width, width, "hidden", backward=backward) for _ in range(depth)
        )
        self.readout = ScaledLinear(width, d_out, "output")

    def trace(self, x: torch.Tensor) -> Trace:
        z = self.embed(x.flatten(1))
        tr = Trace(out=z, streams=[z])
        for layer in self.layers:
            z = layer(self.phi(z))
            tr.streams.append(z)
        tr.out = self.readout(self.phi(z))
        return tr

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.trace(x).out

"""Convolutional models of laws, written as the paper writes them.

* :class:`PlainCNN`, the homogeneous stride-1 CNN of laws Eq. 3 (Sec. 3.1, 3.3).
* :class:`ConvResNet`, a pre-activation convolutional ResNet, laws Eq. 4 (Sec. 3.4).

Both end with global average pooling (GAP) and a linear head. Inputs are ``(N, C, length)``
(``dims=1``) or ``(N, C, H, W)`` (``dims=2``); every convolution keeps the spatial size.
Multipliers come from a plan; every weight is a :class:`ScaledConv` or :class:`ScaledLinear`
with a role.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, cast

import torch
from torch import nn

from depthscale.activations import activation as get_activation
from depthscale.errors import ConfigError
from depthscale.models.layers import ScaledConv, ScaledLinear, in_branch
from depthscale.models.mlp import Trace

__all__ = ["ConvBlock", "ConvResNet", "PlainCNN"]

_SHAPE_NAMES = {1: "(channels, length)", 2: "(channels, height, width)"}


def _check(
    *, in_channels: int, n_out: int, width: int, depth: int, dims: int, kernel_size: int,
    padding: str, dropout: float,
) -> None:
    for name, v in (
        ("input channels", in_channels), ("output size", n_out), ("width", width),
        ("depth", depth), ("kernel size", kernel_size),
    ):
        if v < 1:
            raise ConfigError(f"{name} must be >= 1, got {v}")
    if dims not in (1, 2):
        raise ConfigError(f"dims must be 1 or 2 (1D or 2D convolutions), got {dims}")
    if padding not in ("zero", "circular"):
        raise ConfigError(f"padding must be 'zero' or 'circular', got {padding!r}")
    if not 0.0 <= dropout < 1.0:
        raise ConfigError(f"dropout must be in [0, 1), got {dropout}")


def _check_input_shape(kind: str, input_shape: tuple[int, ...], dims: int) -> None:
    """A clear error when a per-sample input of the wrong rank meets a ``dims``-D model."""
    if len(input_shape) != dims + 1:
        raise ConfigError(
            f"a {dims}D {kind} expects per-sample inputs of shape {_SHAPE_NAMES[dims]}, "
            f"got shape {tuple(input_shape)}"
        )


def _norm(batchnorm: bool, channels: int, dims: int) -> nn.Module:
    """N of the paper's blocks: BatchNorm over channels, or the identity."""
    if not batchnorm:
        return nn.Identity()
    return nn.BatchNorm1d(channels) if dims == 1 else nn.BatchNorm2d(channels)


def _dropout(p: float) -> nn.Module:
    return nn.Dropout(p) if p > 0 else nn.Identity()


def _gap(z: torch.Tensor) -> torch.Tensor:
    """Global average pooling over every spatial location: (N, C, ...) -> (N, C)."""
    return z.flatten(2).mean(-1)


class _FromShape:
    """``from_shape``: build a conv net from a per-sample input shape (used by the registry)."""

    _kind = "conv net"

    @classmethod
    def from_shape(
        cls, input_shape: tuple[int, ...], n_out: int, width: int, depth: int, *, dims: int,
        **options: Any,
    ) -> Any:
        """Build from ``(C, length)`` or ``(C, H, W)``; a wrong rank is a ConfigError."""
        _check_input_shape(cls._kind, input_shape, dims)
        return cls(input_shape[0], n_out, width, depth, dims=dims, **options)  # type: ignore[call-arg]


class PlainCNN(_FromShape, nn.Module):
    """The homogeneous stride-1 CNN of laws Eq. 3.

    z_1 = conv_1(x) (role ``input``), z_l = conv_l(sigma(z_{l-1})) for l = 2..L (role
    ``hidden``), then f = head(GAP(sigma(z_L))) with a linear head (role ``output``). Optional
    BatchNorm acts on every z_l before its activation, optional dropout before every hidden
    conv. ``depth`` is L, the number of conv layers (laws counts conv+sigma units; the head is
    not a depth unit). Biases are omitted, as in Eq. 3.
    """

    _kind = "CNN"

    def __init__(
        self,
        in_channels: int,
        n_out: int,
        width: int,
        depth: int,
        *,
        dims: int,
        kernel_size: int = 3,
        padding: str = "zero",
        activation: str = "relu",
        batchnorm: bool = False,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        _check(
            in_channels=in_channels, n_out=n_out, width=width, depth=depth, dims=dims,
            kernel_size=kernel_size, padding=padding, dropout=dropout,
        )
        self.sigma = get_activation(activation)
        self.activation_name = activation
        self.width, self.depth, self.dims = width, depth, dims
        self.plan_depth = depth
        self.effective_depth = depth  # laws Eq. 3: L conv+sigma depth units
        conv = partial(ScaledConv, kernel_size=kernel_size, dims=dims, padding=padding)
        self.input_conv = conv(in_channels, width, role="input")  # conv_1
        self.hidden_convs = nn.ModuleList(  # conv_2 .. conv_L
            conv(width, width, role="hidden") for _ in range(depth - 1)
        )
        self.norms = nn.ModuleList(  # acting on z_1 .. z_{L-1}
            _norm(batchnorm, width, dims) for _ in range(depth - 1)
        )
        self.last_norm = _norm(batchnorm, width, dims)  # acting on z_L
        self.drop = _dropout(dropout)
        self.head = ScaledLinear(width, n_out, "output")

    def trace(self, x: torch.Tensor) -> Trace:
        """Forward pass that keeps every pre-activation z_1..z_L (before GAP)."""
        z = self.input_conv(x)
        tr = Trace(out=z, streams=[z])
        for norm, conv in zip(self.norms, self.hidden_convs, strict=True):
            z = conv(self.drop(self.sigma(norm(z))))
            tr.streams.append(z)
        tr.out = self.head(_gap(self.sigma(self.last_norm(z))))
        return tr

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.input_conv(x)
        for norm, conv in zip(self.norms, self.hidden_convs, strict=True):
            z = conv(self.drop(self.sigma(norm(z))))
        result: torch.Tensor = self.head(_gap(self.sigma(self.last_norm(z))))
        return result


class ConvBlock(nn.Module):
    """The residual branch F_l of laws Eq. 4 for a pre-activation conv block.

    * ``block=1``: F(h) = conv(drop(sigma(N(h)))), conv role ``branch``.
    * ``block=2``: F(h) = conv2(drop(sigma(N2(conv1(sigma(N1(h))))))), roles ``branch_in``,
      ``branch_out``.

    The block returns the increment F(h); the residual addition happens in the model.
    """

    def __init__(
        self,
        width: int,
        block: int,
        *,
        sigma: Callable[[torch.Tensor], torch.Tensor],
        dims: int,
        kernel_size: int,
        padding: str,
        batchnorm: bool,
        dropout: float,
    ) -> None:
        super().__init__()
        self.sigma = sigma
        self.block = block
        conv = partial(ScaledConv, width, width, kernel_size, dims=dims, padding=padding)
        self.drop = _dropout(dropout)
        if block == 1:
            self.norm = _norm(batchnorm, width, dims)
            self.conv = conv(role="branch")
            in_branch(self.norm)
        else:
            self.norm1 = _norm(batchnorm, width, dims)
            self.conv1 = conv(role="branch_in")
            self.norm2 = _norm(batchnorm, width, dims)
            self.conv2 = conv(role="branch_out")
            in_branch(self.norm1, self.norm2)

    def inner(self, h: torch.Tensor) -> torch.Tensor:
        """The internal representation conv1(sigma(N1(h))) of a two-layer block."""
        result: torch.Tensor = self.conv1(self.sigma(self.norm1(h)))
        return result

    def outer(self, u: torch.Tensor) -> torch.Tensor:
        """conv2(drop(sigma(N2(u)))) of a two-layer block."""
        result: torch.Tensor = self.conv2(self.drop(self.sigma(self.norm2(u))))
        return result

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        if self.block == 1:
            result: torch.Tensor = self.conv(self.drop(self.sigma(self.norm(h))))
            return result
        return self.outer(self.inner(h))


class ConvResNet(_FromShape, nn.Module):
    """Pre-activation convolutional ResNet, laws Eq. 4 with the setup of laws Sec. 3.4.

    h_0 = stem(x) (role ``input``), h_l = h_{l-1} + F_l(h_{l-1}) for l = 1..K with F_l a
    :class:`ConvBlock`, then f = head(GAP(sigma(h_K))) (role ``output``). ``depth`` is K;
    the effective depth is L = m + K with m = 2 plain units (stem, head), laws Sec. 3.4.
    """

    _kind = "conv ResNet"

    def __init__(
        self,
        in_channels: int,
        n_out: int,
        width: int,
        depth: int,
        *,
        dims: int,
        block: int = 1,
        kernel_size: int = 3,
        padding: str = "zero",
        activation: str = "relu",
        batchnorm: bool = False,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        _check(
            in_channels=in_channels, n_out=n_out, width=width, depth=depth, dims=dims,
            kernel_size=kernel_size, padding=padding, dropout=dropout,
        )
        if block not in (1, 2):
            raise ConfigError(f"block must be 1 (one conv) or 2 (two convs), got {block}")
        self.sigma = get_activation(activation)
        self.activation_name = activation
        self.width, self.depth, self.dims, self.block = width, depth, dims, block
        self.plan_depth = depth
        self.effective_depth = depth + 2  # laws Sec. 3.4: m = 2 plain units (stem, head) + K
        self.stem = ScaledConv(in_channels, width, kernel_size, "input", dims=dims, padding=padding)
        self.blocks = nn.ModuleList(
            ConvBlock(
                width, block, sigma=self.sigma, dims=dims, kernel_size=kernel_size,
                padding=padding, batchnorm=batchnorm, dropout=dropout,
            )
            for _ in range(depth)
        )
        self.head = ScaledLinear(width, n_out, "output")

    def trace(self, x: torch.Tensor) -> Trace:
        """Forward pass that keeps h_0..h_K, the increments F_l(h_{l-1}) and, for two-layer
        blocks, the internal representations conv1(sigma(N1(h_{l-1})))."""
        h = self.stem(x)
        tr = Trace(out=h, streams=[h])
        for blk in cast("Iterable[ConvBlock]", self.blocks):
            if self.block == 2:
                u = blk.inner(h)
                tr.internal.append(u)
                delta = blk.outer(u)
            else:
                delta = blk(h)
            tr.increments.append(delta)
            h = h + delta
            tr.streams.append(h)
        tr.out = self.head(_gap(self.sigma(h)))
        return tr

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        for blk in self.blocks:
            h = h + blk(h)
        result: torch.Tensor = self.head(_gap(self.sigma(h)))
        return result

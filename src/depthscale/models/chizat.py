"""The ResNet with two-layer-perceptron blocks of chizat Eq. 24, written as the paper writes it.

No embedding and no readout: the model maps R^D to R^D. The scales 1/D and 1/(L M) are the
layers' multipliers, set by the ``mean-ode`` plan (chizat Eq. 24-25).
"""

from __future__ import annotations

import torch
from torch import nn

from depthscale.activations import activation as get_activation
from depthscale.errors import ConfigError
from depthscale.models.layers import ScaledLinear
from depthscale.models.mlp import Trace

__all__ = ["TwoLayerPerceptronResNet"]


class TwoLayerPerceptronResNet(nn.Module):
    """chizat Eq. 24: h_0 = x, h_l = h_{l-1} + a_out V_l rho(a_in U_l h_{l-1}), l = 1..L.

    U_l in R^{M x D} (rows u^{j,l}, role ``branch_in``) and V_l in R^{D x M} (columns
    v^{j,l}, role ``branch_out``), no biases. Under the ``mean-ode`` recipe a_in = 1/D and
    a_out = 1/(L M), so the update is (1/(L M)) sum_j v^{j,l} rho((u^{j,l})^T h_{l-1} / D).
    The output is h_L in R^D.
    """

    def __init__(self, dim: int, hidden: int, depth: int, *, activation: str = "tanh") -> None:
        super().__init__()
        for name, v in (("dim D", dim), ("hidden M", hidden), ("depth L", depth)):
            if v < 1:
                raise ConfigError(f"{name} must be >= 1, got {v}")
        self.rho = get_activation(activation)
        self.activation_name = activation
        self.width, self.hidden, self.depth = dim, hidden, depth
        self.plan_depth = depth
        self.effective_depth = depth
        self.U = nn.ModuleList(ScaledLinear(dim, hidden, "branch_in") for _ in range(depth))
        self.V = nn.ModuleList(ScaledLinear(hidden, dim, "branch_out") for _ in range(depth))

    @classmethod
    def from_shape(
        cls,
        input_shape: tuple[int, ...],
        n_out: int,
        width: int,
        depth: int,
        *,
        hidden: int | None = None,
        activation: str = "tanh",
    ) -> TwoLayerPerceptronResNet:
        """Build from a per-sample input shape ``(D,)`` (registry). Chizat's model has no
        embedding or readout, so the input size, ``width`` and ``n_out`` must all be D.
        ``hidden`` (M) defaults to D."""
        input_shape = tuple(input_shape)
        if len(input_shape) != 1:
            raise ConfigError(
                f"chizat's model expects per-sample inputs of shape (D,), got shape {input_shape}"
            )
        (dim,) = input_shape
        if not n_out == dim == width:
            raise ConfigError(
                "chizat's model (Eq. 24) has no embedding or readout: input size D, width and "
                f"n_out must be equal, got D={dim}, width={width}, n_out={n_out}"
            )
        return cls(dim, width if hidden is None else hidden, depth, activation=activation)

    def trace(self, x: torch.Tensor) -> Trace:
        """Forward pass that keeps h_0..h_L and the increments h_l - h_{l-1}."""
        h = x
        tr = Trace(out=h, streams=[h])
        for U, V in zip(self.U, self.V, strict=True):
            delta = V(self.rho(U(h)))
            tr.increments.append(delta)
            h = h + delta
            tr.streams.append(h)
        tr.out = h
        return tr

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for U, V in zip(self.U, self.V, strict=True):
            h = h + V(self.rho(U(h)))
        return h

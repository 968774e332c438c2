"""Models written as the papers write them; multipliers come from a plan."""

from depthscale.models.layers import BACKWARD_MODES, ScaledConv, ScaledLinear
from depthscale.models.mlp import MLPResNet, PlainMLP, Trace
from depthscale.models.registry import MODELS, ModelSpec, build, create

__all__ = [
    "BACKWARD_MODES",
    "MODELS",
    "MLPResNet",
    "ModelSpec",
    "PlainMLP",
    "ScaledConv",
    "ScaledLinear",
    "Trace",
    "build",
    "create",
]

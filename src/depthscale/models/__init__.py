"""Models written as the papers write them; multipliers come from a plan."""

from depthscale.models.chizat import TwoLayerPerceptronResNet
from depthscale.models.cnn import ConvResNet, PlainCNN
from depthscale.models.gpt import GPT, CausalSelfAttention, TokenEmbedding
from depthscale.models.layers import BACKWARD_MODES, ScaledConv, ScaledLinear
from depthscale.models.mlp import MLPResNet, PlainMLP, Trace
from depthscale.models.registry import (
    MODELS,
    ModelSpec,
    build,
    create,
    is_factory,
    resolve_factory,
)
from depthscale.models.vit import ViT

__all__ = [
    "BACKWARD_MODES",
    "GPT",
    "MODELS",
    "CausalSelfAttention",
    "ConvResNet",
    "MLPResNet",
    "ModelSpec",
    "PlainCNN",
    "PlainMLP",
    "ScaledConv",
    "ScaledLinear",
    "TokenEmbedding",
    "Trace",
    "TwoLayerPerceptronResNet",
    "ViT",
    "build",
    "create",
    "is_factory",
    "resolve_factory",
]

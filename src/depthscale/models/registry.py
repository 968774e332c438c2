"""The models the CLI and the claims know by name, and one call that builds a planned model."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from torch import nn

from depthscale.errors import ConfigError
from depthscale.models.chizat import TwoLayerPerceptronResNet
from depthscale.models.cnn import ConvResNet, PlainCNN
from depthscale.models.mlp import MLPResNet, PlainMLP
from depthscale.models.vit import ViT
from depthscale.param import Plan, plan
from depthscale.param.checks import whole

__all__ = ["MODELS", "ModelSpec", "build", "create"]


@dataclass(frozen=True)
class ModelSpec:
    """A named model: what it is, where it comes from, and how to make it.

    ``make(input_shape, n_out, width, depth, **options)`` gets the per-sample input shape
    (``(features,)``, ``(channels, length)`` or ``(channels, height, width)``).
    """

    name: str
    summary: str
    source: str
    make: Callable[..., nn.Module]
    options: tuple[str, ...] = ()


def _numel(shape: tuple[int, ...]) -> int:
    out = 1
    for s in shape:
        out *= s
    return out


def _resnet(block: int, style: str) -> Callable[..., nn.Module]:
    def make(
        input_shape: tuple[int, ...], n_out: int, width: int, depth: int, **kw: Any
    ) -> nn.Module:
        return MLPResNet(_numel(input_shape), n_out, width, depth, block=block, style=style, **kw)

    return make


def _mlp(input_shape: tuple[int, ...], n_out: int, width: int, depth: int, **kw: Any) -> nn.Module:
    return PlainMLP(_numel(input_shape), n_out, width, depth, **kw)


_MLP_OPTIONS = ("activation", "backward")

MODELS: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        ModelSpec("resnet1", "MLP-ResNet, one-layer pre-act blocks", "nfd Eq. 1",
                  _resnet(1, "pre"), _MLP_OPTIONS),
        ModelSpec("resnet1-post", "MLP-ResNet, one-layer post-act blocks", "nfd Eq. 9",
                  _resnet(1, "post"), _MLP_OPTIONS),
        ModelSpec("resnet2", "MLP-ResNet, two-layer blocks", "nfd Eq. 6", _resnet(2, "pre"),
                  _MLP_OPTIONS),
        ModelSpec("resnet3", "MLP-ResNet, three-layer blocks", "nfd Eq. 6 extended (open Q. 4)",
                  _resnet(3, "pre"), _MLP_OPTIONS),
        ModelSpec("mlp", "plain deep MLP (vanilla DNN)", "nfd Fig. 4a", _mlp, _MLP_OPTIONS),
        ModelSpec("cnn1d", "plain stride-1 1D CNN, GAP + linear head", "laws Eq. 3",
                  partial(PlainCNN.from_shape, dims=1),
                  ("kernel_size", "padding", "activation", "batchnorm", "dropout")),
        ModelSpec("cnn2d", "plain stride-1 2D CNN, GAP + linear head", "laws Eq. 3",
                  partial(PlainCNN.from_shape, dims=2),
                  ("kernel_size", "padding", "activation", "batchnorm", "dropout")),
        ModelSpec("convresnet1d", "pre-activation 1D conv ResNet (1- or 2-conv blocks)",
                  "laws Eq. 4, Sec. 3.4", partial(ConvResNet.from_shape, dims=1),
                  ("block", "kernel_size", "padding", "activation", "batchnorm", "dropout")),
        ModelSpec("convresnet2d", "pre-activation 2D conv ResNet (1- or 2-conv blocks)",
                  "laws Eq. 4, Sec. 3.4", partial(ConvResNet.from_shape, dims=2),
                  ("block", "kernel_size", "padding", "activation", "batchnorm", "dropout")),
        ModelSpec("vit", "Vision Transformer on images or 1D signals, pre- or post-LN",
                  "laws Sec. 3.1, 3.5", ViT,
                  ("patch_size", "heads", "mlp_ratio", "norm", "activation", "dropout")),
        ModelSpec("chizat2lp", "ResNet of two-layer-perceptron blocks, no embedding (R^D -> R^D)",
                  "chizat Eq. 24", TwoLayerPerceptronResNet.from_shape, ("hidden", "activation")),
    )
}


def _check_options(spec: ModelSpec, options: Mapping[str, Any]) -> None:
    unknown = sorted(set(options) - set(spec.options))
    if unknown:
        raise ConfigError(
            f"model {spec.name!r} does not take option(s) {', '.join(unknown)}; "
            f"it takes: {', '.join(spec.options) or 'none'}"
        )


def create(
    name: str, *, input_shape: tuple[int, ...], n_out: int, width: int, depth: int, **options: Any
) -> nn.Module:
    """An unplanned model called ``name`` (default init, multipliers 1).

    The one check of the sizes every model shares: ``input_shape`` a non-empty tuple of whole
    numbers >= 1 (the per-sample shape, without the batch axis), ``n_out``, ``width`` and
    ``depth`` whole numbers >= 1; each model then checks what is its own (rank, divisibility).
    """
    if not isinstance(name, str) or name not in MODELS:
        raise ConfigError(f"unknown model {name!r}; choose one of: {', '.join(MODELS)}")
    spec = MODELS[name]
    _check_options(spec, options)
    if isinstance(input_shape, (str, bytes)) or not isinstance(input_shape, Sequence) or not (
            input_shape):
        raise ConfigError(
            f"input_shape must be the per-sample shape, a non-empty tuple such as (784,) or "
            f"(3, 32, 32), got {input_shape!r}"
        )
    shape = tuple(whole(f"input_shape[{i}]", s) for i, s in enumerate(input_shape))
    return spec.make(shape, whole("n_out", n_out), whole("width", width), whole("depth", depth),
                     **options)


def build(
    name: str,
    recipe: str,
    *,
    input_shape: tuple[int, ...],
    n_out: int,
    width: int,
    depth: int,
    seed: int = 0,
    plan_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> tuple[nn.Module, Plan]:
    """Model ``name`` under recipe ``recipe``, initialised by the plan from ``seed``.

    The plan is bound to the sizes the model reports (``width``, ``plan_depth``, ``hidden``) so
    the two always agree; ``plan_options`` go to :func:`depthscale.param.plan` (``T``,
    ``regime``, ``alpha``, ...), ``options`` to the model (``activation``, ``backward``, ...).
    """
    model = create(name, input_shape=input_shape, n_out=n_out, width=width, depth=depth, **options)
    p = plan(
        recipe,
        width=model.width,
        depth=getattr(model, "plan_depth", depth),
        hidden=getattr(model, "hidden", 1),
        activation=options.get("activation", getattr(model, "activation_name", "relu")),
        **dict(plan_options or {}),
    )
    p.apply(model, seed=seed)
    return model, p

"""The models the CLI and the claims know by name, user model factories named
``"package.module:function"``, and one call that builds a planned model."""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

import torch
from torch import nn

from depthscale.errors import ConfigError
from depthscale.models.calls import call_model, logits_of, tensors_of
from depthscale.models.chizat import TwoLayerPerceptronResNet
from depthscale.models.cnn import ConvResNet, PlainCNN
from depthscale.models.gpt import GPT
from depthscale.models.mlp import MLPResNet, PlainMLP
from depthscale.models.vit import ViT
from depthscale.param import Plan, plan
from depthscale.param.checks import whole

__all__ = ["MODELS", "ModelSpec", "build", "create", "is_factory", "resolve_factory"]


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
        ModelSpec("gpt", "GPT-style decoder-only Transformer on token ids, causal, pre- or post-LN",
                  "laws Sec. 3.1 blocks; GPT-2 (Radford et al. 2019)", GPT.from_shape,
                  ("heads", "mlp_ratio", "norm", "tied", "bias", "context", "activation",
                   "dropout")),
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


_FACTORY_SIGNATURE = "(input_shape, n_out, width, depth, **options)"


def is_factory(name: object) -> bool:
    """Whether ``name`` names a user model factory (``"package.module:function"``) rather
    than a model of :data:`MODELS`."""
    return isinstance(name, str) and ":" in name


def resolve_factory(
    text: str, options: Mapping[str, Any] | None = None
) -> Callable[..., nn.Module]:
    """The function ``"package.module:function"`` names: importable (from ``sys.path``),
    callable, and taking ``(input_shape, n_out, width, depth, **options)`` with ``options``
    (the model options a study gives it). Anything else is a ConfigError naming ``text``."""
    where = f"model factory {text!r}"
    module_name, _, attr = text.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"{where} must read 'package.module:function'")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # the user's module may raise anything while importing
        message = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        raise ConfigError(
            f"{where}: cannot import {module_name!r} ({message}); install its package or put "
            "its folder on PYTHONPATH"
        ) from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{where}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ConfigError(f"{where} is a {type(obj).__name__}, not a function; it must take "
                          f"{_FACTORY_SIGNATURE} and return an nn.Module")
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return cast("Callable[..., nn.Module]", obj)  # a builtin without a signature: trust it
    try:
        signature.bind((1,), 1, 1, 1, **dict(options or {}))
    except TypeError as exc:
        raise ConfigError(
            f"{where} takes {signature}, which does not accept {_FACTORY_SIGNATURE} with "
            f"options {sorted(options or {})} ({exc}); change its signature or the [model] "
            "options"
        ) from None
    return cast("Callable[..., nn.Module]", obj)


def create(
    name: str, *, input_shape: tuple[int, ...], n_out: int, width: int, depth: int, **options: Any
) -> nn.Module:
    """An unplanned model called ``name`` (default init, multipliers 1): a model of
    :data:`MODELS`, or a user factory ``"package.module:function"`` called as
    ``function(input_shape, n_out, width, depth, **options)`` (see :func:`resolve_factory`),
    which must return an ``nn.Module``.

    The one check of the sizes every model shares: ``input_shape`` a non-empty tuple of whole
    numbers >= 1 (the per-sample shape, without the batch axis), ``n_out``, ``width`` and
    ``depth`` whole numbers >= 1; each model then checks what is its own (rank, divisibility).
    """
    factory: Callable[..., nn.Module] | None = None
    if is_factory(name):
        factory = resolve_factory(name, options)
    elif not isinstance(name, str) or name not in MODELS:
        raise ConfigError(f"unknown model {name!r}; choose one of: {', '.join(MODELS)}, or a "
                          "factory 'package.module:function'")
    else:
        _check_options(MODELS[name], options)
    if isinstance(input_shape, (str, bytes)) or not isinstance(input_shape, Sequence) or not (
            input_shape):
        raise ConfigError(
            f"input_shape must be the per-sample shape, a non-empty tuple such as (784,) or "
            f"(3, 32, 32), got {input_shape!r}"
        )
    shape = tuple(whole(f"input_shape[{i}]", s) for i, s in enumerate(input_shape))
    sizes = (shape, whole("n_out", n_out), whole("width", width), whole("depth", depth))
    if factory is None:
        return MODELS[name].make(*sizes, **options)
    model = user_call(name, f"building the model ({_FACTORY_SIGNATURE} = {sizes})",
                      lambda: factory(*sizes, **options))
    if not isinstance(model, nn.Module):
        raise ConfigError(f"model factory {name!r} returned a {type(model).__name__}, not an "
                          "nn.Module")
    return model


def user_call(name: str, what: str, call: Callable[[], Any]) -> Any:
    """``call()``, one call into a user's factory or model: any exception it raises, and a
    ``sys.exit`` inside it, becomes a ConfigError naming the factory, the call and the
    exception, so a user's bug is one line before any work, never a traceback or a silent
    exit 0. Ctrl-C passes through."""
    try:
        return call()
    except KeyboardInterrupt:
        raise
    except ConfigError:
        raise
    except (Exception, SystemExit) as exc:
        message = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        if isinstance(exc, SystemExit):
            message = f"it called sys.exit({exc.code!r})"
        raise ConfigError(f"model factory {name!r}: {what} failed ({message}); the error is in "
                          "the factory's code: call it by hand to debug it") from None


def check_forward(name: str, model: nn.Module, example: Any, n_out: int) -> None:
    """One forward pass of a user's model on ``example`` (a batch), before any work: it must
    run (:func:`user_call`), return scores (a tensor, a tuple whose first element is the
    scores, a dict with "logits" or an object with ``.logits``) with ``n_out`` entries on the
    last axis, and leave its input unchanged (a forward that writes into its input corrupts
    the data every later pass reads). Runs without gradients in eval mode; the model's mode is
    restored."""
    before = [t.detach().clone() for t in tensors_of(example)]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = user_call(name, "the model's forward on a batch of the data",
                            lambda: call_model(model, example))
    finally:
        model.train(was_training)
    scores = logits_of(out)
    after = tensors_of(example)
    if any(a.shape != b.shape or not torch.equal(a, b) for a, b in zip(after, before,
                                                                        strict=True)):
        raise ConfigError(f"model factory {name!r}: the model's forward changes its input in "
                          "place (e.g. x.mul_(2) or x += ...): every later pass would read "
                          "corrupted data; compute out of place (x = x * 2)")
    if scores.dim() == 0 or scores.shape[-1] != n_out:
        raise ConfigError(f"model factory {name!r}: the model returns scores of shape "
                          f"{tuple(scores.shape)} but the data has {n_out} classes or targets; "
                          f"build its readout with the n_out it is given ({n_out})")


#: parameter counts on ``meta`` by (arguments as JSON, depth): :func:`parameter_count`
_COUNTS: dict[tuple[str, int], int] = {}


def parameter_count(name: str, *, input_shape: tuple[int, ...], n_out: int, width: int,
                    depth: int, **options: Any) -> int:
    """How many parameters model ``name`` has at these sizes, without allocating them: a model
    of :data:`MODELS` is built on the ``meta`` device (a ConfigError where it cannot be built
    at these sizes) at depths 1, 2 and 3, and its count, linear in depth (identical blocks),
    extended to ``depth`` (counted at ``depth`` itself where it is not linear); a user factory
    (which may not run on ``meta``) is bounded below by one width x width matrix per block."""
    if is_factory(name):
        return depth * width * width
    try:  # counts are memoised by their arguments (a study or a claim asks for many)
        key = json.dumps([name, list(input_shape), n_out, width, sorted(options.items())])
    except TypeError:  # an option JSON cannot write: counted afresh
        key = None

    def count(d: int) -> int:
        if key is not None and (key, d) in _COUNTS:
            return _COUNTS[key, d]
        with torch.device("meta"):
            model = create(name, input_shape=input_shape, n_out=n_out, width=width, depth=d,
                           **options)
        n = sum(p.numel() for p in model.parameters())
        if key is not None:
            _COUNTS[key, d] = n
        return n

    if depth <= 3:
        return count(depth)
    one, two, three = count(1), count(2), count(3)
    if three - two == two - one:
        return one + (depth - 1) * (two - one)
    return count(depth)


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
    roles: Mapping[str, str] | None = None,
    example_input: Any = None,
    **options: Any,
) -> tuple[nn.Module, Plan]:
    """Model ``name`` (a registry name or a factory ``"package.module:function"``) under recipe
    ``recipe``, initialised by the plan from ``seed``.

    The plan is bound to the sizes the model reports (``width``, ``plan_depth``, ``hidden``) so
    the two always agree; ``plan_options`` go to :func:`depthscale.param.plan` (``T``,
    ``regime``, ``alpha``, ...), ``options`` to the model (``activation``, ``backward``, ...).
    A model that does not report its sizes (a user's) is inspected on ``example_input`` (a
    batch of inputs; :func:`depthscale.param.inspect.inspect`): its width and number of
    residual branches bind the plan (else ``width`` and ``depth``). ``roles`` (glob pattern ->
    role) and ``example_input`` (role inference) go to :meth:`~depthscale.param.Plan.apply`.
    """
    model = create(name, input_shape=input_shape, n_out=n_out, width=width, depth=depth, **options)
    if is_factory(name) and example_input is not None:
        check_forward(name, model, example_input, n_out)
    plan_width, plan_depth = getattr(model, "width", None), getattr(model, "plan_depth", None)
    if (plan_width is None or plan_depth is None) and example_input is not None:
        from depthscale.param.inspect import inspect as inspect_model

        try:
            found = inspect_model(model, example_input)
        except ConfigError:  # not traceable: the given sizes, checked by apply
            found = None
        if found is not None:
            plan_width = found.width if plan_width is None else plan_width
            plan_depth = (found.depth or None) if plan_depth is None else plan_depth
    p = plan(
        recipe,
        width=width if plan_width is None else plan_width,
        depth=depth if plan_depth is None else plan_depth,
        hidden=getattr(model, "hidden", 1),
        activation=options.get("activation", getattr(model, "activation_name", "relu")),
        **dict(plan_options or {}),
    )
    p.apply(model, dict(roles) if roles else None, seed=seed, example_input=example_input)
    return model, p

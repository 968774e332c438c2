"""The models the CLI and the claims know by name, user model factories named
``"package.module:function"``, and one call that builds a planned model."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from depthscale.calls import call_model, logits_of, tensors_of
from depthscale.errors import ConfigError
from depthscale.models.chizat import TwoLayerPerceptronResNet
from depthscale.models.cnn import ConvResNet, PlainCNN
from depthscale.models.gpt import GPT
from depthscale.models.mlp import MLPResNet, PlainMLP
from depthscale.models.vit import ViT
from depthscale.param import Plan, plan
from depthscale.param.checks import whole
from depthscale.param.dataflow import copy_input
from depthscale.param.walk import unwrap
from depthscale.param.widths import auto_base

__all__ = ["MODELS", "ModelSpec", "build", "check_training_step", "create", "is_factory",
           "resolve_factory"]


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
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the user's module may raise, or exit, while importing
        if isinstance(exc, ImportError):
            fix = "install its package or put its folder on PYTHONPATH"
        elif isinstance(exc, SystemExit):
            fix = ("a module must not exit when imported: put its script code under "
                   "if __name__ == '__main__':")
        else:
            fix = f"the error is in the module's code: import {module_name} by hand to debug it"
        raise ConfigError(f"{where}: cannot import {module_name!r} ({_describe(exc)}); {fix}"
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


def _describe(exc: BaseException) -> str:
    """One line for an exception from user code: ``Type: message`` (300 characters at most), or
    ``it called sys.exit(code)``."""
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r})"
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


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
    except BaseException as exc:
        raise ConfigError(f"model factory {name!r}: {what} failed ({_describe(exc)}); the error "
                          "is in the factory's code: call it by hand to debug it") from None


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
    if not scores.is_floating_point():
        raise ConfigError(f"model factory {name!r}: the model returns scores of dtype "
                          f"{str(scores.dtype).removeprefix('torch.')}, which no loss can "
                          "differentiate; return the floating-point logits (no .round(), "
                          ".long() or .argmax() on them)")


def check_training_step(name: str, model: nn.Module, example: Any) -> None:
    """One training step's forward and backward of a user's model on a copy of ``example`` (a
    batch), before any work: some parameter is trainable, the forward runs in training mode
    without writing in place into what autograd needs, leaves its input unchanged, returns
    scores that carry a gradient, and the loss (the loop's cross-entropy with every label 0:
    any loss that reads every score reaches the same parameters) gives a parameter a gradient,
    finite where the loss is. Trainable parameters that get none are named in a warning. The
    model's parameters, buffers, gradients, modes and the random state are restored."""
    where = f"model factory {name!r}"
    params = dict(model.named_parameters())
    trainable = {k: p for k, p in params.items() if p.requires_grad}
    if not trainable:
        raise ConfigError(
            f"{where}: all {len(params)} parameters of the model are frozen (requires_grad="
            "False), so training changes nothing; leave the ones to train trainable "
            "(p.requires_grad_(True))" if params else
            f"{where}: the model has no parameters, so training changes nothing; register its "
            "weights as nn.Parameter on a submodule")
    x = copy_input(example)
    saved = _snapshot(model)
    devices = sorted({p.device.index or 0 for p in params.values() if p.device.type == "cuda"})
    try:
        with torch.random.fork_rng(devices=devices), torch.enable_grad():
            model.train()
            out = user_call(name, "the model's forward in training mode",
                            lambda: _autograd_call(where, lambda: call_model(model, x)))
            scores = logits_of(out)
            if not scores.is_floating_point():
                raise ConfigError(f"{where}: in training mode the model returns scores of "
                                  f"dtype {str(scores.dtype).removeprefix('torch.')}, which no "
                                  "loss can differentiate; return the floating-point logits")
            if not scores.requires_grad:
                raise ConfigError(
                    f"{where}: the model's scores carry no gradient (its forward detaches "
                    "them: .detach(), .data, torch.no_grad() or a round trip through numpy or "
                    ".item()), so training changes nothing; return the scores as computed")
            loss = F.cross_entropy(scores.reshape(-1, scores.shape[-1]),
                                   torch.zeros(scores[..., 0].numel(), dtype=torch.long,
                                               device=scores.device))
            user_call(name, "the backward pass of one training step",
                      lambda: _autograd_call(where, loss.backward))
            finite_loss = bool(torch.isfinite(loss))
            grads = {k: p.grad for k, p in trainable.items()}
            changed = any(a.shape != b.shape or not torch.equal(a, b)
                          for a, b in zip(tensors_of(x), tensors_of(example), strict=True))
    finally:
        _restore(saved)
    if changed:
        raise ConfigError(f"{where}: the model's forward changes its input in place in training "
                          "mode (e.g. x.mul_(2) or x += ...): every later pass would read "
                          "corrupted data; compute out of place (x = x * 2)")
    _check_gradients(where, grads, finite_loss)


def _autograd_call(where: str, call: Callable[[], Any]) -> Any:
    """``call()``, with autograd's in-place errors (a forward in training mode that writes into
    a tensor the backward needs, or into a parameter) as a ConfigError that says so."""
    try:
        return call()
    except RuntimeError as exc:
        text = " ".join(str(exc).split())
        if "inplace operation" not in text and "in-place operation" not in text:
            raise
        cause = text.split(" Hint:")[0][:300]
        raise ConfigError(
            f"{where}: in training mode the model's forward writes in place into a tensor that "
            f"autograd needs for the gradient (RuntimeError: {cause}); compute out of place "
            "(h = h.exp(), h = h + x, not h.exp_(), h += x)") from None


def _check_gradients(where: str, grads: Mapping[str, torch.Tensor | None],
                     finite_loss: bool) -> None:
    """Refuse when no trainable parameter got a gradient, or (from a finite loss) one got a
    non-finite one; warn naming those that got none."""
    missing = [k for k, g in grads.items() if g is None]
    if len(missing) == len(grads):
        raise ConfigError(
            f"{where}: no parameter gets a gradient from the loss (the scores do not depend "
            "on any trainable parameter), so training changes nothing; compute the scores from "
            "the model's parameters")
    bad = [k for k, g in grads.items() if g is not None and not bool(torch.isfinite(g).all())]
    if finite_loss and bad:
        raise ConfigError(
            f"{where}: from a finite loss, {len(bad)} parameter(s) get a non-finite gradient "
            f"({', '.join(bad[:5])}{', ...' if len(bad) > 5 else ''}): an op whose derivative "
            "is infinite at these values (sqrt or norm at 0, log near 0); the first step "
            "would make them NaN; guard the op (e.g. sqrt(x + eps))")
    if missing:
        warnings.warn(
            f"{where}: {len(missing)} of {len(grads)} trainable parameters get no gradient "
            f"from the loss ({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}); "
            "training leaves them unchanged (freeze them or use them if that is not meant)",
            UserWarning, stacklevel=3)


_Saved = tuple[list[tuple[dict[str, Any], str, torch.Tensor, torch.Tensor,
                          torch.Tensor | None]], list[tuple[nn.Module, bool]]]


def _snapshot(model: nn.Module) -> _Saved:
    """Every parameter and buffer of ``model`` (the tensor, a copy of its values, its
    gradient) and every module's mode, for :func:`_restore`."""
    tensors = []
    for module in model.modules():
        for store in (module._parameters, module._buffers):
            for key, t in store.items():
                if t is not None:
                    tensors.append((cast("dict[str, Any]", store), key, t, t.detach().clone(),
                                    t.grad))
    return tensors, [(m, m.training) for m in model.modules()]


def _restore(saved: _Saved) -> None:
    """Put back what :func:`_snapshot` saved: the same tensor objects, with their values and
    gradients, and each module's mode."""
    tensors, modes = saved
    with torch.no_grad():
        for store, key, t, value, grad in tensors:
            store[key] = t
            if t.shape == value.shape:
                t.copy_(value)
            else:
                t.data = value
            t.grad = grad
    for module, training in modes:
        module.training = training


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
    found = None
    if (plan_width is None or plan_depth is None) and example_input is not None:
        from depthscale.param.inspect import inspect as inspect_model

        try:  # the module inside any wrapper, as apply reads it (given to apply, not read again)
            found = inspect_model(unwrap(model)[0], example_input)
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
    with contextlib.ExitStack() as stack:
        if is_factory(name) and example_input is not None:  # its dims compared at another width
            other = width // 2 if width % 2 == 0 and width >= 8 else 2 * width
            stack.enter_context(auto_base(lambda: create(
                name, input_shape=input_shape, n_out=n_out, width=other, depth=depth,
                **options)))
        p.apply(model, dict(roles) if roles else None, seed=seed, example_input=example_input,
                structure=found)
    if is_factory(name) and example_input is not None:
        check_training_step(name, model, example_input)
    return model, p

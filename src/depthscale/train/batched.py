"""Train G copies of one model in a single pass: the hot path of a learning-rate sweep.

:func:`train_batched` stacks the parameters of G identical models along a leading axis and takes
one plain-SGD step for all members at once, each with its own base learning rate times the
plan's per-parameter multipliers ``c`` (an in-place ``addcmul_`` with a ``[G, 1, ...]`` step
tensor). Member ``i`` reproduces, to float rounding, what :func:`depthscale.train.train` gives
for the same model with ``lr = lrs[i]`` (and ``seed = seeds[i]``): the same data order, per-step
losses, epoch-averaged losses, periodic and final evaluations and divergence record.

Two ways to compute the members' gradients:

* :class:`~depthscale.models.MLPResNet` and :class:`~depthscale.models.PlainMLP` (standard
  backward) have a hand-batched forward, the model's own equations on ``[G, out, in]`` weights
  with batched matmuls (:func:`stacked_forward`). With ReLU or tanh and no biases its backward
  is written out (:class:`_Tape`: autograd's formulas op for op, so the gradients are
  autograd's to the bit, without the graph and with buffers reused in place; width 32,
  G = 16: 2.72x -> 3.19x over the loop on one thread, 4.58x -> 5.3x on two);
  otherwise ordinary autograd differentiates it. On the CPU either is 1.5-3x faster than the
  generic path, whose vmapped backward pays per-op overhead.
* Any other model runs ``torch.func.functional_call`` under ``torch.func.vmap`` with
  ``torch.func.grad_and_value``.

A member that diverges by the loop's rule (:class:`~depthscale.train.DivergenceMonitor`: a
non-finite loss, or a running loss above ``divergence_factor`` x its initial loss; one monitor
per member) is recorded as diverged at that step and its rows are dropped from the stack before
the update, so it is frozen, its NaNs never reach another member (every vmapped op keeps
members apart), and the remaining steps cost less.

On Linux/glibc the first call tunes malloc to keep freed tensor memory mapped
(:func:`reuse_freed_memory`): the step's activations then reuse pages instead of faulting in
fresh ones every step.
"""

from __future__ import annotations

import ctypes
import math
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad_and_value, vmap

from depthscale.errors import ConfigError
from depthscale.models.layers import ScaledLinear
from depthscale.models.mlp import MLPResNet, PlainMLP
from depthscale.param import Plan
from depthscale.train.loop import (
    DivergenceMonitor,
    TrainConfig,
    TrainResult,
    check_data,
    loss_fn,
    resolve_device,
    zero_output_loss,
)

__all__ = ["EVAL_CHUNK", "check_batchable", "reuse_freed_memory", "sgd_step", "stacked_forward",
           "train_batched"]

#: Samples per evaluation chunk (as :func:`depthscale.train.evaluate`).
EVAL_CHUNK = 2048

#: glibc malloc: tensors up to this size come from the heap, not a fresh mmap (its maximum)
MMAP_THRESHOLD = 32 * 2**20
#: glibc malloc: freed heap memory kept (not returned to the OS) up to this size
TRIM_THRESHOLD = 256 * 2**20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters (malloc.h)
_malloc_tuned: bool | None = None

Tensors = dict[str, torch.Tensor]
#: ``forward(params, x, per_member)``: outputs ``[G, B, ...]`` of every stacked member; ``x`` is
#: ``[B, ...]`` shared by all members, or ``[G, B, ...]`` when ``per_member``.
Forward = Callable[[Tensors, torch.Tensor, bool], torch.Tensor]
#: ``step(trainable, fixed, x, y)``: (gradients of the trainable parameters, losses ``[G]``).
Step = Callable[[Tensors, Tensors, torch.Tensor, torch.Tensor], tuple[Tensors, torch.Tensor]]


def check_batchable(model: nn.Module) -> None:
    """Raise a ConfigError naming the first module ``train_batched`` cannot vmap.

    Buffers (BatchNorm running statistics, the backward copies of a decoupled ``ScaledLinear``)
    are state that vmap cannot carry per member, and active dropout would draw from a random
    stream the one-by-one loop does not share.
    """
    for name, module in model.named_modules():
        where = f"{name or '<root>'!r} ({type(module).__name__})"
        buffers = [b for b, _ in module.named_buffers(recurse=False)]
        if buffers:
            raise ConfigError(
                f"train_batched cannot vmap module {where}: it holds buffer(s) "
                f"{', '.join(buffers)} (running statistics or backward copies); build the model "
                "without them (batchnorm off, backward='standard') or train each run with "
                "depthscale.train.train"
            )
        if isinstance(module, nn.modules.dropout._DropoutNd) and module.p > 0:
            raise ConfigError(
                f"train_batched cannot vmap module {where}: dropout p={module.p} draws random "
                "masks the one-by-one loop would not reproduce; set dropout=0 or train each run "
                "with depthscale.train.train"
            )


def reuse_freed_memory() -> bool:
    """Let glibc reuse freed tensor memory instead of unmapping it (once per process).

    A batched step allocates and frees dozens of ~1 MB activations; by default glibc serves them
    with fresh ``mmap`` s (or trims the heap after each free), so every step pays a page fault per
    4 KiB touched: ~13% of a width-128, G = 16 step on the CPU. Raising ``M_MMAP_THRESHOLD`` to
    ``MMAP_THRESHOLD`` and ``M_TRIM_THRESHOLD`` to ``TRIM_THRESHOLD`` keeps the pages mapped
    (the process keeps up to ``TRIM_THRESHOLD`` of freed memory). Returns whether it applied:
    False off Linux/glibc, where nothing changes.
    """
    global _malloc_tuned
    if _malloc_tuned is None:
        _malloc_tuned = False
        if sys.platform.startswith("linux"):
            try:
                mallopt = ctypes.CDLL("libc.so.6").mallopt
            except (OSError, AttributeError):
                return False
            _malloc_tuned = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
                mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _malloc_tuned


def _check_config(config: TrainConfig) -> None:
    config.validate()
    if config.optimizer != "sgd":
        raise ConfigError(
            f"train_batched implements plain SGD only, got optimizer {config.optimizer!r}; "
            "train Adam runs one at a time with depthscale.train.train"
        )
    for name, value in (("momentum", config.momentum), ("weight_decay", config.weight_decay)):
        if value != 0:
            raise ConfigError(
                f"train_batched implements plain SGD only ({name} 0), got {name}={value}; "
                "train these runs one at a time with depthscale.train.train"
            )


def _members(
    models: list[nn.Module], lrs: Sequence[float] | None, seeds: Sequence[int] | None,
    config: TrainConfig,
) -> tuple[list[float], list[int]]:
    """Per-member learning rates and data seeds, after checking they agree on G."""
    sizes: dict[str, int] = {}
    if lrs is not None:
        sizes["lrs"] = len(lrs)
    if seeds is not None:
        sizes["seeds"] = len(seeds)
    if len(models) > 1:
        sizes["models"] = len(models)
    for what, size in sizes.items():
        if size == 0:
            raise ConfigError(f"train_batched needs at least one member, got empty {what}")
    if not sizes:
        raise ConfigError(
            "train_batched needs lrs, seeds or a list of models to know G (for one member, "
            "pass lrs=[config.lr])"
        )
    if len(set(sizes.values())) > 1:
        shown = ", ".join(f"{k}={v}" for k, v in sizes.items())
        raise ConfigError(f"train_batched members disagree on G: {shown}")
    g = next(iter(sizes.values()))
    out_lrs = [config.lr] * g if lrs is None else list(lrs)
    for i, lr in enumerate(out_lrs):
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not (
            math.isfinite(lr) and lr > 0
        ):
            raise ConfigError(f"learning rate must be a finite number > 0, got lrs[{i}] = {lr}")
    out_seeds = [config.seed] * g if seeds is None else list(seeds)
    for i, seed in enumerate(out_seeds):
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ConfigError(f"seeds must be whole numbers, got seeds[{i}] = {seed!r}")
    return [float(lr) for lr in out_lrs], out_seeds


def _stack(
    models: list[nn.Module], plan: Plan, g: int, device: torch.device
) -> tuple[Tensors, Tensors, dict[str, float]]:
    """(trainable, fixed) parameters stacked to a leading G axis, and each trainable one's c."""
    template = models[0]
    for m in models:
        check_batchable(m)
    specs = plan.resolve(template)
    shapes = [(n, p.shape, p.dtype) for n, p in template.named_parameters()]
    for k, other in enumerate(models[1:], start=1):
        if type(other) is not type(template) or [
            (n, p.shape, p.dtype) for n, p in other.named_parameters()
        ] != shapes:
            raise ConfigError(
                f"models[{k}] is not the same architecture as models[0] (type, parameter names, "
                "shapes and dtypes must match)"
            )
        if plan.resolve(other) != specs:
            raise ConfigError(f"models[{k}] holds a different form of the plan than models[0]")
    multipliers = {s.name: s.lr_multiplier("sgd") for s in specs}
    trainable: Tensors = {}
    fixed: Tensors = {}
    per_model = [dict(m.named_parameters()) for m in models]
    for name, p in template.named_parameters():
        if len(models) == 1:
            stacked = p.detach().to(device).unsqueeze(0).expand(g, *p.shape).clone()
        else:
            stacked = torch.stack([ps[name].detach().to(device) for ps in per_model])
        (trainable if p.requires_grad else fixed)[name] = stacked.contiguous()
    if not trainable:
        raise ConfigError("train_batched: the model has no trainable parameters")
    return trainable, fixed, {n: multipliers[n] for n in trainable}


class _StackedLinear(torch.autograd.Function):
    """``(x W^T) * a`` per member for ``W`` ``[G, out, in]`` and ``x`` ``[G, B, in]`` (or
    ``[B, in]`` shared), differentiated as autograd does ``F.linear(x, W) * a`` in the loop:
    ``g' = g a``, ``grad_x = g' W`` and ``grad_W = g'^T x`` (not ``(x^T g')^T``, which rounds
    differently), so each member's gradient is the loop's to the bit."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, a: float) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        ctx.a = a
        return torch.matmul(x, w.mT).mul_(a)

    @staticmethod
    def backward(
        ctx: Any, g: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:
        x, w = ctx.saved_tensors
        g = g * ctx.a
        grad_x = grad_w = None
        if ctx.needs_input_grad[0]:
            grad_x = torch.bmm(g, w)
            if x.dim() == 2:  # shared input: every member's contribution
                grad_x = grad_x.sum(0)
        if ctx.needs_input_grad[1]:
            grad_w = torch.matmul(g.mT, x)
        return grad_x, grad_w, None


def _plain_linear(module: nn.Module) -> ScaledLinear | None:
    """``module`` when it is a :class:`ScaledLinear` with the standard backward, else None."""
    if type(module) is ScaledLinear and module.backward_mode == "standard":
        return module
    return None


Activation = Callable[[torch.Tensor], torch.Tensor]


class _Ops:
    """The three operations of the stacked MLP programs, for autograd: ``a x W^T (+ b)`` per
    member (:class:`_StackedLinear`), the activation, and the residual add."""

    def __init__(self, params: Tensors, layers: dict[str, ScaledLinear],
                 phi: Activation) -> None:
        self.params, self.layers, self.phi_fn = params, layers, phi

    def lin(self, name: str, x: torch.Tensor) -> torch.Tensor:
        layer = self.layers[name]
        y = _StackedLinear.apply(x, self.params[f"{name}.weight"], layer.multiplier)
        if layer.bias is not None:
            y = y + self.params[f"{name}.bias"].unsqueeze(-2)
        return y

    def phi(self, x: torch.Tensor) -> torch.Tensor:
        return self.phi_fn(x)

    def add(self, h: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
        return h + delta


#: ``program(ops, x)``: a model's forward written with :class:`_Ops` (``x`` flattened).
Program = Callable[[_Ops, torch.Tensor], torch.Tensor]
#: a program, the model's layers by name and its activation (:func:`_stacked_program`)
Stacked = tuple[Program, dict[str, ScaledLinear], Activation]


def _stacked_program(model: nn.Module) -> Stacked | None:
    """The forward of :class:`~depthscale.models.MLPResNet` (any block size and style) or
    :class:`~depthscale.models.PlainMLP` as a program over :class:`_Ops`, its layers by name
    and its activation; None for other models or a layer that is not a standard-backward
    ScaledLinear.
    The same equations as the models' ``trace`` (nfd Eq. 1, 6, 9; Fig. 4a)."""
    if type(model) not in (MLPResNet, PlainMLP):
        return None
    assert isinstance(model, (MLPResNet, PlainMLP))
    layers: dict[str, ScaledLinear] = {}
    for name, module in model.named_modules():
        if isinstance(module, ScaledLinear):
            linear = _plain_linear(module)
            if linear is None:
                return None
            layers[name] = linear

    if isinstance(model, MLPResNet):
        block, style, depth = model.block, model.style, model.depth

        def resnet(ops: _Ops, x: torch.Tensor) -> torch.Tensor:
            h = ops.lin("embed", x)
            if style == "post":
                h = ops.phi(h)
            for i in range(depth):
                if block >= 2:
                    z = ops.lin(f"branches.{i}.inner", h)
                    for j in range(block - 2):
                        z = ops.lin(f"branches.{i}.middle.{j}", ops.phi(z))
                    delta = ops.lin(f"branches.{i}.outer", ops.phi(z))
                elif style == "pre":
                    delta = ops.lin(f"branches.{i}", ops.phi(h))
                else:
                    delta = ops.phi(ops.lin(f"branches.{i}", h))
                h = ops.add(h, delta)
            return ops.lin("readout", h)

        return resnet, layers, model.phi

    n_layers = len(model.layers)

    def mlp(ops: _Ops, x: torch.Tensor) -> torch.Tensor:
        z = ops.lin("embed", x)
        for i in range(n_layers):
            z = ops.lin(f"layers.{i}", ops.phi(z))
        return ops.lin("readout", ops.phi(z))

    return mlp, layers, model.phi


def stacked_forward(model: nn.Module) -> Forward | None:
    """The hand-batched forward of ``model``, or None when it has none (vmap is used then).

    Covers :class:`~depthscale.models.MLPResNet` (nfd Eq. 1, 6, 9) and
    :class:`~depthscale.models.PlainMLP` (nfd Fig. 4a) whose layers are all standard-backward
    :class:`~depthscale.models.ScaledLinear` s: the same equations as their ``trace``, each
    ``a x W^T (+ b)`` a batched matmul over the member axis, so autograd gives each member its
    own gradient, rounded as the one-by-one loop rounds it. Subclasses (which may change the
    forward) are not covered.
    """
    found = _stacked_program(model)
    return None if found is None else _program_forward(found)


def _program_forward(found: Stacked) -> Forward:
    """A stacked program as a :data:`Forward` differentiable by autograd."""
    program, layers, phi = found

    def forward(params: Tensors, x: torch.Tensor, per_member: bool) -> torch.Tensor:
        return program(_Ops(params, layers, phi), x.flatten(2 if per_member else 1))

    return forward


#: Activations whose autograd backward :class:`_Tape` repeats op for op, as out-variants
#: ``(g, y, out)`` (``out`` may be ``g``): ReLU's ``threshold_backward`` and tanh's on the output.
_TAPE_BACKWARDS: dict[Activation,
                      Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]] = {
    torch.relu: lambda g, y, out: torch.ops.aten.threshold_backward.grad_input(
        g, y, 0, grad_input=out),
    torch.tanh: lambda g, y, out: torch.ops.aten.tanh_backward.grad_input(g, y, grad_input=out),
}


class _Tape(_Ops):
    """:class:`_Ops` without autograd, recording what a hand-written backward needs.

    :meth:`backward` runs the ops in reverse with the formulas autograd uses for them (linear:
    ``g' = g a``, ``grad_W = g'^T x``, ``grad_x = g' W``; ReLU ``threshold_backward`` on the
    output; tanh ``tanh_backward``; an add passes ``g`` to both terms; a tensor reached twice
    sums its two gradients), so every gradient is autograd's to the bit, without the graph.
    Where no one else holds a tensor it is reused in place (same rounding): a residual add
    writes into the fresh linear output it adds (programs never reuse a term after adding it),
    and gradients are summed and masked in the buffers they arrive in, except one an add
    passed to both its terms.
    """

    def __init__(self, params: Tensors, layers: dict[str, ScaledLinear],
                 phi: Activation) -> None:
        super().__init__(params, layers, phi)
        self.ops: list[tuple[str, Any, torch.Tensor, torch.Tensor]] = []
        self.phi_backward = _TAPE_BACKWARDS[phi]

    def lin(self, name: str, x: torch.Tensor) -> torch.Tensor:
        a = self.layers[name].multiplier
        y = torch.matmul(x, self.params[f"{name}.weight"].mT).mul_(a)
        self.ops.append(("lin", name, x, y))
        return y

    def phi(self, x: torch.Tensor) -> torch.Tensor:
        y = self.phi_fn(x)
        self.ops.append(("phi", None, x, y))
        return y

    def add(self, h: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
        last = self.ops[-1] if self.ops else None
        if last is not None and last[0] == "lin" and last[3] is delta:
            y = delta.add_(h).view_as(delta)  # nothing saved delta: a linear saves its input
        else:
            y = h + delta
        self.ops.append(("add", delta, h, y))
        return y

    def backward(self, out: torch.Tensor, g_out: torch.Tensor) -> Tensors:
        """Gradients of the weights given ``g_out`` at the program's output ``out``."""
        # id(tensor) -> (its gradient so far, whether that buffer is ours to write into)
        grads: dict[int, tuple[torch.Tensor, bool]] = {id(out): (g_out, False)}
        weights: Tensors = {}
        data = self.ops[0][2]

        def send(t: torch.Tensor, g: torch.Tensor, owned: bool) -> None:
            old = grads.get(id(t))
            if old is None:
                grads[id(t)] = (g, owned)
            elif old[1]:
                old[0].add_(g)
            else:
                grads[id(t)] = (old[0] + g, True)

        for kind, extra, x, y in reversed(self.ops):
            got = grads.pop(id(y), None)
            if got is None:
                continue
            g, owned = got
            if kind == "lin":
                w = self.params[f"{extra}.weight"]
                g = g * self.layers[extra].multiplier
                weights[f"{extra}.weight"] = torch.matmul(g.mT, x)
                if x is not data:  # the data needs no gradient
                    send(x, torch.bmm(g, w), True)
            elif kind == "phi":
                send(x, self.phi_backward(g, y, g if owned else torch.empty_like(g)), True)
            else:
                send(x, g, False)
                send(extra, g, False)
        return weights


def _manual_step(found: Stacked | None, loss: str, per_member: bool) -> Step | None:
    """The step of a stacked program (:func:`_stacked_program`) with a hand-written backward
    (:class:`_Tape`), or None where it does not apply: no program, biases, an activation other
    than ReLU or tanh, or a loss other than CE and MSE. Same losses and gradients as
    :func:`_autograd_step` to the bit (the loss gradient by
    :func:`_losses_and_output_gradient`), without the autograd graph's per-op cost."""
    if found is None or loss not in ("ce", "mse") or found[2] not in _TAPE_BACKWARDS:
        return None
    program, layers, phi = found
    if any(layer.bias is not None for layer in layers.values()):
        return None

    @torch.no_grad()
    def step(
        trainable: Tensors, fixed: Tensors, xb: torch.Tensor, yb: torch.Tensor
    ) -> tuple[Tensors, torch.Tensor]:
        tape = _Tape({**trainable, **fixed}, layers, phi)
        out = program(tape, xb.flatten(2 if per_member else 1))
        losses, g_out = _losses_and_output_gradient(loss, out, yb)
        weights = tape.backward(out, g_out)
        return {k: weights[k] for k in trainable}, losses

    return step


def _vmapped_forward(model: nn.Module) -> Forward:
    """The generic forward: ``functional_call`` under vmap over the member axis."""

    def call(params: Tensors, x: torch.Tensor) -> torch.Tensor:
        return functional_call(model, params, (x,))

    shared = vmap(call, in_dims=(0, None))
    own = vmap(call, in_dims=(0, 0))

    def forward(params: Tensors, x: torch.Tensor, per_member: bool) -> torch.Tensor:
        return (own if per_member else shared)(params, x)

    return forward


def _member_targets(out: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """``y`` with a leading member axis (expanded when shared by all members) and whether it
    holds class labels."""
    labels = y.dtype == torch.long
    if y.dim() == out.dim() - (2 if labels else 1):
        y = y.expand(out.shape[0], *y.shape)
    return y, labels


def _member_losses(loss: str, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``loss_fn(loss, out[g], y[g])`` for every member g at once: a ``[G]`` tensor.

    ``out`` is ``[G, B, ..., C]`` (classes or targets on the last axis); ``y`` is shared by all
    members (labels ``[B, ...]``, targets ``[B, ..., C]``) or per member (a leading ``G``).
    Each member's loss is the mean over all its rows (samples, or samples x positions for
    per-position labels), as :func:`~depthscale.train.loss_fn` takes it.
    """
    g = out.shape[0]
    y, labels = _member_targets(out, y)
    if loss == "ce":
        if not labels:
            return loss_fn(loss, out, y)  # raises the loop's error
        per_row = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1),
                                  reduction="none")
        return per_row.view(g, -1).mean(1)
    return _squared_error(out, y, labels)[0]


def _squared_error(out: torch.Tensor, y: torch.Tensor, labels: bool
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-member ``0.5 |out - target|^2`` (mean over rows) and ``out - target``; ``y`` has
    its member axis (:func:`_member_targets`), labels become one-hot targets."""
    target = F.one_hot(y, out.shape[-1]).to(out.dtype) if labels else y
    diff = out - target
    return 0.5 * diff.pow(2).sum(-1).reshape(out.shape[0], -1).mean(1), diff


def _losses_and_output_gradient(
    loss: str, out: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_member_losses` and the gradient of their sum at ``out``, by the formulas autograd
    applies to it, so to the bit: cross-entropy ``-1/rows`` at each label through
    ``_log_softmax_backward_data``; squared error ``(0.5 / rows) (2 (out - target))``."""
    g, classes = out.shape[0], out.shape[-1]
    y, labels = _member_targets(out, y)
    rows = out[0, ..., 0].numel()
    if loss == "ce":
        if not labels:
            loss_fn(loss, out, y)  # raises the loop's error
        flat = y.reshape(-1, 1)
        logp = torch.log_softmax(out.reshape(-1, classes), -1)
        losses = logp.gather(1, flat).neg_().view(g, -1).mean(1)
        per_row = torch.ones((), dtype=out.dtype, device=out.device) / rows
        g_logp = torch.zeros_like(logp).scatter_(1, flat, per_row.neg().expand_as(flat))
        g_out = torch.ops.aten._log_softmax_backward_data(g_logp, logp, 1, out.dtype)
        return losses, g_out.view_as(out)
    losses, diff = _squared_error(out, y, labels)
    per_row = torch.full((), 0.5, dtype=out.dtype, device=out.device) / rows
    return losses, diff.mul_(2.0).mul_(per_row)


def _autograd_step(forward: Forward, loss: str, per_member: bool) -> Step:
    """Gradients of the members' summed losses by ordinary autograd: member g's parameters
    only reach member g's loss, so each gets exactly its own gradient."""

    def step(
        trainable: Tensors, fixed: Tensors, xb: torch.Tensor, yb: torch.Tensor
    ) -> tuple[Tensors, torch.Tensor]:
        leaves = {k: v.detach().requires_grad_() for k, v in trainable.items()}
        with torch.enable_grad():
            losses = _member_losses(loss, forward({**leaves, **fixed}, xb, per_member), yb)
            grads = torch.autograd.grad(losses.sum(), list(leaves.values()))
        return dict(zip(leaves, grads, strict=True)), losses.detach()

    return step


def _vmapped_step(template: nn.Module, loss: str, per_member: bool) -> Step:
    """``grad_and_value`` of one member's loss under vmap over the member axis."""

    def member_loss(
        train_p: Tensors, fixed_p: Tensors, xb: torch.Tensor, yb: torch.Tensor
    ) -> torch.Tensor:
        return loss_fn(loss, functional_call(template, {**train_p, **fixed_p}, (xb,)), yb)

    data_dim = 0 if per_member else None
    return vmap(grad_and_value(member_loss), in_dims=(0, 0, data_dim, data_dim))


def _forward_and_step(template: nn.Module, loss: str, per_member: bool) -> tuple[Forward, Step]:
    """The hand-batched forward with the hand-written backward (:func:`_manual_step`) or
    autograd's when ``template`` has a stacked program, else vmap's."""
    found = _stacked_program(template)
    if found is not None:
        fast = _program_forward(found)
        return fast, _manual_step(found, loss, per_member) or _autograd_step(
            fast, loss, per_member)
    return _vmapped_forward(template), _vmapped_step(template, loss, per_member)


def _step_sizes(
    trainable: Tensors, lrs: Sequence[float], mult: dict[str, float], device: torch.device
) -> Tensors:
    """Negative per-member step sizes ``-lr_i c``, shaped ``[G, 1, ...]`` to broadcast over each
    parameter (torch.optim.SGD's ``p -= lr c grad``, member by member)."""
    out: Tensors = {}
    for name, p in trainable.items():
        vals = [-(lr * mult[name]) for lr in lrs]
        shape = (-1, *[1] * (p.ndim - 1))
        out[name] = torch.tensor(vals, dtype=p.dtype, device=device).view(shape)
    return out


@torch.no_grad()
def _sgd_update(trainable: Tensors, neg_lr: Tensors, grads: Tensors) -> None:
    """``p += (-lr c) grad`` in place for every stacked parameter."""
    for name, p in trainable.items():
        p.addcmul_(neg_lr[name], grads[name])


def sgd_step(
    model: nn.Module, plan: Plan, lrs: Sequence[float], loss: str, device: torch.device
) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """One batched plain-SGD step of ``len(lrs)`` copies of ``model`` on a shared batch, as
    :func:`train_batched` takes it (no divergence check): a callable ``(x, y) -> losses [G]``
    that updates its own stacked parameters. For timing the hot path (``bench batched-sweep``).
    """
    reuse_freed_memory()
    trainable, fixed, mult = _stack([model], plan, len(lrs), device)
    _, step_fn = _forward_and_step(model, loss, False)
    neg_lr = _step_sizes(trainable, lrs, mult, device)

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        grads, losses = step_fn(trainable, fixed, x, y)
        _sgd_update(trainable, neg_lr, grads)
        return losses

    return step


@torch.no_grad()
def _evaluate(
    forward: Forward, params: Tensors, x: torch.Tensor, y: torch.Tensor, loss: str,
) -> list[dict[str, float]]:
    """:func:`depthscale.train.evaluate` for every stacked member, in chunks (eval mode is the
    caller's to set)."""
    g = next(iter(params.values())).shape[0]
    totals, correct, rows = [0.0] * g, [0] * g, 0
    labels = y.dtype == torch.long
    for i in range(0, len(x), EVAL_CHUNK):
        yb = y[i : i + EVAL_CHUNK]
        out = forward(params, x[i : i + EVAL_CHUNK], False)
        n = out[0, ..., 0].numel()  # rows of one member: samples (x positions)
        values = _member_losses(loss, out, yb).tolist()
        totals = [t + v * n for t, v in zip(totals, values, strict=True)]
        rows += n
        if labels:
            hits = (out.argmax(-1) == yb).reshape(g, -1).sum(1).tolist()
            correct = [c + h for c, h in zip(correct, hits, strict=True)]
    res: list[dict[str, float]] = [{"loss": t / rows} for t in totals]
    if labels:
        for r, c in zip(res, correct, strict=True):
            r["acc"] = c / rows
    return res


def train_batched(
    model: nn.Module | Sequence[nn.Module],
    plan: Plan,
    data: object,
    config: TrainConfig,
    lrs: Sequence[float] | None = None,
    *,
    seeds: Sequence[int] | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[TrainResult]:
    """Train G members of ``model`` at once with plain SGD; one :class:`TrainResult` each.

    Member ``i`` matches ``train(copy_of_model_i, plan, data, replace(config, lr=lrs[i],
    seed=seeds[i]))`` up to float rounding. ``lrs`` are the base learning rates (``config.lr``
    for every member when None); ``seeds`` the data-order seeds (``config.seed`` when None);
    ``model`` is one model (every member starts from its weights) or G models of the same
    architecture under ``plan`` (e.g. built with different init seeds). G is the common length.

    The models are not modified. ``seconds`` of each result is the batched wall time / G.
    ``progress(k)`` receives member-steps: G per batched step, G times the total overall.
    Only plain SGD (momentum 0, weight decay 0) is supported; other settings, buffers, active
    dropout, empty or non-finite ``lrs`` raise :class:`~depthscale.errors.ConfigError`.
    """
    _check_config(config)
    models = [model] if isinstance(model, nn.Module) else list(model)
    if not models:
        raise ConfigError("train_batched needs at least one member, got an empty list of models")
    member_lrs, member_seeds = _members(models, lrs, seeds, config)
    reuse_freed_memory()
    g = len(member_lrs)
    device = resolve_device(config.device)
    template = models[0]
    trainable, fixed, mult = _stack(models, plan, g, device)
    n_out = check_data(template, data, config.loss)

    xs, ys = data.x_train.to(device), data.y_train.to(device)  # type: ignore[attr-defined]
    xt, yt = data.x_test.to(device), data.y_test.to(device)  # type: ignore[attr-defined]
    n = len(xs)
    bs = min(config.batch_size, n)
    per_epoch = math.ceil(n / bs)
    if config.steps is not None:
        total = config.steps
    else:
        assert config.epochs is not None  # validate() allows exactly one of the two
        total = max(1, round(config.epochs * per_epoch))

    shared = len(set(member_seeds)) == 1
    forward, step_fn = _forward_and_step(template, config.loss, not shared)
    order_seeds = member_seeds[:1] if shared else member_seeds
    gens = [torch.Generator().manual_seed(s) for s in order_seeds]

    def new_orders(active_rows: list[int]) -> torch.Tensor:
        if shared:
            return torch.randperm(n, generator=gens[0])
        return torch.stack([torch.randperm(n, generator=gens[i]) for i in active_rows])

    def evaluate_all(x: torch.Tensor, y: torch.Tensor) -> list[dict[str, float]]:
        template.eval()
        try:
            return _evaluate(forward, {**trainable, **fixed}, x, y, config.loss)
        finally:
            template.train()

    results = [TrainResult(status="ok", steps_done=0) for _ in range(g)]
    floor = zero_output_loss(config.loss, ys, n_out)
    monitors = [DivergenceMonitor(config.divergence_factor, floor) for _ in range(g)]
    active = list(range(g))
    neg_lr = _step_sizes(trainable, member_lrs, mult, device)
    sums, counts = [0.0] * g, [0] * g
    was_training = template.training
    t0 = time.perf_counter()
    template.train()
    orders, pos = new_orders(active), 0
    steps_reported = 0
    try:
        for step in range(1, total + 1):
            if pos >= n:
                for i in active:
                    results[i].epoch_losses.append(sums[i] / counts[i])
                    sums[i], counts[i] = 0.0, 0
                orders, pos = new_orders(active), 0
            idx = orders[..., pos : pos + bs].to(device)
            pos += bs
            grads, losses = step_fn(trainable, fixed, xs[idx], ys[idx])
            values = losses.tolist()
            reasons = [monitors[i].update(v) for i, v in zip(active, values, strict=True)]
            keep = [k for k, reason in enumerate(reasons) if reason is None]
            if len(keep) < len(active):
                for i, reason in zip(active, reasons, strict=True):
                    if reason is not None:
                        res = results[i]
                        res.status, res.diverged_at, res.diverged_reason = "diverged", step, reason
                active = [active[k] for k in keep]
                if not active:
                    break
                rows = torch.tensor(keep, dtype=torch.long, device=device)
                trainable = {k: v.index_select(0, rows) for k, v in trainable.items()}
                fixed = {k: v.index_select(0, rows) for k, v in fixed.items()}
                grads = {k: v.index_select(0, rows) for k, v in grads.items()}
                neg_lr = {k: v.index_select(0, rows) for k, v in neg_lr.items()}
                if not shared:
                    orders = orders[torch.tensor(keep, dtype=torch.long)]
                values = [values[k] for k in keep]
            _sgd_update(trainable, neg_lr, grads)
            del grads
            for i, value in zip(active, values, strict=True):
                res = results[i]
                res.losses.append(value)
                res.steps_done = step
                sums[i], counts[i] = sums[i] + value, counts[i] + 1
            if config.eval_every and step % config.eval_every == 0:
                for i, ev in zip(active, evaluate_all(xt, yt), strict=True):
                    results[i].evals.append(
                        {"step": step, **{f"test_{k}": v for k, v in ev.items()}}
                    )
            steps_reported = step
            if progress is not None:
                progress(g)
        for i in active:
            if counts[i]:
                results[i].epoch_losses.append(sums[i] / counts[i])
        if active:
            train_evs = (evaluate_all(xs, ys) if config.final_eval == "train+test"
                         else [{} for _ in active])
            test_evs = evaluate_all(xt, yt)
            for i, train_ev, test_ev in zip(active, train_evs, test_evs, strict=True):
                _finish(results[i], train_ev, test_ev)
    finally:
        template.train(was_training)
    if progress is not None and steps_reported < total:
        progress(g * (total - steps_reported))
    seconds = (time.perf_counter() - t0) / g
    for res in results:
        res.seconds = seconds
    return results


def _finish(result: TrainResult, train_ev: dict[str, Any], test_ev: dict[str, Any]) -> None:
    """The loop's closing rule: final metrics if finite, otherwise diverged at the last step."""
    if all(math.isfinite(v) for v in (*train_ev.values(), *test_ev.values())):
        result.final = {
            **{f"train_{k}": v for k, v in train_ev.items()},
            **{f"test_{k}": v for k, v in test_ev.items()},
        }
    else:
        result.status, result.diverged_at = "diverged", result.steps_done
        result.diverged_reason = "non-finite final evaluation"

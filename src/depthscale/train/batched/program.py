"""The members of a batched run as one program: G stacked copies of a model evaluated and
differentiated at once (the engine of :func:`depthscale.train.batched.train_batched`).

* :class:`~depthscale.models.MLPResNet` and :class:`~depthscale.models.PlainMLP` (standard
  backward): a hand-batched forward, the model's own equations (nfd Eq. 1, 6, 9; Fig. 4a) on
  ``[G, out, in]`` weights (:func:`stacked_forward`). With ReLU or tanh and no biases its
  backward is written out (:class:`_Tape`: autograd's formulas op for op, gradients equal to
  the bit, without the graph); otherwise autograd differentiates it.
* The laws models (:class:`~depthscale.models.PlainCNN`, laws Eq. 3;
  :class:`~depthscale.models.ConvResNet`, Eq. 4; :class:`~depthscale.models.ViT`): the
  hand-batched forwards of :mod:`depthscale.train.batched.laws`, differentiated by autograd.
* Any other model: ``torch.func.functional_call`` under ``vmap`` with ``grad_and_value``.

Member losses (:func:`member_losses`) are each member's mean over its rows, as
:func:`~depthscale.train.loss_fn` takes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad_and_value, vmap

from depthscale.models.layers import ScaledLinear
from depthscale.models.mlp import MLPResNet, PlainMLP
from depthscale.train.batched.laws import laws_forward
from depthscale.train.batched.linear import Forward, Tensors, stacked_linear
from depthscale.train.loop import loss_fn

__all__ = ["Forward", "Step", "Tensors", "forward_and_step", "member_losses", "stacked_forward"]

#: ``step(trainable, fixed, x, y)``: (gradients of the trainable parameters, losses ``[G]``).
Step = Callable[[Tensors, Tensors, torch.Tensor, torch.Tensor], tuple[Tensors, torch.Tensor]]


def _plain_linear(module: nn.Module) -> ScaledLinear | None:
    """``module`` when it is a :class:`ScaledLinear` with the standard backward, else None."""
    if type(module) is ScaledLinear and module.backward_mode == "standard":
        return module
    return None


Activation = Callable[[torch.Tensor], torch.Tensor]


class _Ops:
    """The three operations of the stacked MLP programs, for autograd: ``a x W^T (+ b)`` per
    member (:func:`~depthscale.train.batched.linear.stacked_linear`), the activation, and the
    residual add."""

    def __init__(self, params: Tensors, layers: dict[str, ScaledLinear],
                 phi: Activation) -> None:
        self.params, self.layers, self.phi_fn = params, layers, phi

    def lin(self, name: str, x: torch.Tensor) -> torch.Tensor:
        return stacked_linear(self.params, name, self.layers[name], x)

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
        result: torch.Tensor = functional_call(model, params, (x,))
        return result

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


def member_losses(loss: str, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
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
    """:func:`member_losses` and the gradient of their sum at ``out``, by the formulas autograd
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
            losses = member_losses(loss, forward({**leaves, **fixed}, xb, per_member), yb)
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


def forward_and_step(template: nn.Module, loss: str, per_member: bool) -> tuple[Forward, Step]:
    """The hand-batched forward with the hand-written backward (:func:`_manual_step`) or
    autograd's when ``template`` has a stacked program, else a laws model's hand-batched
    forward (:func:`~depthscale.train.batched.laws.laws_forward`) with autograd's, else
    vmap's."""
    found = _stacked_program(template)
    if found is not None:
        fast = _program_forward(found)
        return fast, _manual_step(found, loss, per_member) or _autograd_step(
            fast, loss, per_member)
    laws = laws_forward(template)
    if laws is not None:
        return laws, _autograd_step(laws, loss, per_member)
    return _vmapped_forward(template), _vmapped_step(template, loss, per_member)

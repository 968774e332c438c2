"""Train G copies of one model in a single pass: the hot path of a learning-rate sweep.

:func:`train_batched` stacks the parameters of G identical models along a leading axis and takes
one plain-SGD step for all members at once, each with its own base learning rate times the
plan's per-parameter multipliers ``c`` (an in-place ``addcmul_`` with a ``[G, 1, ...]`` step
tensor). Member ``i`` reproduces, to float rounding, what :func:`depthscale.train.train` gives
for the same model with ``lr = lrs[i]`` (and ``seed = seeds[i]``): the same data order, per-step
losses, epoch-averaged losses, periodic and final evaluations and divergence record. The
members' forward and gradients come from :mod:`depthscale.train.batched.program`.

A member that diverges by the loop's rule (:class:`~depthscale.train.DivergenceMonitor`, one per
member) is recorded as diverged at that step and its rows are dropped from the stack before the
update: it is frozen and its NaNs never reach another member. On Linux/glibc the first call
tunes malloc to keep freed tensor memory mapped (:func:`reuse_freed_memory`).
"""

from __future__ import annotations

import ctypes
import math
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from depthscale.errors import ConfigError
from depthscale.param import Plan
from depthscale.train.batched.program import Forward, Step, Tensors, forward_and_step, member_losses
from depthscale.train.loop import (
    DivergenceMonitor,
    TrainConfig,
    TrainResult,
    check_data,
    resolve_device,
    zero_output_loss,
)

__all__ = ["EVAL_CHUNK", "check_batchable", "reuse_freed_memory", "sgd_step", "train_batched"]

#: Samples per evaluation chunk (as :func:`depthscale.train.evaluate`).
EVAL_CHUNK = 2048

#: glibc malloc: tensors up to this size come from the heap, not a fresh mmap (its maximum)
MMAP_THRESHOLD = 32 * 2**20
#: glibc malloc: freed heap memory kept (not returned to the OS) up to this size
TRIM_THRESHOLD = 256 * 2**20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters (malloc.h)
_malloc_tuned: bool | None = None



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
    4 KiB touched (docs/performance.md, ``batched-sweep``). Raising ``M_MMAP_THRESHOLD`` to
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
    _, step_fn = forward_and_step(model, loss, False)
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
        values = member_losses(loss, out, yb).tolist()
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


class _Members:
    """The live state of a batched run: the stacked parameters and step sizes of the members
    still training (``active``, indices into the results), their data orders and running-loss
    sums; :meth:`drop` removes diverged members' rows before the update."""

    def __init__(self, trainable: Tensors, fixed: Tensors, neg_lr: Tensors, n: int,
                 seeds: list[int]) -> None:
        g = len(seeds)
        self.trainable, self.fixed, self.neg_lr = trainable, fixed, neg_lr
        self.active = list(range(g))
        self.shared = len(set(seeds)) == 1
        self.n = n
        self.gens = [torch.Generator().manual_seed(s) for s in (seeds[:1] if self.shared
                                                                  else seeds)]
        self.sums, self.counts = [0.0] * g, [0] * g
        self.orders, self.pos = self.new_orders(), 0

    def new_orders(self) -> torch.Tensor:
        """A fresh epoch order: one shared permutation, or one per active member."""
        if self.shared:
            return torch.randperm(self.n, generator=self.gens[0])
        return torch.stack([torch.randperm(self.n, generator=self.gens[i])
                            for i in self.active])

    def next_batch(self, bs: int, results: list[TrainResult]) -> torch.Tensor:
        """The next batch's indices; at an epoch's end, each member's epoch loss is closed."""
        if self.pos >= self.n:
            self.close_epoch(results)
            self.orders, self.pos = self.new_orders(), 0
        idx = self.orders[..., self.pos : self.pos + bs]
        self.pos += bs
        return idx

    def close_epoch(self, results: list[TrainResult]) -> None:
        for i in self.active:
            if self.counts[i]:
                results[i].epoch_losses.append(self.sums[i] / self.counts[i])
            self.sums[i], self.counts[i] = 0.0, 0

    def drop(self, keep: list[int], grads: Tensors, device: torch.device) -> Tensors:
        """Keep only the rows ``keep`` (positions in ``active``); returns ``grads`` cut too."""
        rows = torch.tensor(keep, dtype=torch.long, device=device)

        def cut(t: Tensors) -> Tensors:
            return {k: v.index_select(0, rows) for k, v in t.items()}

        self.active = [self.active[k] for k in keep]
        self.trainable, self.fixed, self.neg_lr = (cut(self.trainable), cut(self.fixed),
                                                   cut(self.neg_lr))
        if not self.shared:
            self.orders = self.orders[torch.tensor(keep, dtype=torch.long)]
        return cut(grads)

    def record(self, step: int, values: list[float], results: list[TrainResult]) -> None:
        for i, value in zip(self.active, values, strict=True):
            res = results[i]
            res.losses.append(value)
            res.steps_done = step
            self.sums[i], self.counts[i] = self.sums[i] + value, self.counts[i] + 1


def _total_steps(config: TrainConfig, n: int, bs: int) -> int:
    if config.steps is not None:
        return config.steps
    assert config.epochs is not None  # validate() allows exactly one of the two
    return max(1, round(config.epochs * math.ceil(n / bs)))


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
    members = _Members(trainable, fixed, _step_sizes(trainable, member_lrs, mult, device),
                       len(xs), member_seeds)
    forward, step_fn = forward_and_step(template, config.loss, not members.shared)
    results = [TrainResult(status="ok", steps_done=0) for _ in range(g)]
    floor = zero_output_loss(config.loss, ys, n_out)
    monitors = [DivergenceMonitor(config.divergence_factor, floor) for _ in range(g)]
    total = _total_steps(config, len(xs), min(config.batch_size, len(xs)))
    was_training = template.training
    t0 = time.perf_counter()
    template.train()
    steps_done = 0
    try:
        steps_done = _run_steps(members, step_fn, forward, template, config, monitors, results,
                                (xs, ys, xt, yt), total, device, progress)
        if members.active:
            members.close_epoch(results)
            _final_evaluation(members, forward, template, config, results, (xs, ys, xt, yt))
    finally:
        template.train(was_training)
    if progress is not None and steps_done < total:
        progress(g * (total - steps_done))
    seconds = (time.perf_counter() - t0) / g
    for res in results:
        res.seconds = seconds
    return results


Arrays = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def _run_steps(members: _Members, step_fn: Step, forward: Forward, template: nn.Module,
               config: TrainConfig, monitors: list[DivergenceMonitor],
               results: list[TrainResult], arrays: Arrays, total: int, device: torch.device,
               progress: Callable[[int], None] | None) -> int:
    """The training steps; returns the last step reported. A member whose loss diverges (the
    loop's rule) is recorded and dropped before the update."""
    xs, ys, xt, yt = arrays
    bs, g = min(config.batch_size, len(xs)), len(results)
    done = 0
    for step in range(1, total + 1):
        idx = members.next_batch(bs, results).to(device)
        grads, losses = step_fn(members.trainable, members.fixed, xs[idx], ys[idx])
        values = losses.tolist()
        reasons = [monitors[i].update(v) for i, v in zip(members.active, values, strict=True)]
        keep = [k for k, reason in enumerate(reasons) if reason is None]
        if len(keep) < len(members.active):
            for i, reason in zip(members.active, reasons, strict=True):
                if reason is not None:
                    res = results[i]
                    res.status, res.diverged_at, res.diverged_reason = "diverged", step, reason
            if not keep:
                members.active = []
                break
            grads = members.drop(keep, grads, device)
            values = [values[k] for k in keep]
        _sgd_update(members.trainable, members.neg_lr, grads)
        del grads
        members.record(step, values, results)
        if config.eval_every and step % config.eval_every == 0:
            for i, ev in zip(members.active,
                             _evaluate_members(members, forward, template, config, xt, yt),
                             strict=True):
                results[i].evals.append({"step": step, **{f"test_{k}": v for k, v in ev.items()}})
        done = step
        if progress is not None:
            progress(g)
    return done


def _evaluate_members(members: _Members, forward: Forward, template: nn.Module,
                      config: TrainConfig, x: torch.Tensor,
                      y: torch.Tensor) -> list[dict[str, float]]:
    """Every active member evaluated on ``(x, y)`` in eval mode."""
    template.eval()
    try:
        return _evaluate(forward, {**members.trainable, **members.fixed}, x, y, config.loss)
    finally:
        template.train()


def _final_evaluation(members: _Members, forward: Forward, template: nn.Module,
                      config: TrainConfig, results: list[TrainResult], arrays: Arrays) -> None:
    xs, ys, xt, yt = arrays
    train_evs = (_evaluate_members(members, forward, template, config, xs, ys)
                 if config.final_eval == "train+test" else [{} for _ in members.active])
    test_evs = _evaluate_members(members, forward, template, config, xt, yt)
    for i, train_ev, test_ev in zip(members.active, train_evs, test_evs, strict=True):
        _finish(results[i], train_ev, test_ev)


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

"""One training loop for every depthscale model: SGD or Adam from a plan's param groups.

Online (batch 1) or mini-batch, cross-entropy or mean-square loss, seeded data order, metric
hooks after each step, divergence recorded (not raised) when the loss stops being finite.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from depthscale.errors import ConfigError
from depthscale.param import OPTIMIZERS, Plan

__all__ = ["LOSSES", "TrainConfig", "TrainResult", "evaluate", "loss_fn", "resolve_device", "train"]

LOSSES = ("ce", "mse")

#: A hook gets (step, model, loss) after every optimizer step (step counts from 1).
Hook = Callable[[int, nn.Module, float], None]


@dataclass(frozen=True)
class TrainConfig:
    """Settings of one run. Give ``steps`` or ``epochs`` (epochs may be fractional)."""

    optimizer: str = "sgd"
    lr: float = 0.1
    steps: int | None = None
    epochs: float | None = None
    batch_size: int = 128
    loss: str = "ce"
    momentum: float = 0.0
    weight_decay: float = 0.0
    seed: int = 0
    device: str = "cpu"
    eval_every: int = 0

    def validate(self) -> None:
        """Raise a ConfigError naming the first impossible setting."""
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"unknown optimizer {self.optimizer!r}; choose one of: sgd, adam")
        if self.loss not in LOSSES:
            raise ConfigError(f"unknown loss {self.loss!r}; choose one of: {', '.join(LOSSES)}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ConfigError(f"learning rate must be a finite number > 0, got {self.lr}")
        if (self.steps is None) == (self.epochs is None):
            raise ConfigError("give exactly one of steps or epochs")
        if self.steps is not None and self.steps < 1:
            raise ConfigError(f"steps must be >= 1, got {self.steps}")
        if self.epochs is not None and not (math.isfinite(self.epochs) and self.epochs > 0):
            raise ConfigError(f"epochs must be > 0, got {self.epochs}")
        if self.batch_size < 1:
            raise ConfigError(f"batch size must be >= 1, got {self.batch_size}")


@dataclass
class TrainResult:
    """What one run measured. ``status`` is "ok" or "diverged" (non-finite loss at
    ``diverged_at``). ``epoch_losses`` are epoch-averaged running training losses; ``final``
    holds full-set train/test loss and accuracy at the end (absent after divergence)."""

    status: str
    steps_done: int
    losses: list[float] = field(default_factory=list)
    epoch_losses: list[float] = field(default_factory=list)
    evals: list[dict[str, float]] = field(default_factory=list)
    final: dict[str, float] = field(default_factory=dict)
    diverged_at: int | None = None
    seconds: float = 0.0

    @property
    def running_loss(self) -> float:
        """Mean training loss over all steps (the laws paper's epoch-averaged criterion)."""
        return float(sum(self.losses) / len(self.losses)) if self.losses else float("nan")


def resolve_device(name: str) -> torch.device:
    """``cpu`` or ``cuda[:i]``, with a clear error when CUDA is asked for but absent."""
    if name == "cpu":
        return torch.device("cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ConfigError(f"--device {name}: CUDA is not available here; use --device cpu")
        return torch.device(name)
    raise ConfigError(f"unknown device {name!r}; use cpu or cuda")


def loss_fn(name: str, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean over the batch of cross-entropy, or of (1/2)|f - y|^2 (one-hot targets for labels)."""
    if name == "ce":
        if y.dtype != torch.long:
            raise ConfigError("cross-entropy needs class labels; use --loss mse for regression")
        return F.cross_entropy(out, y)
    target = F.one_hot(y, out.shape[-1]).to(out.dtype) if y.dtype == torch.long else y
    return 0.5 * (out - target).pow(2).sum(-1).mean()


@torch.no_grad()
def evaluate(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, loss: str, chunk: int = 2048
) -> dict[str, float]:
    """Full-set loss (and accuracy for labels) in chunks, model in eval mode."""
    was_training = model.training
    model.eval()
    total, correct = 0.0, 0
    for i in range(0, len(x), chunk):
        out = model(x[i : i + chunk])
        yb = y[i : i + chunk]
        total += float(loss_fn(loss, out, yb)) * len(yb)
        if y.dtype == torch.long:
            correct += int((out.argmax(-1) == yb).sum())
    model.train(was_training)
    res = {"loss": total / len(x)}
    if y.dtype == torch.long:
        res["acc"] = correct / len(x)
    return res


def train(
    model: nn.Module,
    plan: Plan,
    data: object,
    config: TrainConfig,
    *,
    hooks: Sequence[Hook] = (),
    progress: Callable[[int], None] | None = None,
) -> TrainResult:
    """Train ``model`` under ``plan`` on ``data`` (a :class:`depthscale.data.Dataset`).

    The data order comes from a generator seeded by ``config.seed``; the model is moved to
    ``config.device``. ``progress(k)`` is called with the number of steps just done.
    """
    config.validate()
    device = resolve_device(config.device)
    model.to(device)
    xs, ys = data.x_train.to(device), data.y_train.to(device)  # type: ignore[attr-defined]
    xt, yt = data.x_test.to(device), data.y_test.to(device)  # type: ignore[attr-defined]
    opt = plan.optimizer(
        model, config.optimizer, config.lr, momentum=config.momentum,
        weight_decay=config.weight_decay,
    )
    n = len(xs)
    bs = min(config.batch_size, n)
    per_epoch = math.ceil(n / bs)
    total = config.steps if config.steps is not None else max(1, round(config.epochs * per_epoch))
    gen = torch.Generator().manual_seed(config.seed)
    result = TrainResult(status="ok", steps_done=0)
    t0 = time.perf_counter()
    model.train()
    epoch_sum, epoch_count, order, pos = 0.0, 0, torch.randperm(n, generator=gen), 0
    for step in range(1, total + 1):
        if pos >= n:
            result.epoch_losses.append(epoch_sum / epoch_count)
            epoch_sum, epoch_count, order, pos = 0.0, 0, torch.randperm(n, generator=gen), 0
        idx = order[pos : pos + bs].to(device)
        pos += bs
        loss = loss_fn(config.loss, model(xs[idx]), ys[idx])
        value = loss.detach().item()
        if not math.isfinite(value):
            result.status, result.diverged_at = "diverged", step
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        result.losses.append(value)
        result.steps_done = step
        epoch_sum, epoch_count = epoch_sum + value, epoch_count + 1
        for hook in hooks:
            hook(step, model, value)
        if config.eval_every and step % config.eval_every == 0:
            ev = evaluate(model, xt, yt, config.loss)
            result.evals.append({"step": step, **{f"test_{k}": v for k, v in ev.items()}})
        if progress is not None:
            progress(1)
    if epoch_count and result.status == "ok":
        result.epoch_losses.append(epoch_sum / epoch_count)
    if result.status == "ok":
        train_ev = evaluate(model, xs, ys, config.loss)
        test_ev = evaluate(model, xt, yt, config.loss)
        finite = all(math.isfinite(v) for v in (*train_ev.values(), *test_ev.values()))
        if finite:
            result.final = {
                **{f"train_{k}": v for k, v in train_ev.items()},
                **{f"test_{k}": v for k, v in test_ev.items()},
            }
        else:
            result.status, result.diverged_at = "diverged", result.steps_done
    if progress is not None and result.steps_done < total:
        progress(total - result.steps_done)
    result.seconds = time.perf_counter() - t0
    return result

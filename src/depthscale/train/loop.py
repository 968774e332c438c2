"""One training loop for every depthscale model: SGD or Adam from a plan's param groups.

Online (batch 1) or mini-batch, cross-entropy or mean-square loss, seeded data order, metric
hooks after each step. Before any step the data is checked against the model
(:func:`check_data`); divergence is recorded, not raised (:class:`DivergenceMonitor`); a
KeyboardInterrupt leaves as :class:`TrainInterrupted` carrying what finished.

Inputs and outputs as users have them (tensors, tuples of positional arguments, dicts of
keyword arguments; logits in a tuple, dict or ``.logits``) are read by
:mod:`depthscale.calls`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from depthscale.calls import (
    call_model,
    describe_input,
    logits_of,
    n_rows,
    take_rows,
    to_device,
)
from depthscale.errors import ConfigError, DataError, DepthscaleError
from depthscale.param import OPTIMIZERS, Plan
from depthscale.param.dataflow import copy_input
from depthscale.param.optim import optimizer_settings

__all__ = [
    "FINAL_EVALS",
    "LOSSES",
    "DivergenceMonitor",
    "TrainConfig",
    "TrainInterrupted",
    "TrainResult",
    "TrainSettings",
    "check_data",
    "check_device_name",
    "evaluate",
    "loss_fn",
    "resolve_device",
    "train",
    "zero_output_loss",
]

LOSSES = ("ce", "mse")
#: the splits :func:`train` evaluates after the last step (TrainConfig.final_eval)
FINAL_EVALS = ("train+test", "test")

#: A hook gets (step, model, loss) after every optimizer step (step counts from 1).
Hook = Callable[[int, nn.Module, float], None]


@dataclass(frozen=True)
class TrainSettings:
    """The training settings a run shares with the other runs of its study (the one
    declaration of these fields and their defaults: a study's ``[train]`` table, each
    :class:`~depthscale.studies.spec.RunSpec` and :class:`TrainConfig` take them from here).

    Give ``steps`` or ``epochs`` (epochs may be fractional). ``final_eval``: the splits
    evaluated after the last step, "train+test" (default) or "test" (no ``final_train_*``
    metrics; an LR sweep that reads the running loss skips a full pass over the training set,
    about a third of a one-epoch run). ``eval_every``: evaluate the test set every that many
    steps (0: never during training).
    """

    optimizer: str = "sgd"
    steps: int | None = None
    epochs: float | None = None
    batch_size: int = 128
    loss: str = "ce"
    momentum: float = 0.0
    weight_decay: float = 0.0
    device: str = "cpu"
    eval_every: int = 0
    final_eval: str = "train+test"


@dataclass(frozen=True)
class TrainConfig(TrainSettings):
    """Settings of one run: its :class:`TrainSettings`, learning rate, seed (the data order)
    and divergence rule.

    ``divergence_factor`` (a number > 1, default 10) sets when a finite loss counts as
    diverged: at the first step where the running training loss (the mean of the step losses
    so far) exceeds ``divergence_factor`` times the initial loss, the larger of the first
    step's loss and the loss of an all-zero output (:func:`zero_output_loss`: ``log C`` for
    cross-entropy). A non-finite loss always counts. The zero-output floor keeps a lucky first
    batch (one sample at batch size 1) from making a healthy run look diverged.
    """

    lr: float = 0.1
    seed: int = 0
    divergence_factor: float = 10.0

    def validate(self) -> None:
        """Raise a ConfigError naming the first impossible setting."""
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"unknown optimizer {self.optimizer!r}; choose one of: sgd, adam")
        if self.loss not in LOSSES:
            raise ConfigError(f"unknown loss {self.loss!r}; choose one of: {', '.join(LOSSES)}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ConfigError(f"learning rate must be a finite number > 0, got {self.lr}")
        # the optimizer's own checks (rates' range, momentum in [0, 1) and SGD's only), here
        # so that a study refuses them before its first run
        optimizer_settings(self.optimizer, self.lr, self.momentum, self.weight_decay, 1.0)
        if (self.steps is None) == (self.epochs is None):
            raise ConfigError("give exactly one of steps or epochs")
        if self.steps is not None and self.steps < 1:
            raise ConfigError(f"steps must be >= 1, got {self.steps}")
        if self.epochs is not None and not (math.isfinite(self.epochs) and self.epochs > 0):
            raise ConfigError(f"epochs must be > 0, got {self.epochs}")
        if self.batch_size < 1:
            raise ConfigError(f"batch size must be >= 1, got {self.batch_size}")
        if self.final_eval not in FINAL_EVALS:
            raise ConfigError(f"unknown final_eval {self.final_eval!r}; choose one of: "
                              f"{', '.join(FINAL_EVALS)}")
        factor = self.divergence_factor
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not (
            math.isfinite(factor) and factor > 1
        ):
            raise ConfigError(
                f"divergence_factor must be a finite number > 1 (a run diverges when its "
                f"running loss exceeds that multiple of the initial loss), got {factor!r}"
            )


@dataclass
class TrainResult:
    """What one run measured. ``status`` is "ok", "diverged" (at step ``diverged_at``, for
    ``diverged_reason``: "non-finite loss", "running loss 5.1e+14 > 10 x initial loss 2.3" or
    "non-finite final evaluation") or "interrupted" (only on :class:`TrainInterrupted`).
    ``losses`` are the losses of the ``steps_done`` steps taken (the diverging step is not
    taken); ``epoch_losses`` are epoch-averaged running training losses; ``final`` holds
    full-set train/test loss and accuracy at the end (absent after divergence)."""

    status: str
    steps_done: int
    losses: list[float] = field(default_factory=list)
    epoch_losses: list[float] = field(default_factory=list)
    evals: list[dict[str, float]] = field(default_factory=list)
    final: dict[str, float] = field(default_factory=dict)
    diverged_at: int | None = None
    diverged_reason: str | None = None
    seconds: float = 0.0

    @property
    def running_loss(self) -> float:
        """Mean training loss over all steps (the laws paper's epoch-averaged criterion)."""
        return float(sum(self.losses) / len(self.losses)) if self.losses else float("nan")


class TrainInterrupted(KeyboardInterrupt):
    """A KeyboardInterrupt during :func:`train`; ``result`` holds what finished before it
    (status "interrupted", ``steps_done`` and their ``losses``, completed epochs and evals)."""

    def __init__(self, result: TrainResult) -> None:
        super().__init__(f"interrupted after {result.steps_done} steps")
        self.result = result


class DivergenceMonitor:
    """The divergence rule of :class:`TrainConfig`, fed one step loss at a time.

    ``floor`` is the zero-output loss of the training set (:func:`zero_output_loss`). Both
    :func:`train` and :func:`depthscale.train.train_batched` (one monitor per member) use it,
    so a batched sweep and one-by-one runs agree on which runs diverged and when.
    """

    def __init__(self, factor: float, floor: float) -> None:
        self.factor, self.floor = factor, floor
        self.initial: float | None = None
        self.total, self.count = 0.0, 0

    def update(self, value: float) -> str | None:
        """Take one step's loss; return why the run diverged at this step, or None."""
        if not math.isfinite(value):
            return "non-finite loss"
        if self.initial is None:
            self.initial = max(value, self.floor)
        self.total, self.count = self.total + value, self.count + 1
        running = self.total / self.count
        if self.initial > 0 and running > self.factor * self.initial:
            return (f"running loss {running:.3g} > {self.factor:g} x initial loss "
                    f"{self.initial:.3g}")
        return None


def check_device_name(name: str) -> None:
    """ConfigError unless ``name`` is ``cpu``, ``cuda`` or ``cuda:<index>`` (its spelling
    only: whether this machine has it is :func:`resolve_device`'s check)."""
    head, sep, index = name.partition(":")
    if name == "cpu" or (head == "cuda" and (not sep or (index.isdigit() and index.isascii()))):
        return
    raise ConfigError(f"unknown device {name!r}; use cpu, cuda or cuda:<index>")


def resolve_device(name: str) -> torch.device:
    """``cpu`` or ``cuda[:i]``, with a clear error when CUDA is asked for but absent.

    On CUDA, TF32 is switched off for matrix products and cuDNN convolutions: torch runs
    convolutions in TF32 (a 10-bit mantissa) by default on Ampere and later GPUs, so a float32
    run would silently round like half precision there (docs/performance.md)."""
    if name == "cpu":
        return torch.device("cpu")
    if name.startswith("cuda"):
        try:
            device = torch.device(name)
        except RuntimeError:
            raise ConfigError(f"unknown device {name!r}; use cpu, cuda or cuda:<index>") from None
        if not torch.cuda.is_available():
            raise ConfigError(f"--device {name}: CUDA is not available here; use --device cpu")
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise ConfigError(f"--device {name}: this machine has {count} CUDA device(s), "
                              f"cuda:0 to cuda:{count - 1}")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        return device
    raise ConfigError(f"unknown device {name!r}; use cpu or cuda")


def loss_fn(name: str, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean of cross-entropy, or of (1/2)|f - y|^2 (one-hot targets for labels), over every
    row of ``out``: the LAST axis holds the classes (or target dimensions) for any rank, so
    logits ``(B, seq, C)`` go with labels ``(B, seq)`` and the mean runs over all B x seq."""
    labels = y.dtype == torch.long
    if name == "ce" and not labels:
        raise ConfigError("cross-entropy needs class labels; use --loss mse for regression")
    want = (*y.shape, out.shape[-1]) if labels else tuple(y.shape)
    if tuple(out.shape) != want:
        needs = "labels need one score per class on the last axis" if labels else "same shape"
        raise ConfigError(
            f"model outputs of shape {tuple(out.shape)} do not fit targets of shape "
            f"{tuple(y.shape)} ({needs})"
        )
    if name == "ce":
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    target = F.one_hot(y, out.shape[-1]).to(out.dtype) if labels else y
    return 0.5 * (out - target).pow(2).sum(-1).mean()


def zero_output_loss(name: str, y: torch.Tensor, n_out: int) -> float:
    """The loss of a model that outputs zeros on targets ``y`` with ``n_out`` outputs: ``log
    n_out`` for cross-entropy (uniform scores), 1/2 for mean-square on labels (one-hot
    targets), and ``(1/2) mean_i |y_i|^2`` for regression targets."""
    if y.dtype == torch.long:
        return math.log(n_out) if name == "ce" else 0.5
    return float(0.5 * y.double().pow(2).sum(-1).mean())


@torch.no_grad()
def evaluate(
    model: nn.Module, x: Any, y: torch.Tensor, loss: str, chunk: int = 2048
) -> dict[str, float]:
    """Full-set loss (and accuracy for labels) in chunks, model in eval mode.

    ``x`` is a tensor, a tuple or a dict of tensors (see the module docstring). Both are means
    over every row :func:`loss_fn` averages: samples, or samples x positions for per-position
    labels ``(N, seq)``. An empty ``x`` is a DataError (nothing to average).
    """
    size = n_rows(x)
    if size == 0:
        raise DataError("evaluate: no samples to evaluate (x has 0 rows); pass a non-empty split")
    was_training = model.training
    model.eval()
    total, correct, rows = 0.0, 0, 0
    for i in range(0, size, chunk):
        out = logits_of(call_model(model, copy_input(take_rows(x, slice(i, i + chunk)))))
        yb = y[i : i + chunk]
        n = out[..., 0].numel()
        total += float(loss_fn(loss, out, yb)) * n
        rows += n
        if y.dtype == torch.long:
            correct += int((out.argmax(-1) == yb).sum())
    model.train(was_training)
    res = {"loss": total / rows}
    if y.dtype == torch.long:
        res["acc"] = correct / rows
    return res


def check_data(model: nn.Module, data: object, loss: str) -> int:
    """Check, before any training, that ``model`` takes ``data``'s samples and that its outputs
    fit the targets under ``loss``; return the model's output width (classes or targets).

    One forward pass on the first training sample, under ``no_grad`` and in eval mode (no
    state, no random draw: training is unchanged). A shape or dtype failure there, an output
    whose shape does not fit the targets (labels ``(N,)``/``(N, seq)`` need ``(1, C)``/``(1,
    seq, C)`` with ``C = data.n_out``; regression targets ``(N, k)`` need ``(1, k)``), or a loss
    that does not fit the targets raises a ConfigError naming the data's sample shape and what
    the model expects.
    """
    missing = [k for k in ("x_train", "y_train", "x_test", "y_test") if not hasattr(data, k)]
    if missing:
        raise ConfigError(
            f"train needs a depthscale.data.Dataset (or an object with x_train, y_train, "
            f"x_test, y_test); {type(data).__name__} has no {', '.join(missing)}"
        )
    name = repr(getattr(data, "name", type(data).__name__))
    x, y = data.x_train, data.y_train  # type: ignore[attr-defined]
    sample = describe_input(x)
    fix = ("build the model for the data, e.g. depthscale.models.build(..., "
           "input_shape=data.sample_shape, n_out=data.n_out)")
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = logits_of(call_model(model, copy_input(to_device(take_rows(x, slice(0, 1)),
                                                                   device))))
    except DepthscaleError:
        raise
    except (RuntimeError, TypeError, ValueError, IndexError) as exc:
        error = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        raise ConfigError(
            f"{type(model).__name__} cannot take dataset {name}'s samples of shape {sample}: "
            f"a forward pass on one of them failed ({error}); {fix}"
        ) from None
    finally:
        model.train(was_training)
    labels = y.dtype == torch.long
    n_out = getattr(data, "n_out", None)
    got = tuple(out.shape)
    if labels:
        want = (1, *y.shape[1:], n_out if n_out is not None else (got[-1] if got else 1))
        needs = f"one score per class ({want[-1]}) on the last axis"
    else:
        want = (1, *y.shape[1:])
        needs = "one output per target dimension"
    if got != want:
        raise ConfigError(
            f"{type(model).__name__} outputs shape {got[1:]} for one sample of dataset {name} "
            f"(sample shape {sample}), but its targets need {want[1:]} ({needs}); {fix}"
        )
    loss_fn(loss, out, y[:1].to(device))
    return want[-1] if len(want) > 1 else 1


def train(
    model: nn.Module,
    plan: Plan,
    data: object,
    config: TrainConfig,
    *,
    hooks: Sequence[Hook] = (),
    progress: Callable[[int], None] | None = None,
) -> TrainResult:
    """Train ``model`` under ``plan`` on ``data`` (a :class:`depthscale.data.Dataset`, or an
    object with ``x_train``, ``y_train``, ``x_test``, ``y_test`` whose inputs may also be tuples
    or dicts of tensors, and a model whose output may be a Hugging Face ``ModelOutput``: see
    the module docstring).

    :func:`check_data` runs first, so a model built for other data fails before any step.
    The data order comes from a generator seeded by ``config.seed``; the model is moved to
    ``config.device``. ``progress(k)`` is called with the number of steps just done.
    Divergence (:class:`TrainConfig`) ends the run early with status "diverged". A
    KeyboardInterrupt is raised again as :class:`TrainInterrupted` holding what finished.
    """
    config.validate()
    device = resolve_device(config.device)
    model.to(device)
    n_out = check_data(model, data, config.loss)
    xs, ys = to_device(data.x_train, device), data.y_train.to(device)  # type: ignore[attr-defined]
    xt, yt = to_device(data.x_test, device), data.y_test.to(device)  # type: ignore[attr-defined]
    opt = plan.optimizer(
        model, config.optimizer, config.lr, momentum=config.momentum,
        weight_decay=config.weight_decay,
    )
    n = n_rows(xs)
    bs = min(config.batch_size, n)
    per_epoch = math.ceil(n / bs)
    # validate() made sure one of steps and epochs is set
    total = (config.steps if config.steps is not None else
             max(1, round((config.epochs or 0) * per_epoch)))
    gen = torch.Generator().manual_seed(config.seed)
    monitor = DivergenceMonitor(config.divergence_factor, zero_output_loss(config.loss, ys, n_out))
    result = TrainResult(status="ok", steps_done=0)
    t0 = time.perf_counter()
    model.train()
    try:
        _run(model, opt, xs, ys, xt, yt, config, total, bs, gen, monitor, result, hooks,
             progress)
    except KeyboardInterrupt:
        result.status, result.final = "interrupted", {}
        result.steps_done = len(result.losses)
        result.seconds = time.perf_counter() - t0
        raise TrainInterrupted(result) from None
    if progress is not None and result.steps_done < total:
        progress(total - result.steps_done)
    result.seconds = time.perf_counter() - t0
    return result


def _run(
    model: nn.Module, opt: torch.optim.Optimizer, xs: Any, ys: torch.Tensor,
    xt: Any, yt: torch.Tensor, config: TrainConfig, total: int, bs: int,
    gen: torch.Generator, monitor: DivergenceMonitor, result: TrainResult,
    hooks: Sequence[Hook], progress: Callable[[int], None] | None,
) -> None:
    """The steps and the closing evaluation of :func:`train`, recorded into ``result``."""
    n, device = n_rows(xs), ys.device
    epoch_sum, epoch_count, order, pos = 0.0, 0, torch.randperm(n, generator=gen), 0
    for step in range(1, total + 1):
        if pos >= n:
            result.epoch_losses.append(epoch_sum / epoch_count)
            epoch_sum, epoch_count, order, pos = 0.0, 0, torch.randperm(n, generator=gen), 0
        idx = order[pos : pos + bs].to(device)
        pos += bs
        loss = loss_fn(config.loss, logits_of(call_model(model, take_rows(xs, idx))), ys[idx])
        value = loss.detach().item()
        reason = monitor.update(value)
        if reason is not None:
            result.status, result.diverged_at, result.diverged_reason = "diverged", step, reason
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
    if result.status != "ok":
        return
    if epoch_count:
        result.epoch_losses.append(epoch_sum / epoch_count)
    train_ev = evaluate(model, xs, ys, config.loss) if config.final_eval == "train+test" else {}
    test_ev = evaluate(model, xt, yt, config.loss)
    if all(math.isfinite(v) for v in (*train_ev.values(), *test_ev.values())):
        result.final = {
            **{f"train_{k}": v for k, v in train_ev.items()},
            **{f"test_{k}": v for k, v in test_ev.items()},
        }
    else:
        result.status, result.diverged_at = "diverged", result.steps_done
        result.diverged_reason = "non-finite final evaluation"

"""The :class:`Dataset` container and the small helpers every loader shares.

Loaders build numpy arrays, standardise inputs with statistics of the training samples they
return (never the test samples), and wrap the result in a :class:`Dataset` of torch tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Integral
from typing import Any

import numpy as np
import torch

from depthscale.errors import ConfigError, DataError

__all__ = ["TASKS", "Dataset"]

TASKS = ("classification", "regression")


@dataclass(frozen=True, eq=False)
class Dataset:
    """A train/test split held in memory as torch tensors.

    Inputs ``x_*`` are ``(N, *sample_shape)`` float32 (signals, images, vectors) or int64 token
    ids ``(N, seq)``, >= 0 and < ``vocab_size`` when given. Targets ``y_*``: for
    ``task="classification"`` int64 labels in ``[0, n_classes)`` of shape ``(N,)`` or, for token
    inputs only, ``(N, seq)`` (one label per position; a model then outputs ``(N, seq,
    n_classes)``); for ``task="regression"`` float32 ``(N, k)``. Both splits need a sample (a test
    split may repeat the training samples, as chizat's does).

    The constructor checks all of this, and that float inputs and regression targets are finite,
    and raises :class:`~depthscale.errors.DataError` naming the dataset, the split, what was found
    and the fix. Equality is identity (``eq=False``: comparing tensors elementwise has no single
    truth value). ``meta`` holds what a source knows about itself (e.g. the markov source's exact
    ``entropy_rate_nats``).
    """

    name: str
    x_train: torch.Tensor = field(repr=False)
    y_train: torch.Tensor = field(repr=False)
    x_test: torch.Tensor = field(repr=False)
    y_test: torch.Tensor = field(repr=False)
    sample_shape: tuple[int, ...]
    task: str
    n_classes: int | None
    vocab_size: int | None = None
    meta: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        """Check that tensors, sample shape, task, class count and values are consistent."""
        where = f"dataset {self.name!r}"
        if self.task not in TASKS:
            raise DataError(f"{where}: task {self.task!r} is not one of {TASKS}")
        n_classes = as_int(self.n_classes)
        if self.task == "classification" and (n_classes is None or n_classes < 1):
            raise DataError(
                f"{where}: n_classes={self.n_classes!r} does not fit task 'classification' "
                "(give the number of classes, an int >= 1)"
            )
        if self.task == "regression" and self.n_classes is not None:
            raise DataError(
                f"{where}: n_classes={self.n_classes!r} does not fit task 'regression' "
                "(leave it None)"
            )
        tokens = self.x_train.dtype == torch.int64
        if self.vocab_size is not None:
            vocab = as_int(self.vocab_size)
            if vocab is None or vocab < 1 or not tokens:
                raise DataError(
                    f"{where}: vocab_size={self.vocab_size!r} needs int64 token inputs and an "
                    f"int >= 1 (inputs are {self.x_train.dtype}); leave it None otherwise"
                )
        for split, x, y in (("train", self.x_train, self.y_train),
                            ("test", self.x_test, self.y_test)):
            self._check_split(split, x, y, tokens)

    def _check_split(self, split: str, x: torch.Tensor, y: torch.Tensor, tokens: bool) -> None:
        """The checks of one split: shapes and dtypes, size, then values."""
        where = f"dataset {self.name!r}"
        shape = ", ".join(map(str, self.sample_shape))
        fits = tuple(x.shape[1:]) == tuple(self.sample_shape)
        if tokens:
            if x.dtype != torch.int64 or x.ndim != 2 or not fits:
                raise DataError(
                    f"{where}: token inputs x_{split} must be int64 of shape (N, seq) with "
                    f"sample_shape (seq,), got {x.dtype} {tuple(x.shape)} and sample_shape "
                    f"{tuple(self.sample_shape)}"
                )
        elif x.dtype != torch.float32 or not fits:
            raise DataError(
                f"{where}: x_{split} must be float32 (or int64 token ids) of shape "
                f"(N, {shape}), got {x.dtype} {tuple(x.shape)}"
            )
        if len(y) != len(x):
            raise DataError(f"{where}: {len(x)} inputs but {len(y)} targets in {split}")
        if len(x) == 0:
            raise DataError(
                f"{where}: the {split} split has 0 samples; each split needs at least one "
                "(pass n_train/n_test >= 1, or reuse the training samples as the test split)"
            )
        if self.task == "classification":
            per_position = tokens and tuple(y.shape) == tuple(x.shape)
            if y.dtype != torch.int64 or not (y.ndim == 1 or per_position):
                wanted = "(N,) or (N, seq)" if tokens else "(N,)"
                raise DataError(
                    f"{where}: y_{split} must be int64 labels of shape {wanted}, got "
                    f"{y.dtype} {tuple(y.shape)}"
                )
            _check_range(where, f"y_{split} labels", y, self.n_classes, "n_classes")
        elif y.dtype != torch.float32 or y.ndim != 2:
            raise DataError(
                f"{where}: y_{split} must be float32 of shape (N, k), got "
                f"{y.dtype} {tuple(y.shape)}"
            )
        else:
            _check_finite(where, f"y_{split}", y)
        if tokens:
            _check_range(where, f"x_{split} token ids", x, self.vocab_size, "vocab_size")
        else:
            _check_finite(where, f"x_{split}", x)

    @property
    def n_out(self) -> int:
        """Output width a model needs: the class count, or the target dimension k."""
        if self.n_classes is not None:
            return self.n_classes
        return int(self.y_train.shape[1])

    @property
    def input_dim(self) -> int:
        """Number of scalars in one sample: ``prod(sample_shape)``."""
        return math.prod(self.sample_shape)


def as_int(value: object) -> int | None:
    """``value`` as an int if it is an integer (numpy integers included, bools excluded)."""
    if isinstance(value, Integral) and not isinstance(value, bool):
        return int(value)
    return None


def _check_finite(where: str, what: str, values: torch.Tensor) -> None:
    """Raise a DataError counting the NaN/inf entries of ``values`` (N, ...) if there are any."""
    if bool(torch.isfinite(values).all()):
        return
    bad = ~torch.isfinite(values)
    rows = bad.reshape(len(values), -1).any(1)
    raise DataError(
        f"{where}: {what} has {int(bad.sum())} non-finite value(s) (NaN or inf) in "
        f"{int(rows.sum())} sample(s), the first at sample {int(rows.nonzero()[0, 0])}; drop "
        "or repair those samples before building the Dataset"
    )


def _check_range(
    where: str, what: str, values: torch.Tensor, upper: int | None, upper_name: str
) -> None:
    """Raise a DataError unless the integers ``values`` lie in ``[0, upper)`` (``>= 0`` when
    ``upper`` is None), naming how many do not and the bound to change."""
    low, high = int(values.min()), int(values.max())
    if low >= 0 and (upper is None or high < upper):
        return
    bad = (values < 0) if upper is None else (values < 0) | (values >= upper)
    bound = ">= 0" if upper is None else f"0..{upper - 1} ({upper_name}={upper})"
    fix = "fix them"
    if upper is not None and low >= 0:
        fix += f" or set {upper_name} to at least {high + 1}"
    raise DataError(
        f"{where}: {what} must lie in {bound}; {int(bad.sum())} value(s) do not (min {low}, "
        f"max {high}); {fix}"
    )


def check_size(dataset: str, what: str, value: object, available: int | None = None) -> None:
    """Raise ConfigError unless ``value`` is None or an int in ``[1, available]``."""
    if value is None:
        return
    n = as_int(value)
    if n is None or n < 1:
        raise ConfigError(f"{dataset}: {what} must be a positive integer, got {value!r}")
    if available is not None and n > available:
        raise ConfigError(
            f"{dataset}: {what}={n} but only {available} samples are available; "
            f"pass {what} <= {available} or leave it unset"
        )


def check_dim(dataset: str, value: object) -> int:
    """Return the option ``dim`` as an int, or raise ConfigError if it is not a positive int."""
    n = as_int(value)
    if n is None or n < 1:
        raise ConfigError(f"{dataset}: option dim must be a positive integer, got {value!r}")
    return n


def standardise(
    x_train: np.ndarray, x_test: np.ndarray, axes: tuple[int, ...] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(x - mean) / std`` for both splits as float32, statistics from ``x_train`` only.

    ``axes=None`` uses one scalar mean/std; otherwise they are reduced over ``axes`` (e.g.
    ``(0, 2, 3)`` for per-channel image statistics). Population std (ddof=0) computed in
    float64; a zero std is replaced by 1 so constant features stay finite.
    """
    mean = x_train.mean(axis=axes, dtype=np.float64, keepdims=axes is not None)
    std = x_train.std(axis=axes, dtype=np.float64, keepdims=axes is not None)
    std = np.where(std > 0, std, 1.0)
    return (
        ((x_train - mean) / std).astype(np.float32),
        ((x_test - mean) / std).astype(np.float32),
    )


def to_tensor(array: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """Copy a numpy array into a fresh contiguous torch tensor of ``dtype``."""
    return torch.tensor(np.ascontiguousarray(array), dtype=dtype)

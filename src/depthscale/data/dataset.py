"""The :class:`Dataset` container and the small helpers every loader shares.

Loaders build numpy arrays, standardise inputs with statistics of the training samples they
return (never the test samples), and wrap the result in a :class:`Dataset` of torch tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Integral

import numpy as np
import torch

from depthscale.errors import ConfigError, DataError

__all__ = ["TASKS", "Dataset"]

TASKS = ("classification", "regression")


@dataclass(frozen=True, eq=False)
class Dataset:
    """A train/test split held in memory as torch tensors.

    ``x_*`` are float32 of shape ``(N, *sample_shape)``. ``y_*`` are int64 labels of shape
    ``(N,)`` for classification and float32 targets of shape ``(N, k)`` for regression.
    The constructor checks that these shapes, dtypes and the task agree and raises
    :class:`~depthscale.errors.DataError` otherwise. Equality is identity (``eq=False``):
    comparing tensors elementwise has no single truth value.
    """

    name: str
    x_train: torch.Tensor = field(repr=False)
    y_train: torch.Tensor = field(repr=False)
    x_test: torch.Tensor = field(repr=False)
    y_test: torch.Tensor = field(repr=False)
    sample_shape: tuple[int, ...]
    task: str
    n_classes: int | None

    def __post_init__(self) -> None:
        """Check that tensors, sample shape, task and class count are consistent."""
        if self.task not in TASKS:
            raise DataError(f"dataset {self.name!r}: task {self.task!r} is not one of {TASKS}")
        if (self.task == "classification") != (self.n_classes is not None):
            raise DataError(
                f"dataset {self.name!r}: n_classes={self.n_classes!r} does not fit task "
                f"{self.task!r} (an int for classification, None for regression)"
            )
        splits = (("train", self.x_train, self.y_train), ("test", self.x_test, self.y_test))
        for split, x, y in splits:
            if x.dtype != torch.float32 or tuple(x.shape[1:]) != tuple(self.sample_shape):
                raise DataError(
                    f"dataset {self.name!r}: x_{split} must be float32 of shape "
                    f"(N, {', '.join(map(str, self.sample_shape))}), got {x.dtype} "
                    f"{tuple(x.shape)}"
                )
            if len(y) != len(x):
                raise DataError(
                    f"dataset {self.name!r}: {len(x)} inputs but {len(y)} targets in {split}"
                )
            if self.task == "classification" and (y.dtype != torch.int64 or y.ndim != 1):
                raise DataError(
                    f"dataset {self.name!r}: y_{split} must be int64 labels of shape (N,), got "
                    f"{y.dtype} {tuple(y.shape)}"
                )
            if self.task == "regression" and (y.dtype != torch.float32 or y.ndim != 2):
                raise DataError(
                    f"dataset {self.name!r}: y_{split} must be float32 of shape (N, k), got "
                    f"{y.dtype} {tuple(y.shape)}"
                )

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

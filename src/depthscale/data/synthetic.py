"""Synthetic regression data: a random two-layer ReLU teacher and Chizat's Gaussian pairs.

Randomness comes only from ``numpy.random.default_rng``-style generators seeded by ``seed``:
the seed's :class:`numpy.random.SeedSequence` is split into independent child streams (one per
role), so that e.g. changing ``n_train`` changes neither the teacher nor the test inputs, and a
smaller ``n_train`` gives a prefix of a larger one.
"""

from __future__ import annotations

import numpy as np
import torch

from depthscale.data.dataset import Dataset, check_dim, check_size, to_tensor
from depthscale.errors import ConfigError

__all__ = ["TEACHER_HIDDEN", "load_chizat", "load_teacher"]

TEACHER_HIDDEN = 8


def _streams(seed: int, n: int) -> list[np.random.Generator]:
    """``n`` independent generators derived from ``seed`` (children of its SeedSequence)."""
    return [np.random.default_rng(child) for child in np.random.SeedSequence(seed).spawn(n)]


def load_teacher(*, seed: int, n_train: int | None, n_test: int | None, dim: int = 16) -> Dataset:
    """Teacher regression: x ~ N(0, I_d), y = a^T relu(W x / sqrt(d)) / sqrt(k), shape (N, 1).

    ``d = dim`` (default 16), ``k = 8`` hidden units, W (k, d) and a (k,) with N(0, 1) entries.
    Teacher, train inputs and test inputs use three independent streams seeded by ``seed``.
    Defaults: 512 train and 512 test samples. Neither x nor y is rescaled.
    """
    d = check_dim("teacher", dim)
    check_size("teacher", "n_train", n_train)
    check_size("teacher", "n_test", n_test)
    teacher_rng, train_rng, test_rng = _streams(seed, 3)
    w = teacher_rng.standard_normal((TEACHER_HIDDEN, d))
    a = teacher_rng.standard_normal(TEACHER_HIDDEN)

    def teacher(x: np.ndarray) -> np.ndarray:
        hidden = np.maximum(x @ w.T / np.sqrt(d), 0.0)
        result: np.ndarray = (hidden @ a / np.sqrt(TEACHER_HIDDEN))[:, None]
        return result

    x_train = train_rng.standard_normal((512 if n_train is None else n_train, d))
    x_test = test_rng.standard_normal((512 if n_test is None else n_test, d))
    return Dataset(
        name="teacher",
        x_train=to_tensor(x_train, torch.float32),
        y_train=to_tensor(teacher(x_train), torch.float32),
        x_test=to_tensor(x_test, torch.float32),
        y_test=to_tensor(teacher(x_test), torch.float32),
        sample_shape=(d,),
        task="regression",
        n_classes=None,
    )


def load_chizat(*, seed: int, n_train: int | None, n_test: int | None, dim: int = 10) -> Dataset:
    """Chizat et al. Sec. 2.4 (ResNets of Eq. 24): n pairs (x, y), all entries iid N(0, 1) in R^D.

    ``D = dim`` (default 10), ``n = n_train`` (default 10); x and y come from two independent
    streams seeded by ``seed``. The paper only measures training dynamics, so the test set is
    a copy of the training points; ``n_test`` must be unset or equal to ``n_train``.
    """
    d = check_dim("chizat", dim)
    check_size("chizat", "n_train", n_train)
    check_size("chizat", "n_test", n_test)
    n = 10 if n_train is None else n_train
    if n_test is not None and n_test != n:
        raise ConfigError(
            f"chizat: the test set is the training set, so n_test must equal n_train={n}; "
            f"got n_test={n_test} (leave n_test unset)"
        )
    x_rng, y_rng = _streams(seed, 2)
    x = to_tensor(x_rng.standard_normal((n, d)), torch.float32)
    y = to_tensor(y_rng.standard_normal((n, d)), torch.float32)
    return Dataset(
        name="chizat",
        x_train=x,
        y_train=y,
        x_test=x.clone(),
        y_test=y.clone(),
        sample_shape=(d,),
        task="regression",
        n_classes=None,
    )

"""Small classification benchmarks that need no files: MNIST-1D (generated) and sklearn digits."""

from __future__ import annotations

import functools
import hashlib
import math
import random
from typing import Any

import numpy as np
import torch

from depthscale.data.cache import read_arrays, write_arrays
from depthscale.data.dataset import Dataset, as_int, check_size, standardise, to_tensor
from depthscale.errors import ConfigError

__all__ = ["load_digits", "load_mnist1d", "mnist1d_sizes"]

MNIST1D_TRAIN, MNIST1D_TEST, MNIST1D_LENGTH = 4000, 1000, 40
#: the generator's default number of signals and its train share
MNIST1D_SAMPLES, MNIST1D_SPLIT = 5000, 0.8
DIGITS_SAMPLES = 1797


@functools.lru_cache(maxsize=2)
def _generate_mnist1d(samples: int = MNIST1D_SAMPLES
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Run the mnist1d package's own generator with its default arguments but ``samples``
    signals (its ``num_samples``; cached per size in the process, and in depthscale's cache
    folder between processes: :mod:`depthscale.data.cache`, keyed by the package's version and
    arguments).

    Only ``make_dataset(args)`` is called: no download. That generator seeds Python's and
    numpy's global RNGs itself (seed 42); their states are saved and restored around it so
    loading has no effect on the caller's RNGs. It splits its signals 80/20 into train and
    test after one shuffle, so the default 5000 give the official 4000/1000 set, and another
    size is another draw of the same distribution.
    """
    from mnist1d.data import get_dataset_args, make_dataset

    args = get_dataset_args()
    args.num_samples = samples
    entry = _cache_entry(args)
    train, test = mnist1d_sizes(samples)
    shapes = {"x": (train, MNIST1D_LENGTH), "y": (train,), "x_test": (test, MNIST1D_LENGTH),
              "y_test": (test,)}
    raw = read_arrays(entry, shapes)
    if raw is None:
        py_state, np_state = random.getstate(), np.random.get_state()
        try:
            made = make_dataset(args)
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)
        raw = {k: np.asarray(made[k]) for k in shapes}
        write_arrays(entry, raw)
    arrays = (raw["x"], raw["y"], raw["x_test"], raw["y_test"])
    for array in arrays:
        array.setflags(write=False)  # the cache hands out the same arrays every call
    return arrays


def _cache_entry(args: Any) -> str:
    """The cache entry of the generator's arguments ``args`` under its package version."""
    from importlib.metadata import version

    text = repr(sorted(vars(args).items())) + version("mnist1d")
    return f"mnist1d-{hashlib.sha256(text.encode()).hexdigest()[:16]}.npz"


def mnist1d_sizes(samples: object = MNIST1D_SAMPLES) -> tuple[int, int]:
    """The train and test sizes the generator makes from ``samples`` signals (its 80/20
    split, as it computes it); ConfigError unless ``samples`` is a whole multiple of 10 (one
    tenth per class) of at least 50."""
    n = as_int(samples)
    if n is None or n < 50 or n % 10:
        raise ConfigError(f"mnist1d: option samples must be a whole multiple of 10 (the "
                          f"generator makes samples/10 per class) of at least 50, got "
                          f"{samples!r}")
    train = int(n * MNIST1D_SPLIT)
    return train, n - train


def load_mnist1d(*, seed: int, n_train: int | None, n_test: int | None,
                 samples: int = MNIST1D_SAMPLES) -> Dataset:
    """MNIST-1D: signals of shape (1, 40), 10 classes; 4000 train / 1000 test by default.

    The dataset is *defined* by the mnist1d generator's default arguments, including its own
    seed 42, so ``seed`` does not change it; ``samples`` (default 5000) sets how many signals
    it generates, 80% of them the training set (:func:`mnist1d_sizes`), so that a sweep can
    train a few passes over a larger set. Inputs are standardised with the scalar mean and
    std of the returned training signals. ``n_train``/``n_test`` keep the first samples.
    """
    del seed  # the generator's default seed 42 is part of the dataset's definition
    train, test = mnist1d_sizes(samples)
    check_size("mnist1d", "n_train", n_train, train)
    check_size("mnist1d", "n_test", n_test, test)
    x_train, y_train, x_test, y_test = _generate_mnist1d(train + test)
    x_train, y_train = x_train[:n_train], y_train[:n_train]
    x_test, y_test = x_test[:n_test], y_test[:n_test]
    x_train, x_test = standardise(x_train, x_test)
    return Dataset(
        name="mnist1d",
        x_train=to_tensor(x_train[:, None, :], torch.float32),
        y_train=to_tensor(y_train, torch.int64),
        x_test=to_tensor(x_test[:, None, :], torch.float32),
        y_test=to_tensor(y_test, torch.int64),
        sample_shape=(1, MNIST1D_LENGTH),
        task="classification",
        n_classes=10,
    )


def load_digits(*, seed: int, n_train: int | None, n_test: int | None) -> Dataset:
    """scikit-learn's bundled 8x8 digits (1797 images, 10 classes), split 80/20 by ``seed``.

    Pixels (0..16) are scaled to [0, 1], then standardised with the scalar mean and std of the
    returned training images. The split is a permutation from ``numpy.random.default_rng(seed)``:
    its first 1437 indices are the training set, the last 360 (ceil of 20 %) the test set.
    ``n_train``/``n_test`` keep the first samples of each split.
    """
    from sklearn.datasets import load_digits as sklearn_digits

    n_test_all = math.ceil(0.2 * DIGITS_SAMPLES)
    n_train_all = DIGITS_SAMPLES - n_test_all
    check_size("digits", "n_train", n_train, n_train_all)
    check_size("digits", "n_test", n_test, n_test_all)
    bunch = sklearn_digits()
    x = np.asarray(bunch.data, dtype=np.float64).reshape(-1, 1, 8, 8) / 16.0
    y = np.asarray(bunch.target, dtype=np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    train_idx = order[:n_train_all][:n_train]
    test_idx = order[n_train_all:][:n_test]
    x_train, x_test = standardise(x[train_idx], x[test_idx])
    return Dataset(
        name="digits",
        x_train=to_tensor(x_train, torch.float32),
        y_train=to_tensor(y[train_idx], torch.int64),
        x_test=to_tensor(x_test, torch.float32),
        y_test=to_tensor(y[test_idx], torch.int64),
        sample_shape=(1, 8, 8),
        task="classification",
        n_classes=10,
    )

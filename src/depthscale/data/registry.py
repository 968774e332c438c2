"""The dataset registry: names, one-line descriptions, accepted options, and :func:`load`."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from depthscale.data.bundled import (
    DIGITS_SAMPLES,
    MNIST1D_LENGTH,
    MNIST1D_SAMPLES,
    load_digits,
    load_mnist1d,
    mnist1d_sizes,
)
from depthscale.data.cifar import load_cifar
from depthscale.data.dataset import Dataset, as_int, check_dim, check_size
from depthscale.data.language import check_tokens, load_markov, load_pytext
from depthscale.data.synthetic import load_chizat, load_teacher
from depthscale.errors import ConfigError

__all__ = ["DATASETS", "DATASET_OPTIONS", "DataShape", "data_shape", "load"]


@dataclass(frozen=True)
class _Entry:
    """One registered dataset: its description, loader and the options it accepts."""

    description: str
    loader: Callable[..., Dataset]
    options: tuple[str, ...] = ()
    uses_data_dir: bool = False


_REGISTRY: dict[str, _Entry] = {
    "mnist1d": _Entry(
        "MNIST-1D, generated offline: 4000/1000 signals (1, 40), 10 classes (option "
        "samples=5000: the signals generated, 80% for training)",
        load_mnist1d,
        options=("samples",),
    ),
    "digits": _Entry(
        "scikit-learn 8x8 digits: 1797 images (1, 8, 8), 10 classes, 80/20 split by seed",
        load_digits,
    ),
    "cifar10": _Entry(
        "CIFAR-10 from local python-format files (--data-dir): 50000/10000 images (3, 32, 32)",
        partial(load_cifar, "cifar10"),
        uses_data_dir=True,
    ),
    "cifar100": _Entry(
        "CIFAR-100 (fine labels) from local python-format files (--data-dir): 50000/10000 "
        "images (3, 32, 32)",
        partial(load_cifar, "cifar100"),
        uses_data_dir=True,
    ),
    "teacher": _Entry(
        "synthetic regression: x ~ N(0, I_dim), y from a random 2-layer ReLU teacher "
        "(option dim=16)",
        load_teacher,
        options=("dim",),
    ),
    "chizat": _Entry(
        "Chizat Sec. 2.4: n=10 Gaussian pairs (x, y) in R^dim, test = train (option dim=10)",
        load_chizat,
        options=("dim",),
    ),
    "markov": _Entry(
        "next-token windows of a random order-k Markov chain with exact entropy rate "
        "(options vocab=16, order=1, concentration=0.3, context=32)",
        load_markov,
        options=("vocab", "order", "concentration", "context"),
    ),
    "pytext": _Entry(
        "next-byte windows of the Python standard library's .py files, split by file "
        "(vocab 256; option context=64)",
        load_pytext,
        options=("context",),
    ),
}

DATASETS: dict[str, str] = {name: entry.description for name, entry in _REGISTRY.items()}
#: The dataset-specific options each dataset accepts (besides seed, n_train, n_test).
DATASET_OPTIONS: dict[str, tuple[str, ...]] = {
    name: entry.options for name, entry in _REGISTRY.items()}


def load(
    name: str,
    *,
    data_dir: str | Path | None = None,
    seed: int = 0,
    n_train: int | None = None,
    n_test: int | None = None,
    **options: Any,
) -> Dataset:
    """Load dataset ``name`` (a key of :data:`DATASETS`) into memory.

    ``data_dir`` is only read by the file-based datasets (cifar10, cifar100) and ignored by the
    others. ``seed`` (an int >= 0) drives every random choice through explicit generators; it
    has no effect on mnist1d and cifar. ``n_train``/``n_test`` (positive ints) shrink the splits.
    ``options`` are dataset-specific (:data:`DATASET_OPTIONS`: ``samples`` for mnist1d,
    ``dim`` for teacher and chizat; ``vocab``, ``order``, ``concentration``, ``context`` for
    markov, ``context`` for pytext). Unknown names, unknown options and bad sizes raise
    :class:`~depthscale.errors.ConfigError`; missing or corrupt files raise
    :class:`~depthscale.errors.DataError`.
    """
    entry = _REGISTRY.get(name) if isinstance(name, str) else None
    if entry is None:
        raise ConfigError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASETS)}")
    unknown = sorted(set(options) - set(entry.options))
    if unknown:
        accepted = ", ".join(entry.options) if entry.options else "none"
        raise ConfigError(
            f"{name}: unknown option(s) {', '.join(unknown)}; accepted options: {accepted}"
        )
    seed_value = as_int(seed)
    if seed_value is None or seed_value < 0:
        raise ConfigError(f"{name}: seed must be a non-negative integer, got {seed!r}")
    check_size(name, "n_train", n_train)
    check_size(name, "n_test", n_test)
    if entry.uses_data_dir:
        return entry.loader(data_dir=data_dir, n_train=n_train, n_test=n_test)
    return entry.loader(seed=seed_value, n_train=n_train, n_test=n_test, **options)


@dataclass(frozen=True)
class DataShape:
    """What a model and the size bounds need of a dataset, known without loading it: the
    per-sample input shape, the outputs (classes or targets) and the training examples."""

    sample_shape: tuple[int, ...]
    n_out: int
    n_train: int


def _positive(name: str, option: str, value: object) -> int:
    n = as_int(value)
    if n is None or n < 1:
        raise ConfigError(f"{name}: option {option} must be an integer >= 1, got {value!r}")
    return n


def data_shape(name: str, *, n_train: int | None = None, n_test: int | None = None,
               seed: Any = None, **options: Any) -> DataShape:
    """The :class:`DataShape` of dataset ``name`` with these options, read from what each
    loader documents (nothing is loaded or read); ConfigError for an unknown name or option or
    a bad size, as :func:`load` would raise (``n_test`` and ``seed`` are checked by it)."""
    del seed
    entry = _REGISTRY.get(name) if isinstance(name, str) else None
    if entry is None:
        raise ConfigError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASETS)}")
    unknown = sorted(set(options) - set(entry.options))
    if unknown:
        raise ConfigError(f"{name}: unknown option(s) {', '.join(unknown)}; accepted options: "
                          f"{', '.join(entry.options) or 'none'}")
    check_size(name, "n_train", n_train)
    check_size(name, "n_test", n_test)
    if name in ("teacher", "chizat"):
        dim = check_dim(name, options.get("dim", 16 if name == "teacher" else 10))
        default = 512 if name == "teacher" else 10
        return DataShape((dim,), 1 if name == "teacher" else dim, n_train or default)
    if name in ("markov", "pytext"):
        context = _positive(name, "context", options.get("context", 32 if name == "markov"
                                                                    else 64))
        vocab = _positive(name, "vocab", options.get("vocab", 16)) if name == "markov" else 256
        train, test = (2048, 256) if name == "markov" else (4096, 512)
        check_tokens(name, (n_train or train) + (n_test or test), context)
        return DataShape((context,), vocab, n_train or train)
    if name == "mnist1d":
        train, test = mnist1d_sizes(options.get("samples", MNIST1D_SAMPLES))
        check_size(name, "n_train", n_train, train)
        check_size(name, "n_test", n_test, test)
        return DataShape((1, MNIST1D_LENGTH), 10, n_train or train)
    fixed = {"digits": ((1, 8, 8), 10, DIGITS_SAMPLES - math.ceil(0.2 * DIGITS_SAMPLES)),
             "cifar10": ((3, 32, 32), 10, 50000), "cifar100": ((3, 32, 32), 100, 50000)}
    shape, n_out, available = fixed[name]
    check_size(name, "n_train", n_train, available)
    return DataShape(shape, n_out, n_train or available)

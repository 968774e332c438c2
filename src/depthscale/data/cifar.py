"""CIFAR-10 and CIFAR-100 read from the official "python version" files in a local folder.

Nothing is downloaded and nothing is written. Each file is a pickle of a dict with bytes keys:
``b"data"`` is a uint8 array (N, 3072) whose rows hold 1024 red, then 1024 green, then 1024
blue values of a 32x32 image in row-major order; the labels are a list of ints under
``b"labels"`` (CIFAR-10, 0..9) or ``b"fine_labels"`` (CIFAR-100, 0..99). Files are unpickled
with a restricted unpickler that only rebuilds numpy arrays, so a foreign pickle cannot run code.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from depthscale.data.dataset import Dataset, check_size
from depthscale.errors import DataError

__all__ = ["load_cifar"]

IMAGE_SHAPE = (3, 32, 32)
ROW_LENGTH = 3 * 32 * 32


@dataclass(frozen=True)
class _Layout:
    """Where one CIFAR variant keeps its files and labels."""

    folder: str
    archive: str
    train_files: tuple[str, ...]
    test_file: str
    label_key: bytes
    n_classes: int


_LAYOUTS = {
    "cifar10": _Layout(
        folder="cifar-10-batches-py",
        archive="CIFAR-10 python version",
        train_files=tuple(f"data_batch_{i}" for i in range(1, 6)),
        test_file="test_batch",
        label_key=b"labels",
        n_classes=10,
    ),
    "cifar100": _Layout(
        folder="cifar-100-python",
        archive="CIFAR-100 python version",
        train_files=("train",),
        test_file="test",
        label_key=b"fine_labels",
        n_classes=100,
    ),
}

# numpy array reconstruction is all an official CIFAR pickle needs (plus _codecs.encode and
# bytes, which Python 3 uses to pickle bytes at protocol 2).
_SAFE_GLOBALS = (("_codecs", "encode"), ("__builtin__", "bytes"), ("builtins", "bytes"))
_NUMPY_MODULES = (
    "numpy",
    "numpy.core.multiarray",
    "numpy._core.multiarray",
    "numpy.core.numeric",
    "numpy._core.numeric",
)
_NUMPY_NAMES = ("_reconstruct", "_frombuffer", "ndarray", "dtype", "scalar")


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickler that resolves only numpy array globals and refuses everything else."""

    def find_class(self, module: str, name: str) -> object:
        """Return the allowed global ``module.name`` or raise UnpicklingError."""
        if (module, name) in _SAFE_GLOBALS:
            return super().find_class(module, name)
        if module in _NUMPY_MODULES and name in _NUMPY_NAMES:
            if module.startswith("numpy.core"):  # numpy >= 2 moved numpy.core to numpy._core
                try:
                    return super().find_class("numpy._core" + module[len("numpy.core") :], name)
                except (ImportError, AttributeError):
                    pass
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load global {module}.{name}")


def _how_to_fix(layout: _Layout) -> str:
    """The instructions every 'missing data' message ends with."""
    first = layout.train_files[0]
    return (
        f"download the '{layout.archive}' archive and extract it so that "
        f"DIR/{layout.folder}/{first} exists, then pass --data-dir DIR"
    )


def _find_folder(name: str, layout: _Layout, data_dir: str | Path | None) -> Path:
    """Return the folder holding the batch files: ``data_dir/<folder>`` or ``data_dir`` itself."""
    if data_dir is None:
        raise DataError(f"{name}: no data directory given; {_how_to_fix(layout)}")
    root = Path(data_dir).expanduser()
    if (root / layout.folder).is_dir():
        return root / layout.folder
    if root.is_dir() and (root.name == layout.folder or (root / layout.train_files[0]).exists()):
        return root
    if not root.is_dir():
        raise DataError(
            f"{name}: data directory {root} does not exist or is not a folder; "
            f"{_how_to_fix(layout)}"
        )
    raise DataError(f"{name}: no folder {root / layout.folder}; {_how_to_fix(layout)}")


def _read_batch(name: str, layout: _Layout, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Unpickle and validate one batch file; return (uint8 data (N, 3072), int64 labels (N,))."""
    if not path.is_file():
        raise DataError(
            f"{name}: missing file {path}; the folder is incomplete, {_how_to_fix(layout)}"
        )
    fix = f"re-extract the '{layout.archive}' archive"
    try:
        with path.open("rb") as handle:
            content = _ArrayUnpickler(handle, encoding="bytes").load()
    except Exception as exc:  # corrupt or truncated files fail in many ways
        raise DataError(
            f"{name}: cannot unpickle {path} ({type(exc).__name__}: {exc}); the file is corrupt "
            f"or truncated, {fix}"
        ) from exc
    if not isinstance(content, dict) or b"data" not in content or layout.label_key not in content:
        keys = sorted(map(repr, content)) if isinstance(content, dict) else type(content).__name__
        raise DataError(
            f"{name}: {path} is not a CIFAR batch: expected a dict with keys b'data' and "
            f"{layout.label_key!r}, got {keys}; {fix}"
        )
    data = content[b"data"]
    if (
        not isinstance(data, np.ndarray)
        or data.dtype != np.uint8
        or data.ndim != 2
        or data.shape[0] < 1
        or data.shape[1] != ROW_LENGTH
    ):
        found = f"{data.dtype} {data.shape}" if isinstance(data, np.ndarray) else type(data)
        raise DataError(
            f"{name}: {path}: b'data' must be a uint8 array of shape (N, {ROW_LENGTH}), "
            f"got {found}; {fix}"
        )
    labels = np.asarray(content[layout.label_key])
    if labels.ndim != 1 or labels.dtype.kind not in "iu" or len(labels) != len(data):
        raise DataError(
            f"{name}: {path}: {layout.label_key!r} must be {len(data)} integers (one per "
            f"image), got {labels.dtype} {labels.shape}; {fix}"
        )
    if len(labels) and (labels.min() < 0 or labels.max() >= layout.n_classes):
        raise DataError(
            f"{name}: {path}: labels must lie in 0..{layout.n_classes - 1}, found "
            f"{labels.min()}..{labels.max()}; {fix}"
        )
    return data, labels.astype(np.int64)


def _decode_images(data: np.ndarray) -> np.ndarray:
    """Turn uint8 rows (N, 3072) into images (N, 3, 32, 32): planes R, G, B, each row-major."""
    return data.reshape(-1, *IMAGE_SHAPE)


def _channel_stats(images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact per-channel mean and population std of uint8 images (N, 3, H, W), in pixel units.

    Computed from a 256-bin histogram per channel, so no float copy of the data is needed.
    A zero std (constant channel) is replaced by 1.
    """
    values = np.arange(256, dtype=np.float64)
    means, stds = np.empty(3), np.empty(3)
    for c in range(3):
        counts = np.bincount(images[:, c].ravel(), minlength=256).astype(np.float64)
        total = counts.sum()
        means[c] = counts @ values / total
        stds[c] = np.sqrt(max(counts @ (values - means[c]) ** 2 / total, 0.0))
    return means, np.where(stds > 0, stds, 1.0)


def _normalise(images: np.ndarray, mean: np.ndarray, std: np.ndarray) -> torch.Tensor:
    """Return float32 ``(images - mean[c]) / std[c]`` as a tensor (same as scaling to [0, 1]
    first and standardising then)."""
    out = images.astype(np.float32)
    out -= mean.astype(np.float32).reshape(1, 3, 1, 1)
    out /= std.astype(np.float32).reshape(1, 3, 1, 1)
    return torch.from_numpy(out)


def load_cifar(
    name: str, *, data_dir: str | Path | None, n_train: int | None, n_test: int | None
) -> Dataset:
    """Load ``cifar10`` or ``cifar100`` from the official python-format files under ``data_dir``.

    ``data_dir`` is the folder containing ``cifar-10-batches-py/`` (or ``cifar-100-python/``)
    or that folder itself. Returns float32 images (N, 3, 32, 32) standardised per channel with
    the mean and std of the returned training images; ``n_train``/``n_test`` keep the first
    samples (training batches in order 1..5). Missing, corrupt or malformed files raise
    :class:`~depthscale.errors.DataError` naming the path; nothing is ever written.
    """
    layout = _LAYOUTS[name]
    check_size(name, "n_train", n_train)
    check_size(name, "n_test", n_test)
    folder = _find_folder(name, layout, data_dir)
    train = [_read_batch(name, layout, folder / f) for f in layout.train_files]
    test_data, test_labels = _read_batch(name, layout, folder / layout.test_file)
    train_data = np.concatenate([d for d, _ in train])
    train_labels = np.concatenate([y for _, y in train])
    check_size(name, "n_train", n_train, len(train_labels))
    check_size(name, "n_test", n_test, len(test_labels))
    x_train = _decode_images(train_data[:n_train])
    x_test = _decode_images(test_data[:n_test])
    mean, std = _channel_stats(x_train)
    return Dataset(
        name=name,
        x_train=_normalise(x_train, mean, std),
        y_train=torch.from_numpy(train_labels[:n_train].copy()),
        x_test=_normalise(x_test, mean, std),
        y_test=torch.from_numpy(test_labels[:n_test].copy()),
        sample_shape=IMAGE_SHAPE,
        task="classification",
        n_classes=layout.n_classes,
    )

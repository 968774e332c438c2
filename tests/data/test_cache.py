"""depthscale's cache folder (depthscale.data.cache) and the MNIST-1D signals kept in it: a second
process reads the generator's arrays back instead of running it; a torn, foreign or misshapen
entry is made again; ``off`` and an unwritable folder keep nothing and still give the data."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import mnist1d.data
import numpy as np
import pytest
import torch

from depthscale.data import load
from depthscale.data.bundled import _generate_mnist1d
from depthscale.data.cache import CACHE_ENV, cache_dir, read_arrays, write_arrays


@pytest.fixture
def folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    _generate_mnist1d.cache_clear()
    yield tmp_path / "cache"
    _generate_mnist1d.cache_clear()


def test_the_folder_follows_the_environment(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert cache_dir() == tmp_path
    monkeypatch.setenv(CACHE_ENV, "off")
    assert cache_dir() is None
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "depthscale"


def test_an_entry_is_read_back_only_whole_and_of_its_shapes(folder: Path) -> None:
    a = {"x": np.arange(6.0).reshape(2, 3), "y": np.array([1, 2])}
    assert write_arrays("e.npz", a)
    back = read_arrays("e.npz", {"x": (2, 3), "y": (2,)})
    assert back is not None and all(np.array_equal(back[k], a[k]) for k in a)
    assert read_arrays("e.npz", {"x": (3, 2), "y": (2,)}) is None  # another shape
    assert read_arrays("e.npz", {"x": (2, 3)}) is None  # other keys
    assert read_arrays("none.npz", {"x": (2, 3)}) is None
    raw = (folder / "e.npz").read_bytes()
    (folder / "e.npz").write_bytes(raw[: len(raw) // 2])  # torn
    assert read_arrays("e.npz", {"x": (2, 3), "y": (2,)}) is None


def test_mnist1d_is_generated_once_then_read_from_the_cache(
        folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = load("mnist1d")
    (entry,) = folder.iterdir()
    assert entry.name.startswith("mnist1d-") and entry.suffix == ".npz"

    def forbidden(*args: object) -> None:
        raise AssertionError("the generator ran although its arrays were kept")

    monkeypatch.setattr(mnist1d.data, "make_dataset", forbidden)
    _generate_mnist1d.cache_clear()  # as a new process: only the folder is left
    again = load("mnist1d")
    assert torch.equal(first.x_train, again.x_train) and torch.equal(first.y_test, again.y_test)
    entry.write_bytes(b"not an npz")  # a broken entry is made again, and rewritten
    monkeypatch.undo()
    monkeypatch.setenv(CACHE_ENV, str(folder))
    _generate_mnist1d.cache_clear()
    remade = load("mnist1d")
    assert torch.equal(first.x_train, remade.x_train)
    assert read_arrays(entry.name, {"x": (4000, 40), "y": (4000,), "x_test": (1000, 40),
                                    "y_test": (1000,)}) is not None


def test_off_or_an_unwritable_folder_keeps_nothing_and_still_gives_the_data(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("a file where the folder would be")
    for value in ("off", str(blocked / "cache")):
        monkeypatch.setenv(CACHE_ENV, value)
        _generate_mnist1d.cache_clear()
        assert load("mnist1d", n_train=10).x_train.shape == (10, 1, 40)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
    _generate_mnist1d.cache_clear()

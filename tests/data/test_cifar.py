"""CIFAR-10/100 from tiny files written in the official python format; errors name the path."""

from __future__ import annotations

import collections
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from depthscale.data import load
from depthscale.data.cifar import _decode_images
from depthscale.errors import ConfigError, DataError

PER_BATCH, N_TEST = 4, 3


def _write(path: Path, content: object, protocol: int = 2) -> None:
    path.write_bytes(pickle.dumps(content, protocol=protocol))


def _batch(rng: np.random.Generator, n: int, label_key: bytes, n_classes: int) -> dict:
    return {
        b"batch_label": b"tiny batch",
        b"data": rng.integers(0, 256, size=(n, 3072), dtype=np.uint8),
        label_key: [int(v) for v in rng.integers(0, n_classes, size=n)],
        b"filenames": [b"img_%d.png" % i for i in range(n)],
    }


def write_cifar10(root: Path, seed: int = 0, protocol: int = 2) -> tuple[dict, list[dict]]:
    """Write 5 training batches of 4 images and a test batch of 3 under root/cifar-10-batches-py."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    train = [_batch(rng, PER_BATCH, b"labels", 10) for _ in range(5)]
    for i, batch in enumerate(train, start=1):
        _write(folder / f"data_batch_{i}", batch, protocol)
    test = _batch(rng, N_TEST, b"labels", 10)
    _write(folder / "test_batch", test, protocol)
    return test, train


def write_cifar100(root: Path, seed: int = 0) -> tuple[dict, dict]:
    """Write a train file of 6 images and a test file of 3 under root/cifar-100-python."""
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    train, test = _batch(rng, 6, b"fine_labels", 100), _batch(rng, N_TEST, b"fine_labels", 100)
    for content in (train, test):
        content[b"coarse_labels"] = [v // 5 for v in content[b"fine_labels"]]
    _write(folder / "train", train)
    _write(folder / "test", test)
    return train, test


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under root with its size and modification time."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


def channel_stats(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    images = raw.reshape(-1, 3, 32, 32).astype(np.float64)
    return images.mean(axis=(0, 2, 3)), images.std(axis=(0, 2, 3))


def test_decode_images_puts_each_plane_pixel_at_channel_row_col() -> None:
    data = np.zeros((3, 3072), dtype=np.uint8)
    data[1, 32 * 5 + 7] = 200  # red plane, row 5, col 7 of image 1
    data[2, 1024 + 32 * 31 + 0] = 17  # green plane, row 31, col 0 of image 2
    data[0, 2048 + 32 * 0 + 31] = 99  # blue plane, row 0, col 31 of image 0
    images = _decode_images(data)
    assert images.shape == (3, 3, 32, 32)
    assert images[1, 0, 5, 7] == 200 and images[2, 1, 31, 0] == 17 and images[0, 2, 0, 31] == 99
    assert int(images.astype(np.int64).sum()) == 200 + 17 + 99


@pytest.mark.parametrize("protocol", [2, 5])
def test_cifar10_loads_shapes_and_exact_labels(tmp_path: Path, protocol: int) -> None:
    test, train = write_cifar10(tmp_path, protocol=protocol)
    ds = load("cifar10", data_dir=tmp_path)
    assert ds.x_train.shape == (20, 3, 32, 32) and ds.x_test.shape == (3, 3, 32, 32)
    assert ds.x_train.dtype == torch.float32 and ds.y_train.dtype == torch.int64
    assert ds.sample_shape == (3, 32, 32) and ds.n_classes == 10 and ds.input_dim == 3072
    assert ds.y_train.tolist() == [v for b in train for v in b[b"labels"]]
    assert ds.y_test.tolist() == test[b"labels"]


def test_cifar_reads_pickles_that_name_numpy_core_as_old_numpy_wrote_them(tmp_path: Path) -> None:
    test, _ = write_cifar10(tmp_path)
    path = tmp_path / "cifar-10-batches-py" / "test_batch"
    blob = pickle.dumps(test, protocol=2)
    assert b"numpy._core.multiarray" in blob
    path.write_bytes(blob.replace(b"numpy._core.multiarray", b"numpy.core.multiarray"))
    assert load("cifar10", data_dir=tmp_path).y_test.tolist() == test[b"labels"]


def test_cifar10_accepts_the_batches_folder_itself(tmp_path: Path) -> None:
    write_cifar10(tmp_path)
    by_parent = load("cifar10", data_dir=tmp_path)
    by_folder = load("cifar10", data_dir=str(tmp_path / "cifar-10-batches-py"))
    assert torch.equal(by_parent.x_train, by_folder.x_train)
    assert torch.equal(by_parent.y_test, by_folder.y_test)


def test_cifar10_pixel_layout_survives_loading(tmp_path: Path) -> None:
    _, train = write_cifar10(tmp_path)
    train[2][b"data"][1, 32 * 5 + 7] = 250  # image 1 of batch 3 -> overall index 9, red (5, 7)
    _write(tmp_path / "cifar-10-batches-py" / "data_batch_3", train[2])
    raw = np.concatenate([b[b"data"] for b in train])
    mean, std = channel_stats(raw)
    ds = load("cifar10", data_dir=tmp_path)
    assert float(ds.x_train[9, 0, 5, 7]) == pytest.approx((250 - mean[0]) / std[0], rel=1e-5)
    expected = (raw.reshape(-1, 3, 32, 32) - mean[None, :, None, None]) / std[None, :, None, None]
    np.testing.assert_allclose(ds.x_train.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_cifar10_is_standardised_per_channel_with_train_statistics(tmp_path: Path) -> None:
    test, train = write_cifar10(tmp_path)
    ds = load("cifar10", data_dir=tmp_path)
    per_channel = ds.x_train.transpose(0, 1).reshape(3, -1).double()
    np.testing.assert_allclose(per_channel.mean(dim=1).numpy(), 0.0, atol=1e-5)
    np.testing.assert_allclose(per_channel.std(dim=1, unbiased=False).numpy(), 1.0, atol=1e-5)
    mean, std = channel_stats(np.concatenate([b[b"data"] for b in train]))
    raw_test = test[b"data"].reshape(-1, 3, 32, 32)
    expected = (raw_test - mean[None, :, None, None]) / std[None, :, None, None]
    np.testing.assert_allclose(ds.x_test.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_cifar10_n_train_n_test_take_the_first_samples(tmp_path: Path) -> None:
    test, train = write_cifar10(tmp_path)
    ds = load("cifar10", data_dir=tmp_path, n_train=6, n_test=2)
    assert ds.x_train.shape == (6, 3, 32, 32) and ds.x_test.shape == (2, 3, 32, 32)
    assert ds.y_train.tolist() == (train[0][b"labels"] + train[1][b"labels"])[:6]
    assert ds.y_test.tolist() == test[b"labels"][:2]
    mean, std = channel_stats(np.concatenate([train[0][b"data"], train[1][b"data"][:2]]))
    assert float(ds.x_train[0, 1, 0, 0]) == pytest.approx(
        (int(train[0][b"data"][0, 1024]) - mean[1]) / std[1], rel=1e-5, abs=1e-6
    )
    with pytest.raises(ConfigError, match="20"):
        load("cifar10", data_dir=tmp_path, n_train=21)


def test_cifar100_loads_fine_labels(tmp_path: Path) -> None:
    train, test = write_cifar100(tmp_path)
    for data_dir in (tmp_path, tmp_path / "cifar-100-python"):
        ds = load("cifar100", data_dir=data_dir)
        assert ds.x_train.shape == (6, 3, 32, 32) and ds.x_test.shape == (3, 3, 32, 32)
        assert ds.n_classes == 100 and ds.n_out == 100
        assert ds.y_train.tolist() == train[b"fine_labels"]
        assert ds.y_test.tolist() == test[b"fine_labels"]
        per_channel = ds.x_train.transpose(0, 1).reshape(3, -1).double()
        np.testing.assert_allclose(per_channel.mean(dim=1).numpy(), 0.0, atol=1e-5)


def test_cifar_loading_writes_nothing(tmp_path: Path) -> None:
    write_cifar10(tmp_path)
    write_cifar100(tmp_path)
    before = snapshot(tmp_path)
    load("cifar10", data_dir=tmp_path)
    load("cifar100", data_dir=tmp_path)
    assert snapshot(tmp_path) == before


# ---- failures: DataError naming the offending path, and nothing written -------------------


def _expect_data_error(data_dir: Path | None, needle: str, root: Path) -> str:
    before = snapshot(root)
    with pytest.raises(DataError) as info:
        load("cifar10", data_dir=data_dir)
    message = str(info.value)
    assert needle in message, message
    assert snapshot(root) == before
    return message


def test_cifar_without_data_dir_says_how_to_get_the_data() -> None:
    with pytest.raises(DataError) as info:
        load("cifar10")
    message = str(info.value)
    assert "--data-dir" in message and "CIFAR-10 python version" in message
    with pytest.raises(DataError, match="cifar-100-python/train"):
        load("cifar100")


def test_cifar_missing_folder(tmp_path: Path) -> None:
    message = _expect_data_error(tmp_path, str(tmp_path / "cifar-10-batches-py"), tmp_path)
    assert "data_batch_1" in message and "--data-dir" in message


def test_cifar_data_dir_that_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    _expect_data_error(missing, str(missing), tmp_path)
    assert not missing.exists()


def test_cifar_missing_batch_file(tmp_path: Path) -> None:
    write_cifar10(tmp_path)
    gone = tmp_path / "cifar-10-batches-py" / "data_batch_3"
    gone.unlink()
    _expect_data_error(tmp_path, str(gone), tmp_path)


def test_cifar_missing_test_file(tmp_path: Path) -> None:
    write_cifar10(tmp_path)
    gone = tmp_path / "cifar-10-batches-py" / "test_batch"
    gone.unlink()
    _expect_data_error(tmp_path, str(gone), tmp_path)


def test_cifar_corrupt_file_of_random_bytes(tmp_path: Path) -> None:
    write_cifar10(tmp_path)
    bad = tmp_path / "cifar-10-batches-py" / "data_batch_2"
    bad.write_bytes(os.urandom(4096))
    message = _expect_data_error(tmp_path, str(bad), tmp_path)
    assert "corrupt" in message


def test_cifar_truncated_file(tmp_path: Path) -> None:
    write_cifar10(tmp_path)
    bad = tmp_path / "cifar-10-batches-py" / "test_batch"
    bad.write_bytes(bad.read_bytes()[:5000])
    _expect_data_error(tmp_path, str(bad), tmp_path)


def test_cifar_refuses_pickles_that_reference_other_globals(tmp_path: Path) -> None:
    test, _ = write_cifar10(tmp_path)
    bad = tmp_path / "cifar-10-batches-py" / "test_batch"
    _write(bad, collections.OrderedDict(test))
    _expect_data_error(tmp_path, str(bad), tmp_path)


@pytest.mark.parametrize(
    "data",
    [
        np.zeros((4, 3071), dtype=np.uint8),
        np.zeros((4, 3, 32, 32), dtype=np.uint8),
        np.zeros((4, 3072), dtype=np.float32),
        np.zeros((0, 3072), dtype=np.uint8),
        [[0] * 3072] * 4,
    ],
    ids=["short-rows", "4d", "float32", "empty", "list"],
)
def test_cifar_wrong_data_shape_or_dtype(tmp_path: Path, data: object) -> None:
    _, train = write_cifar10(tmp_path)
    bad = tmp_path / "cifar-10-batches-py" / "data_batch_4"
    _write(bad, {**train[3], b"data": data})
    message = _expect_data_error(tmp_path, str(bad), tmp_path)
    assert "(N, 3072)" in message


@pytest.mark.parametrize(
    "labels",
    [[0, 1, 2, 10], [0, -1, 2, 3], [0, 1, 2], [0, 1, 2, 3, 4], [0.0, 1.0, 2.0, 3.0]],
    ids=["too-large", "negative", "too-few", "too-many", "floats"],
)
def test_cifar_bad_labels(tmp_path: Path, labels: list) -> None:
    _, train = write_cifar10(tmp_path)
    bad = tmp_path / "cifar-10-batches-py" / "data_batch_5"
    _write(bad, {**train[4], b"labels": labels})
    _expect_data_error(tmp_path, str(bad), tmp_path)


def test_cifar_missing_label_key(tmp_path: Path) -> None:
    _, train = write_cifar10(tmp_path)
    bad = tmp_path / "cifar-10-batches-py" / "data_batch_1"
    _write(bad, {b"data": train[0][b"data"], b"fine_labels": train[0][b"labels"]})
    message = _expect_data_error(tmp_path, str(bad), tmp_path)
    assert "b'labels'" in message


def test_cifar100_bad_fine_labels(tmp_path: Path) -> None:
    train, _ = write_cifar100(tmp_path)
    bad = tmp_path / "cifar-100-python" / "train"
    _write(bad, {**train, b"fine_labels": [100] * 6})
    with pytest.raises(DataError, match=r"0\.\.99") as info:
        load("cifar100", data_dir=tmp_path)
    assert str(bad) in str(info.value)

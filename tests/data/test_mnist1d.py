"""MNIST-1D: generated offline with the package's default arguments, standardised, cached."""

from __future__ import annotations

import random
import socket
import urllib.request

import mnist1d.data
import mnist1d.utils
import numpy as np
import pytest
import requests
import torch

from depthscale.data import load
from depthscale.data.bundled import _generate_mnist1d
from depthscale.errors import ConfigError


def test_mnist1d_has_official_split_sizes_shape_and_ten_classes() -> None:
    ds = load("mnist1d")
    assert ds.x_train.shape == (4000, 1, 40) and ds.x_test.shape == (1000, 1, 40)
    assert ds.y_train.shape == (4000,) and ds.y_test.shape == (1000,)
    assert ds.x_train.dtype == torch.float32 and ds.y_train.dtype == torch.int64
    assert ds.sample_shape == (1, 40) and ds.input_dim == 40
    assert ds.task == "classification" and ds.n_classes == 10 and ds.n_out == 10
    for y in (ds.y_train, ds.y_test):
        assert int(y.min()) >= 0 and int(y.max()) <= 9
    assert set(ds.y_train.tolist()) == set(range(10))


def test_mnist1d_train_inputs_have_mean_zero_std_one() -> None:
    ds = load("mnist1d")
    assert abs(float(ds.x_train.mean())) < 1e-5
    assert abs(float(ds.x_train.std(unbiased=False)) - 1.0) < 1e-4


def test_mnist1d_is_identical_across_loads_and_seeds() -> None:
    a, b, c = load("mnist1d"), load("mnist1d"), load("mnist1d", seed=7)
    for other in (b, c):
        assert torch.equal(a.x_train, other.x_train) and torch.equal(a.y_train, other.y_train)
        assert torch.equal(a.x_test, other.x_test) and torch.equal(a.y_test, other.y_test)


def test_mnist1d_returned_tensors_do_not_share_memory_with_the_cache() -> None:
    first = load("mnist1d")
    original = first.x_train.clone()
    first.x_train.zero_()
    first.y_train.zero_()
    again = load("mnist1d")
    assert torch.equal(again.x_train, original)
    assert int(again.y_train.max()) == 9


def test_mnist1d_subset_keeps_first_samples_and_rejects_too_many() -> None:
    full, small = load("mnist1d"), load("mnist1d", n_train=100, n_test=50)
    assert small.x_train.shape == (100, 1, 40) and small.x_test.shape == (50, 1, 40)
    assert torch.equal(small.y_train, full.y_train[:100])
    assert torch.equal(small.y_test, full.y_test[:50])
    with pytest.raises(ConfigError, match="4000"):
        load("mnist1d", n_train=4001)
    with pytest.raises(ConfigError, match="1000"):
        load("mnist1d", n_test=1001)


def test_mnist1d_generation_never_downloads_or_touches_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("network or file access during mnist1d generation")

    monkeypatch.setattr(mnist1d.data, "get_dataset", forbidden)
    monkeypatch.setattr(mnist1d.data, "from_pickle", forbidden)
    monkeypatch.setattr(mnist1d.data, "to_pickle", forbidden)
    monkeypatch.setattr(mnist1d.utils, "from_pickle", forbidden)
    monkeypatch.setattr(mnist1d.utils, "to_pickle", forbidden)
    monkeypatch.setattr(requests, "get", forbidden)
    monkeypatch.setattr(requests.Session, "request", forbidden)
    monkeypatch.setattr(urllib.request, "urlopen", forbidden)
    monkeypatch.setattr(socket.socket, "connect", forbidden)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEPTHSCALE_CACHE", "off")  # no cache folder either
    _generate_mnist1d.cache_clear()  # force a real generation under the patches
    ds = load("mnist1d")
    assert ds.x_train.shape == (4000, 1, 40)
    assert list(tmp_path.iterdir()) == []


def test_mnist1d_generation_leaves_global_rng_state_untouched(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEPTHSCALE_CACHE", "off")  # a real generation
    random.seed(123)
    np.random.seed(123)
    expected_py, expected_np = random.random(), np.random.rand()
    random.seed(123)
    np.random.seed(123)
    _generate_mnist1d.cache_clear()
    load("mnist1d")
    assert random.random() == expected_py
    assert np.random.rand() == expected_np


def test_mnist1d_samples_generates_a_larger_set_split_as_the_generator_does() -> None:
    from depthscale.data.bundled import mnist1d_sizes
    from depthscale.data.registry import data_shape

    assert mnist1d_sizes() == (4000, 1000) and mnist1d_sizes(12340) == (9872, 2468)
    default, explicit = load("mnist1d"), load("mnist1d", samples=5000)
    assert torch.equal(default.x_train, explicit.x_train)
    big = load("mnist1d", samples=6000, n_test=100)
    assert big.x_train.shape == (4800, 1, 40) and big.x_test.shape == (100, 1, 40)
    assert set(big.y_train.tolist()) == set(range(10))
    assert abs(float(big.x_train.mean())) < 1e-5  # standardised on its own training set
    assert not torch.equal(big.x_train[:4000], default.x_train)  # another draw, same law
    assert data_shape("mnist1d", samples=6000).n_train == 4800
    assert data_shape("mnist1d").n_train == 4000
    with pytest.raises(ConfigError, match="4800"):
        load("mnist1d", samples=6000, n_train=4801)
    for bad in (4995, 40, 5000.0, True):
        with pytest.raises(ConfigError, match="multiple of 10"):
            load("mnist1d", samples=bad)
        with pytest.raises(ConfigError, match="multiple of 10"):
            data_shape("mnist1d", samples=bad)

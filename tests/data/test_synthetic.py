"""Synthetic regression: the random ReLU teacher and Chizat's Gaussian pairs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from depthscale.data import load
from depthscale.errors import ConfigError


def test_teacher_default_shapes() -> None:
    ds = load("teacher")
    assert ds.x_train.shape == (512, 16) and ds.x_test.shape == (512, 16)
    assert ds.y_train.shape == (512, 1) and ds.y_test.shape == (512, 1)
    assert ds.task == "regression" and ds.n_classes is None
    assert ds.n_out == 1 and ds.input_dim == 16 and ds.sample_shape == (16,)
    assert ds.y_train.dtype == torch.float32


def test_teacher_dim_and_sizes_options() -> None:
    ds = load("teacher", dim=5, n_train=30, n_test=7)
    assert ds.x_train.shape == (30, 5) and ds.x_test.shape == (7, 5)
    assert ds.y_train.shape == (30, 1) and ds.sample_shape == (5,)


def test_teacher_targets_follow_the_documented_two_layer_relu_formula() -> None:
    seed, d, k = 4, 6, 8
    ds = load("teacher", seed=seed, dim=d, n_train=20, n_test=10)
    teacher_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(3)[0])
    w = teacher_rng.standard_normal((k, d))
    a = teacher_rng.standard_normal(k)
    for x, y in ((ds.x_train, ds.y_train), (ds.x_test, ds.y_test)):
        x64 = x.double().numpy()
        expected = np.maximum(x64 @ w.T / np.sqrt(d), 0.0) @ a / np.sqrt(k)
        np.testing.assert_allclose(y[:, 0].numpy(), expected, rtol=1e-5, atol=1e-5)


def test_teacher_is_deterministic_by_seed_and_seeds_differ() -> None:
    a, b, c = load("teacher", seed=1), load("teacher", seed=1), load("teacher", seed=2)
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.y_test, b.y_test)
    assert not torch.equal(a.x_train, c.x_train) and not torch.equal(a.y_train, c.y_train)


def test_teacher_n_train_changes_neither_teacher_nor_test_set() -> None:
    small, large = load("teacher", seed=3, n_train=10), load("teacher", seed=3, n_train=100)
    assert torch.equal(small.x_test, large.x_test) and torch.equal(small.y_test, large.y_test)
    assert torch.equal(small.x_train, large.x_train[:10])


def test_chizat_default_shapes_and_test_equals_train() -> None:
    ds = load("chizat")
    assert ds.x_train.shape == (10, 10) and ds.y_train.shape == (10, 10)
    assert ds.sample_shape == (10,) and ds.n_out == 10 and ds.n_classes is None
    assert torch.equal(ds.x_test, ds.x_train) and torch.equal(ds.y_test, ds.y_train)
    assert ds.x_test.data_ptr() != ds.x_train.data_ptr()  # a copy, not an alias


def test_chizat_dim_and_n_train_options() -> None:
    ds = load("chizat", dim=4, n_train=6)
    assert ds.x_train.shape == (6, 4) and ds.y_test.shape == (6, 4)
    assert load("chizat", n_train=6, n_test=6).x_test.shape == (6, 10)


def test_chizat_is_deterministic_by_seed_and_seeds_differ() -> None:
    a, b, c = load("chizat", seed=0), load("chizat", seed=0), load("chizat", seed=1)
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.y_train, b.y_train)
    assert not torch.equal(a.x_train, c.x_train) and not torch.equal(a.y_train, c.y_train)


def test_chizat_rejects_a_test_size_different_from_train() -> None:
    with pytest.raises(ConfigError, match="n_test"):
        load("chizat", n_train=10, n_test=5)


@pytest.mark.parametrize("name", ["teacher", "chizat"])
@pytest.mark.parametrize("dim", [0, -3, 2.5, True])
def test_synthetic_rejects_bad_dim(name: str, dim: object) -> None:
    with pytest.raises(ConfigError, match="dim"):
        load(name, dim=dim)

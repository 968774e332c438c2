"""sklearn digits: 8x8 images, 80/20 split by a seeded permutation, train-standardised."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from depthscale.data import load
from depthscale.errors import ConfigError


def test_digits_shapes_and_split_sizes_sum_to_1797() -> None:
    ds = load("digits")
    assert ds.x_train.shape == (1437, 1, 8, 8) and ds.x_test.shape == (360, 1, 8, 8)
    assert ds.y_train.shape == (1437,) and ds.y_test.shape == (360,)
    assert len(ds.y_train) + len(ds.y_test) == 1797
    assert ds.sample_shape == (1, 8, 8) and ds.input_dim == 64 and ds.n_out == 10
    assert ds.x_train.dtype == torch.float32 and ds.y_train.dtype == torch.int64


def test_digits_split_is_a_partition_of_all_labels() -> None:
    ds = load("digits", seed=3)
    labels = torch.cat([ds.y_train, ds.y_test]).numpy()
    np.testing.assert_array_equal(np.bincount(labels), np.bincount(load_digits().target))


def test_digits_train_inputs_have_scalar_mean_zero_std_one() -> None:
    ds = load("digits")
    assert abs(float(ds.x_train.mean())) < 1e-5
    assert abs(float(ds.x_train.std(unbiased=False)) - 1.0) < 1e-4


def test_digits_same_seed_gives_same_split() -> None:
    a, b = load("digits", seed=5), load("digits", seed=5)
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.y_train, b.y_train)
    assert torch.equal(a.x_test, b.x_test) and torch.equal(a.y_test, b.y_test)


def test_digits_different_seed_gives_different_split() -> None:
    a, b = load("digits", seed=0), load("digits", seed=1)
    assert not torch.equal(a.y_train, b.y_train)
    assert not torch.equal(a.x_test, b.x_test)


def test_digits_subset_sizes_and_limits() -> None:
    full, small = load("digits", seed=2), load("digits", seed=2, n_train=100, n_test=20)
    assert small.x_train.shape == (100, 1, 8, 8) and small.x_test.shape == (20, 1, 8, 8)
    assert torch.equal(small.y_train, full.y_train[:100])
    with pytest.raises(ConfigError, match="1437"):
        load("digits", n_train=1438)
    with pytest.raises(ConfigError, match="360"):
        load("digits", n_test=361)

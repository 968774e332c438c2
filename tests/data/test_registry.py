"""The registry: names, descriptions, option and size validation, and Dataset invariants."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from depthscale.data import DATASETS, Dataset, load
from depthscale.errors import ConfigError, DataError

NAMES = ["mnist1d", "digits", "cifar10", "cifar100", "teacher", "chizat", "markov", "pytext"]


def test_datasets_lists_every_name_with_a_one_line_description() -> None:
    assert list(DATASETS) == NAMES
    for description in DATASETS.values():
        assert description and "\n" not in description


def test_unknown_dataset_name_is_a_config_error_listing_known_names() -> None:
    with pytest.raises(ConfigError) as info:
        load("imagenet")
    for name in NAMES:
        assert name in str(info.value)
    assert "imagenet" in str(info.value)


@pytest.mark.parametrize(
    ("name", "accepted"),
    [("teacher", "dim"), ("chizat", "dim"), ("mnist1d", "samples"), ("digits", "none")],
)
def test_unknown_option_is_a_config_error_naming_accepted_options(name: str, accepted: str) -> None:
    with pytest.raises(ConfigError, match=f"width.*accepted options: {accepted}"):
        load(name, width=3)


def test_unknown_option_for_cifar_is_rejected_before_touching_files(tmp_path) -> None:
    with pytest.raises(ConfigError, match="accepted options: none"):
        load("cifar10", data_dir=tmp_path, dim=3)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("field", ["n_train", "n_test"])
@pytest.mark.parametrize("value", [0, -1, 2.5, True])
def test_sizes_below_one_or_not_integers_are_config_errors(
    name: str, field: str, value: object
) -> None:
    with pytest.raises(ConfigError, match=field):
        load(name, **{field: value})


def test_numpy_integers_are_accepted_for_sizes_and_seed() -> None:
    ds = load("teacher", seed=np.int64(3), n_train=np.int32(5), n_test=np.int64(2), dim=np.int8(4))
    assert ds.x_train.shape == (5, 4) and ds.x_test.shape == (2, 4)
    assert torch.equal(ds.x_train, load("teacher", seed=3, n_train=5, dim=4).x_train)


@pytest.mark.parametrize("seed", [-1, 1.5, "0", None])
def test_bad_seed_is_a_config_error(seed: object) -> None:
    with pytest.raises(ConfigError, match="seed"):
        load("teacher", seed=seed)


def test_dataset_properties_for_classification_and_regression() -> None:
    cls = Dataset(
        name="toy",
        x_train=torch.zeros(4, 3, 2, 2),
        y_train=torch.zeros(4, dtype=torch.int64),
        x_test=torch.zeros(2, 3, 2, 2),
        y_test=torch.zeros(2, dtype=torch.int64),
        sample_shape=(3, 2, 2),
        task="classification",
        n_classes=7,
    )
    assert cls.n_out == 7 and cls.input_dim == 12
    reg = Dataset(
        name="toy",
        x_train=torch.zeros(4, 5),
        y_train=torch.zeros(4, 3),
        x_test=torch.zeros(2, 5),
        y_test=torch.zeros(2, 3),
        sample_shape=(5,),
        task="regression",
        n_classes=None,
    )
    assert reg.n_out == 3 and reg.input_dim == 5


@pytest.mark.parametrize(
    "change",
    [
        {"sample_shape": (4,)},
        {"task": "ranking"},
        {"n_classes": 3},
        {"y_train": torch.zeros(3, 1)},
        {"y_test": torch.zeros(2, dtype=torch.int64)},
        {"x_train": torch.zeros(4, 5, dtype=torch.float64)},
    ],
)
def test_inconsistent_dataset_is_a_data_error(change: dict[str, object]) -> None:
    fields: dict[str, object] = {
        "name": "toy",
        "x_train": torch.zeros(4, 5),
        "y_train": torch.zeros(4, 1),
        "x_test": torch.zeros(2, 5),
        "y_test": torch.zeros(2, 1),
        "sample_shape": (5,),
        "task": "regression",
        "n_classes": None,
    }
    with pytest.raises(DataError, match="toy"):
        Dataset(**{**fields, **change})  # type: ignore[arg-type]

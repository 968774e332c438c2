"""Dataset construction rejects data that would fail or mislead mid-training: empty splits,
labels outside [0, n_classes), non-finite inputs or targets, bad token ids; token inputs work."""

from __future__ import annotations

import pytest
import torch

from depthscale.data import Dataset
from depthscale.errors import DataError


def _classification(**change: object) -> Dataset:
    fields: dict[str, object] = {
        "name": "toy",
        "x_train": torch.zeros(6, 4),
        "y_train": torch.tensor([0, 1, 2, 0, 1, 2]),
        "x_test": torch.zeros(3, 4),
        "y_test": torch.tensor([2, 1, 0]),
        "sample_shape": (4,),
        "task": "classification",
        "n_classes": 3,
    }
    return Dataset(**{**fields, **change})  # type: ignore[arg-type]


def _regression(**change: object) -> Dataset:
    fields: dict[str, object] = {
        "name": "toy",
        "x_train": torch.zeros(5, 2),
        "y_train": torch.zeros(5, 1),
        "x_test": torch.zeros(2, 2),
        "y_test": torch.zeros(2, 1),
        "sample_shape": (2,),
        "task": "regression",
        "n_classes": None,
    }
    return Dataset(**{**fields, **change})  # type: ignore[arg-type]


def _tokens(**change: object) -> Dataset:
    g = torch.Generator().manual_seed(0)
    x_train, x_test = torch.randint(0, 5, (8, 4), generator=g), torch.randint(0, 5, (3, 4),
                                                                               generator=g)
    fields: dict[str, object] = {
        "name": "tokens",
        "x_train": x_train,
        "y_train": x_train.roll(-1, dims=1),  # next-token targets
        "x_test": x_test,
        "y_test": x_test.roll(-1, dims=1),
        "sample_shape": (4,),
        "task": "classification",
        "n_classes": 5,
        "vocab_size": 5,
    }
    return Dataset(**{**fields, **change})  # type: ignore[arg-type]


@pytest.mark.parametrize("split", ["train", "test"])
def test_an_empty_split_is_a_data_error_naming_it(split: str) -> None:
    with pytest.raises(DataError) as info:
        _classification(**{f"x_{split}": torch.zeros(0, 4),
                            f"y_{split}": torch.zeros(0, dtype=torch.int64)})
    msg = str(info.value)
    assert "'toy'" in msg and f"the {split} split has 0 samples" in msg and "n_train" in msg


@pytest.mark.parametrize(
    ("labels", "found"),
    [([0, 1, 3, 0, 5, 2], "2 value(s) do not (min 0, max 5)"),
     ([0, -1, 2, 0, 1, 2], "1 value(s) do not (min -1, max 2)")],
)
def test_labels_outside_the_classes_are_a_data_error_with_count_and_fix(
    labels: list[int], found: str
) -> None:
    with pytest.raises(DataError) as info:
        _classification(y_train=torch.tensor(labels))
    msg = str(info.value)
    assert "'toy'" in msg and "y_train labels must lie in 0..2 (n_classes=3)" in msg
    assert found in msg
    if min(labels) >= 0:
        assert "set n_classes to at least 6" in msg


def test_a_test_label_outside_the_classes_names_the_test_split() -> None:
    with pytest.raises(DataError, match=r"y_test labels must lie in 0\.\.2"):
        _classification(y_test=torch.tensor([2, 3, 0]))


@pytest.mark.parametrize("n_classes", [0, -2, 2.5, True])
def test_a_class_count_below_one_or_not_an_int_is_a_data_error(n_classes: object) -> None:
    with pytest.raises(DataError, match="n_classes"):
        _classification(n_classes=n_classes)


def test_non_finite_inputs_are_counted_per_split() -> None:
    x = torch.zeros(6, 4)
    x[1, 0], x[1, 3], x[4, 2] = float("nan"), float("inf"), float("-inf")
    with pytest.raises(DataError) as info:
        _classification(x_train=x)
    msg = str(info.value)
    assert "'toy'" in msg and "x_train has 3 non-finite value(s) (NaN or inf) in 2 sample(s)" in msg
    assert "the first at sample 1" in msg
    x_test = torch.zeros(3, 4)
    x_test[2, 1] = float("nan")
    with pytest.raises(DataError, match=r"x_test has 1 non-finite value\(s\) .* in 1 sample"):
        _classification(x_test=x_test)


def test_non_finite_regression_targets_are_a_data_error() -> None:
    y = torch.zeros(5, 1)
    y[3, 0] = float("nan")
    with pytest.raises(DataError, match=r"y_train has 1 non-finite value\(s\).*sample 3"):
        _regression(y_train=y)


def test_token_inputs_with_per_sample_or_per_position_labels_are_accepted() -> None:
    per_position = _tokens()
    assert per_position.n_out == 5 and per_position.input_dim == 4
    assert per_position.x_train.dtype == torch.int64
    per_sample = _tokens(y_train=torch.tensor([0, 1, 2, 3, 4, 0, 1, 2]),
                         y_test=torch.tensor([4, 3, 2]))
    assert per_sample.y_train.shape == (8,)
    no_vocab = _tokens(vocab_size=None)  # ids only need to be >= 0 then
    assert no_vocab.vocab_size is None


def test_token_ids_outside_the_vocabulary_are_a_data_error() -> None:
    x = torch.tensor([[0, 1, 2, 7]] * 8)
    with pytest.raises(DataError) as info:
        _tokens(x_train=x, y_train=torch.zeros(8, 4, dtype=torch.int64))
    msg = str(info.value)
    assert "x_train token ids must lie in 0..4 (vocab_size=5)" in msg
    assert "8 value(s) do not (min 0, max 7)" in msg and "set vocab_size to at least 8" in msg
    with pytest.raises(DataError, match=r"x_train token ids must lie in >= 0"):
        _tokens(x_train=-x, y_train=torch.zeros(8, 4, dtype=torch.int64), vocab_size=None)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"vocab_size": 0}, "vocab_size=0"),
        ({"y_train": torch.zeros(8, 3, dtype=torch.int64)}, r"\(N,\) or \(N, seq\)"),
        ({"x_test": torch.zeros(3, 4)}, "token inputs x_test must be int64"),
        ({"x_train": torch.zeros(8, 4, 2, dtype=torch.int64)}, r"\(N, seq\)"),
    ],
)
def test_inconsistent_token_data_is_a_data_error(change: dict[str, object], message: str) -> None:
    with pytest.raises(DataError, match=message):
        _tokens(**change)


def test_per_position_labels_and_vocab_size_need_token_inputs() -> None:
    with pytest.raises(DataError, match=r"y_train must be int64 labels of shape \(N,\)"):
        _classification(y_train=torch.zeros(6, 4, dtype=torch.int64))
    with pytest.raises(DataError, match="vocab_size=5 needs int64 token inputs"):
        _classification(vocab_size=5)

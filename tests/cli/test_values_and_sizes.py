"""Values a user may type (issue 24): every seed and count is accepted or refused in one line
with exit 2 and nothing written; token datasets refuse a size they cannot hold before drawing
it."""

from __future__ import annotations

from pathlib import Path

import pytest

from depthscale.cli import main
from depthscale.data import load
from depthscale.errors import ConfigError


@pytest.mark.parametrize(("argv", "message"), [
    (["limit", "sde", "--seed", "-1"], "a seed is a whole number from 0 to 2^63 - 1"),
    (["explain", "--seed", str(2**70)], "a seed is a whole number from 0 to 2^63 - 1"),
    (["explain", "--seed", "abc"], "a seed is a whole number"),
    (["reproduce", "--seed", "-5", "--list"], "a seed is a whole number from 0"),
    (["coord-check", "--batch-size", "0"], "--batch-size: must be >= 1"),
    (["limit", "kernel", "--inputs", "-3"], "--inputs: must be >= 1"),
    (["explain", "--width", "0"], "--width: must be >= 1"),
    (["train", "--steps", "-2"], "--steps: must be >= 1"),
    (["train", "--data-option", "seed=abc", "--steps", "1"], "the data's seed is --seed"),
    (["train", "--model", "gpt", "--dataset", "markov", "--data-option", "context=100000",
      "--steps", "1"], "over the 67,108,864 this loader draws"),
])
def test_bad_values_are_one_line_and_write_nothing(
    argv: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        raise SystemExit(main(argv))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert message in err and "Traceback" not in err, err
    assert not any(tmp_path.rglob("*"))


def test_the_largest_seed_is_accepted() -> None:
    data = load("teacher", seed=2**63 - 1, n_train=4, n_test=2)
    assert len(data.x_train) == 4


def test_token_bound_names_the_size() -> None:
    with pytest.raises(ConfigError, match=r"GiB as int64"):
        load("pytext", context=40000)

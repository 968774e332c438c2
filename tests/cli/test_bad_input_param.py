"""``depthscale transfer`` and transfer_lr: a prediction that is not a usable learning rate, and
inconsistent sizes, are one-line errors (exit 2) with nothing printed on stdout."""

from __future__ import annotations

import pytest

from depthscale.cli import main
from depthscale.errors import ConfigError
from depthscale.param import transfer_lr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rule", "laws", "--lr", "1e308", "--from-depth", "8", "--to-depth", "2"],
         "the laws rule predicts lr = inf for depth 8 -> 2"),
        (["--rule", "completep", "--lr", "1e300", "--from-depth", "1", "--to-depth", "4",
          "--from-width", "1", "--to-width", "1e300"], "predicts lr = inf"),
        (["--rule", "laws", "--lr", "1e-300", "--from-depth", "1e-300", "--to-depth", "4"],
         "predicts lr = 0"),
        (["--rule", "laws", "--lr", "0.1", "--from-depth", "8", "--to-depth", "2,0"],
         "to-depth must be a finite number > 0, got 0"),
        (["--rule", "nfd", "--lr", "0.1", "--from-depth", "8", "--to-depth", "2",
          "--to-width", "64"], "to-width 64.0 needs from-width"),
        (["--rule", "laws", "--lr", "0.1", "--from-depth", "8", "--to-depth", "2",
          "--from-width", "32", "--to-width", "64"], "the laws rule transfers across depth only"),
        (["--rule", "nfd", "--lr", "0.1", "--from-depth", "8", "--to-depth", "2",
          "--from-width", "-32", "--to-width", "64"], "from-width must be a finite number > 0"),
    ],
)
def test_transfer_refuses_unusable_predictions_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["transfer", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # nothing printed before the error, even for the valid first depth
    assert len(err.strip().splitlines()) == 1 and err.startswith("depthscale: error:")
    assert message in err, err


def test_transfer_prints_every_depth_when_all_are_usable(
    capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["transfer", "--rule", "completep", "--lr", "0.1", "--from-depth", "2",
                 "--to-depth", "4,8", "--from-width", "64", "--to-width", "128"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["depth 2 -> 4: lr 0.1 -> 0.4", "depth 2 -> 8: lr 0.1 -> 0.8"]


def test_transfer_lr_checks_types_and_overflowing_powers() -> None:
    with pytest.raises(ConfigError, match=r"lr must be a finite number > 0, got '0\.1' \(a str"):
        transfer_lr("laws", "0.1", 8, 2)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="from-depth must be a finite number > 0, got True"):
        transfer_lr("laws", 0.1, True, 2)
    with pytest.raises(ConfigError, match="predicts lr = inf"):  # (1e-300)^(-3/2) overflows
        transfer_lr("laws", 0.1, 1e300, 1e-300)
    with pytest.raises(ConfigError, match="unknown transfer rule None"):
        transfer_lr(None, 0.1, 8, 2)  # type: ignore[arg-type]
    assert transfer_lr("laws", 0.1, 8, 2, 64, 64).lr == pytest.approx(0.1 * 4**1.5)

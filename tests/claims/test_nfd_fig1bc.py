"""nfd-fig1bc (pre_post.py): the verdict rules on made-up measurements and the paired
differences on made-up rows (the smoke run and its control are in test_reproduce.py)."""

from __future__ import annotations

import pytest

from depthscale.claims.nfd.pre_post import (
    PrePostMeasures,
    PrePostSettings,
    _final,
    judge_pre_post,
)

S = PrePostSettings(dataset="digits", width=8, depth=2, lrs=[0.1], epochs=1, seeds=3,
                    arms=["resnet1", "resnet1-post"])


def _measures(train: tuple[float, float, float],
              test: tuple[float, float, float]) -> PrePostMeasures:
    diffs = {"mean_train_loss_difference_lr0.1": train, "test_loss_difference_lr0.1": test}
    measured: dict[str, float | None] = {"test_loss_sd_pre_lr0.1": 0.1,
                                         "test_loss_sd_post_lr0.1": 0.2}
    return PrePostMeasures([], diffs, measured)


@pytest.mark.parametrize(("train", "test", "verdict"), [
    ((-0.3, -0.4, -0.2), (-0.2, -0.3, -0.1), "PASS"),
    ((-0.3, -0.4, -0.2), (-0.1, -0.3, 0.1), "INCONCLUSIVE"),  # test loss straddles 0
    ((0.3, 0.2, 0.4), (-0.2, -0.3, -0.1), "FAIL"),  # post-act trains faster
    ((0.0, 0.0, 0.0), (-0.2, -0.3, -0.1), "FAIL"),  # no effect is not the claimed effect
])
def test_verdict_on_the_paired_intervals(train: tuple[float, float, float],
                                         test: tuple[float, float, float],
                                         verdict: str) -> None:
    j = judge_pre_post(_measures(train, test), S)
    assert j.decision is not None and j.decision[0] == verdict
    assert "SD pre 0.1, post 0.2" in j.note


def test_final_rows_in_seed_order_per_arm_and_lr() -> None:
    rows = [{"model": "resnet1", "lr": 0.1, "seed": s, "epoch": "final", "test_loss": 10.0 + s}
            for s in (2, 0, 1)]
    rows += [{"model": "resnet1", "lr": 0.1, "seed": 0, "epoch": 1, "test_loss": 99.0},
             {"model": "resnet1", "lr": 0.5, "seed": 0, "epoch": "final", "test_loss": 98.0},
             {"model": "resnet1-post", "lr": 0.1, "seed": 0, "epoch": "final",
              "test_loss": 97.0}]
    assert _final(rows, "resnet1", 0.1, "test_loss") == [10.0, 11.0, 12.0]

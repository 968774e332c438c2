"""The training loop: determinism, divergence recorded not raised, config errors."""

from __future__ import annotations

import math

import pytest
import torch

from depthscale.data import load
from depthscale.errors import ConfigError
from depthscale.models import build
from depthscale.train import TrainConfig, train


@pytest.fixture(scope="module")
def teacher():  # type: ignore[no-untyped-def]
    return load("teacher", n_train=64, n_test=32, seed=0)


def _model(data, recipe: str = "depth-mup", seed: int = 0):  # type: ignore[no-untyped-def]
    return build("resnet1", recipe, input_shape=data.sample_shape, n_out=data.n_out, width=16,
                 depth=3, seed=seed)


def test_same_seed_gives_identical_losses(teacher) -> None:  # type: ignore[no-untyped-def]
    runs = []
    for _ in range(2):
        model, plan = _model(teacher)
        cfg = TrainConfig(lr=0.05, steps=20, batch_size=8, loss="mse", seed=3)
        runs.append(train(model, plan, teacher, cfg).losses)
    assert runs[0] == runs[1]
    model, plan = _model(teacher)
    other = train(model, plan, teacher, TrainConfig(lr=0.05, steps=20, batch_size=8, loss="mse",
                                                    seed=4)).losses
    assert other != runs[0]


def test_training_reduces_the_loss_online_and_minibatch(teacher) -> None:  # type: ignore[no-untyped-def]
    for bs in (1, 16):
        model, plan = _model(teacher)
        res = train(model, plan, teacher, TrainConfig(lr=0.1, epochs=3, batch_size=bs, loss="mse"))
        assert res.status == "ok"
        assert res.steps_done == 3 * math.ceil(64 / bs)
        assert len(res.epoch_losses) == 3
        assert res.epoch_losses[-1] < res.epoch_losses[0]
        assert set(res.final) == {"train_loss", "test_loss"}


def test_huge_learning_rate_is_recorded_as_diverged(teacher) -> None:  # type: ignore[no-untyped-def]
    model, plan = _model(teacher, recipe="sp")
    res = train(model, plan, teacher, TrainConfig(lr=1e6, steps=50, batch_size=16, loss="mse"))
    assert res.status == "diverged"
    assert res.diverged_at is not None and res.diverged_at <= 50
    assert res.final == {}
    assert all(math.isfinite(v) for v in res.losses)


def test_hooks_see_every_step_and_classification_reports_accuracy() -> None:
    data = load("digits", seed=0)
    model, plan = build("resnet1", "depth-mup", input_shape=data.sample_shape, n_out=10,
                        width=32, depth=2)
    seen: list[int] = []
    res = train(model, plan, data, TrainConfig(lr=0.1, steps=12, eval_every=4),
                hooks=[lambda step, _m, _l: seen.append(step)])
    assert seen == list(range(1, 13))
    assert [e["step"] for e in res.evals] == [4, 8, 12]
    assert 0.0 <= res.final["test_acc"] <= 1.0


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        (TrainConfig(lr=float("nan"), steps=1), "finite"),
        (TrainConfig(lr=0.1), "exactly one of steps or epochs"),
        (TrainConfig(lr=0.1, steps=0), "steps must be"),
        (TrainConfig(lr=0.1, steps=1, optimizer="lion"), "unknown optimizer"),
        (TrainConfig(lr=0.1, steps=1, loss="hinge"), "unknown loss"),
        (TrainConfig(lr=0.1, steps=1, batch_size=0), "batch size"),
        (TrainConfig(lr=0.1, steps=1, device="tpu"), "unknown device"),
    ],
)
def test_bad_train_settings_are_config_errors(teacher, cfg, message) -> None:  # type: ignore[no-untyped-def]
    model, plan = _model(teacher)
    with pytest.raises(ConfigError, match=message):
        train(model, plan, teacher, cfg)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error")
def test_cuda_request_without_cuda_is_a_clear_error(teacher) -> None:  # type: ignore[no-untyped-def]
    model, plan = _model(teacher)
    with pytest.raises(ConfigError, match="CUDA is not available"):
        train(model, plan, teacher, TrainConfig(lr=0.1, steps=1, device="cuda", loss="mse"))

"""Training checks its data against the model first, takes the last axis as classes, and
records divergence by one rule in the loop and the batched sweep."""

from __future__ import annotations

import copy
import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from depthscale.data import Dataset, load
from depthscale.errors import ConfigError, DataError
from depthscale.models import build
from depthscale.param import plan as make_plan
from depthscale.train import (
    DivergenceMonitor,
    TrainConfig,
    check_data,
    evaluate,
    loss_fn,
    train,
    train_batched,
    zero_output_loss,
)


@pytest.fixture(scope="module")
def digits() -> Dataset:
    return load("digits", n_train=64, n_test=32, seed=0)


@pytest.fixture(scope="module")
def teacher() -> Dataset:
    return load("teacher", n_train=64, n_test=32, seed=0)


def _params(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}  # every value a tensor


# --- 1. data against the model, before any step -------------------------------------------


def test_a_model_built_for_other_data_fails_before_training(digits: Dataset) -> None:
    model, plan = build("resnet2", "depth-mup", input_shape=(1, 40), n_out=10, width=16, depth=2)
    before = _params(model)
    with pytest.raises(ConfigError) as info:
        train(model, plan, digits, TrainConfig(steps=5))
    msg = str(info.value)
    assert "MLPResNet cannot take dataset 'digits'" in msg and "(1, 8, 8) (float32)" in msg
    assert "1x64 and 40x16" in msg  # torch's own words: 64 inputs given, 40 expected
    assert "input_shape=data.sample_shape" in msg and "\n" not in msg
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())


def test_an_output_width_other_than_the_class_count_fails_before_training(
    digits: Dataset,
) -> None:
    model, plan = build("resnet1", "depth-mup", input_shape=(1, 8, 8), n_out=3, width=16, depth=2)
    with pytest.raises(ConfigError) as info:
        train(model, plan, digits, TrainConfig(steps=5))
    msg = str(info.value)
    assert "outputs shape (3,)" in msg and "targets need (10,)" in msg and "n_out" in msg


def test_a_regression_width_mismatch_and_a_loss_mismatch_fail_before_training(
    teacher: Dataset,
) -> None:
    model, plan = build("resnet1", "depth-mup", input_shape=(16,), n_out=2, width=16, depth=2)
    with pytest.raises(ConfigError, match=r"outputs shape \(2,\).*targets need \(1,\)"):
        train(model, plan, teacher, TrainConfig(steps=5, loss="mse"))
    model, plan = build("resnet1", "depth-mup", input_shape=(16,), n_out=1, width=16, depth=2)
    with pytest.raises(ConfigError, match="cross-entropy needs class labels"):
        train(model, plan, teacher, TrainConfig(steps=5, loss="ce"))


def test_float_models_on_token_ids_fail_with_the_dtype_named() -> None:
    x = torch.randint(0, 7, (10, 5), generator=torch.Generator().manual_seed(0))
    data = Dataset("tokens", x, x % 3, x[:4], x[:4] % 3, (5,), "classification", 3, vocab_size=7)
    model, plan = build("resnet1", "depth-mup", input_shape=(5,), n_out=3, width=8, depth=2)
    with pytest.raises(ConfigError) as info:
        train(model, plan, data, TrainConfig(steps=2))
    assert "samples of shape (5,) (int64)" in str(info.value)


def test_the_check_leaves_batchnorm_statistics_and_the_training_mode_alone(
    digits: Dataset,
) -> None:
    model, _ = build("cnn2d", "sp", input_shape=(1, 8, 8), n_out=10, width=4, depth=2,
                     batchnorm=True)
    model.train()
    before = _params(model)
    assert check_data(model, digits, "ce") == 10
    assert model.training
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())


class _TokenModel(nn.Module):
    """Embedding then a linear map per position: logits (B, seq, vocab)."""

    def __init__(self, vocab: int, width: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.out = nn.Linear(width, vocab)
        self.embed.param_roles = {"weight": "token"}  # what a plan needs to know of them
        self.out.param_roles = {"weight": "output"}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.embed(x))


def test_token_data_with_next_token_targets_trains_end_to_end() -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 6, (48, 6), generator=g)
    y = (x + 1) % 6  # a learnable per-position map
    data = Dataset("tokens", x[:32], y[:32], x[32:], y[32:], (6,), "classification", 6,
                   vocab_size=6)
    torch.manual_seed(0)
    model = _TokenModel(6, 16)
    plan = make_plan("sp", width=16, depth=1)
    plan.apply(model, seed=0)
    res = train(model, plan, data, TrainConfig(lr=0.5, steps=200, batch_size=8))
    assert res.status == "ok" and res.steps_done == 200
    assert res.final["train_acc"] == 1.0 and res.final["test_acc"] == 1.0
    assert res.losses[-1] < res.losses[0] / 10


# --- 6. the last axis holds the classes, for any rank -----------------------------------------


def _hand_ce(logits: list[list[list[float]]], labels: list[list[int]]) -> float:
    terms = []
    for row, ys in zip(logits, labels, strict=True):
        for z, c in zip(row, ys, strict=True):
            terms.append(math.log(sum(math.exp(v) for v in z)) - z[c])
    return sum(terms) / len(terms)


def test_cross_entropy_takes_the_last_axis_when_seq_equals_vocab() -> None:
    logits = [[[2.0, 0.0, -1.0], [0.5, 0.5, 3.0], [1.0, -2.0, 0.0]],
              [[0.0, 1.0, 0.0], [-1.0, 4.0, 2.0], [3.0, 3.0, -3.0]]]
    labels = [[0, 2, 1], [1, 0, 2]]
    out, y = torch.tensor(logits, dtype=torch.float64), torch.tensor(labels)
    expected = _hand_ce(logits, labels)
    assert float(loss_fn("ce", out, y)) == pytest.approx(expected, rel=1e-12)
    # torch's own (B, C, seq) reading of the same tensors is a different number
    assert float(F.cross_entropy(out, y)) != pytest.approx(expected, rel=1e-3)
    # mean square against one-hot targets, per position, mean over the 6 positions
    hand_mse = sum(
        0.5 * sum((v - (1.0 if k == c else 0.0)) ** 2 for k, v in enumerate(z))
        for row, ys in zip(logits, labels, strict=True) for z, c in zip(row, ys, strict=True)
    ) / 6
    assert float(loss_fn("mse", out, y)) == pytest.approx(hand_mse, rel=1e-12)


class _Fixed(nn.Module):
    """Returns stored logits for inputs 0..N-1 (the input is the sample index)."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = nn.Parameter(logits)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.logits[idx[:, 0]]


def test_evaluate_counts_accuracy_per_position_when_seq_equals_vocab() -> None:
    logits = torch.tensor([[[2.0, 0.0, -1.0], [0.5, 0.5, 3.0], [1.0, -2.0, 0.0]],
                           [[0.0, 1.0, 0.0], [-1.0, 4.0, 2.0], [3.0, 2.0, -3.0]]])
    labels = torch.tensor([[0, 2, 1], [1, 0, 0]])  # argmax: [0, 2, 0], [1, 1, 0] -> 4 of 6
    x = torch.tensor([[0, 0, 0], [1, 1, 1]])
    res = evaluate(_Fixed(logits), x, labels, "ce", chunk=1)  # two chunks, weighted by rows
    assert res["acc"] == pytest.approx(4 / 6)
    assert res["loss"] == pytest.approx(_hand_ce(logits.tolist(), labels.tolist()), rel=1e-6)


def test_mismatched_output_and_target_shapes_are_config_errors_not_broadcasts() -> None:
    with pytest.raises(ConfigError, match=r"\(4, 1\) do not fit targets of shape \(4,\)"):
        loss_fn("mse", torch.zeros(4, 1), torch.zeros(4))
    with pytest.raises(ConfigError, match="one score per class"):
        loss_fn("ce", torch.zeros(4, 3, 5), torch.zeros(4, dtype=torch.int64))


def test_evaluate_on_no_samples_is_a_data_error() -> None:
    with pytest.raises(DataError, match="no samples"):
        evaluate(nn.Linear(3, 2), torch.zeros(0, 3), torch.zeros(0, dtype=torch.int64), "ce")


# --- 5. divergence: non-finite, or running loss > factor x initial ------------------------------


def test_the_divergence_rule_on_hand_sequences() -> None:
    m = DivergenceMonitor(10.0, floor=1.0)
    assert [m.update(v) for v in (2.0, 3.0)] == [None, None]  # initial = max(2, 1) = 2
    assert m.update(100.0) == "running loss 35 > 10 x initial loss 2"  # (2+3+100)/3 = 35 > 20
    lucky = DivergenceMonitor(10.0, floor=1.0)  # a first loss below the zero-output floor
    assert [lucky.update(v) for v in (0.1, 2.0, 9.0)] == [None, None, None]  # 3.7 <= 10
    no_floor = DivergenceMonitor(10.0, floor=0.0)
    assert no_floor.update(0.1) is None
    assert no_floor.update(2.0) == "running loss 1.05 > 10 x initial loss 0.1"
    assert DivergenceMonitor(10.0, 1.0).update(float("nan")) == "non-finite loss"
    assert DivergenceMonitor(10.0, 1.0).update(float("inf")) == "non-finite loss"


def test_zero_output_loss_per_loss_and_target_kind() -> None:
    labels = torch.tensor([0, 3, 1])
    assert zero_output_loss("ce", labels, 10) == pytest.approx(math.log(10))
    assert zero_output_loss("mse", labels, 10) == 0.5
    targets = torch.tensor([[1.0, 2.0], [3.0, 0.0]])
    assert zero_output_loss("mse", targets, 2) == pytest.approx(0.5 * (5.0 + 9.0) / 2)
    for name, y, n in (("ce", labels, 10), ("mse", labels, 10), ("mse", targets, 2)):
        zeros = torch.zeros(*y.shape, n) if y.dtype == torch.long else torch.zeros_like(y)
        assert float(loss_fn(name, zeros, y)) == pytest.approx(zero_output_loss(name, y, n))


@pytest.mark.parametrize("factor", [1, 0.5, -3.0, float("nan"), float("inf"), True, "10"])
def test_divergence_factor_must_be_a_finite_number_above_one(factor: object) -> None:
    with pytest.raises(ConfigError, match="divergence_factor must be a finite number > 1"):
        TrainConfig(steps=1, divergence_factor=factor).validate()  # type: ignore[arg-type]


def test_adam_at_a_huge_lr_is_diverged_by_the_multiple_of_initial_rule() -> None:
    data = load("mnist1d", n_train=256, n_test=64)
    model, plan = build("resnet1", "depth-mup", input_shape=data.sample_shape, n_out=10,
                        width=32, depth=4)
    res = train(model, plan, data, TrainConfig(optimizer="adam", lr=1e3, steps=100,
                                               batch_size=64))
    assert res.status == "diverged" and res.final == {}
    assert res.diverged_reason is not None and res.diverged_reason.startswith("running loss")
    assert res.diverged_at is not None and res.diverged_at <= 10
    assert len(res.losses) == res.steps_done == res.diverged_at - 1
    assert all(math.isfinite(v) for v in res.losses)
    # the reason's numbers are the run's: initial = max(first loss, log 10)
    initial = max(res.losses[0], math.log(10))
    assert f"10 x initial loss {initial:.3g}" in res.diverged_reason


def test_batched_members_and_one_by_one_runs_agree_on_the_multiple_of_initial_rule(
    teacher: Dataset,
) -> None:
    model, plan = build("resnet1", "sp", input_shape=teacher.sample_shape, n_out=1, width=16,
                        depth=3)
    lrs = [0.01, 0.5, 1.0, 3.0]
    cfg = TrainConfig(steps=24, batch_size=16, loss="mse")
    got = train_batched(model, plan, teacher, cfg, lrs)
    refs = [train(copy.deepcopy(model), plan, teacher, replace(cfg, lr=lr)) for lr in lrs]
    for ref, res in zip(refs, got, strict=True):
        assert (res.status, res.diverged_at, res.steps_done) == (
            ref.status, ref.diverged_at, ref.steps_done)
        assert (res.diverged_reason is None) == (ref.diverged_reason is None)
    assert got[0].status == "ok"
    finite = [r for r in got if r.diverged_reason and r.diverged_reason.startswith("running")]
    assert finite, [r.diverged_reason for r in got]  # the case exercises the finite rule
    for res in finite:
        assert all(math.isfinite(v) for v in res.losses)
    # with a factor no loss reaches, the same members run on (to the end or a non-finite loss)
    lax = train_batched(model, plan, teacher, replace(cfg, divergence_factor=1e30), lrs)
    for strict_res, lax_res in zip(got, lax, strict=True):
        if strict_res.diverged_reason and strict_res.diverged_reason.startswith("running"):
            assert lax_res.steps_done > strict_res.steps_done


def test_a_study_record_keeps_the_divergence_reason() -> None:
    from depthscale.studies.runner import run_one
    from depthscale.studies.spec import RunSpec

    spec = RunSpec(model="resnet1", recipe="sp", dataset="mnist1d", width=8, depth=2, lr=1e4,
                   seed=0, steps=6, batch_size=32, data_options=(("n_test", 64), ("n_train", 128)))
    rec = run_one(spec)
    assert rec.status == "diverged" and rec.metrics["diverged_at"] == 2
    initial = max(rec.curve_losses[0], math.log(10))  # type: ignore[type-var]
    assert rec.metrics["diverged_reason"].startswith("running loss ")
    assert rec.metrics["diverged_reason"].endswith(f"> 10 x initial loss {initial:.3g}")
    ok = run_one(replace(spec, lr=0.01))
    assert ok.status == "done" and ok.metrics["diverged_reason"] is None

"""The GPT trains on the offline language sources with the ordinary loop: next-token
cross-entropy over every position, accuracy per token."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
import torch

from depthscale.data import load
from depthscale.models import build
from depthscale.train import TrainConfig, train


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """One intra-op thread, as a sweep's runs use (small models run faster, and shared CPUs
    are not oversubscribed)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_200_adam_steps_on_markov_approach_the_entropy_rate() -> None:
    """vocab 16, order 1: log V = 2.773, the unigram entropy (no context) 2.675, the entropy
    rate H = 1.838 nats. Measured: validation loss 1.888 after 200 steps (completep, AdamW
    lr 0.03, width 32, 2 blocks, batch 32, seed 0)."""
    data = load("markov", seed=0)
    H, uniform = data.meta["entropy_rate_nats"], data.meta["uniform_loss_nats"]
    unigram = data.meta["chain"].block_entropy(1)
    assert math.isclose(H, 1.8383, abs_tol=1e-4) and math.isclose(unigram, 2.6746, abs_tol=1e-4)
    model, plan = build("gpt", "completep", input_shape=data.sample_shape, n_out=data.n_out,
                        width=32, depth=2, seed=0, heads=4)
    result = train(model, plan, data, TrainConfig(optimizer="adam", lr=0.03, steps=200,
                                                  batch_size=32, seed=0))
    assert result.status == "ok"
    assert abs(result.losses[0] - uniform) < 0.1  # starts near the uniform guess
    test_loss = result.final["test_loss"]
    assert test_loss < unigram - 0.5  # it reads the context, not only token frequencies
    assert H < test_loss < H + 0.1
    with torch.no_grad():
        per_token = (model(data.x_test).argmax(-1) == data.y_test).double().mean()
    assert math.isclose(result.final["test_acc"], float(per_token), rel_tol=1e-12)


def test_a_few_steps_on_pytext_learn_byte_statistics() -> None:
    data = load("pytext", seed=0, n_train=256, n_test=64, context=32)
    model, plan = build("gpt", "sp", input_shape=data.sample_shape, n_out=data.n_out,
                        width=32, depth=1, seed=0, heads=4, tied=True)
    result = train(model, plan, data, TrainConfig(optimizer="adam", lr=0.01, steps=40,
                                                  batch_size=32, seed=0))
    assert result.status == "ok"
    assert result.final["test_loss"] < math.log(256) - 2.0, result.final

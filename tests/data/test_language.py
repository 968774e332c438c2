"""The offline language sources: the markov chain's exact entropy rate (by hand on a 2-state
chain, and against the chain's own per-token NLL on sampled data) and the pytext byte
windows (deterministic, split by file, bytes equal to the source files)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from depthscale.data import load
from depthscale.data.language import VALIDATION_EVERY, MarkovChain, load_pytext
from depthscale.errors import ConfigError, DataError


def _h(p: float) -> float:
    return -(p * math.log(p) + (1 - p) * math.log(1 - p))


def test_entropy_rate_of_a_two_state_chain_by_hand() -> None:
    a, b = 0.1, 0.4  # P(0 -> 1) and P(1 -> 0)
    chain = MarkovChain(2, 1, np.array([[1 - a, a], [b, 1 - b]]))
    pi0, pi1 = b / (a + b), a / (a + b)  # 0.8, 0.2
    assert np.allclose(chain.stationary, [pi0, pi1], atol=1e-12)
    assert math.isclose(chain.entropy_rate(), pi0 * _h(a) + pi1 * _h(b), rel_tol=1e-12)
    assert math.isclose(chain.window_loss(5), chain.entropy_rate(), rel_tol=1e-12)


def test_window_loss_of_an_order_2_chain_by_enumeration() -> None:
    """Position 0 sees one symbol of a two-symbol state: its optimum is H(z1 | z0), counted
    here from the joint p(z_-1, z0, z1) = pi(z_-1, z0) P(z1 | z_-1, z0); later positions reach
    the entropy rate."""
    chain = MarkovChain.random(3, 2, 0.5, np.random.default_rng(0))
    pi, P = chain.stationary.reshape(3, 3), chain.transition.reshape(3, 3, 3)
    joint01 = np.einsum("ab,abc->bc", pi, P)  # p(z0, z1)
    p0 = joint01.sum(1)
    h_cond = -sum(joint01[i, j] * math.log(joint01[i, j] / p0[i])
                  for i in range(3) for j in range(3))
    H = chain.entropy_rate()
    assert h_cond > H
    assert math.isclose(chain.window_loss(4), (h_cond + 3 * H) / 4, rel_tol=1e-10)


def test_true_chain_nll_on_sampled_data_is_the_entropy_rate_within_3_se() -> None:
    ds = load("markov", seed=3, n_train=4000, vocab=6, order=2, concentration=0.5, context=24)
    chain = ds.meta["chain"]
    x, y = ds.x_train.numpy(), ds.y_train.numpy()
    states = x[:, :-1] * 6 + x[:, 1:]  # the full state from position 1 on
    nll = -chain.log_prob(y[:, 1:], states)
    per_window = nll.mean(1)  # windows are independent draws
    mean, se = per_window.mean(), per_window.std(ddof=1) / math.sqrt(len(per_window))
    H = ds.meta["entropy_rate_nats"]
    assert se < 0.01
    assert abs(mean - H) < 3 * se, (mean, H, se)
    assert H < ds.meta["window_loss_nats"] < ds.meta["uniform_loss_nats"] == math.log(6)


def test_markov_windows_are_next_token_pairs_and_seeded() -> None:
    ds = load("markov", seed=1, n_train=50, n_test=20, context=10)
    assert ds.x_train.shape == ds.y_train.shape == (50, 10) and ds.x_test.shape == (20, 10)
    assert ds.x_train.dtype == torch.int64 and ds.vocab_size == ds.n_classes == 16
    assert torch.equal(ds.x_train[:, 1:], ds.y_train[:, :-1])
    again = load("markov", seed=1, n_train=50, n_test=20, context=10)
    assert torch.equal(ds.x_train, again.x_train) and torch.equal(ds.y_test, again.y_test)
    other = load("markov", seed=2, n_train=50, n_test=20, context=10)
    assert not torch.equal(ds.x_train, other.x_train)


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ({"vocab": 1}, "option vocab must be an integer >= 2, got 1"),
        ({"order": 0}, "option order must be an integer >= 1, got 0"),
        ({"context": 2.5}, "option context must be an integer >= 1, got 2.5"),
        ({"concentration": -1.0}, "option concentration must be a finite number > 0"),
        ({"vocab": 64, "order": 2}, "vocab**order = 4096 states is too many"),
    ],
)
def test_bad_markov_options_are_config_errors(option: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("*", r"\*").replace("(", r"\(")):
        load("markov", **option)


def test_pytext_is_deterministic_split_by_file_and_bytes_of_the_sources() -> None:
    ds = load("pytext", seed=0, n_train=300, n_test=100, context=32)
    again = load("pytext", seed=0, n_train=300, n_test=100, context=32)
    assert torch.equal(ds.x_train, again.x_train) and torch.equal(ds.x_test, again.x_test)
    assert ds.meta["train_windows"] == again.meta["train_windows"]
    assert ds.x_train.shape == (300, 32) and ds.vocab_size == ds.n_classes == 256
    train_files, test_files = set(ds.meta["train_files"]), set(ds.meta["test_files"])
    assert not train_files & test_files
    n_files = len(train_files) + len(test_files)
    assert abs(len(test_files) / n_files - 1 / VALIDATION_EVERY) < 0.03
    for split, files in (("train", train_files), ("test", test_files)):
        windows = ds.meta[f"{split}_windows"]
        assert {f for f, _ in windows} <= files
        assert len(set(windows)) == len(windows)
    root = Path(ds.meta["root"])
    for split in ("train", "test"):
        x, y = getattr(ds, f"x_{split}"), getattr(ds, f"y_{split}")
        for i in (0, 7, len(x) - 1):
            rel, offset = ds.meta[f"{split}_windows"][i]
            raw = (root / rel).read_bytes()[offset:offset + 33]
            assert bytes(x[i].tolist()) + bytes([int(y[i, -1])]) == raw
            assert torch.equal(x[i, 1:], y[i, :-1])
    other = load("pytext", seed=1, n_train=300, n_test=100, context=32)
    assert set(other.meta["test_files"]) == test_files  # the split does not depend on seed
    assert other.meta["train_windows"] != ds.meta["train_windows"]


def test_pytext_on_a_folder_of_known_files(tmp_path: Path) -> None:
    """Windows lie inside one file at multiples of context + 1; the text round-trips."""
    texts = {f"m{i:02d}.py": f"# module {i}\n" + "x = 1\n" * (i + 3) for i in range(30)}
    for name, text in texts.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "notes.txt").write_text("not python")
    ds = load_pytext(seed=0, n_train=20, n_test=2, context=7, root=tmp_path)
    assert set(ds.meta["train_files"]) | set(ds.meta["test_files"]) == set(texts)
    for i, (rel, offset) in enumerate(ds.meta["train_windows"]):
        assert offset % 8 == 0
        window = bytes(ds.x_train[i].tolist()) + bytes([int(ds.y_train[i, -1])])
        assert window.decode() == texts[rel][offset:offset + 8]


def test_pytext_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"no \.py files under the standard library folder"):
        load_pytext(seed=0, n_train=1, n_test=1, root=tmp_path)
    (tmp_path / "a.py").write_text("x" * 100)
    with pytest.raises(ConfigError, match="the train split has 12 windows of 8 bytes"):
        load_pytext(seed=0, n_train=13, n_test=1, context=7, root=tmp_path)

"""Offline language data for next-token prediction: a random Markov chain with an exactly
known entropy rate, and the bytes of the Python standard library's source files.

Both give token windows: ``x`` (N, context) int64 token ids and per-position next-token labels
``y`` (N, context) with ``y[:, t] = x[:, t + 1]`` inside the window (the last label is the
token after it). A model outputs logits (N, context, vocab).
"""

from __future__ import annotations

import hashlib
import math
import os
import sysconfig
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import torch

from depthscale.data.dataset import Dataset, as_int, check_size, to_tensor
from depthscale.data.synthetic import _streams
from depthscale.errors import ConfigError, DataError

__all__ = ["MAX_STATES", "MarkovChain", "load_markov", "load_pytext", "stdlib_files"]

#: The most states (vocab ** order) a markov source may have.
MAX_STATES = 2048


def _option(dataset: str, name: str, value: object, minimum: int = 1) -> int:
    """An integer option >= ``minimum``, else a ConfigError naming it."""
    n = as_int(value)
    if n is None or n < minimum:
        raise ConfigError(f"{dataset}: option {name} must be an integer >= {minimum}, "
                          f"got {value!r}")
    return n


def _entropy(p: np.ndarray) -> np.ndarray:
    """Shannon entropy in nats along the last axis (0 log 0 = 0)."""
    logs = np.log(np.where(p > 0, p, 1.0))
    return np.asarray(-(p * logs).sum(-1))


@dataclass(frozen=True, eq=False)
class MarkovChain:
    """An order-k Markov chain over V symbols: ``transition[s]`` is P(next | state s), where
    the state s = sum_j z_{t-k+1+j} V^(k-1-j) encodes the last k symbols (oldest first).

    ``stationary`` is the stationary distribution pi over the V^k states (pi P_states = pi);
    the entropy rate is H = sum_s pi(s) H(P(. | s)) (Cover & Thomas Thm. 4.2.4), the lowest
    per-token cross-entropy any predictor that sees the whole past can reach.
    """

    vocab: int
    order: int
    transition: np.ndarray  # (V^k, V), rows sum to 1

    def __post_init__(self) -> None:
        shape = (self.vocab**self.order, self.vocab)
        t = self.transition
        if t.shape != shape or not np.all(t >= 0) or not np.allclose(t.sum(1), 1.0):
            raise ConfigError(f"a Markov chain of vocab {self.vocab} and order {self.order} "
                              f"needs a {shape} row-stochastic transition matrix, got "
                              f"{t.shape}")

    @classmethod
    def random(cls, vocab: int, order: int, concentration: float,
               rng: np.random.Generator) -> MarkovChain:
        """Rows drawn iid from a symmetric Dirichlet(concentration): small concentrations give
        peaked rows (low entropy rate), large ones rows near uniform (H near log V)."""
        alpha = np.full(vocab, concentration)
        rows = rng.dirichlet(alpha, size=vocab**order)
        rows = np.maximum(rows, 1e-12)  # no impossible transition: every loss stays finite
        return cls(vocab, order, rows / rows.sum(1, keepdims=True))

    def next_state(self, state: np.ndarray, symbol: np.ndarray) -> np.ndarray:
        """The state after emitting ``symbol`` in ``state`` (drop the oldest symbol)."""
        result: np.ndarray = (state * self.vocab) % (self.vocab**self.order) + symbol
        return result

    @cached_property
    def stationary(self) -> np.ndarray:
        """pi over the V^k states, solved exactly from pi (P_states - I) = 0, sum(pi) = 1
        (unique: every transition has probability > 0, so the chain is irreducible)."""
        n = self.vocab**self.order
        states = np.zeros((n, n))
        src = np.repeat(np.arange(n), self.vocab)
        sym = np.tile(np.arange(self.vocab), n)
        np.add.at(states, (src, self.next_state(src, sym)), self.transition.reshape(-1))
        system = states.T - np.eye(n)
        system[-1] = 1.0
        rhs = np.zeros(n)
        rhs[-1] = 1.0
        pi = np.linalg.solve(system, rhs)
        return np.asarray(np.clip(pi, 0.0, None) / np.clip(pi, 0.0, None).sum())

    def entropy_rate(self) -> float:
        """H = sum_s pi(s) H(P(. | s)) in nats."""
        return float(self.stationary @ _entropy(self.transition))

    def block_entropy(self, m: int) -> float:
        """H(z_1..z_m) of m consecutive symbols of the stationary chain, in nats (m <= k + 1)."""
        pi = self.stationary  # joint of k consecutive symbols
        if m <= self.order:
            marg = pi.reshape((self.vocab,) * self.order).sum(axis=tuple(range(self.order - m)))
            return float(_entropy(marg.reshape(-1)))
        if m != self.order + 1:
            raise ConfigError(f"block_entropy needs m <= order + 1 = {self.order + 1}, got {m}")
        return float(_entropy((pi[:, None] * self.transition).reshape(-1)))

    def window_loss(self, context: int) -> float:
        """The lowest mean cross-entropy (nats) over the ``context`` positions of a window
        that starts in the stationary distribution: position t sees z_0..z_t, so it is
        H(z_{t+1} | z_{max(0, t-k+1)}..z_t) = H_{m+1} - H_m with m = min(t + 1, k), which is
        the entropy rate once t >= k - 1."""
        per = [self.block_entropy(min(t + 1, self.order) + 1)
               - self.block_entropy(min(t + 1, self.order)) for t in range(context)]
        return float(np.mean(per))

    def sample(self, n: int, length: int, rng: np.random.Generator) -> tuple[np.ndarray,
                                                                               np.ndarray]:
        """``n`` sequences of ``length`` symbols, each started from a state drawn from pi
        (so every position is stationary); returns (symbols (n, length), the state before
        each symbol (n, length))."""
        state = rng.choice(self.vocab**self.order, size=n, p=self.stationary)
        cdf = np.cumsum(self.transition, axis=1)
        cdf[:, -1] = 1.0
        out = np.empty((n, length), dtype=np.int64)
        states = np.empty((n, length), dtype=np.int64)
        for t in range(length):
            u = rng.random(n)
            sym = (u[:, None] > cdf[state]).sum(1)
            out[:, t], states[:, t] = sym, state
            state = self.next_state(state, sym)
        return out, states

    def log_prob(self, symbols: np.ndarray, states: np.ndarray) -> np.ndarray:
        """log P(symbol | state) elementwise (nats)."""
        return np.asarray(np.log(self.transition[states, symbols]))


def _windows(name: str, x: np.ndarray, y: np.ndarray, xt: np.ndarray, yt: np.ndarray,
             vocab: int, meta: dict[str, object]) -> Dataset:
    return Dataset(
        name=name, x_train=to_tensor(x, torch.int64), y_train=to_tensor(y, torch.int64),
        x_test=to_tensor(xt, torch.int64), y_test=to_tensor(yt, torch.int64),
        sample_shape=(x.shape[1],), task="classification", n_classes=vocab, vocab_size=vocab,
        meta=meta,
    )


def load_markov(*, seed: int, n_train: int | None, n_test: int | None, vocab: int = 16,
                order: int = 1, concentration: float = 0.3, context: int = 32) -> Dataset:
    """Windows of a random order-``order`` Markov chain over ``vocab`` symbols
    (:class:`MarkovChain`, rows ~ Dirichlet(``concentration``)); defaults 2048 train and 256
    test windows of ``context`` = 32 tokens.

    The chain, the train and the test windows come from three independent streams of
    ``seed``. ``meta`` holds ``entropy_rate_nats`` (the chain's H), ``window_loss_nats`` (the
    lowest mean loss over a window's positions, H plus the cost of the first k - 1 positions'
    shorter history), ``uniform_loss_nats`` (log V) and the chain itself (``chain``).
    """
    vocab = _option("markov", "vocab", vocab, 2)
    order = _option("markov", "order", order)
    context = _option("markov", "context", context)
    if isinstance(concentration, bool) or not isinstance(concentration, (int, float)) or not (
            math.isfinite(concentration) and concentration > 0):
        raise ConfigError(f"markov: option concentration must be a finite number > 0, got "
                          f"{concentration!r}")
    if vocab**order > MAX_STATES:
        raise ConfigError(f"markov: vocab**order = {vocab**order} states is too many "
                          f"(at most {MAX_STATES}: pi is solved exactly); lower vocab or order")
    check_size("markov", "n_train", n_train)
    check_size("markov", "n_test", n_test)
    check_tokens("markov", (2048 if n_train is None else n_train)
                 + (256 if n_test is None else n_test), context)
    chain_rng, train_rng, test_rng = _streams(seed, 3)
    chain = MarkovChain.random(vocab, order, float(concentration), chain_rng)
    train, _ = chain.sample(2048 if n_train is None else n_train, context + 1, train_rng)
    test, _ = chain.sample(256 if n_test is None else n_test, context + 1, test_rng)
    meta = {"entropy_rate_nats": chain.entropy_rate(),
            "window_loss_nats": chain.window_loss(context),
            "uniform_loss_nats": math.log(vocab), "chain": chain}
    return _windows("markov", train[:, :-1], train[:, 1:], test[:, :-1], test[:, 1:], vocab,
                    meta)


#: the most tokens a token dataset draws (windows x (context + 1)): 2^26, 0.5 GiB as int64
MAX_TOKENS = 2**26


def check_tokens(name: str, windows: int, context: int) -> None:
    """ConfigError, before any sampling, when ``windows`` windows of ``context`` + 1 tokens
    exceed :data:`MAX_TOKENS`, with the size it would take and what to lower."""
    tokens = windows * (context + 1)
    if tokens > MAX_TOKENS:
        raise ConfigError(
            f"{name}: {windows} windows of context {context} are {tokens:,} tokens "
            f"({tokens * 8 / 2**30:.1f} GiB as int64), over the {MAX_TOKENS:,} this loader "
            "draws; lower context or n_train/n_test")


# ---- pytext: the standard library's source files --------------------------------------------
#: One file in this many (by a hash of its path) goes to the validation split.
VALIDATION_EVERY = 10


def stdlib_files(root: str | os.PathLike[str] | None = None) -> list[tuple[str, int]]:
    """(path relative to ``root``, size in bytes) of every ``.py`` file under the standard
    library folder ``root`` (default: ``sysconfig``'s ``stdlib`` path), sorted by path;
    ``site-packages`` and ``__pycache__`` folders are skipped."""
    base = Path(sysconfig.get_paths()["stdlib"] if root is None else root)
    out: list[tuple[str, int]] = []
    for folder, dirs, files in os.walk(base):
        dirs[:] = [d for d in dirs if d not in ("site-packages", "__pycache__")]
        for f in files:
            if f.endswith(".py"):
                path = Path(folder, f)
                out.append((path.relative_to(base).as_posix(), path.stat().st_size))
    out.sort()
    return out


def _is_validation(relpath: str) -> bool:
    digest = hashlib.sha256(relpath.encode()).digest()
    return int.from_bytes(digest[:4], "big") % VALIDATION_EVERY == 0


def _pick(name: str, split: str, files: list[tuple[str, int]], n: int, span: int,
          rng: np.random.Generator) -> list[tuple[str, int]]:
    """``n`` distinct non-overlapping windows of ``span`` bytes, each inside one file, drawn
    uniformly from all of them; (file, offset) in file order."""
    counts = np.array([size // span for _, size in files], dtype=np.int64)
    total = int(counts.sum())
    if n > total:
        raise ConfigError(f"{name}: the {split} split has {total} windows of {span} bytes; "
                          f"ask for at most {total} (n_{split}) or a shorter context")
    chosen = np.sort(rng.choice(total, size=n, replace=False))
    ends = np.cumsum(counts)
    which = np.searchsorted(ends, chosen, side="right")
    starts = ends - counts
    return [(files[f][0], int(chosen[i] - starts[f]) * span) for i, f in enumerate(which)]


def load_pytext(*, seed: int, n_train: int | None, n_test: int | None, context: int = 64,
                root: str | os.PathLike[str] | None = None) -> Dataset:
    """Byte windows of the Python standard library's ``.py`` sources (vocab 256): real text
    that every Python installation has, read offline.

    Files (:func:`stdlib_files`) are split by a hash of their path, one in
    :data:`VALIDATION_EVERY` to the test split, so no file (and no window) is in both. Each
    window is ``context + 1`` consecutive bytes inside one file, at a multiple of
    ``context + 1`` from its start; ``n_train`` (default 4096) and ``n_test`` (default 512)
    of them are drawn without replacement by ``seed``. ``meta`` names the files of each split
    (``train_files``, ``test_files``), each window's ``(file, byte offset)``
    (``train_windows``, ``test_windows``), the ``root`` folder and ``uniform_loss_nats``.
    """
    context = _option("pytext", "context", context)
    check_size("pytext", "n_train", n_train)
    check_size("pytext", "n_test", n_test)
    check_tokens("pytext", (4096 if n_train is None else n_train)
                 + (512 if n_test is None else n_test), context)
    base = Path(sysconfig.get_paths()["stdlib"] if root is None else root)
    files = stdlib_files(base)
    if not files:
        raise DataError(f"pytext: no .py files under the standard library folder {base} (this "
                        "Python ships without its sources); use the markov dataset")
    splits = {"train": [f for f in files if not _is_validation(f[0])],
              "test": [f for f in files if _is_validation(f[0])]}
    span = context + 1
    rngs = dict(zip(("train", "test"), _streams(seed, 2), strict=True))
    sizes = {"train": 4096 if n_train is None else n_train,
             "test": 512 if n_test is None else n_test}
    arrays: dict[str, np.ndarray] = {}
    windows: dict[str, list[tuple[str, int]]] = {}
    for split, part in splits.items():
        windows[split] = _pick("pytext", split, part, sizes[split], span, rngs[split])
        rows = np.empty((len(windows[split]), span), dtype=np.int64)
        cache: tuple[str, bytes] = ("", b"")
        for i, (rel, offset) in enumerate(windows[split]):
            if cache[0] != rel:
                cache = (rel, (base / rel).read_bytes())
            chunk = cache[1][offset:offset + span]
            if len(chunk) != span:
                raise DataError(f"pytext: {base / rel} changed while it was read; load again")
            rows[i] = np.frombuffer(chunk, dtype=np.uint8)
        arrays[split] = rows
    meta = {"root": str(base), "train_files": [f for f, _ in splits["train"]],
            "test_files": [f for f, _ in splits["test"]], "train_windows": windows["train"],
            "test_windows": windows["test"], "uniform_loss_nats": math.log(256)}
    tr, te = arrays["train"], arrays["test"]
    return _windows("pytext", tr[:, :-1], tr[:, 1:], te[:, :-1], te[:, 1:], 256, meta)

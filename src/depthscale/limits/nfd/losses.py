"""The losses of the NFD training run and of the finite networks it describes (nfd Sec. 2), and
their derivative ``L'(f, y)``, the factor of every SGD update (nfd App. E, Def. 1)."""

from __future__ import annotations

import numpy as np

from depthscale.errors import ConfigError

__all__ = ["LOSSES", "check_loss", "loss_derivative", "loss_value"]

LOSSES: tuple[str, ...] = ("mse", "logistic")


def check_loss(loss: str) -> str:
    """``loss`` if it is one of :data:`LOSSES`, else a ConfigError."""
    if loss not in LOSSES:
        raise ConfigError(f"unknown loss {loss!r}; choose one of: {', '.join(LOSSES)}")
    return loss


def loss_value(loss: str, f: np.ndarray | float, y: np.ndarray | float) -> np.ndarray:
    """``L(f, y)`` of nfd Sec. 2: ``(f - y)^2 / 2`` (``"mse"``) or ``log(1 + exp(-y f))``
    (``"logistic"``, labels ``y`` in {-1, +1}). Elementwise, float64."""
    fa, ya = np.asarray(f, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if check_loss(loss) == "mse":
        return 0.5 * (fa - ya) ** 2
    return np.logaddexp(0.0, -ya * fa)


def loss_derivative(loss: str, f: np.ndarray | float, y: np.ndarray | float) -> np.ndarray:
    """``L'(f, y) = dL/df``, the factor of every SGD update (nfd App. E): ``f - y`` (``"mse"``)
    or ``-y / (1 + exp(y f))`` (``"logistic"``). Elementwise, float64."""
    import scipy.special

    fa, ya = np.asarray(f, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if check_loss(loss) == "mse":
        diff: np.ndarray = fa - ya
        return diff
    logistic: np.ndarray = -ya * scipy.special.expit(-ya * fa)
    return logistic

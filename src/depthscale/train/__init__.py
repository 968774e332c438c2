"""Training: one loop for all models (SGD/Adam from a plan), divergence recorded."""

from depthscale.train.loop import (
    LOSSES,
    TrainConfig,
    TrainResult,
    evaluate,
    loss_fn,
    resolve_device,
    train,
)

__all__ = [
    "LOSSES",
    "TrainConfig",
    "TrainResult",
    "evaluate",
    "loss_fn",
    "resolve_device",
    "train",
]

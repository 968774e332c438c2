"""Training: one loop for all models (SGD/Adam from a plan), divergence recorded."""

from depthscale.train.batched import check_batchable, train_batched
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
    "check_batchable",
    "evaluate",
    "loss_fn",
    "resolve_device",
    "train",
    "train_batched",
]

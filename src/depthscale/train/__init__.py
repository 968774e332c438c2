"""Training: one loop for all models (SGD/Adam from a plan), data checked first, divergence
recorded, an interrupt keeps what finished."""

from depthscale.train.batched import check_batchable, train_batched
from depthscale.train.loop import (
    FINAL_EVALS,
    LOSSES,
    DivergenceMonitor,
    TrainConfig,
    TrainInterrupted,
    TrainResult,
    TrainSettings,
    check_data,
    evaluate,
    loss_fn,
    resolve_device,
    train,
    zero_output_loss,
)

__all__ = [
    "FINAL_EVALS",
    "LOSSES",
    "DivergenceMonitor",
    "TrainConfig",
    "TrainInterrupted",
    "TrainResult",
    "TrainSettings",
    "check_batchable",
    "check_data",
    "evaluate",
    "loss_fn",
    "resolve_device",
    "train",
    "train_batched",
    "zero_output_loss",
]

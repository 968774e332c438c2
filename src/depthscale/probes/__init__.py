"""Diagnostics as functions of (model, data): coordinate checks with a verdict, the LR-transfer
check, two-layer-block updates (and a training hook recording them)."""

from depthscale.probes.ammup import UpdateEnergy, update_energy
from depthscale.probes.collapse import snapshot, two_layer_updates
from depthscale.probes.coord_check import (
    LAYER_TYPES,
    CoordPoint,
    CoordReport,
    LazyFinding,
    SlopeFit,
    coord_check,
    expected_bands,
    measure_point,
)
from depthscale.probes.lr_transfer import TransferReport, TransferSize, lr_transfer_check
from depthscale.probes.update_hooks import two_layer_update_hook

__all__ = [
    "LAYER_TYPES",
    "CoordPoint",
    "CoordReport",
    "LazyFinding",
    "SlopeFit",
    "TransferReport",
    "TransferSize",
    "UpdateEnergy",
    "coord_check",
    "expected_bands",
    "lr_transfer_check",
    "measure_point",
    "snapshot",
    "two_layer_update_hook",
    "two_layer_updates",
    "update_energy",
]

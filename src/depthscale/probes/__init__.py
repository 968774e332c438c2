"""Diagnostics as functions of (model, data): coordinate checks with a verdict, the LR-transfer
check, two-layer-block updates."""

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
    "two_layer_updates",
    "update_energy",
]

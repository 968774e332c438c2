"""Diagnostics as functions of (model, data): coordinate checks with a verdict, the LR-transfer
check, two-layer-block updates (and a training hook recording them), each layer's own update
per block (ResNets with k-layer blocks, the GPT)."""

from depthscale.probes.ammup import UpdateEnergy, update_energy
from depthscale.probes.block_updates import (
    TRANSFORMER_UPDATE_KEYS,
    UpdateProbe,
    block_updates,
    transformer_updates,
)
from depthscale.probes.collapse import snapshot, two_layer_updates
from depthscale.probes.coord_bands import expected_bands
from depthscale.probes.coord_check import (
    LAYER_TYPES,
    CoordPoint,
    CoordReport,
    LazyFinding,
    SlopeFit,
    coord_check,
    measure_point,
)
from depthscale.probes.lr_transfer import TransferReport, TransferSize, lr_transfer_check
from depthscale.probes.update_hooks import two_layer_update_hook

__all__ = [
    "LAYER_TYPES",
    "TRANSFORMER_UPDATE_KEYS",
    "CoordPoint",
    "CoordReport",
    "LazyFinding",
    "SlopeFit",
    "TransferReport",
    "TransferSize",
    "UpdateEnergy",
    "UpdateProbe",
    "block_updates",
    "coord_check",
    "expected_bands",
    "lr_transfer_check",
    "measure_point",
    "snapshot",
    "transformer_updates",
    "two_layer_update_hook",
    "two_layer_updates",
    "update_energy",
]

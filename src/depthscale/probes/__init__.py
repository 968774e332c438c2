"""Diagnostics as functions of (model, data): coordinate checks, two-layer-block updates."""

from depthscale.probes.ammup import UpdateEnergy, update_energy
from depthscale.probes.collapse import snapshot, two_layer_updates
from depthscale.probes.coord_check import CoordPoint, CoordReport, coord_check, measure_point

__all__ = [
    "CoordPoint",
    "CoordReport",
    "UpdateEnergy",
    "coord_check",
    "measure_point",
    "snapshot",
    "two_layer_updates",
    "update_energy",
]

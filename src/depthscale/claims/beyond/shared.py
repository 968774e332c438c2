"""What beyond's claims share: the datasets per scale of the ResNet claims, beyond-adam's
optimizers (and each one's view of its settings), the typed settings as the mapping nfd's
helpers read, and the slope bands of nfd-collapse (fixed before running)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from depthscale.claims.verdicts import Band

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["COLLAPSE", "FLAT", "FULL_DATA", "OPTIMIZERS", "QUICK_DATA", "SMOKE_DATA",
           "nfd_view", "optimizer_settings"]

QUICK_DATA = {"dataset": "mnist1d"}
FULL_DATA = {"dataset": "cifar10"}
SMOKE_DATA = {"dataset": "digits"}

#: beyond-adam's two arms, in their order in its rows and figure
OPTIMIZERS = ("sgd", "adam")


def nfd_view(s: DataclassInstance) -> dict[str, Any]:
    """A claim's typed settings as the mapping nfd's shared helpers read (``s["depths"]``...):
    every field by name; the settings hold every key those helpers read, so it is the
    claim's settings mapping itself."""
    return dataclasses.asdict(s)


def optimizer_settings(s: Mapping[str, Any], optimizer: str) -> dict[str, Any]:
    """beyond-adam's settings as one optimizer's transfer study reads them: its grid
    ``eta_cs_<optimizer>`` as ``eta_cs``."""
    return {**s, "eta_cs": s[f"eta_cs_{optimizer}"]}


#: the slope bands of nfd-collapse: collapse ~ L^(-1/2), flat (no depth dependence)
COLLAPSE: Band = (-0.65, -0.35)
FLAT: Band = (-0.15, 0.15)

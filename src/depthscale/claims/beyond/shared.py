"""What beyond's claims share: the datasets per scale of the ResNet claims, beyond-adam's
optimizers (and each one's view of its settings) and the slope bands of nfd-collapse (fixed
before running)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from depthscale.claims.verdicts import Band

__all__ = ["COLLAPSE", "FLAT", "FULL_DATA", "OPTIMIZERS", "QUICK_DATA", "SMOKE_DATA",
           "optimizer_settings"]

QUICK_DATA = {"dataset": "mnist1d"}
FULL_DATA = {"dataset": "cifar10"}
SMOKE_DATA = {"dataset": "digits"}

#: beyond-adam's two arms, in their order in its rows and figure
OPTIMIZERS = ("sgd", "adam")


def optimizer_settings(s: Mapping[str, Any], optimizer: str) -> dict[str, Any]:
    """beyond-adam's settings as one optimizer's transfer study reads them: its grid
    ``eta_cs_<optimizer>`` as ``eta_cs``."""
    return {**s, "eta_cs": s[f"eta_cs_{optimizer}"]}


#: the slope bands of nfd-collapse: collapse ~ L^(-1/2), flat (no depth dependence)
COLLAPSE: Band = (-0.65, -0.35)
FLAT: Band = (-0.15, 0.15)

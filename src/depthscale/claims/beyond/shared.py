"""What beyond's claims share: the datasets per scale of the ResNet claims, beyond-adam's
optimizers and the slope bands of nfd-collapse (fixed before running)."""

from __future__ import annotations

from depthscale.claims.verdicts import Band

__all__ = ["COLLAPSE", "FLAT", "FULL_DATA", "OPTIMIZERS", "QUICK_DATA", "SMOKE_DATA"]

QUICK_DATA = {"dataset": "mnist1d"}
FULL_DATA = {"dataset": "cifar10"}
SMOKE_DATA = {"dataset": "digits"}

#: beyond-adam's two arms, in their order in its rows and figure
OPTIMIZERS = ("sgd", "adam")

#: the slope bands of nfd-collapse: collapse ~ L^(-1/2), flat (no depth dependence)
COLLAPSE: Band = (-0.65, -0.35)
FLAT: Band = (-0.15, 0.15)

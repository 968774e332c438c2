"""What beyond's claims share: the datasets per scale of the ResNet claims, beyond-adam's
optimizers, the slope bands of nfd-collapse (fixed before running) and the judged part of an
outcome (:class:`Judgement`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from depthscale.claims.verdicts import Band, Decision

__all__ = ["COLLAPSE", "FLAT", "FULL_DATA", "OPTIMIZERS", "QUICK_DATA", "SMOKE_DATA",
           "Judgement"]

QUICK_DATA = {"dataset": "mnist1d"}
FULL_DATA = {"dataset": "cifar10"}
SMOKE_DATA = {"dataset": "digits"}

#: beyond-adam's two arms, in their order in its rows and figure
OPTIMIZERS = ("sgd", "adam")

#: the slope bands of nfd-collapse: collapse ~ L^(-1/2), flat (no depth dependence)
COLLAPSE: Band = (-0.65, -0.35)
FLAT: Band = (-0.15, 0.15)


@dataclass(frozen=True)
class Judgement:
    """What a ``judge_*`` function returns: the verdict with its evidence (from the rules of
    :mod:`depthscale.claims.verdicts`), the bands the outcome reports (fixed before running)
    and a note for the reason."""

    decision: Decision
    note: str
    bands: Mapping[str, Band] = field(default_factory=dict)

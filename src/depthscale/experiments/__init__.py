"""Claims registry and the ``reproduce`` runner (nfd claims register on import)."""

from depthscale.experiments import chizat as _chizat  # noqa: F401
from depthscale.experiments import laws as _laws  # noqa: F401
from depthscale.experiments import nfd as _nfd  # noqa: F401  (registers the nfd claims)
from depthscale.experiments import nfd_init as _nfd_init  # noqa: F401
from depthscale.experiments import nfd_limits as _nfd_limits  # noqa: F401
from depthscale.experiments.claims import (
    CLAIMS,
    PLANNED,
    SCALES,
    Claim,
    ClaimContext,
    ClaimOutcome,
    band_verdict,
)
from depthscale.experiments.reproduce import reproduce, select_claims

__all__ = [
    "CLAIMS",
    "PLANNED",
    "SCALES",
    "Claim",
    "ClaimContext",
    "ClaimOutcome",
    "band_verdict",
    "reproduce",
    "select_claims",
]

"""The papers' claims: one module of runners per paper, the registry they register in on
import, their verdicts, and ``reproduce``. Built on studies, limits, models and probes; nothing
but the CLI imports this package."""

# each paper's package registers its claims on import, in the order of docs/claims.md's sections
# isort: off
from depthscale.claims import nfd as _nfd  # noqa: F401
from depthscale.claims import laws as _laws  # noqa: F401
from depthscale.claims import chizat as _chizat  # noqa: F401
from depthscale.claims import beyond as _beyond  # noqa: F401
# isort: on
from depthscale.claims.registry import CLAIMS, PLANNED, SCALES, Claim, ClaimContext
from depthscale.claims.reproduce import reproduce, select_claims
from depthscale.claims.verdicts import ClaimOutcome, band_verdict

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

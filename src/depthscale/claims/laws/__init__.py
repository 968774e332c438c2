"""Claims of the depth LR-law paper (laws): the L^(-3/2) law, zero-shot transfer, AM-muP.

Each architecture's sweep is a study (``depthscale.studies``) written into
``OUT/<study>/spec.toml`` and run by :func:`~depthscale.studies.sweep.run_study` into that
folder's store: a rerun runs only the missing runs, and claims that need the same sweep share
it; ``depthscale sweep`` and ``depthscale fit`` reproduce any of them by hand
(:func:`depthscale.stats.sweeps.lr_power_law`). Protocol (laws Sec. 4.1): log-spaced LR grid,
one epoch of SGD (batch 128, cross-entropy), eta* minimising the epoch-averaged running loss,
refined by a parabola in log LR, mean and 95% CI of log10 eta* over seeds, weighted least
squares against the effective depth L = m + K (Eq. 9).

Shared modules (none imports a claim module): ``settings``, ``sweeps``, ``law``, ``gates``,
``sequential``, ``figures``; one module per claim (settings -> measure -> judge -> draw ->
conclude), in the registry's order: ``table1``, ``transfer``, ``ammup``, ``ablations``,
``widths``, ``steepening``, ``directions``, ``fig3b`` (PathSum's path sum: ``pathsum``).
"""

from depthscale.claims.laws import table1, transfer, ammup, ablations, widths  # noqa: F401, I001
from depthscale.claims.laws import steepening  # noqa: F401
from depthscale.claims.laws import directions  # noqa: F401
from depthscale.claims.laws import fig3b  # noqa: F401
from depthscale.claims.laws.gates import alpha_finding, law_decision
from depthscale.claims.laws.law import LawResult, fit_law
from depthscale.claims.laws.sequential import sweep
from depthscale.claims.laws.sweeps import at_epoch, study_tables
from depthscale.claims.laws.transfer import transfer_errors, transfer_interval

__all__ = [
    "LawResult",
    "alpha_finding",
    "at_epoch",
    "fit_law",
    "law_decision",
    "study_tables",
    "sweep",
    "transfer_errors",
    "transfer_interval",
]

"""Claims of the depth LR-law paper (laws): the L^(-3/2) law, zero-shot transfer, AM-muP.

Each architecture's sweep is a study (``depthscale.studies``) written as TOML into
``OUT/<study>/spec.toml`` and run through :func:`~depthscale.studies.sweep.run_study` into that
folder's results store: killed and rerun, a claim runs only the missing runs, and claims that
need the same sweep share it. ``depthscale sweep OUT/<study>/spec.toml`` + ``depthscale fit
OUT/<study>`` reproduce any of them by hand, with the same analysis
(:func:`depthscale.stats.sweeps.lr_power_law`). Protocol (laws Sec. 4.1, docs/claims.md B):
log-spaced LR grid, one epoch of SGD (batch 128, cross-entropy), eta* minimising the
epoch-averaged running loss, refined by a parabola in log LR, seeds -> mean and 95% CI of
log10 eta*, weighted least squares against the effective depth L = m + K.

Shared modules, each importing only those before it and no claim module: ``settings``
(architectures and per-scale settings as data), ``sweeps`` (the shared budget, study tables,
effective depth, the AM-muP probes), ``law`` (a sweep's law), ``gates`` (its findings, the
verdict rules and what the one-law-per-sweep claims report), ``sequential`` (a sweep's
stages and sequential seeds), ``figures`` (the law figure three claims draw); and one module
per claim, each written as settings -> measure -> judge -> draw -> conclude: ``table1``,
``transfer``, ``ammup``, ``ablations``, ``widths``, ``steepening`` (imported in this order,
the registry's).
"""

from depthscale.claims.laws import table1, transfer, ammup, ablations, widths  # noqa: F401, I001
from depthscale.claims.laws import steepening  # noqa: F401
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

"""The claims of nfd (Yao, Wu et al., Understanding Scaling Laws in Deep Neural Networks via
Feature Learning Dynamics, arXiv 2512.21075v1), one module per quantity measured; importing
this package registers them all.

* the network at initialisation: :mod:`.init` (Prop. 1, Fig. 1a), :mod:`.coupling` (Props. 2
  and 6: the forward and backward SDEs), :mod:`.kernels` (Prop. 3: the NNGP kernel C_T),
  :mod:`.positivity` (Props. 4-5: C_t's positivity);
* trained networks against the NFD limit (Def. 1): :mod:`.convergence` (Thm. 1), :mod:`.gia`
  (Cor. 1), :mod:`.eigenvalues` (Fig. 6, Assumption 1), on the size series of :mod:`.series`;
* trained networks on data: :mod:`.horizon` (Fig. 2: the time horizon T), :mod:`.collapse`,
  :mod:`.transfer`, :mod:`.deep` (Fig. 5 rows 1-3: the Eq. 8 LR), :mod:`.eq8` (Eq. 8's
  depth-growing step itself), on the settings and studies
  of :mod:`.training`, the slope readout of :mod:`.slopes` and the LR optima of :mod:`.optima`.

Each claim's module reads: its typed ``*Settings`` (read from the ``@claim`` decorator's
mappings) -> ``measure_*`` -> ``judge_*`` (a :class:`~depthscale.claims.verdicts.Judgement`, by
the verdict rules of :mod:`depthscale.stats.findings`) -> ``draw_*`` -> ``conclude``. The
shared modules (:mod:`.series`, :mod:`.slopes`, :mod:`.optima`, :mod:`.training`, the drawing
helpers of :mod:`.figures`) import no claim module.
"""

import importlib

from depthscale.claims.nfd.series import (
    SizeSeries,
    finite_measured,
    finite_outputs,
    gate_on_noise,
    learned_backward,
    learned_backward_check,
    nfd_outputs,
    require_for_refuted,
    series_measured,
    series_route,
    size_series,
    solver_T,
    value_agreement,
    within_noise,
)
from depthscale.claims.nfd.training import (
    ARM_LABELS,
    corrected_arms,
    fig2_tables,
    transfer_tables,
)

__all__ = [
    "ARM_LABELS",
    "CLAIM_MODULES",
    "SizeSeries",
    "corrected_arms",
    "fig2_tables",
    "finite_measured",
    "finite_outputs",
    "gate_on_noise",
    "learned_backward",
    "learned_backward_check",
    "nfd_outputs",
    "require_for_refuted",
    "series_measured",
    "series_route",
    "size_series",
    "solver_T",
    "transfer_tables",
    "value_agreement",
    "within_noise",
]

#: The claim modules, imported (each registering its claims) in this order: the order of the
#: claim catalogue (docs/claims.md) and of ``depthscale reproduce``.
CLAIM_MODULES = ("convergence", "eigenvalues", "init", "pre_post", "horizon", "gia", "collapse",
                 "transfer", "deep", "eq8", "coupling", "kernels", "positivity")

for _module in CLAIM_MODULES:
    importlib.import_module(f"{__name__}.{_module}")

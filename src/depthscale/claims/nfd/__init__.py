"""The claims of nfd (Yao, Wu et al., Understanding Scaling Laws in Deep Neural Networks via
Feature Learning Dynamics, arXiv 2512.21075v1), one module per quantity measured; importing
this package registers them all.

* at initialisation: :mod:`.init` (Prop. 1, Fig. 1a), :mod:`.coupling` (Props. 2 and 6),
  :mod:`.kernels` (Prop. 3), :mod:`.positivity` (Props. 4-5);
* trained networks against the NFD limit (Def. 1): :mod:`.convergence` (Thm. 1), :mod:`.gia`
  (Cor. 1), :mod:`.eigenvalues` (Fig. 6), :mod:`.root_cause` (Prop. 8, Eq. 5);
* trained networks on data: :mod:`.pre_post` (Fig. 1b-c), :mod:`.horizon` (Fig. 2),
  :mod:`.collapse`, :mod:`.transfer`, :mod:`.deep` (Fig. 5 rows 1-3), :mod:`.eq8` (Eq. 8's step).

Each claim's module: its typed ``*Settings`` -> ``measure_*`` -> ``judge_*`` (a
:class:`~depthscale.claims.verdicts.Judgement`) -> ``draw_*`` -> ``conclude``. The shared
modules (:mod:`.series`, :mod:`.slopes`, :mod:`.optima`, :mod:`.training`, :mod:`.figures`)
import no claim module.
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
CLAIM_MODULES = ("convergence", "eigenvalues", "init", "pre_post", "horizon", "gia", "fig4",
                 "root_cause", "collapse", "transfer", "deep", "eq8", "coupling", "kernels",
                 "positivity")

for _module in CLAIM_MODULES:
    importlib.import_module(f"{__name__}.{_module}")

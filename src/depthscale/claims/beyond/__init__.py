"""Open questions of nfd (docs/claims.md section D) as claims: Transformer blocks
(:mod:`.transformer`, Q1), Adam (:mod:`.adam`, Q2), the joint width-depth limit
(:mod:`.joint_limit`, Q3) and blocks of three layers (:mod:`.three_layer`, Q4).

None of these is a statement of the paper: each claim's title states the hypothesis its verdict
tests, measured by the helpers the nfd claims use (the nfd-transfer study and its LR optima, the
own-update probes of nfd App. H Eq. 27, 33-34, the finite-net and NFD-solver runs of nfd-thm1).

Each claim's module: typed settings -> ``measure_*`` -> ``judge_*`` -> ``draw_*`` ->
``conclude``; shared pieces (importing no claim module): :mod:`.spreads` (the eta_c* spread
and its bootstrap), :mod:`.readouts` (own updates read during training and their slopes),
:mod:`.shared` (datasets, bands, settings). Importing the package registers the four claims.
"""

# The claims register in this import order, the catalogue's and reproduce's order.
# isort: off
from depthscale.claims.beyond.adam import adam_tables
from depthscale.claims.beyond import three_layer as _three_layer  # noqa: F401
from depthscale.claims.beyond.transformer import transformer_tables
from depthscale.claims.beyond.joint_limit import joint_widths
# isort: on

__all__ = ["adam_tables", "joint_widths", "transformer_tables"]

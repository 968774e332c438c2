"""Open questions of nfd (docs/claims.md section D) as claims: Transformer blocks
(:mod:`.transformer`, Q1), Adam (:mod:`.adam`, Q2), the joint width-depth limit
(:mod:`.joint_limit`, Q3) and blocks of three layers (:mod:`.three_layer`, Q4).

None of these is a statement of the paper; each claim's title states the hypothesis its verdict
tests, and the verdict classes keep their docs/claims.md meaning. Every number is measured here, by
the helpers the nfd claims use: the nfd-transfer study and its LR-optimum analysis
(:mod:`depthscale.claims.nfd`, :mod:`depthscale.stats.sweeps`), the own-update probes of
nfd App. H (Eq. 27, Eq. 33-34; :mod:`depthscale.probes.block_updates`), and the finite-net and
NFD-solver runs of nfd-thm1 (:mod:`depthscale.claims.nfd`).

Each claim's module reads typed settings -> ``measure_*`` (numbers and CSV rows) ->
``judge_*`` (the verdict by :mod:`depthscale.claims.verdicts`) -> its own ``draw_*`` ->
``conclude``; shared pieces (importing no claim module): :mod:`.spreads` (the eta_c* spread
and its bootstrap), :mod:`.readouts` (own updates read during training and their slopes),
:mod:`.shared` (datasets, bands, the settings as nfd's helpers read them).
Importing the package registers the four claims.
"""

# The claims register in this import order, the catalogue's and reproduce's order.
# isort: off
from depthscale.claims.beyond.adam import adam_tables
from depthscale.claims.beyond import three_layer as _three_layer  # noqa: F401
from depthscale.claims.beyond.transformer import transformer_tables
from depthscale.claims.beyond.joint_limit import joint_widths
# isort: on

__all__ = ["adam_tables", "joint_widths", "transformer_tables"]

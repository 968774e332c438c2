"""Claims of chizat (the hidden width of deep ResNets): Fig. 1, 2, 3, 5a-c, Thm. 1(ii), 2-4.

Setting (chizat Sec. 2.4, :mod:`.setting`): n = 10 pairs (x, y) with N(0, 1) entries in R^D
(``depthscale.data.load("chizat")``), ResNets of 2LP blocks with tanh (Eq. 24), ``sigma_u =
sqrt(D)``, ``sigma_v = alpha sqrt(D)``, full-batch GD with LRs ``eta_u L M`` and ``eta_v L M``
(Eq. 25; ``eta_u = D min(1, alpha^-2)``, ``eta_v = D``, Sec. 4.4) on ``mean_i |h^L(x_i) -
y_i|^2 / (2 D)``. Finite ResNets are simulated by :class:`~depthscale.limits.MeanODE` with
``method="euler"`` and one iid particle set per layer, which *is* Eq. 24-25; the limit
reference (Fig. 1, 2) is the mean of ``ref_runs`` RK4 Mean ODE runs, with its standard error;
Thm. 2 compares with ``limits.TangentODE``. Why: docs/how-it-works.md.

One module per claim: :mod:`.output_error` (Fig. 2), :mod:`.spread_and_travel` (Fig. 5a, 5b),
:mod:`.loss_logs` (Fig. 5c), :mod:`.tangent_gap` (Thm. 2), :mod:`.d_exponents` (Thm. 3),
:mod:`.d_error` (Thm. 4's dependence on D), :mod:`.forward_distance` (Fig. 1),
:mod:`.complete_regime` (Fig. 3), :mod:`.param_distance` (Thm. 1(ii)).
"""

# importing a module registers its claims: in the catalogue's order
# isort: off
from depthscale.claims.chizat import output_error as _output_error  # noqa: F401
from depthscale.claims.chizat import spread_and_travel as _spread_and_travel  # noqa: F401
from depthscale.claims.chizat import loss_logs as _loss_logs  # noqa: F401
from depthscale.claims.chizat import tangent_gap as _tangent_gap  # noqa: F401
from depthscale.claims.chizat import d_exponents as _d_exponents  # noqa: F401
from depthscale.claims.chizat import d_error as _d_error  # noqa: F401
from depthscale.claims.chizat import forward_distance as _forward_distance  # noqa: F401
from depthscale.claims.chizat import complete_regime as _complete_regime  # noqa: F401
from depthscale.claims.chizat import param_distance as _param_distance  # noqa: F401

# isort: on
from depthscale.claims.chizat.d_exponents import d_exponent
from depthscale.claims.chizat.setting import (
    alpha_grid,
    finite_resnet,
    limit_reference,
    paper_grid,
    sigma_v,
)
from depthscale.claims.chizat.tangent_gap import thm2_grid

__all__ = ["alpha_grid", "d_exponent", "finite_resnet", "limit_reference", "paper_grid",
           "sigma_v", "thm2_grid"]

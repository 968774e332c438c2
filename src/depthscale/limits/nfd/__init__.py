"""The Neural Feature Dynamics: online SGD of the ResNet of nfd Eq. 1 in the joint limit.

* :mod:`~depthscale.limits.nfd.simulator`: the NFD training simulator (nfd Def. 1, App. G
  Eq. 15), with the forward-backward couplings of Eq. 15 and of the Tensor-Program responses.
* :mod:`~depthscale.limits.nfd.cholesky`: the Cholesky factor of the growing Brownian
  covariances ``Sigma_t^(k)``, ``Theta_t^(k)`` (Def. 1), extended by one row per step.
* :mod:`~depthscale.limits.nfd.ntk`: the first-order kernel of one SGD step (App. E, Cor. 1).
* :mod:`~depthscale.limits.nfd.losses`: the losses and ``L'(f, y)`` (nfd Sec. 2).
"""

from depthscale.limits.nfd.cholesky import CholeskyRows
from depthscale.limits.nfd.losses import LOSSES, loss_derivative, loss_value
from depthscale.limits.nfd.ntk import NTK_BACKWARDS, ntk_kernel
from depthscale.limits.nfd.simulator import COUPLINGS, FACTOR_UPDATES, NFD, NFDResult

__all__ = [
    "COUPLINGS",
    "FACTOR_UPDATES",
    "LOSSES",
    "NFD",
    "NTK_BACKWARDS",
    "CholeskyRows",
    "NFDResult",
    "loss_derivative",
    "loss_value",
    "ntk_kernel",
]

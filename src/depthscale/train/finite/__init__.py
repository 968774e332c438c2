"""The finite networks the limit solvers are compared against, trained as the papers train them.

* :mod:`~depthscale.train.finite.nfd`: online SGD of the ResNets of nfd Eq. 1 and 6 (and the
  vanilla DNN of Fig. 4a) under depth-muP, the finite side of
  :class:`depthscale.limits.nfd.NFD`; the teacher stream of the online task.
* :mod:`~depthscale.train.finite.mean_ode`: full-batch GD on chizat's ResNet of Eq. 24 (Eq. 25),
  the brute-force reference of :class:`depthscale.limits.mean_ode.MeanODE`.

They live here, not beside their solvers in :mod:`depthscale.limits`: they build their networks
with :mod:`depthscale.models`, a floor above the solvers (docs/development.md "Layers").
"""

from depthscale.train.finite.mean_ode import FiniteResNetResult, train_finite_resnet
from depthscale.train.finite.nfd import ONLINE_MODELS, FiniteRun, online_sgd_finite, teacher_stream

__all__ = ["ONLINE_MODELS", "FiniteResNetResult", "FiniteRun", "online_sgd_finite",
           "teacher_stream", "train_finite_resnet"]

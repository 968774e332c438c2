"""The batched engine: G copies of one model (different base LRs or seeds) trained by plain SGD
in one pass, the hot path of a learning-rate sweep; member ``i`` reproduces, to float rounding,
:func:`depthscale.train.train` with ``lr = lrs[i]``.

* :mod:`~depthscale.train.batched.trainer`: the pass (:func:`train_batched`): data order,
  per-member step sizes, divergence, evaluations.
* :mod:`~depthscale.train.batched.program`: the G members as one program, forward and step
  (hand-batched MLPs with a written-out backward, else ``torch.func.vmap``).
* :mod:`~depthscale.train.batched.laws`: hand-batched forwards of the laws models (grouped
  convolutions, batched matmuls for the ViT).
* :mod:`~depthscale.train.batched.linear`: the batched linear map they are built on.
"""

from depthscale.train.batched.trainer import (
    EVAL_CHUNK,
    check_batchable,
    reuse_freed_memory,
    sgd_step,
    train_batched,
)

__all__ = ["EVAL_CHUNK", "check_batchable", "reuse_freed_memory", "sgd_step", "train_batched"]

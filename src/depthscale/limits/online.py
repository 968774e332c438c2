# TEMP re-export for claims/, removed at merge
"""The finite networks trained by online SGD moved to :mod:`depthscale.train.online`; claims/
still imports them from here: ``online_sgd_finite``, ``teacher_stream``."""

from depthscale.train.online import online_sgd_finite, teacher_stream

__all__ = ["online_sgd_finite", "teacher_stream"]

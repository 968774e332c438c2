"""Deprecated since 0.2: ``depthscale.experiments`` was split into :mod:`depthscale.claims` (the
papers' claims, ``reproduce``) and :mod:`depthscale.studies` (sweeps, store, analysis). This
shim keeps the old import paths working for one release, with a DeprecationWarning; it will be
removed in 0.3."""

from __future__ import annotations

import importlib
import sys
import types
import warnings

from depthscale.claims import (  # noqa: F401  (the old package-level names)
    CLAIMS,
    PLANNED,
    SCALES,
    Claim,
    ClaimContext,
    ClaimOutcome,
    band_verdict,
    reproduce,
    select_claims,
)

warnings.warn(
    "depthscale.experiments is deprecated and will be removed in 0.3: import the claims from "
    "depthscale.claims and the study engine from depthscale.studies (see the README's changelog)",
    DeprecationWarning,
    stacklevel=2,
)

#: old submodule -> the modules its names now live in
MOVED: dict[str, tuple[str, ...]] = {
    "study": ("depthscale.studies.spec", "depthscale.studies.records", "depthscale.studies.runner"),
    "store": ("depthscale.studies.store",),
    "executors": ("depthscale.studies.executors",),
    "sweep": ("depthscale.studies.sweep",),
    "analysis": ("depthscale.stats.sweeps", "depthscale.stats.fits"),
    "claims": ("depthscale.claims.registry", "depthscale.claims.verdicts"),
    "reproduce": ("depthscale.claims.reproduce",),
    "nfd": ("depthscale.claims.nfd",),
    "nfd_init": ("depthscale.claims.nfd.coupling", "depthscale.claims.nfd.kernels"),
    "nfd_limits": ("depthscale.claims.nfd.series", "depthscale.claims.nfd.convergence",
                   "depthscale.claims.nfd.eigenvalues"),
    "laws": ("depthscale.claims.laws",),
    "chizat": ("depthscale.claims.chizat",),
}

for _old, _targets in MOVED.items():
    if len(_targets) == 1:  # moved whole: the old name is the new module
        _alias = importlib.import_module(_targets[0])
    else:  # split: a module holding the public names of its parts
        _alias = types.ModuleType(f"{__name__}.{_old}", f"Moved to {', '.join(_targets)}.")
        for _target in _targets:
            _part = importlib.import_module(_target)
            _alias.__dict__.update({k: getattr(_part, k) for k in _part.__all__})
    sys.modules[f"{__name__}.{_old}"] = _alias
    globals()[_old] = _alias

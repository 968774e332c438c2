"""The pre-0.2 import paths (depthscale.experiments.*) still work for one release, and warn."""

from __future__ import annotations

import importlib
import sys

import pytest


def test_old_import_paths_warn_and_give_the_moved_objects() -> None:
    for name in [m for m in sys.modules if m.startswith("depthscale.experiments")]:
        del sys.modules[name]
    with pytest.warns(DeprecationWarning, match="depthscale.claims"):
        importlib.import_module("depthscale.experiments")
    from depthscale.experiments.analysis import fit_error_law, wls_power_law
    from depthscale.experiments.claims import band_verdict, claim
    from depthscale.experiments.nfd_limits import size_series as old_size_series
    from depthscale.experiments.study import RunRecord, expand, load_study, run_one

    from depthscale.claims import CLAIMS
    from depthscale.claims.nfd import size_series
    from depthscale.experiments import CLAIMS as OLD_CLAIMS
    from depthscale.stats.fits import fit_error_law as new_fit_error_law
    from depthscale.studies.runner import run_one as new_run_one

    assert OLD_CLAIMS is CLAIMS and old_size_series is size_series
    assert run_one is new_run_one and fit_error_law is new_fit_error_law
    assert all(callable(f) for f in (wls_power_law, band_verdict, claim, expand, load_study))
    assert RunRecord.__module__ == "depthscale.studies.records"

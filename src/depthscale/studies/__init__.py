"""Studies: grids of training runs described by a TOML spec (or tables), run into a resumable
store. General machinery that knows nothing of any paper's claims; the analysis of the runs
(optima per size, seed summaries, power laws with CIs: laws Sec. 4.1) is
:mod:`depthscale.stats.sweeps`, on the records the store returns.

* :mod:`~depthscale.studies.spec`: parse and validate a spec (its records and their expansion
  into runs: :mod:`~depthscale.studies.spec_records`; its size bounds:
  :mod:`~depthscale.studies.spec_bounds`);
* :mod:`~depthscale.studies.records`: what a run produced;
* :mod:`~depthscale.studies.runner`: run one run, or a batched group of LR siblings;
* :mod:`~depthscale.studies.store`: the SQLite results store and its writer lock;
* :mod:`~depthscale.studies.executors`: in-process, process-pool and Ray executors;
* :mod:`~depthscale.studies.sweep`: the run loop (:func:`run_study`: skip what is stored).
"""

from depthscale.studies.records import RunRecord
from depthscale.studies.spec import AnalysisSpec, RunSpec, StudySpec, expand, load_study, run_id
from depthscale.studies.store import open_store
from depthscale.studies.sweep import StudyResult, run_study

__all__ = [
    "AnalysisSpec",
    "RunRecord",
    "RunSpec",
    "StudyResult",
    "StudySpec",
    "expand",
    "load_study",
    "open_store",
    "run_id",
    "run_study",
]

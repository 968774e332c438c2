"""``depthscale sweep``: load a study spec, run what its store lacks, record every run.

:func:`run_study` is restartable: runs already in the store (done, diverged, or failed unless
``retry_failed``) are skipped, each finished run is committed as it arrives, and a study killed
at any point loses at most the runs in flight.

With ``batch_lrs`` the runs that differ only in ``lr`` (and whose model and optimizer
:func:`~depthscale.train.train_batched` supports) are trained as one batched group per worker
task (:func:`~depthscale.studies.runner.lr_groups`); a group's records are committed when it
finishes, so a kill loses at most the groups in flight, and a rerun batches only the members the
store lacks. Batching is opt-in: records then equal one-by-one runs only to float rounding (so
a run's outcome would depend on the flag), a group is one task (less parallelism with many
workers), and the CPU gain depends on width (figures: docs/performance.md).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from depthscale.errors import DataError
from depthscale.studies.executors import make_executor
from depthscale.studies.runner import check_runs, lr_groups
from depthscale.studies.spec import StudySpec, expand, load_study
from depthscale.studies.store import STORE_FILE, StoreSummary, open_store

__all__ = ["ProgressFactory", "StudyResult", "run_study"]

#: Given the number of runs to do, a context manager yielding ``advance(k)``.
ProgressFactory = Callable[[int], AbstractContextManager[Callable[[int], None]]]


@dataclass(frozen=True)
class StudyResult:
    """What one :func:`run_study` call did: runs planned, already stored (skipped), run now,
    their counts by status, the store's summary afterwards, and how many of the runs to do were
    planned in batched LR groups (``batched``, in ``groups`` groups; 0 without ``batch_lrs``)."""

    name: str
    out_dir: Path
    planned: int
    skipped: int
    ran: int
    counts: dict[str, int] = field(default_factory=dict)
    summary: StoreSummary | None = None
    batched: int = 0
    groups: int = 0


@contextlib.contextmanager
def _no_progress(total: int) -> Iterator[Callable[[int], None]]:
    yield lambda k: None


def run_study(
    spec: StudySpec | str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    backend: str = "local",
    workers: int = 1,
    address: str | None = None,
    progress: ProgressFactory | None = None,
    *,
    retries: int = 3,
    retry_failed: bool = False,
    wait: float = 5.0,
    batch_lrs: bool = False,
) -> StudyResult:
    """Run ``spec`` (a :class:`StudySpec`, e.g. from
    :func:`~depthscale.studies.spec.study_from_tables`, or the path of a TOML spec) into the
    store in ``out_dir``.

    Order of checks, none of which touches existing results: the spec (ConfigError), the
    backend (ConfigError, e.g. ray not installed), the store (DataError: in use by another
    process after ``wait`` seconds, read-only, not a depthscale store), then the first pending
    run (for a user factory, the first of each model configuration, with one training step) is
    built and its loss taken on two examples (ConfigError/DataError for settings that
    cannot run; for a new study this comes before the store, so a refused study leaves no
    folder). Then the planned set and
    a copy of the spec (``out_dir/study.toml``) are written and the pending runs executed; the
    driver records each one in its own transaction as it finishes. ``batch_lrs`` trains the
    pending runs that differ only in ``lr`` as batched groups (see the module docstring) on any
    backend; runs that cannot be batched run one by one.
    """
    study = spec if isinstance(spec, StudySpec) else load_study(spec)
    runs = expand(study)
    executor = make_executor(backend, workers=workers, address=address, retries=retries)
    out = Path(out_dir)
    counts = {"done": 0, "diverged": 0, "failed": 0}
    fresh = not (out / STORE_FILE).exists()
    if fresh and runs:  # a new study that cannot run leaves no store behind
        check_runs(runs, check_device=backend != "ray")
    with open_store(out, wait=wait) as store:
        todo = store.pending(runs, retry_failed=retry_failed)
        if todo and not fresh:
            # a setting that cannot run fails here, once, before any work (Ray workers may have
            # devices the driver lacks: the device is theirs to check)
            check_runs(todo, check_device=backend != "ray")
        store.set_plan(study, runs)
        _copy_spec(out, study.text)
        units = lr_groups(todo) if batch_lrs else [(s,) for s in todo]
        grouped = [u for u in units if len(u) > 1]
        ran = 0
        with (progress or _no_progress)(len(todo)) as advance, \
                contextlib.closing(executor.run_groups(units)) as results:
            for record in results:
                if store.record(record):
                    counts[record.status] += 1
                    ran += 1
                advance(1)
        summary = store.summary()
    return StudyResult(name=study.name, out_dir=out, planned=len(runs),
                       skipped=len(runs) - len(todo), ran=ran, counts=counts, summary=summary,
                       batched=sum(len(u) for u in grouped), groups=len(grouped))


def _copy_spec(out: Path, text: str) -> None:
    from depthscale.io.atomic import atomic_write

    try:
        with atomic_write(out / "study.toml") as fh:
            fh.write(text)
    except OSError as exc:
        raise DataError(f"cannot write {out / 'study.toml'} ({exc.strerror or exc})") from None

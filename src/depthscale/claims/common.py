"""What every paper's claims share: the claim's dataset (with the shuffled-labels control), a
study run from tables into the claim's folder, and small record readers.

A claim builds its training grid as study tables (``{"study": ..., "train": ..., "grid":
...}``), validated by :func:`~depthscale.studies.spec.study_from_tables` and run by
:func:`~depthscale.studies.sweep.run_study` into ``OUT/<name>/``: a killed ``reproduce``
resumes, and the copy written to ``OUT/<name>/spec.toml`` reruns the same study by hand with
``depthscale sweep``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import statistics
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from depthscale import data as ds_data
from depthscale.claims.registry import ClaimContext
from depthscale.errors import ConfigError, DataError
from depthscale.io.atomic import atomic_write
from depthscale.studies.spec import StudySpec, expand, run_id, study_from_tables
from depthscale.studies.spec_toml import study_toml
from depthscale.studies.store import STORE_FILE, open_store
from depthscale.studies.sweep import run_study

__all__ = ["budget_stop", "claim_dataset", "mean_finite", "metric", "run_claim_study",
           "stored_array", "stored_rows"]


def claim_dataset(ctx: ClaimContext) -> ds_data.Dataset:
    """The claim's dataset (``ctx.settings["dataset"]``, split seeded by the claim's seed);
    ``labels = "shuffled"`` (a negative control) permutes the train and the test labels
    independently, so that nothing learnable links inputs to labels."""
    data = ds_data.load(ctx.settings["dataset"], data_dir=ctx.data_dir, seed=ctx.seed)
    labels = ctx.settings.get("labels", "true")
    if labels == "true":
        return data
    if labels != "shuffled":
        raise ConfigError(f"labels must be 'true' or 'shuffled', got {labels!r}")
    gen = torch.Generator().manual_seed(ctx.seed)
    return dataclasses.replace(
        data, y_train=data.y_train[torch.randperm(len(data.y_train), generator=gen)],
        y_test=data.y_test[torch.randperm(len(data.y_test), generator=gen)])


def run_claim_study(ctx: ClaimContext, folder_name: str, tables: Mapping[str, Any], *,
                    retry_failed: bool = True,
                    fail_on_failed: bool = True) -> list[dict[str, Any]]:
    """Run (or resume) the study ``tables`` into ``OUT/<folder_name>/`` (a copy of its spec in
    ``spec.toml`` there) and return its planned runs' records. ``retry_failed`` reruns runs
    that failed before; ``fail_on_failed`` raises when any planned run failed. Under
    ``ctx.from_stored`` nothing trains: the records are read from the store, a missing run is
    a DataError (:func:`_stored_study`)."""
    folder = ctx.out_dir / folder_name
    path = folder / "spec.toml"
    text = study_toml(tables)
    # its runs were bounded before any claim ran (reproduce, --set); the scale's own are the
    # claim's design
    study = study_from_tables(tables, source=str(path), text=text, check_cost=False)
    if ctx.from_stored:
        return _stored_study(folder, folder_name, study)
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if ctx.shared_runs is not None:
        ctx.runs_copied += _copy_shared_runs(ctx.shared_runs / folder_name, folder, study)

    @contextlib.contextmanager
    def progress(total: int) -> Iterator[Callable[[int], None]]:
        ctx.extend_total(total)
        yield ctx.progress

    # ``reproduce --workers`` (ClaimContext.workers): a process pool; ``--ray``: Ray tasks on
    # that cluster; the runs are identical. ``reproduce --batch-lrs``: LR groups trained as one
    # batched run (equal to float rounding)
    run_study(study, folder, backend="local" if ctx.ray_address is None else "ray",
              address=ctx.ray_address, progress=progress, retry_failed=retry_failed,
              workers=ctx.workers, batch_lrs=ctx.batch_lrs)
    with open_store(folder, readonly=True) as store:
        records = [dict(r) for r in store.records(planned_only=True)]
    failed = [r for r in records if r["status"] == "failed"]
    if failed and fail_on_failed:
        raise RuntimeError(f"{len(failed)} run(s) of {folder_name} failed, first: "
                           f"{failed[0]['error']} (see 'depthscale status {folder}')")
    return records


def _copy_shared_runs(source: Path, folder: Path, study: StudySpec) -> int:
    """Copy into ``folder``'s store each finished (done or diverged) run of ``source``'s store
    that ``study`` plans and ``folder`` lacks; return how many. A run id is a hash of the whole
    run spec (seed, data, device, every setting), so a copied run is the one training would
    produce; ``source`` is only read."""
    if not (source / STORE_FILE).exists():
        return 0
    with open_store(folder) as store:
        lacking = {run_id(spec) for spec in store.pending(expand(study), retry_failed=True)}
        if not lacking:  # a resumed control: nothing to read from the source
            return 0
        with open_store(source, readonly=True) as shared:
            found = [r for r in shared.records()
                     if r.run_id in lacking and r.status in ("done", "diverged")]
        return sum(store.record(r) for r in found)


def _stored_study(folder: Path, folder_name: str, study: StudySpec) -> list[dict[str, Any]]:
    """``reproduce --from-stored``: the records of ``study``'s runs, in plan order, read from
    ``folder`` without training or writing; DataError naming the first missing run when any
    is not stored."""
    runs = expand(study)
    if not (folder / STORE_FILE).exists():
        raise DataError(f"--from-stored: no stored runs of {folder_name} in {folder} (its "
                        f"{len(runs)} runs were never trained there); run without --from-stored "
                        "to train them")
    with open_store(folder, readonly=True) as store:
        missing = store.pending(runs, retry_failed=False)
        by_id = {r.run_id: dict(r) for r in store.records()}
    if missing:
        first = missing[0]
        raise DataError(f"--from-stored: {len(missing)} of {len(runs)} runs of {folder_name} "
                        f"are not stored in {folder} (first: depth {first.depth}, width "
                        f"{first.width}, lr {first.lr:.4g}, seed {first.seed}, device "
                        f"{first.device}); run without --from-stored to train them")
    return [by_id[run_id(r)] for r in runs]


def _missing_stored(path: Path) -> DataError:
    return DataError(f"--from-stored: {path} is not stored (this claim's settings, seed, scale "
                     "and device never computed it there); run without --from-stored")


def _stored_path(ctx: ClaimContext, folder_name: str, key: Mapping[str, Any],
                 suffix: str) -> Path:
    """``OUT/<folder_name>/<hash><suffix>``, the hash over ``key``, the claim's settings,
    seed, scale, device and data folder (a changed setting or a negative control reads none
    of another's)."""
    what = json.dumps({"key": key, "settings": ctx.settings, "seed": ctx.seed,
                       "scale": ctx.scale, "device": ctx.device,
                       "data_dir": None if ctx.data_dir is None else str(ctx.data_dir)},
                      sort_keys=True, default=str)
    return ctx.out_dir / folder_name / f"{hashlib.sha256(what.encode()).hexdigest()[:32]}{suffix}"


def stored_array(ctx: ClaimContext, folder_name: str, key: Mapping[str, Any],
                 compute: Callable[[], np.ndarray]) -> np.ndarray:
    """``compute()``, kept in ``OUT/<folder_name>/`` (:func:`_stored_path`, ``.npy``) so that
    a killed claim whose work is not a study (solver and finite-net outputs) resumes where it
    stopped."""
    path = _stored_path(ctx, folder_name, key, ".npy")
    if path.exists():
        stored: np.ndarray = np.load(path)
        return stored
    if ctx.from_stored:
        raise _missing_stored(path)
    value = np.asarray(compute())
    with atomic_write(path, "wb") as fh:  # a kill leaves no half-written file
        np.save(fh, value)
    return value


def stored_rows(ctx: ClaimContext, folder_name: str, key: Mapping[str, Any],
                compute: Callable[[], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """:func:`stored_array` for one training run's readout rows (flat JSON records: floats
    round-trip exactly, NaN included)."""
    path = _stored_path(ctx, folder_name, key, ".json")
    if path.exists():
        rows: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
        return rows
    if ctx.from_stored:
        raise _missing_stored(path)
    value = compute()
    with atomic_write(path) as fh:
        json.dump(value, fh)
    return value


def budget_stop(ctx: ClaimContext, spent: float, cost: float, what: str) -> str:
    """Why a sequential design's next round (``what``) must not start: the claim's stored run
    time so far plus the round's estimated cost, each over the workers, exceed its budget
    (``reproduce --budget``, ``ctx.budget_seconds``); "" where it fits or there is none."""
    budget = ctx.budget_seconds
    spent, cost = spent / ctx.workers, cost / ctx.workers
    if budget is None or spent + cost <= budget:
        return ""
    return f"budget: {spent:.0f} s spent + {cost:.0f} s for {what} > {budget:.0f} s"


def metric(record: Mapping[str, Any], key: str) -> float:
    """A run record's metric as a float (NaN where the run did not measure it)."""
    value = record.get(key)
    return math.nan if value is None else float(value)


def mean_finite(values: Sequence[float]) -> float:
    """The mean of the finite values (NaN when none is)."""
    finite = [v for v in values if math.isfinite(v)]
    return statistics.fmean(finite) if finite else math.nan

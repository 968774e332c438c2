"""Benchmark "sweep-overhead": what the study machinery costs per run.

Ours: :func:`depthscale.studies.sweep.run_study` (spec parsing, run hashing, the SQLite
store with one transaction per run, the in-process executor) on a study of runs that each train
for about a second. Baseline: the same runs through :func:`run_one` in a plain loop, no store.
Goal (issue): overhead at most 5% of the training time, i.e. ratio baseline/ours >= 0.95.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from depthscale.benchmarks.core import BenchResult
from depthscale.studies.runner import run_one
from depthscale.studies.spec import expand, parse_study
from depthscale.studies.sweep import run_study

__all__ = ["run"]

_SPEC = """
[study]
name = "overhead"
model = "resnet1"
recipe = "depth-mup"
dataset = "teacher"
[data]
n_train = 512
n_test = 64
[train]
steps = {steps}
batch_size = 64
loss = "mse"
[grid]
depth = [8]
width = [128]
seed = {seeds}
lr = [0.01, 0.02]
"""


def run(quick: bool = False) -> BenchResult:
    """Runs of about a second each (quick: a fifth of that), 8 of them (quick: 4); a fresh
    store every time."""
    steps, seeds = (40, [0, 1]) if quick else (200, [0, 1, 2, 3])
    text = _SPEC.format(steps=steps, seeds=seeds)
    runs = expand(parse_study(text))
    run_one(runs[0])  # warm-up: imports and data generation are nobody's overhead
    t0 = time.perf_counter()
    for spec in runs:
        run_one(spec)
    baseline = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spec.toml"
        path.write_text(text)
        t0 = time.perf_counter()
        run_study(path, Path(tmp) / "out")
        ours = time.perf_counter() - t0
    per_run = baseline / len(runs)
    return BenchResult(
        name="sweep-overhead",
        baseline="run_one in a plain loop (no spec, store or executor)",
        baseline_seconds=baseline,
        ours_seconds=ours,
        extra={"runs": len(runs), "seconds_per_run": per_run,
               "overhead_per_run_seconds": (ours - baseline) / len(runs),
               "overhead_fraction": (ours - baseline) / baseline,
               "goal": "overhead <= 5% of training time (ratio >= 0.95)",
               "met": baseline / ours >= 0.95},
    )

"""Benchmarks: our code timed against a plain baseline in the same process.

``BENCHMARKS`` maps a name to a callable taking ``quick`` and returning a
:class:`~depthscale.benchmarks.core.BenchResult`; :func:`run_benchmarks` runs some or all of
them and can write the results, with a description of the machine, to JSON.
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from depthscale.benchmarks import batched_sweep as _batched_sweep
from depthscale.benchmarks import kernel as _kernel
from depthscale.benchmarks import laws_sweep as _laws_sweep
from depthscale.benchmarks import mean_ode as _mean_ode
from depthscale.benchmarks import nfd as _nfd
from depthscale.benchmarks import sde as _sde
from depthscale.benchmarks import sweep_overhead as _sweep_overhead
from depthscale.benchmarks.core import BenchResult, best_time
from depthscale.benchmarks.plan_overhead import bench_plan_overhead
from depthscale.errors import ConfigError
from depthscale.io.atomic import atomic_write
from depthscale.io.outputs import BENCH_JSON, JSON_MARKER, check_output_file

__all__ = ["BENCHMARKS", "BenchResult", "best_time", "machine_info", "run_benchmarks"]

BENCHMARKS: dict[str, Callable[[bool], BenchResult]] = {
    "plan-overhead": bench_plan_overhead,
    "kernel": _kernel.run,
    "sde": _sde.run,
    "nfd": _nfd.run,
    "mean-ode": _mean_ode.run,
    "batched-sweep": _batched_sweep.run,
    "sweep-overhead": _sweep_overhead.run,
    **{f"laws-sweep-{m}": partial(_laws_sweep.run, m) for m in _laws_sweep.MODELS},
}


def machine_info() -> dict[str, Any]:
    """Python, torch and numpy versions, CPU count and the threads torch uses."""
    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "cpu_count": os.cpu_count(),
        "cpu_affinity": affinity,
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
    }


def _json_safe(value: Any) -> Any:
    """Non-finite floats become None so the file stays strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


#: benchmarks that take ``device`` (the rest time CPU code against CPU baselines)
_ON_ANY_DEVICE = ("batched-sweep",)


def run_benchmarks(
    names: list[str] | None, *, quick: bool, json_path: Path | None = None, device: str = "cpu"
) -> list[BenchResult]:
    """Run the benchmarks called ``names`` (all when None), in order, on ``device``.

    Unknown names, and a device other than "cpu" for a benchmark that runs on the CPU only
    (every one but ``batched-sweep``), raise :class:`~depthscale.errors.ConfigError` before
    anything runs. With
    ``json_path`` the results go to ``{"depthscale_output": "bench", "benchmarks": [...],
    "machine": {...}}``, written atomically (non-finite numbers as null) and only over an
    earlier such file (checked before anything runs).
    """
    chosen = list(BENCHMARKS) if names is None else list(names)
    unknown = [n for n in chosen if n not in BENCHMARKS]
    if unknown:
        raise ConfigError(
            f"unknown benchmark(s) {', '.join(map(repr, unknown))}; "
            f"choose from: {', '.join(BENCHMARKS)}"
        )
    if json_path is not None:  # before any benchmark runs
        check_output_file(json_path, "JSON", BENCH_JSON)
    cpu_only = [n for n in chosen if n not in _ON_ANY_DEVICE]
    if device != "cpu" and cpu_only:
        raise ConfigError(
            f"benchmark(s) {', '.join(cpu_only)} run on the CPU only (numpy solvers or CPU "
            f"ratios); --device {device} applies to: {', '.join(_ON_ANY_DEVICE)}"
        )
    results = [_batched_sweep.run(quick, device=device) if name == "batched-sweep"
               else BENCHMARKS[name](quick) for name in chosen]
    if json_path is not None:
        payload = {
            JSON_MARKER: "bench",
            "benchmarks": [r.to_json() for r in results],
            "machine": machine_info(),
            "quick": quick,
        }
        with atomic_write(Path(json_path)) as fh:
            json.dump(_json_safe(payload), fh, indent=2, allow_nan=False)
            fh.write("\n")
    return results

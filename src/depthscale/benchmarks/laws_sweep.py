"""``laws-sweep-<model>``: one depth of a laws claim's LR sweep, batched against one by one.

The laws claims (laws Table 1: cnn1d of Eq. 3, convresnet1d of Eq. 4, the Post-LN ViT of Sec.
3.5) sweep G learning rates per depth. Ours: :func:`~depthscale.train.train_batched` (grouped
convolutions, batched matmuls, :mod:`depthscale.train.batched.laws`). Baseline:
:func:`depthscale.train.train` once per LR on a fresh copy of the same initial model. Both take
the quick scale's settings (:data:`~depthscale.claims.laws.settings.ARCHS_QUICK`) at the middle
depth of the quick grid and the same seeded data order.

The figure is loop time / batched time on ``THREADS`` torch threads (goal >= ``GOAL_RATIO``),
alternating, best of ``REPEATS``; ``extra["one_thread"]`` repeats it on one thread (every sweep
run's setting). Members are compared with the loop on one thread (``matches_one_thread_loop``,
``members_within_rtol``): at the edge of stability more threads round differently and the
dynamics amplify it, so the check is exact-to-rounding only where they are not chaotic.
``extra["load"]`` holds the load average before and after the timing.
"""

from __future__ import annotations

import copy
import math
import os
import time
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np
import torch

from depthscale.benchmarks.batched_sweep import agreement
from depthscale.benchmarks.core import BenchResult
from depthscale.data import load
from depthscale.models import build
from depthscale.train import TrainConfig, TrainResult, train, train_batched

__all__ = ["GOAL_RATIO", "MODELS", "measure", "run"]

MODELS = ("cnn1d", "convresnet1d", "vit")
THREADS = 2
GOAL_RATIO = 2.0
LOSS_RTOL = 1e-5
REPEATS = 2  # timings per side (best of), alternating which goes first
ONE_THREAD = True  # also time on one thread
QUICK_MEMBERS = 4  # --quick: the first LRs of the grid, few steps, the smallest depth
QUICK_STEPS = 3


def _setting(model: str) -> dict[str, Any]:
    """The quick scale's architecture of ``model`` (laws claims' settings)."""
    from depthscale.claims.laws.settings import ARCHS_QUICK

    return dict(ARCHS_QUICK[model])


def measure(model_name: str, *, quick: bool = False, threads: int = THREADS,
            repeats: int = REPEATS, one_thread: bool = ONE_THREAD) -> BenchResult:
    """Time the sweep of one depth both ways (see the module docstring)."""
    arch = _setting(model_name)
    lo, hi, num = arch["lr_logspace"]
    lrs = [float(v) for v in np.logspace(lo, hi, num)]
    depths = list(arch["depths"])
    depth = depths[0] if quick else depths[len(depths) // 2]
    data = load(arch["dataset"], seed=0, **arch.get("data", {}))
    model, plan = build(arch["model"], arch.get("recipe", "laws"),
                        input_shape=tuple(arch["input_shape"]), n_out=data.n_out,
                        width=arch["width"], depth=depth, seed=0, **arch.get("options", {}))
    per_epoch = math.ceil(len(data.x_train) / 128)
    if quick:
        lrs = lrs[:QUICK_MEMBERS]
    config = TrainConfig(optimizer="sgd", steps=QUICK_STEPS if quick else per_epoch,
                         batch_size=128, loss="ce", seed=0, final_eval="test")

    def loop() -> list[TrainResult]:
        return [train(copy.deepcopy(model), plan, data, replace(config, lr=lr)) for lr in lrs]

    batched = partial(train_batched, model, plan, data, config, lrs)
    old = torch.get_num_threads()
    out: dict[int, list[TrainResult]] = {}
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    try:
        torch.set_num_threads(1)
        reference = loop()  # untimed: the loop as every sweep run trains (one thread)
        timings: dict[int, dict[str, float]] = {}
        for n in ([threads, 1] if one_thread and threads != 1 else [threads]):
            torch.set_num_threads(n)
            train_batched(model, plan, data, replace(config, steps=1), lrs[:2])  # warm-up
            best = {"loop": math.inf, "batched": math.inf}
            for r in range(repeats):
                order = ("loop", "batched") if r % 2 == 0 else ("batched", "loop")
                for who in order:
                    t0 = time.perf_counter()
                    if who == "batched":
                        out[n] = batched()
                    else:
                        loop()
                    best[who] = min(best[who], time.perf_counter() - t0)
            timings[n] = best
    finally:
        torch.set_num_threads(old)
    load_after = os.getloadavg() if hasattr(os, "getloadavg") else None
    agree = agreement(reference, out[threads])
    matches = bool(agree["status_match"] and agree["max_rel_loss_diff_ok_members"] <= LOSS_RTOL)
    main = timings[threads]
    ratio = main["loop"] / main["batched"]
    extra: dict[str, Any] = {
        "model": arch["model"], "recipe": arch.get("recipe", "laws"), "data": data.name,
        "n_train": len(data.x_train), "width": arch["width"], "depth": depth,
        "members": len(lrs), "lrs": lrs, "steps": config.steps, "batch": 128,
        "torch_threads": threads, "repeats": repeats, "timing": "best of repeats, alternating",
        "statuses": [r.status for r in out[threads]],
        "diverged_at": [r.diverged_at for r in out[threads]],
        **{f"vs_one_thread_loop_{k}": v for k, v in agree.items()},
        "members_within_rtol": sum(d <= LOSS_RTOL for d in agree["max_rel_loss_diff_per_member"]),
        "loss_rtol": LOSS_RTOL, "matches_one_thread_loop": matches,
        "load": {"before": load_before, "after": load_after},
        "goal": f"ratio >= {GOAL_RATIO:g} on {threads} threads",
        "met": bool(ratio >= GOAL_RATIO and matches),
    }
    if 1 in timings and threads != 1:
        one = agreement(reference, out[1])
        extra["one_thread"] = {
            "ratio": timings[1]["loop"] / timings[1]["batched"],
            "loop_seconds": timings[1]["loop"], "batched_seconds": timings[1]["batched"],
            "max_rel_loss_diff_ok_members": one["max_rel_loss_diff_ok_members"],
            "max_rel_loss_diff_per_member": one["max_rel_loss_diff_per_member"],
            "status_match": one["status_match"],
        }
    return BenchResult(
        name=f"laws-sweep-{model_name}",
        baseline="depthscale.train.train once per learning rate (fresh copy of the model)",
        baseline_seconds=main["loop"], ours_seconds=main["batched"], extra=extra)


def run(model_name: str, quick: bool) -> BenchResult:
    """The benchmark of ``model_name`` (quick: 4 LRs, 3 steps, the smallest depth, one timing
    per side)."""
    return measure(model_name, quick=quick, repeats=1 if quick else REPEATS)

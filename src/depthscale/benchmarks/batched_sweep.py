"""``batched-sweep``: a learning-rate sweep of G small models, batched vs one by one.

Ours: :func:`depthscale.train.batched.train_batched` trains G = 16 members of one MLP-ResNet
(``build("resnet1", "depth-mup", input_shape=(40,), n_out=10, width=128, depth=16)``) that
differ only in the base learning rate, in one vmapped pass. Baseline: the existing
:func:`depthscale.train.train` loop run once per learning rate on a fresh copy of the same
initial model. Both see MNIST-1D in the same seeded order (batch 128, 200 plain-SGD steps,
final full-set evaluation) on the CPU, so the per-step losses must agree to float rounding;
``extra`` reports the largest relative difference and whether every member's status and
divergence step match. The goal is ``ratio >= 5``.

Float32 rounding differs between a batched matmul and a single one, and a member near the edge
of stability amplifies it: at lr ~ 1.6 the loop itself differs from itself by up to ~7e-5 after
20 steps when torch switches from one thread to two. ``max_rel_loss_diff_per_member`` shows
which members drive the maximum.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import nn

from depthscale.benchmarks.core import BenchResult, best_time
from depthscale.data import Dataset, load
from depthscale.models import build
from depthscale.param import Plan
from depthscale.train import TrainConfig, TrainResult, train
from depthscale.train.batched import train_batched

__all__ = ["GOAL_RATIO", "agreement", "learning_rates", "measure", "run"]

# Sizes and timing settings; read at call time, so tests may monkeypatch them.
MODEL = "resnet1"
RECIPE = "depth-mup"
WIDTH = 128
DEPTH = 16
BATCH = 128
D_IN = 40
N_OUT = 10
MEMBERS = 16  # G, learning rates in the sweep
STEPS = 200
REPEATS = 1  # timings per side (best of), interleaved, after one short warm-up of each
QUICK_MEMBERS = 4
QUICK_STEPS = 20
WARMUP_STEPS = 2
LR_MIN = 2.0**-6  # base LR grid (depth-muP trains each layer at lr * c); the top ones diverge
LR_MAX = 2.0**4
SEED = 0
THREADS: int | None = None  # torch threads while timing (None: leave the current setting)
GOAL_RATIO = 5.0
LOSS_RTOL = 1e-5


def learning_rates(g: int, lo: float = LR_MIN, hi: float = LR_MAX) -> list[float]:
    """``g`` base learning rates spaced geometrically from ``lo`` to ``hi``."""
    if g == 1:
        return [lo]
    return [lo * (hi / lo) ** (k / (g - 1)) for k in range(g)]


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


def agreement(reference: Sequence[TrainResult], batched: Sequence[TrainResult]) -> dict[str, Any]:
    """How closely batched members reproduce one-by-one runs: largest relative difference of
    per-step losses (all members, and members that stayed finite) and of final metrics, and
    whether status, divergence step and number of steps match for every member."""
    max_loss = max_loss_ok = max_final = 0.0
    per_member: list[float] = []
    same_status = True
    for ref, got in zip(reference, batched, strict=True):
        same = (ref.status, ref.diverged_at, ref.steps_done) == (
            got.status, got.diverged_at, got.steps_done
        )
        same_status = same_status and same and ref.final.keys() == got.final.keys()
        diffs = [_rel(b, a) for a, b in zip(ref.losses, got.losses, strict=False)]
        worst = max(diffs, default=0.0)
        per_member.append(worst)
        max_loss = max(max_loss, worst)
        if ref.status == "ok":
            max_loss_ok = max(max_loss_ok, worst)
        for key in ref.final.keys() & got.final.keys():
            max_final = max(max_final, _rel(got.final[key], ref.final[key]))
    return {
        "max_rel_loss_diff": max_loss,
        "max_rel_loss_diff_ok_members": max_loss_ok,
        "max_rel_loss_diff_per_member": per_member,
        "max_rel_final_diff": max_final,
        "status_match": same_status,
    }


def _one_by_one(
    model: nn.Module, plan: Plan, data: Dataset, config: TrainConfig, lrs: Sequence[float]
) -> list[TrainResult]:
    """The sweep as it runs today: a fresh copy of the initial model per learning rate."""
    return [train(copy.deepcopy(model), plan, data, replace(config, lr=lr)) for lr in lrs]


def measure(
    *,
    members: int,
    steps: int,
    repeats: int = 1,
    width: int = WIDTH,
    depth: int = DEPTH,
    batch: int = BATCH,
    data: Dataset | None = None,
    threads: int | None = None,
    seed: int = SEED,
) -> BenchResult:
    """Time the sweep both ways (best of ``repeats``, alternating which goes first, after a
    ``WARMUP_STEPS`` run of each) and compare the members' losses."""
    data = load("mnist1d") if data is None else data
    model, plan = build(
        MODEL, RECIPE, input_shape=(D_IN,), n_out=N_OUT, width=width, depth=depth, seed=seed
    )
    lrs = learning_rates(members)
    config = TrainConfig(optimizer="sgd", steps=steps, batch_size=batch, loss="ce", seed=seed)
    warm = replace(config, steps=WARMUP_STEPS)
    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        train_batched(model, plan, data, warm, lrs)
        _one_by_one(model, plan, data, warm, lrs[:1])
        out: dict[str, list[TrainResult]] = {}
        times = {"base": math.inf, "ours": math.inf}

        def run_base() -> None:
            out["base"] = _one_by_one(model, plan, data, config, lrs)

        def run_ours() -> None:
            out["ours"] = train_batched(model, plan, data, config, lrs)

        for r in range(repeats):
            pair = [(run_base, "base"), (run_ours, "ours")]
            for fn, who in pair if r % 2 == 0 else pair[::-1]:
                times[who] = min(times[who], best_time(fn, repeats=1, warmup=0))
        used_threads = torch.get_num_threads()
    finally:
        torch.set_num_threads(old_threads)

    agree = agreement(out["base"], out["ours"])
    ratio = times["base"] / times["ours"]
    losses_match = agree["status_match"] and agree["max_rel_loss_diff_ok_members"] <= LOSS_RTOL
    member_steps = sum(r.steps_done for r in out["ours"])
    extra: dict[str, Any] = {
        "model": MODEL,
        "recipe": RECIPE,
        "width": width,
        "depth": depth,
        "batch": batch,
        "data": data.name,
        "members": members,
        "steps": steps,
        "lrs": lrs,
        "statuses": [r.status for r in out["ours"]],
        "diverged_at": [r.diverged_at for r in out["ours"]],
        "member_steps_done": member_steps,
        "repeats": repeats,
        "torch_threads": used_threads,
        "baseline_ms_per_member_step": 1e3 * times["base"] / max(member_steps, 1),
        "ours_ms_per_member_step": 1e3 * times["ours"] / max(member_steps, 1),
        **agree,
        "loss_rtol": LOSS_RTOL,
        "losses_match": losses_match,
        "goal": f"ratio >= {GOAL_RATIO:g}",
        "met": bool(ratio >= GOAL_RATIO and losses_match),
    }
    return BenchResult(
        name="batched-sweep",
        baseline="depthscale.train.train once per learning rate (fresh copy of the model)",
        baseline_seconds=times["base"],
        ours_seconds=times["ours"],
        extra=extra,
    )


def run(quick: bool) -> BenchResult:
    """The benchmark: G = 16 members x 200 steps, or 4 x 20 when ``quick``."""
    return measure(
        members=QUICK_MEMBERS if quick else MEMBERS,
        steps=QUICK_STEPS if quick else STEPS,
        repeats=REPEATS,
        threads=THREADS,
    )

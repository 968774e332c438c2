"""``batched-sweep``: a learning-rate sweep of G small models, batched vs one by one.

Ours: :func:`depthscale.train.batched.train_batched` trains G = 16 members of one depth-muP
MLP-ResNet (width 128, depth 16, MNIST-1D, batch 128, 200 plain-SGD steps) that differ only in
the base LR, in one batched pass. Baseline: :func:`depthscale.train.train` once per LR from the
same initial model, in the same seeded order. A goal counts only if the members match the loop
on one thread to ``LOSS_RTOL`` (``matches_one_thread_loop``). Goals: ``ratio >= GOAL_RATIO``
(``GOAL_RATIO_CUDA`` on a GPU); ``extra["sweep"]`` times the same grid through ``run_study``.

The ceiling (:func:`peak`): one batched step against bare ``torch.bmm`` calls of the step's
matmul shapes, ``extra["peak_fraction"]`` = bare time / step time (goal ``GOAL_PEAK`` at width
128); ``extra["width_32"]`` repeats the loop comparison at width 32 (goal ``GOAL_RATIO_SMALL``)
with ``ceiling_ratio``. What each figure means, and its values: docs/performance.md.
"""

from __future__ import annotations

import copy
import math
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from depthscale.benchmarks.core import BenchResult, best_time
from depthscale.data import Dataset, load
from depthscale.models import ScaledLinear, build
from depthscale.param import Plan
from depthscale.train import TrainConfig, TrainResult, train
from depthscale.train.batched import reuse_freed_memory, sgd_step, train_batched
from depthscale.train.loop import resolve_device

__all__ = ["GOAL_PEAK", "GOAL_RATIO", "GOAL_RATIO_CUDA", "GOAL_RATIO_SMALL", "agreement",
           "learning_rates", "measure", "peak", "run", "sweep_level"]

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
GOAL_RATIO_CUDA = 10.0  # on a GPU the loop's small kernels leave it idle: batching should win more
LOSS_RTOL = 1e-5
SWEEP = True  # also time the sweep level (run_study with and without batch_lrs)
CHECK_ONE_THREAD = True  # timed on more threads: also compare both with the loop on one thread
SWEEP_STEPS = 50
QUICK_SWEEP_STEPS = 10
GOAL_PEAK = 0.85  # peak_fraction at WIDTH on one thread
SMALL_WIDTH = 32
GOAL_RATIO_SMALL = 5.0  # ratio over the loop at SMALL_WIDTH
PEAK = True  # also time the ceiling (peak) and the SMALL_WIDTH comparison
PEAK_STEPS = 10  # batched steps per timing of the ceiling
PEAK_REPEATS = 7  # timings per side (median), alternating
QUICK_PEAK_REPEATS = 5


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
    device: str = "cpu",
) -> BenchResult:
    """Time the sweep both ways on ``device`` (best of ``repeats``, alternating which goes
    first, after a ``WARMUP_STEPS`` run of each) and compare the members' losses."""
    resolve_device(device)  # a clear ConfigError before any work
    data = load("mnist1d") if data is None else data
    model, plan = build(
        MODEL, RECIPE, input_shape=(D_IN,), n_out=N_OUT, width=width, depth=depth, seed=seed
    )
    lrs = learning_rates(members)
    config = TrainConfig(optimizer="sgd", steps=steps, batch_size=batch, loss="ce", seed=seed,
                         device=device)
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
        one_thread: dict[str, Any] = {}
        if CHECK_ONE_THREAD and used_threads != 1:
            # untimed: the loop on one thread, as every sweep run trains
            torch.set_num_threads(1)
            ref = _one_by_one(model, plan, data, config, lrs)
            vs_ours, vs_base = agreement(ref, out["ours"]), agreement(ref, out["base"])
            one_thread = {
                "ours_max_rel_loss_diff_ok_members": vs_ours["max_rel_loss_diff_ok_members"],
                "ours_status_match": vs_ours["status_match"],
                "baseline_max_rel_loss_diff_ok_members": vs_base["max_rel_loss_diff_ok_members"],
                "baseline_status_match": vs_base["status_match"],
            }
    finally:
        torch.set_num_threads(old_threads)

    agree = agreement(out["base"], out["ours"])
    ratio = times["base"] / times["ours"]
    goal = GOAL_RATIO_CUDA if resolve_device(device).type == "cuda" else GOAL_RATIO
    losses_match = agree["status_match"] and agree["max_rel_loss_diff_ok_members"] <= LOSS_RTOL
    if one_thread:  # timed on more threads: the reference is the loop on one thread
        matches_reference = bool(one_thread["ours_status_match"] and
                                 one_thread["ours_max_rel_loss_diff_ok_members"] <= LOSS_RTOL)
    else:
        matches_reference = losses_match
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
        "device": device,
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
        **({"vs_one_thread_loop": one_thread} if one_thread else {}),
        "matches_one_thread_loop": matches_reference,
        "goal": f"ratio >= {goal:g}",
        "met": bool(ratio >= goal and matches_reference),
    }
    return BenchResult(
        name="batched-sweep",
        baseline="depthscale.train.train once per learning rate (fresh copy of the model)",
        baseline_seconds=times["base"],
        ours_seconds=times["ours"],
        extra=extra,
    )


def _study_toml(lrs: Sequence[float], *, steps: int, width: int, depth: int, batch: int,
                seed: int) -> str:
    return (
        f'[study]\nname = "batched-sweep"\nmodel = "{MODEL}"\nrecipe = "{RECIPE}"\n'
        f'dataset = "mnist1d"\n[train]\noptimizer = "sgd"\nsteps = {steps}\n'
        f'batch_size = {batch}\nloss = "ce"\n[grid]\ndepth = [{depth}]\nwidth = [{width}]\n'
        f"seed = [{seed}]\nlr = [{', '.join(repr(float(x)) for x in lrs)}]\n"
    )


def sweep_level(
    *, members: int, steps: int, width: int = WIDTH, depth: int = DEPTH, batch: int = BATCH,
    repeats: int = 1, seed: int = SEED,
) -> dict[str, Any]:
    """Seconds of ``run_study`` on one LR group of ``members`` runs (MNIST-1D, this model),
    one by one and with ``batch_lrs`` (best of ``repeats``, alternating, after a 1-step warm-up
    of each), their ratio, and the largest relative difference of the runs' final metrics."""
    from depthscale.studies.store import open_store
    from depthscale.studies.sweep import run_study

    lrs = learning_rates(members)
    times = {False: math.inf, True: math.inf}
    finals: dict[bool, dict[str, tuple[str, dict[str, Any]]]] = {}
    with tempfile.TemporaryDirectory(prefix="depthscale-bench-") as tmp:
        base = Path(tmp)
        warm = base / "warm.toml"
        warm.write_text(_study_toml(lrs[:2], steps=1, width=width, depth=depth, batch=batch,
                                    seed=seed))
        spec = base / "study.toml"
        spec.write_text(_study_toml(lrs, steps=steps, width=width, depth=depth, batch=batch,
                                    seed=seed))
        for batched in (False, True):
            run_study(warm, base / f"warm-{batched}", batch_lrs=batched)
        for r in range(repeats):
            for batched in (False, True) if r % 2 == 0 else (True, False):
                out = base / f"{r}-{batched}"
                t0 = time.perf_counter()
                run_study(spec, out, batch_lrs=batched)
                times[batched] = min(times[batched], time.perf_counter() - t0)
                with open_store(out, readonly=True) as store:
                    finals[batched] = {
                        rec.run_id: (rec.status, {k: v for k, v in rec.metrics.items()
                                                  if k.startswith("final_")})
                        for rec in store.records()
                    }
    diff = 0.0
    same_status = finals[False].keys() == finals[True].keys()
    for rid, (status, metrics) in finals[False].items():
        other = finals[True].get(rid)
        if other is None:
            continue
        same_status = same_status and other[0] == status and other[1].keys() == metrics.keys()
        for key in metrics.keys() & other[1].keys():
            if metrics[key] is not None and other[1][key] is not None:
                diff = max(diff, _rel(other[1][key], metrics[key]))
    return {
        "runs": members,
        "steps": steps,
        "one_by_one_seconds": times[False],
        "batched_seconds": times[True],
        "ratio": times[False] / times[True],
        "status_match": same_status,
        "max_rel_final_diff": diff,
        "threads_per_run": 1,
    }


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bare_matmuls(
    layers: Sequence[tuple[int, int]], members: int, batch: int, device: torch.device
) -> tuple[Callable[[], None], float]:
    """A callable running, into preallocated outputs, the batched matmuls of one training step
    of a chain of linear layers ``(in, out)`` (first to last), and that step's FLOPs.

    Per layer: forward ``[G, B, in] x [G, in, out]``, weight gradient ``[G, out, B] x
    [G, B, in]``, and for every layer but the first (whose input is data) the input gradient
    ``[G, B, out] x [G, out, in]``; ``2 G B in out`` FLOPs each.
    """
    gen = torch.Generator().manual_seed(0)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=gen).to(device)

    calls: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    flops = 0.0
    for k, (d_in, d_out) in enumerate(layers):
        x, w = rand(members, batch, d_in), rand(members, d_out, d_in)
        g = rand(members, batch, d_out)
        calls.append((x, w.mT, torch.empty(members, batch, d_out, device=device)))
        calls.append((g.mT, x, torch.empty(members, d_out, d_in, device=device)))
        n = 2
        if k > 0:
            calls.append((g, w, torch.empty(members, batch, d_in, device=device)))
            n = 3
        flops += n * 2.0 * members * batch * d_in * d_out

    def run() -> None:
        for a, b, out in calls:
            torch.bmm(a, b, out=out)

    return run, flops


def peak(
    *, members: int, width: int = WIDTH, depth: int = DEPTH, batch: int = BATCH,
    steps: int = PEAK_STEPS, repeats: int = PEAK_REPEATS, seed: int = SEED,
    device: str = "cpu", threads: int = 1,
) -> dict[str, Any]:
    """The batched sweep against its matmul ceiling, on ``threads`` torch threads: seconds per
    batched SGD step of ``members`` members (:func:`~depthscale.train.batched.sgd_step`, a fixed
    batch, learning rate ``LR_MIN`` so no member diverges) and of :func:`bare_matmuls` with the
    same shapes, alternating, median of ``repeats`` timings of ``steps`` steps each."""
    dev = resolve_device(device)
    model, plan = build(
        MODEL, RECIPE, input_shape=(D_IN,), n_out=N_OUT, width=width, depth=depth, seed=seed
    )
    layers = [(m.weight.shape[1], m.weight.shape[0]) for m in model.modules()
              if isinstance(m, ScaledLinear)]
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, D_IN, generator=gen).to(dev)
    y = torch.randint(0, N_OUT, (batch,), generator=gen).to(dev)
    step = sgd_step(model, plan, [LR_MIN] * members, "ce", dev)
    bare, flops = bare_matmuls(layers, members, batch, dev)
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    times: dict[str, list[float]] = {"step": [], "bare": []}

    def timed(fn: Callable[[], object]) -> float:
        _sync(dev)
        t0 = time.perf_counter()
        for _ in range(steps):
            fn()
        _sync(dev)
        return (time.perf_counter() - t0) / steps

    try:
        timed(lambda: step(x, y))
        timed(bare)
        for r in range(repeats):
            order = ("step", "bare") if r % 2 == 0 else ("bare", "step")
            for who in order:
                times[who].append(timed((lambda: step(x, y)) if who == "step" else bare))
    finally:
        torch.set_num_threads(old_threads)
    t_step, t_bare = statistics.median(times["step"]), statistics.median(times["bare"])
    return {
        "members": members,
        "width": width,
        "depth": depth,
        "batch": batch,
        "device": device,
        "torch_threads": threads,
        "steps_per_timing": steps,
        "repeats": repeats,
        "timing": "median",
        "matmul_gflop_per_step": flops / 1e9,
        "bare_ms_per_step": 1e3 * t_bare,
        "batched_ms_per_step": 1e3 * t_step,
        "bare_gflops": flops / t_bare / 1e9,
        "batched_gflops": flops / t_step / 1e9,
        "peak_fraction": t_bare / t_step,
        "malloc_tuned": reuse_freed_memory(),
    }


def run(quick: bool, *, device: str = "cpu") -> BenchResult:
    """The benchmark: G = 16 members x 200 steps, or 4 x 20 when ``quick``; with ``PEAK`` also
    the ceiling at ``WIDTH`` and the loop comparison (and ceiling) at ``SMALL_WIDTH``; with
    ``SWEEP`` (on the CPU) the sweep level (``SWEEP_STEPS`` or ``QUICK_SWEEP_STEPS`` steps)."""
    resolve_device(device)
    members = QUICK_MEMBERS if quick else MEMBERS
    steps = QUICK_STEPS if quick else STEPS
    sizes = {"depth": DEPTH, "batch": BATCH}
    res = measure(members=members, steps=steps, repeats=REPEATS, threads=THREADS, width=WIDTH,
                  depth=DEPTH, batch=BATCH, device=device)
    extra = dict(res.extra)
    if PEAK:
        peak_repeats = QUICK_PEAK_REPEATS if quick else PEAK_REPEATS
        ceiling = peak(members=members, width=WIDTH, steps=PEAK_STEPS, repeats=peak_repeats,
                       device=device, **sizes)
        small = measure(members=members, steps=steps, repeats=REPEATS, threads=THREADS,
                        width=SMALL_WIDTH, depth=DEPTH, batch=BATCH, device=device)
        small_threads = int(small.extra["torch_threads"])
        small_ceiling = peak(members=members, width=SMALL_WIDTH, steps=PEAK_STEPS,
                             repeats=peak_repeats, device=device, threads=small_threads,
                             **sizes)
        small_match = bool(small.extra["matches_one_thread_loop"])
        # the best any batching could do: the loop's time per member-step over the bare
        # matmuls' (all G members, the same threads) per member-step
        ceiling_ratio = small.extra["baseline_ms_per_member_step"] / (
            small_ceiling["bare_ms_per_step"] / members)
        extra.update({
            "peak": ceiling,
            "peak_fraction": ceiling["peak_fraction"],
            "peak_goal": f"peak_fraction >= {GOAL_PEAK:g} (width {WIDTH}, one thread)",
            "peak_met": bool(ceiling["peak_fraction"] >= GOAL_PEAK),
            f"width_{SMALL_WIDTH}": {
                "width": SMALL_WIDTH,
                "ratio": small.ratio,
                "baseline_seconds": small.baseline_seconds,
                "ours_seconds": small.ours_seconds,
                "member_steps_done": small.extra["member_steps_done"],
                "torch_threads": small_threads,
                "max_rel_loss_diff_ok_members": small.extra["max_rel_loss_diff_ok_members"],
                "losses_match": small.extra["losses_match"],
                **({"vs_one_thread_loop": small.extra["vs_one_thread_loop"]}
                   if "vs_one_thread_loop" in small.extra else {}),
                "matches_one_thread_loop": small_match,
                "peak_fraction": small_ceiling["peak_fraction"],
                "peak": small_ceiling,
                "ceiling_ratio": ceiling_ratio,
                "ceiling_definition": "loop ms per member-step / (bare batched matmuls of one "
                                      "step's shapes, G members, same threads, ms / G): the "
                                      "ratio a batched sweep with free non-matmul work "
                                      "would reach",
                "goal_reachable": bool(ceiling_ratio >= GOAL_RATIO_SMALL),
                "goal": f"ratio >= {GOAL_RATIO_SMALL:g}",
                "met": bool(small.ratio >= GOAL_RATIO_SMALL and small_match),
            },
        })
    if SWEEP and resolve_device(device).type == "cpu":
        extra["sweep"] = sweep_level(
            members=members, steps=QUICK_SWEEP_STEPS if quick else SWEEP_STEPS, repeats=REPEATS,
            width=WIDTH, **sizes,
        )
    return replace(res, extra=extra)

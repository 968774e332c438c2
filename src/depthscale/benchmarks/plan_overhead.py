"""``plan-overhead``: one SGD step of a planned depthscale model vs the same net in plain PyTorch.

Ours: ``build("resnet1", "depth-mup", ...)`` (``ScaledLinear`` layers, multipliers and init from
the plan) trained by ``plan.optimizer(model, "sgd")``. Baseline: :class:`PlainResNet`, raw
``nn.Parameter`` tensors and the same maths (h0 = a_in U x, h += a_b W phi(h), f = a_out v^T h)
with the plan's multipliers as Python floats, and a ``torch.optim.SGD`` whose per-group learning
rates are written out by hand. Both start from the same weights and train on the same batch, so
their losses must agree after the timed steps; the goal is ``ratio >= 0.99`` (the plan costs at
most 1% per step). Timings alternate the two models (which goes first flips every round) and
each side reports the median of its ``repeats`` timings, so load that drifts during the run hits
both alike.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from depthscale.benchmarks.core import BenchResult, best_time
from depthscale.models import MLPResNet, ScaledLinear, build

__all__ = ["GOAL_RATIO", "PlainResNet", "bench_plan_overhead", "measure"]

# Sizes and timing settings; read at call time, so tests may monkeypatch them.
WIDTH = 256
DEPTH = 32
BATCH = 128
D_IN = 40
N_OUT = 10
LR = 0.05  # base LR eta_c; depth-muP trains every layer at eta_c * n
STEPS = 20  # SGD steps per timing
REPEATS = 7  # timings per model (median), after WARMUP untimed ones
WARMUP = 1
QUICK_STEPS = 5
QUICK_REPEATS = 3
SEED = 0
GOAL_RATIO = 0.99
LOSS_TOLERANCE = 1e-5


class PlainResNet(nn.Module):
    """nfd Eq. 1 in plain PyTorch: h0 = a_in U x, h_l = h_{l-1} + a_b W_l relu(h_{l-1}),
    f = a_out v^T h_L, multipliers fixed floats."""

    def __init__(
        self, d_in: int, d_out: int, width: int, depth: int, a_in: float, a_b: float, a_out: float
    ) -> None:
        super().__init__()
        self.U = nn.Parameter(torch.zeros(width, d_in))
        self.W = nn.ParameterList(nn.Parameter(torch.zeros(width, width)) for _ in range(depth))
        self.v = nn.Parameter(torch.zeros(d_out, width))
        self.a_in, self.a_b, self.a_out = a_in, a_b, a_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.linear(x, self.U) * self.a_in
        for w in self.W:
            h = h + F.linear(torch.relu(h), w) * self.a_b
        return F.linear(h, self.v) * self.a_out


def _sgd_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor,
              y: torch.Tensor) -> torch.Tensor:
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss.detach()


def _runner(
    model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, steps: int,
    log: list[float],
) -> Callable[[], None]:
    def run() -> None:
        loss = x.new_zeros(())
        for _ in range(steps):
            loss = _sgd_step(model, opt, x, y)
        log.append(float(loss))

    return run


def measure(
    *,
    width: int,
    depth: int,
    batch: int,
    steps: int,
    repeats: int,
    warmup: int = 1,
    d_in: int = D_IN,
    n_out: int = N_OUT,
    lr: float = LR,
    seed: int = SEED,
) -> BenchResult:
    """Time ``steps`` SGD steps of both models, median of ``repeats`` after ``warmup`` untimed
    runs, alternating which model goes first; then compare their losses."""
    model, plan = build(
        "resnet1", "depth-mup", input_shape=(d_in,), n_out=n_out, width=width, depth=depth,
        seed=seed,
    )
    assert isinstance(model, MLPResNet)
    opt = plan.optimizer(model, "sgd", lr=lr)

    spec_in = plan.spec("embed.weight", "input", (width, d_in))
    spec_b = plan.spec("branches.0.weight", "branch", (width, width))
    spec_out = plan.spec("readout.weight", "output", (n_out, width))
    base = PlainResNet(d_in, n_out, width, depth, spec_in.a, spec_b.a, spec_out.a)
    with torch.no_grad():
        base.U.copy_(model.embed.weight)
        for w, branch in zip(base.W, model.branches, strict=True):
            assert isinstance(branch, ScaledLinear)
            w.copy_(branch.weight)
        base.v.copy_(model.readout.weight)
    base_opt = torch.optim.SGD(
        [
            {"params": [base.U], "lr": lr * spec_in.c_sgd},
            {"params": list(base.W), "lr": lr * spec_b.c_sgd},
            {"params": [base.v], "lr": lr * spec_out.c_sgd},
        ],
        lr=lr,
    )

    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, d_in, generator=gen)
    y = torch.randint(0, n_out, (batch,), generator=gen)
    x_test = torch.randn(batch, d_in, generator=gen)
    y_test = torch.randint(0, n_out, (batch,), generator=gen)

    ours_log: list[float] = []
    base_log: list[float] = []
    run_ours = _runner(model, opt, x, y, steps, ours_log)
    run_base = _runner(base, base_opt, x, y, steps, base_log)
    for _ in range(warmup):
        run_base()
        run_ours()
    times: dict[str, list[float]] = {"base": [], "ours": []}
    for r in range(repeats):
        pair = [(run_base, "base"), (run_ours, "ours")]
        for fn, who in pair if r % 2 == 0 else pair[::-1]:
            times[who].append(best_time(fn, repeats=1, warmup=0))
    t_base, t_ours = statistics.median(times["base"]), statistics.median(times["ours"])

    with torch.no_grad():
        diffs = [abs(a - b) for a, b in zip(base_log, ours_log, strict=True)]
        for xs, ys in ((x, y), (x_test, y_test)):
            diffs.append(
                float((F.cross_entropy(model(xs), ys) - F.cross_entropy(base(xs), ys)).abs())
            )
        final_loss = float(F.cross_entropy(model(x), y))
    max_diff = max(diffs)
    ratio = t_base / t_ours
    losses_match = max_diff < LOSS_TOLERANCE
    extra: dict[str, Any] = {
        "model": "resnet1",
        "recipe": "depth-mup",
        "width": width,
        "depth": depth,
        "batch": batch,
        "d_in": d_in,
        "n_out": n_out,
        "lr": lr,
        "steps_per_timing": steps,
        "repeats": repeats,
        "warmup": warmup,
        "total_steps_each": steps * (repeats + warmup),
        "torch_threads": torch.get_num_threads(),
        "baseline_ms_per_step": 1e3 * t_base / steps,
        "ours_ms_per_step": 1e3 * t_ours / steps,
        "timing": "median",
        "overhead_fraction": t_ours / t_base - 1,
        "final_loss": final_loss,
        "max_abs_loss_diff": max_diff,
        "loss_tolerance": LOSS_TOLERANCE,
        "losses_match": losses_match,
        "goal": f"ratio >= {GOAL_RATIO}",
        "met": bool(ratio >= GOAL_RATIO and losses_match),
    }
    return BenchResult(
        name="plan-overhead",
        baseline="plain PyTorch ResNet (raw nn.Parameter, hand-built SGD groups)",
        baseline_seconds=t_base,
        ours_seconds=t_ours,
        extra=extra,
    )


def bench_plan_overhead(quick: bool) -> BenchResult:
    """The registered benchmark: module sizes, fewer steps and repeats when ``quick``."""
    return measure(
        width=WIDTH,
        depth=DEPTH,
        batch=BATCH,
        steps=QUICK_STEPS if quick else STEPS,
        repeats=QUICK_REPEATS if quick else REPEATS,
        warmup=WARMUP,
        d_in=D_IN,
        n_out=N_OUT,
        lr=LR,
        seed=SEED,
    )

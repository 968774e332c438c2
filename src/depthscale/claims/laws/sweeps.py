"""The laws claims' depth x LR sweeps (laws Sec. 4.1 protocol): each architecture's study as
study tables, run or resumed by :func:`~depthscale.claims.common.run_claim_study` into
``OUT/<study>/``, the medium scale's coarse-to-fine LR grid, the effective depth L = m + K of
every size (laws Sec. 3.4), the loss of chance on the sweep's data, and the records as they
stood after an epoch (laws Table 4).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from depthscale.claims.common import run_claim_study
from depthscale.claims.laws.settings import Arch
from depthscale.claims.registry import ClaimContext
from depthscale.models import create
from depthscale.stats.sweeps import optimal_lrs

__all__ = [
    "Record",
    "annotate",
    "at_epoch",
    "chance_loss",
    "effective_depth",
    "fine_grids",
    "has_blocks",
    "laws_cost",
    "study_tables",
    "sweep",
    "sweep_recipe",
    "sweep_stages",
]

#: one run's record from a study's results store (its spec's fields and its metrics)
Record = dict[str, Any]


def study_tables(name: str, arch: Mapping[str, Any], *, seeds: int, epochs: float | None,
                 data: Mapping[str, Any], first_seed: int = 0, device: str = "cpu",
                 recipe: str | None = None, steps: int | None = None,
                 final_eval: str = "train+test") -> dict[str, Any]:
    """One architecture's depth x LR study (laws Sec. 4.1 protocol) as study tables. The recipe
    is the architecture's (``laws``; ``laws-fanin`` for Transformers) unless ``recipe`` names
    another (the negative controls' wrong parameterization). The budget is ``epochs``, or
    ``steps`` when given; the LRs are ``arch["lrs"]`` when given, else its ``lr_logspace``.
    ``final_eval = "test"`` skips the final training-set pass the running-loss criterion never
    reads."""
    recipe = recipe or arch.get("recipe", "laws")
    lrs: list[float] | dict[str, list[float]]
    if "lrs" in arch:
        lrs = [float(v) for v in arch["lrs"]]
    else:
        lo, hi, num = arch["lr_logspace"]
        lrs = {"logspace": [lo, hi, num]}
    return {
        "study": {"name": name, "model": arch["model"], "recipe": recipe,
                  "dataset": arch["dataset"]},
        "model": dict(arch.get("options", {})),
        "data": dict(data),
        "train": {"optimizer": arch.get("optimizer", "sgd"),
                  **({"steps": steps} if steps is not None else {"epochs": epochs}),
                  "batch_size": 128, "loss": "ce",
                  **({"device": device} if device != "cpu" else {}),
                  **({"final_eval": final_eval} if final_eval != "train+test" else {})},
        "grid": {"depth": list(arch["depths"]), "width": [arch["width"]],
                 "seed": list(range(first_seed, first_seed + seeds)), "lr": lrs},
        "analysis": {"criterion": "running", "axis": "depth"},
    }


def laws_cost(s: Mapping[str, Any], device: str) -> list[dict[str, Any]]:
    """The studies a laws claim's settings run (its ``archs``, ``variants``, or ``arch`` at
    each of ``widths``), each at its first stage: the coarse grid on one seed where the
    settings ``refine`` it, else every seed."""
    archs = dict(s.get("archs") or s.get("variants") or {})
    if "arch" in s:
        archs |= {f"w{w}": {**s["arch"], "width": w} for w in s.get("widths", [])}
    seeds = 1 if s.get("refine") is not None else s["seeds"]
    return [study_tables(f"laws-{key}", arch, seeds=seeds, epochs=s.get("epochs"),
                         steps=arch.get("steps", s.get("steps")),
                         data={**s.get("data", {}), **arch.get("data", {})}, device=device,
                         recipe=sweep_recipe(s, arch))
            for key, arch in archs.items()]


def sweep(ctx: ClaimContext, name: str, arch: Arch) -> list[Record]:
    """Run (or resume) one depth x LR study in ``ctx.out_dir/name``; its planned records, each
    with the model's ``effective_depth`` (laws Sec. 3.4: L = m + K).

    With settings ``refine = {"half_width": w, "step": d}`` (the medium scale) the grid has two
    stages: the coarse ``lr_logspace`` on the first seed only (study ``name-coarse``), then per
    depth a fine grid of step ``d`` decades within ``w`` decades of that depth's coarse optimum,
    on every seed (studies ``name-fine-L<depth>``); the records are the fine stages'."""
    return sweep_stages(ctx, name, arch)[0]


def sweep_stages(ctx: ClaimContext, name: str, arch: Arch) -> tuple[list[Record], list[Record]]:
    """:func:`sweep`'s records and the whole LR window they come from: every run of both
    stages of a two-stage grid (the coarse stage's one seed too), the same records where the
    grid has one stage. The flatness gate reads the window (is the loss over every LR tried
    at a depth flat within seed noise?), the fit the records. A negative control's
    ``lr_depth_exponent`` e (an extra LR multiplier L^e on every layer) reads each run at LR
    eta as the one that control makes at nominal LR eta / L^e: the same runs, so eta* moves
    by L^-e exactly and the control costs no training. An architecture with ``seed_rounds``
    (and settings with ``refine``) adds its fine stage's seeds in rounds, where they decide
    (:mod:`~depthscale.claims.laws.sequential`)."""
    s = ctx.settings
    refine = s.get("refine")
    if refine is not None and arch.get("seed_rounds"):
        from depthscale.claims.laws.sequential import sequential_stages  # it fits this module's

        coarse, records = sequential_stages(ctx, name, arch)
        # the design may have added depths (a depth round): the coarse stage holds them all
        arch = {**arch, "depths": sorted({int(r["depth"]) for r in coarse})}
    elif refine is None:
        coarse, records = [], _run_laws_study(ctx, name, arch, seeds=s["seeds"])
    else:
        coarse = _run_laws_study(ctx, f"{name}-coarse", arch, seeds=1)
        records = []
        for depth, lrs in fine_grids(coarse, refine).items():
            fine = {**arch, "depths": [depth], "lrs": lrs}
            records += _run_laws_study(ctx, f"{name}-fine-L{depth}", fine, seeds=s["seeds"])
    records = annotate(s, arch, records)
    return records, annotate(s, arch, coarse) + records


def annotate(settings: Mapping[str, Any], arch: Arch, records: list[Record]) -> list[Record]:
    """Copies of ``records`` with each run's ``effective_depth`` (L = m + K, laws Sec. 3.4)
    and, under a negative control's ``lr_depth_exponent`` e, its LR read as lr / L^e."""
    eff = {d: effective_depth(arch, d) for d in arch["depths"]}
    exponent = float(settings.get("lr_depth_exponent", 0.0))
    out = []
    for r in records:
        L = eff[int(r["depth"])]
        # the control's LR multiplier: this run is the wrong rule's at lr / L^e
        out.append({**r, "effective_depth": L,
                    **({"lr": float(r["lr"]) / L ** exponent} if exponent else {})})
    return out


def fine_grids(coarse: list[Record], refine: Mapping[str, float]) -> dict[int, list[float]]:
    """Per depth, the fine stage's LRs around the coarse stage's optimum (:func:`_fine_lrs`)."""
    return {o.depth: _fine_lrs(o.grid_lr, refine)
            for o in optimal_lrs(coarse, "running", axis="depth")}


def _fine_lrs(center_lr: float, refine: Mapping[str, float]) -> list[float]:
    """The fine stage's LRs: step ``refine["step"]`` decades within ``refine["half_width"]``
    decades of the coarse optimum ``center_lr``."""
    center = math.log10(center_lr)
    k = round(refine["half_width"] / refine["step"])
    return [10 ** (center + i * refine["step"]) for i in range(-k, k + 1)]


def _run_laws_study(ctx: ClaimContext, name: str, arch: Arch, seeds: int,
                    first_seed: int = 0) -> list[Record]:
    """One study (spec written from the settings, run or resumed) on seeds ``ctx.seed +
    first_seed`` onwards, trained for the architecture's ``steps`` where it sets them (else the
    scale's), its planned records; their stored run time is added to the claim's
    ``spent_seconds`` (the budget's meter)."""
    s = ctx.settings
    control = s.get("recipe")
    data = {**s.get("data", {}), **arch.get("data", {})}
    if ctx.data_dir is not None and arch["dataset"].startswith("cifar"):
        data["dir"] = str(Path(ctx.data_dir).resolve())
    tables = study_tables(name, arch, seeds=seeds, epochs=s.get("epochs"),
                          steps=arch.get("steps", s.get("steps")),
                          data=data, first_seed=ctx.seed + first_seed, device=ctx.device,
                          recipe=sweep_recipe(s, arch),
                          final_eval=s.get("final_eval", "train+test"))
    records = run_claim_study(ctx, name if control is None else f"{name}-{control}", tables,
                              retry_failed=False, fail_on_failed=False)
    ctx.spent_seconds += sum(float(r.get("seconds") or 0.0) for r in records)
    return records


def sweep_recipe(settings: Mapping[str, Any], arch: Arch) -> str:
    """The parameterization of a sweep: the architecture's (the paper's ``laws``: He fan-in
    init, residual branches x K^(-1/2); ``laws-fanin`` for Transformers, Sec. 3.5) unless a
    negative control sets ``recipe`` (``sp``: N(0, 1/fan_in), no q = 1/2 correction and no
    K^(-1/2), under which the plain nets' signal halves per layer and the ResNets' stream grows
    with K, so eta* no longer follows L^(-3/2))."""
    name: str = settings.get("recipe") or arch.get("recipe", "laws")
    return name


def effective_depth(arch: Arch, depth: int) -> int:
    """The effective depth L = m + K (laws Sec. 3.4) of ``arch`` at ``depth``."""
    net = create(arch["model"], input_shape=tuple(arch["input_shape"]), n_out=10,
                 width=arch["width"], depth=depth, **arch.get("options", {}))
    depth_units: int = net.effective_depth  # type: ignore[assignment]  # every model has it
    return depth_units


def has_blocks(arch: Arch) -> bool:
    """Whether the architecture is a ResNet (fitted against its blocks K too, Sec. 4.3)."""
    return str(arch["model"]).startswith("convresnet")


def chance_loss(ctx: ClaimContext, arch: Arch) -> float:
    """Cross-entropy of predicting the training labels' marginal (nats): the loss of a net that
    has learned nothing about the inputs, on the data the sweep trains on."""
    from depthscale.data import load

    data = {**ctx.settings.get("data", {}), **arch.get("data", {})}
    ds = load(arch["dataset"], data_dir=ctx.data_dir, seed=ctx.seed, **data)
    p = np.bincount(ds.y_train.numpy().ravel()) / ds.y_train.numel()
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def at_epoch(records: list[Record], epoch: int) -> list[Record]:
    """The records as they stood after ``epoch`` epochs (laws Table 4, "best LR after epoch
    e"): criterion "last-epoch" then reads the mean running loss of that epoch, and a run that
    diverged later still counts at the epochs it completed. The per-step curves are cut at the
    end of that epoch too (the steps a finished run took, divided evenly over its epochs)."""
    finished = [r for r in records if r["status"] == "done" and r.get("epoch_losses")]
    per_epoch = (max(len(r.get("curve_steps") or []) // len(r["epoch_losses"]) for r in finished)
                 if finished else 0)
    out = []
    for r in records:
        losses = list(r.get("epoch_losses") or [])[:epoch]
        ok = len(losses) == epoch and losses[-1] is not None and math.isfinite(losses[-1])
        status = "done" if ok else ("diverged" if r["status"] == "done" else r["status"])
        cut = per_epoch * epoch
        out.append({**r, "status": status, "epoch_losses": losses,
                    "curve_steps": list(r.get("curve_steps") or [])[:cut],
                    "curve_losses": list(r.get("curve_losses") or [])[:cut]})
    return out

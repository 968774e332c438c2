"""The laws claims' runs (laws Sec. 4.1 protocol): the budget every laws claim's settings share
(:class:`SweepSettings`), each architecture's depth x LR study as study tables, run or resumed
by :func:`~depthscale.claims.common.run_claim_study` into ``OUT/<study>/``, the medium scale's
coarse-to-fine LR grid, the effective depth L = m + K of every size (laws Sec. 3.4), the loss
of chance on the sweep's data, the records as they stood after an epoch (laws Table 4), and
the AM-muP probes at init (Sec. 3.2, Eq. 7-9: eta* from one-step update energies, no
training). The stages of a sweep and its sequential seeds: :mod:`.sequential`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from depthscale.claims.common import run_claim_study
from depthscale.claims.laws.settings import Arch
from depthscale.claims.registry import ClaimContext, read_settings
from depthscale.data import Dataset
from depthscale.errors import ConfigError
from depthscale.models import build, create
from depthscale.probes import update_energy
from depthscale.stats.sweeps import optimal_lrs, records_at_step

__all__ = [
    "Record",
    "SweepSettings",
    "annotate",
    "at_epoch",
    "at_step",
    "chance_loss",
    "effective_depth",
    "fine_grids",
    "has_blocks",
    "probe_etas",
    "run_laws_study",
    "steps_per_epoch",
    "study_costs",
    "study_tables",
    "sweep_recipe",
]

#: one run's record from a study's results store (its spec's fields and its metrics)
Record = dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class SweepSettings:
    """The budget every laws claim's settings share (each claim's ``*Settings`` extends it):
    ``seeds`` per study (a sequential sweep's come from its ``seed_rounds``), the run length
    (``epochs``, or ``steps`` where set; an architecture's own ``steps`` go over it), the
    ``data`` options, a two-stage LR grid's ``refine = {"half_width": w, "step": d}``, the
    final evaluation, the negative controls' ``recipe`` (another parameterization) and
    ``lr_depth_exponent`` e (an extra LR multiplier L^e on every layer), and ``judged_epoch``:
    the pass over the data at whose end the law is judged (laws Table 1: the one-epoch
    optimum), None for the end of the run."""

    seeds: int | None = None
    epochs: float | None = None
    steps: int | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    refine: Mapping[str, float] | None = None
    final_eval: str = "train+test"
    recipe: str | None = None
    lr_depth_exponent: float = 0.0
    judged_epoch: int | None = None

    def seed_count(self) -> int:
        """``seeds``, which a sweep without ``seed_rounds`` needs."""
        if self.seeds is None:
            raise ConfigError("a laws sweep needs settings 'seeds' (seeds per study), or "
                              "'seed_rounds' on its architecture with 'refine'")
        return self.seeds


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


def study_costs(s: SweepSettings, studies: Mapping[str, Arch],
                device: str) -> list[dict[str, Any]]:
    """The studies a laws claim's settings run (``studies``: its architectures, variants or
    widths by key), each at its first stage: the coarse grid on one seed where the settings
    ``refine`` it, else every seed."""
    seeds = 1 if s.refine is not None else s.seed_count()
    return [study_tables(f"laws-{key}", arch, seeds=seeds, epochs=s.epochs,
                         steps=arch.get("steps", s.steps),
                         data={**s.data, **arch.get("data", {})}, device=device,
                         recipe=sweep_recipe(s, arch))
            for key, arch in studies.items()]


def annotate(lr_depth_exponent: float, arch: Arch, records: list[Record]) -> list[Record]:
    """Copies of ``records`` with each run's ``effective_depth`` (L = m + K, laws Sec. 3.4)
    and, under a negative control's ``lr_depth_exponent`` e, its LR read as lr / L^e."""
    eff = {d: effective_depth(arch, d) for d in arch["depths"]}
    exponent = float(lr_depth_exponent)
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


def run_laws_study(ctx: ClaimContext, name: str, arch: Arch, seeds: int,
                   first_seed: int = 0) -> list[Record]:
    """One study (spec written from the settings, run or resumed) on seeds ``ctx.seed +
    first_seed`` onwards, trained for the architecture's ``steps`` where it sets them (else the
    scale's), its planned records; their stored run time is added to the claim's
    ``spent_seconds`` (the budget's meter)."""
    s = read_settings(SweepSettings, ctx.settings)
    data = {**s.data, **arch.get("data", {})}
    if ctx.data_dir is not None and arch["dataset"].startswith("cifar"):
        data["dir"] = str(Path(ctx.data_dir).resolve())
    tables = study_tables(name, arch, seeds=seeds, epochs=s.epochs,
                          steps=arch.get("steps", s.steps),
                          data=data, first_seed=ctx.seed + first_seed, device=ctx.device,
                          recipe=sweep_recipe(s, arch), final_eval=s.final_eval)
    records = run_claim_study(ctx, name if s.recipe is None else f"{name}-{s.recipe}", tables,
                              retry_failed=False, fail_on_failed=False)
    ctx.spent_seconds += sum(float(r.get("seconds") or 0.0) for r in records)
    return records


def sweep_recipe(s: SweepSettings, arch: Arch) -> str:
    """The parameterization of a sweep: the architecture's (the paper's ``laws``: He fan-in
    init, residual branches x K^(-1/2); ``laws-fanin`` for Transformers, Sec. 3.5) unless a
    negative control sets ``recipe`` (``sp``: N(0, 1/fan_in), no q = 1/2 correction and no
    K^(-1/2), under which the plain nets' signal halves per layer and the ResNets' stream grows
    with K, so eta* no longer follows L^(-3/2))."""
    name: str = s.recipe or arch.get("recipe", "laws")
    return name


def effective_depth(arch: Arch, depth: int) -> int:
    """The depth a law of ``arch`` is fitted on at grid ``depth``: the effective depth L = m + K
    (laws Sec. 3.4), or the residual blocks K where the architecture sets ``"fit_on":
    "blocks"`` (a ResNet as laws Sec. 4.3 measures it for Table 1)."""
    if arch.get("fit_on", "effective") == "blocks":
        if not has_blocks(arch):
            raise ConfigError(f"fit_on 'blocks' needs a ResNet (convresnet*), got model "
                              f"{arch['model']!r}; leave fit_on unset")
        return int(depth)
    net = create(arch["model"], input_shape=tuple(arch["input_shape"]), n_out=10,
                 width=arch["width"], depth=depth, **arch.get("options", {}))
    depth_units: int = net.effective_depth  # type: ignore[assignment]  # every model has it
    return depth_units


def has_blocks(arch: Arch) -> bool:
    """Whether the architecture is a ResNet (fitted against its blocks K too, Sec. 4.3)."""
    return str(arch["model"]).startswith("convresnet")


def steps_per_epoch(s: SweepSettings, arch: Arch) -> int:
    """The SGD steps of one pass over the sweep's training set (batch 128, the last batch
    partial: ceil(n_train / 128), as the training loop counts them); ConfigError where
    ``judged_epoch`` is set but the run length is not given in epochs, or is shorter."""
    from depthscale.data.registry import data_shape

    if s.judged_epoch is not None and (s.epochs is None or "steps" in arch
                                       or s.judged_epoch > s.epochs):
        raise ConfigError(f"judged_epoch {s.judged_epoch} needs the run length in settings "
                          f"'epochs' (at least {s.judged_epoch}) and no 'steps' on the "
                          f"architecture; got epochs {s.epochs!r}, steps {arch.get('steps')!r}")
    data = {**s.data, **arch.get("data", {})}
    data.pop("dir", None)
    return math.ceil(data_shape(arch["dataset"], **data).n_train / 128)


def at_step(records: list[Record], step: int) -> list[Record]:
    """The records as they stood after ``step`` SGD steps
    (:func:`~depthscale.stats.sweeps.records_at_step`: the running loss of steps 1..step),
    their loss curves cut there too, so that a law fitted on them reads ``step`` as its run
    length."""
    out = []
    for r in records_at_step(records, step):
        keep = [i for i, at in enumerate(r.get("curve_steps") or []) if int(at) <= step]
        out.append({**r, "curve_steps": [r["curve_steps"][i] for i in keep],
                    "curve_losses": [r["curve_losses"][i] for i in keep]})
    return out


def chance_loss(ctx: ClaimContext, arch: Arch) -> float:
    """Cross-entropy of predicting the training labels' marginal (nats): the loss of a net that
    has learned nothing about the inputs, on the data the sweep trains on."""
    from depthscale.data import load

    data = {**read_settings(SweepSettings, ctx.settings).data, **arch.get("data", {})}
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


#: probe_etas' results in this process: laws-table1's AM-muP route and laws-ammup probe the
#: same architectures with the same seeds (deterministic, no training)
_PROBES: dict[str, list[list[float]]] = {}


def probe_etas(ctx: ClaimContext, s: SweepSettings, arch: Arch, *, probe_seeds: int,
               batch: int) -> list[list[float]]:
    """Per depth of ``arch``, the AM-muP eta* (laws Sec. 3.2, Eq. 7-9: eta*_AM = (mean_l
    A_l)^(-1/2) from the linearised one-step update energy at init, no training) of each of
    ``probe_seeds`` init seeds on a batch of ``batch``, divided by a negative control's extra
    LR multiplier L^lr_depth_exponent; computed once per process and inputs."""
    key = json.dumps([arch, ctx.seed, str(ctx.data_dir), sweep_recipe(s, arch),
                      s.lr_depth_exponent, probe_seeds, batch], sort_keys=True, default=str)
    if key not in _PROBES:
        from depthscale.data import load

        data = load(arch["dataset"], data_dir=ctx.data_dir, seed=ctx.seed)
        _PROBES[key] = [_probe_depth(ctx, s, arch, data, depth, probe_seeds, batch)
                        for depth in arch["depths"]]
    return [list(e) for e in _PROBES[key]]


def _probe_depth(ctx: ClaimContext, s: SweepSettings, arch: Arch, data: Dataset, depth: int,
                 probe_seeds: int, b: int) -> list[float]:
    """:func:`probe_etas` at one depth, one eta* per init seed."""
    eff = effective_depth(arch, depth)
    etas = []
    for seed in range(ctx.seed, ctx.seed + probe_seeds):
        net, plan = build(arch["model"], sweep_recipe(s, arch), input_shape=data.sample_shape,
                          n_out=data.n_out, width=arch["width"], depth=depth, seed=seed,
                          **arch.get("options", {}))
        g = torch.Generator().manual_seed(seed)
        idx = torch.randperm(len(data.x_train), generator=g)
        xb, yb = data.x_train[idx[:b]], data.y_train[idx[:b]]
        xe = data.x_train[idx[b : 2 * b]]
        lr_multiplier = eff ** s.lr_depth_exponent  # the control's
        etas.append(update_energy(net, plan, xb, yb, xe).eta_star / lr_multiplier)
    return etas

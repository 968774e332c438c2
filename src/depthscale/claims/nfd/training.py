"""What nfd's trained-network claims share (Fig. 2, Fig. 5 rows 1-3): the data set per scale,
the two arms of Fig. 5 (depth-muP, nfd Eq. 1 and 6, against the Eq. 8 LR correction
eta_1 = eta_c n sqrt(L)), and the studies of Fig. 2 and Fig. 5 row 2 as tables.

Quick scale trains on MNIST-1D (generated offline) on CPU in minutes; full scale uses the
paper's CIFAR-10 settings from ``--data-dir``. The training grids of Fig. 2 and Fig. 5 row 2
are studies (``depthscale.studies``), built as tables and run by
:func:`~depthscale.claims.common.run_claim_study` into ``OUT/<claim>/``'s results store, so a
killed ``reproduce`` resumes, and ``depthscale sweep`` + ``depthscale fit`` on
``examples/nfd_fig2.toml`` / ``examples/nfd_transfer.toml`` give the same numbers by hand.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "ARM_LABELS", "FULL_DATA", "QUICK_DATA", "SMOKE_DATA", "corrected_arms", "fig2_depths",
    "fig2_tables", "seed_rounds", "settings_mapping", "transfer_tables",
]

#: the data set of each scale's settings (smoke: the tests' seconds-long runs)
QUICK_DATA = {"dataset": "mnist1d"}
FULL_DATA = {"dataset": "cifar10"}
SMOKE_DATA = {"dataset": "digits"}

#: how the figures name the two arms of Fig. 5 (formatted with the arm's recipe)
ARM_LABELS = {"depth_mup": "depth-muP ({})", "nfd_depth": "Eq. 8 arm ({})"}


def settings_mapping(s: Any) -> dict[str, Any]:
    """A claim's typed settings record (a dataclass) as the mapping the shared helpers here and
    in :mod:`.series` / :mod:`.slopes` read: its fields, those left at ``None`` (an optional
    setting not set) omitted, as if the key were absent."""
    return {k: v for k, v in dataclasses.asdict(s).items() if v is not None}


def corrected_arms(s: Mapping[str, Any]) -> tuple[tuple[str, str], tuple[str, str]]:
    """(tag, recipe) of the two arms of Fig. 5: vanilla depth-muP and the Eq. 8 correction,
    whose recipe is the setting ``corrected_recipe`` (default ``nfd-depth``; a negative control
    puts a recipe without the correction there)."""
    return ("depth_mup", "depth-mup"), ("nfd_depth", s.get("corrected_recipe", "nfd-depth"))


def _study_tables(name: str, model: str, recipe: str | None, s: Mapping[str, Any], *,
                  seed: int, device: str, data_dir: str | Path | None, grid: dict[str, Any],
                  plan_grid: dict[str, Any], analysis: dict[str, str]) -> dict[str, Any]:
    """One nfd study's tables: SGD, batch 128, cross-entropy, ``s["epochs"]`` epochs, the
    claim's dataset (its split seed = the claim's seed), runs seeded
    ``seed ... seed + s["seeds"] - 1``."""
    return {
        "study": {"name": name, "model": model, **({"recipe": recipe} if recipe else {}),
                  "dataset": s["dataset"]},
        "data": {"seed": seed, **({"dir": str(Path(data_dir).resolve())} if data_dir else {})},
        "train": {"optimizer": "sgd", "epochs": s["epochs"], "batch_size": 128, "loss": "ce",
                  **({"device": device} if device != "cpu" else {})},
        "grid": {**{k: v for k, v in grid.items() if k != "lr"},
                 "seed": list(range(seed, seed + s["seeds"])), "lr": grid["lr"],
                 **({"plan": plan_grid} if plan_grid else {})},
        "analysis": analysis,
    }


def seed_rounds(s: Mapping[str, Any]) -> list[int]:
    """The seed counts a sequential design looks at in turn (nfd-fig2, nfd-deep): ``seeds``,
    doubled until ``max_seeds``; more seeds only while the verdict is undecided, each look's
    intervals Bonferroni-corrected over the looks."""
    rounds = [int(s["seeds"])]
    while rounds[-1] < int(s.get("max_seeds", s["seeds"])):
        rounds.append(min(2 * rounds[-1], int(s["max_seeds"])))
    return rounds


def fig2_depths(s: Mapping[str, Any]) -> list[int]:
    """nfd-fig2's depths: ``depth`` (Fig. 2a-b) then the ``grid_depths`` (Fig. 2c-d)."""
    return list(dict.fromkeys([s["depth"], *s["grid_depths"]]))


def fig2_tables(s: Mapping[str, Any], *, seed: int = 0, device: str = "cpu",
                data_dir: str | Path | None = None) -> dict[str, Any]:
    """nfd-fig2's study (settings ``s``): depth-muP pre-act ResNet (nfd Eq. 1), SGD at
    lr = eta_c, the time horizon T swept (Fig. 2a-b), more depths at full scale (Fig. 2c-d);
    analysed as the final train loss vs T per depth."""
    return _study_tables(
        "nfd-fig2", "resnet1", s.get("recipe", "depth-mup"), s, seed=seed, device=device,
        data_dir=data_dir,
        grid={"depth": fig2_depths(s), "width": [s["width"]], "lr": [s["eta_c"]]},
        plan_grid={"T": s["Ts"]},
        analysis={"criterion": "final", "axis": "depth", "optimize": "plan.T"},
    )


def transfer_tables(s: Mapping[str, Any], *, seed: int = 0, device: str = "cpu",
                    data_dir: str | Path | None = None) -> dict[str, Any]:
    """nfd-transfer's study (settings ``s``): two-layer-block ResNet, depth-muP vs the Eq. 8
    LR (nfd-depth), an eta_c grid per depth (Fig. 5 row 2); analysed per recipe as the eta_c
    minimising each seed's last-epoch training loss (one optimum per seed)."""
    return _study_tables(
        "nfd-transfer", "resnet2", None, s, seed=seed, device=device, data_dir=data_dir,
        grid={"recipe": list(dict.fromkeys(r for _, r in corrected_arms(s))),
              "depth": s["depths"],
              "width": [s["width"]], "lr": s["eta_cs"]},
        plan_grid={},
        analysis={"criterion": "last-epoch", "axis": "depth", "group": "recipe"},
    )

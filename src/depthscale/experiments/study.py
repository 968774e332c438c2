"""Study specs: a TOML file naming a model, recipe, dataset, optimizer and a grid of runs.

A study is loaded and validated by :func:`load_study` (unknown keys and impossible values raise
:class:`~depthscale.errors.ConfigError` naming the file and the key) and expanded by
:func:`expand` into :class:`RunSpec` s. Each run is a pure function of its spec: :func:`run_one`
seeds everything from it, trains on one CPU thread and returns a :class:`RunRecord`. A run is
identified by :func:`run_id`, a hash of its canonical JSON and :data:`SPEC_SCHEMA`. Runs that
differ only in ``lr`` may instead be trained together by :func:`run_group` (opt-in batching, see
:func:`lr_groups`), with the same records to float rounding.

The format (``examples/quick_resnet_depth_lr.toml`` is a complete one)::

    [study]                 # name (default: the file's stem), model, recipe, dataset
    [model]                 # model options (activation, backward, kernel_size, ...)
    [plan]                  # plan options (T, regime, alpha, sigma_u, eta_u_scale)
    [data]                  # n_train, n_test, seed, dim, dir (relative to the spec file)
    [train]                 # optimizer, steps | epochs, batch_size, loss, momentum, ...
    [grid]                  # lr, depth, width, seed (lists) + optional recipe or [train] axes
    [grid.model] / [grid.plan] / [grid.data]   # option axes
    [analysis]              # criterion, axis, optimize, group, aggregate (AnalysisSpec)

A grid axis is a list of values or ``{logspace = [start, stop, num]}`` (powers of ten). A key is
either fixed in its section or swept in ``[grid]``, never both.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import platform
import socket
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any

from depthscale.errors import ConfigError

__all__ = [
    "ANALYSIS_AXES",
    "ANALYSIS_KEYS",
    "MAX_CURVE_POINTS",
    "SPEC_SCHEMA",
    "STATUSES",
    "AnalysisSpec",
    "RunRecord",
    "RunSpec",
    "StudySpec",
    "TrainSettings",
    "check_run",
    "expand",
    "load_study",
    "lr_groups",
    "parse_analysis",
    "parse_study",
    "prepare",
    "run_group",
    "run_id",
    "run_one",
    "versions",
]

#: Version of the run-spec schema; it is part of every run's hash, so bumping it reruns all.
SPEC_SCHEMA = 1
#: A run's final status: trained to the end, loss stopped being finite, or raised an error.
STATUSES = ("done", "diverged", "failed")
#: Longer per-step loss curves are stored as this many bucket means.
MAX_CURVE_POINTS = 1000
ANALYSIS_AXES = ("depth", "width")
ANALYSIS_KEYS = ("criterion", "axis", "optimize", "group", "aggregate")
_CRITERIA = ("running", "final", "last-epoch")
_AGGREGATES = ("optima", "loss")

_SECTIONS = ("study", "model", "plan", "data", "train", "grid", "analysis")
_STUDY_KEYS = ("name", "model", "recipe", "dataset")
_TRAIN_KEYS = ("optimizer", "steps", "epochs", "batch_size", "loss", "momentum", "weight_decay",
               "device", "eval_every")
_TRAIN_DEFAULTS: dict[str, Any] = {
    "optimizer": "sgd", "steps": None, "epochs": None, "batch_size": 128, "loss": "ce",
    "momentum": 0.0, "weight_decay": 0.0, "device": "cpu", "eval_every": 0,
}
_PLAN_KEYS = ("T", "regime", "alpha", "sigma_u", "eta_u_scale")
_PLAN_FLOATS = ("T", "alpha", "sigma_u", "eta_u_scale")
_DATA_KEYS = ("n_train", "n_test", "seed", "dim", "dir")
_CORE_AXES = ("lr", "width", "depth", "seed")
_SWEEPABLE = (*_CORE_AXES, "recipe", *(k for k in _TRAIN_KEYS if k != "device"))
_OPTION_SECTIONS = ("model", "plan", "data")
_INT_FIELDS = ("width", "depth", "seed", "steps", "batch_size", "eval_every")
_FLOAT_FIELDS = ("lr", "epochs", "momentum", "weight_decay")


# ---- specs ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrainSettings:
    """The fixed [train] settings of a study (LR and seed come from the grid)."""

    optimizer: str = "sgd"
    steps: int | None = None
    epochs: float | None = None
    batch_size: int = 128
    loss: str = "ce"
    momentum: float = 0.0
    weight_decay: float = 0.0
    device: str = "cpu"
    eval_every: int = 0


@dataclass(frozen=True)
class AnalysisSpec:
    """How ``depthscale fit`` analyses the study (its ``[analysis]`` table).

    * ``criterion``: the loss minimised: "running" (mean training loss over all steps, laws
      Sec. 4.1), "final" (full training-set loss at the end) or "last-epoch" (mean training
      loss over the last epoch, nfd Fig. 5 row 2).
    * ``axis``: the size the optimum is followed along, "depth" or "width".
    * ``optimize``: the grid axis the optimum is taken over: "lr" (eta*, refined between grid
      points, power law in the size) or another axis such as "plan.T" (the best grid value per
      size, nfd Fig. 2).
    * ``group``: a grid axis (e.g. "recipe") whose values are analysed separately; None: one.
    * ``aggregate``: how seeds combine: "optima" (one eta* per seed, then the mean and CI of
      log10 eta*; laws Sec. 4.1) or "loss" (the criterion averaged over seeds first, one
      optimum per size; nfd Fig. 5). ``optimize`` other than "lr" takes "loss" only.
    """

    criterion: str = "running"
    axis: str = "depth"
    optimize: str = "lr"
    group: str | None = None
    aggregate: str = "optima"


@dataclass(frozen=True)
class RunSpec:
    """Everything one run depends on. Options are sorted ``(name, value)`` pairs.

    ``data_dir`` says where the files of a file-based dataset lie on this machine; it is not
    part of the run's identity (the same data elsewhere is the same run).
    """

    model: str
    recipe: str
    dataset: str
    width: int
    depth: int
    lr: float
    seed: int
    optimizer: str = "sgd"
    steps: int | None = None
    epochs: float | None = None
    batch_size: int = 128
    loss: str = "ce"
    momentum: float = 0.0
    weight_decay: float = 0.0
    device: str = "cpu"
    eval_every: int = 0
    model_options: tuple[tuple[str, Any], ...] = ()
    plan_options: tuple[tuple[str, Any], ...] = ()
    data_options: tuple[tuple[str, Any], ...] = ()
    data_dir: str | None = field(default=None, compare=False)

    def canonical(self) -> dict[str, Any]:
        """The JSON-able dict that identifies the run (``data_dir`` left out)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "data_dir":
                continue
            value = getattr(self, f.name)
            out[f.name] = dict(value) if f.name.endswith("_options") else value
        return out

    def to_dict(self) -> dict[str, Any]:
        """:meth:`canonical` plus ``data_dir``; :meth:`from_dict` inverts it."""
        return {**self.canonical(), "data_dir": self.data_dir}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunSpec:
        """The spec :meth:`to_dict` wrote; unknown keys raise ConfigError."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ConfigError(f"run spec has unknown field(s) {', '.join(unknown)}")
        kw = dict(d)
        for name in ("model_options", "plan_options", "data_options"):
            kw[name] = tuple(sorted(dict(kw.get(name) or {}).items()))
        return cls(**kw)

    def flat(self) -> dict[str, Any]:
        """One level: fields by name, options as ``model.<k>``, ``plan.<k>``, ``data.<k>``."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name.endswith("_options"):
                prefix = f.name.removesuffix("_options")
                out.update({f"{prefix}.{k}": v for k, v in value})
            else:
                out[f.name] = value
        return out

    def train_config(self) -> Any:
        """The :class:`depthscale.train.TrainConfig` of this run (not yet validated)."""
        from depthscale.train import TrainConfig

        return TrainConfig(optimizer=self.optimizer, lr=self.lr, steps=self.steps,
                           epochs=self.epochs, batch_size=self.batch_size, loss=self.loss,
                           momentum=self.momentum, weight_decay=self.weight_decay,
                           seed=self.seed, device=self.device, eval_every=self.eval_every)

    def label(self) -> str:
        """A short human description: ``resnet1/laws width 32 depth 4 lr 0.1 seed 0``."""
        extra = " ".join(f"{k} {v}" for k, v in self.flat().items()
                         if "." in k and k != "data.dir")
        return (f"{self.model}/{self.recipe} width {self.width} depth {self.depth} "
                f"lr {self.lr:g} seed {self.seed}" + (f" {extra}" if extra else ""))


def run_id(spec: RunSpec) -> str:
    """16 hex digits of SHA-256 over the canonical JSON of ``spec`` and :data:`SPEC_SCHEMA`.

    Stable across processes, machines and Python versions: keys are sorted, floats written by
    ``repr`` and non-finite numbers refused.
    """
    text = json.dumps({"schema": SPEC_SCHEMA, "run": spec.canonical()}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:16]


@dataclass(frozen=True)
class StudySpec:
    """A validated study: fixed settings, grid axes (name, values) in expansion order."""

    name: str
    model: str
    recipe: str | None
    dataset: str
    train: TrainSettings
    model_options: tuple[tuple[str, Any], ...]
    plan_options: tuple[tuple[str, Any], ...]
    data_options: tuple[tuple[str, Any], ...]
    data_dir: str | None
    grid: tuple[tuple[str, tuple[Any, ...]], ...]
    analysis: AnalysisSpec = AnalysisSpec()
    source: str = "<string>"
    text: str = ""

    @property
    def n_runs(self) -> int:
        """The number of runs the grid expands to."""
        return math.prod(len(values) for _, values in self.grid)


# ---- loading and validation -------------------------------------------------------------------
def load_study(path: str | os.PathLike[str]) -> StudySpec:
    """Read and validate the TOML study spec at ``path``.

    Raises ConfigError (one line naming the file and the key) for a missing or malformed file,
    unknown keys, unknown model/recipe/dataset/option names, impossible values, an empty grid.
    Relative ``[data] dir`` paths are resolved against the spec's folder.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"spec {p}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"spec {p}: cannot read it ({exc})") from None
    return parse_study(text, source=str(p), base_dir=p.parent)


def _toml_loads(text: str, source: str) -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise ConfigError(
                "reading study specs needs Python >= 3.11 (tomllib) or: pip install tomli"
            ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"spec {source}: not valid TOML ({exc})") from None


def parse_study(text: str, *, source: str = "<string>",
                base_dir: str | os.PathLike[str] | None = None) -> StudySpec:
    """Validate the TOML ``text`` of a study (see :func:`load_study`)."""
    raw = _toml_loads(text, source)
    v = _Validator(source)
    v.keys("", raw, _SECTIONS)
    for section in _SECTIONS:
        if section in raw and not isinstance(raw[section], dict):
            v.fail(f"[{section}]", "must be a table")
    study = raw.get("study", {})
    v.keys("study", study, _STUDY_KEYS)
    grid = dict(raw.get("grid", {}))
    if not grid:
        v.fail("[grid]", "is missing or empty; give lr, depth, width and seed lists")

    from depthscale.data import DATASETS
    from depthscale.models import MODELS
    from depthscale.param import OPTIMIZERS, RECIPES
    from depthscale.train import LOSSES

    name = study.get("name", Path(source).stem if source != "<string>" else "study")
    v.string("study.name", name)
    model = v.choice("study.model", study.get("model"), MODELS)
    dataset = v.choice("study.dataset", study.get("dataset"), DATASETS)
    recipe = study.get("recipe")
    if "recipe" in grid:
        if recipe is not None:
            v.fail("study.recipe", "is both fixed in [study] and swept in [grid]; keep one")
    else:
        recipe = v.choice("study.recipe", recipe, RECIPES)

    options: dict[str, dict[str, Any]] = {}
    allowed = {"model": MODELS[model].options, "plan": _PLAN_KEYS, "data": _DATA_KEYS}
    for section in _OPTION_SECTIONS:
        table = raw.get(section, {})
        v.keys(section, table, allowed[section])
        options[section] = {k: v.scalar(f"{section}.{k}", val, f"{section}.{k}")
                            for k, val in table.items()}
    data_dir = options["data"].pop("dir", None)
    if data_dir is not None:
        v.string("data.dir", data_dir)
        data_dir = str(Path(base_dir or ".", data_dir)) if not Path(data_dir).is_absolute() \
            else data_dir

    train_raw = raw.get("train", {})
    v.keys("train", train_raw, _TRAIN_KEYS)

    # grid: core axes, [study]/[train] axes, option sub-tables
    axes: list[tuple[str, tuple[Any, ...]]] = []
    for key in grid:
        if key in _OPTION_SECTIONS:
            continue
        if key not in _SWEEPABLE:
            hint = (f"the {key} is fixed per study ([study] {key})" if key in _STUDY_KEYS
                    else f"sweepable keys: {', '.join(_SWEEPABLE)}, and [grid.model], "
                         "[grid.plan], [grid.data] tables")
            v.fail(f"grid.{key}", f"is not a grid axis; {hint}")
        if key in train_raw:
            v.fail(f"train.{key}", "is both fixed in [train] and swept in [grid]; keep one")
    for key in _CORE_AXES:
        if key not in grid:
            v.fail(f"grid.{key}", "is missing; every study sweeps (or lists one) lr, width, "
                   "depth and seed")
    ordered = [k for k in ("recipe", "width", "depth", "seed") if k in grid]
    ordered += [k for k in grid if k in _SWEEPABLE and k not in (*ordered, "lr")]
    for key in ordered:
        axes.append((key, v.axis(f"grid.{key}", grid[key], key)))
    for section in _OPTION_SECTIONS:
        table = grid.get(section, {})
        if not isinstance(table, dict):
            extra = "; the model is fixed per study ([study] model)" if section == "model" else ""
            v.fail(f"grid.{section}", f"must be a table of {section} option lists "
                   f"([grid.{section}]){extra}")
        for key, values in table.items():
            if key not in allowed[section] or key == "dir":
                v.fail(f"grid.{section}.{key}", f"is not a {section} option; known: "
                       f"{', '.join(k for k in allowed[section] if k != 'dir') or 'none'}")
            if key in options[section]:
                v.fail(f"{section}.{key}", f"is both fixed in [{section}] and swept in [grid]; "
                       "keep one")
            axes.append((f"{section}.{key}",
                         v.axis(f"grid.{section}.{key}", values, f"{section}.{key}")))
    axes.append(("lr", v.axis("grid.lr", grid["lr"], "lr")))

    train_kw = {**_TRAIN_DEFAULTS}
    for key, value in train_raw.items():
        train_kw[key] = v.field_value(f"train.{key}", key, value)
    swept = {k for k, _ in axes}
    for a, b in (("steps", "epochs"), ("epochs", "steps")):
        if a in swept and (b in swept or train_kw[b] is not None):
            v.fail(f"grid.{a}", f"is swept while {b} is also given; a run takes steps or "
                   "epochs, not both")
    if "steps" not in swept and "epochs" not in swept and \
            (train_kw["steps"] is None) == (train_kw["epochs"] is None):
        v.fail("[train]", "give exactly one of steps or epochs")
    for key in ("optimizer", "loss"):
        if key not in swept:
            v.choice(f"train.{key}", train_kw[key], OPTIMIZERS if key == "optimizer" else LOSSES)
    if not isinstance(train_kw["device"], str):
        v.fail("train.device", f"must be a string like 'cpu' or 'cuda', got {train_kw['device']!r}")
    for key, values in axes:
        if key == "recipe":
            for r in values:
                v.choice("grid.recipe", r, RECIPES)
        elif key in ("optimizer", "loss"):
            for r in values:
                v.choice(f"grid.{key}", r, OPTIMIZERS if key == "optimizer" else LOSSES)

    analysis = parse_analysis(raw.get("analysis", {}), axes=[k for k, _ in axes], source=source)
    spec = StudySpec(
        name=name, model=model, recipe=recipe, dataset=dataset,
        train=TrainSettings(**train_kw),
        model_options=tuple(sorted(options["model"].items())),
        plan_options=tuple(sorted(options["plan"].items())),
        data_options=tuple(sorted(options["data"].items())),
        data_dir=data_dir, grid=tuple(axes), analysis=analysis, source=source, text=text,
    )
    _check_runs(spec, v)
    return spec


def parse_analysis(table: Any, *, axes: Sequence[str] | None = None,
                   source: str = "<string>") -> AnalysisSpec:
    """Validate an ``[analysis]`` table (keys: :data:`ANALYSIS_KEYS`, see :class:`AnalysisSpec`).

    ``axes`` are the study's grid axis names (``lr``, ``depth``, ``recipe``, ``plan.T``...):
    ``optimize`` and ``group`` must be among them (None: not checked). Raises ConfigError naming
    the key.
    """
    v = _Validator(source)
    v.keys("analysis", table, ANALYSIS_KEYS)
    criterion = v.choice("analysis.criterion", table.get("criterion", "running"), _CRITERIA)
    axis = v.choice("analysis.axis", table.get("axis", "depth"), ANALYSIS_AXES)
    optimize = v.string("analysis.optimize", table.get("optimize", "lr"))
    group = table.get("group")
    if group is not None:
        v.string("analysis.group", group)
    for key, value in (("optimize", optimize), ("group", group)):
        if value is None or (key == "optimize" and value == "lr"):
            continue
        if axes is not None and value not in axes:
            v.fail(f"analysis.{key}", f"{value!r} is not an axis of [grid]; swept: "
                   f"{', '.join(axes)}")
        if value in ("seed", axis):
            v.fail(f"analysis.{key}", f"cannot be {value!r}: seeds are averaged and {axis} is "
                   "the size axis (analysis.axis)")
    if group is not None and group == optimize:
        v.fail("analysis.group", f"cannot be the axis optimised over ({optimize!r})")
    aggregate = v.choice("analysis.aggregate",
                         table.get("aggregate", "optima" if optimize == "lr" else "loss"),
                         _AGGREGATES)
    if optimize != "lr" and aggregate != "loss":
        v.fail("analysis.aggregate", f"{aggregate!r} needs optimize = \"lr\"; the best "
               f"{optimize} is taken on the seed-mean loss (aggregate = \"loss\")")
    return AnalysisSpec(criterion=criterion, axis=axis, optimize=optimize, group=group,
                        aggregate=aggregate)


class _Validator:
    """Raises ConfigError("spec FILE: KEY MESSAGE") for the first problem found."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, message: str) -> None:
        raise ConfigError(f"spec {self.source}: {key} {message}")

    def keys(self, section: str, table: Any, known: tuple[str, ...] | Any) -> None:
        if not isinstance(table, dict):
            self.fail(f"[{section}]", "must be a table")
        unknown = sorted(set(table) - set(known))
        if unknown:
            where = f"[{section}]" if section else "top level"
            self.fail(f"{where}", f"has unknown key(s) {', '.join(unknown)}; known: "
                      f"{', '.join(known) or 'none'}")

    def string(self, key: str, value: Any) -> str:
        if not isinstance(value, str) or not value:
            self.fail(key, f"must be a non-empty string, got {value!r}")
        return value

    def choice(self, key: str, value: Any, known: Any) -> str:
        if value is None:
            self.fail(key, f"is missing; choose one of: {', '.join(known)}")
        if not isinstance(value, str) or value not in known:
            kind = key.split(".")[-1]
            self.fail(key, f"unknown {kind} {value!r}; choose one of: {', '.join(known)}")
        return value

    def scalar(self, key: str, value: Any, option: str | None = None) -> Any:
        """A TOML scalar; plan options that are numbers become floats."""
        if isinstance(value, float) and not math.isfinite(value):
            self.fail(key, f"must be finite, got {value}")
        if not isinstance(value, str | int | float | bool):
            self.fail(key, f"must be a string, number or boolean, got {value!r}")
        if option is not None and option.startswith("plan.") \
                and option.split(".", 1)[1] in _PLAN_FLOATS:
            return self.number(key, value)
        return value

    def number(self, key: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            self.fail(key, f"must be a finite number, got {value!r}")
        return float(value)

    def integer(self, key: str, value: Any, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f"must be an integer, got {value!r}")
        if value < minimum:
            self.fail(key, f"must be >= {minimum}, got {value}")
        return int(value)

    def field_value(self, key: str, name: str | None, value: Any) -> Any:
        """A value of RunSpec field ``name`` (``section.key``: an option) with its type and
        range."""
        if name in ("width", "depth", "steps", "batch_size"):
            return self.integer(key, value, 1)
        if name in ("seed", "eval_every"):
            return self.integer(key, value, 0)
        if name in ("lr", "epochs"):
            x = self.number(key, value)
            if x <= 0:
                self.fail(key, f"must be > 0, got {value!r}")
            return x
        if name in ("momentum", "weight_decay"):
            x = self.number(key, value)
            if x < 0:
                self.fail(key, f"must be >= 0, got {value!r}")
            return x
        if name in ("recipe", "optimizer", "loss", "device"):
            return self.string(key, value)
        return self.scalar(key, value, name)

    def axis(self, key: str, values: Any, name: str | None) -> tuple[Any, ...]:
        if isinstance(values, dict):
            values = self._logspace(key, values)
        if not isinstance(values, list):
            self.fail(key, f"must be a list of values or {{logspace = [start, stop, num]}}, "
                      f"got {values!r}")
        if not values:
            self.fail(key, "is empty: the study would have no runs")
        out = tuple(self.field_value(key, name, x) for x in values)
        seen: set[str] = set()
        for x in out:
            token = json.dumps(x)
            if token in seen:
                self.fail(key, f"lists {x!r} twice")
            seen.add(token)
        return out

    def _logspace(self, key: str, table: dict[str, Any]) -> list[float]:
        if set(table) != {"logspace"}:
            self.fail(key, "as a table takes only logspace = [start, stop, num] "
                      "(powers of ten)")
        spec = table["logspace"]
        if not (isinstance(spec, list) and len(spec) == 3):
            self.fail(key, f"logspace must be [start, stop, num], got {spec!r}")
        start, stop = self.number(key, spec[0]), self.number(key, spec[1])
        num = self.integer(f"{key} logspace num", spec[2], 1)
        if num == 1:
            return [float(f"{10.0 ** start:.12g}")]
        # 12 significant digits: the same values (and hashes) on every platform
        return [float(f"{10.0 ** (start + i * (stop - start) / (num - 1)):.12g}")
                for i in range(num)]


def _check_runs(spec: StudySpec, v: _Validator) -> None:
    """Validate every expanded run's train config and each distinct plan setting."""
    from depthscale.param import plan

    seen_plans: set[str] = set()
    for run in expand(spec):
        try:
            run.train_config().validate()
        except ConfigError as exc:
            v.fail("[train]/[grid]", f"gives an impossible run ({run.label()}): {exc}")
        key = json.dumps([run.recipe, run.plan_options, dict(run.model_options).get("activation")])
        if key in seen_plans:
            continue
        seen_plans.add(key)
        try:
            activation = dict(run.model_options).get("activation", "relu")
            plan(run.recipe, width=1, depth=1, activation=activation, **dict(run.plan_options))
        except ConfigError as exc:
            v.fail("[plan]/[model]", f"{exc}")
        except TypeError as exc:
            v.fail("[plan]", f"has a value of the wrong type ({exc})")


def expand(spec: StudySpec) -> list[RunSpec]:
    """All runs of ``spec``: the product of its grid axes, LR varying fastest.

    The order is deterministic; run ids are distinct (duplicate axis values are refused when
    the spec is loaded).
    """
    base = RunSpec(
        model=spec.model, recipe=spec.recipe or "", dataset=spec.dataset, width=1, depth=1,
        lr=1.0, seed=0, **{k: getattr(spec.train, k) for k in _TRAIN_KEYS},
        model_options=spec.model_options, plan_options=spec.plan_options,
        data_options=spec.data_options, data_dir=spec.data_dir,
    )
    names = [k for k, _ in spec.grid]
    runs = []
    for combo in itertools.product(*(values for _, values in spec.grid)):
        direct: dict[str, Any] = {}
        opts: dict[str, dict[str, Any]] = {s: {} for s in _OPTION_SECTIONS}
        for key, value in zip(names, combo, strict=True):
            if "." in key:
                section, opt = key.split(".", 1)
                opts[section][opt] = value
            else:
                direct[key] = value
        if "steps" in direct:
            direct.setdefault("epochs", None)
        if "epochs" in direct:
            direct.setdefault("steps", None)
        for section in _OPTION_SECTIONS:
            if opts[section]:
                attr = f"{section}_options"
                merged = {**dict(getattr(base, attr)), **opts[section]}
                direct[attr] = tuple(sorted(merged.items()))
        runs.append(replace(base, **direct))
    return runs


# ---- records ----------------------------------------------------------------------------------
def _finite(x: Any) -> Any:
    """Floats that are not finite become None (JSON has no NaN)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


@dataclass(frozen=True)
class RunRecord(Mapping[str, Any]):
    """What one run produced. Also a read-only mapping of its flat row (:meth:`row`): spec
    fields by name (``depth``, ``lr``, ``seed``, ``model.activation``...), ``run_id``,
    ``status``, ``error``, every metric (``running_loss``, ``final_train_loss``...),
    ``seconds``, ``finished_at``, ``worker`` and ``version.<package>``.

    ``metrics`` holds ``running_loss`` (mean training loss over all steps done),
    ``steps_done``, ``diverged_at``, ``epoch_losses``, ``evals`` and ``final_<split>_<metric>``
    (absent after divergence or failure); non-finite values are None. ``curve_steps`` /
    ``curve_losses`` are the per-step training loss, or bucket means ending at those steps when
    longer than :data:`MAX_CURVE_POINTS`.
    """

    run_id: str
    spec: RunSpec
    status: str
    metrics: dict[str, Any] = field(default_factory=dict)
    curve_steps: list[int] = field(default_factory=list)
    curve_losses: list[float | None] = field(default_factory=list)
    seconds: float = 0.0
    versions: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    finished_at: str = ""
    worker: str = ""

    __hash__ = None  # type: ignore[assignment]  # holds dicts and lists

    def outcome(self) -> dict[str, Any]:
        """The part that is a pure function of the spec (no timing, host or versions)."""
        return {"run_id": self.run_id, "status": self.status, "error": self.error,
                "metrics": self.metrics, "curve_steps": self.curve_steps,
                "curve_losses": self.curve_losses}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict; :meth:`from_dict` inverts it."""
        return {"run_id": self.run_id, "spec": self.spec.to_dict(), "status": self.status,
                "metrics": self.metrics, "curve_steps": self.curve_steps,
                "curve_losses": self.curve_losses, "seconds": self.seconds,
                "versions": self.versions, "error": self.error,
                "finished_at": self.finished_at, "worker": self.worker}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunRecord:
        """The record :meth:`to_dict` wrote."""
        return cls(**{**d, "spec": RunSpec.from_dict(d["spec"])})

    @cached_property
    def _row(self) -> dict[str, Any]:
        row: dict[str, Any] = {"run_id": self.run_id, "status": self.status, "error": self.error}
        row.update(self.spec.flat())
        row.update(self.metrics)
        row.update({"curve_steps": self.curve_steps, "curve_losses": self.curve_losses,
                    "seconds": self.seconds, "finished_at": self.finished_at,
                    "worker": self.worker})
        row.update({f"version.{k}": v for k, v in self.versions.items()})
        return row

    def row(self) -> dict[str, Any]:
        """A copy of the flat row (see the class docstring)."""
        return dict(self._row)

    def __getitem__(self, key: str) -> Any:
        return self._row[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._row)

    def __len__(self) -> int:
        return len(self._row)


def versions() -> dict[str, str]:
    """Versions of depthscale, torch and Python in this process."""
    import torch

    import depthscale

    return {"depthscale": depthscale.__version__, "torch": str(torch.__version__),
            "python": platform.python_version()}


def _downsample(losses: list[float]) -> tuple[list[int], list[float | None]]:
    n = len(losses)
    if n <= MAX_CURVE_POINTS:
        return list(range(1, n + 1)), [_finite(float(x)) for x in losses]
    steps, values = [], []
    for b in range(MAX_CURVE_POINTS):
        lo, hi = b * n // MAX_CURVE_POINTS, (b + 1) * n // MAX_CURVE_POINTS
        steps.append(hi)
        values.append(_finite(math.fsum(losses[lo:hi]) / (hi - lo)))
    return steps, values


# ---- running ----------------------------------------------------------------------------------
_DATA_CACHE: OrderedDict[str, Any] = OrderedDict()
_DATA_CACHE_SIZE = 2


def _dataset(spec: RunSpec) -> Any:
    """The run's dataset, cached in this process (the last two distinct ones)."""
    from depthscale.data import load

    key = json.dumps([spec.dataset, spec.data_dir, spec.data_options], sort_keys=True)
    if key in _DATA_CACHE:
        _DATA_CACHE.move_to_end(key)
        return _DATA_CACHE[key]
    opts = dict(spec.data_options)
    data = load(spec.dataset, data_dir=spec.data_dir, seed=opts.pop("seed", 0), **opts)
    _DATA_CACHE[key] = data
    while len(_DATA_CACHE) > _DATA_CACHE_SIZE:
        _DATA_CACHE.popitem(last=False)
    return data


def prepare(spec: RunSpec) -> tuple[Any, Any, Any]:
    """``(model, plan, data)`` of a run, initialised from its seed; raises ConfigError or
    DataError for settings that cannot run (a sweep checks its first run this way)."""
    from depthscale.models import build

    data = _dataset(spec)
    model, plan = build(spec.model, spec.recipe, input_shape=data.sample_shape,
                        n_out=data.n_out, width=spec.width, depth=spec.depth, seed=spec.seed,
                        plan_options=dict(spec.plan_options), **dict(spec.model_options))
    return model, plan, data


def check_run(spec: RunSpec, *, check_device: bool = True) -> None:
    """Build ``spec``'s data and model (and check its device) without training; any problem is
    raised as one ConfigError/DataError line. A sweep calls it on its first pending run so a
    setting that cannot run stops the study before any work instead of failing every run."""
    from depthscale.errors import DepthscaleError
    from depthscale.train import resolve_device

    try:
        spec.train_config().validate()
        if check_device:
            resolve_device(spec.device)
        prepare(spec)
    except DepthscaleError:
        raise
    except Exception as exc:
        message = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise ConfigError(f"the run {spec.label()} cannot be built: {message}") from None


def run_one(spec: RunSpec) -> RunRecord:
    """Build, train and measure one run; never raises for the run's own errors.

    Status "done", "diverged" (non-finite loss; the sweep goes on) or "failed" (any exception,
    recorded as ``error``: one line ``Type: message``). The run uses one intra-op CPU thread
    (restored afterwards), so its metrics are identical in-process, in a worker pool or on Ray.
    KeyboardInterrupt and SystemExit propagate.
    """
    import torch

    from depthscale.train import train

    threads = torch.get_num_threads()
    t0 = time.perf_counter()
    try:
        torch.set_num_threads(1)
        model, plan, data = prepare(spec)
        result = train(model, plan, data, spec.train_config())
    except Exception as exc:  # recorded, not raised: one bad run must not stop the study
        return _failed(spec, exc, time.perf_counter() - t0)
    finally:
        torch.set_num_threads(threads)
    return _record(spec, result, time.perf_counter() - t0, _worker())


def _failed(spec: RunSpec, exc: Exception, seconds: float) -> RunRecord:
    message = " ".join(f"{type(exc).__name__}: {exc}".split())
    return RunRecord(run_id=run_id(spec), spec=spec, status="failed", error=message[:2000],
                     seconds=seconds, versions=versions(), finished_at=_now(),
                     worker=_worker())


def _record(spec: RunSpec, result: Any, seconds: float, worker: str) -> RunRecord:
    """The record of a finished :class:`~depthscale.train.TrainResult`."""
    metrics: dict[str, Any] = {
        "running_loss": _finite(result.running_loss),
        "steps_done": result.steps_done,
        "diverged_at": result.diverged_at,
        **{f"final_{k}": _finite(float(v)) for k, v in result.final.items()},
        "epoch_losses": [_finite(float(x)) for x in result.epoch_losses],
        "evals": [{k: _finite(x) for k, x in e.items()} for e in result.evals],
    }
    steps, losses = _downsample(result.losses)
    return RunRecord(
        run_id=run_id(spec), spec=spec, status="done" if result.status == "ok" else "diverged",
        metrics=metrics, curve_steps=steps, curve_losses=losses, seconds=seconds,
        versions=versions(), finished_at=_now(), worker=worker,
    )


def _lr_group_key(spec: RunSpec) -> str:
    """What runs of one LR group share: every field but ``lr`` (``data_dir`` included)."""
    fields_ = {k: v for k, v in spec.to_dict().items() if k != "lr"}
    return json.dumps(fields_, sort_keys=True, default=str)


def _batchable(spec: RunSpec) -> bool:
    """Whether :func:`~depthscale.train.train_batched` can train ``spec``'s runs: plain SGD and
    a model that :func:`~depthscale.train.check_batchable` accepts (built here to check)."""
    from depthscale.train import check_batchable

    if (spec.optimizer, spec.momentum, spec.weight_decay) != ("sgd", 0.0, 0.0):
        return False
    try:
        spec.train_config().validate()
        model, _, _ = prepare(spec)
        check_batchable(model)
    except Exception:  # not batchable, or not buildable: one by one, where errors are recorded
        return False
    return True


def lr_groups(specs: Sequence[RunSpec]) -> list[tuple[RunSpec, ...]]:
    """``specs`` split into the units :func:`run_group` trains: runs equal in everything but
    ``lr`` whose settings :func:`_batchable` accepts form one group, every other run is alone.

    Groups are in order of their first run, runs in their given order. Building one model per
    group to check it, this is cheap next to training.
    """
    by_key: dict[str, list[RunSpec]] = {}
    for spec in specs:
        by_key.setdefault(_lr_group_key(spec), []).append(spec)
    out: list[tuple[RunSpec, ...]] = []
    for members in by_key.values():
        if len(members) > 1 and _batchable(members[0]):
            out.append(tuple(members))
        else:
            out.extend((m,) for m in members)
    return out


def run_group(specs: Sequence[RunSpec]) -> list[RunRecord]:
    """Train runs that differ only in ``lr`` in one :func:`~depthscale.train.train_batched` pass;
    one record per run, in order. Never raises for the runs' own errors.

    Each record has the fields and metrics :func:`run_one` gives, equal to float rounding
    (batched matmuls round differently); a diverging member is recorded ``diverged`` while the
    others train on. ``seconds`` is the group's wall time (build, train, evaluate) divided by G,
    and ``worker`` says so: ``host:pid [batch of G: seconds = group time / G]``. One intra-op CPU
    thread, as :func:`run_one`. A group :func:`~depthscale.train.train_batched` refuses (other
    optimizer, buffers, dropout) or that raises is run one by one with :func:`run_one` instead.
    """
    import torch

    from depthscale.train import check_batchable, train_batched

    specs = list(specs)
    if not specs:
        return []
    key = _lr_group_key(specs[0])
    for s in specs[1:]:
        if _lr_group_key(s) != key:
            raise ConfigError(f"run_group needs runs that differ only in lr; {s.label()} and "
                              f"{specs[0].label()} differ in more")
    if len(specs) == 1:
        return [run_one(specs[0])]
    threads = torch.get_num_threads()
    t0 = time.perf_counter()
    try:
        torch.set_num_threads(1)
        model, plan, data = prepare(specs[0])
        check_batchable(model)
        results = train_batched(model, plan, data, specs[0].train_config(),
                                [s.lr for s in specs])
    except Exception:  # not batchable after all, or a failure: each run on its own records it
        return [run_one(s) for s in specs]
    finally:
        torch.set_num_threads(threads)
    g = len(specs)
    seconds = (time.perf_counter() - t0) / g
    worker = f"{_worker()} [batch of {g}: seconds = group time / {g}]"
    return [_record(s, r, seconds, worker) for s, r in zip(specs, results, strict=True)]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _worker() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"

"""Study specs: a TOML file naming a model, recipe, dataset, optimizer and a grid of runs.

:func:`load_study` validates a study (errors name the file and the key); the records, and
:func:`expand` into :class:`RunSpec` s identified by :func:`run_id`, are re-exported from
:mod:`~depthscale.studies.spec_records`; running them is :mod:`~depthscale.studies.runner`'s.

Sections (``examples/quick_resnet_depth_lr.toml`` is a complete spec; each key:
docs/cli.md): ``[study]`` (name, model, recipe, dataset; max_runs, max_hours, max_depth,
max_gib confirm a larger study), ``[model]``, ``[roles]``, ``[plan]``, ``[data]``, ``[train]``,
``[grid]`` (lr, depth, width, seed, optional recipe or [train] axes), ``[grid.model]``,
``[grid.plan]``, ``[grid.data]`` and ``[analysis]``. A grid axis is a list of values or
``{logspace = [start, stop, num]}``; a key is fixed in its section or swept in ``[grid]``, never
both. ``[study] model`` is a registry name (``depthscale.models.MODELS``) or a user factory
``"package.module:function"`` (:func:`depthscale.models.resolve_factory`), checked on load.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from depthscale.errors import ConfigError
from depthscale.studies.spec_bounds import check_grid_cost, check_grid_size
from depthscale.studies.spec_records import (
    OPTION_SECTIONS,
    SPEC_SCHEMA,
    TRAIN_KEYS,
    AnalysisSpec,
    RunSpec,
    StudySpec,
    combination,
    expand,
    run_id,
)
from depthscale.studies.spec_toml import study_toml, toml_loads
from depthscale.studies.spec_values import SpecValidator
from depthscale.train import FINAL_EVALS, LOSSES, TrainSettings

__all__ = [
    "ANALYSIS_AXES",
    "ANALYSIS_KEYS",
    "SPEC_SCHEMA",
    "AnalysisSpec",
    "RunSpec",
    "StudySpec",
    "combination",
    "expand",
    "load_study",
    "parse_analysis",
    "parse_study",
    "run_id",
]

ANALYSIS_AXES = ("depth", "width")
ANALYSIS_KEYS = ("criterion", "axis", "optimize", "group", "aggregate")
_CRITERIA = ("running", "final", "last-epoch")
_AGGREGATES = ("optima", "loss")

_SECTIONS = ("study", "model", "roles", "plan", "data", "train", "grid", "analysis")
_STUDY_KEYS = ("name", "model", "recipe", "dataset", "max_runs", "max_hours", "max_depth",
               "max_gib")
_PLAN_KEYS = ("T", "regime", "alpha", "sigma_u", "eta_u_scale")
_DATA_KEYS = ("n_train", "n_test", "seed", "dir")  # and the dataset's own options
_CORE_AXES = ("lr", "width", "depth", "seed")
_SWEEPABLE = (*_CORE_AXES, "recipe",
              *(k for k in TRAIN_KEYS if k not in ("device", "final_eval")))


# ---- loading and validation -------------------------------------------------------------------
def load_study(path: str | os.PathLike[str], *, check_cost: bool = True) -> StudySpec:
    """Read and validate the TOML study spec at ``path``.

    Raises ConfigError (one line naming the file and the key) for a missing or malformed file,
    unknown keys, unknown model/recipe/dataset/option names, impossible values, an empty grid.
    Relative ``[data] dir`` paths are resolved against the spec's folder. ``check_cost``:
    the size and time bounds of its runs (:func:`study_from_tables`), for a caller that runs
    it.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"spec {p}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"spec {p}: cannot read it ({exc})") from None
    return parse_study(text, source=str(p), base_dir=p.parent, check_cost=check_cost)


def parse_study(text: str, *, source: str = "<string>",
                base_dir: str | os.PathLike[str] | None = None,
                check_cost: bool = True) -> StudySpec:
    """Validate the TOML ``text`` of a study (see :func:`load_study`)."""
    return study_from_tables(toml_loads(text, source), source=source, base_dir=base_dir,
                             text=text, check_cost=check_cost)


def study_from_tables(raw: Mapping[str, Any], *, source: str = "<tables>",
                      base_dir: str | os.PathLike[str] | None = None,
                      text: str | None = None, check_cost: bool = True) -> StudySpec:
    """Validate a study given as tables, the same checks as :func:`load_study`; the spec keeps
    ``text`` (default: :func:`study_toml` of the tables) as the copy written beside the store.
    This is how code builds studies: TOML is only the file edge. ``check_cost=False`` skips
    the size and time bounds of its runs (:func:`~depthscale.studies.spec_bounds.
    check_grid_cost`), for a caller that bounded them already."""
    if text is None:
        text = study_toml(raw)
    v = SpecValidator(source)
    v.keys("", raw, _SECTIONS)
    for section in _SECTIONS:
        if section in raw and not isinstance(raw[section], dict):
            v.fail(f"[{section}]", "must be a table")
    study = raw.get("study", {})
    v.keys("study", study, _STUDY_KEYS)
    grid = dict(raw.get("grid", {}))
    if not grid:
        v.fail("[grid]", "is missing or empty; give lr, depth, width and seed lists")
    name, model, recipe, dataset, factory = _head(study, grid, source, v)
    options, allowed, roles, data_dir = _fixed_options(raw, model, dataset, factory, base_dir, v)
    train_raw = raw.get("train", {})
    v.keys("train", train_raw, TRAIN_KEYS)
    axes = _grid_axes(grid, train_raw, options, allowed, v)
    train = _train_settings(train_raw, axes, v)
    analysis = parse_analysis(raw.get("analysis", {}), axes=[k for k, _ in axes], source=source)
    if analysis.criterion == "final" and train.final_eval != "train+test":
        v.fail("analysis.criterion", "\"final\" reads the final training-set loss, which "
               f"train.final_eval = {train.final_eval!r} does not compute; use "
               "final_eval = \"train+test\" or another criterion")
    spec = StudySpec(
        name=name, model=model, recipe=recipe, dataset=dataset, train=train,
        model_options=tuple(sorted(options["model"].items())),
        plan_options=tuple(sorted(options["plan"].items())),
        data_options=tuple(sorted(options["data"].items())),
        data_dir=data_dir, grid=tuple(axes), analysis=analysis, source=source, text=text,
        roles=roles,
    )
    check_grid_size(spec, study.get("max_runs"), v)
    _check_runs(spec, v)
    if check_cost:
        check_grid_cost(spec, study, v)
    return spec


def _head(study: Mapping[str, Any], grid: Mapping[str, Any], source: str,
          v: SpecValidator) -> tuple[str, str, str | None, str, bool]:
    """``[study]``: name, model (registry name or user factory), recipe (None: swept),
    dataset, and whether the model is a factory."""
    from depthscale.data import DATASETS
    from depthscale.models import MODELS, is_factory
    from depthscale.param import RECIPES

    name = study.get("name", Path(source).stem if not source.startswith("<") else "study")
    v.string("study.name", name)
    factory = is_factory(study.get("model"))
    model = study["model"] if factory else v.choice("study.model", study.get("model"), MODELS)
    dataset = v.choice("study.dataset", study.get("dataset"), DATASETS)
    recipe = study.get("recipe")
    if "recipe" in grid:
        if recipe is not None:
            v.fail("study.recipe", "is both fixed in [study] and swept in [grid]; keep one")
    else:
        recipe = v.choice("study.recipe", recipe, RECIPES)
    return name, model, recipe, dataset, factory


_Options = dict[str, dict[str, Any]]


def _fixed_options(
    raw: Mapping[str, Any], model: str, dataset: str, factory: bool,
    base_dir: str | os.PathLike[str] | None, v: SpecValidator,
) -> tuple[_Options, dict[str, tuple[str, ...]], tuple[tuple[str, str], ...], str | None]:
    """``[model]``, ``[plan]``, ``[data]`` and ``[roles]``: the fixed options per section, the
    keys each section allows, the roles and the data folder (resolved against ``base_dir``)."""
    from depthscale.data import DATASET_OPTIONS
    from depthscale.models import MODELS
    from depthscale.param import ROLES

    options: _Options = {}
    model_keys = _factory_keys(raw, v) if factory else MODELS[model].options
    allowed = {"model": tuple(model_keys), "plan": _PLAN_KEYS,
               "data": (*_DATA_KEYS, *DATASET_OPTIONS[dataset])}
    for section in OPTION_SECTIONS:
        table = raw.get(section, {})
        v.keys(section, table, allowed[section])
        options[section] = {k: v.scalar(f"{section}.{k}", val, f"{section}.{k}")
                            for k, val in table.items()}
    if factory:
        _check_factory(model, options["model"], raw, v)
    roles = _roles(raw.get("roles", {}), ROLES, v)
    data_dir = options["data"].pop("dir", None)
    if data_dir is not None:
        v.string("data.dir", data_dir)
        data_dir = str(Path(base_dir or ".", data_dir)) if not Path(data_dir).is_absolute() \
            else data_dir
    return options, allowed, roles, data_dir


def _grid_axes(grid: Mapping[str, Any], train_raw: Mapping[str, Any], options: _Options,
               allowed: Mapping[str, tuple[str, ...]],
               v: SpecValidator) -> list[tuple[str, tuple[Any, ...]]]:
    """``[grid]``'s axes in expansion order: recipe, width, depth, seed, the swept [train]
    keys, the option sub-tables, then lr (fastest)."""
    axes: list[tuple[str, tuple[Any, ...]]] = []
    for key in grid:
        if key in OPTION_SECTIONS:
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
    for section in OPTION_SECTIONS:
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
    return axes


def _train_settings(train_raw: Mapping[str, Any], axes: Sequence[tuple[str, tuple[Any, ...]]],
                    v: SpecValidator) -> TrainSettings:
    """``[train]``'s values over the defaults of :class:`~depthscale.train.TrainSettings`,
    checked together with the swept training axes (steps or epochs, known names)."""
    from depthscale.param import OPTIMIZERS, RECIPES

    train_kw = asdict(TrainSettings())
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
    v.choice("train.final_eval", train_kw["final_eval"], FINAL_EVALS)
    if not isinstance(train_kw["device"], str):
        v.fail("train.device", f"must be a string like 'cpu' or 'cuda', got {train_kw['device']!r}")
    for key, values in axes:
        if key == "recipe":
            for r in values:
                v.choice("grid.recipe", r, RECIPES)
        elif key in ("optimizer", "loss"):
            for r in values:
                v.choice(f"grid.{key}", r, OPTIMIZERS if key == "optimizer" else LOSSES)
    return TrainSettings(**train_kw)


def _factory_keys(raw: Mapping[str, Any], v: SpecValidator) -> tuple[str, ...]:
    """The model options a study gives a user factory: every key of ``[model]`` and
    ``[grid.model]`` (the factory's signature judges them, :func:`_check_factory`)."""
    keys: list[str] = []
    for table in (raw.get("model", {}), dict(raw.get("grid", {})).get("model", {})):
        if isinstance(table, dict):
            keys += [k for k in table if k not in keys]
    return tuple(keys)


def _check_factory(model: str, fixed: Mapping[str, Any], raw: Mapping[str, Any],
                   v: SpecValidator) -> None:
    """Import the factory ``model`` and check it takes the sizes and every model option the
    study gives it (fixed and swept): a ConfigError naming the string otherwise."""
    from depthscale.models import resolve_factory

    swept = dict(raw.get("grid", {})).get("model", {})
    names = {**dict(fixed), **(dict.fromkeys(swept, None) if isinstance(swept, dict) else {})}
    try:
        resolve_factory(model, names)
    except ConfigError as exc:
        v.fail("study.model", str(exc))


def _roles(table: Any, known: Mapping[str, str], v: SpecValidator) -> tuple[tuple[str, str], ...]:
    """``[roles]``: glob pattern over parameter names -> role, in the file's order."""
    if not isinstance(table, dict):
        v.fail("[roles]", "must be a table of \"pattern\" = \"role\"")
    out = []
    for pattern, role in table.items():
        if not isinstance(role, str) or role not in known:
            v.fail(f"roles.{pattern!r}", f"unknown role {role!r}; choose one of: "
                   f"{', '.join(known)}")
        out.append((str(pattern), role))
    return tuple(out)


def parse_analysis(table: Any, *, axes: Sequence[str] | None = None,
                   source: str = "<string>") -> AnalysisSpec:
    """Validate an ``[analysis]`` table (keys: :data:`ANALYSIS_KEYS`, see :class:`AnalysisSpec`).

    ``axes`` are the study's grid axis names (``lr``, ``depth``, ``recipe``, ``plan.T``...):
    ``optimize`` and ``group`` must be among them (None: not checked). Raises ConfigError naming
    the key.
    """
    v = SpecValidator(source)
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


def _check_runs(spec: StudySpec, v: SpecValidator) -> None:
    """Validate every expanded run's train config and each distinct plan setting."""
    from depthscale.param import plan

    seen_plans: set[str] = set()
    for run in expand(spec):
        try:
            run.train_config().validate()
        except ConfigError as exc:
            v.fail("[train]/[grid]", f"gives an impossible run ({combination(spec, run)}): "
                   f"{exc}")
        key = json.dumps([run.recipe, run.plan_options, dict(run.model_options).get("activation")])
        if key in seen_plans:
            continue
        seen_plans.add(key)
        try:
            activation = dict(run.model_options).get("activation", "relu")
            plan(run.recipe, width=1, depth=1, activation=activation, **dict(run.plan_options))
        except ConfigError as exc:
            v.fail("[plan]/[model]", f"{exc}" if spec.n_runs == 1 else
                   f"gives an impossible run ({combination(spec, run)}): {exc}")
        except TypeError as exc:
            v.fail("[plan]", f"has a value of the wrong type ({exc})")



"""The validated study and its runs: :class:`StudySpec` (what :mod:`depthscale.studies.spec`
reads from a TOML file or tables), :func:`expand` into :class:`RunSpec` s, each identified by
:func:`run_id` (a hash of its canonical JSON and :data:`SPEC_SCHEMA`), and
:func:`combination`, the grid values a refusal names. The records only: reading and checking
a spec is :mod:`~depthscale.studies.spec`'s, its size bounds
:mod:`~depthscale.studies.spec_bounds`'s, and both build on these."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from depthscale.errors import ConfigError
from depthscale.train import TrainConfig, TrainSettings

__all__ = [
    "OPTION_SECTIONS",
    "SPEC_SCHEMA",
    "TRAIN_KEYS",
    "AnalysisSpec",
    "RunSpec",
    "StudySpec",
    "combination",
    "expand",
    "run_id",
]

#: Version of the run-spec schema; it is part of every run's hash, so bumping it reruns all.
SPEC_SCHEMA = 1
#: the keys of [train]: the fields of depthscale.train.TrainSettings, in their order
TRAIN_KEYS = tuple(f.name for f in fields(TrainSettings))
#: the sections of options a grid axis may sweep (``model.<k>``, ``plan.<k>``, ``data.<k>``)
OPTION_SECTIONS = ("model", "plan", "data")


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
class _RunHead:
    """What a run is (model, recipe, dataset, sizes) and its own learning rate and seed; the
    first fields of :class:`RunSpec`, before its training settings."""

    model: str
    recipe: str
    dataset: str
    width: int
    depth: int
    lr: float
    seed: int


@dataclass(frozen=True)
class RunSpec(TrainSettings, _RunHead):
    """Everything one run depends on: its head (model, recipe, dataset, width, depth, lr,
    seed), its :class:`~depthscale.train.TrainSettings` (declared there, once) and its
    options, in that field order. Options are sorted ``(name, value)`` pairs.

    ``data_dir`` says where the files of a file-based dataset lie on this machine; it is not
    part of the run's identity (the same data elsewhere is the same run). ``model`` is a
    registry name or a factory string ``"package.module:function"`` (kept as written, so run
    ids are stable). ``roles`` are ``(pattern, role)`` pairs in the spec's order (the first
    pattern that matches a parameter wins); part of the identity only when given, so runs
    without roles keep the ids they always had. ``final_eval`` (the splits evaluated after
    training) is part of the identity only when not the default "train+test".
    """

    model_options: tuple[tuple[str, Any], ...] = ()
    plan_options: tuple[tuple[str, Any], ...] = ()
    data_options: tuple[tuple[str, Any], ...] = ()
    data_dir: str | None = field(default=None, compare=False)
    roles: tuple[tuple[str, str], ...] = ()

    def canonical(self) -> dict[str, Any]:
        """The JSON-able dict that identifies the run (``data_dir`` left out, ``roles`` only
        when given: a list of ``[pattern, role]`` pairs in order)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "data_dir" or (f.name == "roles" and not self.roles) or (
                    f.name == "final_eval" and self.final_eval == "train+test"):
                continue
            value = getattr(self, f.name)
            if f.name == "roles":
                value = [list(pair) for pair in value]
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
        kw["roles"] = tuple((str(p), str(r)) for p, r in kw.get("roles") or ())
        return cls(**kw)

    def flat(self) -> dict[str, Any]:
        """One level: fields by name, options as ``model.<k>``, ``plan.<k>``, ``data.<k>``
        (``roles``, fixed per study, stay in the spec)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "roles":
                continue
            value = getattr(self, f.name)
            if f.name.endswith("_options"):
                prefix = f.name.removesuffix("_options")
                out.update({f"{prefix}.{k}": v for k, v in value})
            else:
                out[f.name] = value
        return out

    def train_config(self) -> TrainConfig:
        """The :class:`depthscale.train.TrainConfig` of this run (not yet validated)."""
        return TrainConfig(**{k: getattr(self, k) for k in TRAIN_KEYS}, lr=self.lr,
                           seed=self.seed)

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
    roles: tuple[tuple[str, str], ...] = ()

    @property
    def n_runs(self) -> int:
        """The number of runs the grid expands to."""
        return math.prod(len(values) for _, values in self.grid)


def combination(spec: StudySpec, run: RunSpec) -> str:
    """The grid values that make ``run`` (``optimizer adam, momentum 0.9, lr 0.1``): the
    combination a refusal names."""
    flat = run.flat()
    return ", ".join(f"{key} {flat[key]!r}" if isinstance(flat[key], str) else
                     f"{key} {flat[key]:g}" if isinstance(flat[key], float) else
                     f"{key} {flat[key]}" for key, _ in spec.grid)


def expand(spec: StudySpec) -> list[RunSpec]:
    """All runs of ``spec``: the product of its grid axes, LR varying fastest.

    The order is deterministic; run ids are distinct (duplicate axis values are refused when
    the spec is loaded).
    """
    base = RunSpec(
        model=spec.model, recipe=spec.recipe or "", dataset=spec.dataset, width=1, depth=1,
        lr=1.0, seed=0, **asdict(spec.train),
        model_options=spec.model_options, plan_options=spec.plan_options,
        data_options=spec.data_options, data_dir=spec.data_dir, roles=spec.roles,
    )
    names = [k for k, _ in spec.grid]
    runs = []
    for combo in itertools.product(*(values for _, values in spec.grid)):
        direct: dict[str, Any] = {}
        opts: dict[str, dict[str, Any]] = {s: {} for s in OPTION_SECTIONS}
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
        for section in OPTION_SECTIONS:
            if opts[section]:
                attr = f"{section}_options"
                merged = {**dict(getattr(base, attr)), **opts[section]}
                direct[attr] = tuple(sorted(merged.items()))
        runs.append(replace(base, **direct))
    return runs

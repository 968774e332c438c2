"""The registry of reproducible claims, one per row of docs/claims.md.

A claim runner gets a :class:`ClaimContext` (scale, output folder, device, data, seed, its
settings) and returns a :class:`ClaimOutcome`
(:func:`depthscale.claims.verdicts.claim_outcome` computes it from measured values and bands).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from depthscale.errors import ConfigError
from depthscale.stats.findings import Verdict

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_Settings = TypeVar("_Settings", bound="DataclassInstance")

__all__ = [
    "CLAIMS", "PAPERS", "PLANNED", "SCALES", "Claim", "ClaimContext", "ClaimOutcome", "Control",
    "Cost", "Headline", "Runs", "Solver", "claim", "read_settings",
]

#: quick: CPU minutes (CI's demo); medium: about 30 CPU minutes a claim, where quick cannot
#: decide (a claim without medium settings runs its quick ones); full: the paper's setting.
SCALES = ("quick", "medium", "full")

#: The version of each paper that the claims reproduce.
PAPERS: dict[str, str] = {
    "nfd": "arXiv 2512.21075v1 (Yao, Wu et al., Understanding Scaling Laws in Deep Neural "
           "Networks via Feature Learning Dynamics; v3 drops the two-layer and eta_1 claims)",
    "laws": "Zhang, Wu, Ma et al., Hyperparameter Transfer Laws for Non-Recurrent Multi-Path "
            "Neural Networks (the text in shared/papers)",
    "chizat": "Chizat, The Hidden Width of Deep ResNets: Tight Error Bounds and Phase Diagrams "
              "(September 15, 2025)",
}

#: Rows of docs/claims.md that later issues implement: id -> what it waits for.
PLANNED: dict[str, str] = {}


@dataclass
class ClaimOutcome:
    """A claim's result. ``verdict`` is one of the classes of docs/claims.md (computed by
    :func:`band_verdict`, :func:`routes_verdict` or :func:`noise_gate`) or SKIP; every verdict
    but PASS carries its evidence in ``reason``."""

    verdict: Verdict
    measured: dict[str, float | None] = field(default_factory=dict)
    band: dict[str, list[float | None]] = field(default_factory=dict)
    reason: str = ""
    figure: Path | None = None
    data: Path | None = None


@dataclass
class ClaimContext:
    """What a claim runner may use. ``settings`` are the claim's settings at this scale."""

    scale: str
    out_dir: Path
    device: str
    data_dir: Path | None
    seed: int
    settings: dict[str, Any]
    progress: Callable[[int], None] = lambda _k: None
    set_total: Callable[[int], None] = lambda _k: None
    #: processes a claim's sweeps may use (``depthscale reproduce --workers``; under
    #: ``--ray``: the cluster's CPUs)
    workers: int = 1
    #: the Ray cluster the claim's study sweeps run on (``depthscale reproduce --ray``; None:
    #: this machine); the driver, this process, still writes every store
    ray_address: str | None = None
    #: train the runs of a sweep that differ only in LR as one batched group
    #: (``depthscale reproduce --batch-lrs``; :func:`~depthscale.studies.sweep.run_study`)
    batch_lrs: bool = False
    #: the claim's time budget in seconds (``depthscale reproduce --budget``; None: none); only
    #: sequential designs read it (claims/laws/sequential.py, nfd-fig2's seed rounds), through
    #: claims.common.budget_stop
    budget_seconds: float | None = None
    #: the budget's meter: run time of the studies this claim's sweeps have read so far, as
    #: stored with their runs (so a resumed claim meters what its runs cost, not the rerun)
    spent_seconds: float = 0.0
    #: judge from the runs stored in ``out_dir`` alone (``reproduce --from-stored``): studies
    #: and stored computations are read, never trained; a missing one is a DataError
    #: (claims.common). The device names the stored runs, so a GPU's are judged on a laptop
    from_stored: bool = False
    #: what each sequential sweep decided (study name -> its design's report, plain data)
    designs: dict[str, Any] = field(default_factory=dict)
    #: the claim's progress bar total so far, for parts that add to it (:meth:`extend_total`)
    bar_total: int = 0
    #: a folder whose studies' finished runs this claim copies where it plans the very same
    #: run (same run id, claims.common.run_claim_study): a negative control's is its claim's
    #: folder, so a control that changes only how runs are judged trains nothing again
    shared_runs: Path | None = None
    #: how many runs were copied from ``shared_runs`` (the control's record says so)
    runs_copied: int = 0

    def extend_total(self, units: int) -> None:
        """Add ``units`` to the claim's progress bar total: a claim of several parts (its
        studies, claims.common.run_claim_study; computations) shows one bar whose count runs
        across them all."""
        self.bar_total += units
        self.set_total(self.bar_total)

    def path(self, claim_id: str, suffix: str) -> Path:
        """Where this claim writes its figure (``.png``) or data (``.csv``)."""
        return self.out_dir / f"{claim_id}{suffix}"


@dataclass(frozen=True)
class Control:
    """A claim's negative control: ``settings`` merged over any scale's settings make the
    check's premise deliberately wrong (a missing sqrt(L), the wrong coupling, shuffled
    labels...), so a check that can fail comes out FAIL. ``what`` says what was changed.
    ``contrast``: at the smoke settings the correct run PASSes, so the tests check both sides;
    False where only a larger scale lets the correct run pass (then the tests check the FAIL).
    """

    what: str
    settings: Mapping[str, Any]
    contrast: bool = True


@dataclass(frozen=True)
class Headline:
    """The one number a report leads with for a claim, beside the paper's.

    ``metric``: a key of the claim's ``measured`` dict, or several in order of preference (the
    first one a run measured is the headline: e.g. the architecture a scale runs); ``ci``: the
    pair of measured keys giving its interval, where ``{metric}`` stands for the chosen key;
    ``paper``: the paper's value as text; ``label``: what the number is; ``ref``: where the paper
    states it; ``statement``: the claim in the paper's words; ``criterion``: the test in words,
    shown where the result has no numeric band for the metric (e.g. a routes verdict).
    """

    metric: str | tuple[str, ...]
    paper: str
    label: str
    ref: str
    statement: str
    ci: tuple[str, str] | None = None
    criterion: str = ""

    def __post_init__(self) -> None:
        for name in ("paper", "label", "ref", "statement"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise ConfigError(f"headline: {name} must be a non-empty string")
        keys = self.candidates
        if not keys or not all(isinstance(k, str) and k for k in keys):
            raise ConfigError(f"headline: metric must be a key or keys, got {self.metric!r}")
        if self.ci is not None and (len(self.ci) != 2
                                    or not all(isinstance(k, str) and k for k in self.ci)):
            raise ConfigError(f"headline: ci must be a pair of keys, got {self.ci!r}")

    @property
    def candidates(self) -> tuple[str, ...]:
        """The metric's keys in order of preference."""
        return (self.metric,) if isinstance(self.metric, str) else tuple(self.metric)

    def pick(self, measured: Mapping[str, Any]) -> tuple[str, tuple[str, str] | None]:
        """The metric key a result reports (the first candidate it measured, else the first)
        and the keys of its interval."""
        key = next((k for k in self.candidates if k in measured), self.candidates[0])
        ci = None if self.ci is None else (self.ci[0].replace("{metric}", key),
                                           self.ci[1].replace("{metric}", key))
        return key, ci

    def as_dict(self, measured: Mapping[str, Any]) -> dict[str, Any]:
        """Plain data for the report layer: the chosen keys and the texts."""
        key, ci = self.pick(measured)
        return {"metric": key, "ci_keys": list(ci) if ci else None, "label": self.label,
                "paper": self.paper, "ref": self.ref, "statement": self.statement,
                "criterion": self.criterion}


@dataclass(frozen=True)
class Runs:
    """Networks a claim's settings make, as its cost declares them (:class:`Claim`'s
    ``cost``): ``count`` networks of registry model ``model`` at ``width`` and ``depth`` on
    the data of ``dataset`` (its shape, classes and training examples,
    :func:`depthscale.data.registry.data_shape` with ``data``), each trained ``steps`` steps
    (or ``epochs``) of ``batch`` examples; neither: built, not trained."""

    model: str
    width: int
    depth: int
    dataset: str
    count: int = 1
    steps: int | None = None
    epochs: float | None = None
    batch: int = 128
    options: Mapping[str, Any] = field(default_factory=dict)
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Solver:
    """Limit solvers a claim's settings run, as its cost declares them: ``count`` runs of
    ``kind`` ("nfd", "mean-ode", ...; :func:`depthscale.train.budget.solver_cost`) with
    ``particles`` particles over ``depth_steps`` depth steps, ``steps`` training steps, in
    dimension ``dim`` on ``inputs`` inputs."""

    kind: str
    particles: int
    depth_steps: int
    steps: int = 1
    dim: int = 1
    inputs: int = 1
    count: int = 1


#: what a claim's settings cost, declared next to them: ``cost(settings, device)`` gives the
#: networks it makes (:class:`Runs`), the limit solvers it runs (:class:`Solver`) and the
#: studies it runs (their tables); ``reproduce`` puts each through the bounds of every run
#: before a changed claim runs
Cost = Callable[[Mapping[str, Any], str], Iterable["Runs | Solver | Mapping[str, Any]"]]


@dataclass(frozen=True)
class Claim:
    """One row of docs/claims.md: id, paper, what it says, its runner with its settings per scale
    (and ``smoke``, the tests' tiny ones), and its negative control."""

    id: str
    paper: str
    title: str
    run: Callable[[ClaimContext], ClaimOutcome]
    settings: Mapping[str, Mapping[str, Any]]
    control: Control | None = None
    #: the number the report leads with (required by :func:`claim`)
    headline: Headline | None = None
    #: the networks and studies its settings make (None: not declared; its settings' ranges
    #: bound it, claims.changes)
    cost: Cost | None = None

    @property
    def paper_version(self) -> str:
        """The version of the paper this claim reproduces."""
        return PAPERS.get(self.paper, "")

    def stock(self) -> list[dict[str, Any]]:
        """Its settings at every scale (smoke included), each also with the negative control's
        changes: what ``--set`` derives each setting's type and range from."""
        out = [dict(s) for s in self.settings.values()]
        if self.control is not None:
            out += [{**s, **self.control.settings} for s in self.settings.values()]
        return out

    def settings_for(self, scale: str, *, control: bool = False) -> dict[str, Any]:
        """The settings at ``scale`` (medium falls back to quick), with the negative control's
        changes merged in when ``control``."""
        base = self.settings.get(scale) or self.settings["quick"]
        if not control:
            return dict(base)
        if self.control is None:
            raise ConfigError(f"claim {self.id!r} has no negative control")
        return {**base, **self.control.settings}


CLAIMS: dict[str, Claim] = {}


def claim(
    claim_id: str,
    paper: str,
    title: str,
    *,
    quick: Mapping[str, Any],
    full: Mapping[str, Any],
    smoke: Mapping[str, Any],
    medium: Mapping[str, Any] | None = None,
    control: Control | None = None,
    headline: Headline | Mapping[str, Any] | None = None,
    cost: Cost | None = None,
) -> Callable[[Callable[[ClaimContext], ClaimOutcome]], Callable[[ClaimContext], ClaimOutcome]]:
    """Decorator that registers a claim runner under ``claim_id``.

    ``smoke`` are tiny settings (seconds, on small data) with which the test suite runs every
    registered runner end to end and its negative ``control``; they are never a scale a user
    selects. ``medium`` exists where quick cannot decide the claim. ``headline`` (required): the
    :class:`Headline` the report leads with, or a mapping of its fields. ``cost``: the
    networks and studies its settings make (:data:`Cost`), bounded before a changed claim
    runs.
    """

    Runner = Callable[[ClaimContext], ClaimOutcome]

    def register(fn: Runner) -> Runner:
        if claim_id in CLAIMS:
            raise ConfigError(f"claim {claim_id!r} registered twice")
        if paper not in PAPERS:
            raise ConfigError(f"claim {claim_id!r}: unknown paper {paper!r}")
        lead = _headline(claim_id, headline)
        settings = {"quick": quick, "full": full, "smoke": smoke,
                    **({"medium": medium} if medium is not None else {})}
        CLAIMS[claim_id] = Claim(claim_id, paper, title, fn, settings, control, lead, cost)
        return fn

    return register


def _headline(claim_id: str, value: Headline | Mapping[str, Any] | None) -> Headline:
    """``value`` as a :class:`Headline` (ConfigError naming the claim when absent or wrong)."""
    if value is None:
        raise ConfigError(f"claim {claim_id!r} has no headline: declare headline=Headline(metric="
                          "..., paper=..., label=..., ref=..., statement=...)")
    if isinstance(value, Headline):
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(f"claim {claim_id!r}: headline must be a Headline, got "
                          f"{type(value).__name__}")
    fields = dict(value)
    if isinstance(fields.get("ci"), list):
        fields["ci"] = tuple(fields["ci"])
    try:
        return Headline(**fields)
    except TypeError as exc:
        raise ConfigError(f"claim {claim_id!r}: headline: {exc}") from None
    except ConfigError as exc:
        raise ConfigError(f"claim {claim_id!r}: {exc}") from None


def read_settings(cls: type[_Settings], settings: Mapping[str, Any]) -> _Settings:
    """A claim's settings mapping (``ctx.settings``: a scale's, with a control's or ``--set``
    changes merged) as its typed settings record ``cls``. Keys ``cls`` does not name are left
    to the parts that read them (the dataset's loader); a field without a default must be set."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(cls)}
    try:
        return cls(**{k: v for k, v in settings.items() if k in names})
    except TypeError as exc:
        raise ConfigError(f"settings for {cls.__name__}: {exc}") from None

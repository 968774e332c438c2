"""A claim's outcome (:class:`ClaimOutcome`, :func:`claim_outcome`): the verdict, computed by
the rules of :mod:`depthscale.stats.findings` (re-exported here for the claim modules), its
figure and the data behind it; for an INCONCLUSIVE one, the run that would decide it and its
cost (:func:`deciding_run`, :class:`RunPrice`; the samples from
:func:`~depthscale.stats.deciding.samples_to_decide`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from depthscale.claims.registry import ClaimContext, ClaimOutcome, Runs, Solver
from depthscale.errors import ConfigError
from depthscale.stats.deciding import SampleNeed, samples_to_decide
from depthscale.stats.findings import (
    ROUTE_FINDINGS,
    VERDICTS,
    Band,
    Decision,
    Finding,
    Route,
    Verdict,
    band_verdict,
    ci_band_decision,
    findings_verdict,
    finite_or_none,
    interval_finding,
    noise_gate,
    routes_verdict,
    sign_finding,
)

__all__ = [
    "ROUTE_FINDINGS",
    "VERDICTS",
    "Band",
    "ClaimOutcome",
    "Decision",
    "Finding",
    "Judgement",
    "Route",
    "Rows",
    "RunPrice",
    "SampleNeed",
    "Verdict",
    "band_verdict",
    "ci_band_decision",
    "claim_outcome",
    "conclude",
    "deciding_run",
    "duration",
    "findings_verdict",
    "finite_or_none",
    "interval_finding",
    "noise_gate",
    "routes_verdict",
    "samples_to_decide",
    "sign_finding",
]


#: A claim's data as written to ``<id>.csv``: one dict a row, its keys the columns.
Rows = list[dict[str, Any]]


@dataclass(frozen=True)
class Judgement:
    """What a claim's ``judge_*`` step returns: ``measured`` (reported, and judged against
    ``bands`` fixed before running), the ``decision`` of the verdict rules where findings or
    routes decide instead of the bands (:func:`findings_verdict`, :func:`routes_verdict`,
    :func:`noise_gate`...), and a ``note`` for the reason."""

    measured: dict[str, float | None]
    bands: dict[str, Band] = field(default_factory=dict)
    decision: Decision | None = None
    note: str = ""


def claim_outcome(
    ctx: ClaimContext,
    claim_id: str,
    measured: Mapping[str, float | None],
    bands: Mapping[str, Band],
    rows: list[dict[str, Any]],
    fig: Any,
    note: str = "",
    decision: Decision | None = None,
) -> ClaimOutcome:
    """The usual end of a runner: verdict from the bands, the figure as ``<id>.png`` and the
    data behind it as ``<id>.csv`` in the output folder, a reason joining misses and ``note``.
    ``decision`` (from :func:`routes_verdict` or :func:`noise_gate`) replaces the band verdict;
    its evidence leads the reason."""
    from depthscale.io.atomic import write_csv
    from depthscale.report import figures

    verdict, band, misses = band_verdict(measured, bands)
    evidence = ""
    if decision is not None:
        verdict, evidence = decision
    return ClaimOutcome(
        verdict, dict(measured), band, "; ".join(r for r in (evidence, misses, note) if r),
        figures.save_figure(fig, ctx.path(claim_id, ".png")),
        write_csv(ctx.path(claim_id, ".csv"), rows),
    )


def conclude(ctx: ClaimContext, claim_id: str, judgement: Judgement, rows: Rows,
             fig: Any) -> ClaimOutcome:
    """How every claim runner ends: the verdict of ``judgement``, ``fig`` as
    ``<claim_id>.png`` and ``rows`` as ``<claim_id>.csv`` (:func:`claim_outcome`)."""
    return claim_outcome(ctx, claim_id, judgement.measured, judgement.bands, rows, fig,
                         judgement.note, decision=judgement.decision)


@dataclass(frozen=True)
class RunPrice:
    """What prices the run that would decide a claim (:func:`deciding_run`): the claim's id,
    its ``settings`` at this ``scale``, the ``device``, and the ``seconds`` this run's own
    runs took as their records store them (None where they store none)."""

    claim_id: str
    settings: Mapping[str, Any]
    device: str
    seconds: float | None = None
    scale: str = "quick"

    @classmethod
    def of(cls, ctx: ClaimContext, claim_id: str, seconds: float | None = None) -> RunPrice:
        """The price of ``claim_id`` run under ``ctx`` (its settings, device and scale)."""
        return cls(claim_id, dict(ctx.settings), ctx.device, seconds, ctx.scale)

    def declared(self, changes: Mapping[str, Any]) -> float:
        """The lower-bound seconds of the claim's declared runs
        (:func:`~depthscale.claims.costs.claim_cost`) with ``changes`` over its settings."""
        from depthscale.claims.costs import claim_cost
        from depthscale.claims.registry import CLAIMS

        return claim_cost(CLAIMS[self.claim_id], {**self.settings, **changes},
                          self.device).seconds

    def items(self, items: Sequence[Runs | Solver | Mapping[str, Any]]) -> float:
        """The lower-bound seconds of ``items`` (networks, solvers, studies) as if the claim
        declared them: a deciding run its settings cannot express."""
        from depthscale.claims.costs import claim_cost
        from depthscale.claims.registry import CLAIMS

        claim = replace(CLAIMS[self.claim_id], cost=lambda _s, _d: list(items))
        return claim_cost(claim, self.settings, self.device).seconds

    def larger(self) -> tuple[str, dict[str, Any]] | None:
        """The next scale with settings of its own (quick -> medium -> full) and its settings;
        None past full."""
        from depthscale.claims.registry import CLAIMS, SCALES

        claim = CLAIMS[self.claim_id]
        later = SCALES[SCALES.index(self.scale) + 1:] if self.scale in SCALES else ()
        for scale in later:
            if scale in claim.settings:
                return scale, dict(claim.settings[scale])
        return None


def duration(seconds: float) -> str:
    """``seconds`` in words: seconds, minutes, then hours and days
    (:func:`~depthscale.train.budget.human_seconds`)."""
    from depthscale.train.budget import human_seconds

    if seconds < 1:
        return "under 1 s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else human_seconds(seconds)


def deciding_run(what: str, changes: Mapping[str, Any], price: RunPrice | None, *,
                 factor: float | None = None, label: str | None = None,
                 seconds: float | None = None) -> str:
    """The reason's words for the run that would decide a claim: ``what`` it is, the settings
    ``changes`` that make it (``reproduce --set``; ``label`` names them instead), and its
    cost: the lower bound of its declared runs on the device (``seconds`` where the caller
    priced it, :meth:`RunPrice.items`) and, where ``factor`` (its runs over this run's) and
    this run's measured seconds are known, this run's time scaled."""
    sets = label if label is not None else ", ".join(f"{k} = {v}" for k, v in changes.items())
    said = f"the deciding run: {what}" + (f" ({sets})" if sets else "")
    if price is None:
        return said
    try:
        lower = price.declared(changes) if seconds is None else seconds
        cost = f"at least {duration(lower)} on {price.device} (its declared runs' lower bound)"
    except ConfigError as exc:
        cost = f"past the bounds every run is checked against ({exc})"
    if factor is not None and price.seconds is not None and price.seconds > 0:
        cost += (f", about {duration(price.seconds * factor)} from this run's measured "
                 f"{duration(price.seconds)} x {factor:.3g}")
    return f"{said}, {cost}"

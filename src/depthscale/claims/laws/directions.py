"""laws-ablation-directions (laws Sec. 4.5, Table 3): which way each ablation moves the depth
exponent alpha of eta* ~ L^alpha (Eq. 9) against its family's baseline, from laws-ablations'
own sweeps: Adam shallower on CNNs and ResNets, BatchNorm and dropout steeper on ResNets; GELU,
LayerNorm placement and zero padding within the paper's +-20%."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from depthscale.claims.laws import figures, settings
from depthscale.claims.laws.ablations import AblationsSettings, measure_ablations
from depthscale.claims.laws.gates import law_measured, law_rows, moving_evidence, reported
from depthscale.claims.laws.law import LawResult, SlopeChange, slope_change
from depthscale.claims.laws.settings import Scales
from depthscale.claims.laws.sweeps import study_costs
from depthscale.claims.registry import ClaimContext, Control, claim, read_settings
from depthscale.claims.verdicts import (
    Band,
    ClaimOutcome,
    Judgement,
    RunPrice,
    conclude,
    deciding_run,
)
from depthscale.errors import ConfigError
from depthscale.stats.deciding import samples_to_decide
from depthscale.stats.findings import Finding, findings_verdict, interval_finding

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["DIRECTIONS", "Direction", "DirectionsSettings", "draw_directions",
           "judge_directions", "laws_ablation_directions", "measure_directions"]

#: the smallest change of alpha read as a direction: the paper calls 3-4% of |alpha|
#: (GELU vs ReLU, Pre- vs Post-LN) "minimal impact", and 4% of 1.5 is 0.06
MARGIN = 0.06
#: "within +-20%" of alpha = -1.5 (Sec. 4.5's "secondary modulations")
SAME = 0.3
#: the most seeds, as a multiple of a run's own, that a deciding run names; past it the estimate
#: sits too near its band's edge for seeds to pay, and the longer training of medium is named
SEED_FACTOR = 4


@dataclass(frozen=True)
class Direction:
    """One of Sec. 4.5's statements: ``variant`` against ``baseline`` moves alpha into
    ``band`` (alpha_variant - alpha_baseline; > 0 is shallower), as the paper reports it."""

    variant: str
    baseline: str
    band: Band
    paper: str


DIRECTIONS: tuple[Direction, ...] = (
    Direction("cnn-adam", "cnn-baseline", (MARGIN, None), "shallower: -1.339 -> -1.207"),
    Direction("resnet-adam", "resnet-baseline", (MARGIN, None), "shallower: -1.435 -> -1.269"),
    Direction("resnet-batchnorm", "resnet-baseline", (None, -MARGIN),
              "steeper: -1.435 -> -1.701"),
    Direction("resnet-dropout", "resnet-baseline", (None, -MARGIN),
              "steeper: -1.435 -> -1.568"),
    Direction("cnn-gelu", "cnn-baseline", (-SAME, SAME), "about the same: -1.339 vs -1.379"),
    Direction("vit-pre-ln", "vit-post-ln", (-SAME, SAME), "about the same: -1.131 vs -1.178"),
    Direction("cnn-zero-padding", "cnn-baseline", (-SAME, SAME),
              "the same slope, a vertical shift (App. E.2)"),
)
_BY_VARIANT = {d.variant: d for d in DIRECTIONS}


@dataclass(frozen=True, kw_only=True)
class DirectionsSettings(AblationsSettings):
    """laws-ablations' settings (its sweeps are shared); ``against_itself`` (the control)
    compares each variant with its own runs instead of its baseline's."""

    against_itself: bool = False


@dataclass(frozen=True)
class Directions:
    """The sweeps' laws (``laws``, by variant) and, per direction whose two sweeps the scale
    runs, the seed-paired change of alpha (``changes``, by variant); ``against_itself``: each
    variant was compared with its own runs (the control)."""

    laws: dict[str, LawResult]
    changes: dict[str, SlopeChange]
    against_itself: bool = False


def measure_directions(ctx: ClaimContext, s: DirectionsSettings) -> Directions:
    """laws-ablations' sweeps (studies ``laws-ablation-<variant>``) and, per direction, alpha
    of the variant minus its baseline's, paired by seed over the depths both locate
    (:func:`~depthscale.claims.laws.law.slope_change`)."""
    laws = measure_ablations(ctx, s)
    changes = {}
    for d in DIRECTIONS:
        if d.variant in laws and d.baseline in laws:
            var, base = laws[d.variant], laws[d.variant if s.against_itself else d.baseline]
            gated = set(var.gated) | set(base.gated)
            changes[d.variant] = slope_change([o for o in var.optima if o.depth not in gated],
                                              [o for o in base.optima if o.depth not in gated],
                                              var.steps)
    if not changes:
        raise ConfigError("laws-ablation-directions: the variants run none of the pairs "
                          f"{', '.join(f'{d.variant}/{d.baseline}' for d in DIRECTIONS)}; keep "
                          "a variant and its baseline in 'variants'")
    return Directions(laws, changes, s.against_itself)


def judge_directions(m: Directions, price: RunPrice | None = None) -> Judgement:
    """Each change on its 95% interval against its direction's band
    (:func:`~depthscale.stats.findings.interval_finding`), undecided while the variant's or
    the baseline's alpha still moves with training length (gates.moving_evidence, as every
    laws band): PASS if every one supports, FAIL if any contradicts, else INCONCLUSIVE, naming
    its deciding run (``price`` its cost); every direction named, with the paper's numbers."""
    findings: dict[str, Finding] = {}
    said, measured, bands = [], dict(law_measured(m.laws)), {}
    for variant, c in m.changes.items():
        d = _BY_VARIANT[variant]
        findings[variant] = interval_finding(c.low, c.high, d.band)
        # as every laws band (gates.py); not where both sides are the same runs, whose
        # change is 0 at any length
        moving = "" if m.against_itself else "; ".join(
            e for k in (variant, d.baseline) if k in m.laws
            and (e := moving_evidence(k, m.laws[k])))
        if moving:
            findings[variant] = "undecided"
        said.append(f"{variant} vs {d.baseline}: {c.mean:+.3g} [{c.low:+.3g}, {c.high:+.3g}] "
                    f"({c.n_seeds} seeds, {c.n_depths} depths) against {_band_text(d.band)} "
                    f"(paper: {d.paper}): {findings[variant]}"
                    + (f" ({moving})" if moving else ""))
        measured |= {f"change_{variant}": c.mean, f"change_{variant}_low": c.low,
                     f"change_{variant}_high": c.high}
        bands[f"change_{variant}"] = d.band
    verdict = findings_verdict({v: (f, "") for v, f in findings.items()})[0]
    if verdict == "INCONCLUSIVE":
        said.append(_deciding(m, findings, price))
    return Judgement(reported(measured), bands, (verdict, "; ".join(said)), "")


def _deciding(m: Directions, findings: Mapping[str, Finding], price: RunPrice | None) -> str:
    """The run that decides the undecided directions: the same sweeps at the seeds the
    widest-placed interval needs to clear its band's edge (a t-interval over seeds,
    :func:`~depthscale.stats.deciding.samples_to_decide`), at least 3, which the still-moving
    gate needs; or longer training where more seeds cannot decide or would need over
    :data:`SEED_FACTOR` times this run's."""
    seeds = max((c.n_seeds for c in m.changes.values()), default=1)
    needs = [samples_to_decide(c.mean, c.low, c.high, _BY_VARIANT[v].band, max(c.n_seeds, 2),
                               t_interval=True).needed
             for v, c in m.changes.items() if findings[v] == "undecided"]
    if any(n is None for n in needs):
        return _longer("an interval's estimate sits on its band's edge, so more seeds cannot "
                       "decide it", price)
    need = max([3, seeds + 1, *(n for n in needs if n is not None)])
    if need > SEED_FACTOR * seeds:
        return _longer(f"here an estimate sits so near its band's edge that its interval "
                       f"would need {need} seeds, {need / seeds:.3g}x this run's", price)
    return deciding_run(f"the same sweeps at {need} seeds", {"seeds": need}, price,
                        factor=need / max(seeds, 1))


def _longer(why: str, price: RunPrice | None) -> str:
    """The deciding run where seeds do not pay: the next scale's longer training, priced at
    its settings (:meth:`~depthscale.claims.verdicts.RunPrice.larger`)."""
    larger = price.larger() if price is not None else None
    scale, settings = larger if larger is not None else ("medium", {})
    return deciding_run(f"longer training, the next scale's settings ({why})", settings, price,
                        label=f"--scale {scale}")


def _band_text(band: Band) -> str:
    lo, hi = band
    return (f">= {lo:+.2f}" if hi is None else f"<= {hi:+.2f}" if lo is None
            else f"[{lo:+.2f}, {hi:+.2f}]")


def draw_directions(m: Directions) -> Figure:
    """eta* against effective depth with the fitted power law, a panel per variant."""
    return figures.law_figure(m.laws)


def directions_cost(settings: Mapping[str, Any], device: str) -> list[dict[str, Any]]:
    """laws-ablations' studies at their first stage
    (:func:`~depthscale.claims.laws.sweeps.study_costs`)."""
    s = read_settings(DirectionsSettings, settings)
    return study_costs(s, s.variants, device)


#: laws-ablations' settings at every scale (so the two claims share their sweeps)
_SCALES = Scales(
    quick=settings.ABLATIONS["quick"], medium=settings.ABLATIONS["medium"],
    full=settings.ABLATIONS["full"], smoke=settings.ABLATIONS["smoke"],
    control=Control("each variant compared with its own runs instead of its baseline's (every "
                    "change is 0, so no ablation can move alpha)", {"against_itself": True},
                    contrast=False),
)


@claim(
    "laws-ablation-directions", "laws",
    "Adam makes alpha shallower, BatchNorm and dropout steeper; GELU, LN placement and padding "
    "leave it within 20%",
    **_SCALES,
    cost=directions_cost,
    headline=dict(
        metric=("change_resnet-batchnorm", "change_cnn-adam"),
        ci=("{metric}_low", "{metric}_high"),
        label="alpha of the variant minus its baseline's (> 0: shallower)",
        paper="Adam +0.13 (CNN), +0.17 (ResNet); BatchNorm -0.27, dropout -0.13 (ResNet)",
        ref="Sec. 4.5, Table 3",
        statement="Switching from SGD to Adam reduces |alpha| by 10-12% on both CNNs "
                  "(-1.339 -> -1.207) and ResNets (-1.435 -> -1.269). BatchNorm on ResNets "
                  "increases |alpha| from -1.435 to -1.701, while dropout increases it to "
                  "-1.568 (Sec. 4.5).",
    ),
)
def laws_ablation_directions(ctx: ClaimContext) -> ClaimOutcome:
    """laws Sec. 4.5's directions, from laws-ablations' sweeps: per stated pair, alpha(variant)
    - alpha(baseline) paired by seed with its t-interval (law.slope_change). Bands, fixed
    before running: shallower >= +0.06 and steeper <= -0.06 (beyond the 4% the paper calls
    minimal), about the same within +-0.3 (its +-20%). PASS if every interval lies inside its
    band, FAIL if any lies wholly outside, else INCONCLUSIVE."""
    s = read_settings(DirectionsSettings, ctx.settings)
    m = measure_directions(ctx, s)
    j = judge_directions(m, RunPrice.of(ctx, "laws-ablation-directions", ctx.spent_seconds))
    fig = draw_directions(m)
    rows = law_rows(m.laws, j.measured)
    return conclude(ctx, "laws-ablation-directions", j, rows, fig)

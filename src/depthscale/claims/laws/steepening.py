"""laws-steepening (our finding, not the paper's): the depth exponent alpha of the one-epoch
optimum eta* ~ L^alpha (laws Eq. 9, Sec. 4.1) steepens as training goes on: alpha read at the
end of each pass of one sweep, and its seed-paired change from the first pass read to the last
on an interval over seeds."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from depthscale.claims.laws import figures, settings
from depthscale.claims.laws.gates import MOVING_MARGIN, law_measured, law_rows, reported
from depthscale.claims.laws.law import LawResult, SlopeChange, law_at, slope_change
from depthscale.claims.laws.sequential import sweep_stages
from depthscale.claims.laws.settings import Arch
from depthscale.claims.laws.sweeps import (
    SweepSettings,
    chance_loss,
    steps_per_epoch,
    study_costs,
)
from depthscale.claims.registry import ClaimContext, claim, read_settings
from depthscale.claims.verdicts import (
    Band,
    ClaimOutcome,
    Judgement,
    RunPrice,
    Verdict,
    conclude,
    deciding_run,
    interval_finding,
)
from depthscale.errors import ConfigError
from depthscale.stats.deciding import samples_to_decide

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Steepening", "SteepeningSettings", "draw_steepening", "judge_steepening",
           "laws_steepening", "measure_steepening"]

#: the band on alpha(last pass) - alpha(first pass): a steepening past the laws gates'
#: still-moving margin (gates.MOVING_MARGIN, a third of the law band's width)
STEEPENING_BAND: Band = (None, -MOVING_MARGIN)


@dataclass(frozen=True, kw_only=True)
class SteepeningSettings(SweepSettings):
    """laws-steepening's settings: the sweep budget (:class:`SweepSettings`, ``epochs`` the
    passes trained), the architecture ``arch`` (a typed mapping,
    :data:`~depthscale.claims.laws.settings.Arch`) and ``passes``, the passes at whose end
    alpha is read (the first and the last compared; each from 1 to ``epochs``);
    ``same_pass`` (the control) reads every length at the first of them."""

    arch: Arch
    passes: list[int]
    same_pass: bool = False

    def checked(self) -> list[int]:
        """``passes``, sorted; ConfigError unless two or more whole passes within ``epochs``."""
        ok = (isinstance(self.passes, list) and len(self.passes) >= 2
              and all(isinstance(p, int) and not isinstance(p, bool) and p >= 1
                      for p in self.passes)
              and self.epochs is not None and max(self.passes) <= self.epochs)
        if not ok:
            raise ConfigError(f"laws-steepening: passes must be two or more whole passes from "
                              f"1 to epochs={self.epochs!r}, got {self.passes!r}")
        return [min(self.passes)] * len(self.passes) if self.same_pass else sorted(self.passes)


@dataclass(frozen=True)
class Steepening:
    """laws-steepening's measurement: the law at the end of each pass read (``laws``, by
    pass) and the seed-paired change of alpha from the first to the last (``change``)."""

    laws: dict[int, LawResult]
    change: SlopeChange


def measure_steepening(ctx: ClaimContext, s: SteepeningSettings) -> Steepening:
    """One sweep (study ``laws-<model>``, Table 1's where the settings agree) trained ``epochs``
    passes; the law as the runs stood at the end of each pass read
    (:func:`~depthscale.claims.laws.law.law_at`); and alpha's change from the first pass read
    to the last, paired by seed over the depths that locate eta* at both
    (:func:`~depthscale.claims.laws.law.slope_change`)."""
    passes = s.checked()
    per_pass = steps_per_epoch(s, s.arch)
    records, window = sweep_stages(ctx, f"laws-{s.arch['model']}", s.arch)
    chance = chance_loss(ctx, s.arch)
    laws = {p: law_at(s.arch, records, window, p * per_pass, chance) for p in set(passes)}
    first, last = laws[passes[0]], laws[passes[-1]]
    gated = set(first.gated) | set(last.gated)
    change = slope_change([o for o in last.optima if o.depth not in gated],
                          [o for o in first.optima if o.depth not in gated],
                          passes[0] * per_pass)
    return Steepening(dict(sorted(laws.items())), change)


def judge_steepening(m: Steepening, price: RunPrice | None = None) -> Judgement:
    """The change of alpha from the first pass read to the last on its 95% interval against
    :data:`STEEPENING_BAND`: PASS inside (alpha steepens by more than the margin), FAIL wholly
    outside (it does not), INCONCLUSIVE across the edge or not measurable (fewer than 3
    depths with paired interior optima), then naming its deciding run (:func:`_deciding`,
    priced by ``price``); alpha at every pass reported with its interval."""
    c = m.change
    finding = interval_finding(c.low, c.high, STEEPENING_BAND)
    alphas = ", ".join(f"{law.fit.slope:.3g} [{law.interval[0]:.3g}, {law.interval[1]:.3g}] "
                       f"at pass {p} ({law.steps} steps)" for p, law in m.laws.items())
    said = (f"alpha {alphas}; change from the first to the last {c.mean:+.3g} "
            f"[{c.low:+.3g}, {c.high:+.3g}] (paired over {c.n_seeds} seeds at {c.n_depths} "
            f"depths) against <= -{MOVING_MARGIN}: {finding}")
    verdict: Verdict = ("PASS" if finding == "supports" else
                        "FAIL" if finding == "contradicts" else "INCONCLUSIVE")
    if verdict == "INCONCLUSIVE":
        said = f"{_deciding(c, price)}; {said}"
    named = {f"pass{p}": law for p, law in m.laws.items()}
    measured = dict(law_measured(named))
    for p, law in m.laws.items():
        measured[f"alpha_pass{p}_low"], measured[f"alpha_pass{p}_high"] = law.interval
    measured |= {"steepening": c.mean, "steepening_low": c.low, "steepening_high": c.high,
                 "steepening_seeds": float(c.n_seeds), "steepening_depths": float(c.n_depths)}
    return Judgement(reported(measured), {"steepening": STEEPENING_BAND}, (verdict, said), "")


def _deciding(c: SlopeChange, price: RunPrice | None) -> str:
    """The seeds at which the change's t-interval would clear the band's edge at the same
    spread (:func:`~depthscale.stats.deciding.samples_to_decide`), or, where fewer than 3
    depths pair, a sweep whose optima lie inside its LR grid at more depths."""
    finite = all(map(math.isfinite, (c.mean, c.low, c.high)))
    need = (samples_to_decide(c.mean, c.low, c.high, STEEPENING_BAND, max(c.n_seeds, 2),
                              t_interval=True).needed if finite else None)
    if need is None:
        return deciding_run("a sweep that locates eta* inside its LR grid at 3 or more depths "
                            "at both passes", {}, price, label="a wider LR grid or more depths")
    return deciding_run(f"the same sweep at {need} seeds", {"seeds": need}, price,
                        factor=need / max(c.n_seeds, 1))


def draw_steepening(m: Steepening) -> Figure:
    """eta* against effective depth with the fitted power law, a panel per pass read."""
    return figures.law_figure({f"pass{p}": law for p, law in m.laws.items()})


def steepening_cost(settings: Mapping[str, Any], device: str) -> list[dict[str, Any]]:
    """The sweep at its first stage (:func:`~depthscale.claims.laws.sweeps.study_costs`)."""
    s = read_settings(SteepeningSettings, settings)
    return study_costs(s, {str(s.arch["model"]): s.arch}, device)


@claim(
    "laws-steepening", "laws",
    "Our finding: the depth exponent alpha of eta* steepens with training length (passes)",
    **settings.STEEPENING,
    cost=steepening_cost,
    headline=dict(
        metric="steepening",
        ci=("steepening_low", "steepening_high"),
        label="change of alpha from the first pass read to the last (ours)",
        paper="not stated: Table 1 reads the one-epoch optimum only (footnote 3)",
        ref="Sec. 4.1, footnote 3",
        statement="We adopt a single-epoch protocol for computational efficiency and "
                  "comparability, consistent with the architecture-aware scaling protocol "
                  "(Chen et al., 2024) and the muP perspective that optimal learning rates are "
                  "primarily governed by early-training dynamics (Jelassi et al., 2023).",
    ),
)
def laws_steepening(ctx: ClaimContext) -> ClaimOutcome:
    """Our finding beside laws Table 1 (not the paper's): one sweep trained ``epochs`` passes,
    eta* per depth and seed minimising the running loss up to the end of each pass read, alpha
    the WLS slope of log10 eta* on log10 L there (Eq. 9, Sec. 4.1), and alpha(last) -
    alpha(first) paired by seed with its t-interval (law.slope_change). Band: that change <=
    -0.3, the laws gates' still-moving margin: PASS if its interval lies inside, FAIL if
    wholly above, else INCONCLUSIVE."""
    s = read_settings(SteepeningSettings, ctx.settings)
    m = measure_steepening(ctx, s)
    j = judge_steepening(m, RunPrice.of(ctx, "laws-steepening", ctx.spent_seconds))
    fig = draw_steepening(m)
    rows = law_rows({f"pass{p}": law for p, law in m.laws.items()}, j.measured)
    return conclude(ctx, "laws-steepening", j, rows, fig)

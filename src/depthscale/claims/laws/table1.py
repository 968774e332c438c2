"""laws-table1 (laws Table 1): eta* ~ L^alpha with alpha near -3/2 (Eq. 9) for CNNs, ResNets and
ViTs, alpha read on the interval of the WLS fit against effective depth."""

from __future__ import annotations

from depthscale.claims.laws import figures, settings
from depthscale.claims.laws.law import LawResult, table1_law
from depthscale.claims.laws.outcome import finish
from depthscale.claims.laws.tables import judge_laws, measure_laws
from depthscale.claims.registry import ClaimContext, claim
from depthscale.claims.verdicts import ClaimOutcome

__all__ = ["laws_table1", "measure_table1"]


def measure_table1(ctx: ClaimContext) -> dict[str, LawResult]:
    """Each architecture's Table 1 sweep (run or resumed) and its law."""
    return {key: table1_law(ctx, key, arch) for key, arch in ctx.settings["archs"].items()}


@claim(
    "laws-table1", "laws",
    "The optimal LR follows eta* ~ L^alpha with alpha near -3/2 for CNNs, ResNets and ViTs",
    **settings.TABLE1,
    headline=dict(
        metric=("alpha_cnn1d", "alpha_cnn2d"),
        ci=("{metric}_ci_low", "{metric}_ci_high"),
        label="fitted depth exponent alpha of eta* (plain CNN)",
        paper="alpha = -1.339 (CNN, CIFAR-10); theory -3/2; -1.18 to -1.57 over 9 settings",
        ref="Table 1",
        statement="The leading-order theoretical prediction is alpha = -1.5; across the 9 "
                  "architecture-dataset combinations the empirical exponents range from -1.18 to "
                  "-1.57, with a mean of -1.38 (Sec. 4, Table 1).",
    ),
)
def laws_table1(ctx: ClaimContext) -> ClaimOutcome:
    """laws Table 1: alpha (WLS slope of log10 eta* on log10 L, weights 1/SEM^2) per
    architecture, with its CI and R^2; band [-1.9, -1.0] for each."""
    results = measure_table1(ctx)
    return finish(ctx, "laws-table1", measure_laws(results), judge_laws(results),
                  figures.law_figure(results))

"""nfd-fig2 (nfd Fig. 2): the time horizon T of depth-muP (branch sqrt(T/(L n)), nfd Eq. 1).

A moderate T improves the trained loss; a very large T destabilises training and degrades
performance. The paper evaluates "both training and test performance" (Fig. 2a-b), so both
are judged: the final train loss (capacity) and the test loss (performance). Full scale adds
the T x L grid of Fig. 2c-d. The runs are the study
:func:`~depthscale.claims.nfd.training.fig2_tables`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from depthscale.claims.common import budget_stop, mean_finite, metric, run_claim_study
from depthscale.claims.nfd.training import (
    FULL_DATA,
    QUICK_DATA,
    SMOKE_DATA,
    fig2_depths,
    fig2_tables,
    seed_rounds,
    settings_mapping,
)
from depthscale.claims.registry import ClaimContext, Control, claim, read_settings
from depthscale.claims.verdicts import (
    ClaimOutcome,
    Finding,
    Judgement,
    Rows,
    conclude,
    finite_or_none,
)
from depthscale.report import figures
from depthscale.stats.findings import findings_verdict, sign_finding
from depthscale.stats.fits import mean_ci
from depthscale.stats.sweeps import criterion_value, scan_axis

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["Comparison", "Fig2Measure", "Fig2Settings", "compare", "draw_fig2", "judge_fig2",
           "measure_fig2", "measure_fig2_round", "nfd_fig2", "target_rounds", "undecided_Ts"]


#: family-wise level of nfd-fig2's comparisons (Bonferroni over comparisons and seed rounds);
#: no bands: the verdict reads seed-paired intervals against 0
FAMILY_LEVEL = 0.95


@dataclass(frozen=True)
class Fig2Settings:
    """nfd-fig2's settings: depth-muP ResNets (``recipe``; the control's 'mup') of width
    ``width`` at depth ``depth`` (and ``grid_depths``) on ``dataset``, trained ``epochs``
    epochs at ``eta_c`` for each T of ``Ts``; ``seeds`` seeds, doubled up to ``max_seeds`` on
    every T, then up to ``max_target_seeds`` on the T's an undecided comparison rests on."""

    dataset: str
    width: int
    depth: int
    Ts: list[float]
    eta_c: float
    epochs: float
    seeds: int
    grid_depths: list[int]
    max_seeds: int | None = None
    max_target_seeds: int | None = None
    recipe: str = "depth-mup"


@dataclass(frozen=True)
class Fig2Measure:
    """nfd-fig2's runs (``rows``: one per depth, T and seed) and, at the main depth, the T's
    swept with the mean final train loss, the diverged fraction and each seed's train loss per
    T (``per_seed[i][seed]``; +inf where the run diverged); ``looks``: the seed rounds the
    sequential design may take (their number enters the comparisons' level); ``test_per_seed``
    each seed's test loss per T, the second panel (Fig. 2b; none: only the train loss is
    judged); ``seconds``: the run time of the runs read, as stored (the budget's meter)."""

    rows: Rows
    depths: list[int]
    Ts: list[float]
    losses: list[float]
    diverged: list[float]
    per_seed: list[dict[int, float]]
    looks: int = 1
    test_per_seed: list[dict[int, float]] = field(default_factory=list)
    seconds: float = 0.0

    def panels(self) -> list[tuple[str, list[dict[int, float]]]]:
        """The losses judged, by name: the train loss, and the test loss where measured."""
        return [("train loss", self.per_seed)] + (
            [("test loss", self.test_per_seed)] if self.test_per_seed else [])


@dataclass(frozen=True)
class Comparison:
    """A paired (same seed) comparison of the final loss at two T's: ``loss(minus) -
    loss(plus)`` over the seeds where both trained, its mean and Student-t interval."""

    minus: float
    plus: float
    seeds: int
    mean: float
    low: float
    high: float

    @property
    def finding(self) -> str:
        """"supports" when the interval is above 0 (T ``plus`` has the lower loss)."""
        return sign_finding(self.low, self.high, +1)

    def text(self) -> str:
        return (f"loss(T={self.minus:g}) - loss(T={self.plus:g}) = {self.mean:+.3f} "
                f"[{self.low:+.3f}, {self.high:+.3f}] over {self.seeds} seeds")


def compare(Ts: Sequence[float], per_seed: Sequence[dict[int, float]], i: int, j: int,
            level: float) -> Comparison:
    """loss(T_i) - loss(T_j), paired by seed over the seeds where both runs trained."""
    seeds = sorted(set(per_seed[i]) & set(per_seed[j]))
    diffs = [per_seed[i][sd] - per_seed[j][sd] for sd in seeds
             if math.isfinite(per_seed[i][sd]) and math.isfinite(per_seed[j][sd])]
    mean, low, high = mean_ci(diffs, level=level)
    return Comparison(Ts[i], Ts[j], len(diffs), mean, low, high)


def target_rounds(s: Fig2Settings) -> list[int]:
    """The seed counts of the targeted rounds after the whole grid's (:func:`seed_rounds`):
    ``max_seeds`` doubled up to ``max_target_seeds`` (none where that is not set), each run
    only at the T's an undecided comparison rests on (:func:`undecided_Ts`)."""
    rounds = [int(s.seeds if s.max_seeds is None else s.max_seeds)]
    cap = rounds[0] if s.max_target_seeds is None else int(s.max_target_seeds)
    while rounds[-1] < cap:
        rounds.append(min(2 * rounds[-1], cap))
    return rounds[1:]


def measure_fig2_round(ctx: ClaimContext, s: Fig2Settings, seeds: int | None = None,
                       targeted: tuple[Sequence[float], int] | None = None) -> Fig2Measure:
    """One seed round: depth-muP pre-act ResNet (Eq. 1) trained with SGD (eta = eta_c n) for
    each T at ``seeds`` seeds (the settings' ``seeds`` by default), and with ``targeted``
    (T's, n) the T's listed at n seeds too (the same study folder: the runs both plans share
    are trained once): final full-train-set loss per run, per T the mean over its seeds
    (diverged runs counted apart: :func:`~depthscale.stats.sweeps.scan_axis`) and each seed's
    loss."""
    study = {**settings_mapping(s), "seeds": seeds or s.seeds}
    records = run_claim_study(ctx, "nfd-fig2", fig2_tables(
        study, seed=ctx.seed, device=ctx.device, data_dir=ctx.data_dir))
    if targeted:
        Ts, n = targeted
        more = run_claim_study(ctx, "nfd-fig2", fig2_tables(
            {**study, "Ts": [T for T in s.Ts if T in Ts], "seeds": n, "grid_depths": []},
            seed=ctx.seed, device=ctx.device, data_dir=ctx.data_dir))
        known = {r["run_id"] for r in records}
        records += [r for r in more if r["run_id"] not in known]
    depths = fig2_depths(study)
    rows = sorted(({"depth": r["depth"], "T": r["plan.T"], "seed": r["seed"],
                    "status": r["status"], "train_loss": criterion_value(r, "final"),
                    "test_loss": metric(r, "final_test_loss"),
                    "test_acc": metric(r, "final_test_acc")} for r in records),
                  key=lambda r: (depths.index(r["depth"]), r["T"], r["seed"]))
    main = next(sc for sc in scan_axis(records, "plan.T", "final", "depth")
                if sc.depth == s.depth)
    panels: dict[str, list[dict[int, float]]] = {
        key: [{} for _ in main.values] for key in ("train_loss", "test_loss")}
    for r in rows:
        if r["depth"] == s.depth and r["status"] in ("done", "diverged"):
            for key, per_seed in panels.items():
                loss = r[key]
                per_seed[list(main.values).index(r["T"])][int(r["seed"])] = (
                    math.inf if r["status"] == "diverged" or loss is None else float(loss))
    return Fig2Measure(rows, depths, list(main.values), list(main.losses), list(main.diverged),
                       panels["train_loss"],
                       looks=len(seed_rounds(settings_mapping(s))) + len(target_rounds(s)),
                       test_per_seed=panels["test_loss"],
                       seconds=math.fsum(float(r.get("seconds") or 0.0) for r in records))


def _decided(j: Judgement) -> bool:
    return j.decision is not None and j.decision[0] != "INCONCLUSIVE"


def _over_budget(ctx: ClaimContext, m: Fig2Measure, runs: int, what: str) -> str:
    """:func:`~depthscale.claims.common.budget_stop` for a round adding ``runs`` runs at the
    mean stored run time of those read so far."""
    return budget_stop(ctx, m.seconds, runs * m.seconds / max(1, len(m.rows)), what)


def measure_fig2(ctx: ClaimContext, s: Fig2Settings) -> Fig2Measure:
    """Sequential design (:func:`measure_fig2_round` per round): judge at ``seeds`` seeds,
    and while undecided rerun with twice the seeds (the study keeps the finished runs) up to
    ``max_seeds``; then, while still undecided,
    the targeted rounds (:func:`target_rounds`): twice the seeds again, up to
    ``max_target_seeds``, only at the T's the undecided comparisons rest on
    (:func:`undecided_Ts`). Every round enters the level. A round starts only within the
    claim's budget (``reproduce --budget``); the rounds taken and why they stopped are
    reported (``ctx.designs``)."""
    grid, targets = seed_rounds(settings_mapping(s)), target_rounds(s)
    m = measure_fig2_round(ctx, s, grid[0])
    judgement, taken, stopped = judge_fig2(m), [f"{grid[0]} seeds on every T"], ""
    for prev, n in itertools.pairwise(grid):
        if _decided(judgement):
            break
        stopped = _over_budget(ctx, m, (n - prev) * len(m.Ts) * len(m.depths),
                               f"{n} seeds on every T")
        if stopped:
            break
        m = measure_fig2_round(ctx, s, n)
        judgement = judge_fig2(m)
        taken.append(f"{n} on every T")
    Ts: list[float] = []
    for n in targets:
        if _decided(judgement) or stopped:
            break
        Ts = sorted(set(Ts) | set(undecided_Ts(m)))
        if not Ts:
            stopped = "no comparison that more seeds at chosen T's could decide"
            break
        have = {T: len(d) for T, d in zip(m.Ts, m.per_seed, strict=True)}
        at = f"{n} seeds at T = " + ", ".join(f"{T:g}" for T in Ts)
        stopped = _over_budget(ctx, m, sum(n - have[T] for T in Ts), at)
        if stopped:
            break
        m = measure_fig2_round(ctx, s, grid[-1], targeted=(Ts, n))
        judgement = judge_fig2(m)
        taken.append(at)
    why = "decided" if _decided(judgement) else stopped or "every round run"
    ctx.designs["nfd-fig2"] = {
        "evidence": f"nfd-fig2 seed rounds: {' -> '.join(taken)} ({why})",
        "measured": {"fig2_rounds_run": float(len(taken)),
                     "fig2_rounds_planned": float(len(grid) + len(targets))},
    }
    return m


def _strongest(comps: list[Comparison]) -> tuple[Comparison, set[str]]:
    """The comparison with the highest interval low end (the one reported) and the set of
    findings of all of them."""
    best = max(comps, key=lambda c: (c.low if math.isfinite(c.low) else -math.inf))
    return best, {c.finding for c in comps}


def _improves(m: Fig2Measure, per_seed: list[dict[int, float]],
              level: float) -> tuple[Finding, str, Comparison | None]:
    """"A moderate T improves the loss": some interior T (no seed diverged) trains to a lower
    loss than the smallest T, on the seed-paired interval; contradicted when every interior T
    is worse or no better (interval at or below 0)."""
    stable = [i for i in range(1, len(m.Ts) - 1) if m.diverged[i] == 0]
    comps = [compare(m.Ts, per_seed, 0, i, level) for i in stable]
    if not comps:
        return "contradicts", "every interior T diverged on some seed", None
    best, findings = _strongest(comps)
    finding: Finding = ("supports" if "supports" in findings else
               "contradicts" if findings == {"contradicts"} else "undecided")
    return finding, best.text(), best


def _destabilises(m: Fig2Measure, per_seed: list[dict[int, float]],
                  level: float) -> tuple[Finding, str, Comparison | None]:
    """"A very large T destabilises": the largest T diverges on at least half the seeds while
    an interior T trains on all, or it trains to a higher loss than some interior T (seed-paired
    interval above 0); contradicted when it diverges on no seed and is no worse than every
    interior T (each interval at or below 0)."""
    last = len(m.Ts) - 1
    stable = [i for i in range(1, last) if m.diverged[i] == 0]
    if m.diverged[last] >= 0.5 and stable:
        return "supports", f"T={m.Ts[last]:g} diverged on {m.diverged[last]:.0%} of seeds", None
    comps = [compare(m.Ts, per_seed, last, i, level) for i in stable]
    if not comps:
        return "undecided", "no interior T trained on every seed", None
    best, findings = _strongest(comps)
    finding: Finding = ("supports" if "supports" in findings else
               "contradicts" if findings == {"contradicts"} and m.diverged[last] == 0 else
               "undecided")
    return finding, best.text(), best


def _level(m: Fig2Measure) -> float:
    """The comparisons' level: Bonferroni over the interior T's, the seed rounds (whole-grid
    and targeted) and the judged losses, so the family holds at :data:`FAMILY_LEVEL`."""
    interior = max(1, len(m.Ts) - 2)
    return 1.0 - (1.0 - FAMILY_LEVEL) / (interior * m.looks * len(m.panels()))


Half = tuple[Finding, str, Comparison | None]


def _halves(m: Fig2Measure) -> list[tuple[str, list[dict[int, float]], Half, Half]]:
    """Per judged loss (name, per-seed losses): its two halves, :func:`_improves` and
    :func:`_destabilises`, at the level of :func:`_level`."""
    level = _level(m)
    return [(name, per_seed, _improves(m, per_seed, level), _destabilises(m, per_seed, level))
            for name, per_seed in m.panels()]


def undecided_Ts(m: Fig2Measure) -> list[float]:
    """The T's of the comparisons that leave a half undecided: for each undecided finding on
    each loss, the two T's of its strongest comparison (where more seeds can decide it). Empty
    where an undecided finding rests on no comparison (more seeds of chosen T's cannot decide
    it) or none is undecided."""
    Ts: set[float] = set()
    for _, _, *halves in _halves(m):
        for finding, _, comp in halves:
            if finding == "undecided":
                if comp is None:
                    return []
                Ts |= {comp.minus, comp.plus}
    return sorted(Ts)


def judge_fig2(m: Fig2Measure) -> Judgement:
    """Both halves of nfd Fig. 2a-b decided on seed-paired intervals, never on an argmin of
    means, on each judged loss (the train loss; the test loss where measured, Fig. 2b): a
    moderate T improves on the smallest (:func:`_improves`), the largest T is worse
    (:func:`_destabilises`). PASS needs every half on every loss. The intervals' level is
    Bonferroni-corrected over the interior T's, the seed rounds and the losses, so the family
    of comparisons holds at :data:`FAMILY_LEVEL`."""
    interior = max(1, len(m.Ts) - 2)
    panels = m.panels()
    level = _level(m)
    measured: dict[str, float | None] = {
        "seeds": float(min(len(d) for d in m.per_seed) if m.per_seed else 0),
        "seeds_most": float(max(len(d) for d in m.per_seed) if m.per_seed else 0),
        "diverged_fraction_largest_T": m.diverged[-1],
    }
    findings: dict[str, tuple[Finding, str]] = {}
    notes = []
    for name, per_seed, (improve, improve_text, ci), (worse, worse_text, wi) in _halves(m):
        means = [mean_finite(list(d.values())) for d in per_seed]
        finite = [i for i, v in enumerate(means) if math.isfinite(v)]
        best = min(finite, key=lambda i: means[i]) if finite else len(m.Ts) - 1
        tag = "" if name == "train loss" else "test_"  # the train loss keeps its keys
        measured |= {
            f"{tag}best_T": float(m.Ts[best]),
            f"{tag}improvement_over_smallest_T": None if ci is None else finite_or_none(ci.mean),
            f"{tag}improvement_ci_low": None if ci is None else finite_or_none(ci.low),
            f"{tag}improvement_ci_high": None if ci is None else finite_or_none(ci.high),
            f"{tag}largest_T_excess_loss": None if wi is None else finite_or_none(wi.mean),
            f"{tag}largest_T_excess_ci_low": None if wi is None else finite_or_none(wi.low),
            f"{tag}largest_T_excess_ci_high": None if wi is None else finite_or_none(wi.high),
        }
        findings[f"a moderate T improves on the smallest ({name})"] = (improve, improve_text)
        findings[f"the largest T is worse ({name})"] = (worse, worse_text)
        notes.append(f"{name}: best interior comparison {improve_text}; largest T {worse_text}; "
                     "mean per T " + ", ".join(f"{T:g}: {v:.3f}"
                                               for T, v in zip(m.Ts, means, strict=True)))
    note = (f"intervals at level {level:.4f} (Bonferroni over {interior} interior T's x "
            f"{m.looks} seed round(s) x {len(panels)} loss(es)); " + "; ".join(notes))
    return Judgement(measured, decision=findings_verdict(findings), note=note)


def _seed_points(ax: Axes, Ts: Sequence[float], per_seed: Sequence[dict[int, float]]) -> None:
    """Each seed's final loss per T (faint points) and, under each T, its seeds and diverged
    runs (the sequential design gives the T's it targets more seeds)."""
    for T, runs in zip(Ts, per_seed, strict=True):
        finite = [v for v in runs.values() if math.isfinite(v)]
        ax.scatter([T] * len(finite), finite, s=6, alpha=0.25, color="tab:gray")
        gone = len(runs) - len(finite)
        ax.annotate(f"{len(runs)}" + (f"\n{gone} div." if gone else ""), (T, 0.0),
                    fontsize=6, ha="center", va="top", annotation_clip=False,
                    xycoords=("data", "axes fraction"), xytext=(0, -22),
                    textcoords="offset points")


def draw_fig2(m: Fig2Measure, s: Fig2Settings) -> Figure:
    """nfd Fig. 2a (train loss against T at the main depth: the mean over seeds, each seed's
    loss, seeds and diverged runs per T) and the test loss per depth."""
    fig, axes = figures.new_figure(ncols=2)
    ax = axes.flat[0]
    _seed_points(ax, m.Ts, m.per_seed)
    ax.semilogx(m.Ts, m.losses, "o-", base=2)
    ax.set_xlabel("time horizon T (under each: seeds, diverged runs)", labelpad=18)
    ax.set_ylabel("final train loss (line: mean over seeds)")
    ax.set_title(f"nfd Fig. 2a: depth {s.depth}, width {s.width}")
    ax = axes.flat[1]
    if m.test_per_seed:
        _seed_points(ax, m.Ts, m.test_per_seed)
    for L in m.depths:
        test = [mean_finite([r["test_loss"] for r in m.rows if r["depth"] == L and r["T"] == T])
                for T in m.Ts]
        ax.semilogx(m.Ts, test, "o-", base=2, label=f"L = {L}")
    ax.set_xlabel("time horizon T" + (" (under each: seeds, diverged runs)" if m.test_per_seed
                                       else ""), labelpad=18 if m.test_per_seed else 4)
    ax.set_ylabel("final test loss")
    ax.legend(fontsize=7)
    return fig


def fig2_cost(settings: Mapping[str, Any], device: str) -> list[dict[str, Any]]:
    """nfd-fig2's study (its first seed round)."""
    s = read_settings(Fig2Settings, settings)
    return [fig2_tables(settings_mapping(s), device=device)]


@claim(
    "nfd-fig2", "nfd", "Moderate time horizon T improves loss; very large T destabilises",
    quick={**QUICK_DATA, "width": 128, "depth": 5, "Ts": [0.5, 1, 2, 4, 8, 16, 32],
           "eta_c": 0.1, "epochs": 10, "seeds": 3, "max_seeds": 12, "grid_depths": []},
    # quick leaves the largest T undecided (T = 32 diverges on 2 of 12 seeds and is otherwise
    # no worse than T = 8): the full scale's 30 epochs, where instability has time to show,
    # up to 24 seeds on every T, then up to 96 on the T's of an undecided comparison
    medium={**QUICK_DATA, "width": 128, "depth": 5, "Ts": [0.5, 1, 2, 4, 8, 16, 32],
            "eta_c": 0.1, "epochs": 30, "seeds": 3, "max_seeds": 24, "max_target_seeds": 96,
            "grid_depths": []},
    full={**FULL_DATA, "width": 128, "depth": 5, "Ts": [0.5, 1, 2, 4, 8, 16, 32],
          "eta_c": 0.1, "epochs": 30, "seeds": 3, "max_seeds": 24, "max_target_seeds": 96,
          "grid_depths": [5, 10, 20]},
    smoke={**SMOKE_DATA,
           "width": 16, "depth": 2, "Ts": [0.5, 2, 8], "eta_c": 0.1, "epochs": 0.2,
           "seeds": 1, "grid_depths": [3]},
    cost=fig2_cost,
    control=Control(
        "recipe 'mup' instead of 'depth-mup': branch 1/sqrt(n) with no sqrt(T/L), so the time "
        "horizon T no longer enters the network; every T trains the same net, no T can be an "
        "interior optimum and the largest T is not worse. No contrast at smoke: the correct "
        "run needs quick-scale epochs and T grid to show an interior optimum",
        {"recipe": "mup"}, contrast=False),
    headline=dict(
        metric="largest_T_excess_loss",
        ci=("largest_T_excess_ci_low", "largest_T_excess_ci_high"),
        label="final loss at the largest T minus at an interior T (seed-paired)",
        paper="T = 2 helps at depth 5; T = 32 is unstable and worse",
        ref="Prop. 5, Fig. 2a-b",
        criterion="a moderate T beats the smallest and the largest T is worse, each on a "
                  "seed-paired interval, on the train and the test loss (Bonferroni over T's, "
                  "seed rounds and the two losses)",
        statement="Moderate increases in T yield better performance, but excessively large values "
                  "introduce training instability that outweighs the theoretical capacity gains "
                  "(Fig. 2: at depth 5, moderate T (e.g., 2) improves performance, very large T "
                  "(e.g., 32) causes unstable training).",
    ),
)
def nfd_fig2(ctx: ClaimContext) -> ClaimOutcome:
    """Final train loss against T (:func:`measure_fig2`), an interior best T and a worse
    largest T (:func:`judge_fig2`)."""
    s = read_settings(Fig2Settings, ctx.settings)
    m = measure_fig2(ctx, s)
    j = judge_fig2(m)
    fig = draw_fig2(m, s)
    return conclude(ctx, "nfd-fig2", j, m.rows, fig)

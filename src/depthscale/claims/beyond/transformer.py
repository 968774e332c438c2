"""beyond-transformer (nfd open question 1: Eq. 8 in Transformer blocks).

The GPT (pre-LN blocks of causal attention and a 2-layer GELU MLP, no biases; L = 2 D branches
for D blocks; qkv and fc1 are ``branch_in``: nfd-depth gives them eta_1 = eta_c n sqrt(L),
Eq. 8) on token data (an order-2 markov chain at quick and medium, pytext bytes at full).
(a) Collapse (nfd Fig. 5 row 1): per layer the block-mean own update
(:func:`~depthscale.probes.transformer_updates`) vs L, one log-log slope per seed at matched
training loss with its 95% t-interval over seeds (nfd-collapse's rule), in bands fixed before
running: depth-muP qkv and fc1 in [-0.65, -0.35], both streams in [-0.15, 0.15]; Eq. 8 all
four in [-0.15, 0.15]. (b) Transfer (nfd Fig. 5 row 2, :func:`transformer_tables`): per recipe
the spread max - min over depths of log10 eta_c* with a 95% seed-bootstrap CI, and the paired
difference Eq. 8 minus depth-muP, claimed < 0. One verdict over all findings
(:func:`~depthscale.claims.verdicts.findings_verdict`); one route, so a contradiction is a FAIL.
:class:`TransformerSettings` -> :func:`measure_transformer` -> :func:`judge_transformer` ->
:func:`draw_transformer` -> ``conclude``. Design notes: docs/how-it-works.md.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch

from depthscale import data as ds_data
from depthscale.claims.beyond.readouts import (
    SlopeReadouts,
    layer_readout,
    record_steps,
    slope_findings_at_matched_loss,
    slope_readouts,
    slope_readouts_measured,
)
from depthscale.claims.beyond.shared import COLLAPSE, FLAT, nfd_view
from depthscale.claims.beyond.spreads import SpreadEstimate, spread_estimate, spread_measured
from depthscale.claims.common import mean_finite, run_claim_study, stored_rows
from depthscale.claims.nfd import ARM_LABELS, corrected_arms, transfer_tables
from depthscale.claims.nfd.figures import matched_means
from depthscale.claims.registry import ClaimContext, Control, Runs, claim, read_settings
from depthscale.claims.verdicts import (
    Band,
    ClaimOutcome,
    Finding,
    Judgement,
    RunPrice,
    conclude,
    deciding_run,
    findings_verdict,
    interval_finding,
    samples_to_decide,
    sign_finding,
)
from depthscale.models import build
from depthscale.models.gpt import GPT
from depthscale.probes import TRANSFORMER_UPDATE_KEYS, snapshot, transformer_updates
from depthscale.report.figures import label_log_ticks, loglog_fit_panel, new_figure
from depthscale.stats.sweeps import GridSignal, criterion_value, grid_signals, optimal_lrs
from depthscale.train import TrainConfig, train

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["TransformerMeasures", "TransformerSettings", "draw_transformer",
           "judge_transformer", "measure_transformer", "transformer_bands",
           "transformer_tables"]


def transformer_bands(tags: Sequence[str]) -> dict[str, Band]:
    """The judged slopes and their bands (nfd-collapse's, fixed before running): depth-muP's
    qkv and fc1 collapse, both streams and the Eq. 8 arm's first layers are flat."""
    return {f"{k}_slope_{tag}": FLAT if tag == "nfd_depth" or "stream" in k else COLLAPSE
            for tag in tags for k in ("qkv", "fc1", "attn_stream", "mlp_stream")}


@dataclass(frozen=True)
class TransformerSettings:
    """beyond-transformer's settings: GPTs of ``width`` (``[model]`` options ``model``) on the
    token ``dataset`` with options ``data``, batch ``batch``; the collapse part at
    ``collapse_blocks`` blocks, ``collapse_seeds`` seeds, ``steps`` SGD steps at ``eta_c``,
    readouts on ``probe_batch`` inputs; the transfer part at ``transfer_blocks`` over the
    ``eta_cs`` grid, ``epochs`` epochs, ``seeds`` seeds, ``n_boot`` bootstrap draws;
    ``corrected_recipe`` is the Eq. 8 arm's recipe (a negative control sets one without
    sqrt(L)). ``data`` and ``model`` stay mappings: they are keyword options passed on."""

    dataset: str
    data: Mapping[str, Any]
    model: Mapping[str, Any]
    batch: int
    width: int
    collapse_blocks: list[int]
    eta_c: float
    steps: int
    probe_batch: int
    collapse_seeds: int
    transfer_blocks: list[int]
    eta_cs: list[float]
    epochs: float
    seeds: int
    n_boot: int
    corrected_recipe: str = "nfd-depth"


def transformer_tables(s: TransformerSettings, *, seed: int = 0, device: str = "cpu",
                       data_dir: str | Path | None = None) -> dict[str, Any]:
    """beyond-transformer's transfer study: nfd-transfer's study
    (:func:`~depthscale.claims.nfd.transfer_tables`: depth-muP vs the Eq. 8 arm, an eta_c
    grid per depth, SGD, last-epoch training loss) on the GPT (``[model]`` options
    ``model``) at ``transfer_blocks`` blocks, batch ``batch``, on the token dataset with
    options ``data``."""
    tables = transfer_tables({**nfd_view(s), "depths": s.transfer_blocks}, seed=seed,
                             device=device, data_dir=data_dir)
    tables["study"] |= {"name": "beyond-transformer", "model": "gpt"}
    tables["data"] |= s.data
    tables["train"]["batch_size"] = s.batch
    tables["analysis"]["aggregate"] = "loss"  # what the claim judges: the seed-mean loss
    return {"study": tables.pop("study"), "model": dict(s.model), **tables}


@dataclass(frozen=True)
class TransformerMeasures:
    """What beyond-transformer measured: the two arms ``(tag, recipe)``, each update slope
    over seeds at matched loss and at fixed steps, the eta_c* spread estimate, the sweeps
    whose eta_c grid's loss range is within its seed spread (``flat``), the token data's name
    and ``meta``, the CSV rows (the collapse part, then the transfer part) and
    ``measured``."""

    arms: tuple[tuple[str, str], ...]
    slopes: SlopeReadouts
    spread: SpreadEstimate
    flat: list[GridSignal]
    data_name: str
    data_meta: dict[str, Any]
    rows: list[dict[str, Any]]
    measured: dict[str, float | None]


def _token_data(ctx: ClaimContext, s: TransformerSettings) -> ds_data.Dataset:
    """The claim's token dataset with its options ``data`` (split seed = the claim's seed)."""
    return ds_data.load(s.dataset, data_dir=ctx.data_dir, seed=ctx.seed, **s.data)


def _collapse_run(ctx: ClaimContext, s: TransformerSettings, data: ds_data.Dataset,
                  recorded: Sequence[int], arm: tuple[str, str], D: int,
                  seed: int) -> list[dict[str, Any]]:
    """Train one arm's GPT of ``D`` blocks for ``steps`` SGD steps: its updates and running
    loss at the ``recorded`` steps, one row each."""
    tag, recipe = arm
    net, plan = build("gpt", recipe, input_shape=data.sample_shape, n_out=data.n_out,
                      width=s.width, depth=D, seed=seed, **s.model)
    base = {"part": "collapse", "arm": tag, "recipe": recipe, "blocks": D,
            "depth": cast(GPT, net).plan_depth, "seed": seed}
    probe: torch.Tensor = data.x_train[: s.probe_batch]
    rows: list[dict[str, Any]] = []
    hook = layer_readout(rows, base, set(recorded), snapshot(net), probe, transformer_updates)
    res = train(net, plan, data, TrainConfig(
        lr=s.eta_c, steps=s.steps, batch_size=s.batch, seed=seed, device=ctx.device),
        hooks=[hook])
    return [{**r, "status": res.status} for r in rows]


def _collapse_rows(ctx: ClaimContext, s: TransformerSettings, data: ds_data.Dataset,
                   arms: Sequence[tuple[str, str]],
                   recorded: Sequence[int]) -> list[dict[str, Any]]:
    """The collapse part's readout rows: per arm, ``collapse_blocks`` and seed one run, kept
    as it finishes (a killed claim resumes: :func:`~depthscale.claims.common.stored_rows`)."""
    seeds = range(ctx.seed, ctx.seed + s.collapse_seeds)
    ctx.extend_total(len(arms) * len(s.collapse_blocks) * len(seeds))
    rows: list[dict[str, Any]] = []
    for arm in arms:
        for D in s.collapse_blocks:
            for seed in seeds:
                rows += stored_rows(
                    ctx, "beyond-transformer-collapse", {"arm": arm, "blocks": D, "seed": seed},
                    functools.partial(_collapse_run, ctx, s, data, recorded, arm, D, seed))
                ctx.progress(1)
    return rows


def _transfer_rows(records: Sequence[Mapping[str, Any]],
                   recipes: tuple[str, ...]) -> list[dict[str, Any]]:
    """The transfer part's rows, one per run, in (arm, blocks, eta_c, seed) order."""
    return sorted(({"part": "transfer", "recipe": r["recipe"], "blocks": r["depth"],
                    "depth": 2 * r["depth"], "eta_c": r["lr"], "seed": r["seed"],
                    "status": r["status"],
                    "last_epoch_train_loss": criterion_value(r, "last-epoch")}
                   for r in records),
                  key=lambda r: (recipes.index(r["recipe"]), r["blocks"], r["eta_c"],
                                 r["seed"]))


def measure_transformer(ctx: ClaimContext, s: TransformerSettings) -> TransformerMeasures:
    """The transfer study (:func:`transformer_tables`) and its eta_c* spread
    (:func:`~depthscale.claims.beyond.spreads.spread_estimate`); the collapse runs, their own
    updates (:func:`~depthscale.probes.transformer_updates`) and running loss recorded every
    ``steps // 30`` steps, and the log-log slopes against L = 2 D per seed, at matched loss and
    at fixed steps (:func:`~depthscale.claims.beyond.readouts.slope_readouts`)."""
    arms = corrected_arms(nfd_view(s))
    data = _token_data(ctx, s)  # bad data options fail here, before any run
    records = run_claim_study(ctx, "beyond-transformer", transformer_tables(
        s, seed=ctx.seed, device=ctx.device, data_dir=ctx.data_dir))
    rows = _collapse_rows(ctx, s, data, arms, record_steps(s.steps))
    depths = [2 * D for D in s.collapse_blocks]
    seeds = list(range(ctx.seed, ctx.seed + s.collapse_seeds))
    slopes = slope_readouts(rows, [tag for tag, _ in arms], TRANSFORMER_UPDATE_KEYS, depths,
                            seeds, s.steps)
    spread = spread_estimate(records, arms, s.transfer_blocks, n_boot=s.n_boot,
                             seed=ctx.seed)
    measured = slope_readouts_measured(slopes, depths) | spread_measured("spread_", spread)
    for o in optimal_lrs(records, "last-epoch", "depth", group="recipe", aggregate="loss"):
        measured[f"eta_star_{o.group}_D{o.depth}"] = o.lr
    flat = [g for g in grid_signals(records, "last-epoch", "depth", group="recipe") if g.flat]
    rows += _transfer_rows(records, tuple(r for _, r in arms))
    return TransformerMeasures(arms, slopes, spread, flat, data.name, data.meta, rows,
                               measured)


def _grid_tie(m: TransformerMeasures) -> bool:
    """The two arms are different recipes, yet their optima fall on the same eta_c grid
    points in every resample: the spread difference is exactly 0 because it is below the
    grid's step, not because Eq. 8 has no effect."""
    low, high = m.spread.diff_ci
    return low == high == 0.0 and m.arms[0][1] != m.arms[1][1]


def _spread_finding(m: TransformerMeasures, s: TransformerSettings) -> tuple[Finding, str]:
    """The paired spread difference against "it is < 0"; undecided where a sweep is flat
    within its seed spread or the arms tie on the grid (:func:`_grid_tie`), unless the arms
    are the same runs (a FAIL whatever the noise)."""
    p0, p1 = (m.spread.point[tag] for tag, _ in m.arms)
    low, high = m.spread.diff_ci
    text = (f"spread of log10 eta_c* over {s.transfer_blocks} blocks: depth-muP "
            f"{p0:.3g}, {m.arms[1][1]} {p1:.3g} decades; difference {m.spread.diff:+.3g}, 95% "
            f"seed-bootstrap CI [{low:+.3g}, {high:+.3g}] ({s.seeds} seeds), claimed < 0")
    if _grid_tie(m):
        step = min(math.log10(b / a) for a, b in itertools.pairwise(sorted(s.eta_cs)))
        return "undecided", (
            f"{text}; but both arms' optima sit on the same grid points in every resample: "
            f"a difference below the grid's step ({step:.3g} decades) reads 0, so a finer "
            "eta_c grid or deeper transfer blocks decide it")
    if m.flat and not low == high == 0.0:
        g = min(m.flat, key=lambda g: g.loss_range)
        return "undecided", (
            f"{text}; but the eta_c grid's loss range at {g.group}, {g.depth} blocks "
            f"({g.loss_range:.3g}) is within its seed spread ({g.seed_spread:.3g}): no optimum "
            "to compare; more seeds or epochs (--scale medium) decide it")
    return sign_finding(low, high, -1), text


def _slope_text(measured: Mapping[str, float | None], tag: str) -> str:
    said = (measured[f"{k}_slope_{tag}"] for k in ("qkv", "q", "k", "v", "fc1"))
    return f"{tag}: qkv, q, k, v, fc1 " + ", ".join(
        "n/a" if v is None else f"{v:.3g}" for v in said)


def judge_transformer(m: TransformerMeasures, s: TransformerSettings,
                      price: RunPrice | None = None) -> Judgement:
    """The banded slopes (:func:`transformer_bands`, each on its seed interval at matched
    loss, judged only if two loss targets agree) and the spread difference (claimed < 0), as
    one verdict (:func:`~depthscale.claims.verdicts.findings_verdict`; one route, so a
    contradiction is a FAIL); the q, k, v slopes and the data's loss floor are reported. An
    INCONCLUSIVE verdict names the run that decides it (:func:`_deciding`, ``price``)."""
    bands = transformer_bands([tag for tag, _ in m.arms])
    findings = slope_findings_at_matched_loss(m.slopes, bands)
    findings["spread_nfd_minus_depth_mup"] = _spread_finding(m, s)
    floor = m.data_meta.get("entropy_rate_nats")
    note = "; ".join(n for n in (
        "attention vs MLP, update slopes at the last step (q, k, v not judged): "
        + "; ".join(_slope_text(m.measured, tag) for tag, _ in m.arms),
        floor is not None and f"data: {m.data_name}, entropy rate {floor:.3g} nats (loss "
        f"floor), uniform {m.data_meta['uniform_loss_nats']:.3g}") if n)
    verdict, said = findings_verdict(findings)
    if verdict == "INCONCLUSIVE":
        undecided = [k for k, (f, _) in findings.items() if f == "undecided"]
        said = f"{_deciding(m, s, bands, undecided, price)}; {said}"
    return Judgement(m.measured, dict(bands), (verdict, said), note)


def _deciding(m: TransformerMeasures, s: TransformerSettings, bands: Mapping[str, Band],
              undecided: Sequence[str], price: RunPrice | None) -> str:
    """The run that decides the ``undecided`` findings: the collapse seeds each slope's
    t-interval needs at both loss targets, and the transfer seeds the spread difference's
    interval needs (:func:`~depthscale.claims.verdicts.samples_to_decide`); a slope whose
    estimates lie on opposite sides of a band edge at the two targets moves with the loss level,
    so no seeds decide it: longer training (the next scale) is the next test."""
    first, last = m.slopes.readouts[0], m.slopes.readouts[-1]
    seeds_need, worst, moving, said = 0, "", [], []
    for name in (k for k in undecided if k in bands):
        cis = [m.slopes.matched[name][k] for k in (last, first)]
        if not all(math.isfinite(c.mean) for c in cis):
            moving.append(f"{name}: no slope at a loss target")
            continue
        sides = {interval_finding(c.mean, c.mean, bands[name]) for c in cis}
        if len(sides) > 1:
            moving.append(f"{name} ({cis[0].mean:.3g} at the last step's target, "
                          f"{cis[1].mean:.3g} at step {first}'s)")
            continue
        for c in cis:
            need = samples_to_decide(c.mean, c.low, c.high, bands[name], len(c.per_seed),
                                     t_interval=True)
            if need.needed is None:
                moving.append(f"{name}: {need.said()}")
            elif need.needed > seeds_need:
                seeds_need, worst = need.needed, f"{name} needs {need.said()}"
    if seeds_need:
        said.append(f"{worst}; " + deciding_run(
            f"{seeds_need} collapse seeds", {"collapse_seeds": seeds_need}, price,
            factor=seeds_need / s.collapse_seeds))
    if "spread_nfd_minus_depth_mup" in undecided and not m.flat and not _grid_tie(m):
        low, high = m.spread.diff_ci
        need = samples_to_decide(m.spread.diff, low, high, (None, 0.0), s.seeds)
        if need.needed is not None and not need.decided:
            said.append(f"the spread difference needs {need.said()}; " + deciding_run(
                f"{need.needed} transfer seeds", {"seeds": need.needed}, price))
    if "spread_nfd_minus_depth_mup" in undecided and _grid_tie(m):
        said.append("the spread difference is below the eta_c grid's step: a grid twice as "
                    "fine, or transfer blocks twice as deep, is the next test")
    if moving or ("spread_nfd_minus_depth_mup" in undecided and m.flat
                  and not _grid_tie(m)):
        larger = price.larger() if price is not None else None
        what = ("; ".join(moving) + ": the estimates lie on both sides of the band edge, so "
                "the finding moves with the loss level and more seeds cannot decide it"
                if moving else "a flat eta_c grid")
        said.append(f"{what}; " + (deciding_run(
            "longer training, the next scale's settings", larger[1], price,
            label=f"--scale {larger[0]}") if larger is not None
            else "a reading at one loss level fixed before running would decide it"))
    return "; ".join(said)


def _loss_panel(ax: Axes, grid: Sequence[float],
                lines: Sequence[tuple[str, list[float], float | None]], title: str) -> None:
    """Seed-mean last-epoch loss against eta_c, one line per (label, losses, eta_c*), each
    optimum a dotted vertical line of its colour."""
    for label, ys, star in lines:
        line = ax.semilogx(grid, ys, "o-", label=label)[0]
        if star is not None:
            ax.axvline(star, color=line.get_color(), ls=":", lw=1)
    label_log_ticks(ax, grid)
    ax.set_xlabel("eta_c")
    ax.set_ylabel("train loss (last epoch)")
    ax.set_title(title, fontsize=8)
    ax.legend(fontsize=7)


def _mean_loss(rows: Sequence[Mapping[str, Any]], **match: Any) -> float:
    """The mean finite ``last_epoch_train_loss`` of the rows matching every ``match`` item."""
    return mean_finite([r["last_epoch_train_loss"] for r in rows
                        if all(r[k] == v for k, v in match.items())])


def _collapse_panels(axes: Sequence[Axes], m: TransformerMeasures,
                     s: TransformerSettings) -> None:
    """Row 1: own updates at matched loss against L (each seed's depth at its matched step
    of the last step's target, seed mean), per layer group."""
    depths = [2 * D for D in s.collapse_blocks]
    collapse = [r for r in m.rows if r["part"] == "collapse"]

    def curve(tag: str, key: str) -> list[float]:
        return matched_means(collapse, m.slopes, tag, key, depths)

    panels = (("qkv", ("qkv",)), ("fc1", ("fc1",)), ("streams", ("attn_stream", "mlp_stream")),
              ("q, k, v", ("q", "k", "v")))
    for ax, (title, keys) in zip(axes, panels, strict=False):
        for (tag, recipe), key in ((arm, key) for arm in m.arms for key in keys):
            loglog_fit_panel(ax, depths, curve(tag, key),
                             label=f"{key}, {ARM_LABELS[tag].format(recipe)}")
        ax.set_xlabel("depth L = 2 x blocks")
        ax.set_title(f"{title} own update (matched loss)", fontsize=8)
        ax.legend(fontsize=5)


def draw_transformer(m: TransformerMeasures, s: TransformerSettings) -> Figure:
    """The collapse panels (:func:`_collapse_panels`), then per arm the loss against eta_c at
    every number of blocks of the transfer study."""
    fig, axes = new_figure(ncols=3, nrows=2)
    _collapse_panels(list(axes.flat), m, s)
    transfer = [r for r in m.rows if r["part"] == "transfer"]
    for ax, (tag, recipe) in zip(axes.flat[4:], m.arms, strict=True):
        lines = [(f"{D} blocks", [_mean_loss(transfer, recipe=recipe, blocks=D, eta_c=e)
                                  for e in s.eta_cs],
                  m.measured.get(f"eta_star_{recipe}_D{D}")) for D in s.transfer_blocks]
        _loss_panel(ax, s.eta_cs, lines,
                    f"{recipe}: spread {m.spread.point[tag]:.2f} decades")
    return fig


#: the quick and medium data, model and batch (an order-2 markov chain, vocab 16)
GPT_QUICK = {"dataset": "markov",
              "data": {"vocab": 16, "order": 2, "context": 16, "n_train": 1024, "n_test": 256},
              "model": {"heads": 4, "mlp_ratio": 4, "bias": False}, "batch": 32}


def transformer_cost(settings: Mapping[str, Any], device: str) -> list[Runs | dict[str, Any]]:
    """What :func:`measure_transformer` makes: both arms' GPTs at each of ``collapse_blocks``
    (``collapse_seeds`` each, ``steps`` steps of ``batch``) and the transfer study."""
    s = read_settings(TransformerSettings, settings)
    return [*(Runs("gpt", s.width, D, s.dataset, count=2 * s.collapse_seeds, steps=s.steps,
                   batch=s.batch, options=s.model, data=s.data)
              for D in s.collapse_blocks),
            transformer_tables(s, device=device)]


@claim(
    "beyond-transformer", "nfd",
    "Open question (nfd Q1): in pre-LN Transformer blocks (GPT: causal attention + 2-layer "
    "MLP, SGD) depth-muP collapses the first layers' (qkv, fc1) updates ~ L^(-1/2) with the "
    "stream's O(1); Eq. 8 (x sqrt(L) on qkv and fc1) makes them flat and narrows the spread "
    "of the optimal eta_c across depths",
    # 3 collapse seeds (an interval over seeds needs them; t(0.975, 1) = 12.7 at 2) over 1-8
    # blocks (L = 2-16, the same factor 8 as 2-16 blocks at half the runs' cost)
    quick={**GPT_QUICK, "width": 64, "collapse_blocks": [1, 2, 4, 8], "eta_c": 0.1,
           "steps": 100, "probe_batch": 64, "collapse_seeds": 3, "transfer_blocks": [1, 2, 4],
           "eta_cs": [0.2, 0.4, 0.8, 1.6, 3.2], "epochs": 3, "seeds": 2, "n_boot": 1000},
    medium={**GPT_QUICK, "width": 128, "collapse_blocks": [2, 4, 8, 16, 32], "eta_c": 0.1,
            "steps": 300, "probe_batch": 128, "collapse_seeds": 3,
            "transfer_blocks": [1, 2, 4, 8], "eta_cs": [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4],
            "epochs": 5, "seeds": 4, "n_boot": 2000},
    full={"dataset": "pytext", "data": {"context": 64, "n_train": 16384, "n_test": 1024},
          "model": {"heads": 4, "mlp_ratio": 4, "bias": False}, "batch": 64, "width": 256,
          "collapse_blocks": [2, 4, 8, 16, 32, 64], "eta_c": 0.1, "steps": 1000,
          "probe_batch": 128, "collapse_seeds": 3, "transfer_blocks": [2, 4, 8, 16],
          "eta_cs": [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4], "epochs": 3, "seeds": 3,
          "n_boot": 2000},
    smoke={"dataset": "markov",
           "data": {"vocab": 8, "order": 1, "context": 8, "n_train": 64, "n_test": 16},
           "model": {"heads": 2, "mlp_ratio": 2, "bias": False}, "batch": 16, "width": 16,
           "collapse_blocks": [1, 2], "eta_c": 0.1, "steps": 3, "probe_batch": 8,
           "collapse_seeds": 2, "transfer_blocks": [1, 2], "eta_cs": [0.1, 1.0], "epochs": 1,
           "seeds": 2, "n_boot": 50},
    cost=transformer_cost,
    control=Control(
        "Eq. 8 arm trained under plain depth-muP (corrected_recipe 'depth-mup': the sqrt(L) on "
        "qkv and fc1 missing): both arms are the same runs, so the spread difference is "
        "exactly 0 in every resample and the 'corrected' first layers collapse like "
        "depth-muP's. No contrast at smoke: the correct run needs quick-scale depths, steps "
        "and grids",
        {"corrected_recipe": "depth-mup"}, contrast=False),
    headline=dict(
        metric="qkv_slope_nfd_depth",
        label="log-log slope in L of the qkv update with Eq. 8 (pre-LN Transformer)",
        paper="open question; in ResNets Eq. 8 removes the L^(-1/2) collapse (Fig. 5 row 1)",
        ref="nfd Sec. 6; Eq. 8",
        statement="The paper names extending NFD to broader architectures as open (Sec. 6); in "
                  "ResNets with two-layer blocks the depth-aware LR eta_1 = eta_c n sqrt(L) (Eq. "
                  "8) restores first-layer learning and depth-wise HP transfer (Fig. 5).",
    ),
)
def beyond_transformer(ctx: ClaimContext) -> ClaimOutcome:
    """beyond-transformer, as the module docstring says: settings -> measure -> judge -> draw."""
    s = read_settings(TransformerSettings, ctx.settings)
    m = measure_transformer(ctx, s)
    j = judge_transformer(m, s, RunPrice.of(ctx, "beyond-transformer"))
    fig = draw_transformer(m, s)
    return conclude(ctx, "beyond-transformer", j, m.rows, fig)

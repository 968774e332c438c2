"""The slope readout of two-layer-block ResNets (nfd Fig. 5 row 1, Eq. 27, 33-34), shared by
nfd-collapse, nfd-transfer's one-step route, beyond-3layer and beyond-adam.

Updates and the running loss (mean of the last 10 training losses) are recorded every
``steps // 30`` steps (:func:`record_steps`). Deeper Eq. 8 nets train faster, so a slope read
at a fixed step mixes depth scaling with training progress; a slope is read at *matched
training loss* (:func:`matched_steps`): per arm and seed the target is the largest over depths
of the running loss at the last step (every depth reaches it), and each depth is read at the
first recorded step whose running loss is at or below it. One log-log slope per seed, then its
95% t-interval over seeds (:func:`slope_ci`) against the band; a slope whose finding changes at
the target of a third of the run is undecided (:func:`slope_findings_at_matched_loss`). Two
routes (the library's nets and the numpy nets of :mod:`depthscale.claims.nfd.handwritten`) are
joined by :func:`two_route_decision`. One SGD step's output change against depth is
:func:`output_step`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from depthscale.claims.common import mean_finite, stored_rows
from depthscale.claims.nfd.handwritten import handwritten_run
from depthscale.claims.nfd.training import seed_rounds
from depthscale.claims.registry import ClaimContext
from depthscale.claims.verdicts import (
    Band,
    Decision,
    Finding,
    Rows,
    findings_verdict,
    finite_or_none,
    interval_finding,
)
from depthscale.data import Dataset
from depthscale.errors import ConfigError
from depthscale.models import build
from depthscale.stats.fits import loglog_slope, mean_ci
from depthscale.train import TrainConfig, train

__all__ = ["READOUTS", "RECORDS", "RouteRuns", "SlopeCI", "SlopeReadouts",
           "handwritten_layers", "handwritten_measured", "handwritten_route", "lift_contrast",
           "matched_steps", "output_slopes", "output_step", "readout_steps", "record_steps",
           "refuted_opening", "route_rows", "routes_note", "sequential_routes", "slope_ci",
           "slope_findings", "slope_findings_at_fixed_step", "slope_findings_at_matched_loss",
           "slope_readouts", "slope_readouts_measured", "slopes_decision", "straddling",
           "two_route_decision"]

#: updates are recorded every ``steps // RECORDS`` steps
RECORDS = 30


# ---- the readout rule (shared with beyond-3layer) ------------------------------------------
def readout_steps(steps: int) -> list[int]:
    """The fixed readout steps of a run of ``steps`` steps: a third, two thirds and the end
    (each also names a matched-loss target: the losses reached there)."""
    return sorted({max(1, steps // 3), max(1, 2 * steps // 3), steps})


def record_steps(steps: int) -> list[int]:
    """The steps at which updates and the running loss are recorded: every
    ``max(1, steps // RECORDS)`` steps, and the fixed readouts (:func:`readout_steps`)."""
    every = max(1, steps // RECORDS)
    return sorted(set(range(every, steps + 1, every)) | set(readout_steps(steps)))


def _run_rows(rows: Sequence[Mapping[str, Any]], tag: str, L: int,
              seed: int) -> dict[int, Mapping[str, Any]]:
    """One run's recorded rows (arm ``tag``, depth ``L``, ``seed``) by step."""
    return {r["step"]: r for r in rows
            if r["arm"] == tag and r["depth"] == L and r["seed"] == seed}


def matched_steps(rows: Sequence[Mapping[str, Any]], tag: str, seed: int,
                  depths: Sequence[int], at: int) -> tuple[float, dict[int, int | None]]:
    """The matched-loss readout of arm ``tag``, ``seed``: the target, the largest over
    ``depths`` of the running loss (``running_loss_last10``) at step ``at`` (NaN if a depth
    has none there: it diverged), and per depth the first recorded step whose running loss is
    <= the target (None if none: never for a finite target, as each depth's loss at ``at``
    is at most the target)."""
    runs = {L: _run_rows(rows, tag, L, seed) for L in depths}
    at_loss = [run[at]["running_loss_last10"] if at in run else math.nan
               for run in runs.values()]
    target = max(at_loss) if all(math.isfinite(v) for v in at_loss) else math.nan
    found: dict[int, int | None] = {}
    for L, run in runs.items():
        reached = [k for k in sorted(run) if run[k]["running_loss_last10"] <= target]
        found[L] = reached[0] if reached else None
    return target, found


def _seed_slope(rows: Sequence[Mapping[str, Any]], tag: str, key: str, seed: int,
                at: Mapping[int, int | None]) -> float:
    """Log-log slope vs depth of one seed's ``<key>_update``, depth ``L`` read at step
    ``at[L]``; NaN unless every depth has a finite positive value."""
    ys = []
    for L, k in at.items():
        run = _run_rows(rows, tag, L, seed)
        ys.append(float(run[k][f"{key}_update"]) if k is not None and k in run else math.nan)
    ok = all(math.isfinite(v) and v > 0 for v in ys)
    return loglog_slope(list(at), ys).slope if ok else math.nan


@dataclass(frozen=True)
class SlopeCI:
    """A log-log slope over seeds: one slope per seed, their mean and its Student-t interval
    (95% unless a sequential design's looks ask for more; :func:`~depthscale.stats.fits.mean_ci`);
    NaN interval below two seeds (no noise estimate) or where a seed has no slope."""

    per_seed: tuple[float, ...]
    mean: float
    low: float
    high: float

    @property
    def text(self) -> str:
        return (f"{self.mean:.3g} [{self.low:.3g}, {self.high:.3g}] "
                f"({len(self.per_seed)} seeds)")


def slope_ci(per_seed: Sequence[float], level: float = 0.95) -> SlopeCI:
    """:class:`SlopeCI` of per-seed slopes, its interval at ``level``."""
    mean, low, high = mean_ci(per_seed, level) if len(per_seed) >= 2 else (math.nan,) * 3
    if len(per_seed) == 1:
        mean = per_seed[0]
    return SlopeCI(tuple(per_seed), mean, low, high)


@dataclass(frozen=True)
class SlopeReadouts:
    """Every slope ``<key>_slope_<tag>`` over seeds at each fixed step k (``fixed[name][k]``)
    and at the matched-loss readout of each fixed step's target (``matched[name][k]``), with
    the matched readouts themselves (``targets[tag][k]``: per seed (seed, target, step by
    depth), :func:`matched_steps`); ``level`` is the intervals' confidence."""

    readouts: list[int]
    fixed: dict[str, dict[int, SlopeCI]]
    matched: dict[str, dict[int, SlopeCI]]
    targets: dict[str, dict[int, list[tuple[int, float, dict[int, int | None]]]]]
    level: float = 0.95


def slope_readouts(rows: Sequence[Mapping[str, Any]], tags: Sequence[str],
                   keys: Sequence[str], depths: Sequence[int], seeds: Sequence[int],
                   steps: int, level: float = 0.95) -> SlopeReadouts:
    """Per arm and key the per-seed slopes vs ``depths`` and their intervals at ``level``, at
    each fixed readout step of a ``steps``-step run and at matched loss (the module
    docstring's rule)."""
    readouts = readout_steps(steps)
    targets = {tag: {k: [(seed, *matched_steps(rows, tag, seed, depths, k)) for seed in seeds]
                     for k in readouts} for tag in tags}
    fixed: dict[str, dict[int, SlopeCI]] = {}
    matched: dict[str, dict[int, SlopeCI]] = {}
    for tag in tags:
        for key in keys:
            name = f"{key}_slope_{tag}"
            fixed[name] = {k: slope_ci([_seed_slope(rows, tag, key, seed, dict.fromkeys(
                depths, k)) for seed in seeds], level) for k in readouts}
            matched[name] = {k: slope_ci([_seed_slope(rows, tag, key, seed, at)
                                          for seed, _, at in targets[tag][k]], level)
                             for k in readouts}
    return SlopeReadouts(readouts, fixed, matched, targets, level)


def slope_readouts_measured(r: SlopeReadouts, depths: Sequence[int],
                            primary: str = "matched") -> dict[str, float | None]:
    """``measured``: each slope at the ``primary`` readout of the last step (``"matched"``:
    matched loss of its target; ``"fixed"``: the step itself) under its name (``_ci_low``,
    ``_ci_high`` its interval), at the other readouts as ``<name>_matched<k>`` and
    ``<name>_step<k>``; per arm the seed-mean targets (``loss_target_<tag>_step<k>``) and
    the last target's seed-mean step per depth (``matched_step_<tag>_L<L>``)."""
    _check_readout(primary)
    out: dict[str, float | None] = {}
    last = r.readouts[-1]
    first = "matched" if primary == "matched" else "step"
    for name in r.matched:
        for label, by_step in (("matched", r.matched[name]), ("step", r.fixed[name])):
            for k, ci in by_step.items():
                stem = name if (label, k) == (first, last) else f"{name}_{label}{k}"
                out |= {stem: finite_or_none(ci.mean), f"{stem}_ci_low": finite_or_none(ci.low),
                        f"{stem}_ci_high": finite_or_none(ci.high)}
    for tag, targets in r.targets.items():
        for k, per_seed in targets.items():
            out[f"loss_target_{tag}_step{k}"] = finite_or_none(
                mean_finite([target for _, target, _ in per_seed]))
        for L in depths:
            found = [at[L] for _, _, at in targets[last]]
            out[f"matched_step_{tag}_L{L}"] = (None if None in found else finite_or_none(
                mean_finite([float(k) for k in found if k is not None])))
    return out


def slope_findings_at_matched_loss(r: SlopeReadouts,
                                   bands: Mapping[str, Band]) -> dict[str, tuple[Finding, str]]:
    """Each banded slope's finding: its seed interval at the matched-loss readout of the last
    step's target against the band (:func:`~depthscale.claims.verdicts.interval_finding`),
    kept only if the target of the first readout (a third of the run) gives the same
    finding, else undecided: the slope then depends on the loss level it is matched at."""
    first, last = r.readouts[0], r.readouts[-1]
    findings: dict[str, tuple[Finding, str]] = {}
    for name, band in bands.items():
        ci = r.matched[name]
        said = {k: interval_finding(ci[k].low, ci[k].high, band) for k in (first, last)}
        text = (f"at matched loss (targets of steps {last}, {first}): {ci[last].text}, "
                f"{ci[first].text}; band {list(band)}; at fixed steps "
                + ", ".join(f"{k}: {c.text}" for k, c in r.fixed[name].items()))
        findings[name] = ((said[last], text) if said[first] == said[last] else
                          ("undecided", f"the finding moves with the loss level the slope is "
                           f"matched at ({said[last]} at the last step's target, "
                           f"{said[first]} at step {first}'s): {text}"))
    return findings


#: the readouts a slope verdict may rest on: at matched loss, or at the run's last step (the
#: paper's fixed step: Fig. 5 row 1 reads step 300)
READOUTS = ("matched", "fixed")


def _check_readout(readout: str) -> None:
    if readout not in READOUTS:
        raise ConfigError(f"readout must be one of {READOUTS}, got {readout!r}")


def slope_findings_at_fixed_step(r: SlopeReadouts,
                                 bands: Mapping[str, Band]) -> dict[str, tuple[Finding, str]]:
    """Each banded slope's finding: its seed interval at the run's last step (the paper's
    fixed readout, nfd Fig. 5 row 1: step 300) against the band
    (:func:`~depthscale.claims.verdicts.interval_finding`); the matched-loss readings are
    reported beside it, not judged."""
    first, last = r.readouts[0], r.readouts[-1]
    findings: dict[str, tuple[Finding, str]] = {}
    for name, band in bands.items():
        ci = r.fixed[name][last]
        findings[name] = (interval_finding(ci.low, ci.high, band),
                          f"at fixed step {last}: {ci.text}; band {list(band)}; at matched "
                          f"loss (reported; targets of steps {last}, {first}): "
                          f"{r.matched[name][last].text}, {r.matched[name][first].text}")
    return findings


def slope_findings(r: SlopeReadouts, bands: Mapping[str, Band],
                   readout: str = "matched") -> dict[str, tuple[Finding, str]]:
    """The banded slopes' findings at ``readout``: :func:`slope_findings_at_matched_loss` or
    :func:`slope_findings_at_fixed_step`."""
    _check_readout(readout)
    if readout == "fixed":
        return slope_findings_at_fixed_step(r, bands)
    return slope_findings_at_matched_loss(r, bands)


def _last(r: SlopeReadouts, name: str, readout: str) -> SlopeCI:
    """Slope ``name``'s interval at the last step's ``readout``."""
    return (r.fixed if readout == "fixed" else r.matched)[name][r.readouts[-1]]


# ---- the second route (medium and full) -----------------------------------------------------
# The library's nets (torch autograd, the Plan, the training loop, the probes) are one route;
# nets written again in numpy from the paper's equations with hand-derived gradients
# (:func:`~depthscale.claims.nfd.handwritten.handwritten_run`), sharing none of that code, are
# the other. Both are read by the same rule, with seed rounds while a slope is undecided.


def handwritten_layers(recipe: str, first_layers: int = 1) -> tuple[int, ...]:
    """The internal layers (1-based) whose SGD LR the handwritten route multiplies by sqrt(L)
    for ``recipe``: none under depth-muP, the first ``first_layers`` under nfd-depth (Eq. 8:
    the first; beyond-3layer's fix: the first two)."""
    if recipe == "depth-mup":
        return ()
    if recipe == "nfd-depth":
        return tuple(range(1, first_layers + 1))
    raise ConfigError(f"the handwritten second route knows the recipes 'depth-mup' and "
                      f"'nfd-depth' (nfd Eq. 6, 8), not {recipe!r}: choose one of them or set "
                      f"second_route = false")


def handwritten_route(ctx: ClaimContext, folder: str, data: Dataset, probe: torch.Tensor,
                      arms: Sequence[tuple[str, tuple[int, ...]]], block: int,
                      seeds: Sequence[int], keys: Mapping[str, str] | None = None) -> Rows:
    """The handwritten nets' readout rows per arm (tag, sqrt(L) layers), depth of the settings
    and seed, recorded as the library's runs are (:func:`record_steps`), each run stored in
    ``folder`` as it finishes; ``keys`` renames readout columns (``layer1`` -> ``internal``
    for nfd-collapse)."""
    s = ctx.settings
    x, y, p = (t.cpu().numpy() for t in (data.x_train.flatten(1), data.y_train,
                                           probe.flatten(1)))
    renames = {f"{k}_update": f"{v}_update" for k, v in (keys or {}).items()}
    rows: Rows = []
    for tag, layers in arms:
        for L in s["depths"]:
            for seed in seeds:
                def run(layers: tuple[int, ...] = layers, L: int = L, seed: int = seed) -> Rows:
                    return [{renames.get(k, k): v for k, v in r.items()} for r in handwritten_run(
                        x, y, p, width=s["width"], depth=L, block=block, sqrt_L_layers=layers,
                        eta_c=s["eta_c"], steps=s["steps"], seed=seed,
                        record=record_steps(s["steps"]), classes=data.n_out)]
                rows += [{**r, "arm": tag, "depth": L, "seed": seed} for r in stored_rows(
                    ctx, folder, {"arm": tag, "layers": list(layers), "depth": L, "seed": seed},
                    run)]
                ctx.progress(1)
    return rows


def straddling(r: SlopeReadouts, bands: Mapping[str, Band],
               readout: str = "matched") -> list[str]:
    """The banded slopes whose interval straddles a band edge (or is not finite) at either
    loss target (``readout`` "fixed": at the last step): the ones more seeds can decide (a
    finding that moves between two decided targets is not among them)."""
    first, last = r.readouts[0], r.readouts[-1]
    if readout == "fixed":
        return [name for name, band in bands.items()
                if interval_finding(r.fixed[name][last].low, r.fixed[name][last].high, band)
                == "undecided"]
    return [name for name, band in bands.items()
            if any(interval_finding(r.matched[name][k].low, r.matched[name][k].high, band)
                   == "undecided" for k in (first, last))]


@dataclass(frozen=True)
class RouteRuns:
    """One route of a sequential slope design: its arms' tags and ``run(seeds)``, the
    readout rows of every arm and depth of the settings for those seeds (each run stored as it
    finishes)."""

    tags: tuple[str, ...]
    run: Callable[[Sequence[int]], Rows]


def sequential_routes(ctx: ClaimContext, routes: Mapping[str, RouteRuns],
                      bands: Mapping[str, Band], keys: Sequence[str], readout: str = "matched"
                      ) -> dict[str, tuple[list[int], Rows, SlopeReadouts]]:
    """Per route its seeds, rows and slopes (:func:`slope_readouts`) after the seed rounds of
    the settings (:func:`~depthscale.claims.nfd.training.seed_rounds`: ``seeds``, doubled up
    to ``max_seeds``): every route trains the first round, and a route trains the next round's
    new seeds while one of its banded slopes straddles a band edge at ``readout``
    (:func:`straddling`).
    Every interval is at 1 - 0.05/rounds (Bonferroni over the looks the design may take)."""
    s = ctx.settings
    rounds = seed_rounds(s)
    level = 1 - 0.05 / len(rounds)
    per_seed = {route: len(r.tags) * len(s["depths"]) for route, r in routes.items()}
    total = sum(per_seed.values()) * rounds[0]
    ctx.set_total(total)
    out: dict[str, tuple[list[int], Rows, SlopeReadouts]] = {}
    for route, r in routes.items():
        seeds = list(range(ctx.seed, ctx.seed + rounds[0]))
        rows = r.run(seeds)
        out[route] = seeds, rows, slope_readouts(rows, r.tags, keys, s["depths"], seeds,
                                                 s["steps"], level)
    for n in rounds[1:]:
        grow = [route for route, (_, _, read) in out.items() if straddling(read, bands, readout)]
        if not grow:
            break
        total += sum(per_seed[route] * (n - len(out[route][0])) for route in grow)
        ctx.set_total(total)
        for route in grow:
            seeds, rows, _ = out[route]
            new = list(range(ctx.seed + len(seeds), ctx.seed + n))
            rows = rows + routes[route].run(new)
            seeds = seeds + new
            out[route] = seeds, rows, slope_readouts(rows, routes[route].tags, keys,
                                                     s["depths"], seeds, s["steps"], level)
    return out


def routes_note(s: Mapping[str, Any], routes: Mapping[str, SlopeReadouts]) -> str:
    """What a slope verdict rests on: its routes, each one's seeds, and the intervals' level
    (Bonferroni over the settings' seed rounds)."""
    rounds = seed_rounds(s)
    seeds = ", ".join(
        f"{route} {len(next(iter(r.matched.values()))[r.readouts[-1]].per_seed)} seeds"
        for route, r in routes.items())
    level = next(iter(routes.values())).level
    text = (f"routes: {seeds}; intervals at {level:.1%}"
            + (f" (Bonferroni over {len(rounds)} seed rounds, {' -> '.join(map(str, rounds))}: "
               f"a route takes the next while one of its slopes straddles a band edge)"
               if len(rounds) > 1 else ""))
    if "handwritten" not in routes:
        text += ("; the handwritten second route runs where the settings set second_route "
                 "(medium, full): one route's contradiction is a FAIL")
    return text


def lift_contrast(routes: Mapping[str, SlopeReadouts], key: str, base: str,
                  corrected: str, readout: str = "matched") -> tuple[bool, str]:
    """The contrast of a two-route verdict: the sqrt(L) LR (the rule under test) lifts the
    ``key`` slope at ``readout`` (matched loss, or the last step) of the ``corrected`` arm
    above the ``base`` arm's in every route: the t-interval (at the readouts' level) of the
    per-seed differences (the arms share seeds: the same draws and data order) lies above 0.
    A check blind to the rule would not see it."""
    seen, parts = True, []
    for route, r in routes.items():
        a = _last(r, f"{key}_slope_{base}", readout).per_seed
        b = _last(r, f"{key}_slope_{corrected}", readout).per_seed
        mean, low, high = mean_ci([y - x for x, y in zip(a, b, strict=True)], r.level)
        seen = seen and math.isfinite(low) and low > 0
        parts.append(f"{route} {mean:+.3f} [{low:+.3f}, {high:+.3f}]")
    level = next(iter(routes.values())).level
    at = "matched loss" if readout == "matched" else "the last step"
    return seen, (f"the sqrt(L) LR lifts the {key} slope at {at} ({corrected} minus "
                  f"{base}, paired over seeds, {level:.1%} t; must lie above 0 in every "
                  f"route): " + ", ".join(parts))


def two_route_decision(routes: Mapping[str, SlopeReadouts], bands: Mapping[str, Band],
                       contrast: tuple[bool, str], readout: str = "matched",
                       sentences: Mapping[str, str] | None = None) -> Decision:
    """One verdict from every banded slope read along two routes, each route's finding by
    :func:`slope_findings` at ``readout``. Per slope: both support -> supports; one
    supports where the other contradicts -> conflict; both contradict -> refuted if their
    intervals at the last step's target overlap (the routes agree in value, not only in
    finding), else conflict; one contradicts, the other undecided -> a lone contradiction;
    else undecided. The claim: FAIL on any conflict (our code is suspected first); REFUTED
    when a slope is refuted and ``contrast`` is seen (the check sees the rule it tests; not
    seen: FAIL, the check may be blind); FAIL on a lone contradiction (docs/claims.md: one route
    is not a refutation); INCONCLUSIVE on any undecided slope; else PASS. A REFUTED reason
    opens with the paper's sentence each refuted slope contradicts (``sentences``, by slope:
    :func:`refuted_opening`)."""
    findings = {route: slope_findings(r, bands, readout) for route, r in routes.items()}
    parts: dict[str, tuple[str, str]] = {}
    for name in bands:
        said = [findings[route][name][0] for route in routes]
        cis = [_last(r, name, readout) for r in routes.values()]
        evidence = "; ".join(f"{route}: {findings[route][name][0]} "
                             f"({findings[route][name][1]})" for route in routes)
        if all(f == "supports" for f in said):
            kind = "supports"
        elif "supports" in said and "contradicts" in said:
            kind, evidence = "conflict", f"{evidence}; routes disagree in finding"
        elif all(f == "contradicts" for f in said):
            ends = [v for ci in cis for v in (ci.low, ci.high)]
            agree = (all(math.isfinite(v) for v in ends)
                     and max(ci.low for ci in cis) <= min(ci.high for ci in cis))
            kind = "refuted" if agree else "conflict"
            values = ", ".join(f"{route} {ci.text}"
                               for route, ci in zip(routes, cis, strict=True))
            where = "the last step's target" if readout == "matched" else "the last step"
            evidence += (f"; routes {'agree' if agree else 'disagree'} in value (the "
                         f"intervals at {where} must overlap: {values})")
        elif "contradicts" in said:
            kind = "lone contradiction"
        else:
            kind = "undecided"
        parts[name] = kind, evidence
    kinds = {kind for kind, _ in parts.values()}
    said_all = "; ".join(f"{name}: {kind} ({ev})" for name, (kind, ev) in parts.items()
                         if kind != "supports")
    contrast_text = f"contrast: {'seen' if contrast[0] else 'NOT seen'} ({contrast[1]})"
    if "conflict" in kinds:
        return "FAIL", f"{said_all}; {contrast_text}; routes disagree, our code is suspected first"
    if "refuted" in kinds:
        if contrast[0]:
            refuted = [name for name, (kind, _) in parts.items() if kind == "refuted"]
            return "REFUTED", (refuted_opening(refuted, sentences)
                               + f"{said_all}; {contrast_text}")
        return "FAIL", f"{said_all}; {contrast_text}; the check may be blind"
    if "lone contradiction" in kinds:
        return "FAIL", f"{said_all}; only one route contradicts"
    return ("INCONCLUSIVE" if "undecided" in kinds else "PASS"), said_all


def refuted_opening(refuted: Sequence[str], sentences: Mapping[str, str] | None) -> str:
    """A REFUTED reason's opening: "contradicts <the paper's sentence or equation>; " with
    the refuted slopes' sentences (each once; a slope's name where none is given)."""
    said = list(dict.fromkeys((sentences or {}).get(name, name) for name in refuted))
    return f"contradicts {'; and '.join(said)}; "


def slopes_decision(routes: Mapping[str, SlopeReadouts], bands: Mapping[str, Band],
                    key: str, base: str, corrected: str, readout: str = "matched",
                    sentences: Mapping[str, str] | None = None) -> Decision:
    """The verdict of banded slopes along their routes at ``readout``: with the library's
    alone, its findings (:func:`slope_findings`; a contradiction is a FAIL); with the
    handwritten route too, :func:`two_route_decision` (a REFUTED opening with ``sentences``),
    its contrast the ``key`` slope's lift from ``base`` to ``corrected``
    (:func:`lift_contrast`)."""
    if len(routes) == 1:
        return findings_verdict(slope_findings(routes["library"], bands, readout))
    return two_route_decision(routes, bands,
                              lift_contrast(routes, key, base, corrected, readout),
                              readout, sentences)


def handwritten_measured(hand: SlopeReadouts | None, depths: Sequence[int],
                         primary: str = "matched") -> dict[str, float | None]:
    """The handwritten route's slopes in ``measured``, each ``handwritten_<name>`` (none
    without that route)."""
    if hand is None:
        return {}
    return {f"handwritten_{k}": v for k, v in slope_readouts_measured(
        hand, depths, primary).items() if "_slope_" in k}


def route_rows(rows: Rows, hand_rows: Rows | None) -> Rows:
    """The claim's CSV rows: the library's, then the handwritten route's, each with its
    ``route``."""
    return ([{**r, "route": "library"} for r in rows]
            + [{**r, "route": "handwritten"} for r in hand_rows or []])


# ---- one SGD step's output change (nfd-collapse's diagnostic, nfd-transfer's one-step route)
def output_step(ctx: ClaimContext, data: Dataset, probe: torch.Tensor, recipe: str, L: int,
                seed: int, eta_c: float | None = None, optimizer: str = "sgd") -> float:
    """How far one ``optimizer`` step at ``eta_c`` (default: the settings' ``eta_c``) moves
    the whole net's output on ``probe``: the mean over inputs of |f_1(x) - f_0(x)|, the step
    drawn as the claim's runs draw their first. Under depth-muP each block's contribution to it is
    O(1/L) and it is flat in L; Eq. 8 moves each block's x_l by O(1) (nfd App. H.1), and
    through W_l,2 W_l,2^T / n ~ I those changes are aligned with the backward signal, so the L
    branches, each scaled 1/sqrt(L), add to O(sqrt(L)): deeper Eq. 8 nets train faster.
    (Measured, width 128, 3 seeds: the local slope rises 0.16, 0.24, 0.27, 0.42 over
    L = 4-16-64-256-1024 under Eq. 8; depth-muP stays within +-0.05 of flat.)"""
    s = ctx.settings
    net, plan = build("resnet2", recipe, input_shape=data.sample_shape, n_out=data.n_out,
                      width=s["width"], depth=L, seed=seed)
    on = probe.to(ctx.device)
    with torch.no_grad():
        before = net.to(ctx.device)(on).clone()
    lr = s["eta_c"] if eta_c is None else eta_c
    train(net, plan, data, TrainConfig(lr=lr, steps=1, seed=seed, device=ctx.device,
                                       optimizer=optimizer))
    with torch.no_grad():
        return float((net(on) - before).norm(dim=-1).mean())


def output_slopes(ctx: ClaimContext, data: Dataset, probe: torch.Tensor,
                  arms: Sequence[tuple[str, str]], seeds: Sequence[int],
                  eta_c: float | None = None, optimizer: str = "sgd") -> dict[str, SlopeCI]:
    """Per arm the per-seed log-log slope of :func:`output_step` (one ``optimizer`` step)
    against the settings' ``depths``, over seeds."""
    depths = ctx.settings["depths"]
    out = {}
    for tag, recipe in arms:
        per_seed = [loglog_slope(depths, [
            output_step(ctx, data, probe, recipe, L, seed, eta_c, optimizer) for L in depths
        ]).slope for seed in seeds]
        out[tag] = slope_ci(per_seed)
    return out

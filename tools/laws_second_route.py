"""A second route to a laws sweep's depth exponent alpha of eta* ~ L^alpha (laws Eq. 9) at
the end of each pass, and its seed-paired change between passes (laws-steepening), read from
the stored runs alone: it imports nothing from depthscale (stdlib, numpy, scipy).

Every study folder whose path starts with PREFIX is read (results.sqlite, read-only) and its
runs pooled by (depth, seed). eta* at pass p minimises the running training loss, the mean of
the first p x steps-per-pass losses: a parabola in log10 LR through the grid minimum and its
neighbours, or the grid minimum itself; an optimum at either end of the grid is left out.
alpha is each seed's OLS slope of log10 eta* on log10 L, with a t-interval over seeds (the
claims fit a WLS slope with moderated weights: a different estimator of the same slope).

    python tools/laws_second_route.py OUT/laws-cnn1d- --passes 1 2 3 --steps-per-pass 250
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import sqlite3
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from scipy import stats

Key = tuple[int, int]  # (depth, seed)


@dataclass
class Run:
    """One stored run reduced to what the reading needs."""

    lr: float
    status: str
    loss: list[float]


@dataclass
class Optimum:
    """eta* of one (depth, seed) at one pass."""

    log_lr: float
    edge: bool


def load_runs(prefix: str) -> tuple[dict[Key, dict[float, Run]], dict[str, int]]:
    """Pool the runs of all studies under prefix by (depth, seed), one run per LR."""
    pooled: dict[Key, dict[float, Run]] = defaultdict(dict)
    counts: dict[str, int] = defaultdict(int)
    paths = sorted(glob.glob(prefix + "*" + os.sep + "results.sqlite"))
    if not paths:
        raise SystemExit(f"no results.sqlite under {prefix}*")
    for path in paths:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = con.execute("SELECT status, spec, curve FROM runs").fetchall()
        finally:
            con.close()
        counts["studies"] += 1
        for status, spec_text, curve_text in rows:
            counts[f"rows_{status}"] += 1
            if status == "failed":
                continue
            spec = json.loads(spec_text)
            curve = json.loads(curve_text)
            key = (int(spec["depth"]), int(spec["seed"]))
            lr = float(spec["lr"])
            slot = round(math.log10(lr), 6)
            run = Run(lr=lr, status=str(status), loss=[float(x) for x in curve.get("loss", [])])
            if slot in pooled[key]:
                counts["duplicate_lr"] += 1
                old = pooled[key][slot]
                if old.status != run.status or old.loss != run.loss:
                    counts["duplicate_lr_differing"] += 1
                continue
            pooled[key][slot] = run
    return dict(pooled), dict(counts)


def criterion(run: Run, n_steps: int) -> float:
    """Mean training loss over the first n_steps steps; +inf if diverged or cut short."""
    if run.status != "done" or len(run.loss) < n_steps:
        return math.inf
    value = float(np.mean(run.loss[:n_steps]))
    return value if math.isfinite(value) else math.inf


def parabola_vertex(x: list[float], y: list[float]) -> float | None:
    """Vertex of the parabola through three points, or None if not convex or not finite."""
    if not all(math.isfinite(v) for v in y):
        return None
    a, b, _ = np.polyfit(np.asarray(x), np.asarray(y), 2)
    if a <= 0:
        return None
    return float(-b / (2.0 * a))


def optimum(runs: dict[float, Run], n_steps: int, refine: bool) -> Optimum | None:
    """eta* over the LRs of one (depth, seed); edge if the grid minimum is at a range end."""
    xs = sorted(runs)
    ys = [criterion(runs[x], n_steps) for x in xs]
    if not any(math.isfinite(v) for v in ys):
        return None
    i = int(np.argmin(ys))
    if i == 0 or i == len(xs) - 1:
        return Optimum(log_lr=xs[i], edge=True)
    best = xs[i]
    if refine:
        vertex = parabola_vertex(xs[i - 1 : i + 2], ys[i - 1 : i + 2])
        if vertex is not None:
            best = min(max(vertex, xs[i - 1]), xs[i + 1])
    return Optimum(log_lr=best, edge=False)


def ols_slope(x: list[float], y: list[float]) -> float:
    """OLS slope of y on x (nan with fewer than two points)."""
    if len(x) < 2:
        return math.nan
    return float(np.polyfit(np.asarray(x), np.asarray(y), 1)[0])


def t_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and 95% t-interval (n-1 dof) of values."""
    arr = np.asarray([v for v in values if math.isfinite(v)])
    mean = float(arr.mean())
    if arr.size < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf(0.975, arr.size - 1) * arr.std(ddof=1) / math.sqrt(arr.size))
    return mean, mean - half, mean + half


def optima_table(
    pooled: dict[Key, dict[float, Run]], passes: list[int], steps: int, refine: bool
) -> dict[int, dict[Key, Optimum | None]]:
    """eta* for every (depth, seed) at every pass."""
    return {
        p: {key: optimum(runs, steps * p, refine) for key, runs in pooled.items()} for p in passes
    }


def interior(table: dict[Key, Optimum | None], seed: int) -> dict[int, float]:
    """Depth -> log10 eta* of one seed's interior optima."""
    return {
        d: o.log_lr for (d, s), o in table.items() if s == seed and o is not None and not o.edge
    }


def seed_slope(points: dict[int, float], depths: set[int] | None = None) -> float:
    """Slope of log10 eta* on log10 L over the given depths (all if None)."""
    use = sorted(d for d in points if depths is None or d in depths)
    return ols_slope([math.log10(d) for d in use], [points[d] for d in use])


def fmt(ci: tuple[float, float, float]) -> str:
    """Format a mean with its interval."""
    return f"{ci[0]:+.3f} [{ci[1]:+.3f}, {ci[2]:+.3f}]"


def report(
    pooled: dict[Key, dict[float, Run]], passes: list[int], steps: int, refine: bool
) -> None:
    """Print per-pass alpha and the paired changes for one eta* variant."""
    table = optima_table(pooled, passes, steps, refine)
    seeds = sorted({s for _, s in pooled})
    depths = sorted({d for d, _ in pooled})
    name = "parabola vertex" if refine else "grid argmin"
    print(f"== eta* by {name}; {len(depths)} depths, seeds {seeds}")
    print(
        "pass steps  alpha mean-of-seeds [95% t]   seed-mean-depth  edge/total"
        "  per-seed slopes (n depths)"
    )
    for p in passes:
        per_seed = [interior(table[p], s) for s in seeds]
        slopes = [seed_slope(pts) for pts in per_seed]
        means = []
        for d in depths:
            vals = [pts[d] for pts in per_seed if d in pts]
            if vals:
                means.append((d, float(np.mean(vals))))
        pooled_slope = ols_slope([math.log10(d) for d, _ in means], [m for _, m in means])
        n_edge = sum(1 for o in table[p].values() if o is not None and o.edge)
        n_none = sum(1 for o in table[p].values() if o is None)
        pairs = zip(slopes, per_seed, strict=True)
        detail = " ".join(f"{sl:+.3f}({len(pts)})" for sl, pts in pairs)
        extra = f" none={n_none}" if n_none else ""
        print(
            f"{p:>4} {steps * p:>5}  {fmt(t_interval(slopes)):<28} {pooled_slope:+.3f}"
            f"           {n_edge:>2}/{len(table[p])}{extra}      {detail}"
        )
        edges = sorted(k for k, o in table[p].items() if o is not None and o.edge)
        if edges:
            print(f"           on the edge (depth, seed): {edges}")
    base = passes[0]
    for p in passes[1:]:
        diffs = []
        used = []
        for s in seeds:
            a, b = interior(table[base], s), interior(table[p], s)
            both = set(a) & set(b)
            diffs.append(seed_slope(b, both) - seed_slope(a, both))
            used.append(len(both))
        detail = " ".join(f"{x:+.3f}({n})" for x, n in zip(diffs, used, strict=True))
        print(f"change pass {base} -> {p}: {fmt(t_interval(diffs))}   per seed: {detail}")
    print()


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "prefix", help="study folder prefix, e.g. OUT/laws-cnn1d-"
    )
    parser.add_argument("--passes", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--steps-per-pass", type=int, default=250)
    args = parser.parse_args(argv)
    pooled, counts = load_runs(args.prefix)
    print("read:", ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    sizes = sorted({len(r) for r in pooled.values()})
    print(f"(depth, seed) cells: {len(pooled)}; distinct LRs per cell: {sizes}\n")
    for refine in (True, False):
        report(pooled, list(args.passes), int(args.steps_per_pass), refine)


if __name__ == "__main__":
    main()

"""laws-fig3b (laws Fig. 3(b), Sec. 4.3): on the ResNet, AM-muP's eta* ~ L^(-3/2) (Eq. 9)
follows the empirical optima while PathSum (Chen et al. 2024: eta* ~ (sum_p L_p^3)^(-1/2),
:mod:`.pathsum`) deviates increasingly with depth. Both rules are anchored at the shallowest
depth's measured optimum (zero-shot transfer) and compared with laws-table1's ResNet sweep
(the same study, trained once), eta* located as Table 1 locates it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from depthscale.claims.laws import settings
from depthscale.claims.laws.gates import reported
from depthscale.claims.laws.law import LawResult, judged_law
from depthscale.claims.laws.pathsum import log10_path_sum, resnet_layers
from depthscale.claims.laws.sequential import sweep_stages
from depthscale.claims.laws.settings import Arch
from depthscale.claims.laws.sweeps import (
    SweepSettings,
    chance_loss,
    effective_depth,
    study_costs,
)
from depthscale.claims.registry import ClaimContext, claim, read_settings
from depthscale.claims.verdicts import (
    ClaimOutcome,
    Finding,
    Judgement,
    RunPrice,
    conclude,
    deciding_run,
    findings_verdict,
    samples_to_decide,
    sign_finding,
)
from depthscale.errors import ConfigError
from depthscale.report import figures
from depthscale.stats.sweeps import edge_excluded

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Fig3b", "Fig3bSettings", "deviations", "draw_fig3b", "judge_fig3b",
           "laws_fig3b", "measure_fig3b"]

#: the PathSum sums the settings may name: every input-output path (Chen et al.'s rule), or
#: one path of the effective depth (the negative control: S = L^3, AM-muP's rule)
PATH_SUMS = ("all-paths", "one-path")
#: AM-muP's depth exponent (laws Eq. 9) and PathSum's exponent on its path sum
AM_EXPONENT, PS_EXPONENT = -1.5, -0.5


@dataclass(frozen=True, kw_only=True)
class Fig3bSettings(SweepSettings):
    """laws-fig3b's settings: the sweep budget (:class:`SweepSettings`, laws-table1's at each
    scale), the ResNet ``arch`` under laws-table1's key ``arch_key`` (study
    ``laws-<arch_key>``), ``family_parts`` (Table 1's, read by a sequential sweep's design),
    ``path_sum`` (:data:`PATH_SUMS`) and ``n_boot``, the seed bootstrap's resamples."""

    arch_key: str
    arch: Arch
    family_parts: int | None = None
    path_sum: str = "all-paths"
    n_boot: int = 2000

    def checked(self) -> Fig3bSettings:
        """These settings; ConfigError for a model without residual blocks, an unknown
        ``path_sum`` or fewer than 100 resamples."""
        if not str(self.arch.get("model", "")).startswith("convresnet"):
            raise ConfigError(f"laws-fig3b compares rules on a ResNet: arch model must be "
                              f"convresnet1d or convresnet2d, got {self.arch.get('model')!r}")
        if self.path_sum not in PATH_SUMS:
            raise ConfigError(f"path_sum must be one of {PATH_SUMS}, got {self.path_sum!r}")
        if self.n_boot < 100:
            raise ConfigError(f"n_boot must be >= 100 (bootstrap resamples), got {self.n_boot}")
        return self


@dataclass(frozen=True)
class Fig3b:
    """laws-fig3b's measurement: per block count K kept by Table 1's fit, the per-seed log10
    eta* (``logs``), AM-muP's depth L(K) (``am_depth``: the arch's effective depth), log10 of
    PathSum's sum_p L_p^3 (``log10_s``), L = m + K (``mk_depth``); the ResNet's layers
    (m, b), the judged law (alpha) and the block counts left out (gated or on the edge)."""

    logs: dict[int, tuple[float, ...]]
    am_depth: dict[int, int]
    log10_s: dict[int, float]
    mk_depth: dict[int, int]
    layers: tuple[int, int]
    law: LawResult | None = None
    left_out: tuple[int, ...] = ()


def measure_fig3b(ctx: ClaimContext, s: Fig3bSettings) -> Fig3b:
    """laws-table1's ResNet sweep (study ``laws-<arch_key>``, run or resumed), its law as
    Table 1 judges it (:func:`~depthscale.claims.laws.law.judged_law`), and per block count
    kept by that fit (not gated, edge optima out) the per-seed log10 eta*, AM-muP's L(K) and
    PathSum's log10 sum_p L_p^3 on the ResNet's (m, b) counted from the model as built."""
    arch = dict(s.arch)
    records, window = sweep_stages(ctx, f"laws-{s.arch_key}", arch)
    law = judged_law(s, arch, records, window, chance_loss(ctx, arch))
    grid = {effective_depth(arch, d): d for d in sorted({int(r["depth"]) for r in records})}
    kept, _ = edge_excluded([o for o in law.optima if o.depth not in law.gated])
    logs: dict[int, list[float]] = {}
    for o in kept:
        logs.setdefault(grid[o.depth], []).append(math.log10(o.lr))
    m, b = resnet_layers(arch)
    plain = {k: v for k, v in arch.items() if k != "fit_on"}
    ks = sorted(logs)
    return Fig3b({k: tuple(logs[k]) for k in ks},
                 {k: effective_depth(arch, k) for k in ks},
                 {k: log10_path_sum(k, m, b) for k in ks},
                 {k: effective_depth(plain, k) for k in ks}, (m, b), law,
                 tuple(sorted(set(grid.values()) - set(ks))))


def rule_log10(m: Fig3b, rule: str, path_sum: str = "all-paths") -> dict[int, float]:
    """log10 of a rule's eta(K) up to its constant: AM-muP ("am") -1.5 log10 L(K), on L = m +
    K ("am-mk"), PathSum ("ps") -0.5 log10 sum_p L_p^3; PathSum over one path of length L
    (``path_sum`` "one-path") is S = L^3, AM-muP's rule, computed as AM-muP's is."""
    if rule == "ps" and path_sum == "all-paths":
        return {k: PS_EXPONENT * v for k, v in m.log10_s.items()}
    depth = m.mk_depth if rule == "am-mk" else m.am_depth
    return {k: AM_EXPONENT * math.log10(v) for k, v in depth.items()}


def deviations(means: np.ndarray, rule: np.ndarray) -> np.ndarray:
    """d(K) = log10 eta*(K) - log10 eta_rule(K) with eta_rule anchored at the shallowest
    depth's optimum: (mean_K - mean_K0) - (rule_K - rule_K0), along the last axis."""
    d: np.ndarray = (means - means[..., :1]) - (rule - rule[0])
    return d


def _growth(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The least-squares slope of each row of ``y`` on ``x`` (NaN below 2 points)."""
    if len(x) < 2:
        return np.full(y.shape[:-1], math.nan)
    dx = x - x.mean()
    slope: np.ndarray = (y * dx).sum(axis=-1) / (dx**2).sum()
    return slope


def _interval(values: np.ndarray) -> tuple[float, float]:
    low, high = np.percentile(values, [2.5, 97.5])
    return float(low), float(high)


def _resampled(logs: Mapping[int, tuple[float, ...]], n_boot: int, seed: int) -> np.ndarray:
    """Seed bootstrap of the per-depth mean log10 eta* (n_boot x depths), seeds resampled
    with replacement at each depth, as :func:`~depthscale.stats.sweeps.bootstrap_slope`."""
    rng = np.random.default_rng(seed)
    out = np.empty((n_boot, len(logs)))
    for j, values in enumerate(logs.values()):
        v = np.asarray(values)
        out[:, j] = v[rng.integers(0, len(v), size=(n_boot, len(v)))].mean(axis=1)
    return out


def judge_fig3b(m: Fig3b, s: Fig3bSettings, seed: int = 0,
                price: RunPrice | None = None) -> Judgement:
    """PASS if PathSum's |d| at the deepest depth exceeds AM-muP's (the difference's seed
    bootstrap interval above 0) and PathSum's |d| grows with depth (the interval of its
    least-squares slope on log10 K, over the depths past the anchor, above 0); FAIL if either
    interval lies at or below 0 (:func:`~depthscale.stats.findings.sign_finding`); else
    INCONCLUSIVE, naming the seeds that would decide it. Intervals need 2+ seeds at every depth
    (2+ depths; growth 3+); AM-muP's d, on L = K and on L = m + K, and alpha reported beside.
    Where both rules' d keep one sign in every resample, the difference of |d| is the gap
    between the two predictions, free of seed noise: its interval has zero width."""
    ks = list(m.logs)
    means = np.array([float(np.mean(v)) for v in m.logs.values()])
    rules = {r: np.array([rule_log10(m, r, s.path_sum)[k] for k in ks])
             for r in ("am", "am-mk", "ps")}
    enough = len(ks) >= 2 and min(len(v) for v in m.logs.values()) >= 2
    boot = _resampled(m.logs, s.n_boot, seed) if enough else np.full((1, len(ks)), math.nan)
    stats = dict.fromkeys(("excess_deepest", "ps_growth", "am_growth"),
                          (math.nan, math.nan, math.nan))
    if ks:
        x = np.log10(np.array(ks[1:], dtype=float))
        for r, rule in rules.items():
            d, db = deviations(means, rule), deviations(boot, rule)
            for j, k in enumerate(ks):
                stats[f"d_{r}_K{k}"] = (float(d[j]), *_interval(db[:, j]))
        ps, am = np.abs(deviations(means, rules["ps"])), np.abs(deviations(means, rules["am"]))
        bps, bam = np.abs(deviations(boot, rules["ps"])), np.abs(deviations(boot, rules["am"]))
        stats["excess_deepest"] = (float(ps[-1] - am[-1]), *_interval(bps[:, -1] - bam[:, -1]))
        stats["ps_growth"] = (float(_growth(x, ps[1:])), *_interval(_growth(x, bps[:, 1:])))
        stats["am_growth"] = (float(_growth(x, am[1:])), *_interval(_growth(x, bam[:, 1:])))
    checks = _checks(stats, ks)
    decision = findings_verdict(checks)
    if decision[0] == "INCONCLUSIVE":
        decision = ("INCONCLUSIVE", "; ".join(
            t for t in (_deciding(stats, m, price), decision[1]) if t))
    return Judgement(_measured(m, stats), decision=decision, note=_note(m, stats, ks))


def _checks(stats: Mapping[str, tuple[float, float, float]],
            ks: list[int]) -> dict[str, tuple[Finding, str]]:
    """The two findings the verdict reads, each with its evidence."""
    nan = (math.nan, math.nan, math.nan)
    out: dict[str, tuple[Finding, str]] = {}
    for key, what, fewest in (("excess_deepest", f"PathSum's |d| exceeds AM-muP's at K = "
                                                 f"{ks[-1] if ks else 'none'}", 2),
                              ("ps_growth", "PathSum's |d| grows with depth", 3)):
        est, low, high = stats.get(key, nan)
        out[what] = (sign_finding(low, high, +1),
                     f"{est:.3g} decades [{low:.3g}, {high:.3g}]" if len(ks) >= fewest else
                     f"fewer than {fewest} block counts locate eta* ({len(ks)})")
    return out


def _deciding(stats: Mapping[str, tuple[float, float, float]], m: Fig3b,
              price: RunPrice | None) -> str:
    """The run that decides an INCONCLUSIVE verdict: the seeds the worse-placed of the two
    undecided intervals needs to clear 0 (:func:`samples_to_decide`), or longer training."""
    seeds = min((len(v) for v in m.logs.values()), default=0)
    needs = []
    for key in ("excess_deepest", "ps_growth"):
        est, low, high = stats.get(key, (math.nan,) * 3)
        if seeds >= 2 and all(map(math.isfinite, (est, low, high))) and low <= 0 < high:
            needs.append((key, samples_to_decide(est, low, high, (0.0, None), seeds)))
    if not needs:
        larger = price.larger() if price is not None else None
        why = "too few block counts with 2+ seeds locate eta* (2 for the excess, 3 for growth)"
        if larger is None:
            return why
        return f"{why}: " + deciding_run("longer training, the next scale's settings",
                                          larger[1], price, label=f"--scale {larger[0]}")
    key, worst = max(needs, key=lambda kn: kn[1].needed or math.inf)
    if worst.needed is None:
        return f"{key}: {worst.said()}"
    return f"{key} needs {worst.said()}; " + deciding_run(
        f"{worst.needed} seeds per study", {"seeds": worst.needed}, price,
        factor=worst.needed / seeds)


def _measured(m: Fig3b, stats: Mapping[str, tuple[float, float, float]]
              ) -> dict[str, float | None]:
    """The reported values: every statistic with its interval, alpha with its, the anchor."""
    out: dict[str, float] = {}
    for key, (est, low, high) in stats.items():
        out[key], out[f"{key}_low"], out[f"{key}_high"] = est, low, high
    if m.law is not None:
        out["alpha"] = m.law.fit.slope
        out["alpha_low"], out["alpha_high"] = m.law.interval
    ks = list(m.logs)
    out["anchor_K"] = float(ks[0]) if ks else math.nan
    out["deepest_K"] = float(ks[-1]) if ks else math.nan
    for r in ("am", "am-mk", "ps"):
        name = r.replace("-", "_")
        est, low, high = stats.get(f"d_{r}_K{ks[-1]}", (math.nan,) * 3) if ks else (math.nan,) * 3
        out[f"d_{name}_deepest"], out[f"d_{name}_deepest_low"] = est, low
        out[f"d_{name}_deepest_high"] = high
    return reported(out)


def _note(m: Fig3b, stats: Mapping[str, tuple[float, float, float]], ks: list[int]) -> str:
    """AM-muP's own deviation and alpha beside the verdict's two statistics."""
    if not ks:
        return "no block count locates eta*"
    said = [f"anchor K0 = {ks[0]}; ResNet m = {m.layers[0]}, b = {m.layers[1]}, identity skips"]
    for r, what in (("ps", "PathSum"), ("am", "AM-muP on L = K (Sec. 4.3)"),
                    ("am-mk", "AM-muP on L = m + K (Sec. 3.4)")):
        est, low, high = stats[f"d_{r}_K{ks[-1]}"]
        said.append(f"{what} d(K = {ks[-1]}) = {est:.3g} [{low:.3g}, {high:.3g}] decades")
    if m.law is not None:
        lo, hi = m.law.interval
        said.append(f"alpha {m.law.fit.slope:.3g} [{lo:.3g}, {hi:.3g}] (paper -1.435)")
    if m.left_out:
        said.append(f"left out (gated or optima on the grid's edge): K = {list(m.left_out)}")
    return "; ".join(said)


def fig3b_rows(m: Fig3b, j: Judgement) -> list[dict[str, Any]]:
    """One CSV row per block count: its optima's mean log10 eta*, the rules' anchored
    predictions and the deviations with their intervals."""
    rows = []
    ks = list(m.logs)
    for k in ks:
        row: dict[str, Any] = {"K": k, "L_am": m.am_depth[k], "L_mk": m.mk_depth[k],
                               "log10_path_sum": m.log10_s[k], "seeds": len(m.logs[k]),
                               "mean_log10_eta": float(np.mean(m.logs[k]))}
        for r in ("am", "am-mk", "ps"):
            name = r.replace("-", "_")
            est = j.measured.get(f"d_{r}_K{k}")
            row[f"log10_eta_{name}"] = (None if est is None else row["mean_log10_eta"] - est)
            row[f"d_{name}"] = est
            row[f"d_{name}_low"] = j.measured.get(f"d_{r}_K{k}_low")
            row[f"d_{name}_high"] = j.measured.get(f"d_{r}_K{k}_high")
        rows.append(row)
    return rows


def draw_fig3b(m: Fig3b, s: Fig3bSettings) -> Figure:
    """eta* (mean over seeds, 95% range of the seeds' optima) against K, log-log, with
    AM-muP's and PathSum's curves anchored at the shallowest K (PathSum at every integer K)."""
    fig, axes = figures.new_figure(width=4.6)
    ax = axes[0]
    ks = list(m.logs)
    if ks:
        means = np.array([float(np.mean(v)) for v in m.logs.values()])
        lo = [means[i] - min(v) for i, v in enumerate(m.logs.values())]
        hi = [max(v) - means[i] for i, v in enumerate(m.logs.values())]
        ax.errorbar(ks, 10**means, yerr=[10**means - 10 ** (means - lo),
                                          10 ** (means + hi) - 10**means],
                    fmt="o", label="eta* (seeds' range)")
        dense = list(range(ks[0], ks[-1] + 1))
        k0, b = ks[0], m.layers
        ps = [PS_EXPONENT * (log10_path_sum(k, *b) - log10_path_sum(k0, *b)) for k in dense]
        if s.path_sum == "one-path":
            ps = [AM_EXPONENT * math.log10(k / k0) for k in dense]
        shift = m.am_depth[k0] - k0  # L(K) = K + shift: 0 on blocks, m on m + K
        am = [AM_EXPONENT * math.log10((k + shift) / (k0 + shift)) for k in dense]
        ax.plot(dense, 10 ** (means[0] + np.array(am)), "--", label="AM-muP L^(-3/2)")
        ax.plot(dense, 10 ** (means[0] + np.array(ps)), ":",
                label=f"PathSum ({s.path_sum})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        figures.label_log_ticks(ax, ks)
    ax.set_xlabel("residual blocks K")
    ax.set_ylabel("eta*")
    ax.set_title("laws Fig. 3(b): ResNet", fontsize=9)
    ax.legend(fontsize=6)
    return fig


def fig3b_cost(settings_: Mapping[str, Any], device: str) -> list[dict[str, Any]]:
    """laws-table1's ResNet study at its first stage (shared with laws-table1)."""
    s = read_settings(Fig3bSettings, settings_)
    return study_costs(s, {s.arch_key: s.arch}, device)


@claim(
    "laws-fig3b", "laws",
    "On the ResNet, AM-muP's L^(-3/2) follows eta* while PathSum deviates increasingly",
    **settings.FIG3B,
    cost=fig3b_cost,
    headline=dict(
        metric="excess_deepest",
        ci=("{metric}_low", "{metric}_high"),
        label="PathSum's |deviation| minus AM-muP's at the deepest K (decades)",
        paper="alpha = -1.435; PathSum deviates increasingly",
        ref="Fig. 3(b), Sec. 4.3",
        statement="As shown in Fig. 3(b), the optimal learning rate follows a clear power law "
                  "with alpha = -1.435 on CIFAR-10, closely matching our theoretical prediction "
                  "of -1.5 and confirming that residual connections do not alter the depth "
                  "exponent. In contrast, PathSum (Chen et al., 2024) shows increasing "
                  "deviation from empirical optima at larger depths (Sec. 4.3, Fig. 3(b)).",
        criterion="PASS iff PathSum's |d| - AM-muP's at the deepest K and the slope of "
                  "PathSum's |d| on log10 K both have intervals above 0",
    ),
)
def laws_fig3b(ctx: ClaimContext) -> ClaimOutcome:
    """laws Fig. 3(b): eta*(K) from laws-table1's ResNet sweep; AM-muP's eta*(K0) (L/L0)^(-3/2)
    (Eq. 9; L = K, the blocks, as Sec. 4.3 defines Fig. 3's depth) and PathSum's eta*(K0)
    (S(K)/S(K0))^(-1/2), S = sum_p L_p^3; deviations d = log10 eta* - log10 eta_rule.

    Verdict, fixed before running: PASS if PathSum's |d| at the deepest K exceeds AM-muP's
    (seed-bootstrap interval of the difference above 0) AND PathSum's |d| grows with depth
    (interval of its slope on log10 K above 0); FAIL if either interval lies at or below 0;
    INCONCLUSIVE otherwise, naming the deciding run. AM-muP's d and alpha reported beside."""
    s = read_settings(Fig3bSettings, ctx.settings).checked()
    m = measure_fig3b(ctx, s)
    j = judge_fig3b(m, s, ctx.seed, RunPrice.of(ctx, "laws-fig3b", ctx.spent_seconds))
    fig = draw_fig3b(m, s)
    rows = fig3b_rows(m, j)
    return conclude(ctx, "laws-fig3b", j, rows, fig)

"""Mutation checks: does each rule the claims test have a test that sees it?

    python tools/mutate.py [--jobs 2] [--only NAME ...] [--list] [--no-baseline]

Each row of :data:`MUTATIONS` is a one-line change of a rule (a paper's equation as the code
writes it): the file under ``src/depthscale``, the exact text (which must occur there exactly
once), its replacement, what it breaks, and the fast tests expected to catch it. For each, the
repository's ``src`` is copied to a temporary folder, the change applied there (the working tree
is never edited), and its tests run by pytest in a subprocess with ``PYTHONPATH`` pointing at
the mutated copy: caught if a test fails (the run stops there), survived if all pass. First
the same tests run on an unmutated copy and must pass (``--no-baseline`` skips that where a
full test run follows, as in CI), and that copy must be the package the tests import. Prints a
Markdown table (mutation, what it breaks, file, caught by, result, seconds) and exits non-zero
if any mutation survives or a run errs (``make mutate``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    """One one-line change of a rule: ``old`` (exactly once in ``file``, relative to
    ``src/depthscale``) becomes ``new``; ``tests`` are pytest node ids expected to fail."""

    name: str
    file: str
    old: str
    new: str
    breaks: str
    tests: tuple[str, ...]


MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        "transfer-sign", "claims/laws/transfer.py",
        "transfer_exponent: float = -1.5",
        "transfer_exponent: float = 1.5",
        "laws Table 5 rule (L/L0)^(-3/2) flipped to (L/L0)^(+3/2) in the claim's default",
        ("tests/claims/test_laws_transfer.py::"
         "test_default_rule_predicts_exact_minus_three_halves_optima_exactly",)),
    Mutation(
        "ammup-sum", "probes/ammup.py",
        "return sum(self.per_unit) / len(self.per_unit)",
        "return sum(self.per_unit)",
        "laws Eq. 9 S_bar = eta^2 mean_l A_l summed instead of averaged over depth units",
        ("tests/probes/test_ammup.py::test_eta_star_averages_the_energy_over_depth_units_eq9",
         "tests/probes/test_ammup.py::"
         "test_eta_star_of_a_real_net_is_the_mean_of_its_measured_unit_energies")),
    Mutation(
        "decoupled-is-fa", "models/layers.py",
        "return self.weight_back_init + (self.weight.detach() - self.weight_init)",
        "return self.weight_back_init",
        "nfd Cor. 1 backward W~_0 + (W - W_0) made feedback alignment W~_0",
        ("tests/models/test_mlp_models.py::"
         "test_decoupled_input_gradient_after_sgd_steps_is_w_back0_plus_the_learned_update",
         "tests/models/test_mlp_models.py::"
         "test_online_decoupled_run_departs_from_feedback_alignment_after_its_first_update",
         "tests/claims/test_nfd_refuted_checks.py::"
         "test_cor1_refuted_sees_the_decoupled_backward_a_falling_gap_and_agreeing_routes")),
    Mutation(
        "depth-mup-no-sqrt-L", "param/rules.py",
        '_DEPTH_A = _e("sqrt(T/(L fan_in))")',
        '_DEPTH_A = _e("sqrt(T/fan_in)")',
        "nfd Eq. 1 depth-muP branch multiplier sqrt(T/(L n)) without its 1/sqrt(L)",
        ("tests/param/test_recipes.py::test_depth_mup_multipliers_are_nfd_eq1",
         "tests/models/test_mlp_models.py::test_pre_act_forward_is_eq1_by_hand")),
    Mutation(
        "eq8-no-sqrt-L", "param/rules.py",
        '_e("n sqrt(L)"),',
        '_e("n"),',
        "nfd Eq. 8 first-layer LR eta_1 = eta_c n sqrt(L) without its sqrt(L)",
        ("tests/param/test_recipes.py::test_nfd_depth_first_internal_layer_lr_is_eq8",
         "tests/param/test_recipes.py::test_optimizer_groups_carry_per_role_lrs")),
    Mutation(
        "mup-readout-1/sqrt(n)", "param/rules.py",
        '_mf_output = Rule(\n    _e("alpha/sqrt(n)"),',
        '_mf_output = Rule(\n    _e("alpha"),',
        "nfd Eq. 1 readout alpha/sqrt(n) (1/n under muP) made alpha (1/sqrt(n))",
        ("tests/param/test_recipes.py::test_depth_mup_multipliers_are_nfd_eq1",
         "tests/param/test_recipes.py::test_depth_mup_kernel_regime_output_is_alpha_one")),
    Mutation(
        "laws-no-K^-1/2", "param/rules.py",
        '_e("1/sqrt(q K fan_in)"),',
        '_e("1/sqrt(q fan_in)"),',
        "laws Eq. 5 residual-branch init without its K^(-1/2)",
        ("tests/param/test_recipes.py::test_laws_init_is_he_fan_in_with_residual_k_scaling",
         "tests/models/test_cnn.py::test_laws_init_variances_match_fan_in_rules_for_relu")),
    Mutation(
        "laws-fit-sign", "stats/fits.py",
        "slope = float(beta[1])",
        "slope = -float(beta[1])",
        "laws Sec. 4.1 WLS fit of log10 eta* on log10 L with its slope's sign flipped",
        ("tests/stats/test_sweeps.py::test_wls_recovers_an_exact_power_law",
         "tests/claims/test_laws_verdicts.py::test_law_refits_the_first_half_of_every_run")),
    Mutation(
        "nngp-relu-drift", "limits/kernel.py",
        "(s - theta * rho) / (2.0 * math.pi)",
        "(s + (math.pi - theta) * rho) / (2.0 * math.pi)",
        "nfd Prop. 3 kernel ODE (ReLU flow) without the -rho/2 of the variances' growth",
        ("tests/limits/test_limits_kernel.py::"
         "test_relu_flow_map_matches_pair_by_pair_ode_to_1e10[1.0]",)),
    Mutation(
        "sde-diffusion-dt", "limits/sde/forward.py",
        "factors[step] = psd_factor(K) * math.sqrt(dt)",
        "factors[step] = psd_factor(K) * dt",
        "nfd Prop. 2 SDE increment sigma_t dw scaled by dt instead of sqrt(dt)",
        ("tests/limits/test_limits_sde.py::"
         "test_forward_single_input_relu_variance_grows_like_exp_half_t",)),
    Mutation(
        "mean-ode-sum", "limits/mean_ode/solver.py",
        "slope: Array = (c[0] @ Vt.T) / Vt.shape[1]",
        "slope: Array = c[0] @ Vt.T",
        "chizat Eq. 10 drift E[V rho(U^T h/D)] summed over particles, not averaged",
        ("tests/limits/test_limits_mean_ode.py::"
         "test_euler_with_per_layer_particles_reproduces_the_finite_resnet_trajectory",
         "tests/limits/test_limits_mean_ode.py::"
         "test_first_forward_pass_of_the_limit_equals_the_finite_nets_in_expectation")),
    Mutation(
        "chizat-1/L", "param/rules.py",
        '_e("1/(L M)"),',
        '_e("1/L"),',
        "chizat Eq. 24 residual scale 1/(L M) without its 1/M",
        ("tests/param/test_recipes.py::test_mean_ode_rules_are_chizat_eq24_25",
         "tests/limits/test_limits_mean_ode.py::"
         "test_finite_resnet_one_gd_step_matches_eq_25_computed_by_hand")),
    Mutation(
        "laws-raw-weights", "stats/sweeps.py",
        "moderated = (PRIOR_DOF * prior + d * var) / (PRIOR_DOF + d)",
        "moderated = var",
        "laws Sec. 4.1 weights 1/SEM^2 from each depth's raw 2-3-seed variance, not moderated",
        ("tests/stats/test_sweeps.py::test_moderated_sems_by_hand",
         "tests/claims/test_laws_verdicts.py::"
         "test_laws_widths_quick_part_is_undecided_on_both_arms_of_the_perturbation_check")),
    Mutation(
        "laws-parts-at-95", "claims/laws/gates.py",
        "flo, fhi = law.family_interval(parts)",
        "flo, fhi = law.interval",
        "a laws claim's 'any part contradicts' read at 95% per part, not 1 - 0.05/parts",
        ("tests/claims/test_laws_verdicts.py::"
         "test_a_contradiction_is_read_family_wise_over_the_claims_parts",)),
    Mutation(
        "laws-design-scatter-ignored", "claims/laws/sequential.py",
        "if (1 - floor) * left + floor < need:",
        "if left < need:",
        "the sequential design promises that seeds decide a part whose depths scatter about "
        "the line beyond their seed noise (which seeds leave)",
        ("tests/claims/test_laws_sequential.py::"
         "test_lack_of_fit_is_the_scatter_beyond_seed_noise",)),
    Mutation(
        "laws-added-depths-no-dof", "claims/laws/sequential.py",
        "return math.sqrt(var) * float(stats.t.ppf(1 - tail, len(x) - 2))",
        "return math.sqrt(var) * float(stats.t.ppf(1 - tail, len(x0) - 2))",
        "the depths the design adds to a part its depths' scatter blocks, chosen as if an added "
        "depth brought no degree of freedom to the t quantile",
        ("tests/claims/test_laws_sequential.py::"
         "test_added_depths_are_the_fewest_that_clear_the_edge_at_the_same_scatter",)),
    Mutation(
        "pathsum-square", "claims/laws/pathsum.py",
        "* (outside + branch * j + skip * (blocks - j)) ** 3",
        "* (outside + branch * j + skip * (blocks - j)) ** 2",
        "PathSum's sum_p L_p^3 (Chen et al. 2024, laws Fig. 3(b)) summed as L_p^2",
        ("tests/claims/test_laws_fig3b.py::test_path_sum_equals_every_path_enumerated",)),
    Mutation(
        "prop6-backward-gia", "limits/sde/coupling.py",
        "out: np.ndarray = p * (float(z @ g) / math.sqrt(pp)) + fresh - p * (float(p @ fresh) "
        "/ pp)",
        "out: np.ndarray = fresh",
        "nfd Prop. 6 coupling: W_l^T g_l drawn independent of W_l's forward product (the GIA "
        "assumed, the correlation the coupling measures dropped)",
        ("tests/limits/test_limits_sde.py::"
         "test_transposed_product_given_the_forward_one_has_the_explicit_weights_law",)),
    Mutation(
        "joint-contrast-1x-noise", "claims/beyond/joint_limit.py",
        "return math.isfinite(value) and math.isfinite(noise) and value > 3 * noise",
        "return math.isfinite(value) and math.isfinite(noise) and value > noise",
        "beyond-joint-limit's contrast: the decoupled nets' gap at the smallest size called "
        "resolved at 1x its noise, not 3x (a noise-sized gap taken for convergence, and a "
        "refutation granted on it)",
        ("tests/claims/test_beyond.py::"
         "test_joint_limit_without_its_contrast_fails_and_says_how_many_pairs_would_resolve_it",)),
    Mutation(
        "transfer-values-always-agree", "claims/nfd/optima.py",
        "ok = bool(np.isfinite([lo_s, hi_s, lo_p, hi_p]).all() and lo_s <= hi_p and lo_p <= hi_s)",
        "ok = True",
        "nfd-transfer's two routes taken to agree in value whatever their spreads (a refutation "
        "granted on routes that agree only in sign)",
        ("tests/claims/test_nfd_transfer_verdict.py::"
         "test_routes_that_disagree_in_value_or_a_lone_route_do_not_refute",)),
    Mutation(
        "one-step-ignores-optimizer", "claims/nfd/slopes.py",
        "train(net, plan, data, TrainConfig(lr=lr, steps=1, seed=seed, device=ctx.device,\n"
        "                                       optimizer=optimizer))",
        "train(net, plan, data, TrainConfig(lr=lr, steps=1, seed=seed, device=ctx.device))",
        "the one-step route takes an SGD step whatever the claim's optimizer (beyond-adam's "
        "Adam route would predict from the wrong step)",
        ("tests/claims/test_nfd_collapse.py::"
         "test_one_adam_step_moves_the_output_linearly_in_eta_c",)),
    Mutation(
        "handwritten-eq8-no-sqrt-L", "claims/nfd/handwritten.py",
        "layers = [base * math.sqrt(L) if j in sqrt_L_layers else base for j in range(1, k + 1)]",
        "layers = [base for j in range(1, k + 1)]",
        "the handwritten second route's Eq. 8 LR eta_1 = eta_c n sqrt(L) without its sqrt(L) "
        "(its Eq. 8 arm would be depth-muP again)",
        ("tests/claims/test_handwritten.py::"
         "test_one_sgd_step_uses_eta_c_n_and_sqrt_L_on_listed_layers",)),
    Mutation(
        "collapse-values-always-agree", "claims/nfd/slopes.py",
        "and max(ci.low for ci in cis) <= min(ci.high for ci in cis))",
        "or True)",
        "nfd-collapse's and beyond-3layer's two routes taken to agree in value whatever their "
        "slopes (a refutation granted on routes that agree only in finding)",
        ("tests/claims/test_nfd_collapse.py::"
         "test_two_routes_refute_a_slope_only_when_they_agree_in_value_and_see_the_rule",)),
    Mutation(
        "reading-decides-claim", "claims/nfd/parts.py",
        "stated = {k: p for k, p in parts.items() if p.stated}",
        "stated = dict(parts)",
        "a part that is our reading (nfd-collapse's stream under Eq. 8, nfd-transfer's spreads' "
        "difference) decides the claim as if the paper stated it (the old REFUTED)",
        ("tests/claims/test_nfd_parts.py::"
         "test_the_stream_under_eq8_is_a_finding_that_cannot_refute_the_claim",)),
    Mutation(
        "transfer-below-grid-passes", "claims/nfd/optima.py",
        'if findings == {"supports"} and shown:',
        'if findings == {"supports"}:',
        "nfd-transfer's Eq. 8 arm PASSes on a drift below the paper's grid step where the grid "
        "does not show depth-muP's drift either (a contrast the grid cannot see taken as seen)",
        ("tests/claims/test_nfd_parts.py::"
         "test_a_drift_below_the_paper_grid_cannot_decide_and_names_the_depths_that_would",)),
    Mutation(
        "fig2-b-over-sqrt-D", "claims/chizat/output_error.py",
        "return (law.a, *law.a_ci), (law.b, *law.b_ci)",
        "return (law.a, *law.a_ci), tuple(v / s.D ** 0.5 for v in (law.b, *law.b_ci))",
        "chizat Fig. 2's b banded as b/sqrt(D) (the old false PASS), not as the coefficient of "
        "1/sqrt(LM) the caption writes at D = 10",
        ("tests/claims/test_chizat_verdicts.py::"
         "test_fig2_b_is_the_coefficient_of_one_over_sqrt_lm_at_the_papers_d",
         "tests/claims/test_chizat_verdicts.py::"
         "test_fig2_b_of_0_6_fails_though_its_b_over_sqrt_d_lies_in_the_band")),
    Mutation(
        "thm4-exponent-floor", "claims/chizat/d_error.py",
        'BANDS: dict[str, Band] = {"D_exponent": (None, 0.5 + MARGIN)}',
        'BANDS: dict[str, Band] = {"D_exponent": (0.5 + MARGIN, None)}',
        "chizat Eq. 29's exponent of D read the wrong way: at least 1/2 + margin (sigma_v = D's "
        "growth passes) instead of at most",
        ("tests/claims/test_chizat_thm4.py::"
         "test_judge_on_constructed_intervals_inside_above_and_straddling_the_edge",)),
    Mutation(
        "transfer-exponent-half", "claims/laws/transfer.py",
        "transfer_exponent: float = -1.5",
        "transfer_exponent: float = -0.5",
        "laws Table 5 rule (L/L0)^(-3/2) made (L/L0)^(-1/2): still beats raw transfer (the old "
        "check passed it), but misses the oracle by more than half Table 5's raw error",
        ("tests/claims/test_laws_transfer.py::test_table5_optima_pass_by_the_default_rule",)),
    Mutation(
        "transfer-loss-raw-vs-raw", "claims/laws/transfer_loss.py",
        "tuple(by_lr[eta_sc][i] for i in seeds),",
        "tuple(by_lr[eta_raw][i] for i in seeds),",
        "laws App. E.4 loss test (loss at eta_sc lower than at eta_raw) reading the raw arm's "
        "runs as the scaled arm's: every paired difference 0, the finding cannot support",
        ("tests/claims/test_laws_transfer.py::"
         "test_table5_losses_give_a_negative_median_paired_difference",)),
    Mutation(
        "fig4-gap-grows", "claims/nfd/fig4.py",
        "sign_finding(low, high, -1),",
        "sign_finding(low, high, +1),",
        "nfd Fig. 4(c) read the wrong way: standard and decoupled trajectories drifting apart "
        "with depth would pass",
        ("tests/claims/test_nfd_fig4.py::"
         "test_gaps_falling_with_depth_pass_with_the_seeds_t_interval_by_hand",)),
    Mutation(
        "directions-variant-vs-itself", "claims/laws/directions.py",
        "laws[d.variant if s.against_itself else d.baseline]",
        "laws[d.variant]",
        "laws Sec. 4.5 directions read with each variant as its own baseline: every change is "
        "0, so no stated direction can be seen",
        ("tests/claims/test_laws_directions.py::"
         "test_table3_alphas_move_as_the_paper_says_and_pass",)),
    Mutation(
        "widths-spread-unjudged", "claims/laws/widths.py",
        'if finding == "contradicts":',
        'if finding == "never":',
        "laws Table 4 spread of alpha over widths and epochs back to reported, not judged (the "
        "old check): one width's alpha scaled 1.5x, still in the law band, passes",
        ("tests/claims/test_laws_widths.py::"
         "test_one_width_alpha_scaled_passes_the_law_band_but_fails_the_spread",
         "tests/claims/test_laws_widths.py::test_spread_band_edge")),
    Mutation(
        "kernel-flow-drift-doubled", "limits/kernel.py",
        "(s - theta * rho) / (2.0 * math.pi)",
        "(s - theta * rho) / math.pi",
        "nfd Prop. 3 ReLU correlation flow's drift doubled: C_t' - C_t stays PSD (the old "
        "Prop. 5 check passed it), but is no longer the covariance ODE's gap",
        ("tests/claims/test_nfd_prop4_5.py::test_smoke_gaps_are_the_ode_routes_to_rounding",)),
    Mutation(
        "nngp-readout-heavy-tail", "param/draw.py",
        "p.copy_(draw(spec.init, tuple(p.shape), std, gen).to(p))",
        "p.copy_((draw(spec.init, tuple(p.shape), std, gen) * (torch.randn(tuple(p.shape), "
        "generator=gen) if spec.role == 'output' else 1)).to(p))",
        "nfd Eq. 1 read-out v ~ N(0, 1) drawn as a product of two normals: the same variance "
        "(the kernel of h_L, all the old nfd-prop3 check measured, unchanged), excess kurtosis 6, "
        "so f given h_L is not Gaussian",
        ("tests/claims/test_nfd_prop3.py::"
         "test_readout_given_the_features_is_standard_normal_at_every_width",)),
    Mutation(
        "nngp-readout-of-phi", "models/mlp.py",
        "tr.out = self.readout(h)",
        "tr.out = self.readout(self.phi(h))",
        "nfd Eq. 1 read-out v^T h_L/sqrt(n) taken of phi(h_L) (the plain MLP's head): f stays "
        "Gaussian, its covariance E[phi phi'] is not C_T; the old nfd-prop3 check read h_L only",
        ("tests/claims/test_nfd_prop3.py::"
         "test_readout_given_the_features_is_standard_normal_at_every_width",)),
)


@dataclass(frozen=True)
class Outcome:
    """One pytest run: ``result`` caught / survived / error, the failing node ids, seconds."""

    result: str
    failed: tuple[str, ...]
    seconds: float
    output: str


def _copy_src(dest: Path) -> Path:
    """A copy of the repository's ``src`` under ``dest``; returns the package folder."""
    shutil.copytree(ROOT / "src", dest / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return dest / "src" / "depthscale"


def apply(package: Path, m: Mutation) -> None:
    """Apply ``m`` to the copy at ``package``; the old text must occur there exactly once."""
    path = package / m.file
    text = path.read_text()
    count = text.count(m.old)
    if count != 1:
        raise SystemExit(f"{m.name}: {m.old!r} occurs {count} times in {m.file}, not once")
    path.write_text(text.replace(m.old, m.new))


def _env(src: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return env | {"PYTHONPATH": str(src), "OMP_NUM_THREADS": "1",
                  "PYTHONDONTWRITEBYTECODE": "1"}


def run_tests(src: Path, tests: Sequence[str], workers: int = 1,
              first_failure: bool = False) -> Outcome:
    """pytest on ``tests`` (from the repository root) importing depthscale from ``src``, on
    ``workers`` pytest-xdist processes (one: in the pytest process itself); with
    ``first_failure`` it stops at the first failing test (a mutation is caught by then)."""
    start = time.perf_counter()
    spread = ["-n", str(workers)] if workers > 1 else []
    if first_failure:
        spread.append("-x")
    # no hypothesis or anyio plugin: none of these tests needs one (a @given test still runs),
    # and importing hypothesis at start-up is seconds of each run
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
         "-p", "no:anyio", "-q", "-rf", "--no-header", "-W", "ignore::DeprecationWarning",
         *spread, *tests],
        cwd=ROOT, env=_env(src), capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    output = proc.stdout + proc.stderr
    failed = tuple(dict.fromkeys(re.findall(r"^FAILED (\S+)", output, flags=re.M)))
    result = {0: "survived", 1: "caught"}.get(proc.returncode, f"error (pytest rc "
                                                                f"{proc.returncode})")
    return Outcome(result, failed, seconds, output)


def mutate_one(m: Mutation) -> Outcome:
    """Copy src, apply ``m``, run its tests; the copy is removed afterwards."""
    prefix = "mutate-" + re.sub(r"\W", "_", m.name) + "-"
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        package = _copy_src(Path(tmp))
        apply(package, m)
        return run_tests(package.parent, m.tests, first_failure=True)


def baseline(mutations: Sequence[Mutation], workers: int = 1) -> Outcome:
    """Every listed test on an unmutated copy (must pass), on ``workers`` processes, after
    checking that a subprocess with that ``PYTHONPATH`` imports depthscale from the copy."""
    tests = list(dict.fromkeys(t for m in mutations for t in m.tests))
    with tempfile.TemporaryDirectory(prefix="mutate-baseline-") as tmp:
        package = _copy_src(Path(tmp))
        where = subprocess.run(
            [sys.executable, "-c", "import depthscale; print(depthscale.__file__)"],
            env=_env(package.parent), capture_output=True, text=True, check=True).stdout
        if not Path(where.strip()).is_relative_to(Path(tmp).resolve()):
            raise SystemExit(f"the tests would import depthscale from {where.strip()}, not from "
                             f"the copy in {tmp}: mutations would go unseen")
        return run_tests(package.parent, tests, workers)


def _short(node: str) -> str:
    """``tests/a/test_b.py::test_c[x]`` -> ``test_b.py::test_c[x]``."""
    return node.rsplit("/", 1)[-1]


def table(rows: Sequence[tuple[Mutation, Outcome]]) -> str:
    """The Markdown table of the runs: caught by the failing tests, or the expected ones."""
    lines = ["| mutation | what it breaks | file | caught by | result | s |",
             "|---|---|---|---|---|---|"]
    for m, o in rows:
        by = ("<br>".join(f"`{_short(t)}`" for t in o.failed) if o.failed else
              "none of " + ", ".join(f"`{_short(t)}`" for t in m.tests))
        lines.append(f"| `{m.name}` | {m.breaks} | `{m.file}` | {by} | {o.result} | "
                     f"{o.seconds:.0f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="mutations run at once (default 2)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run these mutations only")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the run of the listed tests on unmutated code (CI: its test "
                             "run covers them, and fails if one does not pass)")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.only or m.name in args.only]
    unknown = set(args.only or ()) - {m.name for m in MUTATIONS}
    if unknown:
        parser.error(f"unknown mutation(s) {', '.join(sorted(unknown))}; choose from: "
                     f"{', '.join(m.name for m in MUTATIONS)}")
    if args.list:
        for m in chosen:
            print(f"{m.name}: {m.file}: {m.breaks}\n  - {m.old!r}\n  + {m.new!r}")
        return 0
    start = time.perf_counter()
    if not args.no_baseline:
        base = baseline(chosen, max(1, args.jobs))
        if base.result != "survived":  # the unmutated code must pass its tests
            print(base.output)
            print(f"baseline: the listed tests do not pass on unmutated code ({base.result})")
            return 2
        print(f"baseline: {len({t for m in chosen for t in m.tests})} tests pass on unmutated "
              f"code ({base.seconds:.0f} s)", flush=True)
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        outcomes = list(pool.map(mutate_one, chosen))
    rows = list(zip(chosen, outcomes, strict=True))
    for m, o in rows:
        if o.result.startswith("error"):
            print(f"--- {m.name}: pytest output ---\n{o.output}")
    print(table(rows))
    caught = sum(o.result == "caught" for o in outcomes)
    print(f"\n{caught} of {len(rows)} mutations caught; {time.perf_counter() - start:.0f} s "
          f"in all (--jobs {args.jobs})")
    return 0 if caught == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())

"""chizat-fig2 under other readings of the paper's Sec. 2.4 setting (issue 42): the quick grid
with the error law ``a/L + b/sqrt(LM)`` refitted, one line per reading.

Readings: the error measure (entrywise RMS vs l2 norm, RMS vs mean over repeats), the init
"N(0, sqrt(D))" (standard deviation vs variance sqrt(D)), the "mean square loss" (``|h - y|^2 /
(2D)``, ``/ D``, ``/ 2``: a factor on the gradient, i.e. on both LRs), and the reference (the
claim's Mean ODE vs a finer one; the paper's ground truth, a finite ResNet at L = M = 1000, is
a grid point's net: full scale measures L = M = 316 against the claim's reference).

Usage: ``PYTHONPATH=src python tools/chizat_fig2_readings.py [--seed 0]``.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from depthscale.claims.chizat.output_error import in_fit_range
from depthscale.claims.chizat.setting import load_data, one_thread
from depthscale.claims.registry import CLAIMS
from depthscale.limits import MeanODE
from depthscale.limits.mean_ode import rms_error
from depthscale.stats.fits import fit_error_law


def finite(X: np.ndarray, Y: np.ndarray, L: int, M: int, K: int, seed: int, sigma: float,
           eta: float) -> np.ndarray:
    """Eq. 24-25 (as the claim's ``finite_resnet``) at init std ``sigma`` and LRs ``eta``."""
    D = X.shape[1]
    return MeanODE(D, sigma_u=sigma, sigma_v=sigma, eta_u=eta, eta_v=eta, depth_steps=L,
                   particles=M, method="euler", sampler="iid", coupling="independent",
                   seed=seed).train(X, Y, K, track_travel=False).outputs[-1]


def reference(X: np.ndarray, Y: np.ndarray, K: int, sigma: float, eta: float, J: int, Q: int,
              runs: int, seed: int) -> tuple[np.ndarray, float]:
    """The claim's reference (mean of ``runs`` RK4 Mean ODE runs) and its standard error."""
    D = X.shape[1]
    outs = np.stack([MeanODE(D, sigma_u=sigma, sigma_v=sigma, eta_u=eta, eta_v=eta,
                             depth_steps=J, particles=Q, coupling="independent",
                             seed=seed + 7919 * r).train(X, Y, K, track_travel=False)
                     .outputs[-1] for r in range(runs)])
    se = math.sqrt(float(outs.var(axis=0, ddof=1).mean()) / runs)
    return outs.mean(axis=0), se


def fit(points: list[tuple[int, int, float]], D: int, boot: int, seed: int) -> str:
    """The claim's fit (NNLS on relative residuals over :func:`in_fit_range`)."""
    pts = [p for p in points if in_fit_range(p[0], p[1], D)]
    law = fit_error_law([p[0] for p in pts], [p[1] for p in pts], [p[2] for p in pts],
                        form="a/L + b/sqrt(LM)", nonnegative=True, relative=True, boot=boot,
                        seed=seed)
    return (f"a = {law.a:.3f} [{law.a_ci[0]:.3f}, {law.a_ci[1]:.3f}], "
            f"b = {law.b:.3f} [{law.b_ci[0]:.3f}, {law.b_ci[1]:.3f}]")


def grid_errors(X: np.ndarray, Y: np.ndarray, ref: np.ndarray, s: dict[str, object],
                sigma: float, eta: float, seed: int) -> dict[tuple[int, int], list[np.ndarray]]:
    """Each grid point's per-repeat output differences to ``ref``."""
    out: dict[tuple[int, int], list[np.ndarray]] = {}
    for L in s["depths"]:  # type: ignore[attr-defined]
        for M in s["widths"]:  # type: ignore[attr-defined]
            if s["max_units"] >= L * M:  # type: ignore[operator]
                out[(L, M)] = [finite(X, Y, L, M, s["K"], seed + 1000 * r + 1, sigma, eta) - ref
                               for r in range(s["repeats"])]  # type: ignore[call-overload]
    return out


def measures(diffs: dict[tuple[int, int], list[np.ndarray]]
             ) -> dict[str, list[tuple[int, int, float]]]:
    """The error measures read from the differences."""
    def rms(d: np.ndarray) -> float:
        return rms_error(d, 0 * d)

    return {
        "entrywise RMS, RMS over repeats (claim)": [
            (L, M, float(np.sqrt(np.mean([rms(d) ** 2 for d in ds]))))
            for (L, M), ds in diffs.items()],
        "entrywise RMS, mean over repeats": [
            (L, M, float(np.mean([rms(d) for d in ds]))) for (L, M), ds in diffs.items()],
        "l2 norm (RMS over inputs), RMS over repeats": [
            (L, M, float(np.sqrt(np.mean([rms(d) ** 2 * d.shape[1] for d in ds]))))
            for (L, M), ds in diffs.items()],
        "max over inputs of l2 norm, mean over repeats": [
            (L, M, float(np.mean([np.linalg.norm(d, axis=1).max() for d in ds])))
            for (L, M), ds in diffs.items()],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    s = dict(CLAIMS["chizat-fig2"].settings["quick"])
    D, K, seed = int(s["D"]), int(s["K"]), args.seed
    X, Y = load_data(D, seed)
    root = math.sqrt(D)
    with one_thread():
        base_ref, se = reference(X, Y, K, root, D, s["ref_J"], s["ref_Q"], s["ref_runs"],
                                 seed + 100)
        print(f"reference (claim): standard error {se:.2g}")
        fine, se_fine = reference(X, Y, K, root, D, 2 * s["ref_J"], 4 * s["ref_Q"], 4,
                                  seed + 200)
        print(f"finer reference (J x2, Q x4, 4 runs): standard error {se_fine:.2g}, "
              f"RMS distance to the claim's {rms_error(base_ref, fine):.2g}")
        diffs = grid_errors(X, Y, base_ref, s, root, D, seed)
        for name, pts in measures(diffs).items():
            print(f"[measure] {name}: {fit(pts, D, s['boot'], seed)}")
        claim = "entrywise RMS, RMS over repeats (claim)"
        reads = {
            "init variance sqrt(D) (std D^(1/4)), LRs (D, D)": (D ** 0.25, float(D)),
            "loss |h - y|^2 / D (LRs x2)": (root, 2.0 * D),
            "loss |h - y|^2 / 2 (LRs x D)": (root, float(D * D)),
            "init variance sqrt(D) and loss / D": (D ** 0.25, 2.0 * D),
        }
        for name, (sigma, eta) in reads.items():
            ref, _ = reference(X, Y, K, sigma, eta, s["ref_J"], s["ref_Q"], s["ref_runs"],
                               seed + 100)
            if not np.isfinite(ref).all() or np.abs(ref).max() > 1e6:
                print(f"[reading] {name}: the limit diverges")
                continue
            pts = measures(grid_errors(X, Y, ref, s, sigma, eta, seed))[claim]
            print(f"[reading] {name}: {fit(pts, D, s['boot'], seed)}")
        fine_pts = measures(grid_errors(X, Y, fine, s, root, D, seed))[claim]
        print(f"[reference] finer Mean ODE: {fit(fine_pts, D, s['boot'], seed)}")


if __name__ == "__main__":
    main()

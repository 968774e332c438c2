"""Are the verdicts decided by the evidence or by float rounding? (issue 25)

Runs each claim twice with ``depthscale reproduce`` at one scale: once plain (one thread), once
with every normal init draw jittered by a relative ``--eps`` (``DEPTHSCALE_INIT_PERTURBATION``,
see ``depthscale.param.draw``) and two BLAS/OpenMP threads (another summation order), and
prints a table of the two verdicts per claim. Exit 1 when any verdict differs.

    PYTHONPATH=src python tools/perturb_check.py OUT --scale quick --jobs 2
    PYTHONPATH=src python tools/perturb_check.py OUT --claims nfd-fig2 nfd-prop1 --eps 1e-7

Each claim runs in its own process and folder (``OUT/plain/<id>``, ``OUT/perturbed/<id>``); a
rerun into the same OUT keeps the claims already there (reproduce's resume).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ARMS = {
    "plain": {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
    "perturbed": {"OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"},
}


def _claims() -> list[str]:
    from depthscale.claims import CLAIMS

    return list(CLAIMS)


def _run(claim: str, arm: str, out: Path, scale: str, eps: float) -> tuple[str, str, float]:
    """(claim, verdict, seconds) of one reproduce run in its own process."""
    folder = out / arm / claim
    env = {**os.environ, **ARMS[arm]}
    env.pop("DEPTHSCALE_INIT_PERTURBATION", None)
    if arm == "perturbed":
        env["DEPTHSCALE_INIT_PERTURBATION"] = repr(eps)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "depthscale", "reproduce", claim, "--scale", scale, "--out",
         str(folder)], env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    try:
        records = json.loads((folder / "claims.json").read_text())
        verdict = next(r["verdict"] for r in records if r["id"] == claim)
    except (OSError, ValueError, StopIteration):
        verdict = f"ERROR (exit {proc.returncode}: {proc.stderr.strip()[-200:]})"
    return claim, verdict, seconds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--scale", default="quick", choices=("quick", "medium", "full"))
    p.add_argument("--claims", nargs="*", default=None, help="claim ids (default: all)")
    p.add_argument("--eps", type=float, default=1e-7, help="relative init jitter")
    p.add_argument("--jobs", type=int, default=2, help="claims run at once")
    args = p.parse_args(argv)
    claims = args.claims or _claims()
    jobs = [(c, arm) for c in claims for arm in ARMS]
    results: dict[tuple[str, str], tuple[str, float]] = {}
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(_run, c, arm, args.out, args.scale, args.eps): (c, arm)
                   for c, arm in jobs}
        for fut in as_completed(futures):  # logged as they finish: a killed check keeps them
            claim, arm = futures[fut]
            _, verdict, seconds = fut.result()
            results[(claim, arm)] = (verdict, seconds)
            print(f"{claim} {arm}: {verdict} ({seconds:.0f} s)", file=sys.stderr, flush=True)
    print(f"| claim | plain (1 thread) | jitter {args.eps:g}, 2 threads | same | s |")
    print("|---|---|---|---|---|")
    differ = 0
    for claim in claims:
        (a, sa), (b, sb) = results[(claim, "plain")], results[(claim, "perturbed")]
        same = a == b and not a.startswith("ERROR")
        differ += not same
        print(f"| `{claim}` | {a} | {b} | {'yes' if same else '**NO**'} | {sa:.0f} + {sb:.0f} |")
    print(f"\n{len(claims) - differ} of {len(claims)} verdicts unchanged at scale {args.scale}")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())

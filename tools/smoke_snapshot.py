"""Run every registered claim (and its negative control) at its smoke settings and write one
JSON snapshot: verdict, measured values and the SHA-256 of each CSV it wrote.

Used to show that a refactor changes no verdict and no data: snapshot before, snapshot after,
then ``python tools/smoke_snapshot.py --compare before.json after.json``.

    python tools/smoke_snapshot.py OUT_DIR SNAPSHOT.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from pathlib import Path


def snapshot(out_dir: Path) -> dict[str, dict[str, object]]:
    import torch

    from depthscale.claims import CLAIMS, ClaimContext

    torch.set_num_threads(1)
    result: dict[str, dict[str, object]] = {}
    for cid, c in CLAIMS.items():
        for control in (False, True):
            if control and c.control is None:
                continue
            key = f"{cid}/control" if control else cid
            where = out_dir / key.replace("/", "__")
            where.mkdir(parents=True, exist_ok=True)
            ctx = ClaimContext(scale="quick", out_dir=where, device="cpu", data_dir=None, seed=0,
                               settings=c.settings_for("smoke", control=control))
            t0 = time.perf_counter()
            outcome = c.run(ctx)
            csvs = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                    for p in sorted(where.glob("*.csv"))}
            result[key] = {"verdict": outcome.verdict, "measured": dict(outcome.measured),
                           "csv": csvs, "seconds": round(time.perf_counter() - t0, 1)}
            print(f"{key:40s} {outcome.verdict:13s} {time.perf_counter() - t0:6.1f} s",
                  flush=True)
    return result


def compare(a: dict[str, dict[str, object]], b: dict[str, dict[str, object]]) -> int:
    """Print every difference; exit status 1 when verdicts or CSVs differ."""
    bad = 0
    for key in sorted(set(a) | set(b)):
        if key not in a or key not in b:
            print(f"{key}: only in {'before' if key in a else 'after'}")
            bad += 1
            continue
        ra, rb = a[key], b[key]
        if ra["verdict"] != rb["verdict"]:
            print(f"{key}: verdict {ra['verdict']} -> {rb['verdict']}")
            bad += 1
        if ra["csv"] != rb["csv"]:
            print(f"{key}: CSV bytes differ")
            bad += 1
        ma, mb = ra["measured"], rb["measured"]
        assert isinstance(ma, dict) and isinstance(mb, dict)
        for k in sorted(set(ma) | set(mb)):
            va, vb = ma.get(k), mb.get(k)
            same = va == vb or (isinstance(va, float) and isinstance(vb, float)
                                and (math.isnan(va) and math.isnan(vb)))
            if not same:
                print(f"{key}: measured {k} {va} -> {vb}")
    print(f"{len(set(a) & set(b))} entries compared, {bad} verdict/CSV differences")
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs=2)
    parser.add_argument("--compare", action="store_true",
                        help="compare two snapshots instead of taking one")
    args = parser.parse_args()
    if args.compare:
        a, b = (json.loads(Path(p).read_text()) for p in args.paths)
        return compare(a, b)
    out = Path(args.paths[0])
    data = snapshot(out)
    Path(args.paths[1]).write_text(json.dumps(data, indent=1, sort_keys=True, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

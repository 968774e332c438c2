"""Print the claims table of docs/results.md from one or more claims.json and the registry.

    python tools/claims_table.py reproduce-out/claims.json > table.md
    python tools/claims_table.py quick-out medium-out       # a verdict per run, side by side

One row per claim (negative controls left out), in the registry's order: its id, the paper's
result (the claim in the paper's words, from the registry's headline), the headline line (the
paper's value and label from the registry, ours and the band from the records; "not recorded"
for a record that predates headlines) and the verdict. With several files each run's value and
verdict are given, labelled by scale (and seeds where they differ).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _run(r: Mapping[str, Any]) -> str:
    seeds = r.get("seeds") or []
    return r["scale"] + (f", {len(seeds)} seeds" if seeds else "")


def _row(cid: str, runs: Sequence[Mapping[str, Any]]) -> str:
    from depthscale.claims import CLAIMS
    from depthscale.report.headline import headline_parts

    lead = CLAIMS[cid].headline if cid in CLAIMS else None
    said = lead.statement if lead is not None else runs[0]["title"]
    several = len(runs) > 1
    heads = [r["headline"] for r in runs if r.get("headline")]
    if heads:
        ours = []
        for r in runs:
            if r.get("headline"):
                _, value, _, _ = headline_parts(r["headline"])
                ours.append(value.removeprefix("ours: ") + (f" ({_run(r)})" if several else ""))
        paper, _, band, _ = headline_parts(heads[-1])
        label = heads[-1]["label"]
        if lead is not None:  # the registry's words: current even for an older record
            paper, label = lead.paper, lead.label
        line = f"{label}: paper: {paper}, ours: {'; '.join(ours)}" + (f", {band}" if band else "")
    elif lead is not None:
        line = f"{lead.label}: paper: {lead.paper}, ours: not recorded"
    else:
        line = "-"
    verdict = "; ".join(f"{_run(r)}: {r['verdict']}" for r in runs) if several else (
        runs[0]["verdict"] + (f" ({_run(runs[0])})" if _run(runs[0]) != "quick" else ""))
    return f"| `{cid}` | {_cell(said)} | {_cell(line)} | {verdict} |"


def claims_table(paths: Sequence[Path]) -> str:
    """The Markdown table for the claims.json files at ``paths`` (files or their folders)."""
    from depthscale.claims import CLAIMS
    from depthscale.report import read_claims_json

    by_id: dict[str, list[dict[str, Any]]] = {}
    for path in paths:
        for r in read_claims_json(path):
            if not r.get("control"):
                by_id.setdefault(r["id"], []).append(r)
    order = [cid for cid in CLAIMS if cid in by_id] + [cid for cid in by_id if cid not in CLAIMS]
    lines = ["| id | paper's result | headline: paper vs ours | verdict |", "|---|---|---|---|"]
    lines += [_row(cid, by_id[cid]) for cid in order]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("claims_json", type=Path, nargs="+",
                        help="a claims.json (or its folder); several: one run each")
    args = parser.parse_args(argv)
    try:
        print(claims_table(args.claims_json), end="")
    except ValueError as exc:  # ClaimSchemaError: unreadable or invalid file
        print(f"claims_table: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

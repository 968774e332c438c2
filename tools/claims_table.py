"""Print the README's claims table (Markdown) from a claims.json and the claim registry.

    python tools/claims_table.py reproduce-out/claims.json > table.md

One row per claim in the file (negative controls left out), in the registry's order: its id,
the paper's result (the claim in the paper's words, from the registry's headline), the headline
line (paper vs ours, from the record; from the registry alone when the record predates
headlines) and the verdict with the scale it was measured at when that is not quick.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def claims_table(path: Path) -> str:
    """The Markdown table for the claims.json at ``path`` (or its folder)."""
    from depthscale.claims import CLAIMS
    from depthscale.report import read_claims_json

    records = {r["id"]: r for r in read_claims_json(path) if not r.get("control")}
    order = [cid for cid in CLAIMS if cid in records]
    order += [cid for cid in records if cid not in CLAIMS]
    lines = ["| id | paper's result | headline: paper vs ours | verdict |", "|---|---|---|---|"]
    for cid in order:
        r = records[cid]
        lead = CLAIMS[cid].headline if cid in CLAIMS else None
        said = lead.statement if lead is not None else r["title"]
        hl = r.get("headline")
        if hl:
            line = f"{hl['label']}: {hl['text']}"
        elif lead is not None:
            line = f"{lead.label}: paper: {lead.paper}, ours: not recorded"
        else:
            line = "-"
        verdict = r["verdict"] + (f" ({r['scale']})" if r["scale"] != "quick" else "")
        lines.append(f"| `{cid}` | {_cell(said)} | {_cell(line)} | {verdict} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("claims_json", type=Path, help="a claims.json (or its folder)")
    args = parser.parse_args(argv)
    try:
        print(claims_table(args.claims_json), end="")
    except ValueError as exc:  # ClaimSchemaError: unreadable or invalid file
        print(f"claims_table: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

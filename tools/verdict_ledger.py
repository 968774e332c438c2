"""Keep docs/verdicts.json, the last recorded verdict of each claim at each scale, and render the
README's claims table from it.

    python tools/verdict_ledger.py record reproduce-out medium-out/claims.json
    python tools/verdict_ledger.py readme            # rewrite the README's table from the ledger
    python tools/verdict_ledger.py readme --check    # exit 1 if the README's table is stale

``record`` merges every claim record of the given claims.json files (negative controls and SKIP
records left out) into the ledger: a record replaces the entry of its claim and scale unless
that entry was started later; it keeps when the run started, the settings ``--set`` changed and
where it ran, and clears the entry's note. Then it rewrites the README's table. The table has one
row per registered claim, in the registry's order, with the ledger's one-line summary of it
(the README's words) and its quick and medium verdicts (full ones are kept, not shown). A claim
without medium settings runs its quick ones at medium, so with no medium entry its medium cell
reads "as quick"; a claim with medium settings and no entry reads "not run".
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LEDGER = ROOT / "docs" / "verdicts.json"
README = ROOT / "README.md"
BEGIN = "<!-- claims table: rendered by tools/verdict_ledger.py from docs/verdicts.json -->"
END = "<!-- end of claims table -->"
KEY_ORDER = ("summary", "quick", "medium", "full")  # a claim's keys in the file


def read_ledger(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data.get("claims"), dict):
        raise ValueError(f"{path}: no 'claims' table; it is not a verdict ledger")
    return data


def write_ledger(path: Path, ledger: Mapping[str, Any]) -> None:
    """Write ``ledger`` with one line per claim's summary and per scale's entry (diffs stay
    readable), claims in the registry's order, then any it does not hold."""
    from depthscale.claims import CLAIMS

    claims = ledger["claims"]
    order = [c for c in CLAIMS if c in claims] + sorted(c for c in claims if c not in CLAIMS)
    blocks = []
    for cid in order:
        keys = sorted(claims[cid], key=lambda k: (*KEY_ORDER, k).index(k))
        items = [f'   "{k}": {json.dumps(claims[cid][k], sort_keys=True)}' for k in keys]
        blocks.append(f'  "{cid}": {{\n' + ",\n".join(items) + "\n  }")
    path.write_text(f'{{\n "about": {json.dumps(ledger["about"])},\n "claims": {{\n'
                    + ",\n".join(blocks) + "\n }\n}\n", encoding="utf-8")


def _entry(record: Mapping[str, Any]) -> dict[str, Any]:
    run = record.get("run") or {}
    return {"verdict": record["verdict"], "started": run.get("started"),
            "set": run.get("set"), "device": run.get("device"), "note": ""}


def merge(ledger: dict[str, Any], records: Iterable[Mapping[str, Any]]) -> list[str]:
    """Merge claim records into ``ledger`` in place; one line per entry changed or kept."""
    said = []
    for r in records:
        if r.get("control"):
            continue
        cid, scale = r["id"], r["scale"]
        if r["verdict"] == "SKIP":
            said.append(f"{cid} ({scale}): SKIP not recorded (data missing or a crash)")
            continue
        new = _entry(r)
        old = ledger["claims"].setdefault(cid, {}).get(scale)
        if old and old.get("started") and (not new["started"] or old["started"] > new["started"]):
            said.append(f"{cid} ({scale}): kept {old['verdict']} of {old['started']}, later than "
                        f"this record's {new['started']}")
            continue
        ledger["claims"][cid][scale] = new
        was = f"{old['verdict']} -> " if old else ""
        said.append(f"{cid} ({scale}): {was}{new['verdict']}")
    return said


def _cell(entry: Mapping[str, Any] | None, fallback: str) -> str:
    if entry is None:
        return fallback
    extra = [entry["note"]] if entry.get("note") else []
    if entry.get("set"):
        extra.append(f"--set {entry['set']}")
    return entry["verdict"] + (f" ({'; '.join(extra)})" if extra else "")


def table(ledger: Mapping[str, Any]) -> str:
    """The README's table: one row per registered claim, in the registry's order."""
    from depthscale.claims import CLAIMS

    lines = ["| claim | the paper's statement | quick | medium |", "|---|---|---|---|"]
    for cid, c in CLAIMS.items():
        entries = ledger["claims"].get(cid, {})
        said = entries.get("summary")
        if not said:
            raise ValueError(f"{cid} has no 'summary' in the ledger: add its one-line statement "
                             "(the paper's claim in a few words, its figure or equation)")
        medium = "not run" if "medium" in c.settings else "as quick"
        lines.append(f"| `{cid}` | {said.replace('|', '/')} | "
                     f"{_cell(entries.get('quick'), 'not run')} | "
                     f"{_cell(entries.get('medium'), medium)} |")
    return "\n".join(lines) + "\n"


def with_table(readme: str, rendered: str) -> str:
    """``readme`` with the text between its claims-table markers replaced by ``rendered``."""
    once = readme.count(BEGIN) == 1 and readme.count(END) == 1
    if not once or readme.index(BEGIN) > readme.index(END):
        raise ValueError(f"the README needs one line {BEGIN!r} and, after it, one line {END!r} "
                         "around its claims table")
    head, rest = readme.split(BEGIN)
    _, tail = rest.split(END)
    return f"{head}{BEGIN}\n{rendered}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ledger", type=Path, default=LEDGER)
    parser.add_argument("--readme", type=Path, default=README)
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="merge claims.json files (or their folders)")
    rec.add_argument("claims_json", type=Path, nargs="+")
    show = sub.add_parser("readme", help="rewrite the README's table from the ledger")
    show.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    try:
        ledger = read_ledger(args.ledger)
        text = args.readme.read_text(encoding="utf-8")
        if args.command == "record":
            from depthscale.report import read_claims_json

            records = [r for p in args.claims_json for r in read_claims_json(p)]
            for line in merge(ledger, records):
                print(line)
        new = with_table(text, table(ledger))
    except (OSError, ValueError) as exc:  # ValueError: ClaimSchemaError, JSON, markers
        print(f"verdict_ledger: {exc}", file=sys.stderr)
        return 2
    if args.command == "readme" and args.check:
        if new != text:
            print(f"verdict_ledger: the claims table of {args.readme} differs from {args.ledger}; "
                  "run: python tools/verdict_ledger.py readme", file=sys.stderr)
            return 1
        return 0
    if args.command == "record":
        write_ledger(args.ledger, ledger)
    args.readme.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

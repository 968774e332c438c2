"""``runs.jsonl``: every claim record a reproduce run finished in a folder, one JSON line each,
appended (never rewritten) under the folder's lock, so that a medium run into the folder of a
quick one keeps the quick verdicts for the report's "across runs" table even though claims.json
holds only the latest record per claim.

Each line is written with one ``write`` on a file opened for appending and fsynced; a line torn
by a kill is skipped when read, and the next append starts on a fresh line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from depthscale.report.schema import ClaimSchemaError, validate_result

__all__ = ["HISTORY_FILE", "append_history", "read_history", "run_label", "runs_table"]

HISTORY_FILE = "runs.jsonl"


def append_history(out_dir: Path, record: Mapping[str, Any]) -> Path:
    """Append ``record`` (validated) to ``out_dir/runs.jsonl``; the caller holds the folder's
    lock. Returns the path."""
    clean = validate_result(record)
    data = (json.dumps(clean, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
            + "\n").encode("utf-8")
    path = Path(out_dir) / HISTORY_FILE
    if path.exists() and path.stat().st_size:
        with path.open("rb") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                data = b"\n" + data  # a torn last line stays alone on its line
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def read_history(path: Path) -> list[dict[str, Any]]:
    """The records of a ``runs.jsonl`` (``path`` may be its folder), oldest first; lines that
    are not a valid record (a torn write) are skipped. No file: an empty list."""
    path = Path(path)
    if path.is_dir():
        path = path / HISTORY_FILE
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            out.append(validate_result(json.loads(line)))
        except (ValueError, ClaimSchemaError):
            continue
    return out


def run_label(record: Mapping[str, Any], *, version: bool = False) -> str:
    """What run a record came from: scale, base seed(s), settings changed by ``--set``,
    control, and the depthscale version when ``version`` (e.g. ``medium seed 0``, ``quick
    seeds 0-2``, ``medium seed 0 --set``, ``quick seed 0 control``)."""
    seeds = record.get("seeds") or []
    seed = record.get("seed")
    if seeds:
        first, last = seeds[0]["seed"], seeds[-1]["seed"]
        where = f"seeds {first}-{last}"
    else:
        where = "seed ?" if seed is None else f"seed {seed}"
    label = f"{record['scale']} {where}"
    if (record.get("run") or {}).get("set"):
        label += " --set"
    if record.get("control"):
        label += " control"
    if version and record.get("version"):
        label += f" v{record['version']}"
    return label


def _base_id(cid: str) -> str:
    return cid[: -len("/control")] if cid.endswith("/control") else cid


def runs_table(
    history: Iterable[Mapping[str, Any]], results: Sequence[Mapping[str, Any]] = (),
) -> tuple[list[str], list[tuple[str, dict[str, Mapping[str, Any]]]]]:
    """The "across runs" table: the run labels (columns, in the order the runs first appear)
    and one row per claim (controls under their claim) with each run's latest record. The
    records in ``results`` (the folder's claims.json) count as the latest of their run."""
    entries = [*history, *results]
    versions = {r.get("version") or "" for r in entries}
    with_version = len(versions) > 1
    columns: dict[str, None] = {}
    rows: dict[str, dict[str, Mapping[str, Any]]] = {}
    for r in results:
        rows.setdefault(_base_id(r["id"]), {})
    for r in entries:
        label = run_label(r, version=with_version)
        columns.setdefault(label, None)
        rows.setdefault(_base_id(r["id"]), {})[label] = r
    return list(columns), list(rows.items())

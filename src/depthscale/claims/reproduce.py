"""Run registered claims and write claims.json, a figure and a CSV per claim, and index.html.

Results are written after every claim (atomically), so a killed run keeps every claim that
finished. Running a subset into a folder that already has results replaces only those ids; two
runs into one folder merge their results under the folder's lock (:data:`LOCK_FILE`), so
neither drops the other's verdicts.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from depthscale.claims.registry import CLAIMS, PLANNED, SCALES, ClaimContext
from depthscale.claims.verdicts import ClaimOutcome
from depthscale.errors import ConfigError, DataError, DepthscaleError
from depthscale.outputs import check_output_dir, folder_lock
from depthscale.report import read_claims_json, write_claims_json, write_index_html

__all__ = ["LOCK_FILE", "ClaimHooks", "reproduce", "select_claims"]

#: held while claims.json and index.html are read, merged and rewritten
LOCK_FILE = "reproduce.lock"
_LOCK_WAIT = 60.0

#: on_claim(claim_id) -> (advance(k), set_total(n)) for progress display.
ClaimHooks = Callable[[str], tuple[Callable[[int], None], Callable[[int], None]]]


def select_claims(ids: Sequence[str]) -> list[str]:
    """The claim ids to run: all registered ones when ``ids`` is empty; errors for unknown or
    not-yet-implemented ids."""
    if not ids:
        return list(CLAIMS)
    for cid in ids:
        if cid in PLANNED:
            raise ConfigError(f"claim {cid!r} is not implemented yet: it needs {PLANNED[cid]}")
        if cid not in CLAIMS:
            raise ConfigError(f"unknown claim {cid!r}; known claims: {', '.join(CLAIMS)}")
    return list(dict.fromkeys(ids))


def _existing(out_dir: Path) -> list[dict[str, Any]]:
    path = out_dir / "claims.json"
    if not path.exists():
        return []
    try:
        return read_claims_json(path)
    except (ValueError, json.JSONDecodeError) as exc:
        raise DataError(
            f"{path} exists but is not a valid claims file ({exc}); move it away or pick "
            "another --out"
        ) from None


def _merge(out_dir: Path, record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Under the folder's lock: re-read claims.json, put ``record`` in, write claims.json and
    index.html. Two reproduce runs into one folder thus keep each other's verdicts."""
    with folder_lock(out_dir, LOCK_FILE, wait=_LOCK_WAIT, what="reproduce folder"):
        results = {r["id"]: r for r in _existing(out_dir)}
        results[record["id"]] = record
        ordered = list(results.values())
        write_claims_json(out_dir, ordered)
        write_index_html(out_dir, ordered)
    return results


def _record(claim_id: str, scale: str, seconds: float, outcome: ClaimOutcome,
            out_dir: Path) -> dict[str, Any]:
    c = CLAIMS[claim_id]

    def rel(p: Path | None) -> str | None:
        return None if p is None else str(Path(p).resolve().relative_to(out_dir.resolve()))

    # banded values that were not measurable are already named by the verdict's reason
    unmeasurable = [k for k, v in outcome.measured.items() if v is None and k not in outcome.band]
    reason = "; ".join(
        r for r in (outcome.reason, unmeasurable and f"not measurable: {', '.join(unmeasurable)}")
        if r
    )
    measured = {k: v for k, v in outcome.measured.items() if v is not None}
    return {
        "id": claim_id, "title": c.title, "paper": c.paper, "verdict": outcome.verdict,
        "reason": reason, "measured": measured, "band": outcome.band,
        "scale": scale, "seconds": round(seconds, 2), "figure": rel(outcome.figure),
        "data": rel(outcome.data),
    }


def reproduce(
    ids: Sequence[str],
    *,
    scale: str,
    out_dir: Path,
    device: str = "cpu",
    data_dir: Path | None = None,
    seed: int = 0,
    workers: int = 1,
    on_claim: ClaimHooks | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Run claims; return (all results now in ``out_dir``, ids that crashed).

    A claim whose data is missing ends as SKIP with the reason; a crash (a bug, not a user
    mistake) ends as SKIP with the error and is listed in the second return value.
    ``workers``: processes each claim's sweeps may use (the runs are the same either way).
    """
    if scale not in SCALES:
        raise ConfigError(f"scale must be one of {', '.join(SCALES)}, got {scale!r}")
    if workers < 1:
        raise ConfigError(f"workers must be >= 1, got {workers}")
    chosen = select_claims(ids)
    out_dir = check_output_dir(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with folder_lock(out_dir, LOCK_FILE, wait=_LOCK_WAIT, what="reproduce folder"):
        results = {r["id"]: r for r in _existing(out_dir)}  # a bad claims.json stops us here
    crashed: list[str] = []
    for cid in chosen:
        advance, set_total = on_claim(cid) if on_claim else (lambda _k: None, lambda _k: None)
        ctx = ClaimContext(scale=scale, out_dir=out_dir, device=device, data_dir=data_dir,
                           seed=seed, settings=dict(CLAIMS[cid].settings[scale]),
                           progress=advance, set_total=set_total, workers=workers)
        t0 = time.perf_counter()
        try:
            outcome = CLAIMS[cid].run(ctx)
        except DataError as exc:
            outcome = ClaimOutcome("SKIP", reason=f"data unavailable: {exc}")
        except DepthscaleError as exc:
            outcome = ClaimOutcome("SKIP", reason=f"cannot run: {exc}")
        except Exception as exc:  # a bug: keep the other claims, report it loudly
            crashed.append(cid)
            last = traceback.format_exception_only(exc)[-1].strip()
            outcome = ClaimOutcome("SKIP", reason=f"crashed: {last}")
        mine = _record(cid, scale, time.perf_counter() - t0, outcome, out_dir)
        results = _merge(out_dir, mine)
    return list(results.values()), crashed

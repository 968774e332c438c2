"""Shared formatting for the HTML page and the console table (private)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from depthscale.report.schema import VERDICTS


def number(x: float | None) -> str:
    """A measured value or band end, compact."""
    if x is None:
        return ""
    return f"{x:.4g}"


def band_text(band: Sequence[float | None] | None) -> str:
    """``[low, high]`` with open ends written as ``-inf`` / ``+inf``; ``""`` for no band."""
    if band is None:
        return ""
    low, high = band
    lo = "-inf" if low is None else number(low)
    hi = "+inf" if high is None else number(high)
    return f"[{lo}, {hi}]"


def in_band(value: float | None, band: Sequence[float | None] | None) -> bool | None:
    """Whether ``value`` lies in ``band`` (None when either is missing)."""
    if value is None or band is None:
        return None
    low, high = band
    return (low is None or value >= low) and (high is None or value <= high)


def quantities(result: dict[str, Any]) -> list[tuple[str, float | None, list[float | None] | None]]:
    """``(name, measured value, band)`` for every name measured or banded, measured first."""
    names = list(result["measured"]) + [n for n in result["band"] if n not in result["measured"]]
    return [(n, result["measured"].get(n), result["band"].get(n)) for n in names]


def summary(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Counts per verdict that occurs (in :data:`VERDICTS` order), total seconds, scale(s)."""
    counts = {v: n for v in VERDICTS if (n := sum(r["verdict"] == v for r in results))}
    scales = sorted({r["scale"] for r in results})
    return {
        "counts": counts,
        "total": len(results),
        "seconds": float(sum(r["seconds"] for r in results)),
        "scale": ", ".join(scales) if scales else "-",
    }


def duration(seconds: float) -> str:
    """Seconds as ``12.3 s`` or ``4 min 05 s``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, sec = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {sec:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def seeds_text(result: dict[str, Any]) -> str:
    """``""``, or one line of per-seed verdicts: ``seeds 0: PASS, 1: FAIL (1/2 pass)``."""
    seeds = result.get("seeds") or []
    if not seeds:
        return ""
    passing = sum(e["verdict"] == "PASS" for e in seeds)
    each = ", ".join(f"{e['seed']}: {e['verdict']}" for e in seeds)
    return f"\nseeds {each} ({passing}/{len(seeds)} pass)"

"""A claim's headline: the one number a report leads with, beside the paper's.

The claims layer declares which measured key it is (its registry); this module turns that
declaration and a result's ``measured`` and ``band`` into the ``headline`` of the record, whose
``text`` is one line: ``paper: X, ours: Y [lo, hi], band B``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from depthscale.report import _fmt

__all__ = ["headline_parts", "headline_record", "headline_text"]


def _value(measured: Mapping[str, Any], key: str | None) -> float | None:
    if key is None:
        return None
    value = measured.get(key)
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def headline_parts(hl: Mapping[str, Any]) -> tuple[str, str, str, bool | None]:
    """The pieces of a headline's line: the paper's value, ``ours: Y [lo, hi]``, the band
    (``band [lo, hi]``, ``band: <criterion>`` or ``""``) and whether ours lies in the band."""
    ours, ci, band = hl.get("ours"), hl.get("ci"), hl.get("band")
    shown = "not measured" if ours is None else _fmt.number(ours)
    if ours is not None and ci is not None:
        shown += f" [{_fmt.number(ci[0])}, {_fmt.number(ci[1])}]"
    if band is not None:
        banded = f"band {_fmt.band_text(band)}"
    else:
        banded = f"band: {hl['criterion']}" if hl.get("criterion") else ""
    return str(hl["paper"]), f"ours: {shown}", banded, _fmt.in_band(ours, band)


def headline_text(paper: str, ours: float | None, ci: Sequence[float] | None,
                  band: Sequence[float | None] | None, criterion: str = "") -> str:
    """``paper: X, ours: Y [lo, hi], band B`` (``ours: not measured`` without a value; the
    ``criterion`` in words where there is no numeric band)."""
    paper_, ours_, band_, _ = headline_parts({"paper": paper, "ours": ours, "ci": ci,
                                              "band": band, "criterion": criterion})
    return ", ".join(p for p in (f"paper: {paper_}", ours_, band_) if p)


def headline_record(
    *,
    metric: str,
    label: str,
    paper: str,
    measured: Mapping[str, Any],
    band: Mapping[str, Sequence[float | None]],
    ci_keys: Sequence[str] | None = None,
    ref: str = "",
    statement: str = "",
    criterion: str = "",
) -> dict[str, Any]:
    """The ``headline`` of a claim record: ``label``, ``paper``, ``ours`` (``measured[metric]``
    or None), ``ci`` (``[lo, hi]`` from ``ci_keys`` when both were measured), ``band``
    (``band[metric]`` when the result has one), ``text`` (:func:`headline_text`), and the
    ``metric`` key, ``ref``, ``statement`` and ``criterion`` for the report's card."""
    ours = _value(measured, metric)
    ci: list[float] | None = None
    if ci_keys is not None:
        low, high = _value(measured, ci_keys[0]), _value(measured, ci_keys[1])
        if low is not None and high is not None:
            ci = [min(low, high), max(low, high)]
    raw_band = band.get(metric)
    banded = None if raw_band is None else [None if v is None else float(v) for v in raw_band]
    return {
        "label": label, "paper": paper, "ours": ours, "ci": ci, "band": banded,
        "text": headline_text(paper, ours, ci, banded, criterion),
        "metric": metric, "ref": ref, "statement": statement, "criterion": criterion,
    }

"""The claim-result contract: one dict per claim, the elements of ``claims.json``.

Keys: ``id``, ``title``, ``paper``, ``verdict``, ``reason``, ``measured`` {name: float},
``band`` {name: [low, high]} (either end may be None), ``scale``, ``seconds``, ``figure`` and
``data`` (relative paths or None); optional ``paper_version``, ``seeds`` (per base seed of a
``--seeds N`` run), ``control`` (what the negative control changed), ``seed``, ``version``
(depthscale's), ``headline`` (:func:`depthscale.report.headline.headline_record`) and ``run``
(machine, threads, package versions). Each key in full: docs/how-it-works.md.

The verdict is one of :data:`VERDICTS`: PASS (reproduced); FAIL (not reproduced, our code
suspected); REFUTED (the paper's statement contradicted by two independent routes, with a
negative control showing the check sees the effect); UNSTABLE (the verdict changes across
seeds); INCONCLUSIVE (the signal is below the noise at this scale); SKIP (not run: data
missing, or a crash). ``reason`` is the evidence: every verdict but PASS must carry one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

__all__ = [
    "CLAIM_KEYS",
    "HEADLINE_KEYS",
    "OPTIONAL_KEYS",
    "SCALES",
    "VERDICTS",
    "ClaimSchemaError",
    "validate_result",
    "validate_results",
]

VERDICTS: tuple[str, ...] = ("PASS", "FAIL", "REFUTED", "UNSTABLE", "INCONCLUSIVE", "SKIP")
SCALES: tuple[str, ...] = ("quick", "medium", "full")
CLAIM_KEYS: tuple[str, ...] = (
    "id", "title", "paper", "verdict", "reason", "measured", "band", "scale", "seconds",
    "figure", "data",
)
#: keys a result may carry, with the value a result without them has
OPTIONAL_KEYS: dict[str, Any] = {"paper_version": "", "seeds": [], "control": None, "seed": None,
                                 "version": "", "headline": None, "run": None}
#: the keys of a result's ``headline`` (HEADLINE_KEYS required, the others optional texts)
HEADLINE_KEYS: tuple[str, ...] = ("label", "paper", "ours", "ci", "band", "text")
HEADLINE_TEXTS: tuple[str, ...] = ("metric", "ref", "statement", "criterion")


class ClaimSchemaError(ValueError):
    """A claim result that breaks the contract; the message names the claim and the key."""


def _real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite(who: str, key: str, value: Any) -> float:
    if not _real(value):
        raise ClaimSchemaError(f"{who}: {key} must be a number, got {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise ClaimSchemaError(
            f"{who}: {key} is {x!r}; results must be finite (a claim runner reports a NaN or "
            "infinite measurement as FAIL or SKIP with a reason, not as a number)"
        )
    return x


def _text(who: str, key: str, value: Any, *, empty: bool = True) -> str:
    if not isinstance(value, str):
        raise ClaimSchemaError(f"{who}: {key} must be a string, got {type(value).__name__}")
    if not empty and not value.strip():
        raise ClaimSchemaError(f"{who}: {key} must not be empty")
    return value


def _rel_path(who: str, key: str, value: Any) -> str | None:
    if value is None:
        return None
    path = _text(who, key, value, empty=False)
    if PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute():
        raise ClaimSchemaError(
            f"{who}: {key} must be a path relative to the output folder, got {path!r}"
        )
    if ".." in PurePosixPath(path.replace("\\", "/")).parts:
        raise ClaimSchemaError(f"{who}: {key} must stay inside the output folder, got {path!r}")
    return path


def _band(who: str, name: Any, value: Any) -> list[float | None]:
    key = f"band[{name!r}]"
    if not isinstance(name, str):
        raise ClaimSchemaError(f"{who}: band names must be strings, got {name!r}")
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != 2:
        raise ClaimSchemaError(f"{who}: {key} must be [low, high], got {value!r}")
    ends = [None if v is None else _finite(who, key, v) for v in value]
    low, high = ends
    if low is None and high is None:
        raise ClaimSchemaError(f"{who}: {key} has neither a low nor a high end")
    if low is not None and high is not None and low > high:
        raise ClaimSchemaError(f"{who}: {key} has low {low!r} > high {high!r}")
    return ends


def validate_result(result: Any, index: int = 0) -> dict[str, Any]:
    """Check one claim result against the contract; return a normalised copy.

    Numbers become floats and bands lists. Raises :class:`ClaimSchemaError` naming the claim
    (or its position when it has no usable id) and the offending key.
    """
    if not isinstance(result, Mapping):
        raise ClaimSchemaError(
            f"claim #{index}: a result must be a dict, got {type(result).__name__}"
        )
    cid = result.get("id")
    who = f"claim {cid!r}" if isinstance(cid, str) and cid else f"claim #{index} (no valid id)"
    missing = [k for k in CLAIM_KEYS if k not in result]
    if missing:
        raise ClaimSchemaError(f"{who}: missing key(s) {', '.join(missing)}")
    unknown = [str(k) for k in result if k not in CLAIM_KEYS and k not in OPTIONAL_KEYS]
    if unknown:
        known = ", ".join((*CLAIM_KEYS, *OPTIONAL_KEYS))
        raise ClaimSchemaError(f"{who}: unknown key(s) {', '.join(unknown)}; the contract has: "
                               f"{known}")
    out: dict[str, Any] = {"id": _text(who, "id", cid, empty=False)}
    out["title"] = _text(who, "title", result["title"])
    out["paper"] = _text(who, "paper", result["paper"])
    verdict = result["verdict"]
    if verdict not in VERDICTS:
        raise ClaimSchemaError(
            f"{who}: verdict must be one of {', '.join(VERDICTS)}, got {verdict!r}"
        )
    out["verdict"] = verdict
    out["reason"] = _text(who, "reason", result["reason"], empty=verdict == "PASS")
    measured = result["measured"]
    if not isinstance(measured, Mapping):
        raise ClaimSchemaError(f"{who}: measured must be a dict of name -> number")
    out["measured"] = {}
    for name, value in measured.items():
        if not isinstance(name, str):
            raise ClaimSchemaError(f"{who}: measured names must be strings, got {name!r}")
        out["measured"][name] = _finite(who, f"measured[{name!r}]", value)
    band = result["band"]
    if not isinstance(band, Mapping):
        raise ClaimSchemaError(f"{who}: band must be a dict of name -> [low, high]")
    out["band"] = {name: _band(who, name, value) for name, value in band.items()}
    scale = result["scale"]
    if scale not in SCALES:
        raise ClaimSchemaError(f"{who}: scale must be one of {', '.join(SCALES)}, got {scale!r}")
    out["scale"] = scale
    seconds = _finite(who, "seconds", result["seconds"])
    if seconds < 0:
        raise ClaimSchemaError(f"{who}: seconds must be >= 0, got {seconds!r}")
    out["seconds"] = seconds
    out["figure"] = _rel_path(who, "figure", result["figure"])
    out["data"] = _rel_path(who, "data", result["data"])
    out["paper_version"] = _text(who, "paper_version", result.get("paper_version", ""))
    out["seeds"] = _seeds(who, result.get("seeds", []))
    control = result.get("control")
    out["control"] = None if control is None else _text(who, "control", control, empty=False)
    seed = result.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise ClaimSchemaError(f"{who}: seed must be an integer (the base seed), got {seed!r}")
    out["seed"] = seed
    out["version"] = _text(who, "version", result.get("version", ""))
    out["headline"] = _headline(who, result.get("headline"))
    out["run"] = _run(who, result.get("run"))
    return out


def _pair(who: str, key: str, value: Any, *, open_ends: bool) -> list[float | None] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != 2:
        raise ClaimSchemaError(f"{who}: {key} must be [low, high] or null, got {value!r}")
    ends = [None if v is None and open_ends else _finite(who, key, v) for v in value]
    if ends[0] is not None and ends[1] is not None and ends[0] > ends[1]:
        raise ClaimSchemaError(f"{who}: {key} has low {ends[0]!r} > high {ends[1]!r}")
    return ends


def _headline(who: str, value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ClaimSchemaError(f"{who}: headline must be a dict, got {type(value).__name__}")
    missing = [k for k in HEADLINE_KEYS if k not in value]
    unknown = [str(k) for k in value if k not in HEADLINE_KEYS and k not in HEADLINE_TEXTS]
    if missing or unknown:
        raise ClaimSchemaError(f"{who}: headline must have {', '.join(HEADLINE_KEYS)} (and "
                               f"optionally {', '.join(HEADLINE_TEXTS)}); missing "
                               f"{missing or 'none'}, unknown {unknown or 'none'}")
    out: dict[str, Any] = {
        "label": _text(who, "headline.label", value["label"]),
        "paper": _text(who, "headline.paper", value["paper"]),
        "ours": None if value["ours"] is None else _finite(who, "headline.ours", value["ours"]),
        "ci": _pair(who, "headline.ci", value["ci"], open_ends=False),
        "band": _pair(who, "headline.band", value["band"], open_ends=True),
        "text": _text(who, "headline.text", value["text"]),
    }
    for key in HEADLINE_TEXTS:
        if key in value:
            out[key] = _text(who, f"headline.{key}", value[key])
    return out


def _run(who: str, value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ClaimSchemaError(f"{who}: run must be a dict, got {type(value).__name__}")
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise ClaimSchemaError(f"{who}: run keys must be strings, got {key!r}")
        if item is None or isinstance(item, (str, bool)):
            out[key] = item
        elif _real(item):
            out[key] = item if isinstance(item, int) else _finite(who, f"run[{key!r}]", item)
        else:
            raise ClaimSchemaError(f"{who}: run[{key!r}] must be text, a number or null, got "
                                   f"{type(item).__name__}")
    return out


def _seeds(who: str, value: Any) -> list[dict[str, Any]]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise ClaimSchemaError(f"{who}: seeds must be a list, got {type(value).__name__}")
    out = []
    for i, entry in enumerate(value):
        where = f"seeds[{i}]"
        if not isinstance(entry, Mapping) or set(entry) != {"seed", "verdict", "measured"}:
            raise ClaimSchemaError(f"{who}: {where} must have exactly seed, verdict, measured")
        if not isinstance(entry["seed"], int) or isinstance(entry["seed"], bool):
            raise ClaimSchemaError(f"{who}: {where}.seed must be an integer")
        if entry["verdict"] not in VERDICTS:
            raise ClaimSchemaError(f"{who}: {where}.verdict must be one of {', '.join(VERDICTS)}")
        if not isinstance(entry["measured"], Mapping):
            raise ClaimSchemaError(f"{who}: {where}.measured must be a dict")
        measured = {str(k): _finite(who, f"{where}.measured[{k!r}]", v)
                    for k, v in entry["measured"].items()}
        out.append({"seed": entry["seed"], "verdict": entry["verdict"], "measured": measured})
    return out


def validate_results(results: Any) -> list[dict[str, Any]]:
    """Validate a list of claim results (ids must be unique); return normalised copies."""
    if isinstance(results, (str, bytes, Mapping)) or not isinstance(results, Sequence):
        raise ClaimSchemaError(
            f"claim results must be a list of dicts, got {type(results).__name__}"
        )
    out = [validate_result(r, i) for i, r in enumerate(results)]
    seen: set[str] = set()
    for r in out:
        if r["id"] in seen:
            raise ClaimSchemaError(f"claim {r['id']!r}: id appears more than once")
        seen.add(r["id"])
    return out

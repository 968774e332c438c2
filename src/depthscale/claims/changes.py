"""Changes to a claim's settings at a scale (``depthscale reproduce --set PATH=VALUE``).

A change names one setting by its dotted path into the scale's settings (``seeds``,
``archs.cnn1d.seed_rounds``) and gives its new value as JSON (``8``, ``[4, 8, 16]``,
``"relu"``; text that is not JSON is a string); ``null`` removes an entry of a nested table
(``archs.vit=null``), never a top-level setting. Every path must exist in the settings of every
chosen claim and the new value must be of the old one's kind, so a typo stops the run before
any work.

Each setting also has a type and a range derived from its stock values (the claim's settings at
every scale and its negative control; :func:`check_value`): a whole number stays whole, a
positive one positive, none grows past :data:`GROWTH` times the largest the scales use, text is
one of the names they use; the full rules: docs/errors.md. A changed claim's record says
what was changed (``run["set"]``), and reproduce's resume keeps it only for the same changes.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from depthscale.errors import ConfigError

__all__ = ["GROWTH", "SettingChange", "apply_changes", "check_value", "describe_changes",
           "parse_change", "stock_values"]

#: one change: the dotted path split at its dots, and the new value (None: remove the entry)
SettingChange = tuple[tuple[str, ...], Any]

#: the most a number may grow past the largest magnitude any scale gives its setting (two
#: decades past the paper's setting: a claim's cost grows at least linearly in its sizes and
#: counts; larger is another claim, made by editing its settings)
GROWTH = 100


def parse_change(text: str) -> SettingChange:
    """``PATH=VALUE`` as a :data:`SettingChange` (ConfigError when there is no ``=`` or the
    path has an empty part)."""
    path, sep, raw = text.partition("=")
    parts = tuple(p.strip() for p in path.split("."))
    if not sep or not all(parts):
        raise ConfigError(f"a setting change is PATH=VALUE with a dotted PATH (seeds=8, "
                          f"archs.cnn1d.seed_rounds=[4,8,16]), got {text!r}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return parts, value


def apply_changes(settings: Mapping[str, Any], changes: Sequence[SettingChange],
                  claim_id: str,
                  stock: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """A deep copy of ``settings`` with ``changes`` made in order; ConfigError, naming the
    claim and the settings that do exist, when a path does not exist or would remove a
    top-level setting. With ``stock`` (the claim's settings at every scale), each new value is
    checked against its setting's type and range (:func:`check_value`), and a removal must
    remove an entry some scale goes without."""
    out = copy.deepcopy(dict(settings))
    for parts, value in changes:
        table: Any = out
        for depth, key in enumerate(parts):
            where = ".".join(parts[:depth]) or "its settings"
            if not isinstance(table, dict) or key not in table:
                have = ", ".join(map(str, table)) if isinstance(table, dict) else "no table"
                raise ConfigError(f"{claim_id} has no setting {'.'.join(parts)!r} ({where}: "
                                  f"{have}); see `depthscale reproduce --list` and the claim's "
                                  "settings in docs/claims.md")
            if depth < len(parts) - 1:
                table = table[key]
        name = ".".join(parts)
        if value is None:
            if len(parts) == 1:
                raise ConfigError(f"{claim_id}: a top-level setting ({parts[0]!r}) cannot be "
                                  "removed, only changed (null removes entries of a nested "
                                  "table, e.g. archs.vit=null)")
            if stock and _required(stock, parts):
                raise ConfigError(f"{claim_id}: setting {name!r} is there at every scale (the "
                                  "claim reads it) and cannot be removed, only changed")
            del table[parts[-1]]
        else:
            old = table[parts[-1]]
            if old is not None and _kind(old) != _kind(value):
                raise ConfigError(f"{claim_id}: setting {name!r} is {_kind(old)} "
                                  f"({json.dumps(old, default=str)}), got {_kind(value)} "
                                  f"({json.dumps(value)}); give a JSON value of its kind")
            if stock:
                check_value(claim_id, name, value, stock_values(stock, parts))
            table[parts[-1]] = value
    return out


def stock_values(stock: Sequence[Mapping[str, Any]], parts: Sequence[str]) -> list[Any]:
    """The values the path ``parts`` has in each of the ``stock`` settings that have it."""
    out = []
    for settings in stock:
        value: Any = settings
        for key in parts:
            if not isinstance(value, Mapping) or key not in value:
                break
            value = value[key]
        else:
            out.append(value)
    return out


def _required(stock: Sequence[Mapping[str, Any]], parts: Sequence[str]) -> bool:
    """Whether every stock settings that has the table holding ``parts`` has the entry."""
    parents = stock_values(stock, parts[:-1])
    return all(isinstance(p, Mapping) and parts[-1] in p for p in parents)


def check_value(claim_id: str, path: str, value: Any, samples: Sequence[Any]) -> None:
    """ConfigError naming the claim and the setting ``path`` when ``value`` is not of the type
    and range its stock values ``samples`` give (see the module's rule); nothing to check
    without samples."""
    samples = [s for s in samples if s is not None]
    if not samples or value is None:
        return
    where = f"{claim_id}: setting {path!r}"
    kinds = list(dict.fromkeys(_kind(s) for s in samples))
    if _kind(value) not in kinds:
        raise ConfigError(f"{where} is {' or '.join(kinds)} at every scale, got "
                          f"{_kind(value)} ({json.dumps(value)})")
    if isinstance(value, Mapping):
        tables = [s for s in samples if isinstance(s, Mapping)]
        if not tables:
            return
        known = list(dict.fromkeys(k for t in tables for k in t))
        needed = [k for k in known if all(k in t for t in tables)]
        unknown = [k for k in value if k not in known]
        missing = [k for k in needed if k not in value]
        if unknown or missing:
            said = [f"unknown {', '.join(map(str, unknown))}" if unknown else "",
                    f"no {', '.join(missing)}" if missing else ""]
            raise ConfigError(f"{where} is a table of {', '.join(known)} (every scale has "
                              f"{', '.join(needed) or 'none of them'}); got "
                              f"{'; '.join(t for t in said if t)}")
        for key, item in value.items():
            check_value(claim_id, f"{path}.{key}", item, [t[key] for t in tables if key in t])
    elif isinstance(value, list | tuple):
        _check_list(claim_id, path, value, [s for s in samples if isinstance(s, list | tuple)])
    elif isinstance(value, str):
        _check_text(where, value, [s for s in samples if isinstance(s, str)])
    elif _is_number(value):
        _check_number(where, value, [s for s in samples if _is_number(s)])


def _check_list(claim_id: str, path: str, value: Sequence[Any],
                samples: Sequence[Sequence[Any]]) -> None:
    if not samples:
        return
    where = f"{claim_id}: setting {path!r}"
    if not value and all(samples):
        raise ConfigError(f"{where} must not be empty (every scale lists something), got []")
    lengths = {len(s) for s in samples}
    if len(lengths) == 1 and _is_record(samples):
        (n,) = lengths
        if len(value) != n:
            raise ConfigError(f"{where} must have {n} entries, as at every scale (e.g. "
                              f"{json.dumps(samples[0])}), got {json.dumps(value)}")
        for i, item in enumerate(value):
            check_value(claim_id, f"{path}[{i}]", item, [s[i] for s in samples])
        return
    pooled = [x for s in samples for x in s]
    for i, item in enumerate(value):
        check_value(claim_id, f"{path}[{i}]", item, pooled)


def _is_record(samples: Sequence[Sequence[Any]]) -> bool:
    """Whether lists of one length are records (``[start, stop, num]``): some position's
    entries are all whole numbers while the pooled entries are not."""
    pooled = [x for s in samples for x in s]
    if not pooled or not all(_is_number(x) for x in pooled) or all(_is_whole(x)
                                                                    for x in pooled):
        return False
    return any(all(_is_whole(s[i]) for s in samples) for i in range(len(samples[0])))


def _check_text(where: str, value: str, samples: Sequence[str]) -> None:
    from depthscale.activations import ACTIVATIONS
    from depthscale.param import RECIPES

    names = list(dict.fromkeys(samples))
    for vocabulary in (ACTIVATIONS, RECIPES):
        if all(s in vocabulary for s in samples):
            names = list(vocabulary)
            break
    if value not in names:
        raise ConfigError(f"{where} must be one of: {', '.join(names)}, got {value!r}")


def _check_number(where: str, value: float, samples: Sequence[float]) -> None:
    if not samples:
        return
    top = GROWTH * max(1.0, max(abs(float(s)) for s in samples))
    whole = all(_is_whole(s) for s in samples)
    low = 1 if whole and min(samples) >= 1 else 0 if min(samples) >= 0 else -top
    strict = not whole and min(samples) > 0
    if whole:
        rule = f"a whole number from {low:,.0f} to {top:,.0f}"
    else:
        rule = (f"a finite number in {'(' if strict else '['}{low:g}, {top:g}]")
    seen = ", ".join(f"{s:g}" for s in sorted(set(map(float, samples)))[:8])
    fail = ConfigError(f"{where} must be {rule} (its values at the scales: {seen}), got "
                       f"{json.dumps(value)}")
    if whole and not _is_whole(value):
        raise fail
    x = float(value)
    if not math.isfinite(x) or x > top or x < low or (strict and x <= 0):
        raise fail


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_whole(value: Any) -> bool:
    """An int written as one (``32``; ``32.0`` is a float, not a whole number here)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    """A setting's kind as --set checks it: a whole number and a float are both numbers."""
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


def describe_changes(changes: Sequence[SettingChange]) -> str:
    """The changes as one line, ``path=JSON`` joined by ", " (``null``: removed; "" for
    none): a record's ``run["set"]`` and the start of its reason."""
    return ", ".join(f"{'.'.join(parts)}={json.dumps(value)}" for parts, value in changes)

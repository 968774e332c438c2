"""Changes to a claim's settings at a scale (``depthscale reproduce --set PATH=VALUE``).

A change names one setting by its dotted path into the scale's settings (``seeds``,
``archs.cnn1d.seed_rounds``) and gives its new value as JSON (``8``, ``[4, 8, 16]``,
``"relu"``; text that is not JSON is taken as a string). ``null`` removes an entry of a nested
table (``archs.vit=null`` runs a laws claim without its ViT); a top-level setting cannot be
removed, since the claim reads it. Every path must already exist in the settings of every
chosen claim, and the new value must be of the old one's kind (a number, text, a list, a
table, true/false), so a typo stops the run before any work with the settings that do exist.

A changed claim is not the claim at that scale: its record says what was changed (its
``run["set"]``), reproduce's resume keeps it only for the same changes, and the stored runs of
the claims' sweeps are keyed by their settings already.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from depthscale.errors import ConfigError

__all__ = ["SettingChange", "apply_changes", "describe_changes", "parse_change"]

#: one change: the dotted path split at its dots, and the new value (None: remove the entry)
SettingChange = tuple[tuple[str, ...], Any]


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
                  claim_id: str) -> dict[str, Any]:
    """A deep copy of ``settings`` with ``changes`` made in order; ConfigError, naming the
    claim and the settings that do exist, when a path does not exist or would remove a
    top-level setting."""
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
        if value is None:
            if len(parts) == 1:
                raise ConfigError(f"{claim_id}: a top-level setting ({parts[0]!r}) cannot be "
                                  "removed, only changed (null removes entries of a nested "
                                  "table, e.g. archs.vit=null)")
            del table[parts[-1]]
        else:
            old = table[parts[-1]]
            if old is not None and _kind(old) != _kind(value):
                raise ConfigError(f"{claim_id}: setting {'.'.join(parts)!r} is {_kind(old)} "
                                  f"({json.dumps(old, default=str)}), got {_kind(value)} "
                                  f"({json.dumps(value)}); give a JSON value of its kind")
            table[parts[-1]] = value
    return out


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

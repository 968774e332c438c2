"""The TOML edge of a study spec: reading a study's text into tables (:func:`toml_loads`) and
writing tables back as text (:func:`study_toml`), every escape included, so that
``tomllib.loads(study_toml(t)) == t``. Validation is :mod:`depthscale.studies.spec`'s."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from depthscale.errors import ConfigError

__all__ = ["study_toml", "toml_loads"]


def toml_loads(text: str, source: str) -> dict[str, Any]:
    """The tables of the TOML ``text`` of a study; ConfigError naming ``source`` if it is not
    valid TOML."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise ConfigError(
                "reading study specs needs Python >= 3.11 (tomllib) or: pip install tomli"
            ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"spec {source}: not valid TOML ({exc})") from None


def study_toml(tables: Mapping[str, Any]) -> str:
    """The TOML text of a study given as tables (``{"study": {...}, "grid": {...}, ...}``):
    sections as ``[name]``, nested tables inside a section (``grid.plan``, an
    ``lr = {logspace = [...]}``) inline. Strings are TOML basic strings with every escape
    (backslashes in Windows paths included), so ``tomllib.loads(study_toml(t)) == t``."""
    lines: list[str] = []
    for section, table in tables.items():
        if not isinstance(table, Mapping):
            raise ConfigError(f"study table [{section}] must be a mapping, got {table!r}")
        lines.append(f"[{section}]")
        lines += [f"{_toml_key(k)} = {_toml_value(val)}" for k, val in table.items()]
    return "\n".join(lines) + "\n"


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_value(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON string escapes are TOML's
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}"
                               for k, x in value.items()) + "}"
    raise ConfigError(f"cannot write {value!r} ({type(value).__name__}) into a study spec")

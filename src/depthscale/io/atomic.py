"""Atomic file writes: a killed run leaves the old file or the new one, never a torn one.

:func:`atomic_write` (a temporary file beside the target, fsynced, then ``os.replace``d over
it) and :func:`write_csv` (rows as CSV through it, floats written to round-trip exactly).
"""

from __future__ import annotations

import contextlib
import csv
import math
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Literal

__all__ = ["atomic_write", "write_csv"]

_DEFAULT_MODE = 0o644


@contextlib.contextmanager
def atomic_write(
    path: str | os.PathLike[str], mode: Literal["w", "wb"] = "w", **open_kwargs: Any
) -> Iterator[IO[Any]]:
    """Open a temporary file next to ``path``; on success fsync it and ``os.replace`` it over
    ``path``. On any exception the temporary file is removed and ``path`` is left untouched.

    The parent folder is created if needed. Text mode defaults to UTF-8. The new file keeps the
    permission bits of the file it replaces (0o644 for a new file).
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write mode must be 'w' or 'wb', got {mode!r}")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if mode == "w":
        open_kwargs.setdefault("encoding", "utf-8")
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        try:
            fh_cm = os.fdopen(fd, mode, **open_kwargs)
        except BaseException:
            os.close(fd)
            raise
        with fh_cm as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        try:
            perms = target.stat().st_mode & 0o7777
        except FileNotFoundError:
            perms = _DEFAULT_MODE
        os.chmod(tmp, perms)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


_Scalar = (str, int, float, bool, type(None))


def _cell(column: str, value: Any, row: int) -> Any:
    if not isinstance(value, _Scalar):
        raise ValueError(
            f"CSV row {row}, column {column!r}: cells must be str, number, bool or None, "
            f"got {type(value).__name__}"
        )
    if value is None:
        return ""
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    return value


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write ``rows`` as CSV atomically; the header is the union of keys in first-seen order.

    Missing cells and ``None`` are written empty; floats round-trip exactly.
    """
    header: dict[str, None] = {}
    for row in rows:
        for key in row:
            if not isinstance(key, str):
                raise ValueError(f"CSV column names must be strings, got {key!r}")
            header.setdefault(key, None)
    path = Path(path)
    with atomic_write(path, newline="") as fh:
        if header:
            writer = csv.DictWriter(fh, fieldnames=list(header), restval="", lineterminator="\n")
            writer.writeheader()
            for i, row in enumerate(rows):
                writer.writerow({k: _cell(k, v, i) for k, v in row.items()})
    return path

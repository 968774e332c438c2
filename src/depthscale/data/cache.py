"""depthscale's cache folder: data that is costly to make and the same every time (the MNIST-1D
generator's signals), kept between processes. ``$DEPTHSCALE_CACHE`` names the folder (``off``:
no cache, everything made in the process), else ``$XDG_CACHE_HOME/depthscale`` or
``~/.cache/depthscale``. An entry is written atomically and read back only when it is whole
and of the expected shapes; anything else is made again. A folder that cannot be written
leaves the work in memory only."""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from depthscale.io.atomic import atomic_write

__all__ = ["CACHE_ENV", "cache_dir", "read_arrays", "write_arrays"]

#: environment variable: the cache folder, or ``off`` for none
CACHE_ENV = "DEPTHSCALE_CACHE"


def cache_dir() -> Path | None:
    """The cache folder (not created here), or None where ``$DEPTHSCALE_CACHE`` is ``off``."""
    given = os.environ.get(CACHE_ENV, "").strip()
    if given.lower() == "off":
        return None
    if given:
        return Path(given).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg) if xdg else Path.home() / ".cache") / "depthscale"


def read_arrays(name: str, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, np.ndarray] | None:
    """The arrays of entry ``name`` if it holds exactly the keys of ``shapes`` with those shapes
    (no pickled objects), else None."""
    folder = cache_dir()
    if folder is None:
        return None
    try:
        with np.load(folder / name, allow_pickle=False) as found:
            if set(found.files) != set(shapes):
                return None
            arrays = {k: found[k] for k in shapes}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError):
        return None
    ok = all(tuple(a.shape) == tuple(shapes[k]) for k, a in arrays.items())
    return arrays if ok else None


def write_arrays(name: str, arrays: Mapping[str, np.ndarray]) -> bool:
    """Keep ``arrays`` as entry ``name`` (atomically); False where there is no cache or its
    folder cannot be written (the caller has the arrays anyway)."""
    folder = cache_dir()
    if folder is None:
        return False
    try:
        save: Any = np.savez  # its stub types every keyword as its own options
        with atomic_write(folder / name, "wb") as fh:
            save(fh, **arrays)
    except OSError:
        return False
    return True

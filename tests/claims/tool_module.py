"""A script of tools/ loaded as a module, for the tests of that tool."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def load_tool(name: str) -> ModuleType:
    """``tools/<name>.py`` as module ``name``, loaded once (registered in sys.modules, where
    its dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

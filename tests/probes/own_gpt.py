"""The README's own GPT (examples/own_transformer.py), loaded once for the probe tests that
check it (the script is an example, not a package module)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "own_transformer.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("own_transformer_for_probes", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


GPT = _load().GPT

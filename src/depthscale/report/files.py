"""claims.json, written atomically (:mod:`depthscale.io.atomic`) and read back validated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from depthscale.io.atomic import atomic_write
from depthscale.report.schema import ClaimSchemaError, validate_results

__all__ = ["CLAIMS_FILE", "read_claims_json", "write_claims_json"]

CLAIMS_FILE = "claims.json"


def write_claims_json(out_dir: Path, results: list[dict[str, Any]]) -> Path:
    """Validate ``results`` and write them to ``out_dir/claims.json`` atomically.

    Nothing is written when a result breaks the contract (:class:`ClaimSchemaError`, a
    ``ValueError`` naming the claim and key); a failure while writing keeps the old file.
    """
    clean = validate_results(results)
    path = Path(out_dir) / CLAIMS_FILE
    with atomic_write(path) as fh:
        json.dump(clean, fh, indent=2, ensure_ascii=False, allow_nan=False)
        fh.write("\n")
    return path


def read_claims_json(path: Path) -> list[dict[str, Any]]:
    """Read and validate a claims.json (``path`` may also be the folder that holds it)."""
    path = Path(path)
    if path.is_dir():
        path = path / CLAIMS_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ClaimSchemaError(f"cannot read claim results {path}: {exc.strerror}") from exc

    def _no_constants(name: str) -> float:
        raise ClaimSchemaError(f"{path}: holds {name}, which is not valid JSON")

    try:
        data = json.loads(text, parse_constant=_no_constants)
    except json.JSONDecodeError as exc:
        raise ClaimSchemaError(f"{path} is not valid JSON: {exc}") from exc
    try:
        return validate_results(data)
    except ClaimSchemaError as exc:
        raise ClaimSchemaError(f"{path}: {exc}") from exc

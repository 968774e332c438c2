"""Reports of a reproduce run: claims.json, index.html and a console table.

Figure helpers live in :mod:`depthscale.report.figures` (imported on demand: matplotlib is
only loaded by code that draws). Files are written through :mod:`depthscale.io` (atomic
writes, CSV).
"""

from __future__ import annotations

from depthscale.report.console import console_table
from depthscale.report.files import CLAIMS_FILE, read_claims_json, write_claims_json
from depthscale.report.html import INDEX_FILE, render_index_html, write_index_html
from depthscale.report.schema import (
    CLAIM_KEYS,
    SCALES,
    VERDICTS,
    ClaimSchemaError,
    validate_result,
    validate_results,
)

__all__ = [
    "CLAIMS_FILE",
    "CLAIM_KEYS",
    "INDEX_FILE",
    "SCALES",
    "VERDICTS",
    "ClaimSchemaError",
    "console_table",
    "read_claims_json",
    "render_index_html",
    "validate_result",
    "validate_results",
    "write_claims_json",
    "write_index_html",
]

"""Reports of a reproduce run: claims.json, runs.jsonl (every finished record), index.html and a
console table.

Figure helpers live in :mod:`depthscale.report.figures` (imported on demand: matplotlib is
only loaded by code that draws). Files are written through :mod:`depthscale.io` (atomic
writes, CSV).
"""

from __future__ import annotations

from depthscale.report.console import console_table
from depthscale.report.files import CLAIMS_FILE, read_claims_json, write_claims_json
from depthscale.report.headline import headline_record, headline_text
from depthscale.report.history import HISTORY_FILE, append_history, read_history, runs_table
from depthscale.report.html import INDEX_FILE, render_index_html, write_index_html
from depthscale.report.page import page_problems, read_page
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
    "HISTORY_FILE",
    "INDEX_FILE",
    "SCALES",
    "VERDICTS",
    "ClaimSchemaError",
    "append_history",
    "console_table",
    "headline_record",
    "headline_text",
    "page_problems",
    "read_claims_json",
    "read_history",
    "read_page",
    "render_index_html",
    "runs_table",
    "validate_result",
    "validate_results",
    "write_claims_json",
    "write_index_html",
]

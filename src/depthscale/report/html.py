"""``index.html``: one self-contained page for a reproduce run: inline CSS, no scripts, each
claim's figure embedded as a base64 PNG and its CSV as a ``data:`` download link (up to
:data:`EMBED_LIMIT` bytes), so the page can be mailed or attached alone. The PNG and CSV files
stay beside it; a file that is missing (or too large) is linked by its relative path instead."""

from __future__ import annotations

import base64
import re
from html import escape
from pathlib import Path, PureWindowsPath
from typing import Any
from urllib.parse import quote

from depthscale.io.atomic import atomic_write
from depthscale.report import _fmt
from depthscale.report.schema import validate_results

__all__ = ["EMBED_LIMIT", "INDEX_FILE", "render_index_html", "write_index_html"]

INDEX_FILE = "index.html"
#: files up to this size are embedded in the page; larger ones are linked
EMBED_LIMIT = 8 * 2**20

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;
max-width:70rem;padding:0 1rem;color:#1d1d1f;line-height:1.45}
h1{margin-bottom:.2rem}h2{margin-top:2.5rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}
.meta{color:#666}
table{border-collapse:collapse;width:100%;margin:1rem 0;font-size:.92rem}
th,td{border:1px solid #ddd;padding:.35rem .5rem;text-align:left;vertical-align:top}
th{background:#f4f4f6}td.num{text-align:right;font-variant-numeric:tabular-nums}
.verdict{font-weight:700;padding:.1rem .45rem;border-radius:.3rem;white-space:nowrap}
.PASS{background:#d9f2dc;color:#11621d}.FAIL{background:#fbdada;color:#9b1111}
.SKIP{background:#fff1c7;color:#7a5a00}.REFUTED{background:#ecd9f7;color:#5b1a80}
.UNSTABLE{background:#ffe2c4;color:#8a4400}.INCONCLUSIVE{background:#dce8fb;color:#1c4587}
.control{font-weight:700;color:#5b1a80}
.q{display:block;white-space:nowrap;font-variant-numeric:tabular-nums}
.q.out .v{color:#9b1111;font-weight:700}.band{color:#666}
.counts span{margin-right:1rem}
figure{margin:1rem 0}img{max-width:100%;height:auto;border:1px solid #eee}
.reason{white-space:pre-wrap}
"""


def _e(text: Any) -> str:
    return escape(str(text), quote=True)


def _url(rel: str) -> str:
    posix = PureWindowsPath(rel).as_posix() if "\\" in rel else rel
    return _e(quote(posix, safe="/"))


def _anchor(index: int, cid: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", cid).strip("-") or "claim"
    return f"claim-{index}-{slug}"


def _verdict(v: str) -> str:
    return f'<span class="verdict {_e(v)}">{_e(v)}</span>'


def _quantities(r: dict[str, Any]) -> str:
    parts = []
    for name, value, band in _fmt.quantities(r):
        inside = _fmt.in_band(value, band)
        cls = "q out" if inside is False else "q"
        shown = "not measured" if value is None else _fmt.number(value)
        band_html = f' <span class="band">in {_e(_fmt.band_text(band))}</span>' if band else ""
        parts.append(
            f'<span class="{cls}">{_e(name)} = <span class="v">{_e(shown)}</span>{band_html}</span>'
        )
    return "".join(parts) or "&mdash;"


def _source(rel: str, base: Path | None, mime: str) -> str:
    """A ``data:`` URI of ``base/rel`` when it exists and is at most :data:`EMBED_LIMIT` bytes,
    else the escaped relative URL."""
    if base is not None:
        path = base / rel
        try:
            if path.is_file() and path.stat().st_size <= EMBED_LIMIT:
                return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"
        except OSError:
            pass
    return _url(rel)


def _section(i: int, r: dict[str, Any], base: Path | None) -> str:
    out = [
        f'<section id="{_anchor(i, r["id"])}">',
        f"<h2>{_e(r['id'])}: {_e(r['title'])} {_verdict(r['verdict'])}</h2>",
        f'<p class="meta">{_e(r["paper"])}'
        + (f" ({_e(r['paper_version'])})" if r["paper_version"] else "")
        + f" &middot; scale {_e(r['scale'])} &middot; {_e(_fmt.duration(r['seconds']))}</p>",
    ]
    if r["control"]:
        out.append(f'<p class="control">Negative control: {_e(r["control"])} (a correct check '
                   "FAILs here)</p>")
    if r["seeds"]:
        out.append(f"<p>{_e(_fmt.seeds_text(r).strip())}</p>")
    if r["reason"]:
        out.append(f'<p class="reason">{_e(r["reason"])}</p>')
    out.append(f"<p>{_quantities(r)}</p>")
    if r["figure"]:
        out.append(
            f'<figure><img src="{_source(r["figure"], base, "image/png")}" '
            f'alt="figure for claim {_e(r["id"])}"></figure>'
        )
    if r["data"]:
        name = _e(PureWindowsPath(r["data"]).name)
        out.append(f'<p><a href="{_source(r["data"], base, "text/csv")}" download="{name}">'
                   f'data (CSV): {_e(r["data"])}</a></p>')
    out.append("</section>")
    return "\n".join(out)


def render_index_html(
    results: list[dict[str, Any]], *, title: str = "depthscale reproduce",
    base: Path | None = None,
) -> str:
    """The page as a string (results are validated first). Figures and CSVs are embedded from
    the folder ``base`` (their paths are relative to it); without ``base`` they are linked."""
    clean = validate_results(results)
    s = _fmt.summary(clean)
    counts = "".join(
        f"<span>{_verdict(v)} {n}</span>" for v, n in s["counts"].items()
    )
    rows = "\n".join(
        "<tr>"
        f'<td><a href="#{_anchor(i, r["id"])}">{_e(r["id"])}</a></td>'
        f"<td>{_e(r['title'])}</td>"
        f"<td>{_verdict(r['verdict'])}</td>"
        f"<td>{_quantities(r)}</td>"
        f'<td class="num">{_e(_fmt.duration(r["seconds"]))}</td>'
        "</tr>"
        for i, r in enumerate(clean)
    )
    sections = "\n".join(_section(i, r, base) for i, r in enumerate(clean))
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title>
<style>{_CSS}</style>
</head>
<body>
<h1>{_e(title)}</h1>
<p class="meta">{s["total"]} claim(s) &middot; scale {_e(s["scale"])} &middot;
total {_e(_fmt.duration(s["seconds"]))} &middot;
results in <a href="claims.json">claims.json</a></p>
<p class="counts">{counts}</p>
<table>
<thead><tr><th>claim</th><th>title</th><th>verdict</th><th>measured (band)</th><th>time</th></tr>
</thead>
<tbody>
{rows}
</tbody>
</table>
{sections}
</body>
</html>
"""


def write_index_html(
    out_dir: Path, results: list[dict[str, Any]], *, title: str = "depthscale reproduce"
) -> Path:
    """Write ``out_dir/index.html`` atomically, figures and CSVs embedded from ``out_dir``;
    every user-provided string is HTML-escaped."""
    page = render_index_html(results, title=title, base=Path(out_dir))
    path = Path(out_dir) / INDEX_FILE
    with atomic_write(path) as fh:
        fh.write(page)
    return path

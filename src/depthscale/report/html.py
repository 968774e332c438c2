"""``index.html``: one self-contained page for a reproduce run, built around one card per claim.

At the top an overview: counts per verdict, a grid of the claims by paper coloured by verdict
(each tile links to its card), total time, scale(s), seeds, the machine and package versions the
run recorded, and the papers' versions. Then a card per claim: verdict, the claim in the paper's
words, the headline line (paper vs ours), the evidence for every verdict but PASS, the figure as
a thumbnail that opens full size (a ``<details>``, no script), and the raw metrics and CSV behind
a disclosure. When the folder's history (:mod:`depthscale.report.history`) holds several runs
(scales, seeds, controls), an "across runs" table shows each claim's verdict in each.

Inline CSS, no scripts, no external URL: each figure is embedded as a base64 PNG and each CSV as
a ``data:`` download link (up to :data:`EMBED_LIMIT` bytes), so the page can be mailed alone.
The PNG and CSV files stay beside it; a missing (or too large) file is linked by its path.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path, PureWindowsPath
from typing import Any
from urllib.parse import quote

from depthscale.io.atomic import atomic_write
from depthscale.report import _fmt
from depthscale.report.headline import headline_parts
from depthscale.report.history import read_history, run_label, runs_table
from depthscale.report.schema import validate_result, validate_results

__all__ = ["EMBED_LIMIT", "INDEX_FILE", "render_index_html", "write_index_html"]

INDEX_FILE = "index.html"
#: files up to this size are embedded in the page; larger ones are linked
EMBED_LIMIT = 8 * 2**20

#: the papers' groups in the overview, in the catalogue's order (others follow)
_GROUPS = ("nfd", "laws", "chizat", "beyond")

_VERDICT_MEANING = {
    "PASS": "reproduced", "FAIL": "not reproduced; our code is suspected first",
    "REFUTED": "the paper's statement contradicted by two independent routes",
    "UNSTABLE": "the verdict changes across base seeds",
    "INCONCLUSIVE": "the signal is below the noise at this scale",
    "SKIP": "not run (data missing, or a crash)",
}

_CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;
max-width:84rem;padding:.8rem 1.2rem 3rem;color:#1d1d1f;line-height:1.35;font-size:14px}
h1{font-size:1.35rem;margin:.1rem 0 .2rem}
h2{font-size:1.1rem;margin:1.6rem 0 .5rem}
a{color:#1c4587}
.meta,.sub{color:#555}
.verdict{font-weight:700;padding:.05rem .4rem;border-radius:.3rem;white-space:nowrap;
font-size:.8rem;letter-spacing:.02em}
.PASS{background:#d9f2dc;color:#11621d}.FAIL{background:#fbdada;color:#9b1111}
.SKIP{background:#fff1c7;color:#7a5a00}.REFUTED{background:#ecd9f7;color:#5b1a80}
.UNSTABLE{background:#ffe2c4;color:#8a4400}.INCONCLUSIVE{background:#dce8fb;color:#1c4587}
.overview{border:1px solid #ddd;border-radius:.5rem;padding:.5rem .8rem;margin:.4rem 0 .8rem;
background:#fafafb}
.counts{margin:.2rem 0 .4rem}.counts span{margin-right:.9rem;white-space:nowrap}
.groups{display:grid;grid-template-columns:4.2rem 1fr;gap:.25rem .5rem;align-items:start;
margin:.3rem 0 .5rem}
.group{font-weight:700;padding-top:.15rem;color:#333}
.tiles{display:flex;flex-wrap:wrap;gap:.25rem}
.tile{display:inline-flex;gap:.35rem;align-items:baseline;padding:.12rem .45rem;
border-radius:.3rem;text-decoration:none;font-size:.82rem;border:1px solid rgba(0,0,0,.08)}
.tile .tv{font-size:.66rem;font-weight:700;opacity:.85}
.info{display:grid;grid-template-columns:5.2rem 1fr;gap:.05rem .5rem;font-size:.8rem;
color:#333;margin:0}
.info dt{color:#777}.info dd{margin:0}
details.legend{font-size:.8rem;color:#555;margin-top:.3rem}
.cards{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:.7rem}
.card{border:1px solid #ddd;border-left:5px solid #bbb;border-radius:.45rem;padding:.45rem .7rem;
background:#fff;min-width:0}
.card.v-PASS{border-left-color:#3a9a4a}.card.v-FAIL{border-left-color:#c62828}
.card.v-REFUTED{border-left-color:#7b2fa8}.card.v-UNSTABLE{border-left-color:#d9822b}
.card.v-INCONCLUSIVE{border-left-color:#3b6fc4}.card.v-SKIP{border-left-color:#c9a300}
.card header{display:flex;gap:.45rem;align-items:baseline;flex-wrap:wrap}
.card h3{font-size:1rem;margin:0}
.card .sub{font-size:.78rem}
.title{margin:.1rem 0 .25rem;font-weight:600;font-size:.88rem}
.fig{float:right;margin:.1rem 0 .3rem .6rem}
.fig summary{list-style:none;cursor:zoom-in}.fig summary::-webkit-details-marker{display:none}
.fig img{display:block;max-width:17rem;max-height:9.5rem;width:auto;height:auto;
border:1px solid #e4e4e4;border-radius:.25rem;background:#fff}
.fig[open] summary{cursor:zoom-out}
.fig[open] summary::before{content:"";position:fixed;inset:0;background:rgba(0,0,0,.6);z-index:9}
.fig[open] img{position:fixed;inset:0;margin:auto;max-width:96vw;max-height:94vh;z-index:10;
box-shadow:0 0 2rem rgba(0,0,0,.5)}
.statement{margin:.15rem 0 .3rem;padding-left:.5rem;border-left:3px solid #e3e3e3;color:#444;
font-size:.82rem;font-style:italic}
.statement cite{font-style:normal;color:#777}
.headline{margin:.25rem 0;font-size:.88rem;font-variant-numeric:tabular-nums}
.headline .hl{color:#555;font-size:.78rem;display:block}
.ours{font-weight:700}.ours.out{color:#9b1111}.ours.in{color:#11621d}
.evidence{margin:.25rem 0;font-size:.8rem;line-height:1.35;max-height:8.55em;overflow:auto;
white-space:pre-wrap;background:#f6f6f8;border-radius:.25rem;padding:.2rem .4rem;clear:right}
.evidence b{font-weight:700}
.note{margin:.2rem 0;font-size:.8rem;color:#444}
.control{font-weight:700;color:#5b1a80}
details.raw,details.notes{font-size:.8rem;margin-top:.25rem;clear:both}
details.raw summary,details.notes summary{cursor:pointer;color:#1c4587}
table{border-collapse:collapse;margin:.4rem 0;font-size:.8rem}
th,td{border:1px solid #e0e0e0;padding:.15rem .4rem;text-align:left;vertical-align:top}
th{background:#f4f4f6}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.out td.num{color:#9b1111;font-weight:700}
.runs td{white-space:nowrap}.runs .v{color:#555;font-size:.75rem}
.seedv{font-size:.7rem;color:#555}
@media (max-width:60rem){.cards{grid-template-columns:1fr}}
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


def _group(r: Mapping[str, Any]) -> str:
    prefix = str(r["id"]).split("-", 1)[0]
    return prefix if prefix in _GROUPS else str(r["paper"] or "other")


def _distinct(values: Sequence[Any], most: int = 3) -> str:
    """The distinct values joined by `` / `` (the first ``most``, then how many more)."""
    seen = [str(v) for v in dict.fromkeys(v for v in values if v not in (None, ""))]
    if not seen:
        return "not recorded"
    more = f" / {len(seen) - most} more" if len(seen) > most else ""
    return " / ".join(seen[:most]) + more


def _run_info(results: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(what, value) rows from the records' ``run`` blocks; several values joined by ``/``."""
    runs = [r["run"] for r in results if r.get("run")]

    def field(*keys: str) -> list[Any]:
        return [" ".join(str(run[k]) for k in keys if run.get(k) not in (None, "")) or None
                for run in runs]

    machine = [
        ", ".join(p for p in (
            run.get("cpu") and f"CPU {run['cpu']}"
            + (f" ({run['cpu_count']} cores)" if run.get("cpu_count") else ""),
            run.get("gpu") and f"GPU {run['gpu']}",
            run.get("device") and f"device {run['device']}",
            run.get("threads") and f"torch threads {run['threads']}",
            run.get("workers") and not run.get("ray") and f"workers {run['workers']}",
            run.get("ray") and f"sweeps on the Ray cluster at {run['ray']} "
            f"({run.get('ray_nodes')} node(s), {run.get('ray_cpus')} CPUs)",
            run.get("os"),
        ) if p) or None
        for run in runs
    ]
    packages = [
        ", ".join(f"{k} {run[k]}" for k in ("depthscale", "torch", "numpy", "python")
                  if run.get(k)) or None
        for run in runs
    ]
    if not runs:  # a claims.json from before run blocks: the versions the records carry
        packages = [f"depthscale {r['version']}" if r.get("version") else None for r in results]
    return [("machine", _distinct(machine)), ("packages", _distinct(packages)),
            ("started", _distinct(field("started")))]


def _seeds(results: Sequence[Mapping[str, Any]]) -> str:
    parts = []
    for r in results:
        seeds = r.get("seeds") or []
        if seeds:
            parts.append(f"{seeds[0]['seed']}-{seeds[-1]['seed']} ({len(seeds)} per claim)")
        elif r.get("seed") is not None:
            parts.append(str(r["seed"]))
    return _distinct(parts)


def _overview(results: Sequence[dict[str, Any]], anchors: Sequence[str], runs: int) -> str:
    s = _fmt.summary(results)
    counts = "".join(f"<span>{_verdict(v)} {n}</span>" for v, n in s["counts"].items())
    groups: dict[str, list[str]] = {g: [] for g in _GROUPS}
    for r, anchor in zip(results, anchors, strict=True):
        hl = r.get("headline") or {}
        tip = f"{r['id']}: {r['verdict']}" + (f" | {hl['text']}" if hl.get("text") else "")
        groups.setdefault(_group(r), []).append(
            f'<a class="tile {_e(r["verdict"])}" href="#{anchor}" title="{_e(tip)}">'
            f'<span class="tid">{_e(r["id"])}</span><span class="tv">{_e(r["verdict"])}</span>'
            "</a>")
    grid = "".join(f'<div class="group">{_e(g)}</div><div class="tiles">{"".join(tiles)}</div>'
                   for g, tiles in groups.items() if tiles)
    papers: dict[str, str] = {}
    for r in results:
        if r.get("paper_version"):
            papers.setdefault(str(r["paper"]), str(r["paper_version"]))
    info = [("time", f"{_fmt.duration(s['seconds'])} in all"), ("scale", s["scale"]),
            ("seeds", _seeds(results)), *_run_info(results)]
    info += [(f"paper {k}", v) for k, v in papers.items()]
    rows = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in info)
    legend = "".join(f"<li>{_verdict(v)} {_e(m)}</li>" for v, m in _VERDICT_MEANING.items())
    across = (f' &middot; <a href="#across-runs">across runs ({runs} runs)</a>'
              if runs > 1 else "")
    return (
        '<section class="overview">'
        f'<p class="counts">{counts}<span class="meta">{s["total"]} claim(s) &middot; '
        f'results in <a href="claims.json">claims.json</a>{across}</span></p>'
        f'<div class="groups">{grid}</div>'
        f'<dl class="info">{rows}</dl>'
        f'<details class="legend"><summary>what the verdicts mean</summary><ul>{legend}</ul>'
        "</details></section>"
    )


def _headline_html(r: Mapping[str, Any]) -> str:
    hl = r.get("headline")
    if not hl:
        return ('<p class="headline"><span class="hl">no headline recorded (a claims.json from '
                "before headlines): see the raw metrics</span></p>")
    paper, ours, band, inside = headline_parts(hl)
    cls = "ours" + {True: " in", False: " out", None: ""}[inside]
    band = f", {_e(band)}" if band else ""
    metric = f" ({_e(hl['metric'])})" if hl.get("metric") else ""
    return (f'<p class="headline"><span class="hl">{_e(hl["label"])}{metric}</span> '
            f'paper: {_e(paper)}, <span class="{cls}">{_e(ours)}</span>{band}</p>')


def _raw(r: Mapping[str, Any], base: Path | None) -> str:
    rows = []
    for name, value, band in _fmt.quantities(dict(r)):
        inside = _fmt.in_band(value, band)
        shown = "not measured" if value is None else _fmt.number(value)
        rows.append(f'<tr class="{"out" if inside is False else ""}"><td>{_e(name)}</td>'
                    f'<td class="num">{_e(shown)}</td>'
                    f"<td>{_e(_fmt.band_text(band)) if band else ''}</td></tr>")
    table = ("<table><thead><tr><th>measured</th><th>value</th><th>band</th></tr></thead>"
             f"<tbody>{''.join(rows)}</tbody></table>") if rows else "<p>nothing measured</p>"
    data = ""
    if r["data"]:
        name = _e(PureWindowsPath(r["data"]).name)
        data = (f'<p><a href="{_source(r["data"], base, "text/csv")}" download="{name}">'
                f'data (CSV): {_e(r["data"])}</a></p>')
    opened = "" if r.get("headline") else " open"
    n = len(rows)
    return (f'<details class="raw"{opened}><summary>raw metrics ({n}) and data</summary>'
            f"{table}{data}</details>")


def _figure(r: Mapping[str, Any], base: Path | None) -> str:
    if not r["figure"]:
        return ""
    src = _source(r["figure"], base, "image/png")
    return (f'<details class="fig"><summary title="click to enlarge, click again to close">'
            f'<img src="{src}" alt="figure for claim {_e(r["id"])}"></summary></details>')


def _card(anchor: str, r: Mapping[str, Any], base: Path | None,
          others: Sequence[Mapping[str, Any]]) -> str:
    hl = r.get("headline") or {}
    where = " ".join([str(r["paper"])] + ([str(hl["ref"])] if hl.get("ref") else []))
    run = r.get("run") or {}
    scale = str(r["scale"]) + (" (changed by --set)" if run.get("set") else "") + (
        ", judged from stored runs" if run.get("from_stored") else "")
    sub = " &middot; ".join(_e(p) for p in (where, scale, _fmt.duration(r["seconds"])))
    out = [
        f'<article class="card v-{_e(r["verdict"])}" id="{anchor}">',
        f"<header>{_verdict(r['verdict'])}<h3>{_e(r['id'])}</h3>"
        f'<span class="sub">{sub}</span></header>',
        _figure(r, base),
        f'<p class="title">{_e(r["title"])}</p>',
    ]
    if hl.get("statement"):
        cite = f" <cite>({_e(hl['ref'])})</cite>" if hl.get("ref") else ""
        out.append(f'<p class="statement">{_e(hl["statement"])}{cite}</p>')
    out.append(_headline_html(r))
    if r.get("control"):
        out.append(f'<p class="note control">Negative control: {_e(r["control"])} (a correct '
                   "check FAILs here)</p>")
    if r["reason"] and r["verdict"] != "PASS":
        out.append(f'<p class="evidence"><b>Evidence:</b> {_e(r["reason"])}</p>')
    if r.get("seeds"):
        out.append(f'<p class="note">{_e(_fmt.seeds_text(dict(r)).strip())}</p>')
    if len(others) > 1:
        each = ", ".join(f"{run_label(o)}: {o['verdict']}" for o in others)
        out.append(f'<p class="note">runs in this folder: {_e(each)}</p>')
    if r["reason"] and r["verdict"] == "PASS":
        out.append(f'<details class="notes"><summary>notes</summary>{_e(r["reason"])}'
                   "</details>")
    out += [_raw(r, base), "</article>"]
    return "\n".join(o for o in out if o)


def _across(columns: Sequence[str],
            rows: Sequence[tuple[str, Mapping[str, Mapping[str, Any]]]],
            anchors: Mapping[str, str]) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = []
    for cid, cells in rows:
        name = (f'<a href="#{anchors[cid]}">{_e(cid)}</a>' if cid in anchors else _e(cid))
        tds = []
        for c in columns:
            rec = cells.get(c)
            if rec is None:
                tds.append("<td></td>")
                continue
            hl = rec.get("headline") or {}
            value = ("" if hl.get("ours") is None
                     else f' <span class="v">{_e(_fmt.number(hl["ours"]))}</span>')
            seeds = "".join(f" {s['seed']}:{s['verdict'][:4]}" for s in rec.get("seeds") or [])
            seeds = f' <span class="seedv">{_e(seeds.strip())}</span>' if seeds else ""
            tds.append(f"<td>{_verdict(rec['verdict'])}{value}{seeds}</td>")
        body.append(f"<tr><td>{name}</td>{''.join(tds)}</tr>")
    return ('<section id="across-runs"><h2>Across runs</h2><p class="meta">Each run this folder '
            "holds (its runs.jsonl and claims.json): the latest verdict of every claim in each, "
            "with its headline value.</p>"
            f'<table class="runs"><thead><tr><th>claim</th>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></section>")


def render_index_html(
    results: list[dict[str, Any]], *, title: str = "depthscale reproduce",
    base: Path | None = None, history: Sequence[Mapping[str, Any]] | None = None,
) -> str:
    """The page as a string (results are validated first). Figures and CSVs are embedded from
    the folder ``base`` (their paths are relative to it); without ``base`` they are linked.
    ``history``: earlier records of the folder (runs.jsonl) for the "across runs" table."""
    clean = validate_results(results)
    past = [validate_result(h, i) for i, h in enumerate(history or [])]
    anchors = [_anchor(i, r["id"]) for i, r in enumerate(clean)]
    columns, rows = runs_table(past, clean)
    by_id = {cid: [cells[c] for c in columns if c in cells] for cid, cells in rows}
    cards = "\n".join(
        _card(a, r, base, by_id.get(r["id"], []) if not r.get("control") else [])
        for a, r in zip(anchors, clean, strict=True))
    ids = {r["id"]: a for a, r in zip(anchors, clean, strict=True)}
    across = _across(columns, rows, ids) if len(columns) > 1 else ""
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
{_overview(clean, anchors, len(columns))}
<main class="cards">
{cards}
</main>
{across}
</body>
</html>
"""


def write_index_html(
    out_dir: Path, results: list[dict[str, Any]], *, title: str = "depthscale reproduce",
    history: Sequence[Mapping[str, Any]] | None = None,
) -> Path:
    """Write ``out_dir/index.html`` atomically, figures and CSVs embedded from ``out_dir``;
    every user-provided string is HTML-escaped. ``history`` defaults to the folder's
    runs.jsonl."""
    out_dir = Path(out_dir)
    if history is None:
        history = read_history(out_dir)
    page = render_index_html(results, title=title, base=out_dir, history=history)
    path = out_dir / INDEX_FILE
    with atomic_write(path) as fh:
        fh.write(page)
    return path


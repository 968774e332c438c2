"""index.html (read back with the stdlib HTML parser, as a reader sees it) and the console
table."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.table import Table

from depthscale.report import (
    ClaimSchemaError,
    console_table,
    headline_record,
    page_problems,
    read_page,
    write_index_html,
)


def headline(measured: dict[str, float], band: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return headline_record(metric="slope", ci_keys=("slope_lo", "slope_hi"),
                           label="log-log slope of the error in L", paper="-1/2 (Fig. 5)",
                           measured=measured, band=band, ref="Fig. 5",
                           statement="The error falls like L^(-1/2) (Fig. 5).", **kw)


def claim(cid: str, verdict: str, **changes: Any) -> dict[str, Any]:
    result: dict[str, Any] = {
        "id": cid,
        "title": f"title of {cid}",
        "paper": "nfd",
        "verdict": verdict,
        "reason": "",
        "measured": {"slope": -0.5, "slope_lo": -0.55, "slope_hi": -0.45},
        "band": {"slope": [-0.6, -0.4]},
        "scale": "quick",
        "seconds": 2.0,
        "figure": f"{cid}.png",
        "data": f"{cid}.csv",
        "seed": 0,
    }
    result.update(changes)
    result.setdefault("headline", headline(result["measured"], result["band"]))
    return result


RESULTS = [
    claim("nfd-transfer", "PASS"),
    claim("nfd-limit", "FAIL", measured={"slope": -0.1}, reason="slope too shallow"),
    claim("laws-cnn", "SKIP", measured={}, figure=None, data=None, reason="needs CIFAR-10"),
    claim("xss", "PASS", title="<script>alert('x')</script>", reason="a < b & c",
          figure="figs/x y.png"),
]


@pytest.fixture()
def page(tmp_path: Path) -> str:
    path = write_index_html(tmp_path, RESULTS)
    assert path == tmp_path / "index.html"
    return path.read_text(encoding="utf-8")


def test_every_card_has_verdict_headline_and_evidence_for_non_pass(page: str) -> None:
    read = read_page(page)
    assert [c.claim for c in read.cards] == [r["id"] for r in RESULTS]
    assert [c.verdict for c in read.cards] == [r["verdict"] for r in RESULTS]
    first = read.cards[0]
    assert "paper: -1/2 (Fig. 5), ours: -0.5 [-0.55, -0.45], band [-0.6, -0.4]" in first.headline
    assert first.statement == "The error falls like L^(-1/2) (Fig. 5). (Fig. 5)"
    assert first.evidence == ""  # a PASS card keeps its notes behind a disclosure
    assert read.cards[1].evidence == "Evidence: slope too shallow"
    assert "ours: -0.1," in read.cards[1].headline  # its CI keys were not measured
    assert read.cards[2].evidence == "Evidence: needs CIFAR-10"
    assert "ours: not measured" in read.cards[2].headline
    assert read.tiles == {r["id"]: r["verdict"] for r in RESULTS}
    assert read.runs_columns == []  # one run: no across-runs table
    # figures: none of the files exist beside the page, so each is linked by its path
    assert [c.figure for c in read.cards] == ["nfd-transfer.png", "nfd-limit.png", None,
                                              "figs/x%20y.png"]
    assert page_problems(read) == [f"{cid}: figure {src!r} does not resolve" for cid, src in
                                   (("nfd-transfer", "nfd-transfer.png"),
                                    ("nfd-limit", "nfd-limit.png"), ("xss", "figs/x%20y.png"))]


def test_overview_counts_time_scale_and_run_info(tmp_path: Path) -> None:
    run = {"started": "2026-01-02T03:04:05+00:00", "cpu": "Test CPU 9000", "cpu_count": 2,
           "gpu": None, "device": "cpu", "threads": 1, "os": "Linux 6", "depthscale": "0.1.0",
           "torch": "2.13.0", "numpy": "2.4.6", "python": "3.11.7"}
    results = [{**r, "run": run, "paper_version": "arXiv 2512.21075v1"} for r in RESULTS]
    page = write_index_html(tmp_path, results).read_text(encoding="utf-8")
    counts = re.search(r'<p class="counts">(.*?)</p>', page)
    assert counts is not None
    assert [int(n) for n in re.findall(r"</span> (\d+)</span>", counts.group(1))] == [2, 1, 1]
    text = re.sub(r"<[^>]+>", " ", page)
    for shown in ("8.0 s in all", "quick", "CPU Test CPU 9000 (2 cores)", "torch threads 1",
                  "depthscale 0.1.0, torch 2.13.0, numpy 2.4.6, python 3.11.7",
                  "arXiv 2512.21075v1", "2026-01-02T03:04:05+00:00"):
        assert shown in text, shown


def test_index_escapes_user_text_and_is_offline(page: str) -> None:
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "a &lt; b &amp; c" in page
    assert not re.search(r"(src|href)=\"(https?:)?//", page)
    assert "http://" not in page and "https://" not in page
    assert "<style>" in page and "<script" not in page


def test_index_embeds_figures_and_data_that_exist_beside_it(tmp_path: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    (tmp_path / "nfd-transfer.png").write_bytes(png)
    (tmp_path / "nfd-transfer.csv").write_text("depth,lr\n2,0.1\n")
    (tmp_path / "figs").mkdir()
    (tmp_path / "figs" / "x y.png").write_bytes(png + b"another")
    page = write_index_html(tmp_path, RESULTS).read_text(encoding="utf-8")
    read = read_page(page)
    first = read.cards[0].figure
    assert first is not None and first.startswith("data:image/png;base64,")
    assert base64.b64decode(first.split(",", 1)[1]) == png
    assert page.count(f"{first}\"") == 1  # the thumbnail opens full size without a second copy
    assert read.cards[1].figure == "nfd-limit.png"  # missing: linked, not dropped
    csv = re.search(r'<a href="data:text/csv;base64,([^"]+)" download="nfd-transfer.csv">', page)
    assert csv is not None and base64.b64decode(csv.group(1)) == b"depth,lr\n2,0.1\n"
    assert (tmp_path / "nfd-transfer.png").read_bytes() == png  # the files stay beside it
    (tmp_path / "nfd-limit.png").write_bytes(png)
    page = write_index_html(tmp_path, RESULTS).read_text(encoding="utf-8")
    assert page_problems(read_page(page), tmp_path) == []


def test_raw_metrics_sit_behind_a_disclosure_and_mark_misses(page: str) -> None:
    raw = re.findall(r'<details class="raw"( open)?><summary>raw metrics \((\d+)\)', page)
    assert raw == [("", "3"), ("", "1"), ("", "1"), ("", "3")]
    assert '<tr class="out"><td>slope</td><td class="num">-0.1</td>' in page
    assert "[-0.6, -0.4]" in page


def test_a_page_without_headlines_still_renders(tmp_path: Path) -> None:
    old = [{k: v for k, v in r.items() if k != "headline"} for r in RESULTS]
    page = write_index_html(tmp_path, old).read_text(encoding="utf-8")
    read = read_page(page)
    assert all("no headline recorded" in c.headline for c in read.cards)
    assert page.count('<details class="raw" open>') == len(old)  # the numbers are in view


def test_figure_opens_full_size_without_a_script(page: str) -> None:
    fig = re.search(r'<details class="fig"><summary[^>]*><img src="nfd-transfer.png"', page)
    assert fig is not None
    assert ".fig[open] img{position:fixed" in page


def test_index_validates_and_keeps_old_page(tmp_path: Path) -> None:
    path = write_index_html(tmp_path, RESULTS[:1])
    before = path.read_text()
    with pytest.raises(ClaimSchemaError, match="claim 'bad'"):
        write_index_html(tmp_path, [claim("bad", "MAYBE")])
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["index.html"]


def test_page_problems_name_what_a_reader_misses() -> None:
    page = read_page('<article class="card" id="c0"><header><span class="verdict FAIL">FAIL'
                     '</span><h3>x</h3></header><img src="https://example.org/a.png">'
                     "</article>")
    assert page_problems(page) == [
        "x: no headline", "x: FAIL without evidence",
        "x: figure 'https://example.org/a.png' does not resolve",
        "external URL at character 105: 'https://example.org/a.png\">"
        "</article>'",
    ]
    assert page_problems(read_page("<p>nothing</p>")) == ["the page has no claim cards"]


def _console(results: list[dict[str, Any]], **kw: Any) -> str:
    table = console_table(results, **kw)
    assert isinstance(table, Table)
    assert table.row_count == len(results)
    console = Console(width=200, record=True, color_system=None)
    console.print(table)
    return console.export_text()


def test_console_table_shows_the_headline_not_every_metric() -> None:
    text = _console(RESULTS)
    for r in RESULTS:
        assert r["id"] in text and r["verdict"] in text
    assert "PASS 2  FAIL 1  SKIP 1" in text
    assert "<script>alert('x')</script>" in text  # not eaten as rich markup
    assert "ours: -0.5 [-0.55, -0.45], band [-0.6, -0.4]" in text
    assert "ours: -0.1, band [-0.6, -0.4] (outside)" in text
    assert "slope_lo" not in text  # raw metrics only with details
    detailed = _console(RESULTS, details=True)
    assert "slope_lo = -0.55" in detailed and "measured (band)" in detailed

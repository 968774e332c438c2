"""index.html and the console table."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.table import Table

from depthscale.report import ClaimSchemaError, console_table, write_index_html


def claim(cid: str, verdict: str, **changes: Any) -> dict[str, Any]:
    result: dict[str, Any] = {
        "id": cid,
        "title": f"title of {cid}",
        "paper": "nfd",
        "verdict": verdict,
        "reason": "",
        "measured": {"slope": -0.5},
        "band": {"slope": [-0.6, -0.4]},
        "scale": "quick",
        "seconds": 2.0,
        "figure": f"{cid}.png",
        "data": f"{cid}.csv",
    }
    result.update(changes)
    return result


RESULTS = [
    claim("lr-transfer", "PASS"),
    claim("depth-limit", "FAIL", measured={"slope": -0.1}, reason="slope too shallow"),
    claim("laws-cnn", "SKIP", measured={}, figure=None, data=None, reason="needs CIFAR-10"),
    claim("xss", "PASS", title="<script>alert('x')</script>", reason="a < b & c",
          figure="figs/x y.png"),
]


@pytest.fixture()
def page(tmp_path: Path) -> str:
    path = write_index_html(tmp_path, RESULTS)
    assert path == tmp_path / "index.html"
    return path.read_text(encoding="utf-8")


def test_index_lists_every_claim_and_verdict(page: str) -> None:
    for r in RESULTS:
        assert r["id"] in page
        assert f'<span class="verdict {r["verdict"]}">{r["verdict"]}</span>' in page
    assert "<title>depthscale reproduce</title>" in page
    counts = re.search(r'<p class="counts">(.*?)</p>', page)
    assert counts is not None
    assert [int(n) for n in re.findall(r"</span> (\d+)", counts.group(1))] == [2, 1, 1]
    assert "8.0 s" in page  # total seconds
    assert "scale quick" in page


def test_index_has_images_links_and_bands(page: str) -> None:
    imgs = re.findall(r'<img src="([^"]+)"', page)
    assert imgs == ["lr-transfer.png", "depth-limit.png", "figs/x%20y.png"]
    assert '<a href="lr-transfer.csv" download="lr-transfer.csv">' in page  # no file: a link
    assert "laws-cnn.csv" not in page
    assert "slope = <span class=\"v\">-0.5</span>" in page
    assert "[-0.6, -0.4]" in page
    assert 'class="q out"' in page  # depth-limit's slope lies outside its band
    assert "needs CIFAR-10" in page and "slope too shallow" in page


def test_index_escapes_user_text_and_is_offline(page: str) -> None:
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "a &lt; b &amp; c" in page
    assert not re.search(r"(src|href)=\"(https?:)?//", page)
    assert "<style>" in page


def test_index_embeds_figures_and_data_that_exist_beside_it(tmp_path: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    (tmp_path / "lr-transfer.png").write_bytes(png)
    (tmp_path / "lr-transfer.csv").write_text("depth,lr\n2,0.1\n")
    page = write_index_html(tmp_path, RESULTS).read_text(encoding="utf-8")
    imgs = re.findall(r'<img src="([^"]+)"', page)
    assert imgs[0].startswith("data:image/png;base64,")
    assert base64.b64decode(imgs[0].split(",", 1)[1]) == png
    assert imgs[1:] == ["depth-limit.png", "figs/x%20y.png"]  # missing: linked, not dropped
    csv = re.search(r'<a href="data:text/csv;base64,([^"]+)" download="lr-transfer.csv">', page)
    assert csv is not None and base64.b64decode(csv.group(1)) == b"depth,lr\n2,0.1\n"
    assert (tmp_path / "lr-transfer.png").read_bytes() == png  # the files stay beside it


def test_index_validates_and_keeps_old_page(tmp_path: Path) -> None:
    path = write_index_html(tmp_path, RESULTS[:1])
    before = path.read_text()
    with pytest.raises(ClaimSchemaError, match="claim 'bad'"):
        write_index_html(tmp_path, [claim("bad", "MAYBE")])
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["index.html"]


def test_console_table_renders() -> None:
    table = console_table(RESULTS)
    assert isinstance(table, Table)
    assert table.row_count == len(RESULTS)
    console = Console(width=160, record=True, color_system=None)
    console.print(table)
    text = console.export_text()
    for r in RESULTS:
        assert r["id"] in text and r["verdict"] in text
    assert "PASS 2  FAIL 1  SKIP 1" in text
    assert "<script>alert('x')</script>" in text  # not eaten as rich markup

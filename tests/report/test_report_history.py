"""runs.jsonl, the folder's history of finished claim records, and the "across runs" table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from depthscale.report import (
    HISTORY_FILE,
    append_history,
    read_history,
    read_page,
    runs_table,
    write_index_html,
)


def record(cid: str, verdict: str, scale: str = "quick", seed: int = 0, **changes: Any
           ) -> dict[str, Any]:
    r: dict[str, Any] = {
        "id": cid, "title": f"title of {cid}", "paper": "nfd", "verdict": verdict,
        "reason": "" if verdict == "PASS" else "why", "measured": {"x": 1.0}, "band": {},
        "scale": scale, "seconds": 1.0, "figure": None, "data": None, "seed": seed,
        "version": "0.1.0",
        "headline": {"label": "x", "paper": "1", "ours": 1.0 if scale == "quick" else 2.0,
                     "ci": None, "band": None, "text": "paper: 1, ours: 1"},
    }
    r.update(changes)
    return r


def test_append_and_read_back_skipping_a_torn_line(tmp_path: Path) -> None:
    assert read_history(tmp_path) == []
    append_history(tmp_path, record("a", "PASS"))
    path = tmp_path / HISTORY_FILE
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"id": "b", "ver')  # a write cut short by a kill
    append_history(tmp_path, record("a", "FAIL", scale="medium"))
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 and json.loads(lines[2])["scale"] == "medium"
    back = read_history(path)
    assert [(r["id"], r["verdict"], r["scale"]) for r in back] == [("a", "PASS", "quick"),
                                                                   ("a", "FAIL", "medium")]


def test_runs_table_one_column_per_run_latest_record_wins() -> None:
    history = [record("a", "INCONCLUSIVE"), record("b", "PASS"),
               record("a", "PASS", scale="medium"), record("a", "FAIL"),
               record("a/control", "FAIL", control="wrong"),
               record("b", "UNSTABLE", seeds=[
                   {"seed": 0, "verdict": "PASS", "measured": {}},
                   {"seed": 1, "verdict": "FAIL", "measured": {}}])]
    columns, rows = runs_table(history)
    assert columns == ["quick seed 0", "medium seed 0", "quick seed 0 control",
                       "quick seeds 0-1"]
    by_id = {cid: {c: r["verdict"] for c, r in cells.items()} for cid, cells in rows}
    assert by_id == {
        "a": {"quick seed 0": "FAIL", "medium seed 0": "PASS", "quick seed 0 control": "FAIL"},
        "b": {"quick seed 0": "PASS", "quick seeds 0-1": "UNSTABLE"},
    }
    columns, _ = runs_table([record("a", "PASS"), record("a", "PASS", version="0.2.0")])
    assert columns == ["quick seed 0 v0.1.0", "quick seed 0 v0.2.0"]
    # a run at changed settings (reproduce --set) is another column, not the medium run
    columns, _ = runs_table([record("a", "INCONCLUSIVE", scale="medium"),
                             record("a", "FAIL", scale="medium",
                                    run={"set": "archs.vit=null", "from_stored": True})])
    assert columns == ["medium seed 0", "medium seed 0 --set"]


def test_a_card_says_when_settings_were_changed_or_runs_judged_from_storage(
    tmp_path: Path
) -> None:
    write_index_html(tmp_path, [record("a", "FAIL", scale="medium",
                                       run={"set": "archs.vit=null", "from_stored": True}),
                                record("b", "PASS", scale="medium", run={"set": None})])
    html = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert "medium (changed by --set), judged from stored runs" in html
    assert html.count("(changed by --set)") == 1


def test_page_shows_across_runs_only_when_the_folder_holds_two_runs(tmp_path: Path) -> None:
    quick = [record("a", "INCONCLUSIVE"), record("b", "PASS")]
    for r in quick:
        append_history(tmp_path, r)
    page = read_page(write_index_html(tmp_path, quick).read_text(encoding="utf-8"))
    assert page.runs_columns == [] and "across-runs" not in page.html
    medium = record("a", "PASS", scale="medium")
    append_history(tmp_path, medium)
    latest = [medium, quick[1]]  # claims.json keeps the latest record per claim
    page = read_page(write_index_html(tmp_path, latest).read_text(encoding="utf-8"))
    assert page.runs_columns == ["quick seed 0", "medium seed 0"]
    assert page.runs_rows == [["a", "INCONCLUSIVE 1", "PASS 2"], ["b", "PASS 1", ""]]
    assert "across runs (2 runs)" in page.html
    card = next(c for c in page.cards if c.claim == "a")
    assert card.verdict == "PASS"
    assert "runs in this folder: quick seed 0: INCONCLUSIVE, medium seed 0: PASS" in page.html
    assert card.anchor and f'href="#{card.anchor}">a</a>' in page.html

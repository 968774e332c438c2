"""The README's claims table is rendered from docs/verdicts.json by tools/verdict_ledger.py, and
``record`` merges claims.json files into that ledger: later runs replace, older ones do not,
controls and SKIPs are left out, and a README without the table's markers is refused with
nothing written."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from tool_module import load_tool

from depthscale.claims import CLAIMS

ROOT = Path(__file__).resolve().parents[2]


def _module() -> ModuleType:
    return load_tool("verdict_ledger")


def _tool(capsys: pytest.CaptureFixture[str], *args: str | Path) -> SimpleNamespace:
    """The tool's exit code and what it printed, as a finished process would give them."""
    code = _module().main([str(a) for a in args])
    out, err = capsys.readouterr()
    return SimpleNamespace(returncode=code, stdout=out, stderr=err)


def _record(cid: str, scale: str, verdict: str, started: str, **extra: Any) -> dict[str, Any]:
    return {"id": cid, "title": "t", "paper": cid.split("-")[0], "verdict": verdict,
            "reason": "" if verdict == "PASS" else "why", "measured": {}, "band": {},
            "scale": scale, "seconds": 1.0, "figure": None, "data": None,
            "run": {"started": started, "set": None, "device": "cpu"}, **extra}


def _ledger(tmp_path: Path) -> tuple[Path, Path]:
    entry = {"device": None, "note": "rerun pending", "set": None, "started": None,
             "verdict": "FAIL"}
    claims = {cid: {"summary": f"the claim {cid}", "quick": {**entry, "note": ""}}
              for cid in CLAIMS}
    claims["laws-transfer"]["medium"] = entry
    ledger = tmp_path / "verdicts.json"
    ledger.write_text(json.dumps({"about": "a test ledger", "claims": claims}), encoding="utf-8")
    readme = tmp_path / "README.md"
    m = _module()
    readme.write_text(f"# title\n\n{m.BEGIN}\nold table\n{m.END}\n\nafter\n", encoding="utf-8")
    return ledger, readme


def _row(readme: Path, cid: str) -> str:
    return next(line for line in readme.read_text(encoding="utf-8").splitlines()
                if line.startswith(f"| `{cid}` |"))


def test_the_readme_table_is_the_ledgers_rendering(capsys: pytest.CaptureFixture[str]) -> None:
    done = _tool(capsys, "readme", "--check")
    assert done.returncode == 0, done.stderr
    for page in (ROOT / "README.md", ROOT / "docs" / "index.md"):  # the count they give
        words = " ".join(page.read_text(encoding="utf-8").split())
        assert f"reruns {len(CLAIMS)} claims of three papers" in words


def test_record_merges_later_runs_and_renders_the_table(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    ledger, readme = _ledger(tmp_path)
    assert "medium" in CLAIMS["laws-transfer"].settings
    assert "medium" not in CLAIMS["chizat-thm4"].settings
    runs = tmp_path / "claims.json"
    runs.write_text(json.dumps([
        _record("laws-transfer", "medium", "PASS", "2026-12-07T12:33:00+00:00"),
        _record("laws-transfer/control", "medium", "FAIL", "2026-12-07T12:34:00+00:00",
                control="exponent 0"),
        _record("nfd-prop1", "quick", "SKIP", "2026-12-07T12:35:00+00:00"),
    ]), encoding="utf-8")
    done = _tool(capsys, "--ledger", ledger, "--readme", readme, "record", runs)
    assert done.returncode == 0, done.stderr
    assert "laws-transfer (medium): FAIL -> PASS" in done.stdout
    assert "nfd-prop1 (quick): SKIP not recorded" in done.stdout
    merged = json.loads(ledger.read_text(encoding="utf-8"))["claims"]
    assert set(merged) == set(CLAIMS)  # the control's record made no entry
    entry = merged["laws-transfer"]["medium"]
    assert entry == {"device": "cpu", "note": "", "set": None,
                     "started": "2026-12-07T12:33:00+00:00", "verdict": "PASS"}
    text = readme.read_text(encoding="utf-8")
    head = "| claim | the paper's statement | quick | medium |"
    m = _module()
    assert text.startswith(f"# title\n\n{m.BEGIN}\n{head}")
    assert text.endswith(f"{m.END}\n\nafter\n") and "old table" not in text
    assert _row(readme, "laws-transfer") == ("| `laws-transfer` | the claim laws-transfer | FAIL "
                                             "| PASS |")
    assert _row(readme, "nfd-prop1").endswith("| FAIL | as quick |")  # no medium settings
    assert _row(readme, "laws-table1").endswith("| FAIL | not run |")
    assert len([line for line in text.splitlines() if line.startswith("| `")]) == len(CLAIMS)

    older = tmp_path / "older.json"
    older.write_text(json.dumps([_record("laws-transfer", "medium", "INCONCLUSIVE",
                                         "2026-12-01T00:00:00+00:00")]), encoding="utf-8")
    done = _tool(capsys, "--ledger", ledger, "--readme", readme, "record", older)
    assert done.returncode == 0, done.stderr
    assert "kept PASS of 2026-12-07T12:33:00+00:00" in done.stdout
    assert _row(readme, "laws-transfer").endswith("| FAIL | PASS |")


def test_a_readme_without_markers_or_a_claim_without_summary_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger, readme = _ledger(tmp_path)
    readme.write_text("# no table here\n", encoding="utf-8")
    runs = tmp_path / "claims.json"
    runs.write_text(json.dumps([_record("nfd-prop1", "quick", "PASS", "2026-12-07T00:00:00")]),
                    encoding="utf-8")
    before = ledger.read_text(encoding="utf-8")
    done = _tool(capsys, "--ledger", ledger, "--readme", readme, "record", runs)
    assert done.returncode == 2 and "needs one line" in done.stderr
    assert ledger.read_text(encoding="utf-8") == before  # nothing written
    assert readme.read_text(encoding="utf-8") == "# no table here\n"

    ledger, readme = _ledger(tmp_path)
    data = json.loads(ledger.read_text(encoding="utf-8"))
    del data["claims"]["nfd-prop1"]["summary"]
    ledger.write_text(json.dumps(data), encoding="utf-8")
    done = _tool(capsys, "--ledger", ledger, "--readme", readme, "readme")
    assert done.returncode == 2 and "nfd-prop1 has no 'summary'" in done.stderr
    assert "old table" in readme.read_text(encoding="utf-8")

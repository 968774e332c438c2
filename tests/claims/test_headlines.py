"""Each claim's headline is registry data: declared in its ``@claim``, required, validated, and
turned into the record's ``headline`` by reproduce; ``tools/claims_table.py`` prints the table
of docs/results.md from a claims.json and the registry. (That every headline metric is measured
at the smoke settings is checked in test_reproduce.py, on the run of every claim.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from depthscale.claims import CLAIMS
from depthscale.claims.registry import Headline, claim
from depthscale.errors import ConfigError
from depthscale.report import headline_record

ROOT = Path(__file__).resolve().parents[2]
LEAD = {"metric": "slope", "paper": "-1/2", "label": "slope", "ref": "Fig. 5",
        "statement": "It falls like L^(-1/2) (Fig. 5)."}


def _register(**kw: object) -> None:
    def run(_ctx: object) -> object:
        raise AssertionError("not run")

    claim("test-headline", "nfd", "t", quick={}, full={}, smoke={}, **kw)(run)  # type: ignore[arg-type]


def test_every_claim_declares_a_headline_with_the_papers_words() -> None:
    assert len(CLAIMS) == 38
    for cid, c in CLAIMS.items():
        h = c.headline
        assert isinstance(h, Headline), cid
        assert h.paper and h.label and h.ref and h.statement, cid
        assert "(" in h.statement and h.statement.rstrip().endswith("."), cid


def test_registering_without_a_headline_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(CLAIMS, "test-headline", raising=False)
    with pytest.raises(ConfigError, match="'test-headline' has no headline"):
        _register()
    with pytest.raises(ConfigError, match=r"headline: .*unexpected keyword argument 'colour'"):
        _register(headline={**LEAD, "colour": "red"})
    with pytest.raises(ConfigError, match="headline: statement must be a non-empty string"):
        _register(headline={**LEAD, "statement": " "})
    with pytest.raises(ConfigError, match="ci must be a pair of keys"):
        _register(headline={**LEAD, "ci": ("lo",)})
    assert "test-headline" not in CLAIMS
    _register(headline={**LEAD, "ci": ["{metric}_lo", "{metric}_hi"]})
    assert CLAIMS.pop("test-headline").headline == Headline(**{**LEAD,  # type: ignore[arg-type]
                                                               "ci": ("{metric}_lo",
                                                                      "{metric}_hi")})


def test_the_first_measured_candidate_is_the_headline() -> None:
    h = Headline(metric=("alpha_vit", "alpha_cnn"), ci=("{metric}_low", "{metric}_high"),
                 paper="-3/2", label="alpha", ref="Table 1", statement="s (Table 1).")
    assert h.pick({"alpha_cnn": -1.4}) == ("alpha_cnn", ("alpha_cnn_low", "alpha_cnn_high"))
    assert h.pick({"alpha_vit": -1.0, "alpha_cnn": -1.4})[0] == "alpha_vit"
    assert h.pick({})[0] == "alpha_vit"  # nothing measured: the first, reported as missing
    rec = headline_record(metric="alpha_cnn", ci_keys=("alpha_cnn_low", "alpha_cnn_high"),
                          label="alpha", paper="-3/2", measured={"alpha_cnn": -1.4,
                                                                 "alpha_cnn_low": -1.6,
                                                                 "alpha_cnn_high": -1.2},
                          band={"alpha_cnn": [-1.9, -1.0]})
    assert rec["text"] == "paper: -3/2, ours: -1.4 [-1.6, -1.2], band [-1.9, -1]"
    missing = headline_record(metric="x", label="x", paper="0", measured={}, band={},
                              criterion="falls iff slope <= -0.3")
    assert missing["text"] == "paper: 0, ours: not measured, band: falls iff slope <= -0.3"


def test_claims_table_tool_prints_the_results_table(tmp_path: Path) -> None:
    lead = CLAIMS["laws-table1"].headline
    assert lead is not None
    records = [
        {"id": "laws-table1", "title": "t", "paper": "laws", "verdict": "INCONCLUSIVE",
         "reason": "why", "measured": {"alpha_cnn1d": -1.52}, "band": {"alpha_cnn1d": [-1.9, -1]},
         "scale": "quick", "seconds": 1.0, "figure": None, "data": None,
         "headline": headline_record(metric="alpha_cnn1d", label=lead.label, paper=lead.paper,
                                     measured={"alpha_cnn1d": -1.52},
                                     band={"alpha_cnn1d": [-1.9, -1.0]})},
        {"id": "nfd-prop1/control", "title": "t", "paper": "nfd", "verdict": "FAIL",
         "reason": "why", "measured": {}, "band": {}, "scale": "quick", "seconds": 1.0,
         "figure": None, "data": None, "control": "wrong"},
    ]
    path = tmp_path / "claims.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "claims_table.py"), str(path)],
                          capture_output=True, text=True, check=False,
                          env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "| id | paper's result | headline: paper vs ours | verdict |"
    assert lines[2].startswith("| `laws-table1` | The leading-order theoretical prediction")
    assert "paper: alpha = -1.339 (CNN, CIFAR-10)" in lines[2]
    assert "ours: -1.52, band [-1.9, -1]" in lines[2] and lines[2].endswith("| INCONCLUSIVE |")
    assert len(lines) == 3  # controls are not claims of the table
    medium = [{**records[0], "scale": "medium", "verdict": "PASS", "reason": "",
               "headline": {**records[0]["headline"], "ours": -1.3}}]
    (tmp_path / "medium").mkdir()
    (tmp_path / "medium" / "claims.json").write_text(json.dumps(medium), encoding="utf-8")
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "claims_table.py"), str(path),
                           str(tmp_path / "medium")], capture_output=True, text=True,
                          check=False, env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""})
    assert done.returncode == 0, done.stderr
    row = done.stdout.splitlines()[2]
    assert "ours: -1.52 (quick); -1.3 (medium), band [-1.9, -1]" in row
    assert row.endswith("| quick: INCONCLUSIVE; medium: PASS |")

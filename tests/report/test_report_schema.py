"""Claim-result contract: validation, claims.json round trip, its atomic write."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from depthscale.report import (
    ClaimSchemaError,
    read_claims_json,
    validate_result,
    validate_results,
    write_claims_json,
)


def good(cid: str = "nfd-fig1", **changes: Any) -> dict[str, Any]:
    result: dict[str, Any] = {
        "id": cid,
        "title": "Depth-muP transfers the learning rate",
        "paper": "nfd",
        "verdict": "PASS",
        "reason": "",
        "measured": {"slope": -0.52, "spread": 3},
        "band": {"slope": [-0.6, -0.4], "spread": [None, 5.0]},
        "scale": "quick",
        "seconds": 1.25,
        "figure": "nfd-fig1.png",
        "data": "nfd-fig1.csv",
    }
    result.update(changes)
    return result


def without(key: str) -> dict[str, Any]:
    r = good()
    del r[key]
    return r


def test_good_result_is_accepted_and_normalised() -> None:
    out = validate_result(good(band={"slope": (-0.6, -0.4)}, figure=None, data=None))
    assert out["measured"] == {"slope": -0.52, "spread": 3.0}
    assert isinstance(out["measured"]["spread"], float)
    assert out["band"] == {"slope": [-0.6, -0.4]}
    assert out["figure"] is None and out["data"] is None
    for verdict in ("PASS", "FAIL", "REFUTED", "UNSTABLE", "INCONCLUSIVE", "SKIP"):
        checked = validate_result(good(verdict=verdict, reason="evidence: slope -0.52"))
        assert checked["verdict"] == verdict
    for scale in ("medium", "full"):
        assert validate_result(good(scale=scale, measured={}, band={}))["scale"] == scale
    assert (out["paper_version"], out["seeds"], out["control"]) == ("", [], None)  # optional
    seeds = [{"seed": 0, "verdict": "PASS", "measured": {"slope": -0.5}},
             {"seed": 1, "verdict": "FAIL", "measured": {"slope": -0.2}}]
    out = validate_result(good(verdict="UNSTABLE", reason="1 of 2 seeds pass", seeds=seeds,
                               paper_version="arXiv 2512.21075v1"))
    assert out["seeds"] == seeds and out["paper_version"] == "arXiv 2512.21075v1"


HEADLINE: dict[str, Any] = {
    "label": "slope", "paper": "-1/2 (Fig. 5)", "ours": -0.52, "ci": [-0.6, -0.45],
    "band": [-0.6, None], "text": "paper: -1/2 (Fig. 5), ours: -0.52 [-0.6, -0.45], band "
                                  "[-0.6, +inf]",
}


def test_headline_and_run_are_optional_and_validated() -> None:
    assert validate_result(good())["headline"] is None and validate_result(good())["run"] is None
    full = {**HEADLINE, "ours": 1, "metric": "slope", "ref": "Fig. 5", "statement": "s",
            "criterion": ""}
    out = validate_result(good(headline=full, run={"cpu": "x", "threads": 2, "gpu": None,
                                                   "seconds": 1.5, "cuda": False}))
    assert out["headline"] == {**full, "ours": 1.0}
    assert isinstance(out["headline"]["ours"], float)
    assert out["run"] == {"cpu": "x", "threads": 2, "gpu": None, "seconds": 1.5, "cuda": False}
    assert validate_result(good(headline={**HEADLINE, "ours": None, "ci": None, "band": None}))


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("missing key", without("verdict"), "missing key(s) verdict"),
    ("missing band", without("band"), "band"),
    ("unknown key", good(extra=1), "unknown key(s) extra"),
    ("verdict", good(verdict="OK"), "verdict must be one of"),
    ("verdict case", good(verdict="pass"), "verdict"),
    ("scale", good(scale="huge"), "scale must be one of"),
    ("fail without evidence", good(verdict="FAIL"), "reason must not be empty"),
    ("seed entry", good(seeds=[{"seed": 0, "verdict": "MAYBE", "measured": {}}]), "seeds[0]"),
    ("nan measured", good(measured={"slope": math.nan}), "measured['slope'] is nan"),
    ("inf measured", good(measured={"slope": math.inf}), "measured['slope'] is inf"),
    ("string measured", good(measured={"slope": "0.5"}), "measured['slope'] must be a number"),
    ("bool measured", good(measured={"ok": True}), "measured['ok'] must be a number"),
    ("measured not dict", good(measured=[1.0]), "measured must be a dict"),
    ("band shape", good(band={"slope": [0.1]}), "band['slope'] must be [low, high]"),
    ("band nan", good(band={"slope": [math.nan, 1.0]}), "band['slope'] is nan"),
    ("band empty ends", good(band={"slope": [None, None]}), "neither a low nor a high"),
    ("band order", good(band={"slope": [1.0, 0.0]}), "low 1.0 > high 0.0"),
    ("seconds nan", good(seconds=math.nan), "seconds is nan"),
    ("seconds negative", good(seconds=-1.0), "seconds must be >= 0"),
    ("title type", good(title=None), "title must be a string"),
    ("reason type", good(reason=None), "reason must be a string"),
    ("absolute figure", good(figure="/tmp/fig.png"), "figure must be a path relative"),
    ("escaping data", good(data="../x.csv"), "data must stay inside"),
    ("headline type", good(headline="slope -0.5"), "headline must be a dict"),
    ("headline keys", good(headline={"label": "x"}), "headline must have label"),
    ("headline ours", good(headline={**HEADLINE, "ours": math.nan}), "headline.ours is nan"),
    ("headline ci", good(headline={**HEADLINE, "ci": [1.0, 0.0]}), "headline.ci has low"),
    ("headline ci open", good(headline={**HEADLINE, "ci": [None, 0.0]}),
     "headline.ci must be a number"),
    ("headline extra", good(headline={**HEADLINE, "colour": "red"}), "unknown ['colour']"),
    ("run type", good(run=[1]), "run must be a dict"),
    ("run value", good(run={"cpu": ["a"]}), "run['cpu'] must be text, a number or null"),
    ("run nan", good(run={"threads": math.nan}), "run['threads'] is nan"),
]


@pytest.mark.parametrize(("case", "result", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_result_is_rejected_naming_the_claim(
    case: str, result: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError) as info:
        validate_results([good("other-claim"), result])
    assert isinstance(info.value, ClaimSchemaError)
    assert "claim 'nfd-fig1'" in str(info.value)
    assert message in str(info.value)


def test_bad_ids_and_containers() -> None:
    with pytest.raises(ClaimSchemaError, match=r"claim #1 \(no valid id\).*id must not be empty"):
        validate_results([good("a"), good("")])
    with pytest.raises(ClaimSchemaError, match="claim 'a': id appears more than once"):
        validate_results([good("a"), good("a")])
    with pytest.raises(ClaimSchemaError, match="claim #0: a result must be a dict"):
        validate_results(["nfd-fig1"])
    with pytest.raises(ClaimSchemaError, match="must be a list"):
        validate_results(good())


def test_write_rejects_nan_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"claim 'bad'.*measured\['loss'\] is nan"):
        write_claims_json(tmp_path, [good("ok"), good("bad", measured={"loss": math.nan})])
    assert list(tmp_path.iterdir()) == []


def test_claims_json_round_trip(tmp_path: Path) -> None:
    results = [
        good("a"),
        good("b", verdict="SKIP", reason="needs <data> & time", measured={}, figure=None,
             data=None),
        good("c", verdict="FAIL", reason="slope = -0.52 outside [-1.9, -1.0]", scale="full",
             title="ünïcode ∆", seconds=0),
    ]
    path = write_claims_json(tmp_path / "out", results)
    assert path == tmp_path / "out" / "claims.json"
    back = read_claims_json(path)
    assert back == validate_results(results)
    assert read_claims_json(tmp_path / "out") == back  # the folder works too
    assert json.loads(path.read_text(encoding="utf-8"))[1]["reason"] == "needs <data> & time"


def test_read_rejects_bad_files(tmp_path: Path) -> None:
    bad = tmp_path / "claims.json"
    bad.write_text('[{"id": "x"}]', encoding="utf-8")
    with pytest.raises(ClaimSchemaError, match="claim 'x': missing key"):
        read_claims_json(bad)
    bad.write_text("[{", encoding="utf-8")
    with pytest.raises(ClaimSchemaError, match="not valid JSON"):
        read_claims_json(bad)
    bad.write_text(json.dumps([good()]).replace("-0.52", "NaN"), encoding="utf-8")
    with pytest.raises(ClaimSchemaError, match="NaN"):
        read_claims_json(bad)
    with pytest.raises(ClaimSchemaError, match="cannot read"):
        read_claims_json(tmp_path / "missing.json")


def test_failed_write_keeps_old_file_and_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_claims_json(tmp_path, [good("old")])
    before = path.read_bytes()
    opened: list[str] = []

    def exploding_dump(obj: Any, fh: Any, **kwargs: Any) -> None:
        opened.append(fh.name)
        fh.write('[{"id": "new", "tit')  # half a file, then die
        raise RuntimeError("killed mid-write")

    monkeypatch.setattr(json, "dump", exploding_dump)
    with pytest.raises(RuntimeError, match="killed mid-write"):
        write_claims_json(tmp_path, [good("new")])
    assert opened, "json.dump was not reached: the temp file was never opened"
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["claims.json"]

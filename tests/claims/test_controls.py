"""Every claim has a negative control: a deliberately wrong setting under which its check comes
out FAIL (CLAIMS.md; issue 10). Where the smoke settings let the correct run pass
(``Control.contrast``), the same run without the control must PASS, so the check discriminates:
test_reproduce.py's every-claim run at the smoke settings asserts that side, from the same
runs this file would repeat. Both train each LR group as one batched run (``batch_lrs``: the
same values as one by one, test_reproduce.py's batched tests; about half the time here)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from depthscale.claims import CLAIMS, ClaimContext, ClaimOutcome, reproduce
from depthscale.claims.registry import Control


def _control_at_smoke(cid: str, tmp_path: Path) -> ClaimOutcome:
    c = CLAIMS[cid]
    assert c.control is not None, f"{cid} has no negative control"
    return c.run(ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None,
                              seed=0, settings={**c.settings["smoke"], **c.control.settings},
                              batch_lrs=True))


@pytest.mark.parametrize("cid", list(CLAIMS))
def test_negative_control_fails(cid: str, tmp_path: Path) -> None:
    wrong = _control_at_smoke(cid, tmp_path)
    assert wrong.verdict == "FAIL", (cid, CLAIMS[cid].control, wrong.verdict, wrong.reason)


def _seeded(ctx: ClaimContext) -> ClaimOutcome:
    slope = -0.5 if ctx.seed % 2 == 0 else -0.1  # odd base seeds miss the band
    ok = ctx.settings.get("right", True) and slope < -0.3
    return ClaimOutcome("PASS" if ok else "FAIL", {"slope": slope}, {"slope": [-0.7, -0.3]},
                        "" if ok else f"slope = {slope} outside [-0.7, -0.3]")


@pytest.fixture
def fake_claim(monkeypatch: pytest.MonkeyPatch) -> str:
    c = dataclasses.replace(CLAIMS["nfd-prop1"], run=_seeded, control=Control(
        "the wrong thing", {"right": False}))
    monkeypatch.setitem(CLAIMS, "nfd-prop1", c)
    return "nfd-prop1"


def test_seeds_that_disagree_make_the_claim_unstable(fake_claim: str, tmp_path: Path) -> None:
    results, _ = reproduce([fake_claim], scale="quick", out_dir=tmp_path, seeds=3)
    (r,) = results
    assert r["verdict"] == "UNSTABLE"
    assert [(e["seed"], e["verdict"]) for e in r["seeds"]] == [(0, "PASS"), (1, "FAIL"),
                                                                (2, "PASS")]
    assert r["measured"]["slope"] == pytest.approx((-0.5 - 0.1 - 0.5) / 3)
    assert "2 of 3 base seeds pass" in r["reason"] and "seed 1: FAIL" in r["reason"]
    assert r["paper_version"].startswith("arXiv 2512.21075v1")
    even, _ = reproduce([fake_claim], scale="quick", out_dir=tmp_path / "even", seed=0, seeds=1)
    assert even[0]["verdict"] == "PASS" and even[0]["seeds"] == []


def test_control_runs_are_kept_apart_from_the_claims(fake_claim: str, tmp_path: Path) -> None:
    reproduce([fake_claim], scale="quick", out_dir=tmp_path)
    results, _ = reproduce([fake_claim], scale="quick", out_dir=tmp_path, control=True)
    by_id = {r["id"]: r for r in json.loads((tmp_path / "claims.json").read_text())}
    assert by_id[fake_claim]["verdict"] == "PASS" and by_id[fake_claim]["control"] is None
    ctl = by_id[f"{fake_claim}/control"]
    assert ctl["verdict"] == "FAIL" and ctl["control"] == "the wrong thing"
    assert "Negative control: the wrong thing" in (tmp_path / "index.html").read_text()
    assert len(results) == 2


def test_bad_seed_counts_are_refused_before_work(tmp_path: Path) -> None:
    from depthscale.errors import ConfigError

    for bad in (0, -1, True):
        with pytest.raises(ConfigError, match="seeds must be"):
            reproduce(["nfd-prop1"], scale="quick", out_dir=tmp_path, seeds=bad)
    assert list(tmp_path.iterdir()) == []


def test_docs_catalogue_is_generated_from_the_registry() -> None:
    from depthscale.claims.catalogue import catalogue_markdown

    docs = Path(__file__).parents[2] / "docs" / "claims.md"
    assert docs.read_text(encoding="utf-8") == catalogue_markdown(), (
        "docs/claims.md is stale: python -m depthscale.claims.catalogue > docs/claims.md")

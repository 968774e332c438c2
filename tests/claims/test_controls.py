"""Negative controls and base seeds in ``reproduce``: seeds that disagree make a claim
UNSTABLE, controls are kept apart from their claims and copy the claim's identical runs.
That every claim's control FAILs, and where the smoke settings let the correct run pass
(``Control.contrast``) the correct run PASSes, is checked by test_reproduce.py's every-claim
run at the smoke settings, whose folder the controls then copy their claims' runs from."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from depthscale.claims import CLAIMS, ClaimContext, ClaimOutcome, reproduce
from depthscale.claims.common import run_claim_study
from depthscale.claims.laws.sweeps import study_tables
from depthscale.claims.registry import Control
from depthscale.studies.store import STORE_FILE, open_store


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


def _tiny_study(ctx: ClaimContext) -> ClaimOutcome:
    """A claim of one tiny study (a width-4 cnn1d, 2 steps) at the LRs of its settings."""
    arch = {"model": "cnn1d", "dataset": "mnist1d", "input_shape": [1, 40], "width": 4,
            "depths": [1], "lrs": ctx.settings.get("lrs", [0.1, 0.2])}
    records = run_claim_study(ctx, "tiny", study_tables(
        "tiny", arch, seeds=1, epochs=None, steps=2, data={"n_train": 64, "n_test": 32}))
    losses = {f"loss at {r['lr']}": r["running_loss"] for r in records}
    return ClaimOutcome("PASS" if ctx.settings.get("right", True) else "FAIL", losses, {}, "")


def test_a_control_copies_its_claims_identical_runs_and_trains_only_the_others(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A run id hashes the whole run spec, so the control's run at LR 0.1 is the claim's: it is
    copied (same values, same finishing time), LR 0.3 trains, and the claim's store is only
    read. A control that trains nothing the claim did copies nothing."""
    c = dataclasses.replace(CLAIMS["nfd-prop1"], run=_tiny_study, control=Control(
        "another LR", {"right": False, "lrs": [0.1, 0.3]}))
    monkeypatch.setitem(CLAIMS, "nfd-prop1", c)
    (claim,), _ = reproduce(["nfd-prop1"], scale="quick", out_dir=tmp_path)
    store = tmp_path / "tiny" / STORE_FILE
    before = store.read_bytes()
    results, _ = reproduce(["nfd-prop1"], scale="quick", out_dir=tmp_path, control=True)
    ctl = {r["id"]: r for r in results}["nfd-prop1/control"]
    assert ctl["verdict"] == "FAIL"
    assert "1 finished run(s) copied from the claim's own folder" in ctl["reason"]
    assert ctl["measured"]["loss at 0.1"] == claim["measured"]["loss at 0.1"]
    assert ctl["measured"]["loss at 0.3"] != claim["measured"]["loss at 0.2"]
    assert store.read_bytes() == before
    with (open_store(tmp_path / "tiny", readonly=True) as mine,
          open_store(tmp_path / "control" / "tiny", readonly=True) as theirs):
        at = {r["lr"]: r["finished_at"] for r in mine.records()}
        copied = {r["lr"]: r["finished_at"] for r in theirs.records()}
    assert copied[0.1] == at[0.1] and copied[0.3] not in at.values()
    elsewhere = ClaimContext("quick", tmp_path / "other", "cpu", None, 0, {"lrs": [0.4]},
                             shared_runs=tmp_path)
    _tiny_study(elsewhere)
    assert elsewhere.runs_copied == 0

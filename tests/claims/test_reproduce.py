"""The claims registry and the reproduce runner: contract of claims.json, SKIPs, crashes."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

import depthscale
from depthscale.claims import CLAIMS, ClaimContext, ClaimOutcome, band_verdict, reproduce
from depthscale.cli import main
from depthscale.errors import DataError
from depthscale.report import page_problems, read_history, read_page, validate_results


@pytest.fixture
def tiny_claims(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every claim's quick settings replaced by its smoke settings (seconds each)."""
    for cid, c in list(CLAIMS.items()):
        settings = {**c.settings, "quick": c.settings["smoke"]}
        monkeypatch.setitem(CLAIMS, cid, dataclasses.replace(c, settings=settings))


def test_every_claim_runs_and_claims_json_matches_the_contract(
    tiny_claims: None, tmp_path: Path
) -> None:
    # each LR group as one batched run: the values of the one-by-one runs (the batched tests
    # below), in about half the time
    _, crashed = reproduce([], scale="quick", out_dir=tmp_path, batch_lrs=True)
    assert crashed == []
    on_disk = json.loads((tmp_path / "claims.json").read_text())
    validate_results(on_disk)
    assert [r["id"] for r in on_disk] == list(CLAIMS)
    for r in on_disk:
        assert set(r) == {"id", "title", "paper", "verdict", "reason", "measured", "band",
                          "scale", "seconds", "figure", "data", "paper_version", "seeds",
                          "control", "seed", "version", "headline", "run"}
        assert r["seed"] == 0 and r["version"] == depthscale.__version__
        assert r["paper_version"] and r["seeds"] == [] and r["control"] is None
        assert r["verdict"] in ("PASS", "FAIL", "INCONCLUSIVE", "REFUTED"), r
        assert r["scale"] == "quick" and r["seconds"] >= 0
        assert (tmp_path / r["figure"]).read_bytes()[:4] == b"\x89PNG"
        assert (tmp_path / r["data"]).read_text().count("\n") >= 2
        for name in r["band"]:
            assert name in r["measured"] or "not measurable" in r["reason"]
        # the registry's headline: its metric (and interval keys) measured, or said why not
        lead = CLAIMS[r["id"]].headline
        assert lead is not None
        key, ci = lead.pick(r["measured"])
        hl = r["headline"]
        assert hl["metric"] == key and hl["statement"] == lead.statement
        for name in (key, *(ci or ())):
            assert name in r["measured"] or (
                "not measurable" in r["reason"] and name in r["reason"]), (r["id"], name)
        assert hl["ours"] == r["measured"].get(key)
        assert hl["text"].startswith(f"paper: {lead.paper}, ours: ")
        assert hl["band"] == r["band"].get(key)
        assert r["run"]["depthscale"] == depthscale.__version__ and r["run"]["threads"] >= 1
    # the other side of each negative control (below): where the smoke settings let
    # the correct run pass (Control.contrast), it does, so the check discriminates
    must_pass = [cid for cid, c in CLAIMS.items() if c.control is not None and c.control.contrast]
    assert len(must_pass) >= 10
    assert [(r["id"], r["verdict"]) for r in on_disk if r["id"] in must_pass] == [
        (cid, "PASS") for cid in must_pass], [r["reason"] for r in on_disk if r["id"] in must_pass
                                               and r["verdict"] != "PASS"]
    # the page as a reader sees it: a card per claim with verdict, headline, evidence for every
    # verdict but PASS, the figure embedded, nothing external
    page = read_page((tmp_path / "index.html").read_text())
    assert [c.claim for c in page.cards] == list(CLAIMS)
    assert [c.verdict for c in page.cards] == [r["verdict"] for r in on_disk]
    assert page_problems(page, tmp_path) == []
    assert all(c.figure and c.figure.startswith("data:image/png;base64,") for c in page.cards)
    assert page.runs_columns == []  # one run
    assert [r["id"] for r in read_history(tmp_path)] == list(CLAIMS)
    # every negative control (CLAIMS.md), run as ``reproduce --control`` into the same folder,
    # FAILs; one whose studies plan its claim's runs copies them from the claim's folder
    _, crashed = reproduce([], scale="quick", out_dir=tmp_path, control=True, batch_lrs=True)
    assert crashed == []
    controls = {r["id"]: r for r in json.loads((tmp_path / "claims.json").read_text())
                if r["control"] is not None}
    assert [(cid, r["verdict"]) for cid, r in controls.items()] == [
        (f"{cid}/control", "FAIL") for cid in CLAIMS], {
            cid: (CLAIMS[cid.split("/")[0]].control, r["reason"])
            for cid, r in controls.items() if r["verdict"] != "FAIL"}
    copied = {cid for cid, r in controls.items() if "copied from the claim's own folder" in
              r["reason"]}
    assert {"laws-transfer/control", "laws-steepening/control", "laws-fig3b/control"} <= copied


def test_missing_full_scale_data_is_a_skip_with_reason(tmp_path: Path) -> None:
    results, crashed = reproduce(["nfd-deep"], scale="full", out_dir=tmp_path,
                                 data_dir=tmp_path / "nowhere")
    assert crashed == []
    (r,) = results
    assert r["verdict"] == "SKIP" and "cifar" in r["reason"].lower()
    assert r["figure"] is None and r["data"] is None


def test_crash_is_reported_and_other_claims_are_kept(
    tiny_claims: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["reproduce", "nfd-prop1", "--out", str(tmp_path)]) == 0

    def boom(_ctx: object) -> ClaimOutcome:
        raise RuntimeError("kaboom")

    monkeypatch.setitem(CLAIMS, "nfd-deep", dataclasses.replace(CLAIMS["nfd-deep"], run=boom))
    assert main(["reproduce", "nfd-deep", "--out", str(tmp_path)]) == 1
    assert "crashed: nfd-deep" in capsys.readouterr().err
    by_id = {r["id"]: r for r in json.loads((tmp_path / "claims.json").read_text())}
    assert by_id["nfd-prop1"]["verdict"] in ("PASS", "FAIL")  # earlier result kept
    assert by_id["nfd-deep"]["verdict"] == "SKIP" and "kaboom" in by_id["nfd-deep"]["reason"]


def test_strict_turns_a_fail_into_exit_1(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def failing(_ctx: object) -> ClaimOutcome:
        verdict, band, why = band_verdict({"x": 2.0}, {"x": (0.0, 1.0)})
        return ClaimOutcome(verdict, {"x": 2.0}, band, why)

    monkeypatch.setitem(CLAIMS, "nfd-deep", dataclasses.replace(CLAIMS["nfd-deep"], run=failing))
    assert main(["reproduce", "nfd-deep", "--out", str(tmp_path)]) == 0  # a FAIL is a finding
    assert main(["reproduce", "nfd-deep", "--out", str(tmp_path), "--strict"]) == 1


def test_corrupt_existing_claims_file_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "claims.json").write_text("{not json")
    assert main(["reproduce", "nfd-prop1", "--out", str(tmp_path)]) == 2
    assert "not a valid claims file" in capsys.readouterr().err
    assert (tmp_path / "claims.json").read_text() == "{not json"


def test_band_verdict_is_closed_interval_and_needs_every_value() -> None:
    assert band_verdict({"a": 1.0}, {"a": (1.0, 2.0)})[0] == "PASS"
    assert band_verdict({"a": 2.0}, {"a": (None, 2.0)})[0] == "PASS"
    verdict, band, why = band_verdict({"a": 2.5, "b": None}, {"a": (1.0, 2.0), "b": (0.0, None)})
    assert verdict == "FAIL" and band == {"a": [1.0, 2.0], "b": [0.0, None]}
    assert "a = 2.5" in why and "b not measurable" in why


def _fixed(verdict: str) -> object:
    def run(_ctx: object) -> ClaimOutcome:
        return ClaimOutcome(verdict, {"x": 1.0}, {}, "")
    return run


def test_two_runs_into_one_folder_keep_each_others_verdicts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """While a run of nfd-deep is busy, a second run writes nfd-prop1 into the same folder;
    the first run's results must then merge with it, not overwrite it with its stale view."""
    monkeypatch.setitem(CLAIMS, "nfd-prop1",
                        dataclasses.replace(CLAIMS["nfd-prop1"], run=_fixed("PASS")))

    def slow(_ctx: object) -> ClaimOutcome:
        reproduce(["nfd-prop1"], scale="quick", out_dir=tmp_path)  # the "other" run finishes
        return ClaimOutcome("FAIL", {"x": 2.0}, {}, "")

    monkeypatch.setitem(CLAIMS, "nfd-deep", dataclasses.replace(CLAIMS["nfd-deep"], run=slow))
    results, _ = reproduce(["nfd-deep"], scale="quick", out_dir=tmp_path)
    on_disk = {r["id"]: r["verdict"] for r in json.loads((tmp_path / "claims.json").read_text())}
    assert on_disk == {"nfd-prop1": "PASS", "nfd-deep": "FAIL"}
    assert {r["id"] for r in results} == set(on_disk)
    html = (tmp_path / "index.html").read_text()
    assert "nfd-prop1" in html and "nfd-deep" in html


def test_a_held_folder_lock_names_its_holder(tmp_path: Path) -> None:
    from depthscale.claims.reproduce import LOCK_FILE
    from depthscale.io.outputs import acquire_lock, release_lock

    fd = acquire_lock(tmp_path, LOCK_FILE, 0.0, "reproduce folder")
    try:
        with pytest.raises(DataError, match=rf"in use by another depthscale process \(pid "
                                            rf"{os.getpid()}"):
            acquire_lock(tmp_path, LOCK_FILE, 0.1, "reproduce folder")
    finally:
        release_lock(fd)
    release_lock(acquire_lock(tmp_path, LOCK_FILE, 0.0, "reproduce folder"))  # free again


def _counting(verdict: str, calls: list[int]) -> object:
    def run(_ctx: object) -> ClaimOutcome:
        calls.append(1)
        return ClaimOutcome(verdict, {"x": 1.0}, {}, "" if verdict == "PASS" else "why")
    return run


def test_a_rerun_into_the_same_folder_resumes_and_recomputes_nothing_finished(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[int] = []
    monkeypatch.setitem(CLAIMS, "nfd-deep",
                        dataclasses.replace(CLAIMS["nfd-deep"], run=_counting("PASS", calls)))
    assert main(["reproduce", "nfd-deep", "--out", str(tmp_path)]) == 0
    assert main(["reproduce", "nfd-deep", "--out", str(tmp_path)]) == 0
    assert len(calls) == 1 and "kept from" in capsys.readouterr().err
    assert main(["reproduce", "nfd-deep", "--out", str(tmp_path), "--seed", "1"]) == 0
    assert len(calls) == 2  # another base seed is another result
    assert main(["reproduce", "nfd-deep", "--out", str(tmp_path), "--seed", "1", "--rerun"]) == 0
    assert len(calls) == 3


def test_a_skip_is_run_again_and_strict_counts_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[int] = []
    monkeypatch.setitem(CLAIMS, "nfd-deep",
                        dataclasses.replace(CLAIMS["nfd-deep"], run=_counting("SKIP", calls)))
    assert main(["reproduce", "nfd-deep", "--out", str(tmp_path)]) == 0
    assert main(["reproduce", "nfd-deep", "--out", str(tmp_path), "--strict"]) == 1
    assert len(calls) == 2
    assert "--strict: not PASS: nfd-deep SKIP" in capsys.readouterr().err


def test_cuda_asked_for_on_a_machine_without_it_is_one_line_before_any_work(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "out"
    assert main(["reproduce", "nfd-deep", "--out", str(out), "--device", "cuda",
                 "--strict"]) == 2
    err = capsys.readouterr().err
    assert "CUDA is not available" in err and "Traceback" not in err
    assert "--batch-lrs" not in err  # no hint about a GPU this machine lacks
    assert not out.exists()


def test_a_gpu_run_without_batching_gets_a_hint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda _i: "a GPU")
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    calls: list[int] = []
    monkeypatch.setitem(CLAIMS, "nfd-deep",
                        dataclasses.replace(CLAIMS["nfd-deep"], run=_counting("PASS", calls)))
    try:
        assert main(["reproduce", "nfd-deep", "--out", str(tmp_path), "--device", "cuda"]) == 0
        assert "--batch-lrs trains each LR group" in " ".join(capsys.readouterr().err.split())
        assert main(["reproduce", "nfd-deep", "--out", str(tmp_path / "b"), "--device", "cuda",
                     "--batch-lrs"]) == 0
        assert "hint" not in capsys.readouterr().err
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved
    assert len(calls) == 2


def test_a_medium_run_after_a_quick_one_keeps_both_for_the_across_runs_table(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """claims.json holds the latest record per claim; runs.jsonl keeps every run, and the
    page shows what medium decided beside quick."""
    def by_scale(ctx: ClaimContext) -> ClaimOutcome:
        medium = ctx.scale == "medium"
        value = -0.5 if medium else -0.1
        verdict, band, why = band_verdict({"post_min_ratio_to_bound": value},
                                          {"post_min_ratio_to_bound": (-0.6, -0.4)})
        return ClaimOutcome(verdict, {"post_min_ratio_to_bound": value}, band, why)

    monkeypatch.setitem(CLAIMS, "nfd-prop1",
                        dataclasses.replace(CLAIMS["nfd-prop1"], run=by_scale))
    monkeypatch.setitem(CLAIMS, "nfd-deep", dataclasses.replace(CLAIMS["nfd-deep"],
                                                                run=_fixed("PASS")))
    assert main(["reproduce", "nfd-prop1", "nfd-deep", "--out", str(tmp_path)]) == 0
    assert main(["reproduce", "nfd-prop1", "--out", str(tmp_path), "--scale", "medium"]) == 0
    out = capsys.readouterr().out
    assert "ours: -0.5" in out and "raw" not in out  # the console's headline line
    latest = {r["id"]: r for r in json.loads((tmp_path / "claims.json").read_text())}
    assert latest["nfd-prop1"]["scale"] == "medium" and latest["nfd-prop1"]["verdict"] == "PASS"
    assert latest["nfd-prop1"]["headline"]["ours"] == -0.5
    history = read_history(tmp_path)
    assert [(r["id"], r["scale"], r["verdict"]) for r in history] == [
        ("nfd-prop1", "quick", "FAIL"), ("nfd-deep", "quick", "PASS"),
        ("nfd-prop1", "medium", "PASS")]
    page = read_page((tmp_path / "index.html").read_text())
    assert page.runs_columns == ["quick seed 0", "medium seed 0"]
    assert page.runs_rows == [["nfd-prop1", "FAIL -0.1", "PASS -0.5"],
                              ["nfd-deep", "PASS", ""]]
    assert page_problems(page, tmp_path) == []
    # a resumed run appends nothing: the kept claim was not run again
    assert main(["reproduce", "nfd-prop1", "--out", str(tmp_path), "--scale", "medium"]) == 0
    assert len(read_history(tmp_path)) == 3


def test_batch_lrs_reaches_the_claim_and_the_record_and_is_another_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[bool] = []

    def runner(ctx: ClaimContext) -> ClaimOutcome:
        seen.append(ctx.batch_lrs)
        return ClaimOutcome("PASS", {"x": 1.0})

    monkeypatch.setitem(CLAIMS, "nfd-deep", dataclasses.replace(CLAIMS["nfd-deep"], run=runner))
    assert main(["reproduce", "nfd-deep", "--out", str(tmp_path), "--batch-lrs"]) == 0
    assert main(["reproduce", "nfd-deep", "--out", str(tmp_path), "--batch-lrs"]) == 0
    assert seen == [True]  # kept: same settings
    (record,) = json.loads((tmp_path / "claims.json").read_text())
    assert record["run"]["batch_lrs"] is True
    # records may differ by float rounding with and without batching: another run
    assert main(["reproduce", "nfd-deep", "--out", str(tmp_path)]) == 0
    assert seen == [True, False]
    (record,) = json.loads((tmp_path / "claims.json").read_text())
    assert record["run"]["batch_lrs"] is False


def test_set_changes_the_settings_the_claim_sees_and_is_another_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[dict[str, Any]] = []

    def runner(ctx: ClaimContext) -> ClaimOutcome:
        seen.append(ctx.settings)
        return ClaimOutcome("INCONCLUSIVE", {"x": 1.0}, {}, "why")

    monkeypatch.setitem(CLAIMS, "laws-table1",
                        dataclasses.replace(CLAIMS["laws-table1"], run=runner))
    args = ["reproduce", "laws-table1", "--scale", "medium", "--out", str(tmp_path),
            "--set", "archs.cnn1d.seed_rounds=[4, 8, 16]", "--set", "archs.vit=null",
            "--set", "archs.convresnet1d=null"]
    assert main(args) == 0
    medium = CLAIMS["laws-table1"].settings_for("medium")
    (got,) = seen
    assert list(got["archs"]) == ["cnn1d"] and got["archs"]["cnn1d"]["seed_rounds"] == [4, 8, 16]
    assert {k: v for k, v in got["archs"]["cnn1d"].items() if k != "seed_rounds"} == {
        k: v for k, v in medium["archs"]["cnn1d"].items() if k != "seed_rounds"}
    assert list(medium["archs"]) == ["cnn1d", "convresnet1d", "vit"]  # not mutated
    (record,) = json.loads((tmp_path / "claims.json").read_text())
    assert record["run"]["set"] == ("archs.cnn1d.seed_rounds=[4, 8, 16], archs.vit=null, "
                                    "archs.convresnet1d=null")
    assert record["reason"].startswith("not the medium settings: changed by --set "
                                       "archs.cnn1d.seed_rounds=[4, 8, 16], archs.vit=null")
    assert main(args) == 0 and len(seen) == 1  # the same changes: kept
    assert main(args[:-2]) == 0 and len(seen) == 2  # other changes: another run
    assert main(args[:6]) == 0 and len(seen) == 3  # none: the medium claim itself
    (record,) = json.loads((tmp_path / "claims.json").read_text())
    assert record["run"]["set"] is None and not record["reason"].startswith("not the")


@pytest.mark.parametrize(("change", "says"), [
    ("archs.cnn1d.seedrounds=[4]", "has no setting 'archs.cnn1d.seedrounds' (archs.cnn1d: "
                                   "model, dataset"),
    ("archs.resnet=null", "has no setting 'archs.resnet' (archs: cnn1d, convresnet1d"),
    ("archs.cnn1d.model.x=1", "has no setting 'archs.cnn1d.model.x' (archs.cnn1d.model: no table"),
    ("archs=null", "a top-level setting ('archs') cannot be removed"),
    ("probe_seeds=many", "setting 'probe_seeds' is a number (16), got text (\"many\")"),
    ("archs.cnn1d.depths=4", "setting 'archs.cnn1d.depths' is a list ([2, 3, 4, 5, 6, 8, 11, 16]), "
                             "got a number (4)"),
])
def test_a_bad_set_is_one_line_before_any_work_and_writes_nothing(
    change: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["reproduce", "laws-table1", "--out", str(out), "--set", change]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
    assert not out.exists()


# ---- issue 43 items 3 and 4: each setting's type and range, and the bounds, before work --------
@pytest.mark.parametrize(("cid", "changes", "says"), [
    # the kind was right but the value was not: each started the claim (SKIP, crash or FAIL)
    ("nfd-prop1", ["seeds=0"], "'seeds' must be a whole number from 1 to 500"),
    ("nfd-prop1", ["batch=0"], "'batch' must be a whole number from 1 to 12,800"),
    ("nfd-prop1", ["width=32.0"], "'width' must be a whole number from 1 to 12,800 (its values "
                                  "at the scales: 16, 128), got 32.0"),
    ("nfd-prop1", ["width=NaN"], "'width' must be a whole number"),
    ("nfd-prop1", ["width=-1"], "'width' must be a whole number from 1"),
    ("nfd-prop1", ["depths=[4, Infinity]"], "'depths[1]' must be a whole number"),
    ("nfd-prop1", ["depths=[]"], "'depths' must not be empty"),
    ("nfd-prop1", ["dataset=teacher"], "'dataset' must be one of: mnist1d, cifar10, digits"),
    ("nfd-prop2", ["phi=nope"], "'phi' must be one of: relu, gelu, tanh, erf, identity"),
    ("nfd-prop2", ["T=-1"], "'T' must be a finite number in (0, 100]"),
    ("nfd-prop2", ["T=Infinity"], "'T' must be a finite number in (0, 100]"),
    ("nfd-fig2", ["Ts=[0.5, -1]"], "'Ts[1]' must be a finite number in (0, 3200]"),
    ("nfd-fig2", ["eta_c=1e308"], "'eta_c' must be a finite number in (0, 100]"),
    ("chizat-fig2", ["repeats=0"], "'repeats' must be a whole number from 1"),
    ("chizat-fig2", ["depths=[3.5]"], "'depths[0]' must be a whole number"),
    ("laws-table1", ["seeds=0"], "'seeds' must be a whole number from 1"),
    ("laws-table1", ["archs.cnn1d.lr_logspace=[-3, 0.5, 20.5]"],
     "'archs.cnn1d.lr_logspace[2]' must be a whole number from 1 to 1,200"),
    ("laws-table1", ["archs.cnn1d.model=gpt"], "'archs.cnn1d.model' must be one of: cnn1d"),
    ("laws-table1", ["archs.cnn1d.depths=null"], "is there at every scale (the claim reads it) "
                                                 "and cannot be removed"),
    ("laws-table1", ['archs.cnn1d={"model": "cnn1d"}'], "got no dataset, input_shape, width"),
    ("nfd-prop3", ["widths=[[1, 2]]"], "'widths[0]' is a number at every scale, got a list"),
    ("laws-table1", ["archs.convresnet1d.data.samples=55"],
     "mnist1d: option samples must be a whole multiple of 10"),
    # sizes and times through the bounds of every run (train.budget.run_cost)
    ("nfd-prop1", ["width=4096", "depths=[1000]"], "resnet1-post at width 4,096 and depth 1,000 "
                                                   "has 16,777,420,800 parameters: 250.0 GiB"),
    ("nfd-fig2", ["epochs=3000", "seeds=300"], "would take at least"),
    ("laws-table1", ["archs.vit.options.heads=3"], "study laws-vit gives a run that cannot be "
                                                   "made (width 32, depth 1,"),
    ("nfd-thm1", ["particles=1000000"], "its nfd solver at these sizes needs about 61.0 GiB "
                                        "(32 bytes x particles x depth steps x steps"),
    ("chizat-thm3", ["Q=800000"], "its mean-ode solver at these sizes needs about"),
    ("nfd-prop2", ["widths=[102400]"], "its coupling solver at these sizes needs about 78.1 GiB"),
])
def test_a_set_value_out_of_its_settings_range_is_one_line_before_any_claim_runs(
    cid: str, changes: list[str], says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each setting's type and range come from its values at every scale (claims.changes),
    the changed claim's networks and studies go through the bounds of every run
    (claims.costs): one line, exit 2, before any claim runs or anything is written."""
    def never(_ctx: ClaimContext) -> ClaimOutcome:
        raise AssertionError("a claim ran before the refusal")

    for other in CLAIMS:
        monkeypatch.setitem(CLAIMS, other, dataclasses.replace(CLAIMS[other], run=never))
    out = tmp_path / "out"
    argv = ["reproduce", cid, "--out", str(out)]
    for change in changes:
        argv += ["--set", change]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and err.count("\n") == 1, err
    assert not out.exists()


def test_force_lifts_the_bounds_of_a_changed_claim_not_its_ranges(tmp_path: Path) -> None:
    from depthscale.claims.changes import parse_change
    from depthscale.claims.reproduce import check_reproduce
    from depthscale.errors import ConfigError

    big = [parse_change("width=4096"), parse_change("depths=[1000]")]
    with pytest.raises(ConfigError, match="pass --force"):
        check_reproduce(["nfd-prop1"], changes=big)
    assert check_reproduce(["nfd-prop1"], changes=big, force=True) == ["nfd-prop1"]
    with pytest.raises(ConfigError, match="'seeds' must be a whole number"):
        check_reproduce(["nfd-prop1"], changes=[parse_change("seeds=0")], force=True)


def test_the_scales_own_sizes_and_times_stay_allowed_under_set() -> None:
    """The full scale's memory (nfd-thm1: 32 GiB of NFD particles, 16 GiB nets at width
    2048, depth 256) and CPU hours (laws-widths: days) are the paper's: a --set that does not
    grow them passes; the bounds are raised to them, not past them."""
    from depthscale.claims.changes import parse_change
    from depthscale.claims.reproduce import check_reproduce
    from depthscale.errors import ConfigError

    assert check_reproduce(["nfd-thm1"], scale="full", changes=[parse_change("pairs=20")])
    assert check_reproduce(["laws-widths"], scale="full", changes=[parse_change("seeds=2")])
    with pytest.raises(ConfigError, match="over the 32 GiB a run allocates"):
        check_reproduce(["nfd-thm1"], scale="full", changes=[parse_change("width_at=16384")])


def test_every_claims_stock_settings_pass_their_own_ranges_and_cost() -> None:
    """Each scale's settings (and with the control) set onto themselves pass every check, and
    every declared cost can be computed at every scale."""
    from depthscale.claims.changes import apply_changes
    from depthscale.claims.costs import claim_cost

    for cid, c in CLAIMS.items():
        stock = c.stock()
        for settings in stock:
            changes = [((key,), value) for key, value in settings.items()]
            apply_changes(settings, changes, cid, stock=stock)
        for scale in c.settings:
            claim_cost(c, c.settings[scale], "cpu")


def test_set_values_are_json_else_text_and_need_a_dotted_path() -> None:
    from depthscale.claims.changes import apply_changes, parse_change
    from depthscale.errors import ConfigError

    assert parse_change("seeds=8") == (("seeds",), 8)
    assert parse_change("a.b=[1, 2.5]") == (("a", "b"), [1, 2.5])
    assert parse_change("phi=tanh") == (("phi",), "tanh")  # not JSON: a string
    assert parse_change("a.b=null") == (("a", "b"), None)
    for bad in ("seeds", "a..b=1", "=1"):
        with pytest.raises(ConfigError, match="PATH=VALUE"):
            parse_change(bad)
    base = {"seeds": 3, "t": {"u": {"v": 1}, "w": 2}}
    assert apply_changes(base, [(("t", "u", "v"), 5), (("t", "w"), None)], "c") == {
        "seeds": 3, "t": {"u": {"v": 5}}}
    assert base == {"seeds": 3, "t": {"u": {"v": 1}, "w": 2}}


@pytest.mark.parametrize("cid", ["laws-table1", "nfd-collapse"])
def test_from_stored_judges_the_stored_runs_alone_and_names_a_missing_one(
    cid: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A study claim (laws-table1) and a stored-computation claim (nfd-collapse) at smoke
    size: judged again from their stored runs with training switched off, the same verdict
    and values; runs stored for another device are not there, so the claim is a SKIP that
    says which, and nothing new is written."""
    import depthscale.claims.common as common

    smoke = dataclasses.replace(CLAIMS[cid], settings={**CLAIMS[cid].settings,
                                                       "quick": CLAIMS[cid].settings["smoke"]})
    monkeypatch.setitem(CLAIMS, cid, smoke)
    (first,), crashed = reproduce([cid], scale="quick", out_dir=tmp_path)
    assert crashed == [] and first["run"]["from_stored"] is False

    def no_training(*_a: Any, **_k: Any) -> None:
        raise AssertionError("--from-stored trained something")

    monkeypatch.setattr(common, "run_study", no_training)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_dir())
    (again,), crashed = reproduce([cid], scale="quick", out_dir=tmp_path, from_stored=True)
    assert crashed == [] and again["run"]["from_stored"] is True
    assert (again["verdict"], again["measured"]) == (first["verdict"], first["measured"])
    # the same folder judged as if its runs were a GPU's: none is stored for that device, so
    # the claim is a SKIP that names them, told but not written over the folder's verdict
    kept = {name: (tmp_path / name).read_bytes()
            for name in ("claims.json", "runs.jsonl", "index.html")}
    told: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    (still,), crashed = reproduce([cid], scale="quick", out_dir=tmp_path, device="cuda",
                                  from_stored=True, on_skip=lambda r, k: told.append((r, k)))
    assert crashed == [] and still == again
    ((other, earlier),) = told
    assert other["verdict"] == "SKIP" and earlier == again
    said = {"laws-table1": "--from-stored: 36 of 36 runs of laws-cnn1d are not stored in",
            "nfd-collapse": ".json is not stored (this claim's settings, seed, scale and "
                            "device never computed it there)"}[cid]
    assert said in other["reason"]
    assert "run without --from-stored" in other["reason"]
    assert {name: (tmp_path / name).read_bytes() for name in kept} == kept
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_dir())
    assert after == before


def _folder_bytes(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in ("claims.json", "runs.jsonl",
                                                         "index.html")}


def test_from_stored_with_missing_runs_keeps_the_folders_verdict_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 43: 'reproduce --from-stored' with runs missing replaced the folder's verdict in
    claims.json with a SKIP and exited 0."""
    cid = "nfd-collapse"
    monkeypatch.setitem(CLAIMS, cid, dataclasses.replace(
        CLAIMS[cid], settings={**CLAIMS[cid].settings, "quick": CLAIMS[cid].settings["smoke"]}))
    out = tmp_path / "out"
    assert main(["reproduce", cid, "--out", str(out)]) == 0
    (decided,) = json.loads((out / "claims.json").read_text())
    assert decided["verdict"] != "SKIP"
    before = _folder_bytes(out)
    capsys.readouterr()
    # judged as a GPU's runs: none is stored for that device
    assert main(["reproduce", cid, "--out", str(out), "--from-stored", "--device", "cuda"]) == 1
    err = capsys.readouterr().err
    assert _folder_bytes(out) == before
    said = " ".join(err.split())
    assert f"keeps its earlier {decided['verdict']}" in said and "is not stored" in said, err
    errors = [line for line in err.splitlines() if line.startswith("depthscale: error:")]
    assert errors == [f"depthscale: error: not judged now (SKIP, the reasons above): {cid} "
                      f"(earlier {decided['verdict']} kept)"], err
    assert "Traceback" not in err


@pytest.mark.parametrize(("raised", "said"), [
    (RuntimeError("kaboom"), "crashed: RuntimeError: kaboom"),
    (DataError("no such data"), "data unavailable: no such data"),
])
def test_a_skip_never_replaces_a_decided_verdict(
    raised: Exception, said: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A crash or missing data now is a SKIP, told and exit 1, but the folder keeps the FAIL
    it had (claims.json, runs.jsonl and index.html unchanged); over a SKIP it is written."""
    monkeypatch.setitem(CLAIMS, "nfd-deep", dataclasses.replace(CLAIMS["nfd-deep"],
                                                                run=_fixed("FAIL")))
    assert main(["reproduce", "nfd-deep", "--out", str(tmp_path)]) == 0
    before = _folder_bytes(tmp_path)

    def fails(_ctx: object) -> ClaimOutcome:
        raise raised

    monkeypatch.setitem(CLAIMS, "nfd-deep", dataclasses.replace(CLAIMS["nfd-deep"], run=fails))
    capsys.readouterr()
    assert main(["reproduce", "nfd-deep", "--out", str(tmp_path), "--rerun"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert _folder_bytes(tmp_path) == before
    assert said in err and "not written" in err and "keeps its earlier FAIL" in err, err
    # no decided verdict to keep: the SKIP is written
    monkeypatch.setitem(CLAIMS, "nfd-deep", dataclasses.replace(CLAIMS["nfd-deep"],
                                                                run=_fixed("SKIP")))
    (tmp_path / "claims.json").write_text("[]\n")
    results, _ = reproduce(["nfd-deep"], scale="quick", out_dir=tmp_path)
    assert [r["verdict"] for r in results] == ["SKIP"]
    results, _ = reproduce(["nfd-deep"], scale="quick", out_dir=tmp_path, rerun=True)
    assert [r["verdict"] for r in json.loads((tmp_path / "claims.json").read_text())] == [
        "SKIP"]


def test_from_stored_checks_the_device_name_but_not_the_device(tmp_path: Path) -> None:
    from depthscale.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown device 'cuda:x'"):
        reproduce(["nfd-deep"], scale="quick", out_dir=tmp_path / "a", device="cuda:x",
                  from_stored=True)
    assert not (tmp_path / "a").exists()
    assert main(["reproduce", "nfd-deep", "--device", "cuda", "--from-stored", "--out",
                 str(tmp_path / "b")]) == 1  # not judged: a SKIP naming what it needs
    (record,) = json.loads((tmp_path / "b" / "claims.json").read_text())
    # nfd-deep trains on the device without storing its nets: the device is needed
    assert record["verdict"] == "SKIP" and "CUDA is not available here" in record["reason"]


def _loop_and_batched(cid: str, out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``cid`` at its smoke settings, one by one and with ``batch_lrs``: the two records."""
    smoke = dataclasses.replace(CLAIMS[cid], settings={**CLAIMS[cid].settings,
                                                       "quick": CLAIMS[cid].settings["smoke"]})
    records = {}
    for batched in (False, True):
        with pytest.MonkeyPatch.context() as mp:
            mp.setitem(CLAIMS, cid, smoke)
            (rec,), crashed = reproduce([cid], scale="quick", out_dir=out / str(batched),
                                        batch_lrs=batched)
        assert crashed == []
        records[batched] = rec
    return records[False], records[True]


def test_a_laws_claim_batched_by_lr_gives_the_one_by_one_values(tmp_path: Path) -> None:
    """laws-table1 at smoke size (4 depths x 9 LRs, 32 steps) with its LR groups trained as
    one batched run each: the same verdict and alpha to float rounding as the loop, and the
    runs really were batched (every planned run is in a group)."""
    from depthscale.studies.store import open_store

    loop, batch = _loop_and_batched("laws-table1", tmp_path)
    assert batch["verdict"] == loop["verdict"]
    for key, value in loop["measured"].items():
        assert batch["measured"][key] == pytest.approx(value, rel=1e-3, abs=1e-4), key
    (study,) = [p for p in (tmp_path / "True").iterdir() if (p / "study.toml").exists()]
    with open_store(study, readonly=True) as store:
        runs = [dict(r) for r in store.records(planned_only=True)]
    assert runs and all(r["status"] in ("done", "diverged") for r in runs)
    assert all("[batch of 9:" in r["worker"] for r in runs)  # each depth's 9 LRs, one group


@pytest.mark.parametrize("cid", ["nfd-transfer", "beyond-adam", "beyond-transformer"])
def test_the_other_lr_sweeps_batched_give_the_one_by_one_values(cid: str, tmp_path: Path) -> None:
    """The other claims with LR sweeps (two-layer-block MLP ResNets, Adam runs, which are not
    batchable and run one by one, GPTs) at smoke size: same verdict and values with
    ``batch_lrs`` as without (measured: equal within 1e-4 everywhere)."""
    loop, batch = _loop_and_batched(cid, tmp_path)
    assert batch["verdict"] == loop["verdict"]
    assert batch["measured"].keys() == loop["measured"].keys()
    for key, value in loop["measured"].items():
        assert batch["measured"][key] == pytest.approx(value, rel=1e-3, abs=1e-4), key

"""`depthscale sweep` + `depthscale fit` on tiny studies shaped like nfd-fig2 (optimum over T)
and an nfd-transfer-style study (eta_c* per recipe on the seed-mean last-epoch loss, and its
spread)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from depthscale.cli import main
from depthscale.stats.fits import log_minimum
from depthscale.studies.store import open_store

_HEAD = ('[study]\nmodel = "{model}"\n{recipe}dataset = "digits"\n'
         "[data]\nn_train = 64\nn_test = 32\n[train]\nsteps = 3\nbatch_size = 32\n")


def _sweep(tmp_path: Path, name: str, text: str) -> Path:
    spec = tmp_path / f"{name}.toml"
    spec.write_text(text)
    out = tmp_path / name
    assert main(["sweep", str(spec), "--out", str(out)]) == 0
    return out


def _sweep_and_fit(
    tmp_path: Path, name: str, text: str, capsys: pytest.CaptureFixture[str]
) -> tuple[Path, str, dict]:
    """Sweep ``text`` into ``tmp_path/name``, fit it; (folder, printed table, fit.json)."""
    out = _sweep(tmp_path, name, text)
    capsys.readouterr()
    assert main(["fit", str(out)]) == 0
    return out, capsys.readouterr().out, json.loads((out / "fit.json").read_text())


def _records(out: Path) -> list[dict]:
    with open_store(out, readonly=True) as store:
        return [dict(r) for r in store.records()]


def test_fit_of_a_T_scan_flags_the_best_T_per_depth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (_HEAD.format(model="resnet1", recipe='recipe = "depth-mup"\n')
            + "[grid]\ndepth = [2, 3]\nwidth = [8]\nseed = [0, 1]\nlr = [0.1]\n"
            + "[grid.plan]\nT = [0.5, 2, 8]\n"
            + '[analysis]\ncriterion = "final"\noptimize = "plan.T"\n')
    out, printed, fit = _sweep_and_fit(tmp_path, "fig2", text, capsys)
    assert "final loss vs plan.T per depth" in printed and "<- best" in printed
    assert (fit["optimize"], fit["criterion"], fit["aggregate"]) == ("plan.T", "final", "loss")
    records = _records(out)
    for scan in fit["scans"]:
        L = scan["depth"]
        assert scan["values"] == [0.5, 2.0, 8.0] and scan["n_runs"] == [2, 2, 2]
        expected = [statistics.fmean(r["final_train_loss"] for r in records
                                     if r["depth"] == L and r["plan.T"] == T
                                     and r["status"] == "done") for T in scan["values"]]
        assert scan["losses"] == pytest.approx(expected, rel=1e-12)
        best = min(range(3), key=expected.__getitem__)
        assert scan["best"] == scan["values"][best] and scan["interior"] == (best == 1)
        where = "interior" if best == 1 else "on the grid's edge"
        assert f"depth {L}: best plan.T = {scan['values'][best]:g} ({where})" in printed
    assert (out / "fit.png").read_bytes()[:4] == b"\x89PNG"
    # the flags override the spec's [analysis]; a bad one names the key
    assert main(["fit", str(out), "--criterion", "running"]) == 0
    assert json.loads((out / "fit.json").read_text())["criterion"] == "running"
    capsys.readouterr()
    assert main(["fit", str(out), "--optimize", "lr"]) == 2  # T would share the LR cells
    assert "differ in plan.T" in capsys.readouterr().err
    assert main(["fit", str(out), "--group", "recipe"]) == 2
    assert "analysis.group 'recipe' is not an axis of [grid]" in capsys.readouterr().err


def test_fit_per_recipe_gives_eta_star_and_its_spread_across_depths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (_HEAD.format(model="resnet2", recipe="")
            + '[grid]\nrecipe = ["depth-mup", "nfd-depth"]\ndepth = [1, 2, 3]\nwidth = [8]\n'
            + "seed = [0, 1]\nlr = [0.03, 0.3, 3.0]\n"
            + '[analysis]\ncriterion = "last-epoch"\ngroup = "recipe"\naggregate = "loss"\n')
    out, printed, fit = _sweep_and_fit(tmp_path, "transfer", text, capsys)
    assert "eta* per depth (last-epoch criterion)" in printed
    assert "averaged over the seeds before minimising" in printed
    assert fit["group"] == "recipe" and [g["group"] for g in fit["groups"]] == ["depth-mup",
                                                                               "nfd-depth"]
    records = _records(out)
    lrs = [0.03, 0.3, 3.0]
    for g in fit["groups"]:
        logs = []
        for L in (1, 2, 3):
            means = []
            for lr in lrs:
                runs = [r for r in records if (r["recipe"], r["depth"], r["lr"])
                        == (g["group"], L, lr)]
                ok = all(r["status"] == "done" for r in runs)
                means.append(statistics.fmean(r["epoch_losses"][-1] for r in runs)
                             if ok else math.inf)
            logs.append(math.log10(log_minimum(lrs, means).x))
        assert g["spread_log10_lr"] == pytest.approx(max(logs) - min(logs), abs=1e-12)
        assert g["n_sizes"] == 3 and g["slope"] is not None
        assert (f"recipe {g['group']}: spread of log10 eta* across depths (max - min): "
                f"{g['spread_log10_lr']:.3f} decades") in printed
    assert all(s["n_seeds"] == 2 for s in fit["per_size"])
    assert fit["slope"] is None  # grouped: one fit per recipe, under "groups"
    # without the grouping the two recipes would share cells: a clear error, exit 2
    (tmp_path / "transfer" / "study.toml").write_text(
        text.replace('group = "recipe"\n', ""))
    capsys.readouterr()
    assert main(["fit", str(out)]) == 2
    assert "differ in recipe" in capsys.readouterr().err


def test_fit_and_the_laws_claims_share_one_analysis(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`depthscale fit` prints the law the laws claims compute (stats.sweeps.lr_power_law)."""
    from depthscale.stats.sweeps import lr_power_law

    text = (_HEAD.format(model="resnet1", recipe='recipe = "laws"\n')
            + "[grid]\ndepth = [1, 2, 4]\nwidth = [8]\nseed = [0, 1]\n"
            + "lr = [0.01, 0.1, 1.0, 10.0]\n" + '[analysis]\ncriterion = "running"\n')
    out, _, fit = _sweep_and_fit(tmp_path, "law", text, capsys)
    law = lr_power_law([r for r in _records(out) if r["status"] != "failed"], "running")
    assert fit["slope"] == law.fit.slope and fit["slope_ci"] == list(law.fit.slope_ci)
    assert fit["slope_bootstrap_ci"] == [v if math.isfinite(v) else None for v in law.boot_ci]

"""`depthscale sweep` + `fit` on a GPT learning-rate sweep over the markov source at two
depths, and `depthscale train` of the GPT on token data."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from depthscale.cli import main
from depthscale.studies.store import open_store

SPEC = """
[study]
name = "gpt-tiny"
model = "gpt"
recipe = "completep"
dataset = "markov"
[model]
heads = 2
[data]
vocab = 8
context = 8
n_train = 64
n_test = 32
[train]
optimizer = "adam"
steps = 12
batch_size = 16
[grid]
depth = [1, 2]
width = [16]
seed = [0]
lr = [0.001, 0.03, 1.0]
[analysis]
criterion = "final"
"""


def test_gpt_lr_sweep_on_markov_then_fit_gives_the_optimum_per_depth(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "gpt.toml"
    spec.write_text(SPEC)
    out = tmp_path / "gpt"
    assert main(["sweep", str(spec), "--out", str(out)]) == 0
    assert main(["fit", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "eta* per depth (final criterion)" in printed
    fit = json.loads((out / "fit.json").read_text())
    with open_store(out, readonly=True) as store:
        records = [dict(r) for r in store.records()]
    assert len(records) == 6 and all(r["status"] == "done" for r in records)
    assert all(r["model"] == "gpt" and r["dataset"] == "markov" for r in records)
    assert [o["depth"] for o in fit["optima"]] == [1, 2]
    for opt in fit["optima"]:
        mine = [r for r in records if r["depth"] == opt["depth"]]
        best = min(mine, key=lambda r: r["final_train_loss"])
        assert opt["grid_lr"] == best["lr"]
        assert 0.001 <= opt["lr"] <= 1.0 and math.isfinite(opt["lr"])
    # per-token accuracy is recorded with the loss
    assert all(0 <= r["final_test_acc"] <= 1 for r in records)
    # the effective depth of a GPT is 2 x blocks + 2 (embedding and unembedding)
    assert main(["fit", str(out), "--effective-depth", "--out", str(tmp_path / "eff")]) == 0
    eff = json.loads((tmp_path / "eff" / "fit.json").read_text())
    assert [o["depth"] for o in eff["optima"]] == [4, 6]


def test_train_a_gpt_on_token_data_from_the_cli(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t"
    assert main(["train", "--model", "gpt", "--dataset", "markov", "--param", "completep",
                 "--width", "16", "--depth", "1", "--optimizer", "adam", "--lr", "0.03",
                 "--steps", "5", "--batch-size", "32", "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] == "ok" and metrics["steps_done"] == 5
    assert metrics["final"]["test_loss"] < math.log(16)


def test_model_and_data_options_from_the_command_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--model", "gpt", "--dataset", "markov", "--param", "mup",
                 "--width", "16", "--depth", "1", "--model-option", "heads=2",
                 "--model-option", "tied=true", "--data-option", "vocab=8",
                 "--data-option", "context=4"]) == 0
    printed = capsys.readouterr().out
    assert "embed.weight" in printed and "16x8" in printed and "1x4x16" in printed
    assert "head.weight" not in printed  # tied
    for bad, message in ((["--model-option", "heads=3"], "width must be divisible by heads"),
                         (["--data-option", "foo=1"], "markov: unknown option(s) foo"),
                         (["--model-option", "=2"], "expected KEY=VALUE")):
        try:
            code = main(["explain", "--model", "gpt", "--dataset", "markov", "--width", "16",
                         *bad])
        except SystemExit as exc:  # argparse's usage errors
            code = int(exc.code or 0)
        assert code == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1

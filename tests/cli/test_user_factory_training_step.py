"""The user-factory boundary (issue 43, items 5 and 6): a module that calls sys.exit() when
imported, and a model that builds and runs forward but cannot train (all parameters frozen,
scores detached, an in-place write only in training mode, integer scores), are one line and
exit 2 on every command that takes a model, before any work and with nothing written; a sweep
refuses before any run, for every model configuration of its grid."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from depthscale.cli import main

FACTORIES = '''
import math

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, d, n_out, width, depth):
        super().__init__()
        self.inp = nn.Linear(d, width)
        self.blocks = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.out = nn.Linear(width, n_out)

    def forward(self, x):
        h = self.inp(x.flatten(1))
        for b in self.blocks:
            h = h + b(torch.relu(h))
        return self.out(h)


class Detached(Net):
    def forward(self, x):
        return super().forward(x).detach()


class InPlaceWhenTraining(Net):
    def forward(self, x):
        h = self.inp(x.flatten(1))
        for b in self.blocks:
            h = h + b(torch.relu(h))
        if self.training:
            h = h.exp()
            h.sigmoid_()  # overwrites exp's output, which exp's backward needs
        return self.out(h)


class IntegerScores(Net):
    def forward(self, x):
        return super().forward(x).round().long()


def good(input_shape, n_out, width, depth):
    return Net(math.prod(input_shape), n_out, width, depth)


def frozen(input_shape, n_out, width, depth):
    net = Net(math.prod(input_shape), n_out, width, depth)
    net.requires_grad_(False)
    return net


def frozen_when_deep(input_shape, n_out, width, depth):
    net = Net(math.prod(input_shape), n_out, width, depth)
    return net.requires_grad_(depth < 4)


def detached(input_shape, n_out, width, depth):
    return Detached(math.prod(input_shape), n_out, width, depth)


def inplace(input_shape, n_out, width, depth):
    return InPlaceWhenTraining(math.prod(input_shape), n_out, width, depth)


def integer(input_shape, n_out, width, depth):
    return IntegerScores(math.prod(input_shape), n_out, width, depth)
'''

EXITS = '''
import sys

sys.exit({code})


def make(input_shape, n_out, width, depth):
    raise AssertionError("never reached")
'''

CASES = {
    "train_i43:frozen": "all 8 parameters of the model are frozen (requires_grad=False)",
    "train_i43:detached": "the model's scores carry no gradient",
    "train_i43:inplace": "in training mode the model's forward writes in place",
    "train_i43:integer": "the model returns scores of dtype int64",
    "exits0_i43:make": "cannot import 'exits0_i43' (it called sys.exit(0)); a module must not "
                       "exit when imported",
    "exits3_i43:make": "cannot import 'exits3_i43' (it called sys.exit(3))",
}


@pytest.fixture(autouse=True)
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "modules"
    folder.mkdir()
    (folder / "train_i43.py").write_text(FACTORIES)
    for code in (0, 3):
        (folder / f"exits{code}_i43.py").write_text(EXITS.format(code=code))
    monkeypatch.syspath_prepend(str(folder))


def _spec(model: str) -> str:
    return textwrap.dedent(f"""
        [study]
        name = "i43"
        model = "{model}"
        recipe = "mup"
        dataset = "teacher"
        [data]
        dim = 6
        n_train = 64
        n_test = 16
        [train]
        steps = 2
        batch_size = 16
        loss = "mse"
        [grid]
        depth = [2, 4]
        width = [8]
        seed = [0]
        lr = [0.01, 0.1]
        """)


def _commands(model: str, out: Path) -> dict[str, list[str]]:
    common = ["--model", model, "--param", "mup", "--dataset", "digits"]
    spec = out.parent / f"{model.replace(':', '_')}.toml"
    spec.write_text(_spec(model))
    return {
        "explain": ["explain", *common, "--width", "16", "--depth", "2"],
        "train": ["train", *common, "--width", "16", "--depth", "2", "--steps", "2", "--out",
                  str(out / "train")],
        "coord-check": ["coord-check", *common, "--widths", "16,32", "--seeds", "1", "--out",
                        str(out / "cc")],
        "transfer-check": ["transfer-check", *common, "--depths", "2,4", "--lrs", "0.01,0.1,1",
                           "--steps", "2", "--seeds", "1", "--out", str(out / "tc")],
        "sweep": ["sweep", str(spec), "--out", str(out / "sweep")],
        "sweep --workers 2": ["sweep", str(spec), "--out", str(out / "sweep2"), "--workers",
                              "2"],
    }


@pytest.mark.parametrize("model", sorted(CASES))
def test_a_model_that_cannot_train_or_a_module_that_exits_is_one_line_everywhere(
    model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    for name, argv in _commands(model, out).items():
        code = main(argv)
        err = capsys.readouterr().err.strip()
        assert code == 2, (name, err)
        assert len(err.splitlines()) == 1, (name, err)
        assert CASES[model] in err and f"model factory {model!r}" in err, (name, err)
        assert "Traceback" not in err, (name, err)
    assert not out.exists() or not any(out.rglob("*")), list(out.rglob("*"))


def test_a_sweep_checks_every_model_configuration_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "deep.toml"
    spec.write_text(_spec("train_i43:frozen_when_deep"))  # depth 2 trains, depth 4 is frozen
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "are frozen (requires_grad=False)" in err, err
    assert not (tmp_path / "out").exists()


def test_a_correct_factory_still_trains_and_sweeps(tmp_path: Path) -> None:
    assert main(["train", "--model", "train_i43:good", "--param", "mup", "--dataset", "digits",
                 "--width", "16", "--depth", "2", "--steps", "2", "--out",
                 str(tmp_path / "t")]) == 0
    spec = tmp_path / "good.toml"
    spec.write_text(_spec("train_i43:good"))
    assert main(["sweep", str(spec), "--out", str(tmp_path / "s")]) == 0

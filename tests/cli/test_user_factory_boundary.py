"""One boundary for user code (issue 24): whatever a user's factory or its model's forward
does wrong (raises, calls sys.exit, returns scores for the wrong number of classes, writes into
its input) is one line and exit 2 on every command that builds it, before any work and with
nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from depthscale.cli import main

FACTORIES = '''
import math
import sys

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


class Mutates(Net):
    def forward(self, x):
        x.mul_(2)
        return super().forward(x)


def raises(input_shape, n_out, width, depth):
    raise ValueError("a bug in the factory")


def exits(input_shape, n_out, width, depth):
    sys.exit(0)


def wrong_classes(input_shape, n_out, width, depth):
    return Net(math.prod(input_shape), n_out + 3, width, depth)


def forward_raises(input_shape, n_out, width, depth):
    net = Net(math.prod(input_shape), n_out, width, depth)
    net.forward = lambda x: 1 / 0
    return net


def mutates(input_shape, n_out, width, depth):
    return Mutates(math.prod(input_shape), n_out, width, depth)


def returns_tuple(input_shape, n_out, width, depth):
    net = Net(math.prod(input_shape), n_out, width, depth)
    plain = net.forward
    net.forward = lambda x: (plain(x), "extra")
    return net
'''

CASES = {
    "raises": "ValueError: a bug in the factory",
    "exits": "it called sys.exit(0)",
    "wrong_classes": "the data has 10 classes",
    "forward_raises": "ZeroDivisionError",
    "mutates": "changes its input in place",
}


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "boundary_nets_i24.py").write_text(FACTORIES)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "boundary_nets_i24"


def _commands(model: str, out: Path) -> dict[str, list[str]]:
    common = ["--model", model, "--param", "mup", "--dataset", "digits"]
    return {
        "explain": ["explain", *common, "--width", "16", "--depth", "2"],
        "train": ["train", *common, "--width", "16", "--depth", "2", "--steps", "2", "--out",
                  str(out / "train")],
        "coord-check": ["coord-check", *common, "--widths", "16,32", "--seeds", "1", "--out",
                        str(out / "cc")],
        "transfer-check": ["transfer-check", *common, "--depths", "2,4", "--lrs", "0.01,0.1,1",
                           "--steps", "2", "--seeds", "1", "--out", str(out / "tc")],
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_broken_user_factory_is_one_line_on_every_command(
    case: str, module: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    for name, argv in _commands(f"{module}:{case}", out).items():
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2, (name, err)
        assert CASES[case] in err and "Traceback" not in err, (name, err)
        assert f"{module}:{case}" in err, (name, err)
    assert not any(out.rglob("*")), list(out.rglob("*"))


def test_a_model_returning_a_tuple_trains_on_its_first_element(
    module: str, tmp_path: Path
) -> None:
    assert main(["train", "--model", f"{module}:returns_tuple", "--param", "mup", "--dataset",
                 "digits", "--width", "16", "--depth", "2", "--steps", "2", "--out",
                 str(tmp_path / "t")]) == 0


@pytest.mark.parametrize("command", [
    ["coord-check", "--model", "resnet1", "--widths", "16,32", "--seeds", "1"],
    ["train", "--model", "resnet1", "--steps", "1"],
    ["transfer-check", "--model", "resnet1", "--depths", "2,4", "--lrs", "0.01,0.1,1"],
])
def test_cuda_on_a_machine_without_it_is_one_line(
    command: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.chdir(tmp_path)
    assert main([*command, "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "CUDA is not available here; use --device cpu" in err and "Traceback" not in err
    assert not any(tmp_path.rglob("*"))

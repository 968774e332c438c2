"""A user's factory whose model returns its logits inside an object, a dict or a tuple is
planned with its head as the readout and trained; one that returns None or a generator is one
line and exit 2, saying what the forward must return (issue 40)."""

from __future__ import annotations

from pathlib import Path

import pytest

from depthscale.cli import main

FACTORIES = '''
import math

import torch
from torch import nn


class Out:
    def __init__(self, logits, hidden):
        self.logits, self.hidden = logits, hidden


class Net(nn.Module):
    def __init__(self, d, n_out, width, depth, kind):
        super().__init__()
        self.kind = kind
        self.inp = nn.Linear(d, width)
        self.blocks = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.out = nn.Linear(width, n_out)

    def forward(self, x):
        h = self.inp(x.flatten(1))
        for b in self.blocks:
            h = h + b(torch.relu(h))
        logits = self.out(h)
        if self.kind == "object":
            return Out(logits, h)
        if self.kind == "dict":
            return {"hidden": h, "logits": logits}
        if self.kind == "none":
            return None
        return (t for t in (logits,))


def _make(kind):
    def make(input_shape, n_out, width, depth):
        return Net(math.prod(input_shape), n_out, width, depth, kind)
    return make


returns_object, returns_dict = _make("object"), _make("dict")
returns_none, returns_generator = _make("none"), _make("generator")
'''


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "output_nets_i40.py").write_text(FACTORIES)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "output_nets_i40"


def _train(model: str, out: Path) -> list[str]:
    return ["train", "--model", model, "--param", "mup", "--dataset", "digits", "--width",
            "16", "--depth", "2", "--steps", "2", "--out", str(out)]


@pytest.mark.parametrize("case", ["returns_object", "returns_dict"])
def test_a_model_returning_its_logits_in_an_object_trains(
    case: str, module: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", "--model", f"{module}:{case}", "--param", "mup", "--dataset",
                 "digits", "--width", "16", "--depth", "2"]) == 0
    text = capsys.readouterr().out
    assert "out.weight" in text and "output" in text
    assert main(_train(f"{module}:{case}", tmp_path / "t")) == 0


@pytest.mark.parametrize("case", ["returns_none", "returns_generator"])
def test_a_model_returning_no_logits_is_one_line(
    case: str, module: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_train(f"{module}:{case}", tmp_path / "t")) == 2
    err = capsys.readouterr().err
    assert "logits" in err and "Traceback" not in err, err
    assert not any((tmp_path / "t").rglob("*")) if (tmp_path / "t").exists() else True

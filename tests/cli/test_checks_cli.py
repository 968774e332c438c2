"""``depthscale coord-check`` and ``transfer-check`` on a user's own model factory
("module:function"): verdict table, CSV/JSON/PNG written, Adam accepted; bad factory strings
are one line and exit 2 before any work, with nothing written."""

from __future__ import annotations

import csv
import json
import math
import textwrap
from pathlib import Path

import pytest

from depthscale.cli import main

FACTORY = textwrap.dedent('''
    import torch
    from torch import nn


    class Block(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(n, n), nn.Linear(n, n)

        def forward(self, x):
            return x + self.fc2(torch.relu(self.fc1(x)))


    def make_net(input_shape, n_out, width, depth, **options):
        d_in = 1
        for s in input_shape:
            d_in *= s
        return nn.Sequential(nn.Flatten(), nn.Linear(d_in, width),
                             *(Block(width) for _ in range(depth)), nn.Linear(width, n_out))


    class Projected(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.fc1, self.fc2, self.skip = nn.Linear(n, n), nn.Linear(n, n), nn.Linear(n, n)

        def forward(self, x):
            return self.skip(x) + self.fc2(torch.relu(self.fc1(x)))


    def make_staged(input_shape, n_out, width, depth, **options):
        """Two stages of depth blocks, the second opened by a projected one."""
        d_in = 1
        for s in input_shape:
            d_in *= s
        blocks = [Projected(width) if i == depth else Block(width) for i in range(2 * depth)]
        return nn.Sequential(nn.Flatten(), nn.Linear(d_in, width), *blocks,
                             nn.Linear(width, n_out))


    NOT_A_FUNCTION = 3


    def wrong_signature(width):
        return nn.Linear(width, width)
''')


@pytest.fixture
def factory_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "user_nets_h11.py").write_text(FACTORY)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "user_nets_h11"


def test_coord_check_on_a_user_factory_with_adam(
    tmp_path: Path, factory_module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cc"
    code = main(["coord-check", "--model", f"{factory_module}:make_net", "--param", "completep",
                 "--optimizer", "adam", "--lr", "0.01", "--dataset", "digits", "--widths",
                 "16,32", "--depths", "2,4", "--width", "16", "--depth", "2", "--seeds", "2",
                 "--batch-size", "32", "--out", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    summary = json.loads((out / "coord_check.json").read_text())
    findings = {f["finding"] for f in summary["fits"] if f["band"] is not None}
    assert summary["verdict"] == ("FAIL" if "contradicts" in findings else "INCONCLUSIVE"
                                  if "undecided" in findings else "PASS")
    assert text.splitlines()[0].startswith("layer type")
    assert f"{summary['verdict']}: {summary['evidence']}" in text
    assert summary["optimizer"] == "adam" and summary["recipe"] == "completep"
    assert summary["settings"]["model"] == f"{factory_module}:make_net"
    # two residual blocks of two layers at depth 2: fc1 reads the stream, fc2 writes it
    fits = {(f["layer_type"], f["quantity"], f["axis"]) for f in summary["fits"]}
    assert ("branch_out", "act", "depth") in fits and ("branch_in", "own_update", "depth") in fits
    with open(out / "coord_check.csv") as fh:
        rows = list(csv.DictReader(fh))
    # per (sweep size, seed): the layers input 1, branch_in d, branch_out d, stream_mid 1,
    # stream (after the last block) 1, output 1; and the own update of each weight's use:
    # input 1, fc1 d, fc2 d, output 1
    assert len(rows) == 2 * ((6 + 4 * 2) * 2 + (6 + 4 * 2) + (6 + 4 * 4))
    assert (out / "coord_check.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_transfer_check_on_a_user_factory(
    tmp_path: Path, factory_module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "tc"
    code = main(["transfer-check", "--model", f"{factory_module}:make_net", "--param",
                 "depth-mup", "--dataset", "digits", "--lrs", "0.1,1,10", "--depths", "1,3",
                 "--width", "16", "--steps", "5", "--seeds", "2", "--batch-size", "16", "--out",
                 str(out)])
    assert code == 0
    summary = json.loads((out / "transfer_check.json").read_text())
    assert [s["depth"] for s in summary["sizes"]] == [1, 3]
    assert summary["tolerance_decades"] == 0.3 and summary["lrs"] == [0.1, 1.0, 10.0]
    etas = [s["eta_star"] for s in summary["sizes"]]
    assert summary["drift_decades"] == pytest.approx(abs(math.log10(etas[0] / etas[1])))
    assert summary["ci_low"] <= summary["ci_high"]
    assert f"{summary['verdict']}: " in capsys.readouterr().out
    with open(out / "transfer_check.csv") as fh:
        assert len(list(csv.DictReader(fh))) == 2 * 3 * 2
    assert (out / "transfer_check.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_coord_check_leaves_out_depths_outside_the_residual_regime(
    tmp_path: Path, factory_module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """At depth 1 one of the two additions has a projection shortcut: depth 1 is not trained,
    the JSON and the printed evidence say so; with one depth left, exit 2 naming a grid."""
    args = ["coord-check", "--model", f"{factory_module}:make_staged", "--param", "completep",
            "--optimizer", "adam", "--lr", "0.01", "--dataset", "digits", "--widths", "16,32",
            "--width", "16", "--depth", "2", "--seeds", "2", "--batch-size", "32"]
    out = tmp_path / "cc"
    assert main([*args, "--depths", "1,2,4", "--out", str(out)]) == 0
    summary = json.loads((out / "coord_check.json").read_text())
    assert summary["depth_regime"].startswith("depths [1] left out")
    assert summary["depth_regime"] in capsys.readouterr().out
    assert {tuple(f["sizes"]) for f in summary["fits"] if f["axis"] == "depth"} == {(2, 4)}
    never = tmp_path / "never"
    assert main([*args, "--depths", "1,2", "--out", str(never)]) == 2
    assert "--depths 2,4" in capsys.readouterr().err and not never.exists()


@pytest.mark.parametrize("command", ["coord-check", "transfer-check"])
@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("no_such_module_h11:make", "cannot import 'no_such_module_h11' (ModuleNotFoundError"),
        ("{mod}:missing", "has no attribute 'missing'"),
        ("{mod}:NOT_A_FUNCTION", "is a int, not a function"),
        ("{mod}:wrong_signature", "which does not accept (input_shape, n_out, width, depth"),
        ("{mod}:", "must read 'package.module:function'"),
        ("resnet9", "unknown model 'resnet9'"),
    ],
)
def test_bad_factory_strings_are_one_line_and_exit_2_before_any_work(
    tmp_path: Path, factory_module: str, capsys: pytest.CaptureFixture[str], command: str,
    model: str, message: str,
) -> None:
    out = tmp_path / "never"
    code = main([command, "--model", model.format(mod=factory_module), "--dataset", "digits",
                 "--out", str(out)])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not out.exists() or not any(out.iterdir())

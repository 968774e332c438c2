"""tools/laws_second_route.py, the second route to a laws sweep's alpha per pass, on stores
written here whose optima are known in closed form."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from tool_module import load_tool

#: alpha of the optima during pass 1 and during pass 2 (the per-step loss is a parabola in
#: log10 LR centred on 0.1 L^alpha, seed k shifted by 0.05 k decades)
EARLY, LATE = -1.5, -2.5
STEPS = 8


def _module() -> ModuleType:
    return load_tool("laws_second_route")


def _store(folder: Path, runs: list[tuple[int, int, float, list[float], str]]) -> None:
    """A results.sqlite with the columns the tool reads: (depth, seed, lr, losses, status)."""
    folder.mkdir(parents=True)
    con = sqlite3.connect(folder / "results.sqlite")
    con.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, status TEXT, spec TEXT, "
                "curve TEXT)")
    for i, (depth, seed, lr, loss, status) in enumerate(runs):
        con.execute("INSERT INTO runs VALUES (?, ?, ?, ?)",
                    (f"{folder.name}-{i}", status,
                     json.dumps({"depth": depth, "seed": seed, "lr": lr}),
                     json.dumps({"loss": loss})))
    con.commit()
    con.close()


def _sweep(tmp: Path) -> Path:
    """A coarse study (seed 0, one LR diverged) and a fine one (seeds 0-2) at 4 depths."""
    def loss(depth: int, seed: int, lr: float) -> list[float]:
        x = math.log10(lr)
        centre = [math.log10(0.1) + a * math.log10(depth) + 0.05 * seed for a in (EARLY, LATE)]
        return [1.0 + (x - centre[step >= STEPS]) ** 2 for step in range(2 * STEPS)]

    grid = list(10 ** np.arange(-4.0, 0.01, 0.1))
    coarse = [(d, 0, lr, loss(d, 0, lr), "done") for d in (2, 4, 8, 16) for lr in grid[::5]]
    coarse.append((2, 0, 10.0, [math.inf], "diverged"))
    fine = [(d, s, lr, loss(d, s, lr), "done") for d in (2, 4, 8, 16) for s in range(3)
            for lr in grid]
    _store(tmp / "laws-x-coarse", coarse)
    _store(tmp / "laws-x-fine", fine)
    return tmp / "laws-x-"


def test_alpha_per_pass_and_its_change_are_the_closed_form_ones(tmp_path: Path) -> None:
    """The running loss after pass 1 is minimised at the first centre and after pass 2 at the
    two centres' mean: alpha -1.5, then -2.0, the same for every seed (a seed's shift is the
    same at every depth), so the change is exactly -0.5 with an interval of width 0."""
    tool = _module()
    pooled, counts = tool.load_runs(str(_sweep(tmp_path)))
    assert counts["studies"] == 2 and counts["rows_diverged"] == 1
    assert counts["duplicate_lr"] == 4 * 9  # the coarse LRs are fine ones too, counted once
    table = tool.optima_table(pooled, [1, 2], STEPS, True)
    for p, alpha in ((1, EARLY), (2, (EARLY + LATE) / 2)):
        slopes = [tool.seed_slope(tool.interior(table[p], s)) for s in range(3)]
        assert slopes == pytest.approx([alpha] * 3, abs=1e-9)
    for s in range(3):
        a, b = tool.interior(table[1], s), tool.interior(table[2], s)
        assert tool.seed_slope(b) - tool.seed_slope(a) == pytest.approx(-0.5, abs=1e-9)


def test_an_optimum_at_the_grid_end_is_left_out_and_counted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """After pass 2, L = 16's optimum 10^(-1 - 2 log10 16) = 10^-3.41 lies below a grid cut
    at 10^-3, so its minimum is the grid's lowest LR: on the edge, for every seed, and no
    other depth's; the whole grid gives the closed-form change in the printed table."""
    tool = _module()
    prefix = _sweep(tmp_path)
    pooled, _ = tool.load_runs(str(prefix))
    cut = {k: {x: r for x, r in runs.items() if x >= -3.0} for k, runs in pooled.items()}
    table = tool.optima_table(cut, [1, 2], STEPS, True)
    assert all(table[2][(16, s)].edge for s in range(3))
    assert not any(o.edge for (d, _), o in table[2].items() if d < 16)
    tool.main([str(prefix), "--passes", "1", "2", "--steps-per-pass", str(STEPS)])
    out = capsys.readouterr().out
    assert "change pass 1 -> 2: -0.500 [-0.500, -0.500]" in out

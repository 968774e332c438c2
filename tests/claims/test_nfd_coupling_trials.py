"""nfd-prop2/prop6's coupling claim: the width sweep's trials are set apart (width_trials)."""

from __future__ import annotations

import csv
from pathlib import Path

from depthscale.claims import CLAIMS, ClaimContext


def test_width_sweep_uses_width_trials_and_the_depth_sweep_trials(tmp_path: Path) -> None:
    c = CLAIMS["nfd-prop2"]
    settings = {**c.settings["smoke"], "trials": 2, "width_trials": 5}
    out = c.run(ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None,
                             seed=0, settings=settings))
    assert out.data is not None
    rows = list(csv.DictReader(out.data.open()))
    assert {r["trials"] for r in rows if r["sweep"] == "width"} == {"5"}
    assert {r["trials"] for r in rows if r["sweep"] == "depth"} == {"2"}
    assert c.settings["quick"]["width_trials"] == 48 and c.settings["quick"]["trials"] == 8
    # prop6 shares the claim code and, without width_trials, uses trials for both sweeps
    assert "width_trials" not in CLAIMS["nfd-prop6"].settings["quick"]

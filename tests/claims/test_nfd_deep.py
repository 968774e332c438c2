"""nfd-deep's check is strict: identical arms (the correction removed) are no improvement."""

from __future__ import annotations

from pathlib import Path

from depthscale.claims import CLAIMS, ClaimContext


def test_removing_the_correction_fails_strictly(tmp_path: Path) -> None:
    c = CLAIMS["nfd-deep"]
    settings = {**c.settings["smoke"], "corrected_recipe": "depth-mup", "seeds": 2}
    out = c.run(ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None,
                             seed=0, settings=settings))
    assert out.verdict == "FAIL", out.reason
    for k in ("train_loss", "test_loss", "test_acc"):
        name = f"{k}_nfd_minus_depth_mup"
        assert out.measured[name] == 0.0
        assert out.measured[f"{name}_ci_low"] == out.measured[f"{name}_ci_high"] == 0.0
        assert f"{name}: contradicts" in out.reason

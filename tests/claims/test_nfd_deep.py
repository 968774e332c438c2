"""nfd-deep's check is strict: identical arms (the correction removed) are no improvement."""

from __future__ import annotations

from pathlib import Path

import pytest

from depthscale.claims import CLAIMS, ClaimContext
from depthscale.claims.nfd.deep import (
    DeepMeasure,
    DeepSettings,
    judge_deep,
    measure_deep,
    measure_deep_round,
)
from depthscale.claims.registry import read_settings


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


def _measure(diffs: dict[str, list[float]], looks: int) -> DeepMeasure:
    """Final rows whose Eq. 8 minus depth-muP differences are ``diffs`` per metric."""
    rows = []
    for seed in range(len(diffs["train_loss"])):
        base = {"train_loss": 1.0, "test_loss": 1.0, "test_acc": 0.5}
        rows.append({"arm": "depth_mup", "seed": seed, "epoch": "final", **base})
        rows.append({"arm": "nfd_depth", "seed": seed, "epoch": "final",
                     **{k: base[k] + d[seed] for k, d in diffs.items()}})
    return DeepMeasure(rows, (("depth_mup", "depth-mup"), ("nfd_depth", "nfd-depth")), looks)


def test_seed_rounds_widen_each_look_by_bonferroni() -> None:
    """Differences -0.1 +- 0.1 over 8 seeds: the one-look 95% t-interval of the test loss
    (t(0.975, 7) = 2.365) lies below 0; with 3 looks each is a 98.33% interval (t = 3.128),
    exactly that much wider, and the verdict follows its interval."""
    import math

    import numpy as np

    noise = [0.1, -0.1] * 4
    diffs = {"train_loss": [-0.3 + e for e in noise], "test_loss": [-0.1 + e for e in noise],
             "test_acc": [0.1 - e for e in noise]}
    half = 0.1 * math.sqrt(8 / 7) / math.sqrt(8)  # SD with ddof 1, over sqrt(n)
    one, three = judge_deep(_measure(diffs, 1)), judge_deep(_measure(diffs, 3))
    low1 = one.measured["test_loss_nfd_minus_depth_mup_ci_low"]
    low3 = three.measured["test_loss_nfd_minus_depth_mup_ci_low"]
    assert low1 == pytest.approx(-0.1 - 2.364624 * half, abs=1e-5)
    assert low3 == pytest.approx(-0.1 - 3.127552 * half, abs=1e-5)
    assert one.decision is not None and one.decision[0] == "PASS"
    assert "98.33% CI" in three.decision[1] and "3 seed round(s)" in three.decision[1]
    # a weaker effect: decided by the one-look interval, not once the 3 looks are paid for
    weak = {**diffs, "test_loss": [-0.05 + e for e in np.array(noise) * 0.5]}
    assert judge_deep(_measure(weak, 1)).decision[0] == "PASS"
    assert judge_deep(_measure(weak, 3)).decision[0] == "INCONCLUSIVE"


def test_rounds_add_seeds_only_while_undecided_and_keep_the_trained(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Smoke nets with rounds 2 -> 4: identical arms are decided (FAIL) at the first look, so
    no second round runs; a measure at 4 seeds reuses the 2 already trained."""
    from depthscale.claims.nfd import deep

    trained: list[tuple[str, int]] = []
    real = deep._deep_run

    def counting(ctx, s, data, tag, recipe, seed, rows):  # type: ignore[no-untyped-def]
        trained.append((tag, seed))
        real(ctx, s, data, tag, recipe, seed, rows)

    monkeypatch.setattr(deep, "_deep_run", counting)
    c = CLAIMS["nfd-deep"]
    settings = {**c.settings["smoke"], "corrected_recipe": "depth-mup", "seeds": 2,
                "max_seeds": 4}
    ctx = ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None, seed=0,
                       settings=settings)
    s = read_settings(DeepSettings, settings)
    m = measure_deep(ctx, s)
    judgement = judge_deep(m)
    assert judgement.decision is not None and judgement.decision[0] == "FAIL"
    assert sorted(trained) == [(a, s) for a in ("depth_mup", "nfd_depth") for s in (0, 1)]
    assert m.looks == 2
    more = measure_deep_round(ctx, s, 4, done=m)
    assert sorted(trained[4:]) == [(a, s) for a in ("depth_mup", "nfd_depth") for s in (2, 3)]
    assert len([r for r in more.rows if r["epoch"] == "final"]) == 8

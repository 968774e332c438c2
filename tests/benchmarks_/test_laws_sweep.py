"""The laws-sweep benchmarks at their quick size: fields and agreement with the loop, never
speed."""

from __future__ import annotations

import pytest

from depthscale.benchmarks import BENCHMARKS, laws_sweep


@pytest.mark.parametrize("model", laws_sweep.MODELS)
def test_quick_laws_sweep_matches_the_one_thread_loop(model: str) -> None:
    res = laws_sweep.measure(model, quick=True, repeats=1)
    assert res.name == f"laws-sweep-{model}" and res.name in BENCHMARKS
    assert res.ratio > 0 and res.baseline_seconds > 0
    extra = res.extra
    assert extra["members"] == laws_sweep.QUICK_MEMBERS and extra["width"] == 32
    assert extra["matches_one_thread_loop"], extra
    assert extra["members_within_rtol"] == extra["members"]
    assert extra["one_thread"]["status_match"]
    assert extra["one_thread"]["max_rel_loss_diff_ok_members"] <= laws_sweep.LOSS_RTOL
    assert set(extra["load"]) == {"before", "after"}
    assert extra["goal"] == "ratio >= 2 on 2 threads" and isinstance(extra["met"], bool)

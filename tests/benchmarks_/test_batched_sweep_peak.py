"""batched-sweep against its matmul ceiling: JSON fields, goal flags, device plumbing (never
timings)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import depthscale.benchmarks.batched_sweep as bs
from depthscale.data import Dataset
from depthscale.errors import ConfigError
from depthscale.train.batched import train_batched


def _data(*_: Any, **__: Any) -> Dataset:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(48, 1, 40, generator=gen)
    y = torch.randint(0, 10, (48,), generator=gen)
    return Dataset("synthetic", x[:32], y[:32], x[32:], y[32:], (1, 40), "classification", 10)


@pytest.fixture()
def tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"WIDTH": 8, "SMALL_WIDTH": 4, "DEPTH": 2, "BATCH": 8,
                        "QUICK_MEMBERS": 2, "QUICK_STEPS": 2, "WARMUP_STEPS": 1,
                        "PEAK_STEPS": 1, "QUICK_PEAK_REPEATS": 2, "SWEEP": False}.items():
        monkeypatch.setattr(bs, name, value)
    monkeypatch.setattr(bs, "load", _data)


def test_bare_matmuls_flops_and_products() -> None:
    # chain 3 -> 4 -> 4 -> 2, G = 2, B = 5: forward and weight gradient per layer, input
    # gradient past the first: 2 G B (2*3*4 + 3*4*4 + 3*4*2) = 20 * 96
    run, flops = bs.bare_matmuls([(3, 4), (4, 4), (4, 2)], 2, 5, torch.device("cpu"))
    assert flops == 20 * 96
    run()  # runs into its preallocated outputs


def test_peak_fields_and_threads_restored() -> None:
    threads = torch.get_num_threads()
    res = bs.peak(members=2, width=8, depth=2, batch=4, steps=1, repeats=3)
    assert torch.get_num_threads() == threads
    assert (res["members"], res["width"], res["depth"], res["device"]) == (2, 8, 2, "cpu")
    assert res["torch_threads"] == 1 and res["repeats"] == 3 and res["timing"] == "median"
    assert isinstance(res["malloc_tuned"], bool)
    # layers 40 -> 8, 8 -> 8 (x2), 8 -> 10 at G = 2, B = 4
    assert res["matmul_gflop_per_step"] == pytest.approx(
        2 * 2 * 4 * (2 * 40 * 8 + 2 * 3 * 8 * 8 + 3 * 8 * 10) / 1e9)
    assert res["peak_fraction"] == pytest.approx(
        res["bare_ms_per_step"] / res["batched_ms_per_step"])
    assert res["bare_gflops"] == pytest.approx(
        res["matmul_gflop_per_step"] / res["bare_ms_per_step"] * 1e3)


def test_run_reports_ceiling_and_small_width_with_goals(tiny: None) -> None:
    res = bs.run(True)
    extra = res.extra
    assert extra["device"] == "cpu" and extra["width"] == 8 and extra["members"] == 2
    assert extra["peak"]["width"] == 8 and extra["peak"]["members"] == 2
    assert extra["peak_fraction"] == extra["peak"]["peak_fraction"] > 0
    assert extra["peak_goal"] == "peak_fraction >= 0.85 (width 8, one thread)"
    assert extra["peak_met"] is (extra["peak_fraction"] >= bs.GOAL_PEAK)
    small = extra["width_4"]
    assert small["width"] == 4 and small["peak"]["width"] == 4 and small["goal"] == "ratio >= 5"
    assert small["ratio"] == pytest.approx(small["baseline_seconds"] / small["ours_seconds"])
    assert small["matches_one_thread_loop"] is True
    assert small["met"] is (small["ratio"] >= bs.GOAL_RATIO_SMALL)
    # the ceiling: loop per member-step over the bare matmuls per member-step, same threads
    assert small["peak"]["torch_threads"] == small["torch_threads"]
    members = extra["members"]
    per_member_step = small["baseline_seconds"] * 1e3 / small["member_steps_done"]
    assert small["ceiling_ratio"] == pytest.approx(
        per_member_step / (small["peak"]["bare_ms_per_step"] / members))
    assert small["goal_reachable"] is (small["ceiling_ratio"] >= bs.GOAL_RATIO_SMALL)
    assert "sweep" not in extra  # SWEEP off


def test_device_reaches_both_training_paths_and_the_ceiling(
    tiny: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run(device=...)`` hands the device to measure, peak, TrainConfig; checked on the CPU
    by letting the device check pass and recording what the training paths receive."""
    seen: dict[str, Any] = {}

    class Stop(Exception):
        pass

    def fake_batched(model: Any, plan: Any, data: Any, config: Any, lrs: Any) -> Any:
        seen["train_batched"] = config.device
        raise Stop

    monkeypatch.setattr(bs, "resolve_device", lambda name: torch.device("cpu"))
    monkeypatch.setattr(bs, "train_batched", fake_batched)
    with pytest.raises(Stop):
        bs.measure(members=2, steps=2, width=4, depth=1, batch=4, device="cuda")
    assert seen["train_batched"] == "cuda"

    real_measure = bs.measure
    calls: list[tuple[str, str]] = []

    def spy(name: str) -> Any:
        def record(**kw: Any) -> Any:
            calls.append((name, kw["device"]))
            if name == "peak":
                raise Stop
            return real_measure(**{**kw, "device": "cpu"})
        return record

    monkeypatch.setattr(bs, "train_batched", train_batched)
    monkeypatch.setattr(bs, "measure", spy("measure"))
    monkeypatch.setattr(bs, "peak", spy("peak"))
    with pytest.raises(Stop):
        bs.run(True, device="cuda:0")
    assert calls == [("measure", "cuda:0"), ("peak", "cuda:0")]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error")
def test_cuda_without_cuda_is_a_config_error_before_work(
    tiny: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bs, "measure", lambda **kw: pytest.fail("work started"))
    with pytest.raises(ConfigError, match="CUDA is not available"):
        bs.run(True, device="cuda")
    with pytest.raises(ConfigError, match="unknown device 'tpu'"):
        bs.peak(members=2, device="tpu")

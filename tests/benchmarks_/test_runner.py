"""The benchmark runner at toy sizes: JSON shape and loss agreement, never speed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import depthscale.benchmarks.batched_sweep as batched_sweep
import depthscale.benchmarks.plan_overhead as po
from depthscale.benchmarks import BENCHMARKS, run_benchmarks
from depthscale.benchmarks.core import BenchResult
from depthscale.errors import ConfigError


@pytest.fixture()
def tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"WIDTH": 16, "DEPTH": 3, "BATCH": 8, "QUICK_STEPS": 2,
                        "QUICK_REPEATS": 2, "WARMUP": 1}.items():
        monkeypatch.setattr(po, name, value)


def test_plan_overhead_json(tiny: None, tmp_path: Path) -> None:
    path = tmp_path / "out" / "bench.json"
    results = run_benchmarks(["plan-overhead"], quick=True, json_path=path)
    assert [r.name for r in results] == ["plan-overhead"]
    data = json.loads(path.read_text())
    assert set(data) >= {"benchmarks", "machine"}
    assert {"python", "torch", "cpu_count", "torch_threads"} <= set(data["machine"])
    (bench,) = data["benchmarks"]
    assert set(bench) == {"name", "baseline", "baseline_seconds", "ours_seconds", "ratio", "extra"}
    assert bench["name"] == "plan-overhead"
    assert bench["baseline_seconds"] > 0 and bench["ours_seconds"] > 0
    assert bench["ratio"] == pytest.approx(bench["baseline_seconds"] / bench["ours_seconds"])
    extra = bench["extra"]
    assert (extra["width"], extra["depth"], extra["batch"]) == (16, 3, 8)
    assert extra["total_steps_each"] == 2 * (2 + 1)
    assert extra["max_abs_loss_diff"] < 1e-5
    assert extra["losses_match"] is True
    assert extra["goal"] == "ratio >= 0.99"
    assert isinstance(extra["met"], bool)
    assert [p.name for p in path.parent.iterdir()] == ["bench.json"]


#: benchmarks whose quick run has a test of its own (tests/limits, test_batched_sweep_peak.py,
#: test_laws_sweep.py), stood in for by a fake in the run of them all
_TESTED_ALONE = ("kernel", "sde", "nfd", "batched-sweep", "laws-sweep-")


def test_all_benchmarks_without_json(tiny: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every benchmark, in order, and nothing written; those with a quick test of their own
    are replaced by a fake that records its call."""
    called: list[str] = []

    def fake(name: str) -> Callable[..., BenchResult]:
        def run(quick: bool, **_: object) -> BenchResult:
            called.append(name)
            return BenchResult(name, "fake", 1.0, 1.0)
        return run

    for name in BENCHMARKS:
        if name.startswith(_TESTED_ALONE):
            monkeypatch.setitem(BENCHMARKS, name, fake(name))
    monkeypatch.setattr(batched_sweep, "run", fake("batched-sweep"))  # called with its device
    results = run_benchmarks(None, quick=True, json_path=None)
    assert [r.name for r in results] == list(BENCHMARKS)
    assert called == [n for n in BENCHMARKS if n.startswith(_TESTED_ALONE)] and len(called) >= 5
    assert {"plan-overhead", "mean-ode", "sweep-overhead"} <= {
        r.name for r in results if r.baseline != "fake"}


def test_plain_baseline_matches_planned_model() -> None:
    result = po.measure(width=8, depth=2, batch=4, steps=3, repeats=1, warmup=0, lr=0.1)
    assert result.extra["max_abs_loss_diff"] < 1e-5
    assert result.extra["final_loss"] > 0


def test_baseline_forward_is_the_planned_forward() -> None:
    from depthscale.models import build

    model, plan = build("resnet1", "depth-mup", input_shape=(5,), n_out=3, width=8, depth=4)
    specs = {s.name: s for s in plan.resolve(model)}
    base = po.PlainResNet(5, 3, 8, 4, specs["embed.weight"].a, specs["branches.0.weight"].a,
                          specs["readout.weight"].a)
    with torch.no_grad():
        base.U.copy_(model.embed.weight)
        for w, branch in zip(base.W, model.branches, strict=True):
            w.copy_(branch.weight)
        base.v.copy_(model.readout.weight)
    x = torch.randn(6, 5, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(base(x), model(x), rtol=0, atol=0)


def test_unknown_benchmark_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "bench.json"
    with pytest.raises(ConfigError, match=r"'nope'.*choose from: plan-overhead"):
        run_benchmarks(["plan-overhead", "nope"], quick=True, json_path=path)
    assert not path.exists()


def test_a_device_other_than_cpu_is_refused_for_cpu_only_benchmarks(tmp_path: Path) -> None:
    """``--device`` reaches the batched sweep only; asking it of a CPU-only benchmark is a
    ConfigError before anything runs (and nothing is written)."""
    out = tmp_path / "bench.json"
    with pytest.raises(ConfigError, match=r"run on the CPU only.*applies to: batched-sweep"):
        run_benchmarks(["kernel", "batched-sweep"], quick=True, json_path=out, device="cuda")
    assert not out.exists()

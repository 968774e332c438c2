"""Sweeps with ``batch_lrs``: runs that differ only in lr trained as one batched group give the
records a one-by-one sweep gives (to float rounding), keep divergence per member, resume only
the missing members, fall back to one by one for models that cannot be batched, and run the
same way in-process, in a process pool and on Ray."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from depthscale.cli import main
from depthscale.errors import ConfigError
from depthscale.studies import executors
from depthscale.studies.executors import InProcessExecutor
from depthscale.studies.records import RunRecord
from depthscale.studies.runner import lr_groups, run_group, run_one
from depthscale.studies.spec import RunSpec, expand, load_study
from depthscale.studies.store import open_store
from depthscale.studies.sweep import run_study

#: Batched members agree with one-by-one runs to this relative tolerance (float32 rounding of
#: a batched matmul against a single one; measured ~3e-7 here).
RTOL = 1e-5

TINY = """
[study]
name = "tiny-batched"
model = "resnet1"
recipe = "laws"
dataset = "teacher"
[data]
dim = 8
n_train = 96
n_test = 32
[train]
steps = 9            # three epochs of three batches
batch_size = 32
loss = "mse"
eval_every = 3
[grid]
depth = [1, 2]
width = [8]
seed = [0, 1]
lr = [0.03, 0.1, 1e4]   # 1e4 diverges within three steps
"""


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _records(directory: Path) -> dict[str, RunRecord]:
    with open_store(directory, readonly=True) as store:
        return {r.run_id: r for r in store.records()}


def _close(a: Any, b: Any) -> bool:
    """Equal structure; floats equal to RTOL (None stands for a non-finite value)."""
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(a, b, rel_tol=RTOL, abs_tol=1e-12)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_close, a, b))
    return bool(a == b)


def _assert_same_outcome(ref: RunRecord, got: RunRecord) -> None:
    assert (got.run_id, got.spec, got.status, got.error) == (
        ref.run_id, ref.spec, ref.status, ref.error)
    assert got.metrics.keys() == ref.metrics.keys()
    for key in ("steps_done", "diverged_at"):
        assert got.metrics[key] == ref.metrics[key], key
    for key, value in ref.metrics.items():
        assert _close(value, got.metrics[key]), (key, value, got.metrics[key])
    assert got.curve_steps == ref.curve_steps
    assert _close(ref.curve_losses, got.curve_losses)


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """TINY swept one by one and batched, in-process."""
    base = tmp_path_factory.mktemp("batched")
    spec = _write(base / "tiny.toml", TINY)
    plain = run_study(spec, base / "plain")
    batched = run_study(spec, base / "batched", batch_lrs=True)
    return {"spec": spec, "plain": plain, "batched": batched,
            "plain_records": _records(base / "plain"),
            "batched_records": _records(base / "batched")}


def test_batched_sweep_gives_the_one_by_one_records(swept: dict[str, Any]) -> None:
    plain, batched = swept["plain"], swept["batched"]
    assert (plain.batched, plain.groups) == (0, 0)
    assert (batched.batched, batched.groups, batched.ran) == (12, 4, 12)
    assert batched.counts == plain.counts
    ref, got = swept["plain_records"], swept["batched_records"]
    assert set(got) == set(ref) and len(got) == 12
    for rid in ref:
        _assert_same_outcome(ref[rid], got[rid])
    # epochs, periodic evaluations and final metrics are all there for the finished runs
    done = [r for r in got.values() if r.status == "done"]
    assert done and all(len(r.metrics["epoch_losses"]) == 3 for r in done)
    assert all([e["step"] for e in r.metrics["evals"]] == [3, 6, 9] for r in done)
    assert all("final_test_loss" in r.metrics for r in done)


def test_batched_records_say_their_time_is_a_share_of_the_group(swept: dict[str, Any]) -> None:
    by_group: dict[tuple[int, int], list[RunRecord]] = {}
    for r in swept["batched_records"].values():
        by_group.setdefault((r.spec.depth, r.spec.seed), []).append(r)
    assert len(by_group) == 4
    for members in by_group.values():
        assert len(members) == 3
        assert len({r.seconds for r in members}) == 1 and members[0].seconds > 0
        assert all(r.worker.endswith("[batch of 3: seconds = group time / 3]")
                   for r in members)
    assert not any("batch of" in r.worker for r in swept["plain_records"].values())


def test_a_diverging_member_is_recorded_and_the_others_finish(swept: dict[str, Any]) -> None:
    statuses = {(r.spec.depth, r.spec.seed, r.spec.lr): (r.status, r.metrics["diverged_at"])
                for r in swept["batched_records"].values()}
    for depth in (1, 2):
        for seed in (0, 1):
            status, diverged_at = statuses[(depth, seed, 1e4)]
            assert status == "diverged" and 2 <= diverged_at <= 3
            assert statuses[(depth, seed, 0.03)] == ("done", None)
    diverged = [r for r in swept["batched_records"].values() if r.status == "diverged"]
    assert all(r.metrics["steps_done"] == r.metrics["diverged_at"] - 1 for r in diverged)
    assert all(not any(k.startswith("final_") for k in r.metrics) for r in diverged)


def test_resume_batches_only_the_missing_members(
    swept: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kill mid-study, simulated: the store already holds some members of two groups."""
    full = {(r.spec.depth, r.spec.seed, r.spec.lr): r
            for r in swept["batched_records"].values()}
    kept = [full[(1, 0, 0.03)], full[(1, 0, 1e4)], full[(2, 1, 0.1)]]
    out = tmp_path / "resumed"
    with open_store(out) as store:
        for r in kept:
            assert store.record(r)
    groups: list[list[float]] = []
    singles: list[float] = []

    def spy_group(specs: Sequence[RunSpec]) -> list[RunRecord]:
        groups.append([s.lr for s in specs])
        return run_group(specs)

    def spy_one(spec: RunSpec) -> RunRecord:
        singles.append(spec.lr)
        return run_one(spec)

    monkeypatch.setattr(executors, "run_group", spy_group)
    monkeypatch.setattr(executors, "run_one", spy_one)
    result = run_study(swept["spec"], out, batch_lrs=True)
    assert (result.skipped, result.ran, result.batched, result.groups) == (3, 9, 8, 3)
    assert sorted(map(sorted, groups)) == [[0.03, 0.1, 1e4], [0.03, 0.1, 1e4], [0.03, 1e4]]
    assert singles == [0.1]  # the one member left of group (depth 1, seed 0)
    after = _records(out)
    assert len(after) == 12
    for r in kept:  # untouched: not rerun
        assert after[r.run_id].finished_at == r.finished_at
        assert after[r.run_id].worker == r.worker
    for rid, ref in swept["batched_records"].items():
        _assert_same_outcome(ref, after[rid])
    again = run_study(swept["spec"], out, batch_lrs=True)
    assert (again.skipped, again.ran, again.batched) == (12, 0, 0)


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (("[data]", '[model]\nbackward = "decoupled"\n[data]'), "buffers (backward copies)"),
        (('loss = "mse"', 'loss = "mse"\nmomentum = 0.9'), "momentum"),
    ],
)
def test_runs_that_cannot_be_batched_run_one_by_one(
    edit: tuple[str, str], why: str, tmp_path: Path
) -> None:
    spec = _write(tmp_path / "spec.toml", TINY.replace(*edit, 1).replace(
        "seed = [0, 1]", "seed = [0]"))
    runs = expand(load_study(spec))
    assert lr_groups(runs) == [(r,) for r in runs], why
    batched = run_study(spec, tmp_path / "batched", batch_lrs=True)
    run_study(spec, tmp_path / "plain")
    assert (batched.batched, batched.groups, batched.ran) == (0, 0, 6)
    got, ref = _records(tmp_path / "batched"), _records(tmp_path / "plain")
    assert {k: r.outcome() for k, r in got.items()} == {k: r.outcome() for k, r in ref.items()}
    # run_group itself falls back too, with run_one's records
    group = run_group(runs[:3])
    assert [r.outcome() for r in group] == [ref[r.run_id].outcome() for r in group]
    assert not any("batch of" in r.worker for r in group)


def test_lr_groups_and_run_group_check_their_input(swept: dict[str, Any]) -> None:
    runs = expand(load_study(swept["spec"]))
    groups = lr_groups(runs)
    assert [[s.lr for s in g] for g in groups] == [[0.03, 0.1, 1e4]] * 4
    assert [s for g in groups for s in g] == runs
    assert lr_groups(runs[:1]) == [(runs[0],)] and lr_groups([]) == []
    assert run_group([]) == []
    with pytest.raises(ConfigError, match="differ only in lr"):
        run_group([runs[0], runs[3]])  # another seed


def test_executors_run_units_alike(swept: dict[str, Any], tmp_path: Path) -> None:
    """The process pool batches the same groups as the driver would, with identical results."""
    runs = expand(load_study(swept["spec"]))
    units = lr_groups(runs)[:2] + [(r,) for r in lr_groups(runs)[2]]
    ref = {r.run_id: r.outcome() for r in InProcessExecutor().run_groups(units)}
    pool = list(executors.PoolExecutor(2).run_groups(units))
    assert {r.run_id: r.outcome() for r in pool} == ref and len(ref) == 9
    assert sum("batch of 3" in r.worker for r in pool) == 6
    result = run_study(swept["spec"], tmp_path / "pool", workers=2, batch_lrs=True)
    assert (result.batched, result.ran) == (12, 12)
    got = _records(tmp_path / "pool")
    assert {k: r.outcome() for k, r in got.items()} == {
        k: r.outcome() for k, r in swept["batched_records"].items()}


@pytest.mark.slow
def test_ray_runs_batched_groups(swept: dict[str, Any]) -> None:
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'depthscale[ray]')")
    runs = expand(load_study(swept["spec"]))
    units = [*lr_groups(runs)[:1], (runs[3],)]
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        records = list(executors.RayExecutor().run_groups(units))
    finally:
        ray.shutdown()
    assert len(records) == 4
    # the group as the in-process batched sweep gave it, the lone run as a one-by-one sweep
    batched, plain = swept["batched_records"], swept["plain_records"]
    for r in records:
        expected = plain[r.run_id] if r.spec == runs[3] else batched[r.run_id]
        assert r.outcome() == expected.outcome()


def test_cli_flag(swept: dict[str, Any], tmp_path: Path,
                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cli"
    assert main(["sweep", str(swept["spec"]), "--out", str(out), "--batch-lrs"]) == 0
    text = capsys.readouterr().out
    assert "12 run now" in text and "12 in 4 batched LR group(s)" in text
    got = _records(out)
    assert {k: r.outcome() for k, r in got.items()} == {
        k: r.outcome() for k, r in swept["batched_records"].items()}
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    assert "--batch-lrs" in capsys.readouterr().out


def test_batched_group_with_final_eval_test_skips_the_training_set_pass() -> None:
    specs = [RunSpec(model="resnet1", recipe="laws", dataset="mnist1d", width=8, depth=2, lr=lr,
                     seed=0, steps=4, batch_size=32, final_eval="test",
                     data_options=(("n_test", 64), ("n_train", 128))) for lr in (0.05, 0.2)]
    for batched, alone in zip(run_group(specs), (run_one(s) for s in specs), strict=True):
        assert "final_train_loss" not in batched.metrics and "final_train_loss" not in alone.metrics
        assert math.isclose(batched.metrics["final_test_loss"], alone.metrics["final_test_loss"],
                            rel_tol=RTOL)

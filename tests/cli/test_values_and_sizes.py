"""Values a user may type (issue 24): every seed and count is accepted or refused in one line
with exit 2 and nothing written; token datasets refuse a size they cannot hold before drawing
it."""

from __future__ import annotations

from pathlib import Path

import pytest

from depthscale.cli import main
from depthscale.data import load
from depthscale.errors import ConfigError


@pytest.mark.parametrize(("argv", "message"), [
    (["limit", "sde", "--seed", "-1"], "a seed is a whole number from 0 to 2^63 - 1"),
    (["explain", "--seed", str(2**70)], "a seed is a whole number from 0 to 2^63 - 1"),
    (["explain", "--seed", "abc"], "a seed is a whole number"),
    (["reproduce", "--seed", "-5", "--list"], "a seed is a whole number from 0"),
    (["coord-check", "--batch-size", "0"], "--batch-size: must be >= 1"),
    (["limit", "kernel", "--inputs", "-3"], "--inputs: must be >= 1"),
    (["explain", "--width", "0"], "--width: must be >= 1"),
    (["train", "--steps", "-2"], "--steps: must be >= 1"),
    (["train", "--data-option", "seed=abc", "--steps", "1"], "the data's seed is --seed"),
    (["train", "--model", "gpt", "--dataset", "markov", "--data-option", "context=100000",
      "--steps", "1"], "over the 67,108,864 this loader draws"),
    (["explain", "--width", "2000000000"], "has at least 16,000,000,000 parameters"),
    (["explain", "--depth", "20000000"], "over the 100,000 blocks"),
    (["coord-check", "--widths", "64,100000", "--seeds", "1"], "pass --force"),
    (["explain", "--model", "cnn1d", "--width", "20000", "--depth", "4"], "53.6 GiB"),
    (["limit", "sde", "--particles", "100000000000"], "23,841.9 GiB"),
    (["limit", "kernel", "--inputs", "1000000"], "64 bytes x inputs^2"),
    (["limit", "nfd", "--particles", "100000", "--steps", "10000"], "pass --force"),
])
def test_bad_values_are_one_line_and_write_nothing(
    argv: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        raise SystemExit(main(argv))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert message in err and "Traceback" not in err, err
    assert not any(tmp_path.rglob("*"))


def test_the_largest_seed_is_accepted() -> None:
    data = load("teacher", seed=2**63 - 1, n_train=4, n_test=2)
    assert len(data.x_train) == 4


def test_token_bound_names_the_size() -> None:
    with pytest.raises(ConfigError, match=r"GiB as int64"):
        load("pytext", context=40000)


def test_the_size_estimate_counts_a_registry_model_exactly_without_allocating() -> None:
    from depthscale.models import build
    from depthscale.models.registry import parameter_count

    for name, shape in (("resnet2", (12,)), ("cnn1d", (1, 12)), ("vit", (3, 8, 8))):
        kw = {"input_shape": shape, "n_out": 5, "width": 16, "depth": 3}
        model, _ = build(name, "depth-mup", **kw)
        assert parameter_count(name, **kw) == sum(p.numel() for p in model.parameters())


def test_force_builds_over_the_limit(monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    from depthscale.train import budget

    monkeypatch.setattr(budget, "LIMITS", budget.Limits(bytes=1000))
    assert main(["explain", "--width", "16", "--depth", "2"]) == 2
    assert "pass --force" in capsys.readouterr().err
    assert main(["explain", "--width", "16", "--depth", "2", "--force"]) == 0


@pytest.mark.parametrize("argv", [
    ["train", "--steps", "1000000000", "--width", "4", "--depth", "2"],
    ["coord-check", "--widths", "4,8", "--depths", "1,2", "--seeds", "1", "--steps", str(10**8)],
    ["transfer-check", "--lrs", "0.01,0.1,1", "--depths", "1,2", "--steps", str(10**9)],
    ["limit", "mean-ode", "--phi", "tanh", "--steps", str(10**9)],
])
def test_a_run_that_would_take_days_is_refused_with_its_estimate(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The time bound (depthscale.train.budget): a lower-bound estimate over 24 h refuses the
    run before any step, naming the estimate, its formula and --force."""
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "would take at least" in err and "pass --force" in err, err
    assert not any(tmp_path.rglob("*"))


def test_a_mean_ode_over_a_billion_inputs_is_refused_by_its_memory_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """The Mean ODE's memory counts its inputs (their forward paths and the particle-input
    preactivations): 10^9 inputs of dim 16 over 17 depth stages need about 16,000 GiB."""
    monkeypatch.chdir(tmp_path)
    assert main(["limit", "mean-ode", "--inputs", str(10**9)]) == 2
    err = capsys.readouterr().err
    assert "needs about" in err and "GiB" in err and "inputs" in err and "--force" in err, err
    assert not any(tmp_path.rglob("*"))


def test_an_allocation_that_fails_under_force_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """--force skips the size bounds; the allocation that then fails (160 GB here) is one line
    naming the failure, not a traceback."""
    monkeypatch.chdir(tmp_path)
    code = main(["transfer-check", "--lrs", "0.01,0.1,1", "--depths", "1,2", "--seeds", "1",
                 "--steps", "1", "--width", "1000000000", "--force"])
    err = capsys.readouterr().err
    assert code == 2 and "out of memory" in err and "Traceback" not in err, err


def test_training_time_estimate_is_exact_arithmetic() -> None:
    from depthscale.train.budget import training_seconds

    seconds, formula = training_seconds(parameters=1000, batch_size=10, steps=100, runs=2)
    assert seconds == pytest.approx(2 * 100 * (1e-4 + 6 * 1000 * 10 / 1e11))
    assert "2 run(s) x 100 steps" in formula
    gpu, _ = training_seconds(parameters=1000, batch_size=10, steps=100, device="cuda:0")
    assert gpu == pytest.approx(100 * (1e-4 + 6e4 / 1e15))


# ---- issue 43 items 3 and 7: rates, momentum, and the bounds before any model is built -------
@pytest.mark.parametrize(("argv", "message"), [
    (["train", "--weight-decay", "1e308", "--steps", "1"], "a weight decay must be >= 0 and at "
     "most 3.4e38, float32's largest"),
    (["train", "--weight-decay", "20", "--steps", "1"], "lr x weight_decay must be < 1"),
    (["train", "--momentum", "1", "--steps", "1"], "momentum must be in [0, 1)"),
    (["train", "--momentum", "0.9", "--optimizer", "adam", "--steps", "1"],
     "momentum is an SGD setting"),
    (["train", "--lr", "1e300", "--steps", "1"], "a learning rate must be > 0 and at most 3.4e38"),
    (["transfer-check", "--lrs", "1e300,1e301,1e302", "--depths", "1,2", "--steps", "1"],
     "a learning rate must be > 0 and at most 3.4e38"),
    (["coord-check", "--lr", "1e39", "--steps", "1"], "a learning rate must be > 0 and at most"),
    (["train", "--epochs", "1e9", "--width", "4", "--depth", "2"], "would take at least"),
    (["train", "--width", "60000", "--depth", "1", "--steps", "1"], "53.7 GiB"),
])
def test_rates_and_sizes_are_refused_before_any_model_is_built(
    argv: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--weight-decay 1e308 and --lrs 1e300,... were overflow tracebacks, momentum >= 1 or
    with adam failed in the optimizer, --epochs 1e9 was checked only after the model was
    built: each is one line, exit 2, before any model is built."""
    from depthscale import models

    def never(*_a: object, **_k: object) -> None:
        raise AssertionError("a model was built before the refusal")

    monkeypatch.setattr(models, "build", never)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        raise SystemExit(main(argv))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert message in err and "Traceback" not in err, err
    assert not any(tmp_path.rglob("*"))


def test_one_function_sizes_every_run() -> None:
    """run_cost: the exact parameter count (linear in depth, read on meta at depths 1-3), its
    bytes, and the lower-bound time of epochs over the data's size."""
    from depthscale.models import build
    from depthscale.train.budget import run_cost

    cost = run_cost("resnet2", input_shape=(12,), n_out=5, width=16, depth=50, batch_size=10,
                    epochs=2.0, n_train=95, runs=3)
    model, _ = build("resnet2", "depth-mup", input_shape=(12,), n_out=5, width=16, depth=50)
    assert cost.parameters == sum(p.numel() for p in model.parameters())
    assert cost.bytes == 16 * cost.parameters and cost.steps == 20 and not cost.at_least
    assert cost.seconds == pytest.approx(3 * 20 * (1e-4 + 6 * cost.parameters * 10 / 1e11))
    with pytest.raises(ConfigError, match=r"11\.9 GiB .* confirm with max_gib = 12"):
        run_cost("resnet1", input_shape=(4,), n_out=1, width=20000, depth=2,
                 override=lambda bound, need: f"confirm with max_gib = {need:.0f}")

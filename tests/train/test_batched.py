"""Batched training (hand-batched MLPs, vmap for other models) against the one-by-one loop."""

from __future__ import annotations

import copy
import math
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from depthscale.data import Dataset, load
from depthscale.errors import ConfigError
from depthscale.models import MLPResNet, build
from depthscale.train import TrainConfig, TrainResult, train, train_batched
from depthscale.train.batched import program, trainer
from depthscale.train.batched.program import stacked_forward

RTOL = 1e-5


@pytest.fixture(scope="module")
def teacher() -> Dataset:
    return load("teacher", n_train=64, n_test=32, seed=0)


@pytest.fixture(scope="module")
def digits() -> Dataset:
    return load("digits", n_train=96, n_test=48, seed=0)


def _model(data: object, name: str = "resnet1", seed: int = 0, **options: object):  # type: ignore[no-untyped-def]
    shape = data.sample_shape  # type: ignore[attr-defined]
    return build(name, "depth-mup", input_shape=shape, n_out=data.n_out,  # type: ignore[attr-defined]
                 width=16, depth=3, seed=seed, **options)


def _one_by_one(model, plan, data, cfg, lrs, seeds=None):  # type: ignore[no-untyped-def]
    seeds = [cfg.seed] * len(lrs) if seeds is None else seeds
    return [train(copy.deepcopy(model), plan, data, replace(cfg, lr=lr, seed=s))
            for lr, s in zip(lrs, seeds, strict=True)]


def _close(a: float, b: float, rtol: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= rtol * max(abs(b), 1e-12)


def _assert_same(ref: TrainResult, got: TrainResult, rtol: float = RTOL) -> None:
    assert (got.status, got.diverged_at, got.steps_done) == (
        ref.status, ref.diverged_at, ref.steps_done)
    assert len(got.losses) == len(ref.losses)
    assert all(_close(a, b, rtol) for a, b in zip(got.losses, ref.losses, strict=True))
    assert len(got.epoch_losses) == len(ref.epoch_losses)
    assert all(_close(a, b, rtol) for a, b in zip(got.epoch_losses, ref.epoch_losses,
                                                  strict=True))
    assert [e["step"] for e in got.evals] == [e["step"] for e in ref.evals]
    for ge, re in zip(got.evals, ref.evals, strict=True):
        assert ge.keys() == re.keys() and all(_close(ge[k], re[k], rtol) for k in re)
    assert got.final.keys() == ref.final.keys()
    assert all(_close(got.final[k], ref.final[k], rtol) for k in ref.final)


@pytest.mark.parametrize("name", ["resnet1", "resnet1-post", "resnet2", "mlp"])
def test_matches_one_by_one_regression(teacher: Dataset, name: str) -> None:
    model, plan = _model(teacher, name)
    # the plain MLP is at its edge of stability by lr 0.8, where rounding grows (~2e-3)
    lrs = [0.01, 0.1, 0.3, 0.5 if name == "mlp" else 0.8]
    cfg = TrainConfig(steps=30, batch_size=16, loss="mse", eval_every=10, seed=1)
    got = train_batched(model, plan, teacher, cfg, lrs)
    for ref, res in zip(_one_by_one(model, plan, teacher, cfg, lrs), got, strict=True):
        assert res.status == "ok" and len(res.losses) == 30 and len(res.epoch_losses) == 8
        _assert_same(ref, res)
        assert res.seconds > 0


def test_matches_one_by_one_classification_with_epochs(digits: Dataset) -> None:
    model, plan = _model(digits, "resnet2")
    lrs = [0.05, 0.5, 2.0]
    cfg = TrainConfig(epochs=2.5, batch_size=40, loss="ce", eval_every=3)  # partial batches
    got = train_batched(model, plan, digits, cfg, lrs)
    for ref, res in zip(_one_by_one(model, plan, digits, cfg, lrs), got, strict=True):
        assert set(res.final) == {"train_loss", "train_acc", "test_loss", "test_acc"}
        _assert_same(ref, res)


def test_the_hand_batched_forward_covers_the_mlps_only(teacher: Dataset, digits: Dataset) -> None:
    for name in ("resnet1", "resnet1-post", "resnet2", "resnet3", "mlp"):
        model, _ = _model(teacher, name)
        assert stacked_forward(model) is not None, name
    assert stacked_forward(_model(teacher, backward="decoupled")[0]) is None
    cnn, _ = build("cnn2d", "depth-mup", input_shape=digits.sample_shape, n_out=10, width=4,
                   depth=2)
    assert stacked_forward(cnn) is None

    class Doubled(MLPResNet):  # a subclass may change the forward: never hand-batched
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return 2 * super().forward(x)

    assert stacked_forward(Doubled(16, 1, 8, 2)) is None


def _manual(model: torch.nn.Module, loss: str, per_member: bool = False) -> program.Step | None:
    return program._manual_step(program._stacked_program(model), loss, per_member)


_MANUAL_CASES = [("resnet1", {}), ("resnet1-post", {}), ("resnet2", {}), ("resnet3", {}),
                 ("resnet1", {"activation": "tanh"}), ("mlp", {}), ("mlp", {"activation": "tanh"})]


@pytest.mark.parametrize(("name", "options"), _MANUAL_CASES)
@pytest.mark.parametrize(("per_member", "loss", "task"), [
    (False, "ce", "digits"), (True, "ce", "digits"), (False, "mse", "digits"),
    (False, "mse", "teacher"), (True, "mse", "teacher")])
def test_hand_written_backward_is_autograds_to_the_bit(
    digits: Dataset, teacher: Dataset, name: str, options: dict[str, object], per_member: bool,
    loss: str, task: str,
) -> None:
    # Three steps of G = 3 members at learning rates up to the edge of stability, from the
    # same stacked weights: losses and gradients must agree exactly, not to a tolerance.
    # Cross-entropy on labels; squared error on one-hot labels and on regression targets.
    data = digits if task == "digits" else teacher
    model, plan = _model(data, name, **options)
    manual = _manual(model, loss, per_member)
    forward = stacked_forward(model)
    assert manual is not None and forward is not None
    auto = program._autograd_step(forward, loss, per_member)
    lrs = [0.05, 0.5, 4.0]
    trainable, fixed, mult = trainer._stack([model], plan, 3, torch.device("cpu"))
    neg_lr = trainer._step_sizes(trainable, lrs, mult, torch.device("cpu"))
    twin = {k: v.clone() for k, v in trainable.items()}
    gen = torch.Generator().manual_seed(3)
    for _ in range(3):
        idx = torch.randint(0, len(data.x_train), (3, 12) if per_member else (12,),
                            generator=gen)
        xb, yb = data.x_train[idx], data.y_train[idx]
        g_man, l_man = manual(trainable, fixed, xb, yb)
        g_auto, l_auto = auto(twin, fixed, xb, yb)
        assert torch.equal(l_man, l_auto)
        assert g_man.keys() == g_auto.keys() == trainable.keys()
        for k in g_man:
            assert torch.equal(g_man[k], g_auto[k]), k
        trainer._sgd_update(trainable, neg_lr, g_man)
        trainer._sgd_update(twin, neg_lr, g_auto)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_hand_written_backward_on_cuda_matches_the_cpu_to_rounding(digits: Dataset) -> None:
    model, plan = _model(digits, "resnet1")
    cfg = TrainConfig(optimizer="sgd", steps=5, batch_size=16, loss="ce", seed=0)
    cpu = train_batched(model, plan, digits, cfg, [0.05, 0.5])
    gpu = train_batched(model, plan, digits, replace(cfg, device="cuda"), [0.05, 0.5])
    for ref, got in zip(cpu, gpu, strict=True):
        _assert_same(ref, got, rtol=1e-4)


def test_hand_written_backward_only_where_it_repeats_autograd(digits: Dataset) -> None:
    model, _ = _model(digits, "resnet1")
    assert _manual(model, "ce") is not None
    assert _manual(model, "mse") is not None
    gelu, _ = _model(digits, "resnet1", activation="gelu")
    assert _manual(gelu, "ce") is None  # no gelu backward on the tape
    biased = MLPResNet(64, 10, 8, 2)
    for layer in biased.modules():
        if hasattr(layer, "bias") and layer.bias is None:
            layer.bias = torch.nn.Parameter(torch.zeros(layer.weight.shape[0]))
    assert _manual(biased, "ce") is None
    cnn, _ = build("cnn2d", "depth-mup", input_shape=digits.sample_shape, n_out=10, width=4,
                   depth=2)
    assert _manual(cnn, "ce") is None


@pytest.mark.parametrize("name", ["resnet1", "resnet2", "resnet3"])
def test_hand_batched_forward_equals_the_model(teacher: Dataset, name: str) -> None:
    model, _ = _model(teacher, name)
    forward = stacked_forward(model)
    assert forward is not None
    params = {k: torch.stack([v.detach(), 1.5 * v.detach()]) for k, v in
              model.named_parameters()}
    x = teacher.x_test
    with torch.no_grad():
        got = forward(params, x, False)
        scaled = copy.deepcopy(model)
        for p in scaled.parameters():
            p.mul_(1.5)
        for out, m in zip(got, (model, scaled), strict=True):
            assert torch.allclose(out, m(x), rtol=1e-6, atol=1e-7)
        assert torch.allclose(forward(params, x.expand(2, *x.shape), True), got)


def test_generic_vmap_path_matches_one_by_one(
    teacher: Dataset, digits: Dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Models without a hand-batched forward (and the MLPs, forced) take the vmap path."""
    cnn, cnn_plan = build("cnn2d", "depth-mup", input_shape=digits.sample_shape, n_out=10,
                          width=4, depth=2)
    cfg = TrainConfig(steps=12, batch_size=24, loss="ce", eval_every=6)
    lrs = [0.05, 0.5]
    for ref, res in zip(_one_by_one(cnn, cnn_plan, digits, cfg, lrs),
                        train_batched(cnn, cnn_plan, digits, cfg, lrs), strict=True):
        _assert_same(ref, res)
    monkeypatch.setattr(program, "_stacked_program", lambda model: None)
    model, plan = _model(teacher)
    cfg = TrainConfig(steps=20, batch_size=16, loss="mse", eval_every=10)
    lrs = [0.02, 0.2, 1e6]
    got = train_batched(model, plan, teacher, cfg, lrs)
    assert [r.status for r in got] == ["ok", "ok", "diverged"]
    for ref, res in zip(_one_by_one(model, plan, teacher, cfg, lrs), got, strict=True):
        _assert_same(ref, res)


def test_float64_agrees_to_rounding(teacher: Dataset) -> None:
    data = SimpleNamespace(**{k: getattr(teacher, k).double() for k in ("x_train", "x_test")},
                           y_train=teacher.y_train.double(), y_test=teacher.y_test.double())
    model, plan = _model(teacher)
    model.double()
    lrs = [0.02, 0.2, 0.6]
    cfg = TrainConfig(steps=25, batch_size=16, loss="mse")
    got = train_batched(model, plan, data, cfg, lrs)
    for ref, res in zip(_one_by_one(model, plan, data, cfg, lrs), got, strict=True):
        _assert_same(ref, res, rtol=1e-11)


def test_diverging_members_are_frozen_and_do_not_touch_the_others(teacher: Dataset) -> None:
    model, plan = _model(teacher)
    lrs = [0.05, 2.0, 1e6, 0.3]  # 2.0 diverges mid-run (after two epochs), 1e6 at once
    cfg = TrainConfig(steps=24, batch_size=16, loss="mse", eval_every=4)
    got = train_batched(model, plan, teacher, cfg, lrs)
    refs = _one_by_one(model, plan, teacher, cfg, lrs)
    assert [r.status for r in got] == ["ok", "diverged", "diverged", "ok"]
    assert got[1].diverged_at is not None and got[1].diverged_at > 4
    assert got[2].diverged_at is not None and got[2].diverged_at < got[1].diverged_at
    for ref, res in zip(refs, got, strict=True):
        # A blow-up amplifies rounding: the last finite losses (~1e16) agree to ~1e-5 only.
        _assert_same(ref, res, rtol=RTOL if ref.status == "ok" else 1e-3)
        assert all(math.isfinite(v) for v in res.losses)
    for res in got[1:3]:
        assert res.final == {} and len(res.losses) == res.diverged_at - 1  # type: ignore[operator]
    # The healthy members are what a batch without the diverging ones gives.
    alone = train_batched(model, plan, teacher, cfg, [lrs[0], lrs[3]])
    for res, ok in zip((got[0], got[3]), alone, strict=True):
        _assert_same(ok, res, rtol=1e-6)


def test_all_members_diverging_ends_early_and_reports_progress(teacher: Dataset) -> None:
    model, plan = _model(teacher)
    seen: list[int] = []
    got = train_batched(model, plan, teacher, TrainConfig(steps=20, batch_size=16, loss="mse"),
                        [1e6, 1e7], progress=seen.append)
    assert all(r.status == "diverged" and r.final == {} for r in got)
    assert sum(seen) == 2 * 20
    seen.clear()
    train_batched(model, plan, teacher, TrainConfig(steps=7, batch_size=16, loss="mse"),
                  [0.1, 1e6, 0.2], progress=seen.append)
    assert sum(seen) == 3 * 7


def test_same_call_is_deterministic_and_leaves_the_model_alone(teacher: Dataset) -> None:
    model, plan = _model(teacher)
    before = {k: v.clone() for k, v in model.state_dict().items() if torch.is_tensor(v)}
    cfg = TrainConfig(steps=15, batch_size=8, loss="mse", seed=5)
    a = train_batched(model, plan, teacher, cfg, [0.1, 0.4])
    b = train_batched(model, plan, teacher, cfg, [0.1, 0.4])
    assert [r.losses for r in a] == [r.losses for r in b]
    assert [r.final for r in a] == [r.final for r in b]
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    other = train_batched(model, plan, teacher, replace(cfg, seed=6), [0.1, 0.4])
    assert other[0].losses != a[0].losses


def test_members_may_differ_in_data_seed_and_initial_weights(teacher: Dataset) -> None:
    cfg = TrainConfig(lr=0.2, steps=20, batch_size=16, loss="mse")
    model, plan = _model(teacher)
    seeds = [0, 1, 2]
    got = train_batched(model, plan, teacher, cfg, seeds=seeds)
    for ref, res in zip(_one_by_one(model, plan, teacher, cfg, [0.2] * 3, seeds), got,
                        strict=True):
        _assert_same(ref, res)
    models = [_model(teacher, seed=s)[0] for s in seeds]
    got = train_batched(models, plan, teacher, cfg, [0.1, 0.2, 0.3], seeds=seeds)
    for m, lr, s, res in zip(models, [0.1, 0.2, 0.3], seeds, got, strict=True):
        _assert_same(train(copy.deepcopy(m), plan, teacher, replace(cfg, lr=lr, seed=s)), res)


@pytest.mark.parametrize(
    ("cfg", "lrs", "message"),
    [
        (TrainConfig(optimizer="adam", steps=2), [0.1], "plain SGD only"),
        (TrainConfig(momentum=0.9, steps=2), [0.1], "momentum"),
        (TrainConfig(weight_decay=1e-4, steps=2), [0.1], "weight_decay"),
        (TrainConfig(steps=2), [], "empty lrs"),
        (TrainConfig(steps=2), [0.1, float("nan")], r"lrs\[1\] = nan"),
        (TrainConfig(steps=2), [float("inf")], "finite"),
        (TrainConfig(steps=2), [0.0], "> 0"),
        (TrainConfig(steps=2), [-0.1], "> 0"),
        (TrainConfig(steps=2), None, "lrs, seeds or a list of models"),
        (TrainConfig(steps=0), [0.1], "steps must be"),
    ],
)
def test_unsupported_settings_are_config_errors(teacher, cfg, lrs, message) -> None:  # type: ignore[no-untyped-def]
    model, plan = _model(teacher)
    with pytest.raises(ConfigError, match=message):
        train_batched(model, plan, teacher, replace(cfg, loss="mse"), lrs)


def test_member_counts_must_agree(teacher: Dataset) -> None:
    model, plan = _model(teacher)
    cfg = TrainConfig(steps=2, loss="mse")
    with pytest.raises(ConfigError, match="disagree on G: lrs=2, seeds=3"):
        train_batched(model, plan, teacher, cfg, [0.1, 0.2], seeds=[0, 1, 2])
    with pytest.raises(ConfigError, match="seeds must be whole numbers"):
        train_batched(model, plan, teacher, cfg, seeds=[0, 1.5])  # type: ignore[list-item]
    other, _ = _model(teacher, "resnet2")
    with pytest.raises(ConfigError, match=r"models\[1\] is not the same architecture"):
        train_batched([model, other], plan, teacher, cfg)


def test_modules_vmap_cannot_handle_are_named(teacher: Dataset, digits: Dataset) -> None:
    cfg = TrainConfig(steps=2, loss="mse")
    model, plan = _model(teacher, backward="decoupled")
    with pytest.raises(ConfigError, match=r"'branches.0' \(ScaledLinear\).*weight_init"):
        train_batched(model, plan, teacher, cfg, [0.1])
    cnn, cnn_plan = build("cnn2d", "depth-mup", input_shape=digits.sample_shape, n_out=10,
                          width=4, depth=2, batchnorm=True)
    with pytest.raises(ConfigError, match=r"BatchNorm2d\).*running_mean"):
        train_batched(cnn, cnn_plan, digits, replace(cfg, loss="ce"), [0.1])
    cnn, cnn_plan = build("cnn2d", "depth-mup", input_shape=digits.sample_shape, n_out=10,
                          width=4, depth=2, dropout=0.1)
    with pytest.raises(ConfigError, match=r"Dropout\).*dropout p=0.1"):
        train_batched(cnn, cnn_plan, digits, replace(cfg, loss="ce"), [0.1])


def test_batched_sweep_benchmark_runs_small(monkeypatch: pytest.MonkeyPatch) -> None:
    from depthscale.benchmarks import batched_sweep

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(96, 1, 40, generator=gen)
    y = torch.randint(0, 10, (96,), generator=gen)
    data = Dataset("synthetic", x[:64], y[:64], x[64:], y[64:], (1, 40), "classification", 10)
    monkeypatch.setattr(batched_sweep, "WARMUP_STEPS", 1)
    res = batched_sweep.measure(members=3, steps=4, width=8, depth=2, batch=16, data=data)
    assert res.name == "batched-sweep" and res.ratio > 0
    assert res.extra["status_match"] and res.extra["losses_match"]
    assert res.extra["max_rel_loss_diff_ok_members"] <= batched_sweep.LOSS_RTOL
    assert {"goal", "met", "torch_threads"} <= res.extra.keys()
    if res.extra["torch_threads"] != 1:  # compared with the loop on one thread as well
        one = res.extra["vs_one_thread_loop"]
        assert one["ours_status_match"]
        assert one["ours_max_rel_loss_diff_ok_members"] <= batched_sweep.LOSS_RTOL


def test_batched_sweep_benchmark_sweep_level_runs_small() -> None:
    from depthscale.benchmarks import batched_sweep

    res = batched_sweep.sweep_level(members=3, steps=3, width=8, depth=2, batch=16)
    assert res["runs"] == 3 and res["ratio"] > 0 and res["threads_per_run"] == 1
    assert res["status_match"] and res["max_rel_final_diff"] <= batched_sweep.LOSS_RTOL


@pytest.mark.parametrize(("loss", "seeds"), [("ce", None), ("ce", [0, 1, 2]), ("mse", None)])
def test_gpt_with_per_position_token_labels_matches_the_loop(
    loss: str, seeds: list[int] | None
) -> None:
    """Next-token labels (N, seq): each member's loss is the mean over samples x positions, as
    the loop's; shared and per-member data orders."""
    data = load("markov", seed=0, n_train=48, n_test=24, context=8, vocab=8)
    model, plan = build("gpt", "completep", input_shape=data.sample_shape, n_out=data.n_out,
                        width=16, depth=2, seed=0, heads=2, tied=True)
    cfg = TrainConfig(lr=1.0, steps=7, batch_size=16, loss=loss, eval_every=3)
    lrs = [0.3, 1.0, 3.0]
    got = train_batched(model, plan, data, cfg, lrs, seeds=seeds)
    for ref, res in zip(_one_by_one(model, plan, data, cfg, lrs, seeds), got, strict=True):
        _assert_same(ref, res)
    assert got[0].status == "ok"
    assert set(got[0].final) == {"train_loss", "train_acc", "test_loss", "test_acc"}


def test_sgd_step_is_one_plan_sgd_step_per_member() -> None:
    """``sgd_step`` (the benchmark's hot path): two steps on a fixed batch give each member the
    losses of ``plan.optimizer(model, "sgd", lr)`` on its own copy, to float rounding."""
    model, plan = build("resnet1", "depth-mup", input_shape=(6,), n_out=3, width=8, depth=3,
                        seed=0)
    gen = torch.Generator().manual_seed(1)
    x, y = torch.randn(10, 6, generator=gen), torch.randint(0, 3, (10,), generator=gen)
    lrs = [0.05, 0.2, 0.8]
    step = trainer.sgd_step(model, plan, lrs, "ce", torch.device("cpu"))
    got = torch.stack([step(x, y) for _ in range(2)], 1)
    for i, lr in enumerate(lrs):
        member = copy.deepcopy(model)
        opt = plan.optimizer(member, "sgd", lr=lr)
        for k in range(2):
            loss = torch.nn.functional.cross_entropy(member(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            assert float(got[i, k]) == pytest.approx(float(loss.detach()), rel=1e-6)
    assert float(got[0, 1]) != float(got[2, 1])  # members differ


def test_reuse_freed_memory_applies_once_on_linux_glibc() -> None:
    import platform
    import sys

    first = trainer.reuse_freed_memory()
    assert trainer.reuse_freed_memory() is first  # once per process, same answer
    on_glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert first is on_glibc

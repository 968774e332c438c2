"""The laws models' hand-batched programs (train/batched/laws.py: grouped convolutions for the
CNNs and conv ResNets, batched matmuls for the ViT) against one-by-one ``train`` runs, member by
member: per-step losses, epoch losses, periodic and final evaluations, divergence."""

from __future__ import annotations

import copy
import math
from dataclasses import replace
from typing import Any

import pytest
import torch

from depthscale.data import Dataset, load
from depthscale.models import build
from depthscale.train import TrainConfig, TrainResult, train, train_batched
from depthscale.train.batched import laws, program

#: members agree with the loop to this relative difference: measured up to 5e-7 (the grouped
#: convolution, the multiplier on the weight and the attention's matmuls round differently from
#: the loop's kernels, by ~1 ulp per step)
RTOL = 1e-6
#: in float64 the same equations agree to rounding, ~1e-16 a step (measured up to 6e-16)
RTOL64 = 1e-12

_VIT = {"patch_size": 4, "heads": 4, "norm": "post", "activation": "relu"}
#: (model, recipe, options, dataset): the laws claims' architectures at tiny sizes
CASES: dict[str, tuple[str, str, dict[str, Any], str]] = {
    "cnn1d": ("cnn1d", "laws", {"padding": "circular"}, "mnist1d"),
    "cnn1d-zero": ("cnn1d", "laws", {"kernel_size": 4}, "mnist1d"),  # even kernel, zero pad
    "convresnet1d": ("convresnet1d", "laws", {}, "mnist1d"),
    "convresnet1d-block2": ("convresnet1d", "laws", {"block": 2, "padding": "circular"},
                            "mnist1d"),
    "cnn2d": ("cnn2d", "laws", {"padding": "circular"}, "digits"),
    "convresnet2d": ("convresnet2d", "laws", {}, "digits"),
    "vit": ("vit", "laws-fanin", _VIT, "mnist1d"),
    "vit-pre-gelu": ("vit", "laws-fanin", {"patch_size": 8, "heads": 2}, "mnist1d"),
    "vit2d": ("vit", "laws-fanin", {**_VIT, "heads": 2}, "digits"),
}


@pytest.fixture(scope="module")
def datasets() -> dict[str, Dataset]:
    return {"mnist1d": load("mnist1d", n_train=192, n_test=80, seed=0),
            "digits": load("digits", n_train=192, n_test=80, seed=0)}


def _build(case: str, data: dict[str, Dataset], depth: int = 3,
           seed: int = 0) -> tuple[torch.nn.Module, Any, Dataset]:
    name, recipe, options, dataset = CASES[case]
    width = 16 if name == "vit" else 8  # narrower ViTs are chaotic: the loop's own losses move
    # by 1e-5 under a 1e-7 perturbation of its initial weights
    ds = data[dataset]
    model, plan = build(name, recipe, input_shape=ds.sample_shape, n_out=ds.n_out, width=width,
                        depth=depth, seed=seed, **options)
    return model, plan, ds


def _close(a: float, b: float, rtol: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= rtol * max(abs(b), 1e-12)


def _metric_close(key: str, a: float, b: float, rtol: float, rows: int | None) -> bool:
    """Losses to ``rtol``; an accuracy to one of ``rows`` samples, as a near-tie between two
    logits may flip one prediction under rounding."""
    if key.endswith("acc") and rows is not None:
        return abs(a - b) <= 1.0 / rows + 1e-12
    return _close(a, b, rtol)


def _assert_same(ref: TrainResult, got: TrainResult, rtol: float = RTOL,
                 rows: int | None = None) -> None:
    assert (got.status, got.diverged_at, got.diverged_reason, got.steps_done) == (
        ref.status, ref.diverged_at, ref.diverged_reason, ref.steps_done)
    assert len(got.losses) == len(ref.losses)
    assert all(_close(a, b, rtol) for a, b in zip(got.losses, ref.losses, strict=True))
    assert len(got.epoch_losses) == len(ref.epoch_losses)
    assert all(_close(a, b, rtol) for a, b in zip(got.epoch_losses, ref.epoch_losses,
                                                  strict=True))
    assert [e["step"] for e in got.evals] == [e["step"] for e in ref.evals]
    for ge, re in zip(got.evals, ref.evals, strict=True):
        assert ge.keys() == re.keys() and all(
            _metric_close(k, ge[k], re[k], rtol, rows) for k in re)
    assert got.final.keys() == ref.final.keys()
    assert all(_metric_close(k, got.final[k], ref.final[k], rtol,
                             rows if k.startswith("test") else None) for k in ref.final)


def _one_by_one(model, plan, data, cfg, lrs, seeds=None):  # type: ignore[no-untyped-def]
    seeds = [cfg.seed] * len(lrs) if seeds is None else seeds
    return [train(copy.deepcopy(model), plan, data, replace(cfg, lr=lr, seed=s))
            for lr, s in zip(lrs, seeds, strict=True)]


def _in_float64(model: torch.nn.Module, data: Dataset) -> tuple[torch.nn.Module, Dataset]:
    """The model and the data in float64, where rounding (~1e-16 a step) cannot reach a
    tolerance even after a chaotic ViT amplifies it. ``Dataset`` accepts float32 inputs only,
    so the float64 copies are set past its check."""
    wide = copy.deepcopy(model).double()
    data64 = replace(data)
    object.__setattr__(data64, "x_train", data.x_train.double())
    object.__setattr__(data64, "x_test", data.x_test.double())
    return wide, data64


@pytest.mark.parametrize("case", list(CASES))
def test_members_match_one_by_one_runs(datasets: dict[str, Dataset], case: str) -> None:
    """Every member's losses per step, epoch losses, evaluations and final metrics are the
    loop's: to ``RTOL64`` in float64 for every case, and to ``RTOL`` in float32 too for the
    CNNs and conv ResNets. The ViTs amplify float32 rounding (a 1-ulp move of the initial
    weights moves their losses by ~3e-7, and a machine's kernels may move them by more), so in
    float32 they are compared with small LRs only, below. The member at lr 1e3 diverges at the
    loop's step and is recorded as the loop records it, without touching the others."""
    torch.set_num_threads(1)  # the setting of every sweep run (and of the reference)
    model, plan, data = _build(case, datasets)
    assert laws.laws_forward(model) is not None
    lrs = [1e-3, 1e-2, 3e-2, 1e3] if case.startswith("vit") else [1e-3, 3e-2, 0.3, 1e3]
    cfg = TrainConfig(epochs=2.5, batch_size=48, loss="ce", eval_every=4, seed=1)
    runs = [(*_in_float64(model, data), RTOL64)]
    if not case.startswith("vit"):
        runs.append((model, data, RTOL))
    for net, ds, rtol in runs:
        got = train_batched(net, plan, ds, cfg, lrs)
        refs = _one_by_one(net, plan, ds, cfg, lrs)
        assert [r.status for r in got] == ["ok", "ok", "ok", "diverged"]
        for ref, res in zip(refs, got, strict=True):
            _assert_same(ref, res, rtol=rtol, rows=len(ds.x_test))
        assert set(got[0].final) == {"train_loss", "train_acc", "test_loss", "test_acc"}
        assert got[3].final == {} and got[3].diverged_at is not None


@pytest.mark.parametrize("case", ["cnn1d", "convresnet1d", "vit"])
def test_members_with_their_own_data_order_and_weights(datasets: dict[str, Dataset],
                                                       case: str) -> None:
    """Per-member inputs ([G, B, ...]: members with different data seeds) and members built
    from different initial weights. Small LRs: at lr 0.03 the ViT built from seed 2 meets an
    MLP pre-activation of 3e-7 that the loop's float32 rounds below zero and the batched matmul
    above (the loop's gradient is then 4% off float64's, the batched one 5e-7): a ReLU kink
    decides it, not an error, and the members part from there."""
    torch.set_num_threads(1)
    models = [_build(case, datasets, seed=s)[0] for s in (0, 1, 2)]
    _, plan, data = _build(case, datasets)
    cfg = TrainConfig(steps=9, batch_size=32, loss="ce", eval_every=3)
    lrs, seeds = [0.01, 0.003, 0.001], [0, 1, 2]
    got = train_batched(models, plan, data, cfg, lrs, seeds=seeds)
    for m, lr, s, res in zip(models, lrs, seeds, got, strict=True):
        _assert_same(train(copy.deepcopy(m), plan, data, replace(cfg, lr=lr, seed=s)), res,
                     rows=len(data.x_test))


@pytest.mark.parametrize("case", list(CASES))
def test_stacked_forward_equals_each_model(datasets: dict[str, Dataset], case: str) -> None:
    """The program on stacked weights is each member's own ``forward``, shared and per-member
    inputs, also where the evaluation splits the rows into chunks."""
    model, _, data = _build(case, datasets)
    model.double()  # in float64 the equations must agree to ~1e-12, whatever the rounding
    forward = laws.laws_forward(model)
    assert forward is not None
    scales = (1.0, 1.3, 0.7)
    params = {k: torch.stack([s * v.detach() for s in scales])
              for k, v in model.named_parameters()}
    x = data.x_test[:20].double()
    tight = {"rtol": 1e-10, "atol": 1e-12}
    with torch.no_grad():
        got = forward(params, x, False)
        for s, out in zip(scales, got, strict=True):
            member = copy.deepcopy(model)
            for p in member.parameters():
                p.mul_(s)
            torch.testing.assert_close(out, member(x), **tight)
        torch.testing.assert_close(forward(params, x.expand(3, *x.shape), True), got, **tight)
        old = laws.EVAL_FLOATS
        try:
            laws.EVAL_FLOATS = 1  # one row per chunk
            chunked = forward(params, x, False)
        finally:
            laws.EVAL_FLOATS = old
        torch.testing.assert_close(chunked, got, **tight)


def test_dispatch_hand_batched_laws_models_vmap_for_the_rest(
        datasets: dict[str, Dataset]) -> None:
    from depthscale.models import ConvResNet, PlainCNN

    for case in CASES:
        model, _, _ = _build(case, datasets)
        assert laws.laws_forward(model) is not None, case
    data = datasets["digits"]
    for options in ({"batchnorm": True}, {"dropout": 0.1}):
        cnn, _ = build("cnn2d", "laws", input_shape=data.sample_shape, n_out=10, width=4,
                       depth=2, **options)
        assert laws.laws_forward(cnn) is None, options
    vit, _ = build("vit", "laws-fanin", input_shape=(1, 40), n_out=10, width=8, depth=1,
                   dropout=0.1)
    assert laws.laws_forward(vit) is None

    class Shifted(PlainCNN):  # a subclass may change the forward: never hand-batched
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return super().forward(x) + 1

    assert laws.laws_forward(Shifted(1, 10, 4, 2, dims=1)) is None
    assert laws.laws_forward(ConvResNet(1, 10, 4, 2, dims=1)) is not None
    gpt, _ = build("gpt", "completep", input_shape=(8,), n_out=8, width=8, depth=1, heads=2)
    assert laws.laws_forward(gpt) is None
    model, _, _ = _build("cnn1d", datasets)
    forward, _ = program.forward_and_step(model, "ce", False)
    assert forward.__qualname__.startswith("_in_chunks")  # not vmap's

"""The open-question claims (CLAIMS.md section D): three-layer blocks and their update readout,
the Adam arm of the transfer study and its spread analysis, the joint-limit paths."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from depthscale.claims import CLAIMS, PLANNED, ClaimContext
from depthscale.claims.beyond import (
    _MIDDLE,
    _bootstrap_spreads,
    _spreads,
    adam_study_toml,
    block_updates,
    joint_widths,
)
from depthscale.claims.nfd import transfer_study_toml
from depthscale.errors import ConfigError
from depthscale.fits import loglog_slope
from depthscale.models import build
from depthscale.models.mlp import MLPResNet
from depthscale.probes import snapshot, two_layer_updates
from depthscale.studies.spec import expand, load_study, parse_study

G = torch.Generator().manual_seed(0)
X = torch.randn(64, 20, generator=G)
Y = torch.randint(0, 10, (64,), generator=G)


# ---- the three-layer block ------------------------------------------------------------------
def test_three_layer_block_is_eq6_with_one_more_layer() -> None:
    model, plan = build("resnet3", "depth-mup", input_shape=(20,), n_out=10, width=8, depth=3,
                        seed=1)
    assert isinstance(model, MLPResNet) and model.block == 3
    roles = plan.roles(model)
    assert roles["branches.0.inner.weight"] == "branch_in"
    assert roles["branches.0.middle.0.weight"] == "hidden"
    assert roles["branches.0.outer.weight"] == "branch_out"
    x = X[:5]
    h = x @ model.embed.weight.T / math.sqrt(20)
    relu = torch.relu
    for l in range(3):
        w1, w2, w3 = (model.branches[l].get_submodule(k).weight
                      for k in ("inner", "middle.0", "outer"))
        x1 = h @ w1.T / math.sqrt(8)
        x2 = relu(x1) @ w2.T / math.sqrt(8)
        h = h + relu(x2) @ w3.T / math.sqrt(3 * 8)
    want = h @ model.readout.weight.T / 8  # alpha/sqrt(n) with alpha = 1/sqrt(n)
    tr = model.trace(x)
    torch.testing.assert_close(tr.out, want)
    assert len(tr.layers) == 3 and [len(v) for v in tr.layers] == [2, 2, 2]
    torch.testing.assert_close(tr.internal[2], tr.layers[2][0])


def test_block_sizes_below_one_are_refused() -> None:
    for bad in (0, -2, True, 2.0):
        with pytest.raises(ConfigError, match="block must be"):
            MLPResNet(4, 2, 8, 2, block=bad)  # type: ignore[arg-type]


def _one_step(model_name: str, recipe: str, depth: int, seed: int, *, width: int = 128,
              middle: str | None = None) -> dict[str, float]:
    model, plan = build(model_name, recipe, input_shape=(20,), n_out=10, width=width,
                        depth=depth, seed=seed)
    if middle is not None:
        plan.apply(model, roles={_MIDDLE: middle}, seed=seed)
    init = snapshot(model)
    opt = plan.optimizer(model, "sgd", 0.1)
    F.cross_entropy(model(X), Y).backward()
    opt.step()
    return {k: statistics.fmean(v) for k, v in block_updates(model, init, X).items()}


def test_block_updates_on_two_layer_blocks_are_the_nfd_probe() -> None:
    model, plan = build("resnet2", "depth-mup", input_shape=(20,), n_out=10, width=16, depth=3)
    init = snapshot(model)
    opt = plan.optimizer(model, "sgd", 0.5)
    F.cross_entropy(model(X), Y).backward()
    opt.step()
    ours, nfd = block_updates(model, init, X), two_layer_updates(model, init, X)
    assert ours["layer1"] == pytest.approx(nfd["internal"], rel=1e-12)
    assert ours["stream"] == pytest.approx(nfd["stream"], rel=1e-12)
    assert all(v > 0 for v in ours["layer1"])


def test_block_updates_see_only_the_layer_whose_weights_moved() -> None:
    model, _ = build("resnet3", "depth-mup", input_shape=(20,), n_out=10, width=8, depth=2)
    init = snapshot(model)
    with torch.no_grad():
        model.branches[1].get_submodule("middle.0").weight.add_(1.0)  # W_{2,2} += 1 (all ones)
    upd = block_updates(model, init, X)
    zero = pytest.approx([0.0, 0.0], abs=1e-6)  # float32 rounding of the recomputed x~
    assert upd["layer1"] == zero and upd["stream"] == zero
    assert upd["layer2"][0] == pytest.approx(0.0, abs=1e-6)
    # hand value: x_2 - x~_2 = (1/sqrt(n)) 1 1^T phi(x_1), each coordinate sum(phi(x_1))/sqrt(n)
    x1 = model.trace(X).layers[1][0].detach()
    per_row = torch.relu(x1).sum(-1) / math.sqrt(8) * math.sqrt(8)  # norm of a constant vector
    assert upd["layer2"][1] == pytest.approx(float(per_row.mean()) / math.sqrt(8), rel=1e-6)


def test_block_updates_need_a_multi_layer_block() -> None:
    model, _ = build("resnet1", "depth-mup", input_shape=(20,), n_out=10, width=8, depth=2)
    with pytest.raises(ConfigError, match="resnet3"):
        block_updates(model, snapshot(model), X)


def test_the_fix_gives_the_middle_layer_eq8s_lr_and_keeps_the_draws() -> None:
    L, n = 9, 16
    plain, _ = build("resnet3", "nfd-depth", input_shape=(20,), n_out=10, width=n, depth=L,
                     seed=4)
    fixed, plan = build("resnet3", "nfd-depth", input_shape=(20,), n_out=10, width=n, depth=L,
                        seed=4)
    plan.apply(fixed, roles={_MIDDLE: "branch_in"}, seed=4)
    for (name, a), (_, b) in zip(plain.named_parameters(), fixed.named_parameters(), strict=True):
        assert torch.equal(a, b), name
    opt = plan.optimizer(fixed, "sgd", 0.1)
    lr_of = {id(p): g["lr"] for g in opt.param_groups for p in g["params"]}
    params = dict(fixed.named_parameters())
    for name, want in (("branches.0.inner.weight", 0.1 * n * math.sqrt(L)),
                       ("branches.0.middle.0.weight", 0.1 * n * math.sqrt(L)),
                       ("branches.0.outer.weight", 0.1 * n)):
        assert lr_of[id(params[name])] == pytest.approx(want, rel=1e-12), name


@pytest.mark.parametrize(("middle", "band1", "band2"), [
    (None, (-0.65, -0.35), (-0.65, -0.35)),  # depth-muP: both internal layers collapse
    ("branch_in", (-0.15, 0.15), (-0.15, 0.15)),  # sqrt(L) on both: flat
])
def test_first_step_internal_updates_follow_the_derivation(
    middle: str | None, band1: tuple[float, float], band2: tuple[float, float]
) -> None:
    recipe = "depth-mup" if middle is None else "nfd-depth"
    depths = [4, 16, 64]
    ups = [[_one_step("resnet3", recipe, d, s, middle=middle) for s in (0, 1)] for d in depths]
    for key, (low, high) in (("layer1", band1), ("layer2", band2)):
        ys = [statistics.fmean(u[key] for u in per_seed) for per_seed in ups]
        slope = loglog_slope(depths, ys).slope
        assert low <= slope <= high, (key, slope)


# ---- beyond-adam ------------------------------------------------------------------------------
def test_adam_study_is_the_transfer_study_with_adam() -> None:
    s = CLAIMS["beyond-adam"].settings["quick"]
    adam = parse_study(adam_study_toml(s, "adam"))
    assert adam.name == "beyond-adam-adam" and adam.train.optimizer == "adam"
    assert dict(adam.grid)["lr"] == tuple(s["eta_cs_adam"])
    sgd = parse_study(adam_study_toml(s, "sgd"))
    transfer = parse_study(transfer_study_toml({**s, "eta_cs": s["eta_cs_sgd"]}))
    assert expand(sgd) == expand(transfer)
    with pytest.raises(ConfigError, match="optimizer must be"):
        adam_study_toml(s, "lion")


def test_adam_example_is_the_claims_quick_adam_study() -> None:
    claim_study = parse_study(adam_study_toml(CLAIMS["beyond-adam"].settings["quick"], "adam"))
    example = load_study(Path(__file__).resolve().parents[2] / "examples" / "beyond_adam.toml")
    assert expand(claim_study) == expand(example)
    assert (claim_study.name, claim_study.analysis) == (example.name, example.analysis)


def _records(optima: dict[tuple[str, int], float], seeds: range) -> list[dict[str, object]]:
    """Runs whose last-epoch loss is (log10 lr - log10 optimum)^2 + seed offset."""
    lrs = [10 ** (k / 4) for k in range(-8, 5)]
    return [{"recipe": r, "depth": L, "seed": s, "lr": lr, "status": "done",
             "epoch_losses": [1.0 + 0.01 * s + (math.log10(lr) - math.log10(opt)) ** 2]}
            for (r, L), opt in optima.items() for s in seeds for lr in lrs]


def test_spread_is_the_optima_range_in_decades() -> None:
    optima = {("depth-mup", 3): 0.3, ("depth-mup", 9): 0.03, ("nfd-depth", 3): 0.2,
              ("nfd-depth", 9): 0.1}
    recs = _records(optima, range(3))
    got = _spreads(recs, ("depth-mup", "nfd-depth"), [3, 9])
    assert got["depth-mup"] == pytest.approx(1.0, abs=1e-9)
    assert got["nfd-depth"] == pytest.approx(math.log10(2), abs=1e-9)
    boot = _bootstrap_spreads(recs, ("depth-mup", "nfd-depth"), [3, 9], n_boot=20, seed=0)
    assert boot.shape == (20, 2)  # seed offsets do not move a quadratic's minimum
    assert boot[:, 0] == pytest.approx([1.0] * 20) and boot[:, 1] == pytest.approx(
        [math.log10(2)] * 20)
    diverged = [r if (r["depth"], r["recipe"]) != (9, "nfd-depth") else {**r, "status": "failed"}
                for r in recs]
    assert math.isnan(_spreads(diverged, ("depth-mup", "nfd-depth"), [3, 9])["nfd-depth"])


def test_removing_the_correction_makes_the_adam_difference_exactly_zero(tmp_path: Path) -> None:
    c = CLAIMS["beyond-adam"]
    out = c.run(ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None,
                             seed=0, settings=c.settings_for("smoke", control=True)))
    assert out.verdict == "FAIL", out.reason
    for opt in ("sgd", "adam"):
        name = f"spread_{opt}_nfd_minus_depth_mup"
        assert out.measured[name] == 0.0
        assert out.measured[f"{name}_ci_low"] == out.measured[f"{name}_ci_high"] == 0.0
    assert "contradicts" in out.reason and (tmp_path / "beyond-adam.csv").exists()


# ---- beyond-joint-limit -----------------------------------------------------------------------
def test_joint_paths_give_growing_widths() -> None:
    assert joint_widths(1.0, 32, [4, 8, 16]) == [128, 256, 512]
    assert joint_widths(2.0, 2, [8, 12, 16]) == [128, 288, 512]
    assert joint_widths(0.5, 128, [4, 9, 16, 36]) == [256, 384, 512, 768]
    with pytest.raises(ConfigError, match="widths growing"):
        joint_widths(0.5, 1, [1, 2, 3])  # round(sqrt(2)) = round(sqrt(1)) + 0 = 1


def test_joint_limit_refuses_an_unknown_contrast_path_before_work(tmp_path: Path) -> None:
    c = CLAIMS["beyond-joint-limit"]
    settings = {**c.settings["smoke"], "contrast_path": "n=L^3"}
    with pytest.raises(ConfigError, match="contrast_path"):
        c.run(ClaimContext(scale="quick", out_dir=tmp_path, device="cpu", data_dir=None, seed=0,
                           settings=settings))
    assert list(tmp_path.iterdir()) == []


def test_three_open_questions_are_claims_and_the_transformer_waits() -> None:
    for cid in ("beyond-adam", "beyond-3layer", "beyond-joint-limit"):
        assert cid in CLAIMS and cid not in PLANNED
        assert CLAIMS[cid].control is not None
    assert "beyond-transformer" in PLANNED and "beyond-transformer" not in CLAIMS

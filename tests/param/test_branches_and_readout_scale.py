"""Issue 40: a residual branch that holds no weight counts as a branch (CompleteP's 1/L
multiplies every branch, Dey et al. 2025) and gets the branch multiplier on its module's
output; a constant the model multiplies into its readout (T5's d_model^-0.5 before a tied
head) is compensated by the readout's multiplier, as Gemma's embedding constant is."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from depthscale.param import PlanState, inspect, plan

V = 16


class Pool(nn.Module):
    """PoolFormer's token mixer: average pooling minus identity (no parameter)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, T, n)
        return F.avg_pool1d(x.transpose(1, 2), 3, 1, 1, count_include_pad=False
                            ).transpose(1, 2) - x


class PoolMixer(nn.Module):
    """Blocks x + pool(norm(x)) and x + MLP(norm(x)): two branches, one without a weight."""

    def __init__(self, n: int = 32, blocks: int = 3) -> None:
        super().__init__()
        self.emb = nn.Embedding(V, n)
        self.norms = nn.ModuleList(nn.LayerNorm(n) for _ in range(2 * blocks))
        self.pools = nn.ModuleList(Pool() for _ in range(blocks))
        self.fc1 = nn.ModuleList(nn.Linear(n, 2 * n) for _ in range(blocks))
        self.fc2 = nn.ModuleList(nn.Linear(2 * n, n) for _ in range(blocks))
        self.head = nn.Linear(n, V)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids)
        for i, pool in enumerate(self.pools):
            x = x + pool(self.norms[2 * i](x))
            x = x + self.fc2[i](F.gelu(self.fc1[i](self.norms[2 * i + 1](x))))
        return self.head(x)


def test_a_branch_without_a_weight_is_counted_and_carries_the_branch_multiplier() -> None:
    model = PoolMixer(32, 3)
    x = torch.randint(0, V, (4, 8))
    st = inspect(model, x)
    assert st.depth == 6
    assert st.branch_outputs == {"pools.0": 0, "pools.1": 2, "pools.2": 4}
    assert st.effective_depth == 2 + 6
    p = plan("completep", width=32, depth=6)
    p.apply(model, example_input=x, seed=0)
    h = torch.randn(2, 8, 32)
    assert torch.allclose(model.pools[1](h), Pool()(h) / 6)  # T/L with T = 1
    assert PlanState.of(model).branches == {"pools.0": 1 / 6, "pools.1": 1 / 6,
                                            "pools.2": 1 / 6}
    reloaded = PoolMixer(32, 3)
    p.apply(reloaded, example_input=x, seed=1)
    plan("sp", width=32, depth=6).apply(reloaded, example_input=x, seed=1)
    assert torch.allclose(reloaded.pools[1](h), Pool()(h))  # sp: no multiplier
    reloaded.load_state_dict(model.state_dict())  # the checkpoint's plan restores it
    assert torch.allclose(reloaded.pools[1](h), Pool()(h) / 6)
    assert torch.allclose(reloaded(x), model(x))


class TiedScaled(nn.Module):
    """A pre-LN residual MLP whose tied head reads ``c`` times the final norm's output."""

    def __init__(self, n: int = 32, c: float = 1.0, tied: bool = True) -> None:
        super().__init__()
        self.c = c
        self.emb = nn.Embedding(V, n)
        self.norm, self.fc1, self.fc2 = nn.LayerNorm(n), nn.Linear(n, 2 * n), nn.Linear(2 * n, n)
        self.ln_f = nn.LayerNorm(n)
        self.head = nn.Linear(n, V, bias=False)
        if tied:
            self.head.weight = self.emb.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids)
        x = x + self.fc2(F.relu(self.fc1(self.norm(x))))
        return self.head(self.ln_f(x) * self.c)


@pytest.mark.filterwarnings("ignore:.*reads out with the tied input table")
@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
@pytest.mark.parametrize("recipe", ["completep", "mup", "sp"])
def test_a_constant_before_the_readout_is_compensated(recipe: str, tied: bool) -> None:
    """After apply (same seed), the model with the constant computes what the model without
    it computes, before and after an Adam step: the readout's multiplier divides it out."""
    x = torch.randint(0, V, (4, 8))
    y = torch.randint(0, V, (4, 8))
    c = 64 ** -0.5
    scaled, plain = TiedScaled(64, c, tied), TiedScaled(64, 1.0, tied)
    assert inspect(scaled, x).output_scale == pytest.approx(c)
    assert inspect(plain, x).output_scale == 1.0
    p = plan(recipe, width=64, depth=1)
    outs = []
    for model in (scaled, plain):
        p.apply(model, example_input=x, seed=3)
        opt = p.optimizer(model, "adam", lr=1e-2)
        before = model(x).detach()
        F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1)).backward()
        opt.step()
        outs.append((before, model(x).detach()))
    torch.testing.assert_close(outs[0][0], outs[1][0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(outs[0][1], outs[1][1], rtol=1e-4, atol=1e-5)


def test_a_constant_after_the_readout_is_measured_too() -> None:
    class After(TiedScaled):
        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            x = self.emb(ids)
            x = x + self.fc2(F.relu(self.fc1(self.norm(x))))
            return self.head(self.ln_f(x)) / 8

    model = After(32, tied=True)
    st = inspect(model, torch.randint(0, V, (2, 8)))
    assert st.output_scale == pytest.approx(1 / 8)
    assert "readout is multiplied by 0.125" in st.summary()
    assert copy.deepcopy(st) == st


def test_applying_again_reads_the_model_not_the_plans_own_multipliers() -> None:
    """A second apply sees the readout and branch hooks of the first: they are the plan's,
    not constants of the model, so the second plan's multipliers are the first's."""
    x = torch.randint(0, V, (4, 8))
    for model in (TiedScaled(64, 64 ** -0.5), PoolMixer(64, 2)):
        st = inspect(model, x)
        p = plan("completep", width=64, depth=st.depth)
        p.apply(model, example_input=x, seed=0)
        first = PlanState.of(model)
        p.apply(model, example_input=x, seed=0)
        again = PlanState.of(model)
        assert first is not None and again is not None
        assert (again.readouts, again.branches) == (first.readouts, first.branches)
        assert inspect(model, x).output_scale == pytest.approx(st.output_scale)


class InlineShift(nn.Module):
    """Blocks x + (shift(x) - x), computed inline (no module outputs the branch), and an
    MLP branch."""

    def __init__(self, n: int = 32, blocks: int = 2) -> None:
        super().__init__()
        self.emb = nn.Embedding(V, n)
        self.fc1 = nn.ModuleList(nn.Linear(n, 2 * n) for _ in range(blocks))
        self.fc2 = nn.ModuleList(nn.Linear(2 * n, n) for _ in range(blocks))
        self.head = nn.Linear(n, V)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids)
        for fc1, fc2 in zip(self.fc1, self.fc2, strict=True):
            x = x + (torch.roll(x, 1, dims=1) - x)
            x = x + fc2(F.gelu(fc1(x)))
        return self.head(x)


def test_a_weightless_branch_no_module_makes_is_counted_and_warned_about() -> None:
    x = torch.randint(0, V, (4, 8))
    model = InlineShift(32, 2)
    st = inspect(model, x)
    assert st.depth == 4 and st.unscaled == (0, 2) and not st.branch_outputs
    with pytest.warns(UserWarning, match="hold no weight"):
        plan("completep", width=32, depth=4).apply(model, example_input=x, seed=0)


def test_explain_names_the_weightless_branches_and_the_readout_constant() -> None:
    x = torch.randint(0, V, (4, 8))
    model = PoolMixer(32, 2)
    p = plan("completep", width=32, depth=4)
    p.apply(model, example_input=x, seed=0)
    assert "branch pools.1 holds no weight: its output x 0.25" in p.explain(model)
    scaled = TiedScaled(64, 0.5, tied=False)
    p = plan("completep", width=64, depth=1)
    p.apply(scaled, example_input=x, seed=0)
    assert "head.weight: the model multiplies it by 0.5" in p.explain(scaled)


class Parallel(nn.Module):
    """GPT-J-style blocks x + attn-like(norm(x)) + mlp(norm(x)): two weighted branches read
    one norm; counting additions must not count them twice or lose one."""

    def __init__(self, n: int = 32, blocks: int = 2) -> None:
        super().__init__()
        self.emb = nn.Embedding(V, n)
        self.norms = nn.ModuleList(nn.LayerNorm(n) for _ in range(blocks))
        self.mix = nn.ModuleList(nn.Linear(n, n) for _ in range(blocks))
        self.fc1 = nn.ModuleList(nn.Linear(n, 2 * n) for _ in range(blocks))
        self.fc2 = nn.ModuleList(nn.Linear(2 * n, n) for _ in range(blocks))
        self.head = nn.Linear(n, V)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids)
        for norm, mix, fc1, fc2 in zip(self.norms, self.mix, self.fc1, self.fc2, strict=True):
            h = norm(x)
            x = mix(h) + fc2(F.gelu(fc1(h))) + x
        return self.head(x)


def test_parallel_branches_are_each_counted_once() -> None:
    st = inspect(Parallel(32, 2), torch.randint(0, V, (2, 8)))
    assert st.depth == 4 and not st.branch_outputs and not st.unscaled

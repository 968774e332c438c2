"""Issue 40 on the zoo's models: T5's readout constant under the coordinate check (its
relative position bias read by inspect as a bias of the attention scores), PoolFormer's
weightless branches carrying CompleteP's branch multiplier (Dey et al. 2025: 1/L per
branch), and Mixtral's experts read alike whichever kernel runs them."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from architectures import BY_NAME
from torch import nn

import depthscale as ds


def _make_t5(recipe: str, x: torch.Tensor) -> Any:
    """The zoo's factory: every role from inspect (the position bias a bias of the scores),
    and T5's attention scale (q k^T with SDPA's scale 1, kept in ``scaling``) set by apply."""
    arch = BY_NAME["hf-t5"]

    def make(width: int, depth: int, seed: int) -> tuple[nn.Module, ds.param.Plan]:
        model = arch.build(width, depth, seed)
        base = arch.build(min(arch.widths), depth, seed)
        st = ds.param.inspect(model, x)
        p = ds.param.plan(recipe, width=st.width, depth=st.depth)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # sp's tied readout is warned about
            warnings.filterwarnings("error", message=".*attention scale")
            p.apply(model, example_input=x, seed=seed, base=base)
        assert all(model.get_submodule(call.module).scaling == p.attention_scale(call.d_head)
                   for call in st.attention)
        return model, p
    return make


def test_t5_completep_holds_with_its_readout_constant_compensated() -> None:
    """T5 multiplies the decoder output by d_model^-0.5 before its tied head; the readout's
    multiplier must divide it out (it grows the logits' update as width^-0.5 otherwise: the
    output slope was -0.62 before). With the position bias read as a bias of the scores,
    CompleteP does not FAIL and SP does."""
    arch = BY_NAME["hf-t5"]
    data = arch.data()
    x, y = data.x_train[:8], data.y_train[:8]
    st = ds.param.inspect(arch.build(64, 1, 0), x)
    assert st.output_scale == pytest.approx(64 ** -0.5)
    verdicts = {}
    for recipe in ("completep", "sp"):
        rep = ds.probes.coord_check(_make_t5(recipe, x), x, y,
                                    widths=arch.widths, depths=(2, 4, 8), base_width=64,
                                    base_depth=1, lr=3e-3, optimizer="adam", seeds=range(2))
        verdicts[recipe] = (rep.verdict, rep.evidence)
    assert verdicts["completep"][0] != "FAIL", verdicts["completep"][1]
    assert verdicts["sp"][0] == "FAIL", verdicts["sp"][1]


def test_poolformer_pooling_branches_carry_the_branch_multiplier() -> None:
    """Each block's pooling branch holds no weight: inspect counts it (K = 2 per block) and
    CompleteP multiplies the pooling module's output by T/L = 1/K."""
    arch = BY_NAME["hf-poolformer"]
    x, _ = arch.example()
    model = arch.build(32, 3, 0)
    st = ds.param.inspect(model, x)
    assert st.depth == 6
    pools = [f"poolformer.encoder.block.0.{i}.pooling" for i in range(3)]
    assert st.branch_outputs == {m: 2 * i for i, m in enumerate(pools)}
    ds.param.plan("completep", width=32, depth=6).apply(model, example_input=x, seed=0)
    pool = dict(model.named_modules())[pools[1]]
    h = torch.randn(2, 32, 4, 4)
    assert torch.allclose(pool(h), (pool.pool(h) - h) / 6)
    ds.param.plan("sp", width=32, depth=6).apply(model, example_input=x, seed=0)
    assert torch.allclose(pool(h), pool.pool(h) - h)  # the earlier plan's multiplier undone


@pytest.mark.skipif(not hasattr(torch, "_grouped_mm"), reason="torch without _grouped_mm")
def test_mixtral_experts_are_read_alike_by_every_kernel() -> None:
    """transformers runs Mixtral's stacked experts by a loop over the experts hit (eager),
    ``gate_up_proj[expert_ids]`` and bmm (batched_mm) or one ``torch._grouped_mm`` per matrix
    (grouped_mm): inspect finds the same roles, fan-ins and branches from each."""
    from arch_moe_ssm import build_mixtral  # after architectures, which imports it

    arch = BY_NAME["hf-mixtral"]
    x, _ = arch.example()
    found = {}
    for kernel in ("eager", "batched_mm", "grouped_mm"):
        st = ds.param.inspect(build_mixtral(32, 2, 0, kernel), x)
        assert not st.unclassified, (kernel, st.unclassified)
        found[kernel] = (st.roles, st.fan_in, st.branches, st.uses)
    assert found["grouped_mm"] == found["eager"] == found["batched_mm"]
    assert found["eager"][1]["model.layers.0.mlp.experts.down_proj"] == 64

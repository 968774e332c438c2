"""Mixture-of-experts routers and stacked experts read by use (run by a loop over the experts
hit or by one grouped matrix product, ``torch._grouped_mm``), and init conventions kept (issue
40): tiny plain-torch models with the values they must give."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import depthscale as ds

E, TOP = 4, 2


class MoE(nn.Module):
    """Mixtral's sparse block: router -> softmax -> top-2 (renormalised) weights multiplying
    the experts' outputs; experts stacked (E, out, in), indexed per expert hit; with
    ``shared``, a sigmoid-gated shared expert added to the routed sum (Qwen2-MoE). ``kernel``
    "loop": the experts hit one by one (Mixtral's eager kernel); "grouped": the token-expert
    pairs sorted by expert and all experts run in one ``torch._grouped_mm`` (transformers'
    ``grouped_mm`` experts)."""

    def __init__(self, n: int, shared: bool = False, kernel: str = "loop") -> None:
        super().__init__()
        self.kernel = kernel
        self.router = nn.Linear(n, E, bias=False)
        self.w_in = nn.Parameter(torch.randn(E, 2 * n, n) / n ** 0.5)
        self.w_out = nn.Parameter(torch.randn(E, n, 2 * n) / (2 * n) ** 0.5)
        self.shared = nn.Linear(n, n, bias=False) if shared else None
        self.shared_gate = nn.Linear(n, 1, bias=False) if shared else None

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        flat = h.reshape(-1, h.shape[-1])
        probs = F.softmax(self.router(flat), dim=-1)
        top, idx = torch.topk(probs, TOP, dim=-1)
        top = top / top.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(flat)
        if self.kernel == "grouped":
            order = torch.argsort(idx.flatten())  # the token-expert pairs, by expert
            tok = order // TOP
            offs = torch.cumsum(torch.bincount(idx.flatten(), minlength=E), 0).to(torch.int32)
            mid = F.gelu(torch._grouped_mm(flat[tok], self.w_in.transpose(-2, -1), offs=offs))
            y = torch._grouped_mm(mid, self.w_out.transpose(-2, -1), offs=offs)
            out.index_add_(0, tok, y * top.flatten()[order, None])
        for e in torch.unique(idx) if self.kernel == "loop" else ():  # Mixtral's eager loop
            tok, pos = torch.where(idx == e)
            y = F.linear(F.gelu(F.linear(flat[tok], self.w_in[e])), self.w_out[e])
            out.index_add_(0, tok, y * top[tok, pos, None])
        if self.shared is not None and self.shared_gate is not None:
            out = out + torch.sigmoid(self.shared_gate(flat)) * self.shared(flat)
        return out.reshape(h.shape)


class MoENet(nn.Module):
    def __init__(self, n: int = 16, depth: int = 2, shared: bool = False,
                 kernel: str = "loop") -> None:
        super().__init__()
        self.embed = nn.Embedding(8, n)
        self.norms = nn.ModuleList(nn.LayerNorm(n) for _ in range(depth))
        self.moes = nn.ModuleList(MoE(n, shared, kernel) for _ in range(depth))
        self.head = nn.Linear(n, 8, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for norm, moe in zip(self.norms, self.moes, strict=True):
            x = x + moe(norm(x))
        return self.head(x)


def _ids() -> torch.Tensor:
    return torch.randint(0, 8, (4, 8), generator=torch.Generator().manual_seed(0))


KERNELS = ("loop", pytest.param("grouped", marks=pytest.mark.skipif(
    not hasattr(torch, "_grouped_mm"), reason="torch without _grouped_mm")))


@pytest.mark.parametrize("kernel", KERNELS)
def test_router_is_a_readout_and_stacked_experts_are_the_branch(kernel: str) -> None:
    """Router: role output, fan-in n = 16 (it reads the normed stream, its softmax top-2
    weights gate the experts: never written to the stream); w_in branch_in (fan-in 16), w_out
    branch_out (fan-in 32), each used once per expert hit (or once, all experts in one grouped
    product) and not counted as shared."""
    torch.manual_seed(0)
    st = ds.param.inspect(MoENet(kernel=kernel), _ids())
    assert (st.width, st.depth, len(st.blocks)) == (16, 2, 2)
    assert {n: st.roles[n] for n in ("moes.0.router.weight", "moes.0.w_in", "moes.0.w_out",
                                     "embed.weight", "head.weight")} == {
        "moes.0.router.weight": "output", "moes.0.w_in": "branch_in",
        "moes.0.w_out": "branch_out", "embed.weight": "input", "head.weight": "output"}
    assert st.routers == ("moes.0.router.weight", "moes.1.router.weight")
    assert (st.fan_in["moes.0.router.weight"], st.fan_in["moes.0.w_in"],
            st.fan_in["moes.0.w_out"]) == (16, 16, 32)
    assert st.uses == {} and not st.unclassified


def test_a_shared_expert_summed_with_the_routed_ones_is_one_branch() -> None:
    """routed + sigmoid(gate(h)) * shared(h), then added to x: one residual branch per block
    (2, not 4), the shared expert a second writer, its width -> 1 gate a router."""
    torch.manual_seed(0)
    st = ds.param.inspect(MoENet(shared=True), _ids())
    assert st.depth == 2
    assert st.branches[0].writers == ("moes.0.w_out", "moes.0.shared")
    assert st.roles["moes.0.shared_gate.weight"] == "output"
    assert st.routers == ("moes.0.router.weight", "moes.0.shared_gate.weight",
                          "moes.1.router.weight", "moes.1.shared_gate.weight")


@pytest.mark.parametrize("kernel", KERNELS)
def test_coord_check_measures_routed_experts(kernel: str) -> None:
    """A routed expert's token set changes with the step and its matrices are selected by a
    routing index (or all run in one grouped product): the check measures it (before: a raw
    size-mismatch RuntimeError) and gives a verdict."""
    x = _ids()
    y = torch.randint(0, 8, (4, 8), generator=torch.Generator().manual_seed(1))

    def make(width: int, depth: int, seed: int) -> tuple[nn.Module, ds.param.Plan]:
        torch.manual_seed(seed)
        model = MoENet(width, depth, kernel=kernel)
        p = ds.param.plan("completep", width=width, depth=depth)
        p.apply(model, example_input=x, seed=seed)
        return model, p

    rep = ds.probes.coord_check(make, x, y, widths=(16, 32), depths=(2, 4), base_width=16,
                                base_depth=2, lr=1e-2, optimizer="adam", seeds=range(1))
    assert rep.verdict in ("PASS", "INCONCLUSIVE", "FAIL")


class Biased(nn.Module):
    """Two biases: one set by the model's own convention (softplus^-1 of dt in [1e-3, 0.1],
    Mamba's dt bias), one a zero-mean draw (torch's default Linear bias)."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(4, 16)
        self.dt = nn.Linear(16, 16)
        self.out = nn.Linear(16, 3)
        dt = torch.exp(torch.linspace(-6.9, -2.3, 16))
        with torch.no_grad():
            self.dt.bias.copy_(dt + torch.log(-torch.expm1(-dt)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        return self.out(h + F.softplus(self.dt(h)))


def test_a_bias_init_convention_is_kept_and_a_random_bias_redrawn() -> None:
    """dt.bias (mean -4.5) is a convention: apply keeps it exactly; inp.bias (a zero-mean
    uniform draw) is redrawn by the recipe's zero init."""
    torch.manual_seed(0)
    model = Biased()
    x = torch.randn(8, 4)
    st = ds.param.inspect(model, x)
    assert list(st.conventions) == ["dt.bias"]
    before = model.dt.bias.detach().clone()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.param.plan("completep", width=16, depth=1).apply(model, example_input=x, seed=0)
    assert torch.equal(model.dt.bias.detach(), before)
    assert torch.equal(model.inp.bias.detach(), torch.zeros(16))

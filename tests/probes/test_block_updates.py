"""The per-block own-update probes (nfd App. H): each layer's change x - x~ (Eq. 27) and the
stream's (dh - dh~)/tau (Eq. 33-34), on ResNets with k-layer blocks and on the GPT."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from depthscale.errors import ConfigError
from depthscale.models import build
from depthscale.models.gpt import GPT
from depthscale.probes import block_updates, snapshot, transformer_updates, two_layer_updates

G = torch.Generator().manual_seed(0)
X = torch.randn(64, 20, generator=G)
Y = torch.randint(0, 10, (64,), generator=G)
TOK = torch.randint(0, 8, (6, 8), generator=G)


# ---- ResNets with k >= 2 layers per block -----------------------------------------------------
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


def test_two_layer_updates_by_the_layers_own_forward_calls() -> None:
    """A second route to nfd Eq. 27 and Eq. 33-34 on an Eq. 8 net after 5 SGD steps: hooks
    catch each block's inner and outer layer inputs and outputs in a plain forward pass, and
    the frozen-weight baselines are those layers' own forward calls with their initial weight
    (torch.func.functional_call), so neither the multipliers nor the trace are reused:
    internal = |x - inner(h; W_1^(0))| / sqrt(n), stream = |outer(phi(x); W_2) - outer(phi(x);
    W_2^(0))| / (tau sqrt(n)) with tau = 1/L."""
    n, L = 16, 4
    model, plan = build("resnet2", "nfd-depth", input_shape=(20,), n_out=10, width=n, depth=L,
                        seed=1)
    init = snapshot(model)
    opt = plan.optimizer(model, "sgd", 0.2)
    for _ in range(5):
        opt.zero_grad()
        F.cross_entropy(model(X), Y).backward()
        opt.step()
    seen: dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor]] = {}
    handles = []
    for l, branch in enumerate(model.branches):
        for name in ("inner", "outer"):
            def keep(_m: torch.nn.Module, args: tuple[torch.Tensor, ...], out: torch.Tensor,
                     key: tuple[int, str] = (l, name)) -> None:
                seen[key] = (args[0].detach(), out.detach())
            handles.append(branch[name].register_forward_hook(keep))
    with torch.no_grad():
        model(X)
    for h in handles:
        h.remove()
    internal, stream = [], []
    with torch.no_grad():
        for l, branch in enumerate(model.branches):
            (h_prev, x), (phi_x, out) = seen[(l, "inner")], seen[(l, "outer")]
            x0 = torch.func.functional_call(branch["inner"], {
                "weight": init[f"branches.{l}.inner.weight"]}, (h_prev,))
            out0 = torch.func.functional_call(branch["outer"], {
                "weight": init[f"branches.{l}.outer.weight"]}, (phi_x,))
            internal.append(float((x - x0).norm(dim=-1).mean()) / math.sqrt(n))
            stream.append(float((out - out0).norm(dim=-1).mean()) * L / math.sqrt(n))
    ours = two_layer_updates(model, init, X)
    assert ours["internal"] == pytest.approx(internal, rel=1e-5)
    assert ours["stream"] == pytest.approx(stream, rel=1e-5)
    assert min(internal) > 0 and min(stream) > 0


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


# ---- the GPT ----------------------------------------------------------------------------------
def _gpt(recipe: str, blocks: int) -> GPT:
    model, _ = build("gpt", recipe, input_shape=(8,), n_out=8, width=16, depth=blocks, seed=0,
                     heads=2, bias=False)
    assert isinstance(model, GPT)
    return model


def test_transformer_updates_see_only_the_layers_whose_weights_moved() -> None:
    n, L = 16, 4
    model = _gpt("depth-mup", 2)
    init = snapshot(model)
    r = torch.randn(4 * n, generator=G)
    with torch.no_grad():  # one row each: v coordinate 0 of block 1, stream coordinate 0 of block 0
        model.blocks[1].attn.qkv.weight[2 * n] += r[:n]
        model.blocks[0].mlp.fc2.weight[0] += r
    upd = transformer_updates(model, init, TOK)
    zero = pytest.approx([0.0, 0.0], abs=1e-6)  # float32 rounding of the recomputed y~
    assert upd["fc1"] == zero and upd["attn_stream"] == zero
    assert upd["q"] == zero and upd["k"] == zero
    for key in ("qkv", "v"):
        assert upd[key][0] == pytest.approx(0.0, abs=1e-6)
    assert upd["mlp_stream"][1] == pytest.approx(0.0, abs=1e-6)
    blk0, blk1 = model.blocks
    tr = model.trace(TOK)
    with torch.no_grad():
        # v - v~ = a (r . LN(z)) e_0 per token: its RMS over q,k,v (3n) and over v (n)
        dv = (blk1.attn.qkv.multiplier * blk1.ln1(tr.streams[2]) @ r[:n]).abs()
        hidden = blk0.mlp.phi(blk0.mlp.fc1(blk0.ln2(tr.streams[1])))
        dz = (blk0.mlp.fc2.multiplier * hidden @ r).abs() * L  # / tau, tau = T/L
    assert upd["qkv"][1] == pytest.approx(float(dv.mean()) / math.sqrt(3 * n), rel=1e-5)
    assert upd["v"][1] == pytest.approx(float(dv.mean()) / math.sqrt(n), rel=1e-5)
    assert upd["mlp_stream"][0] == pytest.approx(float(dz.mean()) / math.sqrt(n), rel=1e-5)


def test_transformer_updates_need_the_gpt() -> None:
    model, _ = build("resnet2", "depth-mup", input_shape=(20,), n_out=10, width=8, depth=2)
    with pytest.raises(ConfigError, match="GPT"):
        transformer_updates(model, snapshot(model), X)

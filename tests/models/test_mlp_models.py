"""MLP-ResNets (nfd Eq. 1, 6, 9), the plain MLP, and the decoupled backward of nfd Cor. 1."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from depthscale.errors import ConfigError
from depthscale.models import MLPResNet, ScaledLinear, build


def _data(n: int = 16, d: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    return torch.randn(n, d, generator=g), torch.randint(0, 3, (n,), generator=g)


def _grads(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
    model.zero_grad()
    x = x.clone().requires_grad_(True)
    F.cross_entropy(model(x), y).backward()
    grads = {k: p.grad.clone() for k, p in model.named_parameters()}
    grads["input"] = x.grad.clone()
    return grads


def test_pre_act_forward_is_eq1_by_hand() -> None:
    model, _ = build("resnet1", "depth-mup", input_shape=(6,), n_out=3, width=8, depth=3,
                     plan_options={"T": 2.0})
    x, _ = _data()
    h = x @ model.embed.weight.T / math.sqrt(6)
    for br in model.branches:
        h = h + math.sqrt(2.0 / (3 * 8)) * torch.relu(h) @ br.weight.T
    out = (1 / math.sqrt(8)) * (1 / math.sqrt(8)) * h @ model.readout.weight.T
    torch.testing.assert_close(model(x), out, rtol=1e-5, atol=1e-6)


def test_post_act_forward_is_eq9_for_relu() -> None:
    model, _ = build("resnet1-post", "depth-mup", input_shape=(6,), n_out=3, width=8, depth=4)
    x, _ = _data()
    h = torch.relu(x @ model.embed.weight.T / math.sqrt(6))
    for br in model.branches:
        h = h + math.sqrt(1 / 4) * torch.relu(h @ br.weight.T / math.sqrt(8))
    torch.testing.assert_close(model.trace(x).streams[-1], h, rtol=1e-5, atol=1e-5)


def test_post_act_refuses_non_homogeneous_activation() -> None:
    with pytest.raises(ConfigError, match="positively homogeneous"):
        MLPResNet(4, 2, 8, 2, style="post", activation="tanh")


def test_two_layer_trace_holds_internal_representation_eq6() -> None:
    model, _ = build("resnet2", "depth-mup", input_shape=(6,), n_out=3, width=8, depth=2)
    x, _ = _data()
    tr = model.trace(x)
    x1 = tr.streams[0] @ model.branches[0]["inner"].weight.T / math.sqrt(8)
    torch.testing.assert_close(tr.internal[0], x1, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(tr.out, model(x))
    assert len(tr.streams) == 3 and len(tr.increments) == 2


def test_decoupled_with_equal_copy_reproduces_standard_gradients_exactly() -> None:
    kw = {"input_shape": (6,), "n_out": 3, "width": 8, "depth": 3, "seed": 4}
    std, _ = build("resnet1", "depth-mup", **kw)
    dec, _ = build("resnet1", "depth-mup", backward="decoupled", **kw)
    for m in dec.modules():
        if isinstance(m, ScaledLinear) and m.backward_mode != "standard":
            m.weight_back_init.copy_(m.weight_init)
    x, y = _data()
    gs, gd = _grads(std, x, y), _grads(dec, x, y)
    for k in gs:
        torch.testing.assert_close(gs[k], gd[k], rtol=0, atol=0)


def test_decoupled_changes_gradients_but_not_forward_values() -> None:
    kw = {"input_shape": (6,), "n_out": 3, "width": 8, "depth": 3, "seed": 4}
    std, _ = build("resnet1", "depth-mup", **kw)
    dec, _ = build("resnet1", "depth-mup", backward="decoupled", **kw)
    x, y = _data()
    torch.testing.assert_close(std(x), dec(x), rtol=0, atol=0)  # same forward weights
    gs, gd = _grads(std, x, y), _grads(dec, x, y)
    # the last branch's weight gradient sees only forward values: identical
    torch.testing.assert_close(gs["branches.2.weight"], gd["branches.2.weight"])
    # earlier layers receive the backward signal through an independent W~: different
    assert not torch.allclose(gs["branches.0.weight"], gd["branches.0.weight"])
    assert not torch.allclose(gs["input"], gd["input"])


def test_decoupled_copy_carries_updates_feedback_alignment_does_not() -> None:
    layer = ScaledLinear(4, 4, "branch", backward="decoupled")
    fixed = ScaledLinear(4, 4, "branch", backward="feedback-alignment")
    gen = torch.Generator().manual_seed(0)
    for m in (layer, fixed):
        m.init_backward_copy(1.0, gen)
        with torch.no_grad():
            m.weight.add_(0.5)
    torch.testing.assert_close(layer.backward_weight(), layer.weight_back_init + 0.5)
    torch.testing.assert_close(fixed.backward_weight(), fixed.weight_back_init)


def test_decoupled_input_gradient_after_sgd_steps_is_w_back0_plus_the_learned_update() -> None:
    """nfd Cor. 1: after k SGD steps of the model the claims build, each decoupled branch's input
    gradient is a (W~_0 + W_k - W_0)^T g exactly, and not feedback alignment's a W~_0^T g."""
    net, plan = build("resnet1", "depth-mup", input_shape=(6,), n_out=3, width=8, depth=3,
                      seed=4, backward="decoupled")
    net.double()
    opt = plan.optimizer(net, "sgd", lr=0.05)
    x, y = _data()
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy(net(x.double()), y).backward()
        opt.step()
    g = torch.Generator().manual_seed(5)
    for layer in net.branches:
        learned = layer.weight.detach() - layer.weight_init
        assert learned.abs().max() > 1e-3  # the weights moved
        h = torch.randn(5, 8, generator=g, dtype=torch.float64, requires_grad=True)
        upstream = torch.randn(5, 8, generator=g, dtype=torch.float64)
        layer(h).backward(upstream)
        scaled = upstream * layer.multiplier
        torch.testing.assert_close(h.grad, scaled @ (layer.weight_back_init + learned),
                                   rtol=1e-12, atol=1e-14)
        feedback = scaled @ layer.weight_back_init
        assert (h.grad - feedback).abs().max() > 1e3 * (1e-14 + 1e-12 * feedback.abs().max())


def test_online_decoupled_run_departs_from_feedback_alignment_after_its_first_update() -> None:
    """The finite nets of nfd-cor1 and nfd-thm1 (online SGD): decoupled and feedback-alignment
    share every forward weight and the first update (W~ = W~_0 before any step), so outputs
    agree at steps 0 and 1 and differ from step 2, once W~ carries W_1 - W_0."""
    from depthscale.train.finite.nfd import online_sgd_finite, teacher_stream

    xs, ys = teacher_stream(6, dim=8, seed=0)
    runs = {b: online_sgd_finite(xs, ys, width=16, depth=4, eta_c=0.5, seed=1,
                                 backward=b).outputs
            for b in ("decoupled", "feedback-alignment")}
    dec, fa = runs["decoupled"], runs["feedback-alignment"]
    assert dec[:2].tolist() == fa[:2].tolist()
    assert abs(dec[2:] - fa[2:]).max() > 1e-6


def test_unknown_backward_mode_and_bad_sizes_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="backward mode"):
        ScaledLinear(2, 2, "branch", backward="sideways")
    with pytest.raises(ConfigError, match="depth must be"):
        MLPResNet(4, 2, 8, 0)
    with pytest.raises(ConfigError, match="block must be"):
        MLPResNet(4, 2, 8, 2, block=0)
    with pytest.raises(ConfigError, match="does not take"):
        build("resnet1", "sp", input_shape=(4,), n_out=2, width=4, depth=2, kernel_size=3)
    with pytest.raises(ConfigError, match="unknown model"):
        build("resnet9", "sp", input_shape=(4,), n_out=2, width=4, depth=2)


def test_plain_mlp_vanishes_with_depth_under_mup() -> None:
    x, _ = _data(64, 6)
    rms = []
    for depth in (2, 16):
        model, _ = build("mlp", "mup", input_shape=(6,), n_out=3, width=256, depth=depth)
        rms.append(model.trace(x).streams[-1].pow(2).mean().sqrt().item())
    # ReLU halves the second moment per layer: 14 more layers shrink RMS by 2^-7 = 1/128
    assert rms[1] / rms[0] == pytest.approx(2**-7, rel=0.5)

"""A planned depthscale model's state_dict holds tensors only (the layers' multipliers as
float64 scalars), so the usual idioms on checkpoints keep working."""

from __future__ import annotations

import torch

from depthscale.models import build


def test_state_dict_values_are_tensors_and_clone_round_trips() -> None:
    net, _ = build("resnet2", "depth-mup", input_shape=(40,), n_out=10, width=16, depth=3,
                   seed=0)
    state = net.state_dict()
    multipliers = {k: v for k, v in state.items() if k.endswith("._extra_state")
                   and not k.startswith("depthscale_plan")}
    assert multipliers and all(v.dtype == torch.float64 and v.numel() == 1
                               for v in multipliers.values())
    inner = net.branches[0]["inner"]
    assert float(multipliers["branches.0.inner._extra_state"]) == inner.multiplier
    assert all(isinstance(v, torch.Tensor) for v in state.values())
    cloned = {k: v.clone() for k, v in state.items()}
    fresh, _ = build("resnet2", "depth-mup", input_shape=(40,), n_out=10, width=16, depth=3,
                     seed=1)
    fresh.load_state_dict(cloned)
    x = torch.randn(5, 40)
    assert torch.equal(fresh(x), net(x))

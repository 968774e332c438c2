"""Inputs and outputs as users have them: a tensor, a tuple of positional arguments or a dict
of keyword arguments in, a tensor, tuple, dict with "logits" or an object with ``.logits`` out;
a batch takes the same rows of every tensor along dim 0."""

from __future__ import annotations

import types

import pytest
import torch
from torch import nn

from depthscale.calls import call_model, logits_of, n_rows, take_rows
from depthscale.errors import ConfigError, DataError
from depthscale.param import plan
from depthscale.train import TrainConfig, train

G = torch.Generator().manual_seed(0)
XS = torch.randn(40, 20, generator=G)
YS = torch.randint(0, 3, (40,), generator=G)
SCALE = torch.rand(40, 1, generator=G) + 0.5


class Net(nn.Module):
    """out(x * scale): called as Net()(x) with scale folded into x, or through a subclass."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(20, 16), nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class DictNet(Net):
    """Keyword inputs, a dict with "logits" out."""

    def forward(self, x: torch.Tensor, scale: torch.Tensor | None = None  # type: ignore[override]
                ) -> dict[str, torch.Tensor]:
        return {"logits": super().forward(x * scale), "hidden": x}


class TupleNet(Net):
    """Positional inputs, an object with .logits out (like a Hugging Face ModelOutput)."""

    def forward(self, x: torch.Tensor, scale: torch.Tensor  # type: ignore[override]
                ) -> types.SimpleNamespace:
        return types.SimpleNamespace(logits=super().forward(x * scale))


def _data(x_train, x_test):  # type: ignore[no-untyped-def]
    return types.SimpleNamespace(name="toy", x_train=x_train, y_train=YS, x_test=x_test,
                                 y_test=YS[:8], n_out=3)


def _losses(model: nn.Module, data) -> list[float]:  # type: ignore[no-untyped-def]
    example = take_rows(data.x_train, slice(0, 4))
    p = plan("mup", width=16, depth=1)
    p.apply(model, roles={"fc1.weight": "input", "fc2.weight": "output"},
            example_input=example, seed=0)
    res = train(model, p, data, TrainConfig(optimizer="adam", lr=1e-2, steps=12, batch_size=8,
                                            seed=1))
    assert res.status == "ok" and set(res.final) == {"train_loss", "train_acc", "test_loss",
                                                     "test_acc"}
    return res.losses


def test_dict_and_tuple_inputs_train_exactly_as_a_tensor_does() -> None:
    plain = _losses(Net(), _data(XS * SCALE, XS[:8] * SCALE[:8]))
    keyword = _losses(DictNet(), _data({"x": XS, "scale": SCALE},
                                       {"x": XS[:8], "scale": SCALE[:8]}))
    positional = _losses(TupleNet(), _data((XS, SCALE), (XS[:8], SCALE[:8])))
    assert keyword == pytest.approx(plain, rel=1e-6)
    assert positional == pytest.approx(plain, rel=1e-6)


def test_rows_outputs_and_calls() -> None:
    batch = {"x": XS, "scale": SCALE, "flag": True}
    rows = take_rows(batch, torch.tensor([3, 1]))
    assert torch.equal(rows["x"], XS[[3, 1]]) and torch.equal(rows["scale"], SCALE[[3, 1]])
    assert rows["flag"] is True and n_rows(batch) == 40 and n_rows((XS, SCALE)) == 40
    with pytest.raises(DataError, match="one common batch size"):
        n_rows({"x": XS, "scale": SCALE[:3]})
    t = torch.ones(2)
    assert logits_of(t) is t and logits_of((t, 0)) is t and logits_of({"logits": t}) is t
    assert logits_of(types.SimpleNamespace(logits=t)) is t
    with pytest.raises(ConfigError, match="holds no scores"):
        logits_of({"hidden": t})
    assert call_model(lambda **kw: sorted(kw), {"b": 1, "a": 2}) == ["a", "b"]  # type: ignore[arg-type]
    assert call_model(lambda *a: a, (1, 2)) == (1, 2)  # type: ignore[arg-type]

"""check_training_step (issue 43, item 6): one forward and backward of a user's model in
training mode, before any work; it refuses what cannot train with one ConfigError line, warns
about parameters that get no gradient, and leaves the model, its input and the random state as
they were."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from depthscale.errors import ConfigError
from depthscale.models.registry import check_training_step


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(4, 8)
        self.norm = nn.BatchNorm1d(8)
        self.drop = nn.Dropout(0.5)
        self.out = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.drop(self.norm(torch.relu(self.inp(x)))))


def _x() -> torch.Tensor:
    return torch.randn(8, 4, generator=torch.Generator().manual_seed(0))


def test_a_trainable_model_passes_and_is_left_as_it_was() -> None:
    net = Net().eval()
    net.norm.train()  # a mixed mode is kept per module
    before = {k: v.clone() for k, v in net.state_dict().items()}
    x = _x()
    x0 = x.clone()
    rng = torch.get_rng_state()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_training_step("m:f", net, x)
    after = net.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # BatchNorm stats included
    assert all(p.grad is None for p in net.parameters())
    assert torch.equal(torch.get_rng_state(), rng)  # dropout drew from a forked generator
    assert torch.equal(x, x0)
    assert not net.training and net.norm.training and not net.out.training


class Unused(Net):
    def __init__(self) -> None:
        super().__init__()
        self.spare = nn.Linear(8, 8)


def test_parameters_without_a_gradient_are_a_warning_that_names_them() -> None:
    with pytest.warns(UserWarning, match=r"2 of 8 trainable parameters get no gradient from "
                                         r"the loss \(spare.weight, spare.bias\)"):
        check_training_step("m:f", Unused(), _x())


class Constant(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.unused = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros(x.shape[0], 3, requires_grad=True) * 1.0


class WritesWeight(Net):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.inp.weight.mul_(0.5)
        return super().forward(x)


class WritesInputWhenTraining(Net):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            x.mul_(2)
        return super().forward(x)


class SqrtAtZero(Net):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = super().forward(x)
        return scores + (self.out.bias * 0).sqrt()


@pytest.mark.parametrize(("model", "message"), [
    (Constant(), "no parameter gets a gradient from the loss"),
    (WritesWeight(), "in training mode the model's forward writes in place"),
    (WritesInputWhenTraining(), "changes its input in place in training mode"),
    (SqrtAtZero(), "1 parameter(s) get a non-finite gradient (out.bias)"),
])
def test_what_cannot_train_is_one_line(model: nn.Module, message: str) -> None:
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = _x()
    x0 = x.clone()
    with pytest.raises(ConfigError) as exc:
        check_training_step("m:f", model, x)
    text = str(exc.value)
    assert text.startswith("model factory 'm:f': ") and message in text, text
    assert "\n" not in text
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert torch.equal(x, x0)

"""The readout found through what the forward returns (issue 40): the output tensor, an
object's ``.logits``, a dict's ``"logits"``, a tuple's first element; None, a generator or an
output holding no tensor is one ConfigError saying what the forward must return."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import torch
from torch import nn

import depthscale as ds
from depthscale.errors import ConfigError


@dataclass
class Out:
    """A user's output object (not a ModelOutput: no to_tuple)."""

    logits: torch.Tensor
    hidden: torch.Tensor


class Net(nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.inp, self.mid, self.head = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> Any:
        h = self.mid(torch.relu(self.inp(x)))
        logits = self.head(torch.relu(h))
        return {"object": Out(logits, h), "dict": {"hidden": h, "logits": logits},
                "tuple": (logits, h), "none": None, "generator": (t for t in (logits,)),
                "text": "done"}[self.kind]


@pytest.mark.parametrize("kind", ["object", "dict", "tuple"])
def test_the_readout_is_found_through_the_output(kind: str) -> None:
    st = ds.param.inspect(Net(kind), torch.randn(2, 4))
    assert (st.roles["inp.weight"], st.roles["mid.weight"], st.roles["head.weight"]) == (
        "input", "hidden", "output")


@pytest.mark.parametrize("kind", ["none", "generator", "text"])
def test_an_output_without_logits_is_refused_saying_what_to_return(kind: str) -> None:
    with pytest.raises(ConfigError) as refused:
        ds.param.inspect(Net(kind), torch.randn(2, 4))
    assert "logits" in str(refused.value) and "return" in str(refused.value)

"""A factory that returns the structure it read (``(model, plan, structure)``, the README's
"ten lines"): coord_check measures with it and reads no model again, with the report of a
factory that returns ``(model, plan)`` (whose apply's own read is measured with); a structure
read before ``apply`` set an attention attribute (OPT's ``scaling``) is measured at the scale
apply set, as a fresh read is."""

from __future__ import annotations

import importlib
import importlib.util
import warnings
from typing import Any

import pytest
import torch
from own_gpt import GPT
from torch import nn

import depthscale as ds
from depthscale.param import Structure
from depthscale.probes import coord_check, measure_point

READERS = ["depthscale.probes.coord_check", "depthscale.probes.factory_sizes",
           "depthscale.param.apply"]

DATA = ds.data.load("markov", vocab=16, context=16, n_train=64)
X, Y = DATA.x_train[:8], DATA.y_train[:8]


def _counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many times each module that could read a model again calls inspect."""
    calls = dict.fromkeys(READERS, 0)
    for name in READERS:
        module = importlib.import_module(name)
        real = module.inspect

        def counting(model: nn.Module, x: Any, _name: str = name, _real: Any = real
                     ) -> Structure:
            calls[_name] += 1
            return _real(model, x)  # type: ignore[no-any-return]

        monkeypatch.setattr(module, "inspect", counting)
    return calls


def _make(width: int, blocks: int, seed: int) -> tuple[nn.Module, ds.param.Plan, Structure]:
    torch.manual_seed(seed)
    model = GPT(16, 16, width, blocks)
    st = ds.param.inspect(model, X)
    p = ds.param.plan("completep", st)
    p.apply(model, structure=st, example_input=X, seed=seed)
    return model, p, st


def _make_reading(width: int, blocks: int, seed: int) -> tuple[nn.Module, ds.param.Plan]:
    torch.manual_seed(seed)
    model = GPT(16, 16, width, blocks)
    st = ds.param.inspect(model, X)
    p = ds.param.plan("completep", width=st.width, depth=st.depth)
    p.apply(model, example_input=X, seed=seed)
    return model, p


def test_the_factory_structure_is_measured_with_and_no_model_is_read_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: dict[str, Any] = {"widths": [32, 64], "depths": [1, 2], "base_width": 32,
                             "base_depth": 1, "optimizer": "adam", "lr": 3e-3,
                             "seeds": range(2)}
    calls = _counted(monkeypatch)
    reading = coord_check(_make_reading, X, Y, **sizes)
    # the factory's apply reads each model; coord_check measures with that read
    # (factory_sizes.build_read) and reads none again
    assert calls["depthscale.param.apply"] > 0
    assert calls["depthscale.probes.coord_check"] == calls["depthscale.probes.factory_sizes"] == 0
    calls.update(dict.fromkeys(READERS, 0))
    given = coord_check(_make, X, Y, **sizes)
    assert calls == dict.fromkeys(READERS, 0)
    assert given.summary() == reading.summary()
    assert given.rows() == reading.rows()


def _opt() -> nn.Module:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = transformers.OPTConfig(
            attn_implementation="sdpa", vocab_size=16, hidden_size=32, word_embed_proj_dim=32,
            num_hidden_layers=2, ffn_dim=128, num_attention_heads=2, max_position_embeddings=16,
            dropout=0.0, attention_dropout=0.0, pad_token_id=0, bos_token_id=0, eos_token_id=0)
        return transformers.OPTForCausalLM(cfg)


def test_a_structure_read_before_apply_is_measured_at_the_scale_apply_set() -> None:
    """OPT multiplies q by ``scaling``; muP sets it from 16^-0.5 to 1/16. Measured with the
    structure read before apply, q's output is read before that constant (not after it: a
    q activation 16 times too small), exactly as with a fresh read."""
    x = {"input_ids": X}
    sizes = []
    for fresh in (True, False):
        model = _opt()
        st = ds.param.inspect(model, x)
        p = ds.param.plan("mup", st)
        p.apply(model, structure=st, example_input=x)
        sizes.append(measure_point(model, p, x, Y, lr=1e-2, optimizer="adam",
                                   structure=None if fresh else st))
    assert sizes[0] == sizes[1]
    q = sizes[1].values["act"]["branch_in"]
    assert min(q) > 0.5  # every branch reader's output (q, k, v, fc1) is O(1)

"""A Hugging Face model as users call it: a dict of keyword inputs (``{"input_ids": ids}``) and
a ``ModelOutput`` whose ``.logits`` the loss reads, in ``measure_point``, ``coord_check`` and
``lr_transfer_check`` (a tiny GPT-2 built offline from its config)."""

from __future__ import annotations

import types
import warnings

import pytest
import torch

import depthscale as ds
from depthscale.probes import coord_check, lr_transfer_check, measure_point

transformers = pytest.importorskip("transformers")

V, T = 16, 8
G = torch.Generator().manual_seed(0)
IDS = torch.randint(0, V, (4, T), generator=G)
NEXT = torch.randint(0, V, (4, T), generator=G)


def make(width: int, blocks: int, seed: int):  # type: ignore[no-untyped-def]
    torch.manual_seed(seed)
    config = transformers.GPT2Config(vocab_size=V, n_positions=T, n_embd=width, n_layer=blocks,
                                     n_head=width // 16, resid_pdrop=0.0, embd_pdrop=0.0,
                                     attn_pdrop=0.0)
    model = transformers.GPT2LMHeadModel(config)
    x = {"input_ids": IDS}
    st = ds.param.inspect(model, x)
    p = ds.param.plan("completep", width=st.width, depth=st.depth)
    with warnings.catch_warnings():  # GPT-2's attention scale is its own (1/sqrt(d_head))
        warnings.simplefilter("ignore", UserWarning)
        p.apply(model, example_input=x, seed=seed)
    return model, p


def test_measure_point_reads_the_logits_of_a_model_output() -> None:
    model, p = make(32, 2, 0)
    with torch.no_grad():
        logits = model(input_ids=IDS).logits
    sizes = measure_point(model, p, {"input_ids": IDS}, NEXT, lr=1e-2, optimizer="adam")
    v = sizes.values
    assert v["act"]["output"] == pytest.approx([float(logits.pow(2).mean().sqrt())], rel=1e-5)
    # Conv1D weights are units (c_attn, c_proj, c_fc); the tied lm_head is wte's second use
    assert set(v["unit_own_update"]) == {"transformer.wte", "transformer.h.*.attn.c_attn",
                                         "transformer.h.*.attn.c_proj",
                                         "transformer.h.*.mlp.c_fc", "transformer.h.*.mlp.c_proj"}
    assert len(v["act"]["branch_out"]) == 4 and len(v["act"]["input"]) == 1


def test_coord_check_takes_a_dict_input() -> None:
    rep = coord_check(make, {"input_ids": IDS}, NEXT, widths=[16, 32], depths=[1, 2],
                      base_width=16, base_depth=1, lr=3e-3, optimizer="adam", seeds=range(2))
    assert rep.verdict in ("PASS", "INCONCLUSIVE", "FAIL")
    assert -1.15 < rep.fit("branch_out", "act", "depth").slope < -0.85, rep.table()
    assert rep.fit("transformer.h.*.mlp.c_fc", "own_aligned", "width").finding == "supports"


def test_lr_transfer_check_trains_on_dict_inputs_and_model_outputs() -> None:
    data = types.SimpleNamespace(name="ids", x_train={"input_ids": IDS.repeat(4, 1)},
                                 y_train=NEXT.repeat(4, 1), x_test={"input_ids": IDS},
                                 y_test=NEXT, n_out=V)
    rep = lr_transfer_check(make, data, [1e-3, 1e-2, 1e-1], depths=[1, 2], base_width=16,
                            optimizer="adam", steps=3, batch_size=8, seeds=range(2))
    assert [(s.width, s.depth) for s in rep.sizes] == [(16, 1), (16, 2)]
    assert all(r["status"] == "done" and r["running_loss"] > 0 for r in rep.records)

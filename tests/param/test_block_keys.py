"""Blocks of a stage's repeated layers (``stages.0.layers.i``, Hugging Face ConvNeXt): one block
per layer, while a block's different sub-layers (T5's ``block.0.layer.0`` attention and
``layer.1`` MLP) stay one block (issue 40)."""

from __future__ import annotations

from depthscale.param.inspect import _split_blocks


def test_repeated_layers_of_one_stage_are_blocks_of_their_own() -> None:
    stage = {i: (f"s.0.layers.{i}.dw", f"s.0.layers.{i}.pw") for i in range(3)}
    # before: {"s.0": [0, 1, 2]}
    assert _split_blocks(stage) == {f"s.0.layers.{i}": [i] for i in range(3)}


def test_different_sub_layers_of_one_block_stay_one_block() -> None:
    t5 = {2 * b + k: (f"b.{b}.layer.{k}.{m}.x", f"b.{b}.layer.{k}.{m}.y")
          for b in (0, 1) for k, m in ((0, "attn"), (1, "ff"))}
    assert _split_blocks(t5) == {"b.0": [0, 1], "b.1": [2, 3]}
    mixer = {0: ("b.0.token1", "b.0.token2"), 1: ("b.0.channel1", "b.0.channel2")}
    assert _split_blocks(mixer) == {"b.0": [0, 1]}  # digits inside a name are no index
    gpt = {0: ("h.0.attn",), 1: ("h.0.mlp",)}
    assert _split_blocks(gpt) == {"h.0": [0, 1]}

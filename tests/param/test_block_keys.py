"""Blocks of a stage's repeated layers (``stages.0.layers.i``, Hugging Face ConvNeXt): one block
per layer, while a block's different sub-layers (T5's ``block.0.layer.0`` attention and
``layer.1`` MLP) stay one block (issue 40)."""

from __future__ import annotations

from depthscale.param.inspect import Branch, _blocks


def _branches(members: dict[int, tuple[str, ...]]) -> list[Branch]:
    return [Branch(i, mods, mods[:1], mods[-1:], (), 8) for i, mods in members.items()]


def test_repeated_layers_of_one_stage_are_blocks_of_their_own() -> None:
    stage = {i: (f"s.0.layers.{i}.dw", f"s.0.layers.{i}.pw") for i in range(3)}
    # before: {"s.0": [0, 1, 2]}
    assert _blocks(_branches(stage)) == {f"s.0.layers.{i}": [i] for i in range(3)}


def test_different_sub_layers_of_one_block_stay_one_block() -> None:
    t5 = {2 * b + k: (f"b.{b}.layer.{k}.{m}.x", f"b.{b}.layer.{k}.{m}.y")
          for b in (0, 1) for k, m in ((0, "attn"), (1, "ff"))}
    assert _blocks(_branches(t5)) == {"b.0": [0, 1], "b.1": [2, 3]}
    mixer = {0: ("b.0.token1", "b.0.token2"), 1: ("b.0.channel1", "b.0.channel2")}
    assert _blocks(_branches(mixer)) == {"b.0": [0, 1]}  # digits inside a name are no index
    gpt = {0: ("h.0.attn",), 1: ("h.0.mlp",)}
    assert _blocks(_branches(gpt)) == {"h.0": [0, 1]}

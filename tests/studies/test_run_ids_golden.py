"""Golden run ids: the identity of every run of the shipped example studies, pinned.

A run's id (:func:`depthscale.studies.spec.run_id`) is the key of its row in a study's store;
a refactor that changed one would make every stored study rerun. This pins, for every spec
under ``examples/``, the number of runs, a digest of the sorted ids, a digest of the spec JSON
the store keeps for each run (``RunSpec.to_dict``, in expansion order) and the first three ids
literally; plus one study with the identity's optional parts (``[roles]``, a non-default
``final_eval``, swept training and option axes) and the column order of a run's flat row.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from depthscale.studies.spec import RunSpec, expand, load_study, parse_study, run_id

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

#: spec file -> (runs, sha256[:16] of the sorted ids, of the stored spec JSON, first 3 ids)
GOLDEN = [
    ("beyond_adam.toml", 108, "106709d8ca9db6d0", "0a20a25c7fd87acc",
     ("60eb176a6f69af7f", "6ee23b6ddc167b59", "2d74f2a6f43edcd0")),
    ("beyond_transformer.toml", 60, "8b441d5320f2eee4", "e5ebaa1ccf05f6ec",
     ("99501514efb482af", "db9cb05a9b8555c8", "dce930ac47f9ad40")),
    ("gpt_markov_depth_lr.toml", 15, "58a394ee0c1623ba", "bce2cc55d8148083",
     ("12b0eaeed239ce8e", "0068cb8a74b4fe84", "a93a4e877ed67cb8")),
    ("laws_ablations/cnn-adam.toml", 120, "be1c2ab370bff3ef", "989787a0b3ae9cf5",
     ("403fdf1d4575aae5", "a02a6e565017c299", "ef21df2da2014ed1")),
    ("laws_ablations/cnn-baseline.toml", 120, "b0219d924bc8bcc9", "94ec11012ba9897d",
     ("97b69c18480c3aee", "ea67e4eb6d923d89", "a1ebc6629c7427af")),
    ("laws_ablations/cnn-gelu.toml", 120, "5323881b3a3a33a3", "b5fb01ca984e0f98",
     ("0f4b7d2aae62ad30", "eae25aaf1fd01948", "a5300a785a7bec71")),
    ("laws_ablations/cnn-kernel4.toml", 120, "b6d0fe5724871d35", "8471f13d6223046c",
     ("8fda6ea436b56210", "8517bcdc1f39b742", "d25798a93a31b972")),
    ("laws_ablations/cnn-kernel5.toml", 120, "a155a71a0f8ec027", "747d4037581333c4",
     ("893ce1eee3f4b794", "61b0024fa93775e2", "76d0c9da106bb3d3")),
    ("laws_ablations/cnn-zero-padding.toml", 120, "085c836c87b5cb38", "97e80f15cf9a44c6",
     ("fbebf260c6842b42", "12bba5c491604b31", "05816a2aa227bfe4")),
    ("laws_ablations/resnet-adam.toml", 120, "e8c1e33bc4ca01d9", "e1979c0bdbc47359",
     ("facb48c6b28f817b", "deb3a3464fd3165c", "383420632045d743")),
    ("laws_ablations/resnet-baseline.toml", 120, "d60f00da62dcd4b8", "63d43a3c495ec371",
     ("bff0a5db3d9f6a7e", "774247245af69c08", "68db7152c1a9d2cc")),
    ("laws_ablations/resnet-batchnorm.toml", 120, "ee32526d857f0cae", "04874b17fe319e92",
     ("6bc67375f9cfb6ae", "00e03d9ff6bf36c8", "39fca36afcf6d945")),
    ("laws_ablations/resnet-dropout.toml", 120, "f0d7796b739716fa", "5f5b218f005512b9",
     ("94dca79dc21643fd", "3665d4229e1336fd", "7a4b38deb2eca6ab")),
    ("laws_ablations/vit-branch-scaled.toml", 120, "917793c1084d3d10", "9c9f1f20f1d23485",
     ("50a2e1f99df74ec8", "e52dbbef878bc09c", "dffa68d4fe8d8541")),
    ("laws_ablations/vit-post-ln.toml", 120, "910970b30e3c320a", "d9275616dfef0368",
     ("f553770727f77d64", "e13827755d99c76a", "09a99492748bbff7")),
    ("laws_ablations/vit-pre-ln.toml", 120, "e149f068560d7916", "57fe797387b5e49d",
     ("73ee189e3f197609", "5124232950fcdda1", "579fc8c829495d45")),
    ("laws_table1_cnn1d.toml", 288, "0a0ca8fc2ab6e906", "97ecdfb5cab50394",
     ("6f23ffaecbc4868c", "3143b2489b3585b7", "966fd15c66a9e097")),
    ("laws_table1_cnn2d.toml", 180, "4546c714be1fd2ad", "fa3d04946658f0c3",
     ("2bdaca37f53dde07", "7c0fa9e7985b53e3", "5a4067f5c9b1d182")),
    ("laws_table1_convresnet1d.toml", 180, "90475ac18d4cd8a2", "cc2dbcd3e09d1621",
     ("7c6a1168c561c2a2", "ad31c158307c2465", "7b8fc11595baa841")),
    ("laws_table1_vit.toml", 180, "4adf569564992879", "1bb3d0805a88c484",
     ("eaa4e76b929d6ae2", "73c07310013d55d0", "6d17b64dd1010ca5")),
    ("laws_widths/w16.toml", 80, "51ebcd2c8914eb9d", "f5a59d3e03fa5e79",
     ("b0b0fac661742f32", "0174e293c97a796a", "6268f022145183d2")),
    ("laws_widths/w32.toml", 80, "acd21e3dcb8242f5", "19944626487d81fe",
     ("dbf45ef2d2076f9c", "c02ba18c567bd0db", "879fc8488b7d379d")),
    ("laws_widths/w64.toml", 80, "e09258eba973c658", "c4abbc0c38e44b0b",
     ("84653f9560e1bef5", "f7e46378b914f255", "671e788e6771f030")),
    ("nfd_fig2.toml", 21, "d816e56ad35ee65b", "25bdd84b3afbb5eb",
     ("e76f21cfabc32514", "c62d3719a28b3b26", "52fd082b1945bb26")),
    ("nfd_transfer.toml", 72, "5e643791b487326f", "8d5e37b93f98f1b9",
     ("1c17b7ebb64d6159", "ad42e1539d140b26", "5579919ee9fcf7e1")),
    ("quick_resnet_depth_lr.toml", 30, "82d9ed886db6ce83", "ffc01e3483df3379",
     ("59594e99aa30d8b3", "e3e69f8f1339e0b6", "38be9aabcf99bfd1")),
]


def _digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def _stored(run: RunSpec) -> str:
    """The spec JSON a store writes for ``run`` (``data_dir`` is per machine: left out)."""
    d = {**run.to_dict(), "data_dir": None}
    return json.dumps(d, sort_keys=True, separators=(",", ":"), allow_nan=False)


def test_every_example_spec_is_pinned() -> None:
    found = sorted(p.relative_to(EXAMPLES).as_posix() for p in EXAMPLES.rglob("*.toml"))
    assert found == sorted(name for name, *_ in GOLDEN)


@pytest.mark.parametrize(("name", "n_runs", "ids_digest", "json_digest", "first"), GOLDEN,
                         ids=[g[0] for g in GOLDEN])
def test_example_run_ids_are_unchanged(name: str, n_runs: int, ids_digest: str,
                                       json_digest: str, first: tuple[str, ...]) -> None:
    runs = expand(load_study(EXAMPLES / name))
    ids = [run_id(r) for r in runs]
    assert len(ids) == n_runs
    assert tuple(ids[:3]) == first
    assert _digest(sorted(ids)) == ids_digest
    assert _digest([_stored(r) for r in runs]) == json_digest
    assert [RunSpec.from_dict(json.loads(_stored(r))) for r in runs] == runs


EDGE = """
[study]
name = "golden-edge"
model = "resnet1"
dataset = "mnist1d"
[roles]
"blocks.*.fc2.weight" = "hidden"
[plan]
T = 2.0
[train]
steps = 5
batch_size = 16
final_eval = "test"
[grid]
recipe = ["laws", "completep"]
width = [8]
depth = [2, 4]
seed = [0]
optimizer = ["sgd", "adam"]
lr = { logspace = [-3, -1, 3] }
[grid.model]
activation = ["relu", "tanh"]
[grid.data]
n_train = [64]
"""


def _edge_runs() -> list[RunSpec]:
    """EDGE's runs with a momentum axis [0.0, 0.9] after the optimizer's: the ids of these 96
    runs are the golden ones; the spec reader now refuses momentum with adam, so the axis is
    put in after reading (expansion and ids do not validate)."""
    spec = parse_study(EDGE)
    grid = list(spec.grid)
    grid.insert([k for k, _ in grid].index("optimizer") + 1, ("momentum", (0.0, 0.9)))
    return expand(dataclasses.replace(spec, grid=tuple(grid)))


def test_optional_identity_parts_and_row_order_are_unchanged() -> None:
    runs = _edge_runs()
    ids = [run_id(r) for r in runs]
    assert len(ids) == 96 and _digest(sorted(ids)) == "f9d381791d2854fb"
    assert ids[:3] == ["0e9001bffafb29a0", "16cb04f0306e5b98", "9ab1b7760b59b2dd"]
    assert json.loads(_stored(runs[0])) == {
        "batch_size": 16, "data_dir": None, "data_options": {"n_train": 64},
        "dataset": "mnist1d", "depth": 2, "device": "cpu", "epochs": None, "eval_every": 0,
        "final_eval": "test", "loss": "ce", "lr": 0.001, "model": "resnet1",
        "model_options": {"activation": "relu"}, "momentum": 0.0, "optimizer": "sgd",
        "plan_options": {"T": 2.0}, "recipe": "laws",
        "roles": [["blocks.*.fc2.weight", "hidden"]], "seed": 0, "steps": 5,
        "weight_decay": 0.0, "width": 8,
    }
    # the flat row's column order (CSV/Parquet exports, RunRecord rows)
    assert list(runs[0].flat()) == [
        "model", "recipe", "dataset", "width", "depth", "lr", "seed", "optimizer", "steps",
        "epochs", "batch_size", "loss", "momentum", "weight_decay", "device", "eval_every",
        "final_eval", "model.activation", "plan.T", "data.n_train", "data_dir",
    ]

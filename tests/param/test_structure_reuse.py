"""The structure inspect found, reused (issue 41 item 4): ``plan(recipe, structure)`` takes the
width and depth from it and ``plan.apply(model, structure=st, example_input=x)`` uses it instead
of reading the model again. The result is bit for bit the one of a plan applied with the
example input alone; a structure from another model, from the model at another size or without
the example input apply still measures with is refused before anything is changed."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from plain_torch_models import GPT, resnet
from torch import nn

from depthscale.errors import ConfigError
from depthscale.models import create
from depthscale.param import PlanState, Structure, inspect, plan

apply_module = importlib.import_module("depthscale.param.apply")

V, CTX = 50, 16


def _ids() -> torch.Tensor:
    return torch.randint(0, V, (4, CTX), generator=torch.Generator().manual_seed(0))


def _images() -> torch.Tensor:
    return torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))


#: name -> (builder, example input, (width, depth) inspect finds)
MODELS: dict[str, tuple[Callable[[], nn.Module], Callable[[], torch.Tensor], tuple[int, int]]] = {
    "depthscale-gpt": (lambda: create("gpt", input_shape=(CTX,), n_out=V, width=32, depth=2),
                       _ids, (32, 4)),
    "depthscale-convresnet": (
        lambda: create("convresnet2d", input_shape=(3, 16, 16), n_out=10, width=16, depth=3),
        _images, (16, 3)),
    "plain-gpt": (lambda: GPT(V, 32, 3, CTX), _ids, (32, 6)),
    "plain-resnet": (resnet, _images, (16, 3)),
}


def _built(name: str, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return MODELS[name][0]()


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of times apply inspects a model (the module attribute it calls)."""
    calls = [0]
    real = apply_module.inspect

    def counting(model: nn.Module, example_input: Any) -> Structure:
        calls[0] += 1
        return real(model, example_input)

    monkeypatch.setattr(apply_module, "inspect", counting)
    return calls


def _planned_values(model: nn.Module) -> dict[str, Any]:
    """Every value a plan sets: parameters and buffers, forward multipliers, attention scales."""
    out: dict[str, Any] = {k: v.clone() for k, v in model.state_dict().items()
                           if isinstance(v, torch.Tensor)}
    for name, m in model.named_modules():
        for attr in ("multiplier", "attention_scale", "scaling"):
            if isinstance(vars(m).get(attr), float):
                out[f"{name}.{attr}"] = vars(m)[attr]
    return out


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(
        torch.equal(a[k], b[k]) if isinstance(a[k], torch.Tensor) else a[k] == b[k] for k in a)


@pytest.mark.parametrize("name", MODELS)
def test_apply_with_the_structure_is_bit_identical_and_reads_the_model_once_fewer(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    x = MODELS[name][1]()
    calls = _counted(monkeypatch)
    read = _built(name)
    plan("completep", width=MODELS[name][2][0], depth=MODELS[name][2][1]).apply(
        read, example_input=x, seed=3)
    assert calls == [1]

    given = _built(name)
    st = inspect(given, x)
    assert (st.width, st.depth) == MODELS[name][2]
    p = plan("completep", st)
    calls[0] = 0
    assert p.apply(given, structure=st, example_input=x, seed=3) is given
    assert calls == [0]  # no attention attribute to measure again: the model is not read
    assert _same(_planned_values(read), _planned_values(given))
    state = PlanState.of(given)
    assert state is not None and state == PlanState.of(read)
    assert state.roles == st.roles


def test_plan_from_the_structure_equals_the_plan_from_its_sizes() -> None:
    st = inspect(_built("plain-gpt"), _ids())
    assert (st.width, st.depth) == (32, 6)
    for recipe in ("completep", "mup", "depth-mup", "sp"):
        assert plan(recipe, st) == plan(recipe, width=32, depth=6)
        assert plan(recipe, structure=st, width=32, depth=6, T=2.0) == plan(
            recipe, width=32, depth=6, T=2.0)


def test_sizes_that_disagree_with_the_structure_are_refused_naming_both() -> None:
    st = inspect(_built("plain-gpt"), _ids())
    with pytest.raises(ConfigError, match=r"width=48 but the structure has width 32 .*leave "
                                          r"width out"):
        plan("completep", st, width=48)
    with pytest.raises(ConfigError, match=r"depth=3 but the structure has 6 residual branches"):
        plan("completep", st, depth=3)
    with pytest.raises(ConfigError, match=r"width must be a whole number >= 1, got '32'"):
        plan("completep", st, width="32")  # type: ignore[arg-type]


def test_without_a_structure_width_and_depth_are_required() -> None:
    with pytest.raises(ConfigError, match=r"plan\(\) needs width= and depth=: .*"
                                          r"structure=ds\.param\.inspect\(model, x\)"):
        plan("mup")
    with pytest.raises(ConfigError, match=r"plan\(\) needs depth=:"):
        plan("mup", width=32)
    with pytest.raises(ConfigError, match=r"plan\(\) needs width=: the model's width n"):
        plan("mup", width=None, depth=4)
    with pytest.raises(ConfigError, match=r"structure must be the Structure "
                                          r"ds\.param\.inspect\(model, x\) returns, got a dict"):
        plan("mup", {"width": 32, "depth": 2})  # type: ignore[arg-type]


def test_a_structure_without_branches_gives_a_width_only_plan() -> None:
    """Depth 0 (no residual addition): depth=1 unless given, as plan's depth=0 message says;
    a given depth is kept (a plain net's rules do not depend on it), depth=0 still refused."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                        nn.Linear(32, 3))
    x = torch.randn(4, 10)
    st = inspect(net, x)
    assert (st.width, st.depth) == (32, 0)
    assert plan("mup", st) == plan("mup", width=32, depth=1)
    assert plan("mup", st, depth=3) == plan("mup", width=32, depth=3)
    with pytest.raises(ConfigError, match="pass depth=1: its rules do not depend on depth"):
        plan("mup", st, depth=0)
    ref = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                        nn.Linear(32, 3))
    ref.load_state_dict(net.state_dict())
    plan("mup", width=32, depth=1).apply(ref, example_input=x, seed=1)
    plan("mup", st).apply(net, structure=st, example_input=x, seed=1)
    assert _same(_planned_values(ref), _planned_values(net))
    # a depthscale plain MLP states its own depth (its hidden layers): the plan takes it
    mlp = create("mlp", input_shape=(10,), n_out=3, width=16, depth=3)
    mst = inspect(mlp, x)
    assert (mst.width, mst.depth) == (16, 0)
    with pytest.raises(ConfigError, match=r"plan_depth is 3 .*plan\('mup', width=16, depth=3"):
        plan("mup", mst).apply(mlp, structure=mst, example_input=x)
    plan("mup", mst, depth=3).apply(mlp, structure=mst, example_input=x)


def test_a_structure_from_another_model_is_refused_before_anything_changes() -> None:
    x = _images()
    model = _built("plain-resnet")
    before = _planned_values(model)
    p = plan("completep", width=16, depth=3)
    other = inspect(_built("depthscale-convresnet"), x)
    with pytest.raises(ConfigError, match=r"the structure is not this Sequential's: it names "
                                          r"\d+ parameters the model lacks \(.*\); it leaves out "
                                          r"\d+ the model has .*leave structure= out"):
        p.apply(model, structure=other, example_input=x)
    small = inspect(_built("plain-gpt"), _ids())
    wide = GPT(V, 64, 3, CTX)
    with pytest.raises(ConfigError, match=r"read from a GPT of another size \(width 32\): its "
                                          r"wte\.weight has shape \(50, 32\), this model's "
                                          r"\(50, 64\) \(\d+ parameters differ\)"):
        plan("completep", width=64, depth=6).apply(wide, structure=small, example_input=_ids())
    with pytest.raises(ConfigError, match=r"structure= must be the Structure .* got a dict"):
        p.apply(model, structure={"width": 16}, example_input=x)  # type: ignore[arg-type]
    own = inspect(model, x)
    with pytest.raises(ConfigError, match=r"structure= needs example_input= too .*pass "
                                          r"example_input=x"):
        p.apply(model, structure=own)
    assert _same(before, _planned_values(model))
    assert PlanState.of(model) is None


def test_a_structure_of_the_module_inside_a_wrapper() -> None:
    """apply reads the module inside a DataParallel/compile wrapper: the structure is that
    module's; one read through the wrapper (names prefixed ``module.``) says so."""
    x = _images()
    read, given = nn.DataParallel(_built("plain-resnet")), nn.DataParallel(_built("plain-resnet"))
    plan("completep", width=16, depth=3).apply(read, example_input=x, seed=2)
    st = inspect(given.module, x)
    plan("completep", st).apply(given, structure=st, example_input=x, seed=2)
    assert _same(_planned_values(read), _planned_values(given))
    with pytest.raises(ConfigError, match=r"read from the wrapper around this Sequential .*"
                                          r"'module\.'.*ds\.param\.inspect\(model\.module, x\)"):
        plan("completep", st).apply(given, structure=inspect(given, x), example_input=x)


def _opt() -> nn.Module:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = transformers.OPTConfig(
            attn_implementation="sdpa", vocab_size=V, hidden_size=32, word_embed_proj_dim=32,
            num_hidden_layers=2, ffn_dim=128, num_attention_heads=2, max_position_embeddings=CTX,
            dropout=0.0, attention_dropout=0.0, pad_token_id=0, bos_token_id=0, eos_token_id=0)
        return transformers.OPTForCausalLM(cfg)


def test_an_attention_attribute_is_still_measured_again_and_a_structure_stays_current(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """OPT holds its scale in ``scaling`` (q * head_dim^-0.5): apply sets it and measures the
    changed model again (that read stays), so the structure saves the first read only. Read
    before apply, the structure follows the attribute: applying again with it, or measuring
    with it, sees the scale apply set."""
    from depthscale.param.given import current

    x = {"input_ids": _ids()}
    calls = _counted(monkeypatch)
    read, given = _opt(), _opt()
    plan("mup", width=32, depth=4).apply(read, example_input=x)
    assert calls == [2]
    st = inspect(given, x)
    assert [c.value for c in st.attention] == pytest.approx([16 ** -0.5] * 2)
    calls[0] = 0
    plan("mup", st).apply(given, structure=st, example_input=x)
    assert calls == [1]
    assert _same(_planned_values(read), _planned_values(given))
    assert given.model.decoder.layers[0].self_attn.scaling == pytest.approx(1 / 16)
    now = current(st, given)
    assert now == apply_module.inspect(given, x)
    assert [c.effective_scale for c in now.attention] == pytest.approx([1 / 16] * 2)
    plan("sp", st).apply(given, structure=st, example_input=x)  # the attribute changes back
    assert given.model.decoder.layers[1].self_attn.scaling == pytest.approx(16 ** -0.5)
    assert current(st, given) == st


FACTORY = '''
from torch import nn


class Net(nn.Module):
    def __init__(self, d_in, n_out, width, depth):
        super().__init__()
        self.inp, self.out = nn.Linear(d_in, width), nn.Linear(width, n_out)
        self.blocks = nn.ModuleList(nn.Sequential(nn.LayerNorm(width), nn.Linear(width, width))
                                    for _ in range(depth))

    def forward(self, x):
        h = self.inp(x)
        for block in self.blocks:
            h = h + block(h)
        return self.out(h)


def make(input_shape, n_out, width, depth):
    return Net(input_shape[0], n_out, width, depth)
'''


def test_build_gives_apply_the_structure_it_read(tmp_path: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``depthscale.models.build`` inspects a user's model to size its plan, then applies the
    plan with that structure: apply does not read the model again."""
    from depthscale.models import build

    (tmp_path / "reuse_factory.py").write_text(FACTORY)
    monkeypatch.syspath_prepend(str(tmp_path))
    calls = _counted(monkeypatch)
    x = torch.randn(8, 6, generator=torch.Generator().manual_seed(0))
    model, p = build("reuse_factory:make", "completep", input_shape=(6,), n_out=3, width=16,
                     depth=3, example_input=x)
    assert calls == [0]
    assert (p.width, p.depth) == (16, 3)
    state = PlanState.of(model)
    assert state is not None and state.roles == inspect(model, x).roles

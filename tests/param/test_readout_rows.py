"""Readout-like row blocks of one weight (issue 40: Mamba's x_proj, whose output is split into
dt, which grows with width, and B, C, which do not). muP scales a matrix by whether each
dimension grows (TP-V Table 3): rows whose number stays fixed while the fan-in grows take the
output rule's SGD LR relative to the hidden one (x 1/fan_in; the Adam LR is the same), frozen
at the base width: their gradient x base/n under muP-family recipes, x 1 under SP. Their init
stays the role's: Mamba's C . B would vanish as 1/n under the output init. The blocks come
from the split of the weight's output in the forward, compared with the model at another
width (or guessed from the sizes, with a warning). Values are exact: every other row and
parameter is bit for bit that of a plan without the rows."""

from __future__ import annotations

import copy
import pickle
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from depthscale.errors import ConfigError
from depthscale.param import Plan, inspect, plan
from depthscale.param.evaluate import evaluate
from depthscale.param.usage import Usage
from depthscale.param.widths import auto_base

STATE = 8


class SplitNet(nn.Module):
    """An input layer, one branch x + out(tanh(u) * mean(b)) where ``proj(x)`` is split into u
    (``n`` rows, growing with width) and b (:data:`STATE` rows, fixed), and a head."""

    def __init__(self, n: int, split: bool = True) -> None:
        super().__init__()
        self.n, self.split = n, split
        with torch.random.fork_rng(devices=[]):  # the same model at every build
            torch.manual_seed(n)
            self.embed = nn.Linear(4, n)
            self.proj = nn.Linear(n, n + STATE, bias=False)
            self.out = nn.Linear(n, n, bias=False)
            self.head = nn.Linear(n, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        y = self.proj(h)
        if self.split:
            u, b = y.split([self.n, STATE], dim=-1)
        else:  # the same values, cut by two slices: no split is recorded
            u, b = y[..., :self.n], y[..., self.n:]
        return self.head(h + self.out(torch.tanh(u) * b.mean(-1, keepdim=True)))


X = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
Y = torch.tensor([0, 1, 2, 0, 1, 2])


def _planned(model: nn.Module, width: int, **apply: object) -> tuple[Plan, list[str]]:
    p = plan("completep", width=width, depth=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p.apply(model, example_input=X, seed=3, **apply)  # type: ignore[arg-type]
    return p, [str(w.message) for w in caught if "NOT growing" in str(w.message)]


def _grads(model: nn.Module) -> dict[str, torch.Tensor]:
    model.zero_grad()
    F.cross_entropy(model(X), Y).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_inspect_records_the_row_blocks_a_split_cuts_a_weight_into() -> None:
    assert inspect(SplitNet(32), X).splits == {"proj.weight": ((0, 32), (32, 32 + STATE))}
    assert inspect(SplitNet(32, split=False), X).splits == {}


def test_base_finds_the_fixed_rows_and_scales_their_gradient_exactly() -> None:
    """base= at width 16 for a model at 32: the 8 b rows stay 8 while the fan-in doubles, so
    under CompleteP their gradient is x 16/32 (muP's output SGD LR 1/fan_in against the
    hidden 1); the init and every other value are those of a plan without rows."""
    n = 32
    model, same = SplitNet(n), SplitNet(n)
    p, said = _planned(model, n, base=SplitNet(16))
    _planned(same, n, base=SplitNet(n))  # a base at the same width: every rule its own
    assert said == []
    (spec,) = [s for s in p.resolve(model) if s.name == "proj.weight"]
    assert spec.rows == ((n, n + STATE),) and spec.rows_scale == pytest.approx(0.5, rel=1e-12)
    for name, q in same.named_parameters():
        assert torch.equal(q, dict(model.named_parameters())[name]), name
    g, g0 = _grads(model), _grads(same)
    assert torch.equal(g["proj.weight"][:n], g0["proj.weight"][:n])
    assert torch.equal(g["proj.weight"][n:], g0["proj.weight"][n:] * 0.5)
    assert g["proj.weight"][n:].abs().sum() > 0
    assert all(torch.equal(g[k], g0[k]) for k in g if k != "proj.weight")


def test_an_sgd_step_moves_the_fixed_rows_at_the_scaled_lr() -> None:
    """Under SGD the gradient scale is the rows' LR: one step moves them by lr c 0.5 g."""
    n = 32
    model = SplitNet(n)
    p, _ = _planned(model, n, base=SplitNet(16))
    model.double()
    opt = p.optimizer(model, "sgd", lr=0.1)
    same = SplitNet(n).double()  # never planned (no hook): its gradient is the unscaled one
    same.load_state_dict(model.state_dict(), strict=False)
    before = model.proj.weight.detach().clone()
    model.zero_grad()
    F.cross_entropy(model(X.double()), Y).backward()
    F.cross_entropy(same(X.double()), Y).backward()
    opt.step()
    (spec,) = [s for s in p.resolve(model) if s.name == "proj.weight"]
    moved = before - model.proj.weight.detach()
    raw = same.proj.weight.grad
    assert raw is not None
    # a step is the difference of two weights of size 0.2: float64 keeps it to 1e-16
    assert torch.allclose(moved[:n], 0.1 * spec.c_sgd * raw[:n], rtol=1e-9, atol=1e-15)
    assert torch.allclose(moved[n:], 0.1 * spec.c_sgd * spec.rows_scale * raw[n:], rtol=1e-9,
                          atol=1e-15)


def test_without_base_the_rows_are_guessed_from_their_sizes_and_named() -> None:
    n = 32
    model = SplitNet(n)
    p, said = _planned(model, n)
    assert len(said) == 1 and f"proj.weight (output rows {n}:{n + STATE}" in said[0]
    (spec,) = [s for s in p.resolve(model) if s.name == "proj.weight"]
    assert spec.rows_scale == pytest.approx(1 / n, rel=1e-12)  # frozen at n = 1: muP's own
    assert "readout-like" in p.explain(model)


def test_auto_base_finds_the_rows_without_a_warning() -> None:
    n = 32
    model = SplitNet(n)
    with auto_base(lambda: SplitNet(2 * n)):
        p, said = _planned(model, n)
    assert said == []
    (spec,) = [s for s in p.resolve(model) if s.name == "proj.weight"]
    assert spec.rows == ((n, n + STATE),) and spec.rows_scale == pytest.approx(1 / n, rel=1e-12)


@pytest.mark.parametrize(("recipe", "want"), [("sp", 1.0), ("laws", 1.0), ("mup", 0.25),
                                              ("depth-mup", 0.25), ("completep", 0.25)])
def test_the_rows_scale_is_the_recipes_output_rule_against_the_roles(recipe: str,
                                                                     want: float) -> None:
    """Width 64 against a base at 16: muP-family recipes scale SGD's output step 1/n against
    the hidden one, 16/64; recipes without width factors (SP, laws) leave the rows as they are.
    Their Adam LRs of the two rules differ by no width factor, which the gradient scale
    (invisible to Adam) relies on."""
    model = SplitNet(64)
    p = plan(recipe, width=64, depth=1)
    p.apply(model, example_input=X, seed=0, base=SplitNet(16))
    (spec,) = [s for s in p.resolve(model) if s.name == "proj.weight"]
    assert spec.rows_scale == pytest.approx(want, rel=1e-12)
    adam = {}
    for n in (16, 64):
        q = plan(recipe, width=n, depth=1)
        out = evaluate(q, "w", "output", (8, n), n)
        own = evaluate(q, "w", "branch_in", (8, n), n)
        assert out.c_adam is not None and own.c_adam is not None
        adam[n] = (out.a * out.c_adam) / (own.a * own.c_adam)
    assert adam[64] == pytest.approx(adam[16], rel=1e-12)


def test_rows_that_grow_are_not_scaled() -> None:
    """A split whose every block grows (a fused projection's halves) has no fixed rows."""

    class Halves(nn.Module):
        def __init__(self, n: int) -> None:
            super().__init__()
            self.embed, self.proj = nn.Linear(4, n), nn.Linear(n, 2 * n)
            self.out, self.head = nn.Linear(n, n), nn.Linear(n, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.embed(x)
            a, b = self.proj(h).chunk(2, dim=-1)
            return self.head(h + self.out(a * torch.sigmoid(b)))

    p = plan("completep", width=32, depth=1)
    model = Halves(32)
    p.apply(model, example_input=X, seed=0, base=Halves(16))
    assert all(s.rows == () for s in p.resolve(model))


def test_the_gradient_scale_survives_deepcopy_pickling_and_a_checkpoint_reload() -> None:
    n = 32
    model, plain = SplitNet(n), SplitNet(n)
    p, _ = _planned(model, n, base=SplitNet(16))
    _planned(plain, n, base=SplitNet(n))
    plain.load_state_dict(model.state_dict())  # the record too: its rows get their hook
    copies = [copy.deepcopy(model), pickle.loads(pickle.dumps(model)), plain]
    want = _grads(model)["proj.weight"]
    for other in copies:
        assert torch.equal(_grads(other)["proj.weight"], want)
    p.apply(model, example_input=X, seed=3, base=SplitNet(n))  # re-planned without rows
    unplanned = SplitNet(n)  # no hook: the unscaled gradient of the same weights
    unplanned.load_state_dict(model.state_dict(), strict=False)
    assert torch.equal(_grads(model)["proj.weight"], _grads(unplanned)["proj.weight"])


def test_a_stored_usage_with_rows_but_no_base_is_refused() -> None:
    assert Usage.from_json({"rows": [[4, 8]], "base": 16}).rows == ((4, 8),)
    for bad in ({"rows": [[4, 8]]}, {"rows": [[8, 4]], "base": 16}, {"rows": 3, "base": 16}):
        with pytest.raises(ConfigError, match="usage entry"):
            Usage.from_json(bad)

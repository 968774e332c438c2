"""Each rule-table formula is written once, as text, and compiled into what evaluates it
(``param/expr.py``). Every formula of every rule of every recipe (with the derived SGD weight
decay 1/c and the attention scale) is checked against a function written here by hand, on
random sizes; a formula the table gains without an expectation here fails the test."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

from depthscale.param.expr import SYMBOLS, Dims, Expr, compile_formula
from depthscale.param.rules import RECIPES

F = Callable[[Dims], float]
sqrt = math.sqrt

# text -> the formula by hand. ``alpha`` is nfd Eq. 1's output scale (Dims.output_alpha) except
# in chizat's sigma_v = alpha sqrt(D) (Dims.alpha, D the width); chizat's 1/D reads the fan-in.
EXPECTED: dict[str, F] = {
    "0": lambda d: 0.0,
    "1": lambda d: 1.0,
    "0.02": lambda d: 0.02,
    "n": lambda d: d.n,
    "1/n": lambda d: 1 / d.n,
    "sqrt(n)": lambda d: sqrt(d.n),
    "1/sqrt(n)": lambda d: 1 / sqrt(d.n),
    "1/sqrt(fan_in)": lambda d: 1 / sqrt(d.fan_in),
    "1/sqrt(d)": lambda d: 1 / sqrt(d.fan_in),
    "1/sqrt(d_head)": lambda d: 1 / sqrt(d.d_head),
    "1/d_head": lambda d: 1 / d.d_head,
    "alpha/sqrt(n)": lambda d: d.output_alpha / sqrt(d.n),
    "alpha/sqrt(n d)": lambda d: d.output_alpha / sqrt(d.n * d.fan_in),
    "alpha/sqrt(n fan_in)": lambda d: d.output_alpha / sqrt(d.n * d.fan_in),
    "alpha sqrt(T/(L n fan_in))": lambda d: sqrt(d.T / d.L) * d.output_alpha
    / sqrt(d.n * d.fan_in),
    "alpha sqrt(T/(L n))": lambda d: sqrt(d.T / d.L) * d.output_alpha / sqrt(d.n),
    "alpha (T/L)/sqrt(n fan_in)": lambda d: d.T / d.L * d.output_alpha / sqrt(d.n * d.fan_in),
    "alpha (T/L)/sqrt(n)": lambda d: d.T / d.L * d.output_alpha / sqrt(d.n),
    "sqrt(T/(L fan_in))": lambda d: sqrt(d.T / (d.L * d.fan_in)),
    "sqrt(T/(L n))": lambda d: sqrt(d.T / (d.L * d.n)),
    "sqrt(L n/T)": lambda d: sqrt(d.L * d.n / d.T),
    "sqrt(T/L)": lambda d: sqrt(d.T / d.L),
    "sqrt(T/n)": lambda d: sqrt(d.T / d.n),
    "sqrt(n/T)": lambda d: sqrt(d.n / d.T),
    "(T/L)/sqrt(fan_in)": lambda d: d.T / d.L / sqrt(d.fan_in),
    "T/L": lambda d: d.T / d.L,
    "L/T": lambda d: d.L / d.T,
    "n T/L": lambda d: d.n * d.T / d.L,
    "n L/T": lambda d: d.n * d.L / d.T,
    "L/(n T)": lambda d: d.L / (d.n * d.T),
    "T/(n L)": lambda d: d.T / (d.n * d.L),
    "n sqrt(L)": lambda d: d.n * sqrt(d.L),
    "1/(n sqrt(L))": lambda d: 1 / (d.n * sqrt(d.L)),
    "1/D": lambda d: 1 / d.fan_in,
    "alpha sqrt(D)": lambda d: d.alpha * sqrt(d.n),
    "sigma_u": lambda d: d.sigma_u,
    "L M": lambda d: d.L * d.M,
    "1/(L M)": lambda d: 1 / (d.L * d.M),
    "L M eta_u_scale": lambda d: d.L * d.M * d.eta_u_scale,
    "1/(L M eta_u_scale)": lambda d: 1 / (d.L * d.M * d.eta_u_scale),
    "1/sqrt(q fan_in)": lambda d: 1 / sqrt(d.q * d.fan_in),
    "1/sqrt(q K fan_in)": lambda d: 1 / sqrt(d.q * d.L * d.fan_in),
    "1/sqrt(K)": lambda d: 1 / sqrt(d.L),
}


def _table() -> list[tuple[str, Expr]]:
    """(where, formula) for every formula of the rule table."""
    out = []
    for name, recipe in RECIPES.items():
        out.append((f"{name} attention", recipe.attention))
        for role, rule in recipe.rules.items():
            for part in ("a", "b", "c_sgd", "c_adam", "eps", "wd_adam", "wd_sgd"):
                expr = getattr(rule, part)
                if expr is not None:
                    out.append((f"{name} {role}.{part}", expr))
    return out


def _random_dims(rng: random.Random) -> Dims:
    return Dims(n=rng.choice([rng.randint(1, 4096), rng.uniform(0.5, 5000.0)]),
                L=rng.choice([rng.randint(1, 256), rng.uniform(0.5, 300.0)]),
                fan_in=rng.randint(1, 5000), T=rng.choice([1.0, rng.uniform(0.1, 10.0)]),
                M=rng.randint(1, 64), q=rng.uniform(0.1, 1.0), alpha=rng.uniform(0.1, 3.0),
                output_alpha=rng.uniform(0.01, 2.0), sigma_u=rng.uniform(0.1, 50.0),
                eta_u_scale=rng.uniform(0.1, 4.0), d_head=rng.randint(1, 256))


def test_every_formula_of_the_table_has_an_expectation() -> None:
    missing = sorted({e.text for _, e in _table()} - set(EXPECTED))
    assert not missing, f"formulas without a hand-written expectation: {missing}"


def test_every_formula_of_every_recipe_evaluates_as_written_by_hand() -> None:
    rng = random.Random(0)
    table = _table()
    assert len(table) > 300
    for _ in range(200):
        d = _random_dims(rng)
        for where, expr in table:
            want = EXPECTED[expr.text](d)
            assert expr(d) == pytest.approx(want, rel=1e-13, abs=0), (where, expr.text)


def test_the_sgd_weight_decay_is_exactly_one_over_the_sgd_lr() -> None:
    """Rule.wd_sgd is derived (1/c_sgd), so the per-step shrink lr c wd is the same bits."""
    rng = random.Random(1)
    for _ in range(50):
        d = _random_dims(rng)
        for recipe in RECIPES.values():
            for rule in recipe.rules.values():
                assert rule.wd_sgd(d) == 1 / rule.c_sgd(d)


@pytest.mark.parametrize(("text", "value"), [
    ("n L/T", 8 * 3 / 2),  # juxtaposition and / at one precedence, left to right
    ("n sqrt(L)", 8 * math.sqrt(3)),
    ("1/(n T)", 1 / 16),
    ("(T/L)/sqrt(fan_in)", (2 / 3) / 5),
    ("n^2 L", 64 * 3),  # ^ binds tighter than juxtaposition
    ("n**2/L", 64 / 3),
    ("L^-1", 1 / 3),
    ("2^3^2", 2 ** 9),  # right to left
    ("-n T", -16),
    ("0.5 n", 4.0),
    ("  n  ", 8),
])
def test_the_grammar(text: str, value: float) -> None:
    d = Dims(n=8, L=3, fan_in=25, T=2.0)
    assert compile_formula(text)(d) == pytest.approx(value, rel=1e-15)


def test_where_rebinds_a_symbol() -> None:
    d = Dims(n=8, L=3, fan_in=25, alpha=2.0, output_alpha=0.5)
    assert Expr("1/D")(d) == 1 / 8 and Expr("1/D", (("D", "fan_in"),))(d) == 1 / 25
    assert Expr("alpha")(d) == 0.5 and Expr("alpha", (("alpha", "alpha"),))(d) == 2.0
    assert set(SYMBOLS.values()) <= set(Dims.__dataclass_fields__)


@pytest.mark.parametrize(("text", "says"), [
    ("n + L", "'+'"),
    ("log(n)", "unknown name 'log'"),
    ("width", "unknown name 'width'"),
    ("sqrt(n", "expected ')'"),
    ("n)", "unexpected ')'"),
    ("n /", "found 'the end'"),
    ("", "found 'the end'"),
])
def test_what_the_grammar_refuses(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=r"formula .*position") as err:
        compile_formula(text)
    assert says in str(err.value)
    with pytest.raises(ValueError):
        compile_formula("n", {"n": "width"})  # not a Dims field

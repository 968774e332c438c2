"""Rule-table formulas: the text a recipe writes, compiled once into the function that evaluates
it, so every formula of :mod:`depthscale.param.rules` is written once (nfd Eq. 1, 6, 8; laws
Sec. 3.1; chizat Eq. 24-25 are all written in this notation).

The grammar is the table's notation, read as a person reads it:

* numbers (``1``, ``0.02``) and names of the sizes (:data:`SYMBOLS`: ``n``, ``L``, ``K``,
  ``T``, ``fan_in``, ``d_head``, ...);
* ``*`` and ``/``, and *juxtaposition* as multiplication (``n sqrt(L)`` is ``n * sqrt(L)``),
  all at one precedence, left to right: ``n L/T`` is ``(n L)/T``;
* ``^`` or ``**`` (binding tighter, right to left), a unary minus, ``sqrt(...)`` and
  parentheses.

Anything else (another function, an unknown name, a stray character) is a ``ValueError`` naming
the text and the position, raised when the table is built.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

__all__ = ["SYMBOLS", "Dims", "Expr", "compile_formula"]


@dataclass(frozen=True)
class Dims:
    """The sizes a rule is evaluated on: the plan's settings plus one parameter's fan-in."""

    n: float
    L: float
    fan_in: int = 1
    T: float = 1.0
    M: int = 1
    q: float = 0.5
    alpha: float = 1.0  # mean-ode: sigma_v = alpha sqrt(D)
    output_alpha: float = 1.0  # nfd Eq. 1: alpha = 1/sqrt(n) (feature learning) or 1 (kernel)
    sigma_u: float = 1.0
    eta_u_scale: float = 1.0
    d_head: int = 1


#: The names a formula may use and the :class:`Dims` field each reads. ``K`` (laws: residual
#: blocks) is ``L``; ``d`` (nfd Eq. 1: the input dimension) is the fan-in; ``alpha`` is nfd
#: Eq. 1's output scale; ``D`` (chizat: the width) is ``n``. A formula whose symbol means
#: something else binds it with ``where`` (chizat's ``alpha`` is its sigma_v scale).
SYMBOLS: dict[str, str] = {
    "n": "n", "D": "n", "L": "L", "K": "L", "T": "T", "M": "M", "q": "q",
    "fan_in": "fan_in", "d": "fan_in", "alpha": "output_alpha", "sigma_u": "sigma_u",
    "eta_u_scale": "eta_u_scale", "d_head": "d_head",
}

Fn = Callable[[Dims], float]
_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d*)?)|([A-Za-z_]\w*)|(\*\*|[*/^()-]))")
_OPS: dict[str, Callable[[float, float], float]] = {
    "*": operator.mul, "/": operator.truediv, "^": operator.pow, "**": operator.pow,
}


def _binary(op: Callable[[float, float], float], left: Fn, right: Fn) -> Fn:
    return lambda d: op(left(d), right(d))


class _Parser:
    """Recursive descent over the tokens of one formula (module docstring's grammar)."""

    def __init__(self, text: str, names: dict[str, str]) -> None:
        self.text, self.names = text, names
        self.tokens: list[tuple[str, str, int]] = []  # (kind, token, position)
        pos, end = 0, len(text.rstrip())
        while pos < end:
            m = _TOKEN.match(text, pos)
            if m is None:
                self._fail(f"unexpected {text[pos:].strip()[:1]!r}", pos)
            kind = "num" if m.group(1) else "name" if m.group(2) else "op"
            self.tokens.append((kind, m.group(m.lastindex or 0), m.start(m.lastindex or 0)))
            pos = m.end()
        self.i = 0

    def _fail(self, what: str, pos: int) -> NoReturn:
        raise ValueError(f"formula {self.text!r}: {what} at position {pos}")

    def _peek(self) -> tuple[str, str, int]:
        return self.tokens[self.i] if self.i < len(self.tokens) else ("end", "", len(self.text))

    def _take(self, token: str) -> None:
        kind, got, pos = self._peek()
        if got != token or kind != "op":
            self._fail(f"expected {token!r}, found {got or 'the end'!r}", pos)
        self.i += 1

    def formula(self) -> Fn:
        fn = self._product()
        kind, got, pos = self._peek()
        if kind != "end":
            self._fail(f"unexpected {got!r}", pos)
        return fn

    def _product(self) -> Fn:
        fn = self._power()
        while True:
            kind, got, _ = self._peek()
            if kind == "op" and got in ("*", "/"):
                self.i += 1
                fn = _binary(_OPS[got], fn, self._power())
            elif kind in ("num", "name") or got == "(":  # juxtaposition: multiplication
                fn = _binary(operator.mul, fn, self._power())
            else:
                return fn

    def _power(self) -> Fn:
        base = self._unary()
        kind, got, _ = self._peek()
        if kind == "op" and got in ("^", "**"):
            self.i += 1
            return _binary(operator.pow, base, self._power())
        return base

    def _unary(self) -> Fn:
        if self._peek()[:2] == ("op", "-"):
            self.i += 1
            inner = self._unary()
            return lambda d: -inner(d)
        return self._atom()

    def _atom(self) -> Fn:
        kind, got, pos = self._peek()
        self.i += 1
        if kind == "num":
            value = float(got) if "." in got else int(got)
            return lambda d: value
        if kind == "name" and got == "sqrt":
            self._take("(")
            inner = self._product()
            self._take(")")
            return lambda d: math.sqrt(inner(d))
        if kind == "name":
            if got not in self.names:
                self._fail(f"unknown name {got!r} (names: {', '.join(self.names)})", pos)
            return operator.attrgetter(self.names[got])
        if got == "(":
            inner = self._product()
            self._take(")")
            return inner
        self._fail(f"expected a number, a name or '(', found {got or 'the end'!r}", pos)


def compile_formula(text: str, where: dict[str, str] | None = None) -> Fn:
    """The function of :class:`Dims` that ``text`` denotes (module docstring's grammar);
    ``where`` rebinds symbols to other :class:`Dims` fields (``{"D": "fan_in"}``)."""
    names = {**SYMBOLS, **(where or {})}
    unknown = [f for f in names.values() if f not in Dims.__dataclass_fields__]
    if unknown:
        raise ValueError(f"formula {text!r}: {unknown} are not Dims fields")
    return _Parser(text, names).formula()


@dataclass(frozen=True)
class Expr:
    """A formula as printed, compiled once from that text into the function that evaluates it.

    ``where`` binds a symbol the formula uses in another sense than :data:`SYMBOLS` gives
    (``(("D", "fan_in"),)``)."""

    text: str
    where: tuple[tuple[str, str], ...] = ()
    fn: Fn = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fn", compile_formula(self.text, dict(self.where)))

    def __call__(self, dims: Dims) -> float:
        return float(self.fn(dims))

    def __repr__(self) -> str:
        where = f", where={self.where!r}" if self.where else ""
        return f"Expr(text={self.text!r}{where})"

    def reciprocal(self, text: str) -> Expr:
        """``1/self`` written as ``text``: evaluated as one over this formula's value, so it is
        exactly the reciprocal of what this formula gives."""
        inverse = Expr(text, self.where)
        object.__setattr__(inverse, "fn", lambda d: 1 / self.fn(d))
        return inverse

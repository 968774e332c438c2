"""Rule-table formulas as ``explain`` prints them: products and quotients of the table's
formulas (an absorbed form's ``a b``, ``c a^2``, ``eps / a``) simplified with sympy and written
in the table's style (``T/(L sqrt(fan_in n))``)."""

from __future__ import annotations

import functools
from typing import Any

from depthscale.param.expr import SYMBOLS

__all__ = ["simplified"]

_SYMBOLS = tuple(SYMBOLS)  # the names a rule-table formula may use


@functools.lru_cache(maxsize=1024)
def simplified(text: str) -> str:
    """``text`` (a product or quotient of rule-table formulas) simplified and printed in the
    rule table's style (``T/(L sqrt(fan_in n))``); ``text`` itself if it does not parse."""
    import sympy
    from sympy.parsing.sympy_parser import (
        convert_xor,
        implicit_multiplication,
        parse_expr,
        standard_transformations,
    )

    names: dict[str, Any] = {k: sympy.Symbol(k, positive=True) for k in _SYMBOLS}
    try:
        expr = sympy.simplify(parse_expr(
            text, local_dict={**names, "sqrt": sympy.sqrt},
            transformations=(*standard_transformations, implicit_multiplication, convert_xor)))
    except Exception:  # any formula sympy cannot read is shown as written
        return text
    if expr.is_Number:
        return f"{float(expr):g}"
    return _monomial(expr) or str(expr).replace("**", "^").replace("*", " ")


def _monomial(expr: Any) -> str | None:
    """A product of symbols to integer and half-integer powers, written with one sqrt per side
    of the fraction bar; None for anything else."""
    coeff, rest = expr.as_coeff_Mul()
    if not coeff.is_Rational:
        return None
    parts: dict[str, tuple[list[str], list[str]]] = {"num": ([], []), "den": ([], [])}
    for base, exp in rest.as_powers_dict().items():
        if not (base.is_Symbol and exp.is_Rational and (2 * exp).is_integer):
            return None
        ints, roots = parts["num" if exp > 0 else "den"]
        whole = int(abs(exp))
        if whole:
            ints.append(str(base) if whole == 1 else f"{base}^{whole}")
        if abs(exp) != whole:
            roots.append(str(base))

    def side(key: str, c: int) -> str:
        ints, roots = parts[key]
        return " ".join(([] if c == 1 else [str(c)]) + ints
                        + ([f"sqrt({' '.join(roots)})"] if roots else []))

    num, den = side("num", int(coeff.p)) or "1", side("den", int(coeff.q))
    if not den:
        return num
    return f"{num}/{den}" if " " not in den or (den.count("sqrt(") == 1
                                                and den.startswith("sqrt(")) else f"{num}/({den})"

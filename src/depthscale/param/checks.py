"""The one check of a numeric argument: a real number (not a bool, a string or None) in range,
else a ConfigError naming the argument, the value seen and what to pass."""

from __future__ import annotations

import math
import numbers

from depthscale.errors import ConfigError

__all__ = ["number", "whole"]


def _bad(name: str, value: object, kind: str) -> ConfigError:
    seen = repr(value)
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        seen += f" (a {type(value).__name__}, not a number)"
    return ConfigError(f"{name} must be {kind}, got {seen}")


def number(
    name: str,
    value: object,
    *,
    low: float = 0.0,
    low_closed: bool = False,
    high: float | None = None,
) -> float:
    """``value`` as a float if it is a finite real number above ``low`` (or equal to it when
    ``low_closed``) and below ``high`` (exclusive); else a ConfigError."""
    lo = f">= {low:g}" if low_closed else f"> {low:g}"
    kind = f"a finite number {lo}" if high is None else (
        f"a finite number in {'[' if low_closed else '('}{low:g}, {high:g})")
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise _bad(name, value, kind)
    try:
        v = float(value)
    except OverflowError:  # an int beyond float range
        raise _bad(name, value, kind) from None
    ok = math.isfinite(v) and (v >= low if low_closed else v > low) and (high is None
                                                                         or v < high)
    if not ok:
        raise _bad(name, value, kind)
    return v


def whole(name: str, value: object, *, minimum: int = 1) -> int:
    """``value`` as an int if it is a whole number >= ``minimum`` (``64`` or ``64.0``, not
    ``64.5``, ``"64"`` or ``True``); else a ConfigError."""
    kind = f"a whole number >= {minimum}"
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise _bad(name, value, kind)
    if isinstance(value, numbers.Integral):
        v = int(value)
    elif math.isfinite(float(value)) and float(value) == int(float(value)):
        v = int(float(value))
    else:
        raise _bad(name, value, kind)
    if v < minimum:
        raise _bad(name, value, kind)
    return v

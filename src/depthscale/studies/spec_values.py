"""The checks of a study spec's values, each refusal one ConfigError naming the spec, the key
and the value: tables and their keys, strings, choices, numbers, integers, the type and range
of each run field (an LR in (0, MAX_RATE], momentum in [0, 1), ...) and grid axes (lists or
``{logspace = [start, stop, num]}``)."""

from __future__ import annotations

import json
import math
from typing import Any, NoReturn

from depthscale.errors import ConfigError
from depthscale.param.optim import MAX_RATE, RATE_RULE

__all__ = ["PLAN_FLOATS", "SpecValidator"]

#: the plan options a spec gives as numbers (read as floats)
PLAN_FLOATS = ("T", "alpha", "sigma_u", "eta_u_scale")


class SpecValidator:
    """Raises ConfigError("spec FILE: KEY MESSAGE") for the first problem found."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, message: str) -> NoReturn:
        raise ConfigError(f"spec {self.source}: {key} {message}")

    def keys(self, section: str, table: Any, known: tuple[str, ...] | Any) -> None:
        if not isinstance(table, dict):
            self.fail(f"[{section}]", "must be a table")
        unknown = sorted(set(table) - set(known))
        if unknown:
            where = f"[{section}]" if section else "top level"
            self.fail(f"{where}", f"has unknown key(s) {', '.join(unknown)}; known: "
                      f"{', '.join(known) or 'none'}")

    def string(self, key: str, value: Any) -> str:
        if not isinstance(value, str) or not value:
            self.fail(key, f"must be a non-empty string, got {value!r}")
        return value

    def choice(self, key: str, value: Any, known: Any) -> str:
        if value is None:
            self.fail(key, f"is missing; choose one of: {', '.join(known)}")
        if not isinstance(value, str) or value not in known:
            kind = key.split(".")[-1]
            self.fail(key, f"unknown {kind} {value!r}; choose one of: {', '.join(known)}")
        return value

    def scalar(self, key: str, value: Any, option: str | None = None) -> Any:
        """A TOML scalar; plan options that are numbers become floats."""
        if isinstance(value, float) and not math.isfinite(value):
            self.fail(key, f"must be finite, got {value}")
        if not isinstance(value, str | int | float | bool):
            self.fail(key, f"must be a string, number or boolean, got {value!r}")
        if option is not None and option.startswith("plan.") \
                and option.split(".", 1)[1] in PLAN_FLOATS:
            return self.number(key, value)
        return value

    def number(self, key: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            self.fail(key, f"must be a finite number, got {value!r}")
        return float(value)

    def integer(self, key: str, value: Any, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f"must be an integer, got {value!r}")
        if value < minimum:
            self.fail(key, f"must be >= {minimum}, got {value}")
        return int(value)

    def field_value(self, key: str, name: str | None, value: Any) -> Any:
        """A value of RunSpec field ``name`` (``section.key``: an option) with its type and
        range."""
        if name in ("width", "depth", "steps", "batch_size"):
            return self.integer(key, value, 1)
        if name in ("seed", "eval_every"):
            return self.integer(key, value, 0)
        if name in ("lr", "epochs"):
            x = self.number(key, value)
            if x <= 0:
                self.fail(key, f"must be > 0, got {value!r}")
            if name == "lr" and x > MAX_RATE:
                self.fail(key, f"must be {RATE_RULE}, got {value!r}")
            return x
        if name == "momentum":
            x = self.number(key, value)
            if not 0 <= x < 1:
                self.fail(key, f"must be in [0, 1) (SGD's momentum; at 1 or more the "
                          f"velocity never decays), got {value!r}")
            return x
        if name == "weight_decay":
            x = self.number(key, value)
            if not 0 <= x <= MAX_RATE:
                self.fail(key, f"must be >= 0 and {RATE_RULE}, got {value!r}")
            return x
        if name in ("recipe", "optimizer", "loss", "device", "final_eval"):
            return self.string(key, value)
        return self.scalar(key, value, name)

    def axis(self, key: str, values: Any, name: str | None) -> tuple[Any, ...]:
        if isinstance(values, dict):
            values = self._logspace(key, values)
        if not isinstance(values, list):
            self.fail(key, f"must be a list of values or {{logspace = [start, stop, num]}}, "
                      f"got {values!r}")
        if not values:
            self.fail(key, "is empty: the study would have no runs")
        out = tuple(self.field_value(key, name, x) for x in values)
        seen: set[str] = set()
        for x in out:
            token = json.dumps(x)
            if token in seen:
                self.fail(key, f"lists {x!r} twice")
            seen.add(token)
        return out

    def _logspace(self, key: str, table: dict[str, Any]) -> list[float]:
        if set(table) != {"logspace"}:
            self.fail(key, "as a table takes only logspace = [start, stop, num] "
                      "(powers of ten)")
        spec = table["logspace"]
        if not (isinstance(spec, list) and len(spec) == 3):
            self.fail(key, f"logspace must be [start, stop, num], got {spec!r}")
        start, stop = self.number(key, spec[0]), self.number(key, spec[1])
        num = self.integer(f"{key} logspace num", spec[2], 1)
        exponents = [start] if num == 1 else [start + i * (stop - start) / (num - 1)
                                              for i in range(num)]
        if any(not -300 <= e <= 300 for e in exponents):
            self.fail(key, f"logspace [{spec[0]}, {spec[1]}, ...] gives 10^{max(exponents):g}: "
                      "powers of ten must stay within 10^-300 .. 10^300 (a float's range)")
        # 12 significant digits: the same values (and hashes) on every platform
        return [float(f"{10.0 ** e:.12g}") for e in exponents]

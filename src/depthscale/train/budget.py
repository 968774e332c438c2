"""A time bound checked before any work: a command whose run would surely take longer than
:data:`MAX_SECONDS` is refused with its estimate and the flag that overrides it.

The estimate is a lower bound on purpose (a refusal must never be a guess): every optimizer
step costs at least :data:`STEP_OVERHEAD` seconds of Python and kernel launches, plus 6 floating
point operations per parameter and example (2 forward, 4 backward, dense layers; convolutions
reuse each weight over positions and cost more) at :data:`FLOPS` of the device, well above what
this code reaches on it.
"""

from __future__ import annotations

from depthscale.errors import ConfigError

__all__ = ["FLOPS", "MAX_SECONDS", "STEP_OVERHEAD", "check_seconds", "training_seconds"]

#: the longest run a command starts without ``--force``
MAX_SECONDS = 24 * 3600.0
#: seconds an optimizer step takes at the very least (one step of a tiny model is ~1 ms here)
STEP_OVERHEAD = 1e-4
#: floating-point operations per second assumed per device (optimistic)
FLOPS: dict[str, float] = {"cpu": 1e11, "cuda": 1e15}


def training_seconds(*, parameters: int, batch_size: int, steps: int, runs: int = 1,
                     device: str = "cpu") -> tuple[float, str]:
    """A lower bound on the time of ``runs`` trainings of ``steps`` steps each, and its
    formula as text."""
    rate = FLOPS["cuda" if device.startswith("cuda") else "cpu"]
    per_step = STEP_OVERHEAD + 6.0 * parameters * batch_size / rate
    formula = (f"{runs:,} run(s) x {steps:,} steps x (1e-4 s + 6 x {parameters:,} parameters x "
               f"{batch_size:,} examples / {rate:.0e} FLOP/s)")
    return runs * steps * per_step, formula


def check_seconds(seconds: float, formula: str, *, what: str, force: bool = False,
                  lower: str = "--steps") -> None:
    """ConfigError when ``seconds`` (a lower bound) is over :data:`MAX_SECONDS` and not
    ``force``; the message gives the estimate, its formula and the override."""
    if force or seconds <= MAX_SECONDS:
        return
    raise ConfigError(
        f"{what} would take at least {_human(seconds)} ({formula}), over the "
        f"{MAX_SECONDS / 3600:.0f} h a command starts without --force; lower {lower} or pass "
        "--force")


def _human(seconds: float) -> str:
    if seconds < 48 * 3600:
        return f"{seconds / 3600:,.1f} h"
    days = seconds / 86400
    return f"{days:,.0f} days" if days < 1e6 else f"{days:.1e} days"

"""Every claim has one shape (docs/development.md, "A claim"): its runner's module holds a typed
settings record (a dataclass named ``*Settings``, read with ``read_settings``), and the runner
reads settings -> ``measure_*`` -> ``judge_*`` (a :class:`Judgement`) -> ``draw_*`` (defined in
that module) -> :func:`~depthscale.claims.verdicts.conclude`."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import sys
import textwrap
from types import ModuleType

import pytest

from depthscale.claims import CLAIMS


def _called(fn: object) -> list[str]:
    """The names the function calls, in source order."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))  # type: ignore[arg-type]
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    calls.sort(key=lambda n: (n.lineno, n.col_offset))
    names = []
    for c in calls:
        f = c.func
        names.append(f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute)
                     else "")
    return names


def _returns_conclude(fn: object) -> bool:
    """Whether the function's last statement is ``return conclude(...)``."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))  # type: ignore[arg-type]
    body = tree.body[0].body  # type: ignore[attr-defined]
    last = body[-1] if body else None
    return (isinstance(last, ast.Return) and isinstance(last.value, ast.Call)
            and isinstance(last.value.func, ast.Name) and last.value.func.id == "conclude")


def shape_gaps(module: ModuleType, runner: object) -> list[str]:
    """What the claim's module and runner lack of the one shape."""
    own = {n: v for n, v in vars(module).items()
           if getattr(v, "__module__", None) == module.__name__}
    gaps = []
    if not any(isinstance(v, type) and dataclasses.is_dataclass(v) and n.endswith("Settings")
               for n, v in own.items()):
        gaps.append("no *Settings dataclass")
    calls = _called(runner)
    steps = [next((i for i, c in enumerate(calls) if c == "read_settings"), None)]
    for prefix in ("measure_", "judge_", "draw_"):
        at = next((i for i, c in enumerate(calls) if c.startswith(prefix)), None)
        steps.append(at)
        if at is None:
            gaps.append(f"the runner calls no {prefix}*")
        elif calls[at] not in own:
            gaps.append(f"{calls[at]} is not defined in {module.__name__}")
    if "read_settings" not in calls:
        gaps.append("the runner does not read_settings")
    if not _returns_conclude(runner):
        gaps.append("the runner does not end with conclude(...)")
    found = [s for s in steps if s is not None]
    if found != sorted(found):
        gaps.append("the steps are not in the order settings -> measure -> judge -> draw")
    return gaps


def test_shape_gaps_sees_a_wrong_runner() -> None:
    module = ModuleType("fake")

    def runner(ctx: object) -> None:
        print(ctx)

    assert set(shape_gaps(module, runner)) >= {"no *Settings dataclass",
                                               "the runner calls no measure_*",
                                               "the runner does not end with conclude(...)"}


@pytest.mark.parametrize("claim_id", sorted(CLAIMS))
def test_claim_has_the_one_shape(claim_id: str) -> None:
    run = CLAIMS[claim_id].run
    gaps = shape_gaps(sys.modules[run.__module__], run)
    assert not gaps, f"{claim_id} ({run.__module__}): " + "; ".join(gaps)

"""``Plan.explain``: the plan per parameter as a text table, each value beside the rule-table
formula it comes from (a parameter in absorbed form shows the native formulas composed by the
abc-symmetry with l = 1/a: a = 1, b = a b, c_SGD c a^2, c_Adam c a, eps/a, wd/a), then notes on
tied readouts and on the uses that refined a rule."""

from __future__ import annotations

from collections.abc import Sequence

from depthscale.param.evaluate import ParamSpec, PlanSettings
from depthscale.param.formulas import simplified
from depthscale.param.state import PlanState

__all__ = ["explain"]

_HEAD = ("parameter", "role", "shape", "a", "b (init std)", "c SGD", "c Adam", "eps",
         "wd AdamW", "source")


def _show(formula: str, value: float) -> str:
    value_text = f"{value:.4g}"
    return value_text if formula == f"{value:g}" else f"{formula} = {value_text}"


def _row(s: ParamSpec) -> tuple[str, ...]:
    a, b, c_sgd, c_adam, eps, wd = s.formulas
    if s.form == "absorbed":  # the native formulas composed with l = 1/a
        b, c_sgd, c_adam = (simplified(f"({a})*({b})"), simplified(f"({c_sgd})*({a})^2"),
                            simplified(f"({c_adam})*({a})"))
        eps, wd, a = simplified(f"({eps})/({a})"), simplified(f"({wd})/({a})"), "1"
    init = _show(b, s.b) if s.init in ("normal", "constant") else s.init
    adam = "-" if s.c_adam is None else _show(c_adam, s.c_adam)
    source = s.source + ("" if s.form == "native" else " [absorbed: a=1]")
    if s.c_adam is not None and s.adam_source:
        source += f"; {s.adam_source}"
    return (s.name, s.role, "x".join(map(str, s.shape)), _show(a, s.a), init,
            _show(c_sgd, s.c_sgd), adam, _show(eps, s.eps), _show(wd, s.wd_adam), source)


def _notes(state: PlanState | None) -> list[str]:
    """Tied readouts, weightless branches, shared uses, kept gains, the model's own scales and
    frozen widths."""
    if state is None:
        return []
    notes = [f"tied readout {unit}: logits x {m:.4g} (the output rule's init size over the "
             "tied table's; mup's MuSharedReadout)" for unit, m in state.readouts.items()]
    notes += [f"branch {unit} holds no weight: its output x {m:.4g} (the branch multiplier, "
              "a forward hook)" for unit, m in state.branches.items()]
    for name, u in state.usage.items():
        if u.uses > 1:
            notes.append(f"{name} is used {u.uses} times (a shared block): SGD LR / "
                         f"{u.uses}, Adam eps x {u.uses} (its gradient sums {u.uses} "
                         "uses); Adam LR as one use")
        if u.keep:
            notes.append(f"{name}: the model's own values kept (a gain, or an init "
                         "convention no rule replaces)")
        if u.scale != 1.0:
            notes.append(f"{name}: the model multiplies it by {u.scale:.4g}; init and LR "
                         "compensate (its multiplier in the rule's form)")
        if u.rows:
            blocks = ", ".join(f"{a}:{b}" for a, b in u.rows)
            notes.append(f"{name}: output rows {blocks} do not grow with width (readout-like):"
                         f" their gradient, so their SGD LR, x {state.row_scales.get(name, 1):.4g}"
                         f" (the recipe's output rule against this role's, base width {u.base})")
        if u.fixed:
            what = "no dimension grows" if u.fixed == "both" else "fan-in does not grow"
            notes.append(f"{name}: {what} with width: width factors taken at the base "
                         f"width {u.base}")
    return notes


def explain(plan: PlanSettings, specs: Sequence[ParamSpec], state: PlanState | None) -> str:
    """The table of ``specs`` (rows as :func:`_row` writes them, columns padded) under a line
    naming the plan, then the notes of ``state``."""
    rows = [_HEAD, *(_row(s) for s in specs)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    head = (
        f"plan {plan.recipe.name!r}: width n={plan.width}, depth L={plan.depth}, T={plan.T:g}"
        f" ({plan.recipe.source}); attention scale {plan.recipe.attention.text} "
        f"({plan.recipe.attention_source})"
    )
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in rows]
    return "\n".join([head, *lines, *_notes(state)])

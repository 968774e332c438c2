"""What ``Plan.apply`` warns about, from the structure inspect found: where the recipe's
derivation does not cover the model (post-LN blocks or branches ending in a gain-free
normalisation under a depth recipe, nfd Eq. 1 and CompleteP being pre-LN; a tied readout under
an output rule other than muP's 1/n) and attention scales other than the recipe's (muP: 1/d_head,
TP-V Sec. 8)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping

from depthscale.param.evaluate import PlanSettings, attention_scale, evaluate
from depthscale.param.inspect import Structure

__all__ = ["warn_attention", "warn_structure"]

# The warnings name the code that called Plan.apply, as they always have:
# warn <- warn_* <- apply_plan <- Plan.apply <- caller.
_STACKLEVEL = 4


def warn_structure(plan: PlanSettings, structure: Structure,
                   readouts: Mapping[str, float]) -> None:
    """Warn where the recipe's derivation does not cover what inspect found: post-LN
    blocks or branches ending in a gain-free normalisation under a depth recipe, and a tied
    readout under a recipe whose output rule is not muP's 1/n."""
    name = plan.recipe.name
    if structure.unscaled and name in ("depth-mup", "nfd-depth", "completep", "laws"):
        warnings.warn(
            f"residual branch(es) {list(structure.unscaled)} end in a normalisation without "
            f"a gain, which divides out the branch multiplier of {name!r}, or hold no weight "
            "and are made by no module of their own: nothing can carry it (give the "
            "normalisation an affine gain, e.g. BatchNorm2d(affine=True), whose role "
            "branch_gain then carries it; compute a weightless branch in a module of its own, "
            "whose output then gets it)",
            UserWarning, stacklevel=_STACKLEVEL)
    head = evaluate(plan, "readout", "output", (1, plan.width)) if readouts else None
    for unit, m in readouts.items():
        assert head is not None
        if not math.isclose(head.a * head.b * plan.width, 1.0, rel_tol=1e-6):
            warnings.warn(
                f"{unit} reads out with the tied input table, and recipe "
                f"{name!r}'s output rule gives it the init size "
                f"{head.a * head.b:.4g}, not 1/n = {1 / plan.width:.4g} (multiplier "
                f"{m:.4g}): the table's overlap with the stream grows "
                "the logits at init as sqrt(n) (the muP family's 1/n, mup's "
                "MuSharedReadout, removes it); use a muP-family recipe or untie the head",
                UserWarning, stacklevel=_STACKLEVEL)
    if structure.post_ln and name in ("depth-mup", "nfd-depth", "completep"):
        warnings.warn(
            f"recipe {name!r} is derived for pre-LN residual blocks h + a f(h) "
            "(nfd Eq. 1, CompleteP); inspect found a normalisation on the stream after each "
            "addition (post-LN), which divides the stream by its size after every block, so "
            "the branch multiplier's depth factor is not the one the derivation assumes: "
            "expect no depth transfer guarantee (use a pre-LN model for depth transfer)",
            UserWarning, stacklevel=_STACKLEVEL)


def warn_attention(plan: PlanSettings, structure: Structure, handled: set[str]) -> None:
    """One warning naming every attention inspect measured with a scale other than the
    recipe's (modules with ``attention_head_dim`` or a scale attribute are set by apply), each
    with the fix that gives the recipe's scale: the kernel's ``scale=`` divided by the
    constants multiplied into q and k on the way (OPT's q * head_dim^-0.5), or the factor to
    multiply hand-written scores by."""
    wrong = []
    for call in structure.attention:
        want = attention_scale(plan, call.d_head)
        if call.module in handled or math.isclose(call.effective_scale, want, rel_tol=1e-6):
            continue
        where = call.module or "(the model)"
        if call.fixed:
            wrong.append(
                f"{where} is an nn.MultiheadAttention, which fixes "
                f"1/sqrt(d_head) (d_head {call.d_head}) and takes no scale: compute its "
                f"attention with F.scaled_dot_product_attention(q, k, v, scale="
                f"{want:.6g}) in your block, or keep d_head fixed as width grows (more "
                "heads), where 1/sqrt(d_head) and 1/d_head differ by a constant")
            continue
        extra = math.prod(call.factors)
        consts = " x ".join(f"{c:.6g}" for c in call.factors)
        if call.kind == "scores":
            wrong.append(f"{where} computes its attention scores by hand (q @ k^T, then "
                         f"softmax) scaled by {consts or '1'} (d_head {call.d_head}); scale "
                         f"them by {want:.6g} instead")
            continue
        used = "the default 1/sqrt(d_head)" if call.scale is None else f"scale={call.scale:.6g}"
        after = f" after multiplying q and k by {consts}" if call.factors else ""
        drop = f" (or drop the {consts} and pass scale={want:.6g})" if call.factors else ""
        total = f": scale {call.effective_scale:.6g}" if call.factors else ""
        wrong.append(f"{where} calls F.scaled_dot_product_attention with {used}{after} "
                     f"(d_head {call.d_head}{total}); pass scale={want / extra:.6g}{drop}")
    if wrong:
        warnings.warn(
            f"recipe {plan.recipe.name!r} wants the attention scale "
            f"{plan.recipe.attention.text} ({plan.recipe.attention_source}): "
            + "; ".join(wrong) + " (or give the module an int attention_head_dim and use "
            "self.attention_scale, or keep the scale in a float attribute of the module "
            "(as HF's `scaling`): apply sets either)", UserWarning, stacklevel=_STACKLEVEL)

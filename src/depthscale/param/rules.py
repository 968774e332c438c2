"""The one rule table: for every recipe and role, the abc-triple and its paper source.

A rule gives, for one parameter of a given role, ``a`` (the forward multiplier: the layer
computes ``a * W x``), ``b`` (the initial std of the entries of ``W``, or a constant init),
``c_sgd`` / ``c_adam`` (the learning-rate multiplier on the user's base LR) and ``wd`` / ``eps``
(weight-decay and Adam-epsilon multipliers), each an :class:`~depthscale.param.expr.Expr`: a
formula string compiled once into a function of :class:`~depthscale.param.expr.Dims`. This
table is the source of truth; models never hard-code scaling.

Symbols: ``n`` width (``D`` for Chizat's model), ``L`` = ``K`` residual blocks (hidden layers
for a plain MLP), ``fan_in`` (1 for an embedding table), ``T`` time horizon, ``M`` hidden width
of a two-layer-perceptron block, ``q = E[phi'(Z)^2]``, ``alpha`` the output scale of nfd Eq. 1,
``d_head`` the width of one head. Adam's ``eps`` scales as the gradient entry (TP-V Tables 3
and 8) and weight decay as ``1/c`` (the per-step shrink ``lr * weight_decay`` at every size):
docs/derivations.md ("Adam's epsilon and weight decay").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from depthscale.param.expr import Dims, Expr

__all__ = [
    "RECIPES",
    "ROLES",
    "Dims",
    "Expr",
    "Recipe",
    "Rule",
    "rule_table",
]

#: Parameter roles. ``branch`` is the single layer of a one-layer residual block; ``branch_in``
#: and ``branch_out`` the first and last internal layers of a multi-layer block; ``vector``
#: biases (``branch_bias`` the bias at the end of a branch, ``output_bias`` the readout's);
#: ``norm`` normalisation gains; ``token`` class tokens and positional embeddings.
ROLES: dict[str, str] = {
    "input": "first layer: reads the data (embedding, stem, patch projection)",
    "hidden": "plain hidden layer outside any residual branch",
    "branch": "the layer of a one-layer residual block (writes to the residual stream)",
    "branch_in": "first internal layer of a multi-layer residual block (internal representation)",
    "branch_out": "last internal layer of a multi-layer residual block (writes to the stream)",
    "output": "readout / classifier head",
    "output_bias": "bias of the readout / classifier head (it has no width dimension)",
    "vector": "bias vector",
    "branch_vector": "bias or normalisation shift inside a residual branch (not at its end)",
    "branch_bias": "bias of a layer that writes into a residual addition (end of a branch)",
    "norm": "normalisation gain (LayerNorm/BatchNorm weight)",
    "branch_norm": "gain inside a residual branch (a pre-LN block's LayerNorm, a layer scale)",
    "branch_gain": "gain of a normalisation that ends a residual branch (after its last layer, "
                   "as a ResNet's bn2): it carries the branch multiplier the norm would remove",
    "token": "learned positional embedding or token-type table added to the activations",
    "class_token": "class or register token joined to the sequence as positions of its own",
}


_ATTN_SP = Expr("1/sqrt(d_head)")


def _const(value: float) -> Expr:
    return Expr(f"{value:g}")


ONE = _const(1.0)
ZERO = _const(0.0)


@dataclass(frozen=True)
class Rule:
    """abc-triple (plus weight-decay and Adam-eps multipliers) for one role under one recipe.

    ``init`` is ``"normal"`` (entries ~ N(0, b^2)), ``"zeros"``, ``"ones"`` or ``"constant"``
    (every entry b). ``c_adam`` is
    ``None`` where the recipe's paper defines no Adam rule. ``wd_sgd`` (``1/c_sgd``, derived)
    multiplies SGD's coupled L2 penalty, ``wd_adam`` AdamW's decoupled weight decay, ``eps``
    Adam's epsilon (module docstring); ``adam_source`` cites the eps and weight-decay rules.
    """

    a: Expr
    b: Expr
    c_sgd: Expr
    c_adam: Expr | None
    source: str
    init: str = "normal"
    wd_adam: Expr = ONE
    eps: Expr = ONE
    adam_source: str = "eps and weight decay x 1 (no scaling)"

    @property
    def wd_sgd(self) -> Expr:
        """The coupled-L2 multiplier ``1/c_sgd``: SGD shrinks a weight by ``lr c_sgd wd_sgd
        weight_decay`` per step, so the shrink is ``lr * weight_decay`` for every role, width
        and depth (module docstring)."""
        return self.c_sgd.reciprocal(_reciprocal_text(self.c_sgd.text))


@dataclass(frozen=True)
class Recipe:
    """A named parameterization: a rule per role and the paper it comes from."""

    name: str
    summary: str
    source: str
    rules: dict[str, Rule]
    options: dict[str, float | str] = field(default_factory=dict)
    attention: Expr = _ATTN_SP
    attention_source: str = "Vaswani et al. 2017"


def _e(text: str, **where: str) -> Expr:
    """The formula ``text``; ``where`` binds a symbol it uses in another sense than
    :data:`~depthscale.param.expr.SYMBOLS` gives (chizat's ``D`` as the fan-in)."""
    return Expr(text, tuple(where.items()))


def _reciprocal_text(text: str) -> str:
    """``1/(text)`` written as the table writes formulas: ``n`` -> ``1/n``, ``n T/L`` ->
    ``L/(n T)``, ``n sqrt(L)`` -> ``1/(n sqrt(L))``; ``1`` stays ``1``."""
    def wrapped(part: str) -> str:
        return f"({part})" if " " in part else part

    if text == "1":
        return "1"
    if text.startswith("1/") and text.count("/") == 1:
        rest = text[2:]
        single = rest.startswith("(") and rest.endswith(")") and rest.count("(") == 1
        return rest[1:-1] if single else rest
    if text.count("/") == 1 and "(" not in text:
        num, den = text.split("/")
        return den if num == "1" else f"{den}/{wrapped(num)}"
    return f"1/({text})" if "/" in text else f"1/{wrapped(text)}"


# ---- shared expressions --------------------------------------------------------------------
_INV_SQRT_FAN_IN = _e("1/sqrt(fan_in)")
_N = _e("n")
_INV_SQRT_N = _e("1/sqrt(n)")
_SQRT_N = _e("sqrt(n)")
_TOKEN_STD = _const(0.02)
# A class token joined to the sequence is, at its position, the whole input: an embedding row
# read by a constant index, an input weight of fan_in 1 (TP-V Table 3). The muP family draws it
# as the input rule draws an embedding (nfd Eq. 1 with d = 1: N(0, 1), Adam LR x 1). At 0.02
# with that LR one Adam step moved it by lr/0.02 of itself, 50x any other input weight's
# relative step, and a ViT's CLS readout, fed by it alone, failed the width check (docs/zoo.md).
# A table added to another layer's output (positions) only perturbs it and keeps 0.02.
_CLASS_TOKEN_SOURCE = "muP input weight of fan_in 1 (TP-V Table 3; nfd Eq. 1 with d = 1)"
_ATTN_MUP = _e("1/d_head")
_ATTN_MUP_SOURCE = "muP: Yang et al. 2022, TP-V Sec. 8 / Table 3"


def _vectors(c_sgd: Expr, c_adam: Expr | None, source: str) -> dict[str, Rule]:
    """Bias, norm-gain and token rules of a recipe without depth or width scaling (a bias at the
    end of a branch is trained like any other bias)."""
    vector = Rule(ONE, ZERO, c_sgd, c_adam, source, init="zeros")
    return {
        "vector": vector,
        "branch_bias": vector,
        "output_bias": vector,
        "norm": Rule(ONE, ONE, c_sgd, c_adam, source, init="ones"),
        "branch_norm": Rule(ONE, ONE, c_sgd, c_adam, source, init="ones"),
        "branch_vector": vector,
        "branch_gain": Rule(ONE, ONE, c_sgd, c_adam, source, init="constant"),
        "token": Rule(ONE, _TOKEN_STD, c_sgd, c_adam, "laws Sec. 3.1 (small-std token init)"),
        "class_token": Rule(ONE, _TOKEN_STD, c_sgd, c_adam,
                            "laws Sec. 3.1 (small-std token init)"),
    }


# ---- sp: standard parameterization ---------------------------------------------------------
_SP = "standard fan-in init, no multipliers, one LR"
_sp_weight = Rule(ONE, _INV_SQRT_FAN_IN, ONE, ONE, _SP)
SP = Recipe(
    "sp",
    "Standard parameterization: W ~ N(0, 1/fan_in), no multipliers, one learning rate.",
    "common practice (baseline)",
    {
        **{r: _sp_weight for r in ("input", "hidden", "branch", "branch_in", "branch_out")},
        "output": _sp_weight,
        **_vectors(ONE, ONE, _SP),
    },
)

# ---- muP and depth-muP in the form of nfd Eq. 1 (W ~ N(0,1), multipliers carry the scale) ----
# The Adam eps of a parameter is its gradient scale (module docstring): the stream's gradient
# alpha/sqrt(n) times the layer's multiplier a, times the branch's depth factor for the internal
# layers and vectors of a branch; the AdamW weight decay is 1/c_adam.
_EQ1 = "nfd Eq. 1"
_ADAM = ("eps as the gradient (TP-V Table 3/8; Dey et al. 2025); AdamW wd 1/c_adam "
         "(Wortsman et al. 2023)")
#: The branch multiplier's depth factor of each nfd Eq. 1 recipe ("" for none).
_DEPTH_FACTORS = {"mup": "", "depth-mup": "sqrt(T/L)", "completep": "T/L"}
_EPS_STREAM = _e("alpha/sqrt(n)")


def _eps_weight(depth: str) -> Expr:
    """Adam eps of a weight with multiplier ~ (depth factor)/sqrt(fan_in) on the stream's
    gradient: (depth factor) alpha / sqrt(n fan_in)."""
    return _e({"mup": "alpha/sqrt(n fan_in)", "depth-mup": "alpha sqrt(T/(L n fan_in))",
               "completep": "alpha (T/L)/sqrt(n fan_in)"}[depth])


def _eps_vector(depth: str) -> Expr:
    """Adam eps of a bias or norm gain inside a branch: (depth factor) alpha / sqrt(n)."""
    return _e({"mup": "alpha/sqrt(n)", "depth-mup": "alpha sqrt(T/(L n))",
               "completep": "alpha (T/L)/sqrt(n)"}[depth])


def _mf_vectors(depth: str) -> dict[str, Rule]:
    """Vectors of the nfd Eq. 1 recipes: SGD LR eta_c n, Adam LR eta_c (no width factor: a
    vector's Adam update moves its layer's output by O(eta) at any width, TP-V Table 3); the
    bias at the end of a residual branch trains at the branch's per-block rate T/L."""
    source = "muP vectors (SGD LR x n, Adam x 1; TP-V Table 3)"
    eps = _eps_vector(depth)
    vector = Rule(ONE, ZERO, _N, ONE, source, init="zeros", eps=eps, adam_source=_ADAM)
    norm = Rule(ONE, ONE, _N, ONE, source, init="ones", eps=eps, adam_source=_ADAM)
    # Inside a branch a vector's gradient carries the branch multiplier, as the branch's first
    # layer's does: under SGD it takes that layer's depth factor (CompleteP: LR x L/T, TP-VI;
    # depth-muP's branch_in keeps eta_c n, so its vectors do too); Adam normalises it away.
    inside = {"mup": (_N, source), "depth-mup": (_N, source),
              "completep": (_e("n L/T"),
                            "vector inside a CompleteP branch: SGD LR x L/T as the branch's "
                            "first layer (its gradient carries the branch multiplier T/L; "
                            "TP-VI / Dey et al. 2025), Adam x 1")}[depth]
    out = {
        "vector": vector,
        "norm": norm,
        "branch_vector": replace(vector, c_sgd=inside[0], source=inside[1]),
        "branch_norm": replace(norm, c_sgd=inside[0], source=inside[1]),
        "token": Rule(ONE, _TOKEN_STD, _N, ONE, "laws Sec. 3.1 (small-std token init)",
                      eps=_EPS_STREAM, adam_source=_ADAM),
        "class_token": Rule(ONE, ONE, _N, ONE, _CLASS_TOKEN_SOURCE, eps=_EPS_STREAM,
                            adam_source=_ADAM),
    }
    # The readout's bias: f = alpha/sqrt(n) v^T h + b. One SGD step on v (LR eta n, its
    # gradient (alpha/sqrt(n)) h chi with chi = dloss/df = O(1)) moves f by
    # eta n (alpha^2/n) |h|^2 chi = O(eta) (alpha^2 = 1/n, |h|^2 = O(n)); b's gradient is chi
    # itself, so a step moves f by eta c chi: c = 1 gives the same O(eta) move at every width
    # (SGD and Adam alike). TP-V Table 3 gives a bias the SGD LR eta fan_out and the Adam LR
    # eta: the readout's fan_out is the (finite) output size, so neither has a width factor;
    # b has no width dimension (muP's "scalar-like" parameter), which the mup package's MuSGD
    # and MuAdam leave at the base LR. Its gradient chi is O(1), so its Adam eps is 1; AdamW's
    # decay 1/c_adam = 1.
    out["output_bias"] = Rule(
        ONE, ZERO, ONE, ONE,
        "muP output bias (TP-V Table 3: bias LR eta fan_out, finite here; no width factor under "
        "SGD or Adam, as mup's scalar-like parameters)",
        init="zeros", adam_source=_ADAM)
    # A normalisation after a branch's last layer divides out the layer's multiplier, so the
    # branch's depth factor moves to the norm's gain: it starts at the factor (the branch
    # output's size at init, nfd Eq. 1) and trains like the branch-end bias (both move the
    # stream by the factor per block; TP-VI puts the multiplier after the whole branch).
    factor_text = _DEPTH_FACTORS[depth]
    gain_source = ("branch-ending normalisation's gain = the branch multiplier "
                   f"{factor_text or '1'} (nfd Eq. 1, TP-VI: the multiplier after the branch)")
    if depth == "mup":
        out["branch_bias"] = replace(vector, eps=_EPS_STREAM)
        out["branch_gain"] = Rule(ONE, ONE, _N, ONE, gain_source, init="constant",
                                  eps=_EPS_STREAM, adam_source=_ADAM)
    else:
        out["branch_gain"] = Rule(
            ONE, _e(factor_text), _e("n T/L"),
            _e("T/L"), gain_source, init="constant", eps=_EPS_STREAM,
            wd_adam=_e("L/T"), adam_source=_ADAM)
        out["branch_bias"] = Rule(
            ONE, ZERO, _e("n T/L"), _e("T/L"),
            "branch-end bias (nfd Eq. 1 with the bias outside the multiplier): LR x T/L of "
            "the vector LR, so its step moves the stream by O(T/L) per block like the "
            "branch weights'", init="zeros", eps=_EPS_STREAM,
            wd_adam=_e("L/T"), adam_source=_ADAM)
    return out


_mf_input = Rule(
    _e("1/sqrt(d)"), ONE, _N, ONE,
    _EQ1 + " (h0 = U x/sqrt(d); d = 1 for an embedding: one-hot input)",
    eps=_e("alpha/sqrt(n d)"),
    adam_source=_ADAM,
)
_mf_hidden = Rule(_INV_SQRT_FAN_IN, ONE, _N, _INV_SQRT_N,
                  "muP (nfd Eq. 1 without depth factor)", eps=_eps_weight("mup"),
                  wd_adam=_SQRT_N, adam_source=_ADAM)
_mf_output = Rule(
    _e("alpha/sqrt(n)"),
    ONE,
    _N,
    ONE,
    _EQ1 + " (f = alpha/sqrt(n) v^T h_L)",
    eps=_EPS_STREAM,
    adam_source=_ADAM,
)

MUP = Recipe(
    "mup",
    "Width-only muP in the mean-field form of nfd Eq. 1: branch 1/sqrt(n) with no depth factor, "
    "output alpha = 1/sqrt(n), SGD LR eta_c n.",
    "nfd Eq. 1 with the depth factor removed (the muP-ResNet of nfd Fig. 4b)",
    {
        "input": _mf_input,
        "hidden": _mf_hidden,
        "branch": _mf_hidden,
        "branch_in": _mf_hidden,
        "branch_out": _mf_hidden,
        "output": _mf_output,
        **_mf_vectors("mup"),
    },
    {"regime": "feature"},
    _ATTN_MUP,
    _ATTN_MUP_SOURCE,
)

_DEPTH_A = _e("sqrt(T/(L fan_in))")
_DEPTH_C_ADAM = _e("sqrt(T/(L n))")
_DEPTH_WD = _e("sqrt(L n/T)")
_depth_eps = _eps_weight("depth-mup")
_depth_branch = Rule(_DEPTH_A, ONE, _N, _DEPTH_C_ADAM, _EQ1 + " (branch sqrt(T/(L n)))",
                     eps=_depth_eps, wd_adam=_DEPTH_WD, adam_source=_ADAM)
_depth_branch_in = Rule(
    _INV_SQRT_FAN_IN, ONE, _N, _DEPTH_C_ADAM, "nfd Eq. 6 (x = W1 h/sqrt(n)), LR eta_c n",
    eps=_depth_eps, wd_adam=_DEPTH_WD, adam_source=_ADAM,
)
_depth_branch_out = replace(_depth_branch, source="nfd Eq. 6 (W2 phi(x)/sqrt(L n))")

DEPTH_MUP = Recipe(
    "depth-mup",
    "Depth-muP (nfd Eq. 1, Eq. 6): W ~ N(0,1), branch multiplier sqrt(T/(L n)), input "
    "1/sqrt(d), output alpha/sqrt(n), SGD LR eta_c n for every layer.",
    "nfd Eq. 1 and Eq. 6",
    {
        "input": _mf_input,
        "hidden": _mf_hidden,
        "branch": _depth_branch,
        "branch_in": _depth_branch_in,
        "branch_out": _depth_branch_out,
        "output": _mf_output,
        **_mf_vectors("depth-mup"),
    },
    {"regime": "feature"},
    _ATTN_MUP,
    _ATTN_MUP_SOURCE,
)

NFD_DEPTH = Recipe(
    "nfd-depth",
    "Depth-muP with the depth-aware learning rate of nfd Eq. 8: first internal layer of each "
    "block eta_1 = eta_c n sqrt(L), second eta_2 = eta_c n.",
    "nfd Eq. 6 and Eq. 8",
    {
        **DEPTH_MUP.rules,
        "branch_in": Rule(
            _INV_SQRT_FAN_IN,
            ONE,
            _e("n sqrt(L)"),
            _e("sqrt(T/n)"),
            "nfd Eq. 8 (eta_1 = eta_c n sqrt(L)); Adam: same sqrt(L) correction (extension)",
            eps=_eps_weight("depth-mup"),
            wd_adam=_e("sqrt(n/T)"),
            adam_source=_ADAM,
        ),
    },
    {"regime": "feature"},
    _ATTN_MUP,
    _ATTN_MUP_SOURCE,
)

# ---- CompleteP: branch multiplier 1/L (Dey et al. 2025) -------------------------------------
_CP = "CompleteP (branch T/L; Dey et al. 2025)"
_CP_A = _e("(T/L)/sqrt(fan_in)")
_CP_C_SGD = _e("n L/T")
_cp_branch = Rule(_CP_A, ONE, _CP_C_SGD, _INV_SQRT_N, _CP, eps=_eps_weight("completep"),
                  wd_adam=_SQRT_N, adam_source=_ADAM)
COMPLETEP = Recipe(
    "completep",
    "CompleteP: residual branch multiplier T/L. SGD branch LR eta_c n L/T (per-block update "
    "O(1/L)); Adam branch LR eta_c/sqrt(n), independent of depth.",
    "CompleteP (Dey et al. 2025), in the mean-field form of nfd Eq. 1",
    {
        "input": _mf_input,
        "hidden": _mf_hidden,
        "branch": _cp_branch,
        "branch_in": replace(_cp_branch, a=_INV_SQRT_FAN_IN),
        "branch_out": _cp_branch,
        "output": _mf_output,
        **_mf_vectors("completep"),
    },
    {"regime": "feature"},
    _ATTN_MUP,
    _ATTN_MUP_SOURCE,
)

# ---- mean-ode: Chizat Eq. 24-25 ---------------------------------------------------------------
_CH = "chizat Eq. 24-25"
MEAN_ODE = Recipe(
    "mean-ode",
    "Neural Mean ODE scaling for two-layer-perceptron blocks (chizat Eq. 24-25): u^T h/D, "
    "v rho(.)/(L M), u ~ N(0, sigma_u^2), v ~ N(0, (alpha sqrt(D))^2), "
    "GD LRs eta_u L M, eta_v L M.",
    _CH,
    {
        "branch_in": Rule(
            _e("1/D", D="fan_in"),
            _e("sigma_u"),
            _e("L M eta_u_scale"),
            None,
            _CH + " (u^T h / D, LR eta_u L M)",
        ),
        "branch_out": Rule(
            _e("1/(L M)"),
            _e("alpha sqrt(D)", alpha="alpha"),
            _e("L M"),
            None,
            _CH + " (v rho(.)/(L M), LR eta_v L M)",
        ),
    },
    {"alpha": 1.0, "sigma_u": "sqrt(D)", "eta_u_scale": 1.0},
)

# ---- laws: He fan-in init, residual K^(-1/2), one LR (laws Sec. 3.1) --------------------------
_LAWS = "laws Sec. 3.1 Eq. 1"
_laws_plain = Rule(
    ONE, _e("1/sqrt(q fan_in)"), ONE, ONE, _LAWS
)
_laws_branch = Rule(
    ONE,
    _e("1/sqrt(q K fan_in)"),
    ONE,
    ONE,
    "laws Sec. 3.1 Eq. 5 (residual branch x K^(-1/2))",
)
LAWS = Recipe(
    "laws",
    "Depth LR-law setting (laws Sec. 3.1): fan-in init Var = 1/(q fan_in), residual-branch "
    "weights x K^(-1/2), linear fan-in head, one base LR; transfer eta(L) = eta(L0)(L/L0)^(-3/2) "
    "with effective depth L = m + K.",
    "laws Sec. 3.1, Eq. 1 and Eq. 5",
    {
        "input": _laws_plain,
        "hidden": _laws_plain,
        "branch": _laws_branch,
        "branch_in": _laws_branch,
        "branch_out": _laws_branch,
        "output": Rule(ONE, _INV_SQRT_FAN_IN, ONE, ONE, "laws Sec. 3.1 (linear fan-in head)"),
        **_vectors(ONE, ONE, _LAWS),
        "branch_gain": Rule(ONE, _e("1/sqrt(K)"), ONE, ONE,
                            "laws Sec. 3.1 Eq. 5 (the branch's K^(-1/2) on the gain of the "
                            "normalisation that ends it)", init="constant"),
    },
)

# The paper's Transformers use plain fan-in init on the attention and FFN maps (laws Sec. 3.1
# Eq. 1, Prop. 3.5); the K^(-1/2) of Eq. 5 is for ResNets' residual branches (Sec. 4.3).
LAWS_FANIN = Recipe(
    "laws-fanin",
    "Depth LR-law setting for Transformers (laws Sec. 3.1 Eq. 1, Sec. 3.5): fan-in init "
    "Var = 1/(q fan_in) on every weight, residual branches included (no K^(-1/2)), linear "
    "fan-in head, one base LR.",
    "laws Sec. 3.1 Eq. 1 and Sec. 3.5",
    {
        **{role: _laws_plain for role in ("input", "hidden", "branch", "branch_in", "branch_out")},
        "output": LAWS.rules["output"],
        **_vectors(ONE, ONE, _LAWS),
    },
)

RECIPES: dict[str, Recipe] = {
    r.name: r for r in (SP, MUP, DEPTH_MUP, NFD_DEPTH, COMPLETEP, MEAN_ODE, LAWS, LAWS_FANIN)
}


def rule_table(optimizer: str = "adam", recipes: Iterable[str] | None = None,
               sources: bool = True) -> str:
    """The rule table as Markdown: for each recipe (all unless ``recipes`` names some) and role,
    the multiplier a, the init, the LR multiplier c, and for ``"adam"`` the eps and AdamW
    weight-decay multipliers (``"sgd"``: the coupled L2 multiplier 1/c); then the attention
    scale.
    A role without an Adam rule shows ``-``; ``sources=False`` leaves out the source column."""
    from depthscale.errors import ConfigError

    if optimizer not in ("sgd", "adam"):
        raise ConfigError(f"unknown optimizer {optimizer!r}; choose one of: sgd, adam")
    names = list(RECIPES) if recipes is None else list(recipes)
    unknown = [r for r in names if r not in RECIPES]
    if unknown:
        raise ConfigError(f"unknown recipe(s) {', '.join(map(repr, unknown))}; choose from: "
                          f"{', '.join(RECIPES)}")
    adam = optimizer == "adam"
    head = (["recipe", "role", "a", "init", "LR c"]
            + (["eps", "wd (AdamW)"] if adam else ["wd (L2)"]) + ["source"])
    width = len(head) if sources else len(head) - 1
    rows = [head[:width], ["---"] * width]
    for name in names:
        recipe = RECIPES[name]
        for role in ROLES:
            rule = recipe.rules.get(role)
            if rule is None:
                continue
            b = rule.b.text
            std = "1" if b == "1" else f"{b}^2" if b.replace(".", "").replace("_", "").isalnum() \
                else f"({b})^2"
            init = {"zeros": "0", "ones": "1", "constant": b}.get(rule.init, f"N(0, {std})")
            c = rule.c_adam if adam else rule.c_sgd
            source = rule.source + (f"; {rule.adam_source}" if adam else "")
            extra = ([rule.eps.text, rule.wd_adam.text] if adam and c is not None else
                     ["-", "-"] if adam else [rule.wd_sgd.text])
            rows.append([name, role, rule.a.text, init, "-" if c is None else c.text, *extra,
                         source][:width])
        rows.append([name, "attention", recipe.attention.text, "", "",
                     *([""] * (2 if adam else 1)), recipe.attention_source][:width])
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)

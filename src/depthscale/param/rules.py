"""The one rule table: for every recipe and role, the abc-triple and its paper source.

A rule gives, for one parameter of a given role,

* ``a``: the forward multiplier (the layer computes ``a * W x``),
* ``b``: the initial standard deviation of the entries of ``W`` (or a constant init),
* ``c_sgd`` / ``c_adam``: the learning-rate multiplier applied to the user's base LR,
* ``wd`` / ``eps``: weight-decay and Adam-epsilon multipliers.

Every entry is an :class:`Expr`: a formula string (what ``explain`` prints and what the docs
table shows) and the function that evaluates it on a :class:`Dims`. This table is the source of
truth; models never hard-code scaling.

Symbols: ``n`` width (residual-stream width; ``D`` for Chizat's model), ``L`` number of
residual blocks (hidden layers for a plain MLP), ``fan_in`` of the parameter, ``T`` time horizon,
``M`` hidden width of a two-layer-perceptron block, ``q = E[phi'(Z)^2]``, ``K = L`` residual blocks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = [
    "RECIPES",
    "ROLES",
    "Dims",
    "Expr",
    "Recipe",
    "Rule",
]

#: Parameter roles. ``branch`` is the single layer of a one-layer residual block; ``branch_in``
#: and ``branch_out`` the first and last internal layers of a multi-layer block; ``vector``
#: biases; ``norm`` normalisation gains; ``token`` class tokens and positional embeddings.
ROLES: dict[str, str] = {
    "input": "first layer: reads the data (embedding, stem, patch projection)",
    "hidden": "plain hidden layer outside any residual branch",
    "branch": "the layer of a one-layer residual block (writes to the residual stream)",
    "branch_in": "first internal layer of a multi-layer residual block (internal representation)",
    "branch_out": "last internal layer of a multi-layer residual block (writes to the stream)",
    "output": "readout / classifier head",
    "vector": "bias vector",
    "norm": "normalisation gain (LayerNorm/BatchNorm weight)",
    "token": "class token or learned positional embedding",
}


@dataclass(frozen=True)
class Dims:
    """The sizes a rule is evaluated on: the plan's settings plus one parameter's fan-in."""

    n: int
    L: int
    fan_in: int = 1
    T: float = 1.0
    M: int = 1
    q: float = 0.5
    alpha: float = 1.0  # mean-ode: sigma_v = alpha sqrt(D)
    output_alpha: float = 1.0  # nfd Eq. 1: alpha = 1/sqrt(n) (feature learning) or 1 (kernel)
    sigma_u: float = 1.0
    eta_u_scale: float = 1.0


@dataclass(frozen=True)
class Expr:
    """A formula as printed and as evaluated."""

    text: str
    fn: Callable[[Dims], float] = field(compare=False, repr=False)

    def __call__(self, dims: Dims) -> float:
        return float(self.fn(dims))


def _const(value: float) -> Expr:
    return Expr(f"{value:g}", lambda _d: value)


ONE = _const(1.0)
ZERO = _const(0.0)


@dataclass(frozen=True)
class Rule:
    """abc-triple (plus weight-decay and Adam-eps multipliers) for one role under one recipe.

    ``init`` is ``"normal"`` (entries ~ N(0, b^2)), ``"zeros"`` or ``"ones"``. ``c_adam`` is
    ``None`` where the recipe's paper defines no Adam rule.
    """

    a: Expr
    b: Expr
    c_sgd: Expr
    c_adam: Expr | None
    source: str
    init: str = "normal"
    wd: Expr = ONE
    eps: Expr = ONE


@dataclass(frozen=True)
class Recipe:
    """A named parameterization: a rule per role and the paper it comes from."""

    name: str
    summary: str
    source: str
    rules: dict[str, Rule]
    options: dict[str, float | str] = field(default_factory=dict)


def _e(text: str, fn: Callable[[Dims], float]) -> Expr:
    return Expr(text, fn)


# ---- shared expressions --------------------------------------------------------------------
_INV_SQRT_FAN_IN = _e("1/sqrt(fan_in)", lambda d: 1 / math.sqrt(d.fan_in))
_N = _e("n", lambda d: d.n)
_INV_SQRT_N = _e("1/sqrt(n)", lambda d: 1 / math.sqrt(d.n))
_TOKEN_STD = _const(0.02)


def _vectors(c_sgd: Expr, c_adam: Expr | None, source: str) -> dict[str, Rule]:
    """Bias, norm-gain and token rules shared by a family of recipes."""
    return {
        "vector": Rule(ONE, ZERO, c_sgd, c_adam, source, init="zeros"),
        "norm": Rule(ONE, ONE, c_sgd, c_adam, source, init="ones"),
        "token": Rule(ONE, _TOKEN_STD, c_sgd, c_adam, "laws Sec. 3.1 (small-std token init)"),
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
_EQ1 = "nfd Eq. 1"
_mf_input = Rule(
    _e("1/sqrt(d)", lambda d: 1 / math.sqrt(d.fan_in)), ONE, _N, ONE, _EQ1 + " (h0 = U x/sqrt(d))"
)
_mf_hidden = Rule(_INV_SQRT_FAN_IN, ONE, _N, _e("1/sqrt(n)", lambda d: 1 / math.sqrt(d.n)),
                  "muP (nfd Eq. 1 without depth factor)")
_mf_output = Rule(
    _e("alpha/sqrt(n)", lambda d: d.output_alpha / math.sqrt(d.n)),
    ONE,
    _N,
    ONE,
    _EQ1 + " (f = alpha/sqrt(n) v^T h_L)",
)
_mf_vectors = _vectors(_N, ONE, "muP vectors (SGD LR x n, Adam x 1)")

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
        **_mf_vectors,
    },
    {"regime": "feature"},
)

_DEPTH_A = _e("sqrt(T/(L fan_in))", lambda d: math.sqrt(d.T / (d.L * d.fan_in)))
_DEPTH_C_ADAM = _e("sqrt(T/(L n))", lambda d: math.sqrt(d.T / (d.L * d.n)))
_depth_branch = Rule(_DEPTH_A, ONE, _N, _DEPTH_C_ADAM, _EQ1 + " (branch sqrt(T/(L n)))")
_depth_branch_in = Rule(
    _INV_SQRT_FAN_IN, ONE, _N, _DEPTH_C_ADAM, "nfd Eq. 6 (x = W1 h/sqrt(n)), LR eta_c n"
)
_depth_branch_out = Rule(_DEPTH_A, ONE, _N, _DEPTH_C_ADAM, "nfd Eq. 6 (W2 phi(x)/sqrt(L n))")

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
        **_mf_vectors,
    },
    {"regime": "feature"},
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
            _e("n sqrt(L)", lambda d: d.n * math.sqrt(d.L)),
            _e("sqrt(T/n)", lambda d: math.sqrt(d.T / d.n)),
            "nfd Eq. 8 (eta_1 = eta_c n sqrt(L)); Adam: same sqrt(L) correction (extension)",
        ),
    },
    {"regime": "feature"},
)

# ---- CompleteP: branch multiplier 1/L (Dey et al. 2025) -------------------------------------
_CP = "CompleteP (branch T/L; Dey et al. 2025)"
_CP_A = _e("(T/L)/sqrt(fan_in)", lambda d: (d.T / d.L) / math.sqrt(d.fan_in))
_CP_C_SGD = _e("n L/T", lambda d: d.n * d.L / d.T)
_cp_branch = Rule(_CP_A, ONE, _CP_C_SGD, _INV_SQRT_N, _CP)
COMPLETEP = Recipe(
    "completep",
    "CompleteP: residual branch multiplier T/L. SGD branch LR eta_c n L/T (per-block update "
    "O(1/L)); Adam branch LR eta_c/sqrt(n), independent of depth.",
    "CompleteP (Dey et al. 2025), in the mean-field form of nfd Eq. 1",
    {
        "input": _mf_input,
        "hidden": _mf_hidden,
        "branch": _cp_branch,
        "branch_in": Rule(_INV_SQRT_FAN_IN, ONE, _CP_C_SGD, _INV_SQRT_N, _CP),
        "branch_out": _cp_branch,
        "output": _mf_output,
        **_mf_vectors,
    },
    {"regime": "feature"},
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
            _e("1/D", lambda d: 1 / d.fan_in),
            _e("sigma_u", lambda d: d.sigma_u),
            _e("L M eta_u_scale", lambda d: d.L * d.M * d.eta_u_scale),
            None,
            _CH + " (u^T h / D, LR eta_u L M)",
        ),
        "branch_out": Rule(
            _e("1/(L M)", lambda d: 1 / (d.L * d.M)),
            _e("alpha sqrt(D)", lambda d: d.alpha * math.sqrt(d.n)),
            _e("L M", lambda d: d.L * d.M),
            None,
            _CH + " (v rho(.)/(L M), LR eta_v L M)",
        ),
    },
    {"alpha": 1.0, "sigma_u": "sqrt(D)", "eta_u_scale": 1.0},
)

# ---- laws: He fan-in init, residual K^(-1/2), one LR (laws Sec. 3.1) --------------------------
_LAWS = "laws Sec. 3.1 Eq. 1"
_laws_plain = Rule(
    ONE, _e("1/sqrt(q fan_in)", lambda d: 1 / math.sqrt(d.q * d.fan_in)), ONE, ONE, _LAWS
)
_laws_branch = Rule(
    ONE,
    _e("1/sqrt(q K fan_in)", lambda d: 1 / math.sqrt(d.q * d.L * d.fan_in)),
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

"""The laws claims' settings as data: the architectures of laws Sec. 4.2 / Tables 1 and 3 (plain
CNNs of Eq. 3, conv ResNets with effective depth L = m + K of Sec. 3.4, Post-LN ViTs with plain
fan-in init of Sec. 3.5), the per-scale budgets (quick, medium, full, smoke) of every claim, the
negative controls, the law band alpha in [-1.9, -1.0] around the paper's -3/2 (Eq. 9), and the
sequential seed rounds of laws-table1's medium cnn1d sweep (sequential.py).

Each claim's scales are one :class:`Scales` record, passed whole to ``@claim``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from depthscale.claims.registry import Control

__all__ = [
    "ABLATIONS", "AMMUP", "ARCHS_FULL", "ARCHS_MEDIUM", "ARCHS_QUICK", "FIG3B", "LAW_BAND",
    "R2_MIN", "SEED_ROUNDS", "STEEPENING", "TABLE1", "TRANSFER", "WIDTHS", "Arch", "Scales",
    "family_parts",
]

#: one architecture of a sweep: model, dataset, input shape, width, depths, LR grid (``lrs`` or
#: ``lr_logspace``) and optionally model ``options``, ``data``, ``recipe``, ``optimizer``,
#: ``steps`` (its run length, over the scale's)
Arch = dict[str, Any]

#: the law band on alpha (laws Table 1: -3/2 within the spread the paper reports)
LAW_BAND: tuple[float, float] = (-1.9, -1.0)


def family_parts(given: int | None, archs: Mapping[str, Any] | None) -> int:
    """The parts a laws claim reads its contradictions over, family-wise (1 - 0.05/parts):
    its settings' ``family_parts`` (``given``) where set, else one per architecture run.
    Table 1 sets it to its four architectures, so that a run of fewer (``reproduce --set
    archs.vit=null``) judges each at the level it has within the whole claim."""
    return int(given or len(archs or {}))


#: the ablations' R^2 floor (laws Table 3)
R2_MIN = 0.7


class _RequiredScales(TypedDict):
    quick: Mapping[str, Any]
    full: Mapping[str, Any]
    smoke: Mapping[str, Any]


class Scales(_RequiredScales, total=False):
    """A claim's settings per scale and its negative control: the keywords of ``@claim``."""

    medium: Mapping[str, Any]
    control: Control


#: the negative control of the law claims (see sweeps.sweep_recipe). contrast=False: at the smoke
#: size (3 depths, 3 LRs, 0.1 epoch of 256 samples, ~seconds) eta* is not resolved, so the
#: correct recipe does not pass there either; only the quick scale shows the contrast
WRONG_RECIPE = Control(
    "standard parameterization (N(0, 1/fan_in), no He q = 1/2 and no residual K^(-1/2)) "
    "instead of the laws recipe", {"recipe": "sp"}, contrast=False)

_MNIST1D_HALF = {"n_train": 2000}  # half of MNIST-1D's training set per epoch
# plain CNN as laws Sec. 4.2: identical conv+ReLU layers, stride 1, circular padding, GAP head
CNN1D: Arch = {"model": "cnn1d", "dataset": "mnist1d", "input_shape": [1, 40], "width": 32,
               "options": {"padding": "circular"}}
CONVRESNET1D: Arch = {"model": "convresnet1d", "dataset": "mnist1d", "input_shape": [1, 40],
                      "width": 32, "data": _MNIST1D_HALF}
# ViT as laws Table 1/3: Post-LN, ReLU, plain fan-in init (Sec. 3.5: no K^(-1/2) on branches)
VIT1D: Arch = {
    "model": "vit", "dataset": "mnist1d", "input_shape": [1, 40], "width": 32,
    "recipe": "laws-fanin", "data": _MNIST1D_HALF,
    "options": {"patch_size": 4, "heads": 4, "norm": "post", "activation": "relu"},
}
#: Table 1's MNIST-1D (laws Sec. 4.1 trains one epoch): a set generated larger (the mnist1d
#: generator's ``samples``, 80% for training) so that one to three passes over it are a
#: paper-like run, not many passes over 4000 signals. Quick: 8000 training signals, 63 steps
#: a pass (about twice the steps of one pass over 4000); medium: 32000, 250 steps a pass
_T1_QUICK_DATA = {"samples": 10000, "n_test": 1000}
_T1_MEDIUM_DATA = {"samples": 40000, "n_test": 1000}
#: the ResNet fitted on its blocks K, as laws Sec. 4.3 measures Table 1's ResNet ("we define
#: depth L by the number of residual blocks"); L = m + K (Sec. 3.4) is reported beside it
_ON_BLOCKS = {"fit_on": "blocks"}
ARCHS_QUICK: dict[str, Arch] = {
    # 8 depths x 12 LRs x 3 seeds, one pass over 8000 generated signals
    "cnn1d": {**CNN1D, "depths": [2, 3, 4, 5, 6, 8, 11, 16], "lr_logspace": [-3, 0.5, 12],
              "data": _T1_QUICK_DATA},
    "convresnet1d": {**CONVRESNET1D, "depths": [1, 2, 4, 8, 16], "lr_logspace": [-3, 0.5, 12],
                     "data": _T1_QUICK_DATA, **_ON_BLOCKS},
    # sklearn digits cannot be generated larger: one pass over its 1437 images, 12 steps
    "cnn2d": {"model": "cnn2d", "dataset": "digits", "input_shape": [1, 8, 8], "width": 32,
              "options": {"padding": "circular"}, "depths": [2, 3, 4, 6, 8],
              "lr_logspace": [-3, 0.5, 12]},
    "vit": {**VIT1D, "depths": [1, 2, 3, 4, 6], "lr_logspace": [-4, 0, 12],
            "data": _T1_QUICK_DATA},
}
ARCHS_FULL: dict[str, Arch] = {
    "cnn2d": {"model": "cnn2d", "dataset": "cifar10", "input_shape": [3, 32, 32], "width": 64,
              "options": {"padding": "circular"}, "depths": [2, 3, 4, 6, 8, 12, 16, 24],
              "lr_logspace": [-4, 1, 80]},
    "convresnet2d": {"model": "convresnet2d", "dataset": "cifar10", "input_shape": [3, 32, 32],
                     "width": 64, "depths": [2, 4, 8, 16, 32, 64], "lr_logspace": [-4, 1, 80]},
    "vit": {"model": "vit", "dataset": "cifar10", "input_shape": [3, 32, 32], "width": 384,
            "recipe": "laws-fanin", "depths": [2, 4, 6, 8, 12, 16], "lr_logspace": [-5, 0, 80],
            "options": {"patch_size": 4, "heads": 6, "norm": "post", "activation": "relu"}},
}

#: quick scale: one epoch (laws Sec. 4.1), 3 seeds, no final training-set pass (the criteria
#: read training losses recorded during the run)
_QUICK_BUDGET = {"seeds": 3, "epochs": 1, "data": {}, "final_eval": "test"}
#: medium scale: a two-stage LR grid (0.35 decades on one seed, then 0.1 decades within half a
#: decade of that optimum on every seed) and deeper nets than quick; every laws claim trains
#: over Table 1's generated set by passes, as the paper's epochs (run costs:
#: docs/performance.md)
_REFINE = {"half_width": 0.5, "step": 0.1}
#: cnn1d's depths: at L = 2-16 (7 depths) its alpha sat on the -1.9 edge however many seeds
#: (the depths' scatter about the line, not the seeds, held most of the slope's variance); the
#: design's added-depths estimate (sequential.added_depths) named L = 13, 14, 15, and with them
#: round 1 decides it (docs/results.md)
_CNN1D_MEDIUM_DEPTHS = [2, 3, 4, 6, 8, 11, 13, 14, 15, 16]
ARCHS_MEDIUM: dict[str, Arch] = {
    "cnn1d": {**CNN1D, "depths": _CNN1D_MEDIUM_DEPTHS, "lr_logspace": [-3, 0.5, 11]},
    "convresnet1d": {**CONVRESNET1D, "data": {}, "depths": [1, 2, 4, 8, 16, 32],
                     "lr_logspace": [-3, 0.5, 11]},
    "cnn2d": {**ARCHS_QUICK["cnn2d"], "lr_logspace": [-3, 0.5, 11]},
    "vit": {**VIT1D, "width": 64, "data": {}, "depths": [1, 2, 3, 4, 6, 8],
            "lr_logspace": [-4, 0, 12]},
}
#: the smoke size (seconds): a width-8 cnn1d at 3 depths and 3 LRs on 256 signals
_SMOKE_CNN1D: Arch = {**{k: v for k, v in ARCHS_QUICK["cnn1d"].items() if k != "data"},
                      "width": 8, "depths": [1, 2, 3], "lr_logspace": [-2, 0, 3]}
_SMOKE_DATA = {"n_train": 256, "n_test": 64}
#: the smoke size of the claims that fit a slope (seconds a sweep): 0.1 epoch is one step,
#: whose loss does not depend on the LR, so every optimum sits on the grid's edge and no slope
#: is left once edge optima are excluded; 32 steps at 4 depths x 9 LRs locate eta* in the
#: grid's interior, and alpha has stopped moving by then (docs/results.md)
_SMOKE_FIT_CNN1D: Arch = {**_SMOKE_CNN1D, "depths": [1, 2, 4, 8], "lr_logspace": [-3, 1, 9]}
_SMOKE_FIT = {"seeds": 1, "steps": 32, "data": _SMOKE_DATA}

#: the negative control of the slope claims: an extra LR multiplier L^(3/2) on every layer
#: (the depth correction applied the wrong way). A run at LR eta is the one this rule makes
#: at nominal eta / L^(3/2) (sequential.sweep_stages), so eta* and alpha move by -3/2 under the
#: same runs and gates, and the AM-muP route's eta* too (sweeps.probe_etas). (The standard
#: parameterization, the earlier control, leaves both routes undecided at smoke and quick: its
#: smoke FAIL came from edge optima fitted as a slope of 0.) contrast=False: the smoke slope
#: of the right rule straddles the band's edge
WRONG_LR_RULE = Control("an extra LR multiplier L^(3/2) on every layer (the depth correction "
                        "applied the wrong way)", {"lr_depth_exponent": 1.5}, contrast=False)

#: the AM-muP route of laws-table1 (probes at init, as laws-ammup's): init seeds and batch
_PROBES = {"probe_seeds": 16, "batch": 128}

#: laws-table1's medium seeds for every architecture (claims/laws/sequential.py; the
#: architectures run in turn, so a --budget spent on cnn1d leaves the others their round 1
#: only): the fine grid on 4 seeds at
#: every depth, then rounds to 6 and 8 seeds only at the depths and LRs that decide, while the
#: part is undecided. Not 3 first: the change of alpha from half the run length (the
#: still-moving gate) is a t-interval over seeds, t(0.975, 2) = 4.3 at 3 seeds against 3.2 at
#: 4, so 3 seeds would rarely bound it within +-0.3 (run costs: docs/performance.md)
SEED_ROUNDS = [4, 6, 8]

#: laws-table1 at medium: Table 1's one-epoch protocol over 32000 generated signals, trained
#: three passes (750 steps) so that passes 1-3 are reported (Table 4 reads epochs 1-3), the
#: band read at pass 1. cnn2d is left out: digits cannot be generated larger, and one to
#: three passes over its 1437 images (12-36 steps) learn nothing
_TABLE1_MEDIUM = {k: arch | {"seed_rounds": SEED_ROUNDS, "data": _T1_MEDIUM_DATA}
                  | (_ON_BLOCKS if k == "convresnet1d" else {})
                  for k, arch in ARCHS_MEDIUM.items() if k != "cnn2d"}
_T1_MEDIUM_BUDGET = {"epochs": 3, "judged_epoch": 1, "seeds": 5, "refine": _REFINE, "data": {}}
#: the budget of another claim that trains laws-table1's medium runs of round 1 (with
#: :func:`_round1`'s architecture): its fine stage on round 1's seeds alone
_T1_ROUND1_BUDGET = {**_T1_MEDIUM_BUDGET, "seeds": SEED_ROUNDS[0]}
#: the smoke size: one pass over the 4000 signals is the smoke's 32 steps
_T1_SMOKE = {"seeds": 1, "epochs": 1, "judged_epoch": 1, "data": {"n_test": 64}}


def _round1(key: str) -> Arch:
    """laws-table1's medium ``key`` without its seed rounds: with :data:`_T1_ROUND1_BUDGET`,
    another claim's settings that train the same runs as laws-table1's round 1."""
    return {k: v for k, v in _TABLE1_MEDIUM[key].items() if k != "seed_rounds"}


TABLE1 = Scales(
    quick={"archs": ARCHS_QUICK, **_QUICK_BUDGET, "judged_epoch": 1, **_PROBES,
           "family_parts": len(ARCHS_QUICK)},
    medium={"archs": _TABLE1_MEDIUM, **_T1_MEDIUM_BUDGET, **_PROBES,
            "family_parts": len(_TABLE1_MEDIUM)},
    full={"archs": {k: arch | (_ON_BLOCKS if k == "convresnet2d" else {})
                    for k, arch in ARCHS_FULL.items()},
          "seeds": 3, "epochs": 3, "judged_epoch": 1, "data": {}, **_PROBES,
          "family_parts": len(ARCHS_FULL)},
    smoke={"archs": {"cnn1d": _SMOKE_FIT_CNN1D}, **_T1_SMOKE, "probe_seeds": 8, "batch": 16},
    control=WRONG_LR_RULE,
)

#: laws-steepening (our finding): alpha read at the end of each pass of one cnn1d sweep.
#: Quick: three passes over 8000 generated signals (63, 126, 189 steps), 7 depths x 12 LRs x
#: 3 seeds; medium: Table 1's medium cnn1d sweep, round 1 (its studies, shared)
_STEEP_QUICK_ARCH = {**ARCHS_QUICK["cnn1d"], "depths": [2, 3, 4, 6, 8, 11, 16]}
STEEPENING = Scales(
    quick={"arch": _STEEP_QUICK_ARCH, "passes": [1, 2, 3], **_QUICK_BUDGET, "epochs": 3},
    medium={"arch": _round1("cnn1d"), "passes": [1, 2, 3], **_T1_ROUND1_BUDGET},
    full={"arch": ARCHS_FULL["cnn2d"], "passes": [1, 2, 3], "seeds": 3, "epochs": 3,
          "data": {}},
    # two passes of 16 steps over 2048 signals: the smoke's 32 steps
    smoke={"arch": _SMOKE_FIT_CNN1D, "passes": [1, 2], "seeds": 1, "epochs": 2,
           "data": {"n_train": 2048, "n_test": 64}},
    # every length the same pass: alpha cannot change between them, so the finding that it
    # steepens must FAIL (the change is 0 on an interval of width 0). contrast=False: at the
    # smoke size the change's interval straddles the band's edge
    control=Control("every length read at the first pass (same_pass): no training between "
                    "them", {"same_pass": True}, contrast=False),
)

TRANSFER = Scales(
    quick={"archs": ARCHS_QUICK,
           "source_depths": {"cnn1d": 5, "convresnet1d": 4, "cnn2d": 4, "vit": 3},
           "verdict_on": "vit", **_QUICK_BUDGET},
    # Table 5 is the ViT's, and the band reads the ViT alone: medium sweeps it alone. Its budget
    # is Table 5's three epochs (App. E.4: oracles tuned "under the same three-epoch budget",
    # epoch-3 losses): three passes over Table 1's generated set, read at the third. The sweep
    # is laws-table1's medium ViT at round 1, so the two claims train it once
    medium={"archs": {"vit": _round1("vit")}, "source_depths": {"vit": 4}, "verdict_on": "vit",
            **_T1_ROUND1_BUDGET, "judged_epoch": 3},
    full={"archs": {"vit": {**ARCHS_FULL["vit"], "depths": [2, 4, 6, 8, 10, 12, 16, 20]}},
          "source_depths": {"vit": 12}, "verdict_on": "vit", "seeds": 3, "epochs": 3,
          "data": {}},
    smoke={"archs": {"cnn1d": _SMOKE_CNN1D}, "source_depths": {"cnn1d": 2},
           "verdict_on": "cnn1d", "seeds": 1, "epochs": 0.1, "data": _SMOKE_DATA},
    # a constant LR ("raw" transfer under another name): no gain over raw transfer, by
    # construction; the check's band excludes the null. contrast=False: the smoke sweep (3 LRs,
    # 0.1 epoch) cannot locate eta*, so the correct rule does not pass there
    control=Control("a constant LR across depths (transfer exponent 0 instead of -3/2)",
                    {"transfer_exponent": 0.0}, contrast=False),
)

#: laws-ammup's probe-only depths (layers for cnn1d, blocks for the ViT)
_DEEP_DEPTHS = {"cnn1d": [24, 32, 48, 64, 96, 128], "vit": [8, 12, 16, 24, 32]}

AMMUP = Scales(
    # init seeds per depth: one probe's log10 eta* scatters by tenths of a decade
    # (docs/how-it-works.md, "Why the claims' settings"), and probes cost no training, so
    # enough of them to give the slope an interval that can decide
    # deep_depths: probes only (no training), so the AM-muP slope is also read far past the
    # grid's depths, to L of order 64-128 (a probe costs one forward and backward per seed)
    quick={"archs": {k: ARCHS_QUICK[k] for k in ("cnn1d", "vit")}, "probe_seeds": 16,
           "batch": 128, "deep_depths": _DEEP_DEPTHS, **_QUICK_BUDGET},
    # medium: the grid route is laws-table1's medium sweeps, read at pass 1, their seed rounds
    # decided alike (Table 1's family_parts), so the two claims train them once
    medium={"archs": {k: _TABLE1_MEDIUM[k] for k in ("cnn1d", "vit")}, "probe_seeds": 16,
            "batch": 128, "deep_depths": _DEEP_DEPTHS, **_T1_MEDIUM_BUDGET,
            "family_parts": len(_TABLE1_MEDIUM)},
    full={"archs": {"cnn2d": ARCHS_FULL["cnn2d"]}, "probe_seeds": 16, "batch": 128,
          "seeds": 3, "epochs": 1, "data": {}},
    smoke={"archs": {"cnn1d": _SMOKE_CNN1D}, "probe_seeds": 8, "batch": 16, "seeds": 1,
           "epochs": 0.1, "data": _SMOKE_DATA},
    # the one-step change the probe linearises is proportional to every layer's LR, so an
    # extra multiplier L^(3/2) on all of them divides the eta* solving S = 1 by L^(3/2): the
    # slope moves by -3/2 under the same probe noise. (The standard parameterization, the other
    # claims' control, leaves the probe too noisy to decide at smoke size.) contrast=False:
    # the smoke grid search cannot locate eta*, so the correct run does not pass there
    control=Control("an extra LR multiplier L^(3/2) on every layer (the depth correction "
                    "applied the wrong way)", {"lr_depth_exponent": 1.5}, contrast=False),
)


# laws Table 3 and App. E.2-E.3: each variant changes one thing of its family's baseline
_ADAM_LRS = {"lr_logspace": [-4.5, -1, 12]}
# each family's baseline at the ablation grid (smaller than Table 1's, 13 studies in all), on
# the data of its Table 1 sweep
_CNN_BASE = {**CNN1D, "depths": [2, 3, 4, 6, 8], "lr_logspace": [-3, 0.5, 12]}
_RESNET_BASE = {**CONVRESNET1D, "depths": [1, 2, 4, 8, 16], "lr_logspace": [-3, 0.5, 12]}
_VIT_BASE = {**VIT1D, "depths": [1, 2, 3, 4, 6], "lr_logspace": [-4, 0, 12]}


def _options(base: Arch, **changes: Any) -> Arch:
    """``base`` with its model options updated by ``changes`` (one ablation variant)."""
    return {**base, "options": {**base.get("options", {}), **changes}}


def _ablations(cnn: Arch, resnet: Arch, vit: Arch, adam: Mapping[str, Any]) -> dict[str, Arch]:
    """The 13 variants of laws Table 3 from each family's baseline and the Adam LR grid."""
    return {
        "cnn-baseline": cnn,
        "cnn-gelu": _options(cnn, activation="gelu"),
        "cnn-adam": {**cnn, **adam},
        "cnn-zero-padding": _options(cnn, padding="zero"),
        "cnn-kernel4": _options(cnn, kernel_size=4),
        "cnn-kernel5": _options(cnn, kernel_size=5),
        "resnet-baseline": resnet,
        "resnet-batchnorm": _options(resnet, batchnorm=True),
        "resnet-dropout": _options(resnet, dropout=0.1),
        "resnet-adam": {**resnet, **adam},
        "vit-post-ln": vit,
        "vit-pre-ln": _options(vit, norm="pre"),
        # the K^(-1/2) of Eq. 5 on the ViT's branches too (not the paper's Transformer setting)
        "vit-branch-scaled": {**vit, "recipe": "laws"},
    }


_ABLATIONS_QUICK = _ablations(_CNN_BASE, _RESNET_BASE, _VIT_BASE,
                              {**_ADAM_LRS, "optimizer": "adam"})

ABLATIONS = Scales(
    quick={"variants": _ABLATIONS_QUICK, **_QUICK_BUDGET, "seeds": 2},
    # Table 3 reads Sec. 4.1's one-epoch optimum: one pass (250 steps) over Table 1's medium
    # set, judged at its end, not about 10 passes over 3200 signals, which read the steepening
    # laws-steepening measures. 13 variants: 3 seeds and a fine stage of +-0.4 decades keep its
    # cost a medium one (docs/performance.md)
    medium={"variants": {k: {**v, "data": _T1_MEDIUM_DATA} for k, v in _ABLATIONS_QUICK.items()},
            "epochs": 1, "judged_epoch": 1, "seeds": 3, "refine": {"half_width": 0.4, "step": 0.1},
            "data": {}},
    full={"variants": _ablations(ARCHS_FULL["cnn2d"], ARCHS_FULL["convresnet2d"],
                                 ARCHS_FULL["vit"],
                                 {"optimizer": "adam", "lr_logspace": [-5.5, 0, 80]}),
          "seeds": 3, "epochs": 1, "data": {}},
    smoke={"variants": {"cnn-baseline": {**_ABLATIONS_QUICK["cnn-baseline"],
                                         **_SMOKE_FIT_CNN1D},
                        "cnn-adam": {**_ABLATIONS_QUICK["cnn-adam"], **_SMOKE_FIT_CNN1D,
                                     "lr_logspace": [-4.5, -0.5, 9]}},
           **_SMOKE_FIT},
    control=WRONG_LR_RULE,
)

WIDTHS = Scales(
    quick={"arch": {**VIT1D, "depths": [1, 2, 4, 6], "lr_logspace": [-4, 0, 10]},
           "widths": [16, 32, 64], **_QUICK_BUDGET, "epochs": 3, "seeds": 2},
    medium={"arch": {**VIT1D, "data": {}, "depths": [1, 2, 4, 6, 8], "lr_logspace": [-4, 0, 12]},
            "widths": [16, 32, 64], "epochs": 3, "seeds": 3, "refine": _REFINE, "data": {}},
    full={"arch": {**ARCHS_FULL["vit"], "depths": [2, 4, 6, 8, 12, 16]},
          "widths": [288, 384, 480], "epochs": 3, "seeds": 3, "data": {}},
    # two epochs of 16 steps (2048 signals) at 6 depths, so each epoch's eta* lies inside the
    # grid; 2 seeds, so that the control's slope interval clears the band at the family-wise
    # level of its 4 parts (one seed: w32 epoch 2's reached -1.91, against the edge -1.9; two:
    # w16 epoch 2's [-4.0, -2.49])
    smoke={"arch": {**CNN1D, "width": 8, "depths": [1, 2, 3, 4, 6, 8],
                    "lr_logspace": [-3, 1, 9]},
           "widths": [8, 16], "epochs": 2, "seeds": 2, "data": {"n_train": 2048, "n_test": 64}},
    control=WRONG_LR_RULE,
)


def _table1_resnet(t1: Mapping[str, Any], key: str) -> dict[str, Any]:
    """laws-table1's ResNet ``key`` in Table 1's settings ``t1`` of one scale, with their
    budget, as laws-fig3b's settings: the same arch and budget write the same study tables
    (study ``laws-<key>``), so one ``reproduce laws-table1 laws-fig3b`` trains the sweep
    once; ``family_parts`` as Table 1's,
    so a sequential sweep's seed rounds are decided alike."""
    return {"arch_key": key, "arch": t1["archs"][key],
            **{k: v for k, v in t1.items() if k not in ("archs", "probe_seeds", "batch")}}


#: laws-fig3b's smoke (seconds): a width-8 ResNet at 3 block counts x 5 LRs, 32 steps over 256
#: signals, 2 seeds (the deviations' intervals are a seed bootstrap: one seed has none)
_SMOKE_RESNET: Arch = {**{k: v for k, v in CONVRESNET1D.items() if k != "data"}, "width": 8,
                       "depths": [1, 2, 4], "lr_logspace": [-1.5, 0.5, 5], **_ON_BLOCKS}

FIG3B = Scales(
    quick=_table1_resnet(TABLE1["quick"], "convresnet1d"),
    medium=_table1_resnet(TABLE1["medium"], "convresnet1d"),
    full=_table1_resnet(TABLE1["full"], "convresnet2d"),
    smoke={"arch_key": "smoke-resnet", "arch": _SMOKE_RESNET, **_SMOKE_FIT, "seeds": 2},
    # PathSum's sum over one path of the effective depth L: S = L^3, (S)^(-1/2) = L^(-3/2),
    # AM-muP's own rule, so the two deviations are equal at every depth by construction and
    # "PathSum deviates more" must FAIL. contrast=False: the smoke sweep's deviations straddle
    control=Control("PathSum's path sum over one path of the effective depth (S = L^3, its "
                    "rule then AM-muP's L^(-3/2))", {"path_sum": "one-path"}, contrast=False),
)

"""laws-ablation-directions (laws Sec. 4.5): alpha(variant) - alpha(baseline), paired by seed,
against the direction the paper states. The judge is fed made-up laws with exact slopes (the
sweeps are laws-ablations', stubbed here); the smoke run and its control are in
test_reproduce.py."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import pytest

from depthscale.claims.laws import directions
from depthscale.claims.laws.law import LawResult, SlopeChange, probe_law
from depthscale.errors import ConfigError
from depthscale.stats.deciding import samples_to_decide
from depthscale.stats.sweeps import Optimum

#: laws Table 3's fitted alphas (zero padding: the baseline's slope, App. E.2)
TABLE3 = {"cnn-baseline": -1.339, "cnn-gelu": -1.379, "cnn-adam": -1.207,
          "cnn-zero-padding": -1.339, "resnet-baseline": -1.435, "resnet-batchnorm": -1.701,
          "resnet-dropout": -1.568, "resnet-adam": -1.269, "vit-post-ln": -1.178,
          "vit-pre-ln": -1.131}


def _law(alpha: float, offsets: tuple[float, ...] = (-0.001, 0.0, 0.001)) -> LawResult:
    """Optima with log10 eta* = -2 + alpha log10 L + offset(seed) at L = 4, 8, 16, 32: the
    seed mean lies on the law, and laws with the same offsets differ by the same amount at
    every seed."""
    optima = [Optimum(d, s, 10 ** (-2.0 + alpha * math.log10(d) + off), 0.0, False, "running")
              for d in (4, 8, 16, 32) for s, off in enumerate(offsets)]
    return probe_law(optima, seed=0)


def _judged(laws: dict[str, LawResult], monkeypatch: pytest.MonkeyPatch,
            against_itself: bool = False) -> tuple[directions.Directions, str, str]:
    monkeypatch.setattr(directions, "measure_ablations", lambda ctx, s: laws)
    m = directions.measure_directions(None, SimpleNamespace(  # type: ignore[arg-type]
        against_itself=against_itself))
    verdict, said = directions.judge_directions(m).decision
    return m, verdict, said


def test_table3_alphas_move_as_the_paper_says_and_pass(monkeypatch: pytest.MonkeyPatch):
    m, verdict, said = _judged({k: _law(a) for k, a in TABLE3.items()}, monkeypatch)
    assert verdict == "PASS", said
    expected = {d.variant: TABLE3[d.variant] - TABLE3[d.baseline] for d in directions.DIRECTIONS}
    assert {k: c.mean for k, c in m.changes.items()} == pytest.approx(expected, abs=1e-9)
    assert m.changes["resnet-batchnorm"].mean == pytest.approx(-0.266, abs=1e-9)
    assert m.changes["cnn-adam"].low == pytest.approx(0.132, abs=1e-9)  # paired: no spread
    assert "resnet-adam vs resnet-baseline: +0.166 [+0.166, +0.166]" in said


def test_adam_steeper_than_sgd_contradicts_and_fails(monkeypatch: pytest.MonkeyPatch):
    laws = {k: _law(a) for k, a in TABLE3.items()} | {"cnn-adam": _law(-1.45)}
    m, verdict, said = _judged(laws, monkeypatch)
    assert m.changes["cnn-adam"].mean == pytest.approx(-0.111, abs=1e-9)
    assert verdict == "FAIL"
    assert "cnn-adam vs cnn-baseline: -0.111 [-0.111, -0.111]" in said and "contradicts" in said


def test_a_change_inside_the_margin_contradicts_a_stated_direction(
        monkeypatch: pytest.MonkeyPatch):
    """BatchNorm steeper by 0.05, under the 0.06 margin (4% of 1.5, what the paper calls
    minimal): not the direction it states."""
    laws = {k: _law(a) for k, a in TABLE3.items()} | {"resnet-batchnorm": _law(-1.485)}
    _, verdict, said = _judged(laws, monkeypatch)
    assert verdict == "FAIL" and "resnet-batchnorm vs resnet-baseline: -0.05" in said


def test_seed_noise_across_the_margin_is_inconclusive(monkeypatch: pytest.MonkeyPatch):
    """Adam's seeds scattered by +-0.1 decades (the baseline's by 0.001): the change +0.13
    has an interval across +0.06, so it is undecided and the claim INCONCLUSIVE."""
    laws = {"cnn-baseline": _law(-1.339), "cnn-adam": _law(-1.207, (-0.1, 0.0, 0.1))}
    m, verdict, said = _judged(laws, monkeypatch)
    c = m.changes["cnn-adam"]
    assert c.low < directions.MARGIN < c.high and c.mean == pytest.approx(0.132, abs=1e-9)
    assert verdict == "INCONCLUSIVE" and "(paper: shallower: -1.339 -> -1.207): undecided" in said
    need = samples_to_decide(c.mean, c.low, c.high, (directions.MARGIN, None), 3,
                             t_interval=True).needed
    assert need is not None and need > 3
    assert said.endswith(f"the deciding run: the same sweeps at {need} seeds (seeds = {need})")


def test_an_estimate_near_its_edge_names_longer_training_not_hundreds_of_seeds(
        monkeypatch: pytest.MonkeyPatch):
    """Adam's change +0.065, 0.005 above the +0.06 margin, its seeds scattered by +-0.1: the
    interval needs far more than 4x the run's 3 seeds (the t-rule's count, over
    SEED_FACTOR), so the deciding run is the longer training of medium, naming that count."""
    laws = {"cnn-baseline": _law(-1.339), "cnn-adam": _law(-1.274, (-0.1, 0.0, 0.1))}
    m, verdict, said = _judged(laws, monkeypatch)
    c = m.changes["cnn-adam"]
    need = samples_to_decide(c.mean, c.low, c.high, (directions.MARGIN, None), 3,
                             t_interval=True).needed
    assert need is not None and need > directions.SEED_FACTOR * 3
    assert verdict == "INCONCLUSIVE"
    assert said.endswith(f"the deciding run: longer training, the next scale's settings (here "
                         f"an estimate sits so near its band's edge that its interval would "
                         f"need {need} seeds, {need / 3:.3g}x this run's) (--scale medium)")


def test_the_control_compares_each_variant_with_itself_and_fails(
        monkeypatch: pytest.MonkeyPatch):
    m, verdict, _ = _judged({k: _law(a) for k, a in TABLE3.items()}, monkeypatch,
                            against_itself=True)
    assert {(c.mean, c.low, c.high) for c in m.changes.values()} == {(0.0, 0.0, 0.0)}
    assert verdict == "FAIL"


def test_variants_without_a_pair_are_refused(monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(ConfigError, match="keep a variant and its baseline"):
        _judged({"cnn-baseline": _law(-1.3), "resnet-adam": _law(-1.2)}, monkeypatch)


def test_a_contradiction_while_alpha_still_moves_is_undecided(monkeypatch: pytest.MonkeyPatch):
    """Adam steeper than SGD (a contradiction) while Adam's alpha still changes by -0.4
    [-0.6, -0.2] from half the run length (past the laws gates' +-0.3 margin): undecided, as
    every laws band is at a length where alpha moves."""
    moving = SlopeChange(steps=16, mean=-0.4, low=-0.6, high=-0.2, n_seeds=3, n_depths=4)
    laws = {"cnn-baseline": _law(-1.339),
            "cnn-adam": dataclasses.replace(_law(-1.45), change=moving)}
    _, verdict, said = _judged(laws, monkeypatch)
    assert verdict == "INCONCLUSIVE"
    assert "cnn-adam vs cnn-baseline: -0.111 [-0.111, -0.111]" in said
    assert "undecided (cnn-adam: alpha changes by -0.4 [-0.6, -0.2] from 16" in said


def test_the_control_fails_even_where_alpha_still_moves(monkeypatch: pytest.MonkeyPatch):
    """Compared with its own runs, a variant's change is 0 at any training length, so the
    still-moving gate does not hide the control's FAIL."""
    moving = SlopeChange(steps=16, mean=-0.4, low=-0.6, high=-0.2, n_seeds=3, n_depths=4)
    laws = {"cnn-baseline": _law(-1.339),
            "cnn-adam": dataclasses.replace(_law(-1.207), change=moving)}
    _, verdict, said = _judged(laws, monkeypatch, against_itself=True)
    assert verdict == "FAIL" and said.endswith("contradicts")

"""The verdict rules of CLAIMS.md: routes (REFUTED needs two routes and a seen contrast) and the
noise gate (INCONCLUSIVE when the signal does not exceed its noise)."""

import pytest

from depthscale.stats.findings import Route, noise_gate, routes_verdict

S, C, U = "supports", "contradicts", "undecided"


def _routes(*findings: str) -> list[Route]:
    return [Route(f"r{i}", f, f"value {i}") for i, f in enumerate(findings)]


@pytest.mark.parametrize(
    ("findings", "seen", "want"),
    [
        ((S, S), True, "PASS"),
        ((S,), False, "PASS"),
        ((C, C), True, "REFUTED"),
        ((C, C), False, "FAIL"),      # a blind check cannot refute
        ((C,), True, "FAIL"),         # one route is not enough
        ((C, S), True, "FAIL"),       # disagreement: our code first
        ((C, U), True, "FAIL"),
        ((S, U), True, "INCONCLUSIVE"),
        ((U, U), True, "INCONCLUSIVE"),
        ((C, C, U), True, "REFUTED"),
    ],
)
def test_routes_verdict_classes(findings: tuple[str, ...], seen: bool, want: str) -> None:
    verdict, evidence = routes_verdict(_routes(*findings), contrast_seen=seen,
                                       contrast_evidence="gap slope +0.6")
    assert verdict == want
    for i, f in enumerate(findings):  # every route's evidence is carried
        assert f"r{i}: {f} (value {i})" in evidence
    if want in ("REFUTED", "FAIL") and C in findings:
        assert "gap slope +0.6" in evidence


def test_route_rejects_unknown_finding_and_empty_routes() -> None:
    with pytest.raises(ValueError, match="finding"):
        Route("x", "maybe", "")
    with pytest.raises(ValueError, match="at least one"):
        routes_verdict([], contrast_seen=True, contrast_evidence="")


def test_noise_gate() -> None:
    d = ("FAIL", "slope -0.2 outside band")
    assert noise_gate(d, signal=0.3, noise=0.1, what="w", decide="x") == d
    assert noise_gate(d, signal=-0.3, noise=0.1, what="w", decide="x") == d
    verdict, why = noise_gate(d, signal=0.05, noise=0.1, what="loss range over LRs",
                              decide="256 steps would decide it")
    assert verdict == "INCONCLUSIVE"
    assert "0.05" in why and "0.1" in why and "256 steps" in why and "FAIL" in why
    assert noise_gate(d, signal=float("nan"), noise=0.1, what="w", decide="x")[0] == "INCONCLUSIVE"


@pytest.mark.parametrize(
    ("low", "high", "band", "want"),
    [
        (-1.6, -1.2, (-1.9, -1.0), "supports"),
        (-1.9, -1.0, (-1.9, -1.0), "supports"),      # closed band
        (-0.9, -0.5, (-1.9, -1.0), "contradicts"),
        (-2.5, -2.0, (-1.9, -1.0), "contradicts"),
        (-1.2, -0.8, (-1.9, -1.0), "undecided"),
        (-3.0, 0.0, (-1.9, -1.0), "undecided"),
        (0.1, 0.3, (None, 0.0), "contradicts"),
        (-5.0, -0.1, (None, 0.0), "supports"),
        (float("nan"), -1.2, (-1.9, -1.0), "undecided"),
    ],
)
def test_interval_finding(low: float, high: float, band: tuple, want: str) -> None:
    from depthscale.stats.findings import interval_finding

    assert interval_finding(low, high, band) == want


def test_findings_verdict() -> None:
    from depthscale.stats.findings import findings_verdict

    assert findings_verdict({"a": (S, "x"), "b": (S, "y")}) == ("PASS", "")
    verdict, why = findings_verdict({"a": (S, "x"), "b": (U, "ci [-1.2, -0.8]")})
    assert verdict == "INCONCLUSIVE" and why == "b: undecided (ci [-1.2, -0.8])"
    verdict, why = findings_verdict({"a": (C, "ci [-0.9, -0.5]"), "b": (U, "flat")})
    assert verdict == "FAIL" and "a: contradicts (ci [-0.9, -0.5])" in why and "b: undecided" in why
    with pytest.raises(ValueError):
        findings_verdict({})
    with pytest.raises(ValueError):
        findings_verdict({"a": ("maybe", "")})


@pytest.mark.parametrize(
    ("low", "high", "sign", "want"),
    [
        (-0.3, -0.1, -1, "supports"),
        (0.0, 0.0, -1, "contradicts"),   # identical arms: no effect
        (0.1, 0.2, -1, "contradicts"),
        (-0.2, 0.1, -1, "undecided"),
        (-0.2, 0.0, -1, "undecided"),
        (0.1, 0.3, 1, "supports"),
        (-0.1, -0.05, 1, "contradicts"),
        (-0.1, 0.05, 1, "undecided"),
        (float("nan"), 0.1, 1, "undecided"),
    ],
)
def test_sign_finding(low: float, high: float, sign: int, want: str) -> None:
    from depthscale.stats.findings import sign_finding

    assert sign_finding(low, high, sign) == want


def test_mean_ci_is_the_student_t_interval() -> None:
    from scipy import stats

    from depthscale.stats.fits import mean_ci

    mean, low, high = mean_ci([1.0, 2.0, 4.0])
    half = stats.t.ppf(0.975, 2) * ((7 / 3) ** 0.5 / 3**0.5)  # sample std sqrt(7/3)
    assert mean == pytest.approx(7 / 3) and low == pytest.approx(7 / 3 - half)
    assert high == pytest.approx(7 / 3 + half)
    assert mean_ci([0.5]) == (0.5, 0.5, 0.5)
    assert all(v != v for v in mean_ci([1.0, float("nan")]))

"""The init jitter that checks verdicts against float rounding (issue 25): every normal draw
moves by a relative ~eps, nothing else moves, and a bad value is refused in one line."""

from __future__ import annotations

import pytest
import torch

from depthscale.errors import ConfigError
from depthscale.models import build
from depthscale.param.draw import PERTURBATION_ENV, init_perturbation


def _weights(monkeypatch: pytest.MonkeyPatch, eps: str | None) -> dict[str, torch.Tensor]:
    if eps is None:
        monkeypatch.delenv(PERTURBATION_ENV, raising=False)
    else:
        monkeypatch.setenv(PERTURBATION_ENV, eps)
    model, _ = build("resnet1", "depth-mup", input_shape=(10,), n_out=3, width=16, depth=3,
                     seed=4)
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def test_jitter_moves_each_normal_draw_by_about_eps_and_nothing_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = _weights(monkeypatch, None)
    bumped = _weights(monkeypatch, "1e-6")
    moved = 0
    for name, w in base.items():
        v = bumped[name]
        if torch.count_nonzero(w) == 0:
            assert torch.equal(w, v), name  # zero inits: untouched
            continue
        rel = ((v - w) / w)[w != 0]
        assert float(rel.abs().max()) < 1e-5, name  # |u| < 10 for every entry
        assert 2e-7 < float(rel.std()) < 5e-6, name  # relative spread ~ eps
        moved += 1
    assert moved >= 3
    unset = _weights(monkeypatch, "0")
    assert all(torch.equal(base[k], v) for k, v in unset.items())


def test_the_same_jitter_twice_is_the_same_model(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _weights(monkeypatch, "1e-7"), _weights(monkeypatch, "1e-7")
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("text", ["abc", "-1e-7", "0.5", "nan"])
def test_a_bad_jitter_is_refused(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv(PERTURBATION_ENV, text)
    with pytest.raises(ConfigError, match="a relative jitter is a number from 0 to 1e-3"):
        init_perturbation()

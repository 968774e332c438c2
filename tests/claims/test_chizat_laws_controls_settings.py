"""The negative controls of the chizat and laws claims change only their premise, through
settings keys whose defaults are the papers' settings (issue 10)."""

from __future__ import annotations

import math

import pytest

from depthscale.claims import CLAIMS
from depthscale.claims.chizat import sigma_v
from depthscale.claims.laws import study_tables

_IDS = [c for c in CLAIMS if c.startswith(("chizat-", "laws-"))]


def test_sigma_v_default_is_chizats_alpha_sqrt_d_and_the_control_is_alpha_d() -> None:
    assert sigma_v(0.5, 16) == pytest.approx(0.5 * math.sqrt(16))
    assert sigma_v(0.5, 16, 1.0) == pytest.approx(0.5 * 16)


def test_study_toml_writes_the_laws_recipe_unless_a_control_names_another() -> None:
    arch = {"model": "cnn1d", "dataset": "mnist1d", "width": 8, "depths": [1, 2],
            "lr_logspace": [-2, 0, 3]}
    assert study_tables("s", arch, seeds=1, epochs=1, data={})["study"]["recipe"] == "laws"
    assert study_tables("s", arch, seeds=1, epochs=1, data={},
                        recipe="sp")["study"]["recipe"] == "sp"


@pytest.mark.parametrize("cid", _IDS)
def test_control_keys_are_new_settings_not_a_rescaled_grid(cid: str) -> None:
    c = CLAIMS[cid]
    assert c.control is not None
    for scale in ("quick", "full", "smoke"):
        assert not set(c.control.settings) & set(c.settings[scale]), (cid, scale)

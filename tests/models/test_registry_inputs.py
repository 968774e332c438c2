"""The one check of the sizes every model shares (models/registry.py): each builder refuses an
empty, zero or negative input shape, and n_out, width or depth below 1, before building."""

from __future__ import annotations

import pytest

from depthscale.errors import ConfigError
from depthscale.models import MODELS, build, create

GOOD = {"input_shape": (2, 8, 8), "n_out": 3, "width": 4, "depth": 2}


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"input_shape": ()}, "input_shape must be the per-sample shape, a non-empty tuple"),
        ({"input_shape": 5}, "input_shape must be the per-sample shape, a non-empty tuple"),
        ({"input_shape": "28x28"}, "input_shape must be the per-sample shape"),
        ({"input_shape": (0, 8, 8)}, "input_shape[0] must be a whole number >= 1, got 0"),
        ({"input_shape": (2, -8, 8)}, "input_shape[1] must be a whole number >= 1, got -8"),
        ({"input_shape": (2, 8, 8.5)}, "input_shape[2] must be a whole number >= 1, got 8.5"),
        ({"n_out": 0}, "n_out must be a whole number >= 1, got 0"),
        ({"width": 0}, "width must be a whole number >= 1, got 0"),
        ({"width": "4"}, "width must be a whole number >= 1, got '4' (a str, not a number)"),
        ({"depth": -1}, "depth must be a whole number >= 1, got -1"),
        ({"depth": None}, "depth must be a whole number >= 1, got None"),
    ],
)
def test_every_builder_refuses_impossible_sizes(name: str, bad: dict[str, object],
                                                message: str) -> None:
    for make in (lambda: create(name, **{**GOOD, **bad}),  # type: ignore[arg-type]
                 lambda: build(name, "sp", **{**GOOD, **bad})):  # type: ignore[arg-type]
        with pytest.raises(ConfigError) as exc:
            make()
        assert str(exc.value).startswith(message), str(exc.value)


def test_resnet2_with_an_empty_input_shape_is_refused_not_built() -> None:
    with pytest.raises(ConfigError, match="input_shape"):
        build("resnet2", "mup", input_shape=(), n_out=2, width=8, depth=2)
    model, _ = build("resnet2", "mup", input_shape=(7,), n_out=2, width=8, depth=2)
    assert model.embed.weight.shape == (8, 7)

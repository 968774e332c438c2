"""How a model is called and where its scores are: inputs and outputs as users have them.

A model's input (``x_train`` of the data, a probe's example batch) is a tensor, a tuple of
positional arguments or a dict of keyword arguments (``{"input_ids": ids}`` for a Hugging Face
model), called as ``model(x)``, ``model(*x)`` or ``model(**x)`` (:func:`call_model`); a batch of
a tuple or dict takes the same rows of every tensor in it along dim 0 (:func:`take_rows`). The
scores a loss reads are the output itself (a tensor), its ``.logits`` (a Hugging Face
``ModelOutput``), its ``"logits"`` (a dict) or its first element (a tuple) (:func:`logits_of`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from depthscale.errors import ConfigError, DataError

__all__ = ["call_model", "describe_input", "logits_of", "n_rows", "take_rows",
           "tensors_of", "to_device"]


def call_model(model: nn.Module, x: Any) -> Any:
    """``model(**x)`` for a dict of keyword arguments, ``model(*x)`` for a tuple of positional
    arguments, else ``model(x)``."""
    if isinstance(x, Mapping):
        return model(**x)
    if isinstance(x, tuple):
        return model(*x)
    return model(x)


def logits_of(out: Any) -> torch.Tensor:
    """The scores a loss reads from a model's output: the output itself when it is a tensor,
    its ``.logits`` (a Hugging Face ``ModelOutput``), its ``"logits"`` entry (a dict), or the
    first element of a tuple or list; anything else is a ConfigError naming what came back."""
    if isinstance(out, torch.Tensor):
        return out
    logits = getattr(out, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
    if isinstance(out, Mapping) and isinstance(out.get("logits"), torch.Tensor):
        result: torch.Tensor = out["logits"]
        return result
    if isinstance(out, (tuple, list)) and out:
        return logits_of(out[0])
    raise ConfigError(
        f"the model returned {type(out).__name__}, which holds no scores to train on: return "
        "a tensor, a tuple whose first element is the logits, a dict with 'logits' or an "
        "object with .logits (a Hugging Face ModelOutput)"
    )


def _map_tensors(x: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """``x`` with ``fn`` applied to every tensor in it (nested tuples, lists and dicts)."""
    if isinstance(x, torch.Tensor):
        return fn(x)
    if isinstance(x, Mapping):
        return {k: _map_tensors(v, fn) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(_map_tensors(v, fn) for v in x)
    return x


def tensors_of(x: Any) -> list[torch.Tensor]:
    """Every tensor in ``x`` (nested tuples, lists and dicts), in order."""
    found: list[torch.Tensor] = []
    _map_tensors(x, lambda t: found.append(t) or t)  # type: ignore[func-returns-value]
    return found


def n_rows(x: Any) -> int:
    """The batch size of a model input: dim 0 of its tensors (which must agree)."""
    sizes = {int(t.shape[0]) if t.ndim else 0 for t in tensors_of(x)}
    if len(sizes) != 1:
        raise DataError(
            f"a model input needs tensors with one common batch size along dim 0, got "
            f"{describe_input(x)}" if sizes else f"a model input holds no tensor: {x!r}"
        )
    return sizes.pop()


def take_rows(x: Any, rows: slice | torch.Tensor) -> Any:
    """The rows ``rows`` (a slice or an index tensor) of every tensor in ``x`` along dim 0;
    other values (flags, None) are kept as they are."""
    return _map_tensors(x, lambda t: t[rows])


def to_device(x: Any, device: torch.device | str) -> Any:
    """``x`` with every tensor moved to ``device``."""
    return _map_tensors(x, lambda t: t.to(device))


def describe_input(x: Any) -> str:
    """Per-sample shape and dtype of a model input, for messages: ``(16,) (int64)`` or
    ``{input_ids: (16,) (int64)}``."""
    def one(t: torch.Tensor) -> str:
        return f"{tuple(t.shape[1:])} ({str(t.dtype).removeprefix('torch.')})"

    if isinstance(x, torch.Tensor):
        return one(x)
    if isinstance(x, Mapping):
        return "{" + ", ".join(f"{k}: {describe_input(v)}" for k, v in x.items()) + "}"
    if isinstance(x, (tuple, list)):
        return "(" + ", ".join(describe_input(v) for v in x) + ")"
    return repr(x)

"""Walking a model the way a plan reads it: through ``torch.compile`` /
``DistributedDataParallel`` / ``DataParallel`` wrappers, and over its parameters once each (a
tied parameter under its first name), with the module that owns each."""

from __future__ import annotations

from collections.abc import Iterator

from torch import nn

__all__ = ["params", "unwrap"]


def unwrap(model: nn.Module) -> tuple[nn.Module, str]:
    """The module inside ``torch.compile`` / ``DistributedDataParallel`` / ``DataParallel``
    wrappers, and the prefix the wrappers add to its parameter names."""
    prefix = ""
    while True:
        inner = getattr(model, "_orig_mod", None)  # torch.compile's OptimizedModule
        if isinstance(inner, nn.Module):
            model, prefix = inner, prefix + "_orig_mod."
        elif isinstance(model, (nn.parallel.DistributedDataParallel, nn.DataParallel)):
            model, prefix = model.module, prefix + "module."
        else:
            return model, prefix


def params(model: nn.Module) -> Iterator[tuple[str, str, nn.Module, nn.Parameter]]:
    """(full name, own name, owning module, parameter) for every parameter of ``model``, a
    shared (tied) parameter once, under its first name (as ``named_parameters`` lists it)."""
    seen: set[int] = set()
    for mod_name, module in model.named_modules():
        for p_name, p in module.named_parameters(recurse=False):
            if id(p) not in seen:
                seen.add(id(p))
                yield (f"{mod_name}.{p_name}" if mod_name else p_name), p_name, module, p

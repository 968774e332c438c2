"""``--device`` is checked once, with one line: CUDA absent, an index the machine lacks, a
malformed name."""

from __future__ import annotations

import pytest
import torch

from depthscale.errors import ConfigError
from depthscale.train.loop import resolve_device


def test_cpu_is_cpu() -> None:
    assert resolve_device("cpu") == torch.device("cpu")


@pytest.mark.parametrize(("name", "message"), [
    ("cuda:abc", "unknown device"), ("tpu", "unknown device"), ("cuda:3", "2 CUDA device"),
])
def test_bad_devices_are_one_line(monkeypatch: pytest.MonkeyPatch, name: str,
                                  message: str) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(ConfigError, match=message):
        resolve_device(name)


def test_cuda_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match="CUDA is not available here; use --device cpu"):
        resolve_device("cuda")


def test_cuda_runs_in_float32_not_tf32(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's default on Ampere and later runs cuDNN convolutions in TF32: resolving a CUDA
    device switches TF32 off for convolutions and matrix products (restored after the test)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = True
        assert resolve_device("cuda") == torch.device("cuda")
        assert torch.backends.cudnn.allow_tf32 is False
        assert torch.backends.cuda.matmul.allow_tf32 is False
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved

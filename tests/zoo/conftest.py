"""One torch thread for the zoo: its models are tiny (widths 32-128, 8-32 samples), so a
second thread buys nothing, and on a busy 2-core machine OpenMP's spinning threads made the
same run 4-5x slower (14 min against 3)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)

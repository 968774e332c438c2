"""Zoo entries (issue 40, second round): filled in by the module's topic."""

from __future__ import annotations

from architectures import Arch

ARCHS: list[Arch] = []

"""What a run of a study produced: :class:`RunRecord`, a pure function of its
:class:`~depthscale.studies.spec.RunSpec` apart from timing, host and versions."""

from __future__ import annotations

import math
import platform
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from depthscale.studies.spec import RunSpec

__all__ = [
    "MAX_CURVE_POINTS", "STATUSES", "RunRecord", "downsample", "nan_to_none", "versions",
]

#: A run's final status: trained to the end, diverged (non-finite loss, or running loss above
#: ``divergence_factor`` x the initial loss), or raised an error.
STATUSES = ("done", "diverged", "failed")
#: Longer per-step loss curves are stored as this many bucket means.
MAX_CURVE_POINTS = 1000


def nan_to_none(x: Any) -> Any:
    """JSON-safe value: a float that is not finite becomes None (JSON has no NaN)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


@dataclass(frozen=True)
class RunRecord(Mapping[str, Any]):
    """What one run produced. Also a read-only mapping of its flat row (:meth:`row`): spec
    fields by name (``depth``, ``lr``, ``seed``, ``model.activation``...), ``run_id``,
    ``status``, ``error``, every metric (``running_loss``, ``final_train_loss``...),
    ``seconds``, ``finished_at``, ``worker`` and ``version.<package>``.

    ``metrics`` holds ``running_loss`` (mean training loss over all steps done),
    ``steps_done``, ``diverged_at``, ``diverged_reason``, ``epoch_losses``, ``evals`` and
    ``final_<split>_<metric>`` (absent after divergence or failure); non-finite values are None.
    ``curve_steps`` / ``curve_losses`` are the per-step training loss, or bucket means ending at
    those steps when longer than :data:`MAX_CURVE_POINTS`.
    """

    run_id: str
    spec: RunSpec
    status: str
    metrics: dict[str, Any] = field(default_factory=dict)
    curve_steps: list[int] = field(default_factory=list)
    curve_losses: list[float | None] = field(default_factory=list)
    seconds: float = 0.0
    versions: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    finished_at: str = ""
    worker: str = ""

    __hash__ = None  # type: ignore[assignment]  # holds dicts and lists

    def outcome(self) -> dict[str, Any]:
        """The part that is a pure function of the spec (no timing, host or versions)."""
        return {"run_id": self.run_id, "status": self.status, "error": self.error,
                "metrics": self.metrics, "curve_steps": self.curve_steps,
                "curve_losses": self.curve_losses}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict; :meth:`from_dict` inverts it."""
        return {"run_id": self.run_id, "spec": self.spec.to_dict(), "status": self.status,
                "metrics": self.metrics, "curve_steps": self.curve_steps,
                "curve_losses": self.curve_losses, "seconds": self.seconds,
                "versions": self.versions, "error": self.error,
                "finished_at": self.finished_at, "worker": self.worker}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunRecord:
        """The record :meth:`to_dict` wrote."""
        return cls(**{**d, "spec": RunSpec.from_dict(d["spec"])})

    @cached_property
    def _row(self) -> dict[str, Any]:
        row: dict[str, Any] = {"run_id": self.run_id, "status": self.status, "error": self.error}
        row.update(self.spec.flat())
        row.update(self.metrics)
        row.update({"curve_steps": self.curve_steps, "curve_losses": self.curve_losses,
                    "seconds": self.seconds, "finished_at": self.finished_at,
                    "worker": self.worker})
        row.update({f"version.{k}": v for k, v in self.versions.items()})
        return row

    def row(self) -> dict[str, Any]:
        """A copy of the flat row (see the class docstring)."""
        return dict(self._row)

    def __getitem__(self, key: str) -> Any:
        return self._row[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._row)

    def __len__(self) -> int:
        return len(self._row)


def versions() -> dict[str, str]:
    """Versions of depthscale, torch and Python in this process."""
    import torch

    from depthscale._version import __version__

    return {"depthscale": __version__, "torch": str(torch.__version__),
            "python": platform.python_version()}


def downsample(losses: list[float]) -> tuple[list[int], list[float | None]]:
    """Per-step losses, or :data:`MAX_CURVE_POINTS` bucket means ending at the returned steps."""
    n = len(losses)
    if n <= MAX_CURVE_POINTS:
        return list(range(1, n + 1)), [nan_to_none(float(x)) for x in losses]
    steps, values = [], []
    for b in range(MAX_CURVE_POINTS):
        lo, hi = b * n // MAX_CURVE_POINTS, (b + 1) * n // MAX_CURVE_POINTS
        steps.append(hi)
        values.append(nan_to_none(math.fsum(losses[lo:hi]) / (hi - lo)))
    return steps, values

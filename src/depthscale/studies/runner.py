"""Running a study's runs, each a pure function of its spec.

:func:`run_one` seeds everything from the spec, trains on one CPU thread and returns a
:class:`~depthscale.studies.records.RunRecord`. Runs that differ only in ``lr`` may instead be
trained together by :func:`run_group` (opt-in batching, see :func:`lr_groups`), with the same
records to float rounding.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from depthscale.errors import ConfigError
from depthscale.studies.records import RunRecord, downsample, nan_to_none, versions
from depthscale.studies.spec import RunSpec, run_id

__all__ = ["EXAMPLE_BATCH", "check_run", "check_runs", "effective_depth", "lr_groups", "prepare",
           "run_group", "run_one"]

#: Training inputs a user model is inspected on (role and size inference).
EXAMPLE_BATCH = 8

_DATA_CACHE: OrderedDict[str, Any] = OrderedDict()
_DATA_CACHE_SIZE = 2


def _dataset(spec: RunSpec) -> Any:
    """The run's dataset, cached in this process (the last two distinct ones)."""
    from depthscale.data import load

    key = json.dumps([spec.dataset, spec.data_dir, spec.data_options], sort_keys=True)
    if key in _DATA_CACHE:
        _DATA_CACHE.move_to_end(key)
        return _DATA_CACHE[key]
    opts = dict(spec.data_options)
    data = load(spec.dataset, data_dir=spec.data_dir, seed=opts.pop("seed", 0), **opts)
    _DATA_CACHE[key] = data
    while len(_DATA_CACHE) > _DATA_CACHE_SIZE:
        _DATA_CACHE.popitem(last=False)
    return data


def prepare(spec: RunSpec) -> tuple[Any, Any, Any]:
    """``(model, plan, data)`` of a run, initialised from its seed; raises ConfigError or
    DataError for settings that cannot run (a sweep checks its first run this way).

    Built-in and user models take the same path (:func:`depthscale.models.build`); a user
    factory's model also gets the spec's ``[roles]`` and the first :data:`EXAMPLE_BATCH`
    training inputs to infer its sizes (and roles, where ``plan.apply`` infers them)."""
    from depthscale.models import build, is_factory

    data = _dataset(spec)
    example = data.x_train[:EXAMPLE_BATCH] if is_factory(spec.model) else None
    model, plan = build(spec.model, spec.recipe, input_shape=data.sample_shape,
                        n_out=data.n_out, width=spec.width, depth=spec.depth, seed=spec.seed,
                        plan_options=dict(spec.plan_options), roles=dict(spec.roles) or None,
                        example_input=example, **dict(spec.model_options))
    return model, plan, data


def effective_depth(spec: RunSpec) -> int:
    """The effective depth L = m + K (laws Sec. 3.4) of ``spec``'s model: what the model
    declares (``effective_depth``), else what :func:`depthscale.param.inspect.inspect` finds
    on a batch of the run's training inputs. The model is built unplanned (no init drawn)."""
    from depthscale.models import create
    from depthscale.param.inspect import inspect

    data = _dataset(spec)
    model = create(spec.model, input_shape=data.sample_shape, n_out=data.n_out,
                   width=spec.width, depth=spec.depth, **dict(spec.model_options))
    declared = getattr(model, "effective_depth", None)
    if declared is not None:
        return int(declared)
    return int(inspect(model, data.x_train[:EXAMPLE_BATCH]).effective_depth)


def check_run(spec: RunSpec, *, check_device: bool = True) -> None:
    """Build ``spec``'s data and model (and check its device) without training; any problem is
    raised as one ConfigError/DataError line. A sweep calls it on its first pending run so a
    setting that cannot run stops the study before any work instead of failing every run."""
    from depthscale.errors import DepthscaleError
    from depthscale.train import resolve_device

    try:
        spec.train_config().validate()
        if check_device:
            resolve_device(spec.device)
        model, _plan, data = prepare(spec)
        _check_loss_fits(spec, model, data)
    except DepthscaleError:
        raise
    except Exception as exc:
        message = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise ConfigError(f"the run {spec.label()} cannot be built: {message}") from None


def _model_key(spec: RunSpec) -> str:
    """What decides the model a run builds and the loss it takes: every field but ``lr``,
    ``seed`` and the training settings other than ``loss`` and ``device``."""
    from dataclasses import fields

    from depthscale.train import TrainSettings

    skip = {"lr", "seed"} | {f.name for f in fields(TrainSettings)} - {"loss", "device"}
    return json.dumps({k: v for k, v in spec.to_dict().items() if k not in skip},
                      sort_keys=True, default=str)


def check_runs(specs: Sequence[RunSpec], *, check_device: bool = True) -> None:
    """:func:`check_run` on the first of ``specs`` and, where the model is a user factory, on
    the first run of every other model configuration (:func:`_model_key`; its build checks one
    training step), so a configuration that cannot train stops a sweep before any run instead
    of failing its runs."""
    from depthscale.models import is_factory

    seen: set[str] = set()
    for i, spec in enumerate(specs):
        key = _model_key(spec)
        if key not in seen and (i == 0 or is_factory(spec.model)):
            seen.add(key)
            check_run(spec, check_device=check_device)


def _check_loss_fits(spec: RunSpec, model: Any, data: Any) -> None:
    """The loss of two training examples, so a loss that does not fit the data or the
    model's outputs (cross-entropy on regression targets, wrong output width) is refused once,
    before the study starts, instead of failing every run."""
    import torch

    from depthscale.calls import call_model, logits_of, take_rows
    from depthscale.train.loop import loss_fn

    rows = slice(0, 2)
    with torch.no_grad():
        out = logits_of(call_model(model, take_rows(data.x_train, rows)))
        loss_fn(spec.train_config().loss, out, take_rows(data.y_train, rows))


def run_one(spec: RunSpec) -> RunRecord:
    """Build, train and measure one run; never raises for the run's own errors.

    Status "done", "diverged" (the loop's rule, :class:`~depthscale.train.TrainConfig`; the
    sweep goes on) or "failed" (any exception, recorded as ``error``: one line ``Type:
    message``). The run uses one intra-op CPU thread
    (restored afterwards), so its metrics are identical in-process, in a worker pool or on Ray.
    KeyboardInterrupt and SystemExit propagate.
    """
    import torch

    from depthscale.train import train

    threads = torch.get_num_threads()
    t0 = time.perf_counter()
    try:
        torch.set_num_threads(1)
        model, plan, data = prepare(spec)
        result = train(model, plan, data, spec.train_config())
    except Exception as exc:  # recorded, not raised: one bad run must not stop the study
        return _failed(spec, exc, time.perf_counter() - t0)
    finally:
        torch.set_num_threads(threads)
    return _record(spec, result, time.perf_counter() - t0, _worker())


def _failed(spec: RunSpec, exc: Exception, seconds: float) -> RunRecord:
    message = " ".join(f"{type(exc).__name__}: {exc}".split())
    return RunRecord(run_id=run_id(spec), spec=spec, status="failed", error=message[:2000],
                     seconds=seconds, versions=versions(), finished_at=_now(),
                     worker=_worker())


def _record(spec: RunSpec, result: Any, seconds: float, worker: str) -> RunRecord:
    """The record of a finished :class:`~depthscale.train.TrainResult`."""
    metrics: dict[str, Any] = {
        "running_loss": nan_to_none(result.running_loss),
        "steps_done": result.steps_done,
        "diverged_at": result.diverged_at,
        "diverged_reason": result.diverged_reason,
        **{f"final_{k}": nan_to_none(float(v)) for k, v in result.final.items()},
        "epoch_losses": [nan_to_none(float(x)) for x in result.epoch_losses],
        "evals": [{k: nan_to_none(x) for k, x in e.items()} for e in result.evals],
    }
    steps, losses = downsample(result.losses)
    return RunRecord(
        run_id=run_id(spec), spec=spec, status="done" if result.status == "ok" else "diverged",
        metrics=metrics, curve_steps=steps, curve_losses=losses, seconds=seconds,
        versions=versions(), finished_at=_now(), worker=worker,
    )


def _lr_group_key(spec: RunSpec) -> str:
    """What runs of one LR group share: every field but ``lr`` (``data_dir`` included)."""
    fields_ = {k: v for k, v in spec.to_dict().items() if k != "lr"}
    return json.dumps(fields_, sort_keys=True, default=str)


def _batchable(spec: RunSpec) -> bool:
    """Whether :func:`~depthscale.train.train_batched` can train ``spec``'s runs: plain SGD and
    a model that :func:`~depthscale.train.check_batchable` accepts (built here to check)."""
    from depthscale.train import check_batchable

    if (spec.optimizer, spec.momentum, spec.weight_decay) != ("sgd", 0.0, 0.0):
        return False
    try:
        spec.train_config().validate()
        model, _, _ = prepare(spec)
        check_batchable(model)
    except Exception:  # not batchable, or not buildable: one by one, where errors are recorded
        return False
    return True


def lr_groups(specs: Sequence[RunSpec]) -> list[tuple[RunSpec, ...]]:
    """``specs`` split into the units :func:`run_group` trains: runs equal in everything but
    ``lr`` whose settings :func:`_batchable` accepts form one group, every other run is alone.

    Groups are in order of their first run, runs in their given order. Building one model per
    group to check it, this is cheap next to training.
    """
    by_key: dict[str, list[RunSpec]] = {}
    for spec in specs:
        by_key.setdefault(_lr_group_key(spec), []).append(spec)
    out: list[tuple[RunSpec, ...]] = []
    for members in by_key.values():
        if len(members) > 1 and _batchable(members[0]):
            out.append(tuple(members))
        else:
            out.extend((m,) for m in members)
    return out


def run_group(specs: Sequence[RunSpec]) -> list[RunRecord]:
    """Train runs that differ only in ``lr`` in one :func:`~depthscale.train.train_batched` pass;
    one record per run, in order. Never raises for the runs' own errors.

    Each record has the fields and metrics :func:`run_one` gives, equal to float rounding
    (batched matmuls round differently); a diverging member is recorded ``diverged`` while the
    others train on. ``seconds`` is the group's wall time (build, train, evaluate) divided by G,
    and ``worker`` says so: ``host:pid [batch of G: seconds = group time / G]``. One intra-op CPU
    thread, as :func:`run_one`. A group :func:`~depthscale.train.train_batched` refuses (other
    optimizer, buffers, dropout) or that raises is run one by one with :func:`run_one` instead.
    """
    import torch

    from depthscale.train import check_batchable, train_batched

    specs = list(specs)
    if not specs:
        return []
    key = _lr_group_key(specs[0])
    for s in specs[1:]:
        if _lr_group_key(s) != key:
            raise ConfigError(f"run_group needs runs that differ only in lr; {s.label()} and "
                              f"{specs[0].label()} differ in more")
    if len(specs) == 1:
        return [run_one(specs[0])]
    threads = torch.get_num_threads()
    t0 = time.perf_counter()
    try:
        torch.set_num_threads(1)
        model, plan, data = prepare(specs[0])
        check_batchable(model)
        results = train_batched(model, plan, data, specs[0].train_config(),
                                [s.lr for s in specs])
    except Exception:  # not batchable after all, or a failure: each run on its own records it
        return [run_one(s) for s in specs]
    finally:
        torch.set_num_threads(threads)
    g = len(specs)
    seconds = (time.perf_counter() - t0) / g
    worker = f"{_worker()} [batch of {g}: seconds = group time / {g}]"
    return [_record(s, r, seconds, worker) for s, r in zip(specs, results, strict=True)]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _worker() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"

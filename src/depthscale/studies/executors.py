"""Where a study's runs execute: in this process, a local process pool, or a Ray cluster.

Every executor takes run specs and yields finished :class:`RunRecord` s in completion order to
the driver, which alone writes the store; runs are pure functions of their specs on one CPU
thread, so their outcomes are identical whichever executor ran them. Closing the iterator early
stops the executor, losing at most the runs in flight. ``run_groups`` takes units instead
(:func:`~depthscale.studies.runner.lr_groups`): one run by :func:`run_one`, runs that differ
only in ``lr`` as one batched task (:func:`~depthscale.studies.runner.run_group`).

* :class:`InProcessExecutor`: one run after another in the driver.
* :class:`PoolExecutor`: a spawn-context process pool, rebuilt after a crashed worker with its
  unfinished runs resubmitted up to ``retries`` times; :class:`WorkerError` (nothing recorded)
  if no run ever finished, i.e. the workers cannot run at all.
* :class:`RayExecutor`: ``ray.remote(max_retries=retries)`` tasks; Ray is imported only here,
  and :func:`ray_cluster` holds one connection for many studies (``reproduce --ray``).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol

from depthscale.errors import ConfigError, DepthscaleError
from depthscale.studies.records import RunRecord, versions
from depthscale.studies.runner import run_group, run_one
from depthscale.studies.spec import RunSpec, run_id

__all__ = [
    "BACKENDS",
    "RAY_LOCAL",
    "Executor",
    "InProcessExecutor",
    "PoolExecutor",
    "RayExecutor",
    "WorkerError",
    "check_ray_address",
    "make_executor",
    "ray_cluster",
    "run_group_payload",
    "run_payload",
]

#: ``local`` runs in-process (one worker) or in a process pool (more); ``ray`` on Ray.
BACKENDS = ("local", "ray")
_RAY_HINT = "pip install 'depthscale[ray]' (or pip install 'ray>=2.9')"


class WorkerError(DepthscaleError):
    """The pool's worker processes died before any of them finished a run."""


#: Runs trained together: one run, or runs that differ only in ``lr`` (a batched group).
Unit = Sequence[RunSpec]


class Executor(Protocol):
    """Runs specs (or units of specs) and yields their records as they finish."""

    name: str

    def run(self, specs: Sequence[RunSpec]) -> Generator[RunRecord, None, None]: ...

    def run_groups(self, units: Sequence[Unit]) -> Generator[RunRecord, None, None]: ...


def _lost(spec: RunSpec, error: str) -> RunRecord:
    """A failed record for a run whose worker was lost for good."""
    return RunRecord(run_id=run_id(spec), spec=spec, status="failed",
                     error=" ".join(error.split())[:2000], versions=versions())


def run_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """:func:`run_one` on plain dicts (:meth:`RunSpec.to_dict` in, :meth:`RunRecord.to_dict`
    out): what a Ray task runs, so only JSON-like data crosses machines."""
    return run_one(RunSpec.from_dict(payload)).to_dict()


def run_group_payload(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`run_group` on plain dicts: what a Ray task runs for a batched unit."""
    return [r.to_dict() for r in run_group([RunSpec.from_dict(p) for p in payloads])]


class InProcessExecutor:
    """Runs the specs one after another in this process."""

    name = "in-process"

    def run(self, specs: Sequence[RunSpec]) -> Generator[RunRecord, None, None]:
        """Yields ``run_one(spec)`` for each spec, in order."""
        for spec in specs:
            yield run_one(spec)

    def run_groups(self, units: Sequence[Unit]) -> Generator[RunRecord, None, None]:
        """Yields each unit's records (:func:`run_one` or :func:`run_group`), in order."""
        for unit in units:
            if len(unit) == 1:
                yield run_one(unit[0])
            else:
                yield from run_group(unit)


# ---- process pool -----------------------------------------------------------------------------
def _init_worker() -> None:
    """Pool worker setup: Ctrl-C is the driver's to handle, and the worker exits as soon as the
    driver process is gone (even after ``kill -9``) instead of finishing orphaned runs."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        multiprocessing.connection.wait([parent.sentinel])
        os._exit(1)

    threading.Thread(target=watch, name="depthscale-parent-watch", daemon=True).start()


class PoolExecutor:
    """``workers`` spawned processes; a broken pool is rebuilt up to ``retries`` times.

    ``task`` (default :func:`run_one`) and ``group_task`` (default :func:`run_group`, for units
    of more than one run) must be importable by the workers (module-level functions)."""

    name = "process pool"

    def __init__(self, workers: int, retries: int = 3,
                 task: Callable[[RunSpec], RunRecord] | None = None,
                 group_task: Callable[[Sequence[RunSpec]], list[RunRecord]] | None = None,
                 ) -> None:
        if workers < 1:
            raise ConfigError(f"--workers must be >= 1, got {workers}")
        if retries < 0:
            raise ConfigError(f"--retries must be >= 0, got {retries}")
        self.workers = workers
        self.retries = retries
        self.task = task or run_one
        self.group_task = group_task or run_group

    def run(self, specs: Sequence[RunSpec]) -> Generator[RunRecord, None, None]:
        """Yields each spec's record as its worker finishes it."""
        return self.run_groups([(s,) for s in specs])

    def _submit(self, pool: ProcessPoolExecutor, unit: tuple[RunSpec, ...]) -> Future[Any]:
        if len(unit) == 1:
            return pool.submit(self.task, unit[0])
        return pool.submit(self.group_task, list(unit))

    def run_groups(self, units: Sequence[Unit]) -> Generator[RunRecord, None, None]:
        """Yields each unit's records as its worker finishes it; a unit whose worker died is
        resubmitted whole."""
        todo = [tuple(u) for u in units if len(u)]
        attempts, finished = 0, False
        while todo:
            pool = ProcessPoolExecutor(max_workers=min(self.workers, len(todo)),
                                       mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_init_worker)
            futures: dict[Future[Any], tuple[RunSpec, ...]] = {}
            broken: BaseException | None = None
            try:
                futures = {self._submit(pool, u): u for u in todo}
                remaining = set(futures)
                while remaining:
                    done, remaining = wait(remaining, return_when=FIRST_COMPLETED)
                    for fut in done:
                        try:
                            result = fut.result()
                        except BrokenProcessPool as exc:
                            broken = exc
                            continue
                        todo.remove(futures[fut])
                        finished = True
                        yield from (result if isinstance(result, list) else [result])
                    if broken is not None:
                        break
            finally:
                _stop_pool(pool)
            if broken is None:
                return
            attempts += 1
            if attempts > self.retries and not finished:
                raise WorkerError(
                    f"every worker process died before finishing a single run ({broken}; "
                    f"{self.retries + 1} pools tried); no run was recorded. A script that "
                    "starts a study with workers > 1 must run it under `if __name__ == "
                    "'__main__':`, since each spawned worker imports the script again; else "
                    "rerun with --workers 1 to see the error a run raises")
            if attempts > self.retries:
                for unit in todo:
                    for spec in unit:
                        yield _lost(spec, f"worker process died ({broken}); gave up after "
                                    f"{self.retries} retries")
                return


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel queued runs and end the workers now (runs in flight are lost, not waited for)."""
    processes = list(getattr(pool, "_processes", {}).values() or [])
    pool.shutdown(wait=False, cancel_futures=True)
    for p in processes:
        with contextlib.suppress(Exception):
            if p.is_alive():
                p.terminate()
    for p in processes:
        with contextlib.suppress(Exception):
            p.join(timeout=5)


# ---- ray --------------------------------------------------------------------------------------
def _import_ray(what: str = "--backend ray") -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(f"{what} needs Ray, which is not installed: {_RAY_HINT}") from None
    return ray


class RayExecutor:
    """Ray tasks (one CPU each) with ``max_retries=retries``.

    Uses the Ray instance this process already started; otherwise connects to ``address``
    (``auto`` or ``HOST:PORT``), or starts a local instance when ``address`` is None, and shuts
    down what it started when done. ``task`` (default :func:`run_payload`) maps a spec dict to a
    record dict, ``group_task`` (default :func:`run_group_payload`) a list of them to a list.
    Workers need depthscale installed; a task lost after all retries is recorded as failed (every
    run of its unit) with Ray's error.
    """

    name = "ray"

    def __init__(self, address: str | None = None, retries: int = 3, workers: int | None = None,
                 task: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                 group_task: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None,
                 ) -> None:
        if retries < 0:
            raise ConfigError(f"--retries must be >= 0, got {retries}")
        self.ray = _import_ray()
        self.address = address
        self.retries = retries
        self.workers = workers
        self.task = task or run_payload
        self.group_task = group_task or run_group_payload

    def _connect(self) -> bool:
        """Make sure Ray is initialised; True if this call started or connected it."""
        ray = self.ray
        if ray.is_initialized():
            return False
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if self.address in (None, "local") and self.workers:
            kwargs["num_cpus"] = self.workers
        try:
            ray.init(address=self.address, **kwargs)
        except Exception as exc:  # Ray raises several types here; all mean "no cluster"
            where = self.address or "a new local instance"
            raise ConfigError(f"cannot start or reach Ray at {where}: "
                              f"{' '.join(str(exc).split())}") from None
        return True

    def run(self, specs: Sequence[RunSpec]) -> Generator[RunRecord, None, None]:
        """Submits every spec, yields records as tasks finish, cancels the rest if closed."""
        return self.run_groups([(s,) for s in specs])

    def run_groups(self, units: Sequence[Unit]) -> Generator[RunRecord, None, None]:
        """Submits every unit as one task, yields its records as it finishes, cancels the rest
        if closed."""
        todo = [tuple(u) for u in units if len(u)]
        if not todo:
            return
        ray = self.ray
        started = self._connect()
        options = {"num_cpus": 1, "max_retries": self.retries}
        single = ray.remote(**options)(self.task)
        group = ray.remote(**options)(self.group_task)
        pending: dict[Any, tuple[RunSpec, ...]] = {}
        try:
            for unit in todo:
                if len(unit) == 1:
                    pending[single.remote(unit[0].to_dict())] = unit
                else:
                    pending[group.remote([s.to_dict() for s in unit])] = unit
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    finished = pending.pop(ref)
                    try:
                        out = ray.get(ref)
                        records = [RunRecord.from_dict(d)
                                   for d in (out if isinstance(out, list) else [out])]
                    except ray.exceptions.RayError as exc:
                        records = [_lost(s, f"ray task lost after {self.retries} retries: "
                                         f"{type(exc).__name__}: {exc}") for s in finished]
                    yield from records
        finally:
            for ref in pending:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            if started:
                with contextlib.suppress(Exception):
                    ray.shutdown()


#: seconds a Ray head at HOST:PORT has to accept a TCP connection before we give up
RAY_CONNECT_TIMEOUT = 5.0


#: seconds the cluster has to run the one-task version check of :func:`ray_cluster`
RAY_PROBE_TIMEOUT = 120.0
#: Ray's names for a cluster on this machine: ``local`` starts a new instance for this process,
#: ``auto`` joins the one ``ray start --head`` started here
RAY_LOCAL = ("local", "auto")


def _reachable(address: str, flag: str = "--address") -> None:
    """ConfigError unless ``HOST:PORT`` (optionally ``ray://``) accepts a TCP connection within
    :data:`RAY_CONNECT_TIMEOUT` seconds: ``ray.init`` itself waits minutes on a dead port."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{flag} {address!r}: give local, auto or HOST:PORT (e.g. "
                          "10.0.0.5:6379)")
    try:
        with socket.create_connection((host, int(port)), timeout=RAY_CONNECT_TIMEOUT):
            pass
    except (OSError, UnicodeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise ConfigError(f"cannot reach Ray at {address} within {RAY_CONNECT_TIMEOUT:g} s "
                          f"({why}); start it there with 'ray start --head' "
                          "or check the address") from None


def check_ray_address(address: str, flag: str = "--ray") -> None:
    """ConfigError unless Ray imports and ``address`` is ``local``, ``auto`` (:data:`RAY_LOCAL`)
    or a ``HOST:PORT`` (``ray://`` for Ray Client) that accepts a TCP connection: the checks
    that need no Ray session, so a bad address stops a run before any work."""
    _import_ray(flag)
    if address not in RAY_LOCAL:
        _reachable(address, flag)


def _cause(exc: BaseException) -> str:
    """The innermost cause of ``exc``, its last line only (Ray wraps the reason, e.g. a wrong
    token, in the text of a traceback)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    lines = [line for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
    return " ".join(lines[-1].split())[:700]


def worker_versions() -> dict[str, str]:
    """:func:`versions` where a Ray task runs it: what :func:`ray_cluster` compares."""
    return versions()


@contextlib.contextmanager
def ray_cluster(address: str, workers: int | None = None) -> Iterator[dict[str, Any]]:
    """Ray connected to ``address`` for the block (``local``: a new instance of ``workers``
    CPUs, shut down at the end), so that every study's :class:`RayExecutor` in it uses this one
    session; a session this process already holds is used as it is. Yields the cluster's
    ``address``, ``nodes`` and ``cpus``. ConfigError, before any study: Ray missing, the address
    unreachable or refusing us, no CPU, or workers that cannot import depthscale or run
    another depthscale or torch version than this process (the runs would not be this one's)."""
    check_ray_address(address)
    ray = _import_ray()
    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                  "logging_level": logging.WARNING}
        if address == "local" and workers:
            kwargs["num_cpus"] = workers
        try:
            ray.init(address=address, **kwargs)
        except Exception as exc:  # Ray raises several types here; all mean "no cluster"
            raise ConfigError(f"cannot start or join Ray at {address}: {_cause(exc)}; check "
                              "the address ('ray status' there), or use --ray local") from None
        started = True
    try:
        cpus = int(ray.cluster_resources().get("CPU", 0))
        if cpus < 1:
            raise ConfigError(f"the Ray cluster at {address} has no CPU for tasks; start its "
                              "nodes with --num-cpus >= 1")
        probe = ray.remote(num_cpus=1, max_retries=0)(worker_versions)
        try:
            theirs = ray.get(probe.remote(), timeout=RAY_PROBE_TIMEOUT)
        except Exception as exc:
            raise ConfigError(f"the Ray cluster at {address} did not run a depthscale task in "
                              f"{RAY_PROBE_TIMEOUT:g} s ({_cause(exc)}); install this depthscale "
                              "on every node, or free its CPUs") from None
        ours = versions()
        off = [f"{k} {theirs.get(k)} there, {ours[k]} here" for k in ("depthscale", "torch")
               if theirs.get(k) != ours[k]]
        if off:
            raise ConfigError(f"the Ray cluster at {address} runs other versions ({'; '.join(off)})"
                              ": its runs would not be this version's; install the same on every "
                              "node")
        yield {"address": address, "nodes": sum(1 for n in ray.nodes() if n.get("Alive")),
               "cpus": cpus}
    finally:
        if started:
            with contextlib.suppress(Exception):
                ray.shutdown()


def make_executor(backend: str, *, workers: int = 1, address: str | None = None,
                  retries: int = 3) -> Executor:
    """The executor for ``backend`` (one of :data:`BACKENDS`): ``local`` with one worker runs
    in-process, with more a spawn process pool; ``ray`` needs ray installed (ConfigError with
    the install hint otherwise). ``address`` is only for ray."""
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}; choose one of: {', '.join(BACKENDS)}")
    if workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {workers}")
    if retries < 0:
        raise ConfigError(f"--retries must be >= 0, got {retries}")
    if backend == "ray":
        if address is not None and address not in RAY_LOCAL:
            _reachable(address)  # before the store is touched: a dead address writes nothing
        return RayExecutor(address=address, retries=retries,
                           workers=workers if workers > 1 else None)
    if address is not None:
        raise ConfigError("--address is for --backend ray")
    if workers == 1:
        return InProcessExecutor()
    return PoolExecutor(workers, retries=retries)

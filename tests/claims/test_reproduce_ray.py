"""``reproduce --ray ADDRESS`` (issue 42, item 8) against a Ray cluster started here for the
test (``ray start --head`` given 127.0.0.1 and a free port, two CPUs, its own temp folder, so
``ray.init()`` elsewhere does not find it, and a random token, so nothing else can use it),
equal to a local run: the same verdicts, measured values and study records' outcomes; a run
killed mid-sweep resumes with or without ``--ray`` and trains only the runs its store lacks.
Skipped only where Ray is not importable. Measured on the shared 2-core dev machine: at load
average 3 the cluster started in 4 s and the file took 64 s wall, 34 CPU-seconds with Ray's
processes; at load average 7-9, 6-15 s and 2-3 min."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import depthscale
from depthscale.claims import CLAIMS, reproduce
from depthscale.cli import main
from depthscale.errors import ConfigError
from depthscale.studies.store import STORE_FILE, open_store

SRC = Path(depthscale.__file__).resolve().parents[1]
#: a laws claim (one 36-run sweep at smoke size) and an nfd one (a 12-run LR sweep)
IDS = ["laws-table1", "nfd-transfer"]
RAY_BIN = Path(sys.executable).with_name("ray")

RUN = """
import dataclasses, sys
import depthscale.studies.executors as ex
from depthscale.claims import CLAIMS
from depthscale.studies.records import versions
if "--other-version" in sys.argv:  # this driver claims another depthscale than its workers
    sys.argv.remove("--other-version")
    ex.versions = lambda: {**versions(), "depthscale": "0.0.0-other"}
for cid, c in list(CLAIMS.items()):  # quick -> smoke: seconds a claim
    CLAIMS[cid] = dataclasses.replace(c, settings={**c.settings, "quick": c.settings["smoke"]})
from depthscale.cli import main
sys.exit(main(["reproduce", *sys.argv[2:], "--out", sys.argv[1]]))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[str, dict[str, str]]]:
    """(address, environment to join it with) of a one-node, two-CPU Ray cluster."""
    pytest.importorskip("ray", reason="ray is not installed (pip install 'depthscale[ray]')")
    if not RAY_BIN.exists():
        pytest.skip(f"ray is importable but its command is not at {RAY_BIN}")
    temp = Path(tempfile.mkdtemp(prefix="dsray-"))  # short: Ray's socket paths have a limit
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1",
           "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
    env.pop("RAY_ADDRESS", None)
    log = temp / "start.log"
    with log.open("w") as fh:
        head = subprocess.Popen(
            [str(RAY_BIN), "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
             "--port", str(port), "--num-cpus", "2", "--include-dashboard", "false",
             "--disable-usage-stats", "--temp-dir", str(temp / "ray")],
            env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while "Ray runtime started" not in log.read_text(errors="replace"):
            if head.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"ray start failed: {log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)
        yield f"127.0.0.1:{port}", env
    finally:  # our head only: SIGTERM makes 'ray start --block' stop what it started
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        shutil.rmtree(temp, ignore_errors=True)


def _ray_reproduce(out: Path, address: str, env: dict[str, str], *more: str,
                   code: int = 0) -> tuple[int, str]:
    """``depthscale reproduce IDS --ray address`` in a fresh process (smoke settings): its
    process id and what it said on stderr."""
    with subprocess.Popen([sys.executable, "-c", RUN, str(out), *IDS, "--ray", address,
                           "--batch-lrs", *more],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as driver:
        _, err = driver.communicate(timeout=600)
    assert driver.returncode == code, err[-3000:]
    return driver.pid, err


@pytest.fixture
def smoke(monkeypatch: pytest.MonkeyPatch) -> None:
    for cid in IDS:
        c = CLAIMS[cid]
        monkeypatch.setitem(CLAIMS, cid, dataclasses.replace(
            c, settings={**c.settings, "quick": c.settings["smoke"]}))


def _claims(out: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in json.loads((out / "claims.json").read_text())}


def _judged(out: Path) -> dict[str, tuple[Any, ...]]:
    return {cid: (r["verdict"], r["measured"], r["band"], r["reason"])
            for cid, r in _claims(out).items()}


def _stores(out: Path) -> dict[str, Path]:
    return {p.parent.name: p.parent for p in out.glob(f"*/{STORE_FILE}")}


def _outcomes(out: Path) -> dict[str, dict[str, Any]]:
    """Per study folder: run id -> the run's outcome (status, metrics, curve)."""
    found = {}
    for name, folder in _stores(out).items():
        with open_store(folder, readonly=True) as store:
            found[name] = {r.run_id: r.outcome() for r in store.records(planned_only=True)}
    return found


def _finished(out: Path) -> dict[str, dict[str, str]]:
    """Per study folder: run id -> when and where it finished (``host:pid``)."""
    found = {}
    for name, folder in _stores(out).items():
        with open_store(folder, readonly=True) as store:
            found[name] = {r.run_id: f"{r.finished_at} {r.worker}" for r in store.records()}
    return found


def _pids(out: Path) -> set[int]:
    """The processes that trained the runs stored in ``out``."""
    return {int(when.split()[1].rsplit(":", 1)[1]) for runs in _finished(out).values()
            for when in runs.values()}


def _kill_mid_sweep(src: Path, dst: Path) -> dict[str, dict[str, str]]:
    """``dst``: ``src`` as a reproduce killed mid-sweep leaves it (no claim recorded, a third
    of each store's runs not finished); what it kept (run id -> finished time)."""
    shutil.copytree(src, dst)
    (dst / "claims.json").unlink()
    for folder in _stores(dst).values():
        with contextlib.closing(sqlite3.connect(folder / STORE_FILE)) as db, db:
            ids = [row[0] for row in db.execute("SELECT run_id FROM runs ORDER BY run_id")]
            db.executemany("DELETE FROM runs WHERE run_id = ?", [(i,) for i in ids[::3]])
    return _finished(dst)


@pytest.mark.ray
def test_reproduce_on_a_ray_cluster_equals_the_local_run_and_resumes_either_way(
    cluster: tuple[str, dict[str, str]], smoke: None, tmp_path: Path,
) -> None:
    """One test, so that pytest-xdist starts one cluster; every run with ``--batch-lrs`` (each
    LR group one Ray task: fewer tasks, the same values; the unbatched Ray sweep is
    test_sweep_reliability's). First: workers that run another
    depthscale (or torch) would store runs that are not this version's, so a driver of
    another version is refused in one line, exit 2, nothing written."""
    address, env = cluster
    _, err = _ray_reproduce(tmp_path / "refused", address, env, "--other-version", code=2)
    said = " ".join(err.split())
    assert f"the Ray cluster at {address} runs other versions (depthscale " in said, err
    assert "install the same on every node" in said and "Traceback" not in err
    assert not (tmp_path / "refused").exists()

    local, on_ray = tmp_path / "local", tmp_path / "ray"
    results, crashed = reproduce(IDS, scale="quick", out_dir=local, batch_lrs=True)
    assert crashed == [] and {r["run"]["backend"] for r in results} == {"local"}
    driver, _ = _ray_reproduce(on_ray, address, env)

    assert _judged(on_ray) == _judged(local)
    assert set(_stores(local)) == {"laws-cnn1d", "nfd-transfer"}
    assert _outcomes(on_ray) == _outcomes(local)
    for record in _claims(on_ray).values():
        assert record["run"]["backend"] == "ray"
        run = record["run"]
        assert (run["ray"], run["ray_nodes"], run["ray_cpus"]) == (address, 1, 2)
    assert f"sweeps on the Ray cluster at {address} (1 node(s), 2 CPUs)" in (
        on_ray / "index.html").read_text()
    # trained by the cluster's worker processes, not the driver (local: this process alone)
    assert _pids(local) == {os.getpid()} and driver not in _pids(on_ray)

    # a local run killed mid-sweep, resumed on the cluster, and a Ray run resumed locally:
    # the runs stored are kept as they were, the others trained, the results the same
    for src, name, resume in ((local, "local-then-ray", "ray"),
                              (on_ray, "ray-then-local", "local")):
        out = tmp_path / name
        kept = _kill_mid_sweep(src, out)
        if resume == "ray":
            _ray_reproduce(out, address, env)
        else:
            reproduce(IDS, scale="quick", out_dir=out, batch_lrs=True)
        assert _judged(out) == _judged(local), name
        assert _outcomes(out) == _outcomes(local), name
        now = _finished(out)
        for study, runs in kept.items():
            assert {i: now[study][i] for i in runs} == runs, (name, study)
            assert len(now[study]) > len(runs), (name, study)  # the missing ones trained


@pytest.mark.parametrize(("argv", "said"), [
    (["--ray", "nowhere"], "--ray 'nowhere': give local, auto or HOST:PORT"),
    (["--ray", "127.0.0.1:99999"], "give local, auto or HOST:PORT"),
    (["--ray", "127.0.0.1:{port}"], "cannot reach Ray at 127.0.0.1:{port} within 5 s"),
    (["--ray", "local", "--from-stored"], "--ray runs the sweeps on a cluster, --from-stored "
                                          "trains nothing: drop one of them"),
    (["--ray", "10.0.0.5:6379", "--workers", "4"], "reproduce does not read --workers (with "
                                                    "--ray ADDRESS the cluster's CPUs run"),
])
def test_a_bad_ray_address_is_one_line_before_any_work(
    argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    port = _free_port()  # nothing listens there
    argv = [a.format(port=port) for a in argv]
    assert main(["reproduce", "nfd-transfer", "--out", str(tmp_path / "out"), *argv]) == 2
    err = capsys.readouterr().err
    assert said.format(port=port) in " ".join(err.split()) and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


def test_ray_with_a_gpu_device_is_refused_before_any_work(tmp_path: Path) -> None:
    """Runs are one-CPU Ray tasks, from which Ray hides the GPUs (checked before the device,
    so the answer is the same on a machine with CUDA)."""
    with pytest.raises(ConfigError, match="--ray runs the sweeps as one-CPU Ray tasks, not on "
                                          "cuda:1: drop --ray"):
        reproduce(["nfd-transfer"], scale="quick", out_dir=tmp_path / "out", device="cuda:1",
                  ray_address="local")
    assert not (tmp_path / "out").exists()


def test_without_ray_installed_the_error_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ConfigError, match=r"--ray needs Ray, which is not installed: pip "
                                          r"install 'depthscale\[ray\]'"):
        reproduce(["nfd-transfer"], scale="quick", out_dir=tmp_path / "out", ray_address="local")
    assert not (tmp_path / "out").exists()


def test_sweep_takes_ray_local_as_an_address() -> None:
    """``local`` is Ray's name for a new instance here: no TCP check, its CPUs from workers."""
    pytest.importorskip("ray", reason="ray is not installed (pip install 'depthscale[ray]')")
    from depthscale.studies.executors import RayExecutor, make_executor

    executor = make_executor("ray", workers=2, address="local")
    assert isinstance(executor, RayExecutor)
    assert (executor.address, executor.workers) == ("local", 2)

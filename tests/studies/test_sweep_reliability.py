"""Sweeps under stress: kill -9 and resume, two drivers on one folder, diverging LRs, user
mistakes (one line, exit 2, results intact), repeatability, and identical results from the
in-process, process-pool and Ray backends."""

from __future__ import annotations

import os
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

from depthscale.cli import main
from depthscale.errors import DataError
from depthscale.studies.spec import expand, load_study
from depthscale.studies.store import STORE_FILE, open_store
from depthscale.studies.sweep import run_study

TINY = """
[study]
name = "tiny"
model = "resnet1"
recipe = "laws"
dataset = "teacher"    # synthetic: no generation time in each fresh process
[data]
dim = 8
n_train = 128
n_test = 64
[train]
steps = 8
batch_size = 32
loss = "mse"
[grid]
depth = [1, 2]
width = [8]
seed = [0, 1]
lr = [0.05, 1e4]   # 1e4 diverges
"""

# 16 runs of ~0.7 s each: long enough to be killed in the middle on a loaded machine (at 200
# steps, 0.15 s a run, a sweep under load finished all 16 before its SIGINT arrived)
KILL = TINY.replace("n_train = 128", "n_train = 512").replace("steps = 8", "steps = 1000") \
    .replace("width = [8]", "width = [32]").replace("lr = [0.05, 1e4]   # 1e4 diverges",
                                                    "lr = [0.001, 0.002, 0.005, 0.01]")


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _outcomes(directory: Path) -> dict[str, dict[str, Any]]:
    with open_store(directory, readonly=True) as store:
        return {r.run_id: r.outcome() for r in store.records()}


def _rows(directory: Path) -> int:
    try:
        with open_store(directory, readonly=True) as store:
            return len(store.statuses())
    except DataError:
        return 0


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "depthscale.cli", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def _default_sigint() -> None:
    """In the child before exec: Ctrl-C as a terminal gives it (default action, not blocked).
    A child inherits an ignored or blocked SIGINT, and Python then never raises
    KeyboardInterrupt; in the whole suite an earlier test left the pytest process so (its
    sweep then finished all 16 runs through the signal)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _popen(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "depthscale.cli", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_default_sigint)


def _wait_for_rows(proc: subprocess.Popen[str], directory: Path, n: int) -> None:
    deadline = time.monotonic() + 180
    while _rows(directory) < n:
        assert proc.poll() is None, f"sweep ended early: {proc.communicate()}"
        assert time.monotonic() < deadline, "sweep made no progress"
        time.sleep(0.02)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _integrity(directory: Path) -> str:
    conn = sqlite3.connect(directory / STORE_FILE)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    """The TINY spec, swept once in-process: (spec path, study folder, outcomes by run id)."""
    base = tmp_path_factory.mktemp("tiny")
    spec = _write(base / "tiny.toml", TINY)
    result = run_study(spec, base / "study")
    assert result.ran == 8
    return spec, base / "study", _outcomes(base / "study")


def test_diverging_lr_is_recorded_and_the_sweep_goes_on(
    tiny: tuple[Path, Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    spec, study, outcomes = tiny
    assert len(outcomes) == 8  # every run finished
    with open_store(study, readonly=True) as store:
        by_lr = {(r["lr"], r["status"]) for r in store.records()}
        assert by_lr == {(0.05, "done"), (1e4, "diverged")}
        assert all(r["diverged_at"] >= 1 for r in store.records() if r["status"] == "diverged")
        s = store.summary()
        assert (s.planned, s.done, s.diverged, s.failed, s.pending) == (8, 4, 4, 0, 0)
    # the CLI: rerunning is a no-op; status and export read the same rows
    assert main(["sweep", str(spec), "--out", str(study)]) == 0
    assert "8 runs; 8 already in" in capsys.readouterr().out
    out = study.parent / "export"
    assert main(["status", str(study), "--csv", str(out / "r.csv"),
                 "--parquet", str(out / "r.parquet")]) == 0
    text = capsys.readouterr().out
    assert "8/8 runs finished (100%): 4 done, 4 diverged, 0 failed, 0 pending" in text
    assert (out / "r.csv").read_text().count("\n") == 9 and (out / "r.parquet").stat().st_size


def test_same_spec_twice_gives_identical_metrics(
    tiny: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    spec, _, outcomes = tiny
    run_study(spec, tmp_path / "again")
    assert _outcomes(tmp_path / "again") == outcomes
    assert set(outcomes) == set(_run_ids(spec))


def _run_ids(spec: Path) -> list[str]:
    from depthscale.studies.spec import run_id

    return [run_id(r) for r in expand(load_study(spec))]


def test_kill_9_mid_study_then_resume_matches_an_uninterrupted_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _write(tmp_path / "kill.toml", KILL)
    study = tmp_path / "study"
    proc = _popen("sweep", str(spec), "--out", str(study))
    try:
        _wait_for_rows(proc, study, 3)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole study, mid-run
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert _integrity(study) == "ok"
    with open_store(study, readonly=True) as store:
        before = {r.run_id: (r.finished_at, r.worker, r.outcome()) for r in store.records()}
    assert 3 <= len(before) < 16, "the kill did not land mid-study"

    assert main(["sweep", str(spec), "--out", str(study)]) == 0  # restart (here: in-process)
    out = capsys.readouterr().out
    assert f"16 runs; {len(before)} already in {study}, {16 - len(before)} run now" in out
    with open_store(study, readonly=True) as store:
        after = {r.run_id: (r.finished_at, r.worker, r.outcome()) for r in store.records()}
    assert all(after[k] == v for k, v in before.items())  # finished runs kept, not rerun
    assert len(after) == 16

    reference = run_study(spec, tmp_path / "reference")  # uninterrupted
    assert reference.ran == 16
    assert _outcomes(tmp_path / "reference") == {k: v[2] for k, v in after.items()}


@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_mid_study_keeps_finished_runs_and_leaves_no_worker(
    tmp_path: Path, workers: int
) -> None:
    """SIGINT (Ctrl-C) of a sweep, 1 or 2 workers: exit 130 with one line, every finished run
    kept in a sound store, no worker process left behind, and the rerun runs only the rest."""
    spec = _write(tmp_path / "kill.toml", KILL)
    study = tmp_path / "study"
    proc = _popen("sweep", str(spec), "--out", str(study), "--workers", str(workers))
    try:
        _wait_for_rows(proc, study, 3)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends to the foreground group
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "finished results are kept" in err, err
    assert _integrity(study) == "ok"
    deadline = time.monotonic() + 10  # workers finish the run in hand, then exit
    while _group_alive(proc.pid):
        assert time.monotonic() < deadline, "a worker outlived the sweep by 10 s (orphan)"
        time.sleep(0.05)
    kept = _rows(study)
    assert 3 <= kept < 16, "the Ctrl-C did not land mid-study"
    rerun = _cli("sweep", str(spec), "--out", str(study))
    assert rerun.returncode == 0, rerun.stderr
    assert f"16 runs; {kept} already in {study}, {16 - kept} run now" in rerun.stdout


def test_a_truncated_store_is_refused_and_left_untouched(
    tiny: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    """A real store cut short (a disk filled, a copy interrupted): status and sweep refuse it
    with one line and leave every byte as it was."""
    spec, study, _ = tiny
    copy = tmp_path / "cut"
    copy.mkdir()
    data = (study / STORE_FILE).read_bytes()
    (copy / STORE_FILE).write_bytes(data[: len(data) // 2])
    before = (copy / STORE_FILE).read_bytes()
    for args in (("status", str(copy)), ("sweep", str(spec), "--out", str(copy))):
        res = _cli(*args)
        assert res.returncode == 2, res.stderr
        assert "Traceback" not in res.stderr and "depthscale: error:" in res.stderr, res.stderr
    assert (copy / STORE_FILE).read_bytes() == before


def test_a_second_writer_on_the_same_folder_refuses_naming_the_first(
    tiny: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    spec, study, outcomes = tiny
    copy = tmp_path / "study"
    shutil.copytree(study, copy)
    with open_store(copy) as first:  # this process is the first writer, mid-study
        runs = expand(load_study(spec))
        first.set_plan(load_study(spec), runs)
        second = _cli("sweep", str(spec), "--out", str(copy), "--retry-failed", "--wait", "0.5")
        assert first.record(_failed_copy(first.records()[0])) is False  # still writable
    assert second.returncode == 2
    err = second.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"depthscale: error: store {copy} is in use by another depthscale "
                          f"process (pid {os.getpid()} on {socket.gethostname()})")
    assert _integrity(copy) == "ok" and _outcomes(copy) == outcomes


def _failed_copy(record: Any) -> Any:
    import dataclasses

    return dataclasses.replace(record, status="failed", error="x")


@pytest.fixture
def results_kept(tiny: tuple[Path, Path, dict[str, Any]]) -> Iterator[Path]:
    """The tiny study folder; checks afterwards that its rows did not change."""
    _, study, outcomes = tiny
    yield study
    assert _outcomes(study) == outcomes


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("[grid]", "[grid\n"), "not valid TOML"),
        (('model = "resnet1"', 'model = "resnet9"'), "unknown model 'resnet9'"),
        (("lr = [0.05, 1e4]", "lr = []"), "grid.lr is empty"),
        (("steps = 8", "steps = 8\nlearning_rate = 1"), "unknown key(s) learning_rate"),
        (("dim = 8", "dim = 8\nstretch = 3"), "[data] has unknown key(s) stretch"),
        (("dim = 8", "dim = 0"), "dim"),  # caught when the first run is built
    ],
)
def test_spec_mistakes_exit_2_with_one_line_and_keep_results(
    edit: tuple[str, str], message: str, results_kept: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = _write(tmp_path / "bad.toml", TINY.replace(*edit, 1))
    before = (results_kept / STORE_FILE).stat().st_mtime_ns
    assert main(["sweep", str(spec), "--out", str(results_kept), "--retry-failed"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("depthscale: error:") and message in err, err
    if message != "dim":  # spec errors stop before the store is even opened
        assert (results_kept / STORE_FILE).stat().st_mtime_ns == before


def test_corrupt_store_and_missing_ray_exit_2(
    tiny: tuple[Path, Path, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = tiny[0]
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / STORE_FILE).write_bytes(b"\x00garbage" * 512)
    for argv in (["sweep", str(spec), "--out", str(bad)], ["status", str(bad)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "is not a depthscale store" in err, err
        assert err.endswith("move it away")
    assert (bad / STORE_FILE).read_bytes() == b"\x00garbage" * 512
    assert main(["status", str(tmp_path / "nothing")]) == 2
    assert "no study store" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "ray", None)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "r"), "--backend", "ray"]) == 2
    err = capsys.readouterr().err.strip()
    assert "pip install 'depthscale[ray]'" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_read_only_store_exits_2_and_status_still_reads_it(
    tiny: tuple[Path, Path, dict[str, Any]]
) -> None:
    spec, study, outcomes = tiny
    prefix: list[str] = []
    if os.geteuid() == 0:  # root writes anything: run the CLI as nobody instead
        if shutil.which("setpriv") is None:
            pytest.skip("running as root and setpriv is missing: cannot drop write access")
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        probe = subprocess.run([*prefix, sys.executable, "-c", "import depthscale"],
                               capture_output=True, text=True, timeout=60, check=False)
        if probe.returncode != 0:  # e.g. a clone inside a mode-700 folder (mktemp -d)
            pytest.skip("running as root, and the unprivileged user 65534 cannot import "
                        "depthscale from this checkout (its folder is private), so a "
                        "read-only store cannot be simulated here: "
                        + (probe.stderr.strip().splitlines() or ["?"])[-1])
    base = Path(tempfile.mkdtemp(prefix="depthscale-ro-"))
    try:
        os.chmod(base, 0o755)
        shutil.copy(spec, base / "tiny.toml")
        shutil.copytree(study, base / "study")
        snapshot = {p.name: p.read_bytes() for p in (base / "study").iterdir()}
        if not prefix:
            for p in (base / "study").iterdir():
                p.chmod(0o444)
            (base / "study").chmod(0o555)
        mpl = base / "mpl"
        mpl.mkdir(mode=0o777)
        mpl.chmod(0o777)
        env = {**os.environ, "HOME": str(base), "MPLCONFIGDIR": str(mpl)}
        code = ("import sys; from depthscale.cli import main; a = main(sys.argv[1:6]); "
                "sys.stderr.flush(); print('--', flush=True); b = main(sys.argv[6:]); "
                "sys.exit(10 * a + b)")
        proc = subprocess.run(
            [*prefix, sys.executable, "-c", code, "sweep", str(base / "tiny.toml"), "--out",
             str(base / "study"), "--retry-failed", "status", str(base / "study")],
            capture_output=True, text=True, env=env, timeout=120, check=False)
        assert proc.returncode == 20, proc.stderr  # sweep: 2, status: 0
        err = proc.stderr.strip()
        assert len(err.splitlines()) == 1 and "read-only" in err, err
        assert "8/8 runs finished" in proc.stdout
        assert {p.name: p.read_bytes() for p in (base / "study").iterdir()} == snapshot
    finally:
        (base / "study").chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)
    assert _outcomes(study) == outcomes


def test_process_pool_gives_the_same_results(
    tiny: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    spec, _, outcomes = tiny
    result = run_study(spec, tmp_path / "pool", workers=2)
    assert result.ran == 8
    assert _outcomes(tmp_path / "pool") == outcomes
    with open_store(tmp_path / "pool", readonly=True) as store:
        assert len({r.worker for r in store.records()}) == 2  # really two processes


def test_a_pool_whose_workers_cannot_start_records_nothing_and_says_why(
    tiny: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    """A script that starts a pooled study at module level (no ``__main__`` guard): every
    spawned worker imports it again and dies on the study's lock. Before, the lost runs were
    stored as failed, so a fixed rerun skipped them; now the driver raises WorkerError, names
    the guard, and the store holds no run."""
    spec, _, outcomes = tiny
    out = tmp_path / "study"
    script = tmp_path / "unguarded.py"
    script.write_text("from depthscale.studies.sweep import run_study\n"
                      f"run_study({str(spec)!r}, {str(out)!r}, workers=2, retries=0, wait=0)\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=300, check=False)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("depthscale.studies.executors.WorkerError") and "__main__" in last
    with open_store(out, readonly=True) as store:
        assert store.summary().failed == 0 and not list(store.records())
    result = run_study(spec, out)  # a fixed rerun trains every run
    assert result.ran == 8 and _outcomes(out) == outcomes


def test_ray_backend_gives_the_same_results_and_retries_lost_workers(
    tiny: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'depthscale[ray]')")
    from depthscale.studies.executors import RayExecutor, run_payload

    spec, _, outcomes = tiny
    markers = tmp_path / "markers"
    markers.mkdir()

    def crash_once(payload: dict[str, Any]) -> dict[str, Any]:
        marker = markers / f"{payload['lr']}-{payload['seed']}-{payload['depth']}"
        if not marker.exists():
            marker.touch()
            os._exit(1)  # the worker process dies mid-task, as on a lost node
        return run_payload(payload)

    ray.init(num_cpus=2, include_dashboard=False)
    try:
        result = run_study(spec, tmp_path / "ray", backend="ray")
        assert result.ran == 8 and ray.is_initialized()  # ours: left running
        assert _outcomes(tmp_path / "ray") == outcomes
        runs = expand(load_study(spec))[:1]
        records = list(RayExecutor(retries=2, task=crash_once).run(runs))
        assert len(list(markers.iterdir())) == 1 and len(records) == 1  # first worker died
        assert {r.run_id: r.outcome() for r in records} == {
            r.run_id: outcomes[r.run_id] for r in records}
        lost = list(RayExecutor(retries=0, task=crash_once).run(expand(load_study(spec))[2:3]))
        assert lost[0].status == "failed" and "ray task lost" in (lost[0].error or "")
    finally:
        ray.shutdown()

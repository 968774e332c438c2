"""The SQLite results store: rows, pending runs, the write lock, damage, export."""

from __future__ import annotations

import csv
import json
import os
import sqlite3
import sys
import threading
import time
from pathlib import Path

import pytest

from depthscale.errors import ConfigError, DataError
from depthscale.studies.records import RunRecord
from depthscale.studies.spec import RunSpec, parse_study, run_id
from depthscale.studies.store import LOCK_FILE, STORE_FILE, open_store

SPEC = """
[study]
name = "store-test"
model = "resnet1"
recipe = "laws"
dataset = "mnist1d"
[train]
steps = 3
[grid]
depth = [1, 2]
width = [8]
seed = [0]
lr = [0.1, 1.0]
"""


def _record(spec: RunSpec, status: str = "done", loss: float = 1.5) -> RunRecord:
    metrics = {} if status == "failed" else {
        "running_loss": loss, "steps_done": 3, "diverged_at": None if status == "done" else 3,
        "epoch_losses": [loss], "evals": [], **({"final_train_loss": loss - 0.5}
                                               if status == "done" else {})}
    return RunRecord(run_id=run_id(spec), spec=spec, status=status, metrics=metrics,
                     curve_steps=[1, 2, 3] if status != "failed" else [],
                     curve_losses=[2.0, None, 1.0] if status != "failed" else [],
                     seconds=0.25, versions={"depthscale": "0.1.0"},
                     error="RuntimeError: boom" if status == "failed" else None,
                     finished_at="2026-01-01T00:00:00.000+00:00", worker="host:1")


@pytest.fixture
def study_runs() -> tuple:
    from depthscale.studies.spec import expand

    study = parse_study(SPEC, source="store-test.toml")
    return study, expand(study)


def test_records_round_trip_in_plan_order_and_pending_shrinks(tmp_path: Path,
                                                              study_runs: tuple) -> None:
    study, runs = study_runs
    with open_store(tmp_path / "s") as store:
        store.set_plan(study, runs)
        assert store.pending(runs) == runs
        assert store.record(_record(runs[2], "diverged"))
        assert store.record(_record(runs[0]))
        assert store.pending(runs) == [runs[1], runs[3]]
        got = store.records()
        assert [r.run_id for r in got] == [run_id(runs[0]), run_id(runs[2])]  # plan order
        assert got[0] == _record(runs[0]) and got[1].outcome() == _record(runs[2], "diverged"
                                                                          ).outcome()
        assert got[0]["depth"] == 1 and got[0]["lr"] == 0.1 and got[0]["final_train_loss"] == 1.0
        s = store.summary()
        assert (s.planned, s.done, s.diverged, s.failed, s.pending) == (4, 1, 1, 0, 2)
        assert "2/4 runs finished (50%)" in s.lines("dir")[0]
        mode = store._conn.execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "wal"


def test_finished_rows_are_never_overwritten_but_failed_ones_are(tmp_path: Path,
                                                                 study_runs: tuple) -> None:
    _, runs = study_runs
    with open_store(tmp_path) as store:
        assert store.record(_record(runs[0], loss=1.5))
        assert not store.record(_record(runs[0], loss=9.0))
        assert store.records()[0]["running_loss"] == 1.5
        assert store.record(_record(runs[1], "failed"))
        assert store.pending(runs[:2]) == []
        assert store.pending(runs[:2], retry_failed=True) == [runs[1]]
        assert store.record(_record(runs[1], "done", loss=2.5))
        assert [r.status for r in store.records()] == ["done", "done"]
        with pytest.raises(ConfigError, match="status"):
            store.record(_record(runs[2], "ok"))


def test_failed_runs_are_listed_by_status(tmp_path: Path, study_runs: tuple) -> None:
    study, runs = study_runs
    with open_store(tmp_path) as store:
        store.set_plan(study, runs)
        store.record(_record(runs[3], "failed"))
        lines = store.summary().lines("dir")
    assert any(line.startswith(f"failed {run_id(runs[3])} (resnet1/laws width 8 depth 2 lr 1")
               and line.endswith("RuntimeError: boom") for line in lines)


def test_a_second_writer_waits_then_refuses_naming_the_pid(tmp_path: Path) -> None:
    first = open_store(tmp_path)
    t0 = time.monotonic()
    with pytest.raises(DataError) as exc:
        open_store(tmp_path, wait=0.3)
    assert time.monotonic() - t0 >= 0.3
    msg = str(exc.value)
    assert f"pid {os.getpid()}" in msg and "in use by another depthscale process" in msg
    # readers take no lock and see committed rows while the writer works
    with open_store(tmp_path, readonly=True) as reader:
        assert reader.records() == []
    first.close()
    open_store(tmp_path, wait=0).close()  # released on close (and by the OS on kill)
    assert (tmp_path / LOCK_FILE).exists()


def test_a_waiting_writer_gets_the_store_when_the_first_closes(tmp_path: Path) -> None:
    first = open_store(tmp_path)
    opened: list[object] = []
    waiter = threading.Thread(target=lambda: opened.append(open_store(tmp_path, wait=30)))
    waiter.start()
    time.sleep(0.3)
    assert waiter.is_alive() and not opened  # waiting, not refused
    first.close()
    waiter.join(30)
    assert len(opened) == 1
    opened[0].close()  # type: ignore[attr-defined]


def test_readonly_store_cannot_write_and_missing_store_is_reported(tmp_path: Path,
                                                                   study_runs: tuple) -> None:
    _, runs = study_runs
    open_store(tmp_path).close()
    with open_store(tmp_path, readonly=True) as reader, pytest.raises(DataError,
                                                                      match="read-only"):
        reader.record(_record(runs[0]))
    with pytest.raises(DataError, match=r"no study store in .*depthscale sweep SPEC --out"):
        open_store(tmp_path / "empty", readonly=True)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(DataError, match="is a file"):
        open_store(tmp_path / "afile")


@pytest.mark.parametrize("content", [b"this is not sqlite at all" * 100, b"SQLite format 3\x00" +
                                     b"\xff" * 2000, None])
def test_corrupt_or_foreign_files_are_refused_and_left_untouched(tmp_path: Path,
                                                                 content: bytes | None) -> None:
    path = tmp_path / STORE_FILE
    if content is None:  # a valid SQLite database of something else
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE cats (name TEXT)")
        conn.commit()
        conn.close()
    else:
        path.write_bytes(content)
    before = path.read_bytes()
    for readonly in (False, False, True):  # twice: a refusal releases the write lock
        with pytest.raises(DataError) as exc:
            open_store(tmp_path, readonly=readonly, wait=0)
        msg = str(exc.value)
        assert msg.startswith(f"store {path} is not a depthscale store (") and \
            msg.endswith("; move it away"), msg
    assert path.read_bytes() == before
    assert not (tmp_path / f"{STORE_FILE}-wal").exists()


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store._conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    with pytest.raises(DataError, match="has schema 99"):
        open_store(tmp_path)


def test_export_csv_and_parquet(tmp_path: Path, study_runs: tuple) -> None:
    study, runs = study_runs
    with open_store(tmp_path / "s") as store:
        store.set_plan(study, runs)
        store.record(_record(runs[0]))
        store.record(_record(runs[1], "diverged"))
        store.record(_record(runs[2], "failed"))
        csv_path = store.export_csv(tmp_path / "out" / "runs.csv")
        pq_path = store.export_parquet(tmp_path / "runs.parquet")
    with open(csv_path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["status"] for r in rows] == ["done", "diverged", "failed"]
    assert rows[0]["depth"] == "1" and float(rows[0]["lr"]) == 0.1
    assert json.loads(rows[0]["curve_losses"]) == [2.0, None, 1.0]
    assert rows[2]["error"] == "RuntimeError: boom" and rows[2]["running_loss"] == ""
    pq = pytest.importorskip("pyarrow.parquet")
    table = pq.read_table(pq_path).to_pylist()
    assert [r["status"] for r in table] == ["done", "diverged", "failed"]
    assert table[0]["curve_steps"] == [1, 2, 3] and table[0]["curve_losses"] == [2.0, None, 1.0]
    assert table[0]["final_train_loss"] == 1.0 and table[1]["final_train_loss"] is None
    assert table[0]["run_id"] == run_id(runs[0])


def test_parquet_without_pyarrow_names_the_install(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with open_store(tmp_path) as store, pytest.raises(ConfigError, match="pip install pyarrow"):
        store.export_parquet(tmp_path / "x.parquet")
    assert not (tmp_path / "x.parquet").exists()


def test_export_never_writes_over_the_store_or_a_file_it_did_not_export(
    tmp_path: Path, study_runs: tuple
) -> None:
    """Issue 43: export_csv/export_parquet at the store's own path replaced it."""
    study, runs = study_runs
    with open_store(tmp_path / "s") as store:
        store.set_plan(study, runs)
        store.record(_record(runs[0]))
        own = tmp_path / "s" / STORE_FILE
        before = own.read_bytes()
        for export in (store.export_csv, store.export_parquet):
            with pytest.raises(ConfigError, match="a study's results store"):
                export(own)
        mine = tmp_path / "mine.csv"
        mine.write_text("a,b\n1,2\n")
        with pytest.raises(ConfigError, match="remove the file yourself"):
            store.export_csv(mine)
        assert mine.read_text() == "a,b\n1,2\n"
        store.export_csv(tmp_path / "runs.csv")
        store.export_csv(tmp_path / "runs.csv")  # its own earlier export: replaced
    assert own.read_bytes()[:16] == before[:16]
    with open_store(tmp_path / "s", readonly=True) as store:
        assert len(store.records()) == 1

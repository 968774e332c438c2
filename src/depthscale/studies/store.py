"""The results store of a study: one SQLite file in the study folder (WAL mode).

One row per run, keyed by its :func:`~depthscale.studies.spec.run_id`, with its status
(done, diverged, failed with its error), JSON columns for spec, metrics, loss curve and
versions, and timing. :meth:`Store.record` writes a run in one transaction, so a study killed at
any moment (``kill -9`` included) keeps every finished run and never a torn row.

Only one process writes a folder at a time: :func:`open_store` takes an exclusive lock on
``DIR/study.lock`` (released by the OS when the process dies, so a killed driver leaves no
stale lock), waits ``wait`` seconds for it, then raises :class:`~depthscale.errors.DataError`
naming the PID that holds it. Readers (``depthscale status``) take no lock. SQLite's WAL needs
a local filesystem (not NFS).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from depthscale.errors import ConfigError, DataError
from depthscale.io.outputs import acquire_lock, release_lock
from depthscale.studies.records import RunRecord
from depthscale.studies.spec import RunSpec, StudySpec, run_id

__all__ = [
    "LOCK_FILE",
    "STORE_FILE",
    "STORE_FORMAT",
    "STORE_SCHEMA",
    "Store",
    "StoreSummary",
    "open_store",
]

STORE_FILE = "results.sqlite"
LOCK_FILE = "study.lock"
STORE_FORMAT = "depthscale-study"
STORE_SCHEMA = 1

_SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    status TEXT NOT NULL CHECK (status IN ('done', 'diverged', 'failed')),
    error TEXT,
    spec TEXT NOT NULL,
    metrics TEXT NOT NULL,
    curve TEXT NOT NULL,
    seconds REAL NOT NULL,
    versions TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    worker TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS planned (
    run_id TEXT PRIMARY KEY,
    position INTEGER NOT NULL,
    spec TEXT NOT NULL
);
"""

_COLUMNS = "run_id, status, error, spec, metrics, curve, seconds, versions, finished_at, worker"


def _json(x: Any) -> str:
    return json.dumps(x, sort_keys=True, separators=(",", ":"), allow_nan=False)


@dataclass(frozen=True)
class StoreSummary:
    """Progress of the planned study: counts by status, runs still pending, other rows (from
    earlier specs run into the same folder), and the errors of failed runs (first 5)."""

    name: str
    planned: int
    done: int
    diverged: int
    failed: int
    pending: int
    other: int
    seconds: float
    failures: tuple[tuple[str, str, str], ...] = field(default=())

    def lines(self, where: str) -> list[str]:
        """Human-readable lines for ``depthscale status``."""
        finished = self.done + self.diverged + self.failed
        pct = 100.0 * finished / self.planned if self.planned else 100.0
        out = [f"study {self.name} in {where}: {finished}/{self.planned} runs finished "
               f"({pct:.0f}%): {self.done} done, {self.diverged} diverged, {self.failed} failed, "
               f"{self.pending} pending; {self.seconds:.1f}s of run time"]
        if self.other:
            out.append(f"{self.other} more run(s) in the store from earlier versions of the spec")
        for rid, label, error in self.failures:
            out.append(f"failed {rid} ({label}): {error}")
        return out


class Store:
    """An open results store. Use :func:`open_store`; close it (or use ``with``)."""

    def __init__(self, directory: Path, conn: sqlite3.Connection, *, writable: bool,
                 lock_fd: int | None) -> None:
        self.directory = directory
        self.path = directory / STORE_FILE
        self.writable = writable
        self._conn = conn
        self._lock_fd = lock_fd

    # -- lifecycle
    def close(self) -> None:
        """Close the database and release the write lock (idempotent)."""
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()
        if self._lock_fd is not None:
            release_lock(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise _store_error(self.path, exc) from None

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        if not self.writable:
            raise DataError(f"store {self.path} was opened read-only")
        with self._errors():
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    # -- writing
    def set_plan(self, study: StudySpec, runs: Sequence[RunSpec]) -> None:
        """Make ``runs`` the planned set (what ``status`` counts) and keep the spec's text;
        one transaction. Rows of runs no longer planned stay in the store."""
        now = _now()
        with self._transaction() as c:
            c.execute("DELETE FROM planned")
            c.executemany("INSERT INTO planned (run_id, position, spec) VALUES (?, ?, ?)",
                          [(run_id(r), i, _json(r.to_dict())) for i, r in enumerate(runs)])
            c.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                          [("study_name", study.name), ("study_spec", study.text),
                           ("study_source", study.source), ("planned_at", now)])

    def record(self, run: RunRecord) -> bool:
        """Write ``run`` in one transaction; returns False (and writes nothing) if the store
        already holds a done or diverged row for it. A failed row is replaced."""
        if run.status not in ("done", "diverged", "failed"):
            raise ConfigError(f"run status must be done, diverged or failed, got {run.status!r}")
        values = (run.run_id, run.status, run.error, _json(run.spec.to_dict()),
                  _json(run.metrics), _json({"step": run.curve_steps, "loss": run.curve_losses}),
                  float(run.seconds), _json(run.versions), run.finished_at or _now(),
                  run.worker)
        with self._transaction() as c:
            cur = c.execute(
                f"INSERT INTO runs ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, "
                "error = excluded.error, spec = excluded.spec, metrics = excluded.metrics, "
                "curve = excluded.curve, seconds = excluded.seconds, "
                "versions = excluded.versions, finished_at = excluded.finished_at, "
                "worker = excluded.worker WHERE runs.status = 'failed'",
                values,
            )
            return cur.rowcount > 0

    # -- reading
    def statuses(self) -> dict[str, str]:
        """run id -> status of every stored run."""
        with self._errors():
            return dict(self._conn.execute("SELECT run_id, status FROM runs").fetchall())

    def pending(self, specs: Iterable[RunSpec], *, retry_failed: bool = False) -> list[RunSpec]:
        """The specs (in order) without a finished row; failed ones too if ``retry_failed``."""
        have = self.statuses()
        out = []
        for s in specs:
            status = have.get(run_id(s))
            if status is None or (retry_failed and status == "failed"):
                out.append(s)
        return out

    def records(self, *, planned_only: bool = False) -> list[RunRecord]:
        """Every stored run as a :class:`RunRecord` (a mapping of its flat row), planned runs
        first in plan order, then the others by finishing time."""
        where = "WHERE p.position IS NOT NULL" if planned_only else ""
        cols = ", ".join(f"r.{c.strip()}" for c in _COLUMNS.split(","))
        with self._errors():
            rows = self._conn.execute(
                f"SELECT {cols} FROM runs r LEFT JOIN planned p ON p.run_id = r.run_id {where} "
                "ORDER BY p.position IS NULL, p.position, r.finished_at, r.run_id"
            ).fetchall()
        try:
            return [_to_record(row) for row in rows]
        except (ValueError, KeyError, TypeError, ConfigError) as exc:
            raise DataError(f"store {self.path} holds a row it cannot read ({exc}); it was "
                            "written by another depthscale version or damaged") from None

    def summary(self) -> StoreSummary:
        """Counts of the planned runs by status (see :class:`StoreSummary`)."""
        with self._errors():
            meta = dict(self._conn.execute("SELECT key, value FROM meta").fetchall())
            counts = dict(self._conn.execute(
                "SELECT r.status, COUNT(*) FROM planned p JOIN runs r USING (run_id) "
                "GROUP BY r.status").fetchall())
            planned = self._conn.execute("SELECT COUNT(*) FROM planned").fetchone()[0]
            total = self._conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
            seconds = self._conn.execute("SELECT COALESCE(SUM(seconds), 0) FROM runs "
                                         "WHERE run_id IN (SELECT run_id FROM planned)"
                                         ).fetchone()[0]
            failed_rows = self._conn.execute(
                "SELECT r.run_id, r.spec, r.error FROM planned p JOIN runs r USING (run_id) "
                "WHERE r.status = 'failed' ORDER BY p.position LIMIT 5").fetchall()
        finished = sum(counts.values())
        failures = []
        for rid, spec, error in failed_rows:
            try:
                label = RunSpec.from_dict(json.loads(spec)).label()
            except (ValueError, TypeError, ConfigError):
                label = "?"
            failures.append((rid, label, error or ""))
        return StoreSummary(
            name=meta.get("study_name", "(none planned yet)"), planned=planned,
            done=counts.get("done", 0),
            diverged=counts.get("diverged", 0), failed=counts.get("failed", 0),
            pending=planned - finished, other=total - finished, seconds=float(seconds),
            failures=tuple(failures),
        )

    # -- export
    def export_rows(self) -> list[dict[str, Any]]:
        """Flat rows of :meth:`records`; list and dict cells (curves, epoch losses, evals)
        stay Python objects."""
        return [r.row() for r in self.records()]

    def export_csv(self, path: str | os.PathLike[str]) -> Path:
        """All runs as CSV, written atomically; list cells are JSON text. An existing file at
        ``path`` is replaced only if it is an earlier export (ConfigError otherwise)."""
        from depthscale.io.atomic import write_csv
        from depthscale.io.outputs import RUNS_CSV, check_output_file

        check_output_file(path, "CSV export", RUNS_CSV)
        rows = [{k: _json(v) if isinstance(v, list | dict) else v for k, v in row.items()}
                for row in self.export_rows()]
        try:
            return write_csv(Path(path), rows)
        except OSError as exc:
            raise DataError(f"cannot write {path}: {exc.strerror or exc}") from None

    def export_parquet(self, path: str | os.PathLike[str]) -> Path:
        """All runs as Parquet, written atomically; curves and epoch losses as list columns,
        evals as JSON text, the schema marked as depthscale's export. Needs pyarrow. An
        existing file at ``path`` is replaced only if it is an earlier export (ConfigError
        otherwise)."""
        from depthscale.io.outputs import PARQUET_MARKER, RUNS_PARQUET, check_output_file

        check_output_file(path, "Parquet export", RUNS_PARQUET)
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise ConfigError("Parquet export needs pyarrow: pip install pyarrow "
                              "(or pip install 'depthscale[parquet]')") from None
        from depthscale.io.atomic import atomic_write

        rows = self.export_rows()
        columns: dict[str, None] = {}
        for row in rows:
            columns.update(dict.fromkeys(row))
        data: dict[str, list[Any]] = {c: [] for c in columns}
        for row in rows:
            for c in columns:
                v = row.get(c)
                data[c].append(_json(v) if c == "evals" else v)
        arrays = {}
        for c, values in data.items():
            if c.startswith("curve_") or c == "epoch_losses":
                arrays[c] = pa.array(values, type=pa.list_(
                    pa.int64() if c == "curve_steps" else pa.float64()))
            else:
                arrays[c] = _arrow_column(pa, values)
        table = pa.table(arrays) if arrays else pa.table({})
        table = table.replace_schema_metadata(dict([PARQUET_MARKER]))
        target = Path(path)
        try:
            with atomic_write(target, "wb") as fh:
                pq.write_table(table, fh)
        except OSError as exc:
            raise DataError(f"cannot write {path}: {exc.strerror or exc}") from None
        return target


def _arrow_column(pa: Any, values: list[Any]) -> Any:
    """One column; mixed ints and floats become float64, anything else mixed becomes text."""
    kinds = {type(v) for v in values if v is not None}
    if kinds <= {int, float} and float in kinds:
        return pa.array([None if v is None else float(v) for v in values], type=pa.float64())
    if len(kinds) > 1:
        return pa.array([None if v is None else str(v) for v in values], type=pa.string())
    return pa.array(values)


def _to_record(row: Sequence[Any]) -> RunRecord:
    rid, status, error, spec, metrics, curve, seconds, vers, finished_at, worker = row
    c = json.loads(curve)
    return RunRecord(run_id=rid, spec=RunSpec.from_dict(json.loads(spec)), status=status,
                     metrics=json.loads(metrics), curve_steps=c["step"], curve_losses=c["loss"],
                     seconds=float(seconds), versions=json.loads(vers), error=error,
                     finished_at=finished_at, worker=worker)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


# ---- opening ----------------------------------------------------------------------------------
def _store_error(path: Path, exc: sqlite3.Error) -> DataError:
    text = str(exc)
    low = text.lower()
    if "readonly" in low or "read-only" in low or "unable to open" in low:
        return DataError(f"store {path} is read-only or not accessible ({text}); run the study "
                         "into a folder you can write, or copy the folder first")
    if "locked" in low or "busy" in low:
        return DataError(f"store {path} is busy ({text}); another process is writing it")
    return DataError(f"store {path} is not a depthscale store ({text}); move it away")


def _check_format(path: Path, conn: sqlite3.Connection, *, create: bool) -> None:
    """Raise DataError unless ``conn`` is a depthscale store (an empty file is initialised when
    ``create``)."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables and create:
        # one transaction: a store killed while being created is empty, never half-made
        conn.executescript(
            f"BEGIN IMMEDIATE;{_SCHEMA_SQL}"
            f"INSERT INTO meta (key, value) VALUES ('format', '{STORE_FORMAT}'), "
            f"('schema', '{STORE_SCHEMA}'), ('created_at', '{_now()}');COMMIT;"
        )
        return
    if "meta" not in tables:
        raise DataError(f"store {path} is not a depthscale store (no meta table); move it away")
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    if meta.get("format") != STORE_FORMAT or not {"runs", "planned"} <= tables:
        raise DataError(f"store {path} is not a depthscale store (format "
                        f"{meta.get('format')!r}); move it away")
    schema = meta.get("schema", "?")
    if schema != str(STORE_SCHEMA):
        raise DataError(f"store {path} has schema {schema}, this depthscale reads schema "
                        f"{STORE_SCHEMA}; use the depthscale version that wrote it")


def open_store(directory: str | os.PathLike[str], *, readonly: bool = False,
               wait: float = 5.0) -> Store:
    """Open (creating if needed) the store in ``directory``.

    For writing (the default) the folder is created, the write lock taken (waiting up to
    ``wait`` seconds, then DataError naming the holder's PID), WAL mode and full sync set.
    ``readonly`` opens an existing store without the lock, for status and export while a sweep
    runs. A read-only folder, a file that is not a depthscale store, or a store from another
    schema raise DataError and nothing in the folder is changed.
    """
    d = Path(directory)
    path = d / STORE_FILE
    if readonly:
        return _open_readonly(d, path)
    if d.exists() and not d.is_dir():
        raise DataError(f"store folder {d} is a file; give a folder")
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataError(f"cannot create store folder {d} ({exc.strerror or exc})") from None
    fd = acquire_lock(d, LOCK_FILE, wait, "store")
    conn = None
    try:
        conn = sqlite3.connect(path, timeout=30.0, isolation_level=None,
                               check_same_thread=False)
        _check_format(path, conn, create=True)
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise DataError(f"store {path} cannot use WAL mode (got {mode}); put the study on "
                            "a local filesystem")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA busy_timeout = 30000")
        # a real write now, so a read-only file fails here and not after the first run
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('opened_at', ?)",
                     (_now(),))
        conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        if conn is not None:
            conn.close()
        release_lock(fd)
        raise _store_error(path, exc) from None
    except BaseException:
        if conn is not None:
            conn.close()
        release_lock(fd)
        raise
    return Store(d, conn, writable=True, lock_fd=fd)


def _open_readonly(d: Path, path: Path) -> Store:
    if not path.is_file() or path.stat().st_size == 0:  # 0 bytes: killed while being created
        raise DataError(f"no study store in {d} ({STORE_FILE} missing); run "
                        f"'depthscale sweep SPEC --out {d}' first")
    last: sqlite3.Error | None = None
    # mode=ro needs to create the WAL index; in a read-only folder fall back to immutable
    for query in ("mode=ro", "immutable=1"):
        conn = None
        try:
            uri = f"{path.resolve().as_uri()}?{query}"
            conn = sqlite3.connect(uri, uri=True, timeout=30.0, isolation_level=None)
            _check_format(path, conn, create=False)
            conn.execute("PRAGMA busy_timeout = 30000")
            return Store(d, conn, writable=False, lock_fd=None)
        except sqlite3.DatabaseError as exc:
            if conn is not None:
                conn.close()
            last = exc
            if "not a database" in str(exc) or "malformed" in str(exc):
                break
        except BaseException:
            if conn is not None:
                conn.close()
            raise
    assert last is not None
    raise _store_error(path, last)

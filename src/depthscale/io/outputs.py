"""Output folders: checked before any work starts, and locked while a process writes them.

:func:`check_output_dir` finds, in a fraction of a second, what would otherwise fail after a
long run: a path that is a file or lies under one, a name longer than the filesystem allows,
a folder that cannot be written. :func:`folder_lock` is the one writer lock of every folder
depthscale writes in place (a study's store, a reproduce folder): an exclusive ``flock`` on a
lock file that holds the writer's PID, released by the OS when the process dies, so a killed
run leaves no stale lock.

:func:`check_output_file` also keeps a command from writing over what it did not write: an
existing file at an output path is replaced only when its :class:`OutputKind` recognises it as
that command's earlier output (:data:`OUTPUT_KINDS`), and the files depthscale keeps in a store
or reproduce folder (:data:`KEPT_FILES`) are refused by name, present or not.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from depthscale.errors import ConfigError, DataError

__all__ = [
    "BENCH_JSON", "JSON_MARKER", "KEPT_FILES", "OUTPUT_KINDS", "PARQUET_MARKER", "RUNS_CSV",
    "RUNS_CSV_HEADER", "RUNS_PARQUET", "OutputKind", "acquire_lock", "check_output_dir",
    "check_output_file", "folder_lock", "release_lock",
]

_NAME_MAX = 255  # bytes per path component where the filesystem does not say
_PATH_MAX = 4096


#: what each file depthscale keeps in a store or reproduce folder is: never an output path
KEPT_FILES: dict[str, str] = {
    "results.sqlite": "a study's results store",
    "results.sqlite-wal": "a study store's write-ahead log",
    "results.sqlite-shm": "a study store's shared-memory index",
    "results.sqlite-journal": "a study store's rollback journal",
    "study.toml": "a study's spec copy",
    "spec.toml": "a claim study's spec copy",
    "claims.json": "a reproduce folder's verdicts",
    "runs.jsonl": "a reproduce folder's history",
    "study.lock": "a study store's lock file",
    "reproduce.lock": "a reproduce folder's lock file",
}

#: the first columns of every CSV export of a study's runs (``Store.export_csv``)
RUNS_CSV_HEADER = ("run_id", "status", "error")
#: the key and value of the schema metadata every Parquet export of a study's runs carries
PARQUET_MARKER = (b"depthscale.export", b"study-runs")
#: the top-level key of every JSON depthscale writes at a user-given path; its value names what
JSON_MARKER = "depthscale_output"
_SQLITE_MAGIC = b"SQLite format 3\x00"
_PARQUET_MAGIC = b"PAR1"
_FOOTER_MAX = 1 << 24  # a Parquet footer larger than this is not one we wrote


@dataclass(frozen=True)
class OutputKind:
    """A kind of file a command writes at a user-given path: what it is, in words, and
    ``recognise(path)``, whether an existing file is an earlier one of this kind."""

    what: str
    recognise: Callable[[Path], bool]


def _csv_with_header(columns: tuple[str, ...]) -> Callable[[Path], bool]:
    prefix = ",".join(columns)

    def recognise(path: Path) -> bool:
        with path.open("rb") as fh:
            first = fh.readline(1 << 16).decode("utf-8", "replace").rstrip("\r\n")
        return first == prefix or first.startswith(prefix + ",")
    return recognise


def _parquet_with_marker(key: bytes, value: bytes) -> Callable[[Path], bool]:
    """Whether a file is Parquet whose footer (its key-value metadata) holds ``key`` and
    ``value``; read without pyarrow."""

    def recognise(path: Path) -> bool:
        with path.open("rb") as fh:
            if fh.read(4) != _PARQUET_MAGIC:
                return False
            size = fh.seek(0, os.SEEK_END)
            if size < 12:
                return False
            fh.seek(size - 8)
            tail = fh.read(8)
            length = int.from_bytes(tail[:4], "little")
            if tail[4:] != _PARQUET_MAGIC or not 0 < length <= min(size - 12, _FOOTER_MAX):
                return False
            fh.seek(size - 8 - length)
            footer = fh.read(length)
        return key in footer and value in footer
    return recognise


def _json_with_marker(value: str) -> Callable[[Path], bool]:
    def recognise(path: Path) -> bool:
        import json

        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            return False
        return isinstance(data, dict) and data.get(JSON_MARKER) == value
    return recognise


RUNS_CSV = OutputKind("a CSV export of a study's runs", _csv_with_header(RUNS_CSV_HEADER))
RUNS_PARQUET = OutputKind("a Parquet export of a study's runs",
                          _parquet_with_marker(*PARQUET_MARKER))
BENCH_JSON = OutputKind("depthscale bench results (JSON)", _json_with_marker("bench"))
#: the output kinds by name, as commands declare them (``output_files={dest: name}``)
OUTPUT_KINDS: dict[str, OutputKind] = {
    "runs-csv": RUNS_CSV, "runs-parquet": RUNS_PARQUET, "bench-json": BENCH_JSON,
}


def check_output_dir(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """``path`` as a Path if a folder can be created (or exists) there and be written; else a
    ConfigError naming ``flag``, the path and the reason. Creates nothing and leaves nothing:
    writability is probed with a temporary file in the folder or its nearest existing parent.
    """
    p = Path(path).expanduser()
    if str(p) == "":
        raise ConfigError(f"{flag} is empty; give a folder")
    if len(os.fsencode(str(p.absolute()))) >= _PATH_MAX:
        raise ConfigError(f"{flag} {p}: the path is longer than {_PATH_MAX} bytes; use a shorter "
                          "one")
    for part in p.parts:  # before any stat: a too-long name makes stat itself fail
        if len(os.fsencode(part)) > _NAME_MAX:
            raise ConfigError(f"{flag} {p}: the name {part[:40]}... has {len(part)} characters, "
                              f"more than the {_NAME_MAX} bytes a file name may have; use a "
                              "shorter name")
    try:
        if p.exists() and not p.is_dir():
            raise ConfigError(f"{flag} {p} is a file, not a folder; give a folder (it is "
                              "created if missing)")
        existing = p
        while not existing.exists() and existing.parent != existing:
            existing = existing.parent
    except OSError as exc:
        raise ConfigError(f"{flag} {p} cannot be used: {exc.strerror or exc}") from None
    if not existing.is_dir():
        raise ConfigError(f"{flag} {p} lies under {existing}, which is a file; give a folder "
                          "path whose parents are folders")
    try:
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".depthscale-write-check-")
    except OSError as exc:
        where = "" if existing == p else f" (its nearest existing parent {existing})"
        raise ConfigError(f"{flag} {p} cannot be written{where}: it is read-only or not "
                          f"accessible ({exc.strerror or exc}); give a folder you can write"
                          ) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return p


def check_output_file(path: str | os.PathLike[str], flag: str,
                      kind: OutputKind | str | None = None) -> Path:
    """``path`` as a Path if a file of ``kind`` (an :class:`OutputKind` or its name in
    :data:`OUTPUT_KINDS`) may be written there; else a ConfigError naming ``flag``, the path,
    what is there and the fix. Refused: a folder, a path that cannot be written (its folder
    checked as by :func:`check_output_dir`), a name in :data:`KEPT_FILES` or ending ``.lock``
    (present or not), and an existing non-empty file that ``kind`` does not recognise as its
    own earlier output (any, without a kind)."""
    p = Path(path).expanduser()
    check_output_dir(p.parent, f"{flag} {p}: folder")
    if len(os.fsencode(p.name)) > _NAME_MAX:
        raise ConfigError(f"{flag} {p}: the file name has {len(p.name)} characters, more than "
                          f"the {_NAME_MAX} bytes a file name may have; use a shorter name")
    if p.is_dir():
        raise ConfigError(f"{flag} {p} is a folder; give a file name")
    if isinstance(kind, str):
        kind = OUTPUT_KINDS[kind]
    kept = KEPT_FILES.get(p.name) or ("a lock file" if p.name.endswith(".lock") else None)
    if kept is not None:
        raise ConfigError(f"{flag} {p}: {p.name} is the name of {kept}, which depthscale never "
                          "writes another file over (present or not); choose another path")
    try:
        if not p.exists() or p.stat().st_size == 0:  # nothing there to lose
            return p
        if kind is not None and kind.recognise(p):
            return p
        seen = _what_is(p)
    except OSError as exc:
        raise ConfigError(f"{flag} {p} cannot be read to check what it is "
                          f"({exc.strerror or exc}); choose another path") from None
    wanted = f", not {kind.what}" if kind is not None else ""
    raise ConfigError(f"{flag} {p} already exists and is {seen}{wanted}; depthscale writes "
                      "over only its own earlier output of that kind: choose another path, or "
                      "remove the file yourself")


def _what_is(path: Path) -> str:
    """An existing file, in words, from its first bytes."""
    with path.open("rb") as fh:
        head = fh.read(len(_SQLITE_MAGIC))
    if head == _SQLITE_MAGIC:
        return "an SQLite database"
    if head.startswith(_PARQUET_MAGIC):
        return "a Parquet file"
    if head.lstrip()[:1] in (b"{", b"["):
        return "a JSON file"
    return "another file"


def _holder(path: Path) -> str:
    try:
        pid, _, host = path.read_text(encoding="utf-8").strip().partition(" ")
    except OSError:
        return "pid unknown"
    return f"pid {pid} on {host}" if pid else "pid unknown"


def acquire_lock(directory: Path, lock_file: str, wait: float, what: str) -> int:
    """An exclusive lock on ``directory/lock_file`` (which then holds our PID and host), waiting
    up to ``wait`` seconds; a DataError naming the holder on timeout. ``what`` names the folder
    in messages ("store", "reproduce folder"). Returns the descriptor for :func:`release_lock`.
    """
    path = directory / lock_file
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise DataError(f"{what} {directory} is read-only or not accessible (cannot open its "
                        f"lock file: {exc.strerror or exc}); use a folder you can write") from None
    deadline = time.monotonic() + max(wait, 0.0)
    while True:
        try:
            _try_lock(fd)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                holder = _holder(path)
                os.close(fd)
                raise DataError(
                    f"{what} {directory} is in use by another depthscale process ({holder}); "
                    "wait for it to finish or stop it, then run again"
                ) from None
            time.sleep(0.05)
        except OSError as exc:
            os.close(fd)
            raise DataError(f"cannot lock {what} {directory} ({exc.strerror or exc})") from None
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
    return fd


@contextlib.contextmanager
def folder_lock(directory: Path, lock_file: str, *, wait: float, what: str) -> Iterator[None]:
    """:func:`acquire_lock` for the duration of a ``with`` block."""
    fd = acquire_lock(directory, lock_file, wait, what)
    try:
        yield
    finally:
        release_lock(fd)


try:
    import fcntl

    def _try_lock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def release_lock(fd: int) -> None:
        """Release and close a descriptor from :func:`acquire_lock` (idempotent on errors)."""
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        with contextlib.suppress(OSError):
            os.close(fd)

except ImportError:  # Windows
    import msvcrt

    def _try_lock(fd: int) -> None:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
        except OSError as exc:
            raise BlockingIOError(str(exc)) from None

    def release_lock(fd: int) -> None:
        """Release and close a descriptor from :func:`acquire_lock` (idempotent on errors)."""
        with contextlib.suppress(OSError):
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]
        with contextlib.suppress(OSError):
            os.close(fd)

"""Output folders: checked before any work starts, and locked while a process writes them.

:func:`check_output_dir` finds, in a fraction of a second, what would otherwise fail after a
long run: a path that is a file or lies under one, a name longer than the filesystem allows,
a folder that cannot be written. :func:`folder_lock` is the one writer lock of every folder
depthscale writes in place (a study's store, a reproduce folder): an exclusive ``flock`` on a
lock file that holds the writer's PID, released by the OS when the process dies, so a killed
run leaves no stale lock.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from depthscale.errors import ConfigError, DataError

__all__ = [
    "acquire_lock", "check_output_dir", "check_output_file", "folder_lock", "release_lock",
]

_NAME_MAX = 255  # bytes per path component where the filesystem does not say
_PATH_MAX = 4096


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


def check_output_file(path: str | os.PathLike[str], flag: str) -> Path:
    """``path`` as a Path if a file can be written there (its folder checked as by
    :func:`check_output_dir`); a ConfigError naming ``flag`` if it is a folder or cannot be."""
    p = Path(path).expanduser()
    check_output_dir(p.parent, f"{flag} {p}: folder")
    if len(os.fsencode(p.name)) > _NAME_MAX:
        raise ConfigError(f"{flag} {p}: the file name has {len(p.name)} characters, more than "
                          f"the {_NAME_MAX} bytes a file name may have; use a shorter name")
    if p.is_dir():
        raise ConfigError(f"{flag} {p} is a folder; give a file name")
    return p


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

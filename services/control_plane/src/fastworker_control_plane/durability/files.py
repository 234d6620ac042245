"""The file operations under the journal: the state dir's lock, whole writes, and
replacing a file atomically. Plain ``os`` calls; ``OSError`` is the caller's to handle.

Nothing here ever leaves a half-written file where the journal is: a new file is written
beside it, synced, then renamed over it, and a failed attempt removes what it wrote (on
a full disk, a leftover temporary file is exactly the space the next attempt needs).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path


def lock(directory: Path, name: str) -> int:
    """Take the state dir's lock file; raises ``BlockingIOError`` if another holds it."""
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / name, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise
    return fd


def append_after(path: Path, keep: int, header: bytes) -> tuple[int, int]:
    """Open ``path`` to append after its first ``keep`` bytes (what follows is cut off in
    place, which needs no free space); a file without a whole ``header`` starts afresh
    with one. Returns the descriptor and the size appending starts at."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        if keep < len(header):
            os.ftruncate(fd, 0)
            write_all(fd, header)
            os.fsync(fd)
            sync_directory(path.parent)  # the new file itself must survive a crash
            return fd, len(header)
        if os.fstat(fd).st_size != keep:
            os.ftruncate(fd, keep)
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd, keep


def sync_data(fd: int) -> None:
    """Make what was written to ``fd`` durable: ``fdatasync``, or ``fsync`` where the
    system has no ``fdatasync`` (macOS), which syncs the metadata too."""
    getattr(os, "fdatasync", os.fsync)(fd)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def replace(path: Path, data: bytes) -> None:
    """Make ``path`` hold ``data``, atomically: the old content or the new, never a mix."""
    tmp = temporary(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        remove(tmp)
        raise


def sync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def set_aside(path: Path) -> Path:
    """Keep ``path``'s current content under a new name (a hard link: no space needed)."""
    aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
    remove(aside)
    os.link(path, aside)
    return aside


def temporary(path: Path) -> Path:
    return path.with_suffix(".tmp")


def remove(path: Path) -> None:
    with contextlib.suppress(OSError):  # gone already, or not ours to insist on
        os.unlink(path)

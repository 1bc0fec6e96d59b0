"""Whole-file kernel locks (§11): a writer holds ``flock(LOCK_EX)`` for its session,
a reader takes ``LOCK_SH`` for a stable view. Never a sidecar lockfile."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable

from .errors import StoreLocked

# how often a writer reopens the path because the file it locked was replaced meanwhile
# (each time by another writer's compaction); past this it reports the file as busy
_REOPEN_LIMIT = 100


def lock_exclusive(fd: int, path: str) -> None:
    """Take the writer lock without waiting; a second writer fails fast."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise StoreLocked(
            f"{path}: another process holds the lock (single writer, HTT §11); "
            f"close the other writer or open read-only") from None


def is_file_at(fd: int, path: str) -> bool:
    """Whether ``fd`` is the file that ``path`` names now (not one a rename replaced)."""
    st = os.fstat(fd)
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False
    return (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino)


def open_locked(path: str, open_fd: Callable[[], int]) -> int:
    """Open ``path`` with ``open_fd()`` and take the writer lock on the file that is at
    the path. Another writer's compaction can rename a new file over the path between
    the open and the flock: the lock is then on the old, unlinked file and every append
    would go nowhere, so the descriptor is closed and the path opened again."""
    for _ in range(_REOPEN_LIMIT):
        fd = open_fd()
        try:
            lock_exclusive(fd, path)
            if is_file_at(fd, path):
                return fd
        except BaseException:
            os.close(fd)
            raise
        unlock(fd)
        os.close(fd)
    raise StoreLocked(f"{path}: the file was replaced {_REOPEN_LIMIT} times while this "
                      f"writer opened it (another writer is compacting it)")


def lock_shared(fd: int, path: str, *, wait: bool = False) -> bool:
    """Take a reader lock. Without ``wait`` a busy file returns False (the caller may
    read lock-free, relying on per-entry CRC recovery, the Unix degraded mode)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | (0 if wait else fcntl.LOCK_NB))
        return True
    except BlockingIOError:
        return False


def unlock(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError:
        pass


def read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    chunks, offset = [], 0
    while offset < size:
        chunk = os.pread(fd, size - offset, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)

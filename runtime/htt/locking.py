"""Whole-file kernel locks (§11): a writer holds ``flock(LOCK_EX)`` for its session,
a reader takes ``LOCK_SH`` for a stable view. Never a sidecar lockfile."""

from __future__ import annotations

import fcntl
import os

from .errors import StoreLocked


def lock_exclusive(fd: int, path: str) -> None:
    """Take the writer lock without waiting; a second writer fails fast."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise StoreLocked(
            f"{path}: another process holds the lock (single writer, HTT §11); "
            f"close the other writer or open read-only") from None


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

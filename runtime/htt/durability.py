"""fsync policy and crash-safe file replacement (tmp + fsync + rename + dir fsync)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..atomic import fsync_dir, write_all

PER_OP = "per_op"
BATCHED = "batched"
MANUAL = "manual"
POLICIES = (PER_OP, BATCHED, MANUAL)
MAX_BLOCK_ENTRIES = 64


@dataclass(frozen=True)
class Durability:
    """When staged WAL entries are written and fsynced (§6 Write), and so when a write
    is *acknowledged*: durable, and kept by every later open.

    * ``per_op``: every API call is written (one flush: one block in compressed files)
      and fsynced before it returns: a call that returns is acknowledged. The default.
    * ``batched``: entries are buffered and written + fsynced as one flush once
      ``batch_size`` (1-64) are pending, and on ``flush()``/``close()``/``compact()``.
      A call that returns is *not* acknowledged yet (readers of this session see it);
      it is when the flush that writes it returns, whichever call runs that flush.
    * ``manual``: every API call is written, but fsync happens only on ``flush()``,
      ``close()`` or ``compact()``: the caller decides when data is durable, and only
      those calls acknowledge.

    Under every policy a failed write or fsync raises ``Poisoned`` from the call that
    ran it, and the session writes nothing more: entries not acknowledged by then may or
    may not be in the file (whole, or cut off as a torn tail by the next writer open),
    each at most once. Close the session and reopen the file to go on.
    """

    mode: str = PER_OP
    batch_size: int = MAX_BLOCK_ENTRIES

    def __post_init__(self) -> None:
        if self.mode not in POLICIES:
            raise ValueError(f"durability must be one of {POLICIES}, got {self.mode!r}")
        if not 1 <= self.batch_size <= MAX_BLOCK_ENTRIES:
            raise ValueError(f"batch_size must be 1..{MAX_BLOCK_ENTRIES}, got {self.batch_size}")

    def write_now(self, pending: int) -> bool:
        return self.mode != BATCHED or pending >= self.batch_size

    def fsync_now(self) -> bool:
        return self.mode != MANUAL


def atomic_write(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` crash-safely: a reader sees the old file or the new."""
    tmp, fd = create_new(f"{path}.tmp-{os.getpid()}")
    try:
        write_all(fd, data, 0)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        _unlink(tmp)
        raise
    os.close(fd)
    try:
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise
    fsync_dir(path)


def create_new(base: str, suffix: str = "") -> tuple[str, int]:
    """Create a file that did not exist (``O_EXCL``), named ``base + suffix`` or, when
    that name is taken, ``base.N + suffix``; returns its path and a read-write fd. A file
    already there (left by an earlier crash, possibly the only copy of something) is
    never truncated or replaced."""
    n = 1
    while True:
        name = f"{base}{suffix}" if n == 1 else f"{base}.{n}{suffix}"
        try:
            return name, os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            n += 1


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass

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
    """When staged WAL entries are written and fsynced (§6 Write).

    * ``per_op``: every API call is written (one flush: one block in compressed files)
      and fsynced before it returns. The default.
    * ``batched``: entries are buffered and written + fsynced as one flush once
      ``batch_size`` (1-64) are pending, and on ``flush()``/``close()``/``compact()``.
    * ``manual``: every API call is written, but fsync happens only on ``flush()``,
      ``close()`` or ``compact()``: the caller decides when data is durable.
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
    tmp = f"{path}.tmp-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
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


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass

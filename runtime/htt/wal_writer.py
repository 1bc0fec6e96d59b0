"""Appending WAL entries: encode early (so a bad value fails before state changes),
write per the durability policy, never touch bytes already written except the
advisory ``wal_entry_count`` (rewritten in place, §6).

A write or fsync that fails poisons the writer for good: the bytes on disk are then
unknown (part of a flush may be there, and after a failed fsync the kernel may have
dropped dirty pages while reporting later fsyncs as clean), so writing on or retrying
could put acknowledged entries on top of a hole. Only a reopen, whose replay verifies
every entry, knows the durable state again."""

from __future__ import annotations

import os

from ...generated.htt import (
    WalBlock,
    WalEntry,
    WalHeader,
    encode_wal_block,
    encode_wal_entry,
    encode_wal_header,
)
from .durability import MAX_BLOCK_ENTRIES, Durability, write_all
from .errors import Poisoned
from .layout import FileLayout


class WalWriter:
    """Owns the append position of one open file descriptor."""

    def __init__(self, fd: int, layout: FileLayout, wal_offset: int, end: int,
                 base_seq: int, count: int, durability: Durability, path: str = "") -> None:
        self.fd = fd
        self.path = path
        self.layout = layout
        self.wal_offset = wal_offset
        self.end = end
        self.base_seq = base_seq
        self.count = count  # entries on disk in this WAL
        self.durability = durability
        self.pending: list[tuple[WalEntry, bytes]] = []
        self.dirty = False  # written but not fsynced
        self.flushes = 0
        self.synced_end = base_seq + count  # entries below this seq are fsynced
        self.poisoned: BaseException | None = None  # the failure that ended this writer

    def check(self) -> None:
        """Raise ``Poisoned`` once a write or fsync has failed."""
        if self.poisoned is not None:
            raise Poisoned(self.path, self.poisoned) from self.poisoned

    def poison(self, exc: BaseException) -> Poisoned:
        """Mark the writer unusable; returns the error the failing call raises."""
        if self.poisoned is None:
            self.poisoned = exc
        return Poisoned(self.path, self.poisoned)

    def encode(self, entry: WalEntry) -> bytes:
        return encode_wal_entry(entry, **self.layout.entry_params())

    def stage(self, entries: list[WalEntry]) -> list[bytes]:
        """Encode (validating) without writing; raises ``EncodeError`` on bad values."""
        return [self.encode(e) for e in entries]

    def add(self, entries: list[WalEntry], encoded: list[bytes]) -> None:
        """Queue entries; write (and fsync) them now if the policy says so. Raises
        ``Poisoned`` if that write fails, or failed before."""
        self.check()
        self.pending.extend(zip(entries, encoded, strict=True))
        if self.durability.write_now(len(self.pending)):
            self.write(fsync=self.durability.fsync_now())

    def write(self, *, fsync: bool = True) -> None:
        """One flush: append the pending entries (blocks of <= 64 when compressed). Any
        failure poisons the writer (``Poisoned``, caused by the ``OSError``)."""
        self.check()
        try:
            self._write(fsync)
        except Exception as exc:
            raise self.poison(exc) from exc
        except BaseException as exc:  # an interrupt mid-write: unknown bytes on disk too
            self.poison(exc)
            raise

    def _write(self, fsync: bool) -> None:
        if self.pending:
            if self.layout.block_compressed:
                params = self.layout.block_params()
                chunks = [encode_wal_block(
                    WalBlock([e for e, _ in self.pending[i:i + MAX_BLOCK_ENTRIES]]), **params)
                    for i in range(0, len(self.pending), MAX_BLOCK_ENTRIES)]
                data = b"".join(chunks)
            else:
                data = b"".join(b for _, b in self.pending)
            write_all(self.fd, data, self.end)
            self.end += len(data)
            self.count += len(self.pending)
            self.pending.clear()
            write_all(self.fd, encode_wal_header(WalHeader(self.count, self.base_seq)),
                      self.wal_offset)
            self.dirty = True
            self.flushes += 1
        if fsync and self.dirty:
            os.fsync(self.fd)
            self.dirty = False

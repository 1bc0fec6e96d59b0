"""Compaction (§6): fold snapshot + WAL into a new snapshot, atomically.

The new file is written to ``<path>.compact-<pid>.tmp`` (a new name, ``O_EXCL``, when
a file by that name is already there), fsynced and locked
(``LOCK_EX``, so the session keeps the writer lock across the rename), history is
archived first when retention asks for it, then ``os.replace`` swaps it in and the
directory is fsynced. Any failure before the rename removes the temp file and leaves
the original untouched and readable.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from ...generated.htt import (
    BoundPair,
    BoundsSection,
    EpochBody,
    EpochFlags,
    FileHeader,
    SnapshotEntry,
    SnapshotSection,
    WalBlock,
    WalEntry,
    WalHeader,
    WalOp,
    encode_bounds_section,
    encode_file_header,
    encode_snapshot_section,
    encode_wal_block,
    encode_wal_entry,
    encode_wal_header,
)
from .durability import _unlink, create_new, fsync_dir, write_all
from .layout import FileLayout, version_for
from .locking import lock_exclusive
from .ordering import snapshot_order
from .state import State


@dataclass
class CompactedFile:
    data: bytes
    header: FileHeader
    wal_offset: int
    base_seq: int
    wal_count: int
    node_count: int
    entries: list[WalEntry]  # the fresh WAL's entries (the RESTAMP, when there is one)


def build(state: State, header: FileHeader, layout: FileLayout,
          bounds: Sequence[tuple[float, float]], next_seq: int) -> CompactedFile:
    """The bytes of the compacted file (v1 files are upgraded to v2)."""
    version = max(header.version, version_for(header.flags))
    nodes = snapshot_order(state, layout, bounds)
    codec = state.codec
    entries = [SnapshotEntry(n.key, n.data, n.meta, codec.to_disk(n.tail)) for n in nodes]
    new_header = FileHeader(version, header.flags, header.dimension, header.semantic_dims,
                            header.tau, len(entries))
    out = bytearray(encode_file_header(new_header))
    if header.flags.meaning_addressed:
        out += encode_bounds_section(
            BoundsSection([BoundPair(float(lo), float(hi)) for lo, hi in bounds]),
            semantic_dims=header.semantic_dims)
    new_layout = FileLayout.of(new_header)
    out += encode_snapshot_section(SnapshotSection(entries), **new_layout.snapshot_params())
    wal_offset = len(out)
    wal: list[WalEntry] = []
    if state.epoch > 0:  # RESTAMP: carry the counter over the truncation (§4.1)
        wal.append(WalEntry(next_seq, WalOp.EPOCH, "",
                            EpochBody(state.epoch, EpochFlags(False, True))))
    out += encode_wal_header(WalHeader(len(wal), next_seq))
    if wal:
        if new_layout.block_compressed:
            out += encode_wal_block(WalBlock(wal), **new_layout.block_params())
        else:
            out += encode_wal_entry(wal[0], **new_layout.entry_params())
    return CompactedFile(bytes(out), new_header, wal_offset, next_seq, len(wal),
                         len(entries), wal)


def replace(path: str, compacted: CompactedFile, before_rename=None) -> int:
    """Write ``compacted`` next to ``path`` and swap it in; returns the new file's fd,
    already holding ``LOCK_EX``. ``before_rename()`` runs after the temp file is
    durable (history archiving goes there)."""
    tmp, fd = create_new(f"{path}.compact-{os.getpid()}", ".tmp")
    try:
        lock_exclusive(fd, tmp)
        write_all(fd, compacted.data, 0)
        os.fsync(fd)
        if before_rename is not None:
            before_rename()
        os.replace(tmp, path)
    except BaseException:
        os.close(fd)
        _unlink(tmp)
        raise
    fsync_dir(path)
    return fd

"""Cold start (§6): header, bounds, snapshot, then the WAL with per-entry recovery.

The header and snapshot are strict: any decode failure there (bad magic, header CRC,
unknown version, a length larger than the file, snapshot CRC) fails the open with the
codec's ``DecodeError``, tagged with the file name. The WAL is recovered, never raised:
entries are applied in order until the first torn tail, bad CRC, undecodable entry or
sequence break, and everything from there on is dropped (and logged). In block-
compressed WALs a block that does not decode whole is re-read as plain bytes
(``wal_block_plain``) and the per-entry CRC and sequence rules apply inside it, so the
intact entries before the bad one are kept (``WalScan.salvaged``); a block whose frame
does not decompress is a torn tail (§5).
"""

from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from ...generated.htt import (
    BoundPair,
    FileHeader,
    WalEntry,
    decode_bounds_section,
    decode_file_header,
    decode_snapshot_section,
    decode_wal_block,
    decode_wal_block_plain,
    decode_wal_header,
    iter_wal_entry,
)
from ..errors import DecodeError
from .layout import FileLayout
from .state import Node, State, depth_of

log = logging.getLogger("bytewright.htt")

HEADER_SIZE = 32
WAL_HEADER_SIZE = 8


@dataclass
class Prefix:
    """Header, bounds and snapshot: everything before the WAL header."""

    header: FileHeader
    layout: FileLayout
    bounds: list[BoundPair] | None
    snapshot_offset: int
    wal_offset: int  # where the WAL header starts


@dataclass
class WalScan:
    """Where the intact WAL ends and why it ends there."""

    wal_offset: int
    base_seq: int
    header_count: int | None  # advisory wal_entry_count (None: header torn)
    entries_offset: int
    valid_end: int  # file offset just past the last intact entry/block
    count: int = 0  # intact entries
    next_seq: int = 0
    problem: str | None = None  # why the scan stopped early (None: clean end of file)
    problem_offset: int | None = None
    blocks: int = 0
    # intact entries from a block that did not decode whole; they sit past valid_end
    # on disk, so a writer re-appends them as a fresh block after trimming the tail
    salvaged: list[WalEntry] = field(default_factory=list)

    @property
    def truncated(self) -> bool:
        return self.problem is not None


def _tag(exc: DecodeError, path: str) -> DecodeError:
    exc.file = path
    return exc


def read_prefix(buf, path: str = "") -> Prefix:
    """Decode header, bounds and snapshot structure; strict (raises ``DecodeError``)."""
    try:
        header, pos = decode_file_header(buf, 0)
        layout = FileLayout.of(header)
        bounds = None
        if header.flags.meaning_addressed:
            section, pos = decode_bounds_section(buf, pos, semantic_dims=header.semantic_dims)
            bounds = section.bounds
        return Prefix(header, layout, bounds, pos, pos)
    except DecodeError as exc:
        raise _tag(exc, path) from None


def load_snapshot(buf, prefix: Prefix, state: State, path: str = "") -> int:
    """Decode the snapshot into ``state``; returns the offset of the WAL header."""
    layout = prefix.layout
    try:
        section, end = decode_snapshot_section(buf, prefix.snapshot_offset,
                                               **layout.snapshot_params())
        codec = state.codec
        nodes = [Node(e.key, bytes(e.data), list(e.meta), codec.from_disk(e.tail))
                 for e in section.entries]
    except DecodeError as exc:
        raise _tag(exc, path) from None
    if layout.flags.meaning_addressed:
        # v3 stores global-Hilbert order; full readers depth-sort before replay (§9).
        nodes.sort(key=lambda n: depth_of(n.key))
    for node in nodes:
        state.add_loaded(node)
    prefix.wal_offset = end
    return end


def scan_wal(buf, wal_offset: int, layout: FileLayout,
             on_entry: Callable[[WalEntry], None] | None, path: str = "") -> WalScan:
    """Walk the WAL from its header, calling ``on_entry`` for each intact entry in
    order. Never raises for bad WAL bytes; the result says where and why it stopped."""
    size = len(buf)
    if size - wal_offset < WAL_HEADER_SIZE:
        scan = WalScan(wal_offset, 1, None, wal_offset, wal_offset, next_seq=1)
        if size > wal_offset:
            scan.problem, scan.problem_offset = "torn WAL header", wal_offset
        elif size == wal_offset:
            scan.problem, scan.problem_offset = "missing WAL header", wal_offset
        _report(scan, path)
        return scan
    hdr, pos = decode_wal_header(buf, wal_offset)
    scan = WalScan(wal_offset, hdr.wal_base_seq, hdr.wal_entry_count, pos, pos,
                   next_seq=hdr.wal_base_seq)
    expected = hdr.wal_base_seq
    if not layout.block_compressed:
        params = layout.entry_params()
        try:
            for entry, end in iter_wal_entry(buf, pos, **params):
                if entry.seq != expected:
                    scan.problem = f"sequence break (expected {expected}, found {entry.seq})"
                    scan.problem_offset = scan.valid_end
                    break
                if on_entry is not None:
                    on_entry(entry)
                expected += 1
                scan.valid_end = end
        except (DecodeError, ValueError) as exc:
            scan.problem, scan.problem_offset = _describe(exc), scan.valid_end
    else:
        params = layout.block_params()
        while pos < size:
            try:
                block, end = decode_wal_block(buf, pos, **params)
            except (DecodeError, ValueError) as exc:
                scan.problem, scan.problem_offset = _describe(exc), pos
                expected = _salvage(buf, pos, layout, expected, on_entry, scan)
                break
            seqs = [e.seq for e in block.entries]
            if seqs != list(range(expected, expected + len(seqs))):
                scan.problem = f"sequence break in block (expected {expected}, found {seqs[0]}..)"
                scan.problem_offset = pos
                expected = _salvage(buf, pos, layout, expected, on_entry, scan)
                break
            try:
                if on_entry is not None:
                    for entry in block.entries:
                        on_entry(entry)
            except (DecodeError, ValueError) as exc:
                scan.problem, scan.problem_offset = _describe(exc), pos
                break
            expected += len(seqs)
            pos = scan.valid_end = end
            scan.blocks += 1
    scan.count = expected - hdr.wal_base_seq
    scan.next_seq = expected
    _report(scan, path)
    return scan


@contextlib.contextmanager
def bulk_load():
    """Pause the cyclic garbage collector while a file is loaded.

    Loading creates one small acyclic object graph per node; with the collector on, every
    generation-2 pass re-traverses the whole growing tree (measured: ~40% of a 300k-node
    replay). Reference counting still frees everything; the collector resumes after.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _salvage(buf, pos: int, layout: FileLayout, expected: int,
             on_entry: Callable[[WalEntry], None] | None, scan: WalScan) -> int:
    """Keep the intact, in-sequence entries at the start of a block that failed whole."""
    try:
        raw, _ = decode_wal_block_plain(buf, pos, algorithm=layout.flags.algorithm)
    except (DecodeError, ValueError):
        return expected  # the frame itself is torn: nothing inside can be trusted
    try:
        for entry, _ in iter_wal_entry(raw.plain, **layout.entry_params()):
            if entry.seq != expected or len(scan.salvaged) >= raw.block_entry_count:
                break
            if on_entry is not None:
                on_entry(entry)
            scan.salvaged.append(entry)
            expected += 1
    except (DecodeError, ValueError):
        pass
    return expected


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


def _report(scan: WalScan, path: str) -> None:
    if scan.problem is not None:
        log.warning("%s: WAL truncated at offset %s after %d intact entries: %s",
                    path or "<buffer>", scan.problem_offset, scan.count, scan.problem)
    elif scan.header_count is not None and scan.header_count != scan.count:
        log.info("%s: advisory wal_entry_count %d, found %d entries",
                 path or "<buffer>", scan.header_count, scan.count)


def load(buf, state: State, path: str = "") -> tuple[Prefix, WalScan]:
    """Full cold start into ``state``: strict prefix, recovered WAL."""
    prefix = read_prefix(buf, path)
    load_snapshot(buf, prefix, state, path)
    scan = scan_wal(buf, prefix.wal_offset, prefix.layout, state.apply, path)
    return prefix, scan


def committed_entries(buf, wal_offset: int, layout: FileLayout) -> list[WalEntry]:
    """The intact WAL entries, in order (for replication and history archiving)."""
    out: list[WalEntry] = []
    scan_wal(buf, wal_offset, layout, out.append)
    return out

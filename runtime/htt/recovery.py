"""What lies past WAL damage, and keeping what a repair cuts (docs/recovery.md).

The spec's rule (§4 Per-entry CRC, §6 Recovery) stops replay at the first bad CRC and
presumes everything after it is a crash's partial write. That is true of a torn tail;
it is false of bit rot in the middle of the log, where intact records follow. So:

* ``scan_after`` looks past the damage for *valid-looking* records (a record that
  parses and whose CRC matches), so callers can tell a torn tail (none follow) from
  mid-log damage (some do);
* a writer cuts only through ``runtime.cut``, which copies every byte it removes
  into ``FILE.discarded-OFFSET`` (fsynced, directory fsynced) first, torn tails too;
  a damaged block's intact entries are kept in ``FILE.reappend-OFFSET`` before the
  cut, so a crash before they are appended again loses none (``reappends``);
* ``salvage`` (module :mod:`.salvage`) copies every record that still verifies, before
  and after the damage, into a new file for a human to judge.

Recovery modes (named after RocksDB's WAL recovery modes):

* ``point_in_time`` (kPointInTimeRecovery): the spec's automatic rule, the default.
  Replay stops at the first damage; a writer cuts there, first keeping the cut bytes
  in a side file. A first entry that breaks the sequence while every record verifies
  and runs on from it points at ``wal_base_seq`` (no checksum covers it): a writer
  open refuses that instead of cutting the whole WAL.
* ``tolerate_corrupted_tail`` (kTolerateCorruptedTailRecords): a torn tail is cut as
  above; damage followed by valid-looking records refuses the open (``WalDamaged``).
  Maintenance commands (``htt compact``) use this unless told ``discard_after``.
* ``absolute_consistency`` (kAbsoluteConsistency): any damage refuses the open.

kSkipAnyCorruptedRecords is never applied in place: it is what ``salvage`` does, into
a new file.
"""

from __future__ import annotations

import logging
import os
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from ...generated.htt import (
    WalBlock,
    WalEntry,
    WalOp,
    decode_wal_block,
    decode_wal_block_plain,
    decode_wal_entry,
    encode_wal_block,
)
from ..atomic import fsync_dir
from ..cut import DISCARDED, keep, side_files, side_path
from ..errors import DecodeError
from ..mapped import RELEASE_EVERY, releaser
from .durability import MAX_BLOCK_ENTRIES
from .layout import FileLayout, field_offset

log = logging.getLogger("bytewright.htt")

POINT_IN_TIME = "point_in_time"
TOLERATE_CORRUPTED_TAIL = "tolerate_corrupted_tail"
ABSOLUTE_CONSISTENCY = "absolute_consistency"
MODES = (POINT_IN_TIME, TOLERATE_CORRUPTED_TAIL, ABSOLUTE_CONSISTENCY)
CHECKSUM_MISMATCH = "checksum mismatch"
SEQUENCE_BREAK = "sequence break"
BASE_SEQ_FIELD = "wal_header.wal_base_seq"
REAPPEND = "reappend"  # side-file label of a damaged block's intact entries (intent)

# smallest WAL entry: seq u32, op u8, key_len u16, entry_crc u32 (DELETE, empty key)
MIN_ENTRY_SIZE = 11
_OP_AT = field_offset("wal_entry", "op")  # where the cheap filter looks
# the op codes a valid-looking record can carry (§4), as one byte class
_OP_BYTE = re.compile(b"[" + b"".join(re.escape(bytes([op.value])) for op in WalOp) + b"]")
# survivors a ``Damage`` holds whole; the rest are counted only, so that a reader of a
# file damaged near its start holds a bounded report, not a second copy of the log
# (``all_survivors`` gives every one, for ``salvage``)
KEEP_SURVIVORS = 64
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# where a block's compressed length and frame start (the layout data; length is a u32)
_CLEN_AT = field_offset("wal_block_plain", "plain")
_FRAME_AT = _CLEN_AT + 4
# block_entry_count (§5: u16 LE, 1..64): low byte 1..64, high byte 0; lookahead, so
# overlapping candidates are all found
_BLOCK_COUNT = re.compile(b"(?=[\x01-" + re.escape(bytes([MAX_BLOCK_ENTRIES])) + b"]\x00)")


@dataclass
class Survivor:
    """A valid-looking record past the damage."""

    offset: int  # file offset of the entry (or of the block holding it)
    entry: WalEntry
    in_block: bool = False


@dataclass
class Damage:
    """Why the WAL ends early and what follows the damage."""

    offset: int
    cause: str  # checksum mismatch / sequence break / truncated record / ...
    survivors: list[Survivor] = field(default_factory=list)  # the first KEEP_SURVIVORS
    records_after: int = 0  # valid-looking records past the damage, all of them
    # block-compressed WALs: where the kept entries end in the damaged block's plain
    # bytes (scan_after's argument, so all_survivors can search again)
    block_plain_from: int | None = None
    # the header field no checksum covers that this damage points at (None: none)
    suspect: str | None = None

    @property
    def torn_tail(self) -> bool:
        """Nothing valid follows and the last record is not whole: the crash's partial
        write the spec's rule is for. A record whose every byte is there but whose CRC
        fails was written whole and changed since: damage, reported by its cause."""
        return not self.records_after and self.cause != CHECKSUM_MISMATCH

    @property
    def reason(self) -> str:
        return "torn tail" if self.torn_tail else self.cause


def cause_of(exc: Exception) -> str:
    """The short reason for a record that failed to decode."""
    from ..errors import ChecksumError, TruncatedError

    if isinstance(exc, ChecksumError):
        return CHECKSUM_MISMATCH
    if isinstance(exc, TruncatedError):
        return "truncated record"
    return "undecodable record"


def _scan_entries(buf, pos: int, end: int, params: dict, base: int | None,
                  in_block: bool, out: list[Survivor], keep: int | None) -> int:
    """Count every valid-looking entry in ``buf[pos:end]``, trying each byte offset (a
    flip may have changed a length, so record boundaries after the damage are unknown),
    and append the first ones to ``out`` while it holds fewer than ``keep`` (None: all).
    A memory-mapped ``buf`` has the pages it walked released as it goes."""
    mv = memoryview(buf)[:end]
    release = releaser(buf) if base is None else None
    mark = pos + RELEASE_EVERY
    count = 0
    # candidates: offsets whose op byte is a known op (found at C speed; most offsets
    # of a damaged tail fail there, and a Python loop over every byte of a large WAL
    # would take minutes)
    for m in _OP_BYTE.finditer(buf, pos + _OP_AT, max(end - MIN_ENTRY_SIZE + _OP_AT + 1,
                                                        pos + _OP_AT)):
        at = m.start() - _OP_AT
        if at < pos:
            continue  # inside a record already found
        if release is not None and at >= mark:
            release(at)  # nothing before ``at`` is read again
            mark = at + RELEASE_EVERY
        try:
            entry, stop = decode_wal_entry(mv, at, **params)
        except (DecodeError, ValueError):
            continue
        count += 1
        if keep is None or len(out) < keep:
            out.append(Survivor(at if base is None else base, entry, in_block))
        pos = stop
    return count


def _scan_blocks(buf, pos: int, layout: FileLayout, out: list[Survivor],
                 keep: int | None) -> int:
    """Count the valid-looking entries in whole blocks from ``pos`` on (byte by byte);
    the first ones go to ``out`` as in ``_scan_entries``."""
    size = len(buf)
    params = layout.entry_params()
    zstd = layout.algorithm.name == "zstd"
    release = releaser(buf)
    mark = pos + RELEASE_EVERY
    count = 0
    # candidates: a u16 LE block_entry_count of 1..64 (found at C speed)
    for m in _BLOCK_COUNT.finditer(buf, pos, max(size - 6, pos)):
        at = m.start()
        if at < pos:
            continue  # inside a block already found
        if release is not None and at >= mark:
            release(at)
            mark = at + RELEASE_EVERY
        clen = int.from_bytes(buf[at + _CLEN_AT:at + _FRAME_AT], "little")
        if not 0 < clen <= size - at - _FRAME_AT or (
                zstd and buf[at + _FRAME_AT:at + _FRAME_AT + 4] != _ZSTD_MAGIC):
            continue  # cheap filters before a decompression attempt
        try:
            raw, stop = decode_wal_block_plain(buf, at, algorithm=layout.algorithm)
        except (DecodeError, ValueError):
            continue
        found = _scan_entries(raw.plain, 0, len(raw.plain), params, at, True, out, keep)
        if found:
            count += found
            pos = stop
    return count


def scan_after(buf, offset: int, layout: FileLayout, *,
               block_plain_from: int | None = None,
               keep: int | None = KEEP_SURVIVORS) -> tuple[int, list[Survivor]]:
    """How many valid-looking records lie at or after ``offset`` (where the intact WAL
    ends), and the first ``keep`` of them (None: every one).

    In block-compressed WALs, ``block_plain_from`` is where the entries that were kept
    end inside the damaged block's decompressed bytes (None: the block frame itself
    did not decompress); the rest of that block is searched too."""
    found: list[Survivor] = []
    if not layout.block_compressed:
        count = _scan_entries(buf, offset, len(buf), layout.entry_params(), None, False,
                              found, keep)
        return count, found
    count = 0
    resume = offset + 1
    if block_plain_from is not None:
        try:
            raw, stop = decode_wal_block_plain(buf, offset, algorithm=layout.algorithm)
        except (DecodeError, ValueError):
            pass
        else:
            count = _scan_entries(raw.plain, block_plain_from, len(raw.plain),
                                  layout.entry_params(), offset, True, found, keep)
            resume = stop
    return count + _scan_blocks(buf, resume, layout, found, keep), found


def all_survivors(buf, damage: Damage, layout: FileLayout) -> list[Survivor]:
    """Every valid-looking record past ``damage`` (a ``Damage`` holds the first
    ``KEEP_SURVIVORS``): what ``salvage`` copies."""
    if len(damage.survivors) >= damage.records_after:
        return list(damage.survivors)
    return scan_after(buf, damage.offset, layout, block_plain_from=damage.block_plain_from,
                      keep=None)[1]


def suspect_header(damage: Damage, entries_offset: int) -> str | None:
    """``wal_header.wal_base_seq`` when the very first entry breaks the sequence while
    it and the records after it verify and carry consecutive seqs: a crash's partial
    write (what §6 recovers) cannot produce that, a damaged header field can, and no
    checksum covers the field (§4). Only the records a ``Damage`` holds are checked: a
    caller refuses on this, and refusing too often loses nothing."""
    kept = damage.survivors
    if (damage.cause != SEQUENCE_BREAK or damage.offset != entries_offset or not kept
            or kept[0].offset != damage.offset):
        return None
    first = kept[0].entry.seq
    if [s.entry.seq for s in kept] != list(range(first, first + len(kept))):
        return None
    return BASE_SEQ_FIELD


# -- side files (runtime.cut keeps them) ----------------------------------------------

def discarded_path(path: str, offset: int) -> str:
    """The side file a cut at ``offset`` keeps its bytes in (``runtime.cut.side_path``)."""
    return side_path(path, offset, DISCARDED)


def discarded_paths(path: str) -> list[str]:
    """Side files left by earlier cuts of ``path``, in offset order."""
    return side_files(path, DISCARDED)


def _offset_of(side: str, label: str) -> int | None:
    tail = side.rsplit(f".{label}-", 1)[-1].split(".")[0]
    return int(tail) if tail.isdigit() else None


def _fingerprint(buf, wal_offset: int, end: int) -> bytes:
    """CRC-32 of ``buf[:end]`` without the advisory ``wal_entry_count`` (every flush
    rewrites it, §6): which file, and which state of it, an intent file belongs to."""
    count_end = wal_offset + 4
    crc = zlib.crc32(memoryview(buf)[:min(wal_offset, end)])
    return zlib.crc32(memoryview(buf)[count_end:max(end, count_end)], crc).to_bytes(4, "little")


def keep_reappend(path: str, buf, wal_offset: int, offset: int, entries: list[WalEntry],
                  layout: FileLayout) -> str:
    """Before a writer cuts a damaged block at ``offset``, make the block's intact
    ``entries`` durable in ``FILE.reappend-OFFSET`` (the fingerprint of the file the cut
    leaves, then the fresh blocks to append), so a crash between the cut and the append
    loses none of them (``reappends`` finds them). Returns the intent file's path."""
    blocks = b"".join(
        encode_wal_block(WalBlock(entries[i:i + MAX_BLOCK_ENTRIES]), **layout.block_params())
        for i in range(0, len(entries), MAX_BLOCK_ENTRIES))
    return keep(path, _fingerprint(buf, wal_offset, offset) + blocks, offset, REAPPEND)


def reappends(path: str, buf, wal_offset: int, end: int, next_seq: int,
              layout: FileLayout, block_limit: int,
              apply: Callable[[WalEntry], None]) -> tuple[list[WalEntry], list[str]]:
    """Intact entries of a damaged block that a crashed repair cut and had not yet
    appended again: those of the intent file kept for a cut at ``end`` (where the file
    now ends) whose fingerprint matches ``buf[:end]`` and whose first seq is
    ``next_seq``; ``apply`` is called on each, stopping before one it refuses (as replay
    stops there). Also returns the intent files that are done with: this one, and any
    whose entries the file already holds (a crash after the append). Intent files of
    another file or state (no matching fingerprint) are left alone."""
    entries: list[WalEntry] = []
    done: list[str] = []
    for side in side_files(path, REAPPEND):
        off = _offset_of(side, REAPPEND)
        if off is None or off > end or os.path.getsize(side) > 4 + 2 * block_limit:
            continue
        try:
            with open(side, "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        if data[:4] != _fingerprint(buf, wal_offset, off):
            continue
        found: list[WalEntry] = []
        pos = 4
        try:
            while pos < len(data):
                block, pos = decode_wal_block(data, pos, block_limit=block_limit,
                                              **layout.block_params())
                found.extend(block.entries)
        except (DecodeError, ValueError):
            continue  # a torn intent file: it was never acted on (the cut follows it)
        if not found:
            continue
        if off == end and not entries and found[0].seq == next_seq:
            for entry in found:
                if entry.seq != next_seq + len(entries):
                    break
                try:
                    apply(entry)
                except (DecodeError, ValueError):
                    break
                entries.append(entry)
            done.append(side)
        elif found[-1].seq < next_seq:
            done.append(side)  # appended before a crash: the file holds them
    return entries, done


def torn_copies(intent: str) -> list[str]:
    """Other intent files at ``intent``'s offset holding a proper prefix of its bytes:
    copies a crash interrupted while they were written (never acted on: the cut comes
    only after an intent file is whole and fsynced)."""
    try:
        with open(intent, "rb") as fh:
            whole = fh.read()
    except FileNotFoundError:
        return []
    out = []
    for side in side_files(intent.rsplit(f".{REAPPEND}-", 1)[0], REAPPEND):
        if side != intent and _offset_of(side, REAPPEND) == _offset_of(intent, REAPPEND) \
                and os.path.getsize(side) < len(whole):
            with open(side, "rb") as fh:
                if whole.startswith(fh.read()):
                    out.append(side)
    return out


def forget(intents: list[str]) -> None:
    """Remove intent files whose entries the file now holds, and their torn copies,
    fsynced (nothing else holds only them: the cut bytes are in
    ``FILE.discarded-OFFSET``)."""
    intents = intents + [t for i in intents for t in torn_copies(i)]
    for side in intents:
        try:
            os.unlink(side)
        except FileNotFoundError:
            pass
    if intents:
        fsync_dir(intents[0])

"""What lies past WAL damage, and keeping what a repair cuts (docs/recovery.md).

The spec's rule (§4 Per-entry CRC, §6 Recovery) stops replay at the first bad CRC and
presumes everything after it is a crash's partial write. That is true of a torn tail;
it is false of bit rot in the middle of the log, where intact records follow. So:

* ``scan_after`` looks past the damage for *valid-looking* records (a record that
  parses and whose CRC matches), so callers can tell a torn tail (none follow) from
  mid-log damage (some do);
* ``keep_discarded`` copies every byte a writer is about to cut into
  ``FILE.discarded-OFFSET`` (fsynced, directory fsynced) before the cut;
* ``salvage`` (module :mod:`.salvage`) copies every record that still verifies, before
  and after the damage, into a new file for a human to judge.

Recovery modes (named after RocksDB's WAL recovery modes):

* ``point_in_time`` (kPointInTimeRecovery): the spec's automatic rule, the default.
  Replay stops at the first damage; a writer cuts there, first keeping the cut bytes
  in a side file when valid-looking records follow.
* ``tolerate_corrupted_tail`` (kTolerateCorruptedTailRecords): a torn tail is cut as
  above; damage followed by valid-looking records refuses the open (``WalDamaged``).
  Maintenance commands (``htt compact``) use this unless told ``discard_after``.
* ``absolute_consistency`` (kAbsoluteConsistency): any damage refuses the open.

kSkipAnyCorruptedRecords is never applied in place: it is what ``salvage`` does, into
a new file.
"""

from __future__ import annotations

import glob
import logging
import os
import re
from dataclasses import dataclass, field

from ...generated.htt import (
    WalEntry,
    WalOp,
    decode_wal_block_plain,
    decode_wal_entry,
)
from ..errors import DecodeError
from ..mapped import RELEASE_EVERY, releaser
from .durability import MAX_BLOCK_ENTRIES, fsync_dir, write_all
from .layout import FileLayout, field_offset

log = logging.getLogger("bytewright.htt")

POINT_IN_TIME = "point_in_time"
TOLERATE_CORRUPTED_TAIL = "tolerate_corrupted_tail"
ABSOLUTE_CONSISTENCY = "absolute_consistency"
MODES = (POINT_IN_TIME, TOLERATE_CORRUPTED_TAIL, ABSOLUTE_CONSISTENCY)

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

    @property
    def torn_tail(self) -> bool:
        """Nothing valid follows: the crash's partial write the spec's rule is for."""
        return not self.records_after

    @property
    def reason(self) -> str:
        return "torn tail" if self.torn_tail else self.cause


def cause_of(exc: Exception) -> str:
    """The short reason for a record that failed to decode."""
    from ..errors import ChecksumError, TruncatedError

    if isinstance(exc, ChecksumError):
        return "checksum mismatch"
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


# -- keeping what a writer cuts -------------------------------------------------------

def discarded_path(path: str, offset: int) -> str:
    return f"{path}.discarded-{offset}"


def discarded_paths(path: str) -> list[str]:
    """Side files left by earlier cuts of ``path``, in offset order."""
    found = []
    for p in glob.glob(glob.escape(path) + ".discarded-*"):
        tail = p[len(path) + len(".discarded-"):].split(".")[0]
        if tail.isdigit():
            found.append((int(tail), p))
    return [p for _, p in sorted(found)]


def keep_discarded(path: str, buf, offset: int) -> str:
    """Copy ``buf[offset:]`` (the bytes about to be cut) next to ``path`` and make it
    durable before the caller truncates. Never overwrites an earlier side file."""
    target = discarded_path(path, offset)
    n = 1
    while True:
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            break
        except FileExistsError:
            with open(target, "rb") as fh:
                if fh.read() == bytes(buf[offset:]):
                    return target  # the same cut was kept already (a crash in between)
            n += 1
            target = f"{discarded_path(path, offset)}.{n}"
    try:
        write_all(fd, bytes(buf[offset:]), 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(target)
    return target

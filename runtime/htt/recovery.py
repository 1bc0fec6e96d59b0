"""What lies past WAL damage, and keeping what a repair cuts (docs/recovery.md).

The spec's rule (§4 Per-entry CRC, §6 Recovery) stops replay at the first bad CRC and
presumes everything after it is a crash's partial write. That is true of a torn tail;
it is false of bit rot in the middle of the log, where intact records follow. So:

* ``scan_after`` looks past the damage for *valid-looking* records (a record that
  parses and whose CRC matches), so callers can tell a torn tail (none follow) from
  mid-log damage (some do);
* ``keep_discarded`` copies every byte a writer is about to cut into
  ``FILE.discarded-OFFSET`` (fsynced, directory fsynced) before the cut;
* ``salvage`` copies every record that still verifies, before and after the damage,
  into a new file for a human to judge.

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
    WalBlock,
    WalEntry,
    WalHeader,
    WalOp,
    decode_wal_block_plain,
    decode_wal_entry,
    encode_wal_block,
    encode_wal_entry,
    encode_wal_header,
)
from ..errors import DecodeError
from .durability import MAX_BLOCK_ENTRIES, fsync_dir, write_all
from .errors import StoreError
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
    survivors: list[Survivor] = field(default_factory=list)

    @property
    def records_after(self) -> int:
        return len(self.survivors)

    @property
    def torn_tail(self) -> bool:
        """Nothing valid follows: the crash's partial write the spec's rule is for."""
        return not self.survivors

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
                  in_block: bool) -> list[Survivor]:
    """Every valid-looking entry in ``buf[pos:end]``, trying each byte offset (a flip
    may have changed a length, so record boundaries after the damage are unknown)."""
    mv = memoryview(buf)[:end]
    out: list[Survivor] = []
    # candidates: offsets whose op byte is a known op (found at C speed; most offsets
    # of a damaged tail fail there, and a Python loop over every byte of a large WAL
    # would take minutes)
    for m in _OP_BYTE.finditer(buf, pos + _OP_AT, max(end - MIN_ENTRY_SIZE + _OP_AT + 1,
                                                        pos + _OP_AT)):
        at = m.start() - _OP_AT
        if at < pos:
            continue  # inside a record already found
        try:
            entry, stop = decode_wal_entry(mv, at, **params)
        except (DecodeError, ValueError):
            continue
        out.append(Survivor(at if base is None else base, entry, in_block))
        pos = stop
    return out


def _scan_blocks(buf, pos: int, layout: FileLayout) -> list[Survivor]:
    """Valid-looking entries in whole blocks from ``pos`` on (byte by byte)."""
    size = len(buf)
    out: list[Survivor] = []
    params = layout.entry_params()
    zstd = layout.algorithm.name == "zstd"
    # candidates: a u16 LE block_entry_count of 1..64 (found at C speed)
    for m in _BLOCK_COUNT.finditer(buf, pos, max(size - 6, pos)):
        at = m.start()
        if at < pos:
            continue  # inside a block already found
        clen = int.from_bytes(buf[at + _CLEN_AT:at + _FRAME_AT], "little")
        if not 0 < clen <= size - at - _FRAME_AT or (
                zstd and buf[at + _FRAME_AT:at + _FRAME_AT + 4] != _ZSTD_MAGIC):
            continue  # cheap filters before a decompression attempt
        try:
            raw, stop = decode_wal_block_plain(buf, at, algorithm=layout.algorithm)
        except (DecodeError, ValueError):
            continue
        found = _scan_entries(raw.plain, 0, len(raw.plain), params, at, True)
        if found:
            out.extend(found)
            pos = stop
    return out


def scan_after(buf, offset: int, layout: FileLayout, *,
               block_plain_from: int | None = None) -> list[Survivor]:
    """Valid-looking records at or after ``offset`` (where the intact WAL ends).

    In block-compressed WALs, ``block_plain_from`` is where the entries that were kept
    end inside the damaged block's decompressed bytes (None: the block frame itself
    did not decompress); the rest of that block is searched too."""
    if not layout.block_compressed:
        return _scan_entries(buf, offset, len(buf), layout.entry_params(), None, False)
    found: list[Survivor] = []
    resume = offset + 1
    if block_plain_from is not None:
        try:
            raw, stop = decode_wal_block_plain(buf, offset, algorithm=layout.algorithm)
        except (DecodeError, ValueError):
            pass
        else:
            found = _scan_entries(raw.plain, block_plain_from, len(raw.plain),
                                  layout.entry_params(), offset, True)
            resume = stop
    return found + _scan_blocks(buf, resume, layout)


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


# -- salvage ------------------------------------------------------------------------------

@dataclass
class SalvageReport:
    source: str
    dest: str
    damage_offset: int | None
    reason: str | None
    kept_before: int
    kept_after: int
    # (original file offset, original seq, new seq, op name, key) per record copied
    records: list[tuple[int | None, int, int, str, str]]

    def to_dict(self) -> dict:
        return {"source": self.source, "dest": self.dest,
                "damage_offset": self.damage_offset, "reason": self.reason,
                "kept_before": self.kept_before, "kept_after": self.kept_after,
                "records": [{"offset": o, "seq": s, "new_seq": n, "op": op, "key": k}
                            for o, s, n, op, k in self.records]}


def salvage(source: str, dest: str) -> SalvageReport:
    """Write ``dest``: ``source``'s header and snapshot verbatim, then every WAL record
    that still verifies (the intact prefix, then the valid-looking records past the
    damage, in file order), renumbered contiguously so the new file replays them all.
    ``source`` is only read; ``dest`` must not exist."""
    from .store import Store  # local: store imports this module

    with Store.open(source, readonly=True) as store:
        scan = store.scan
        before = store.committed_entries()
        with open(source, "rb") as fh:
            prefix = fh.read(scan.wal_offset)
    damage = scan.damage
    after = damage.survivors if damage is not None else []
    layout = store.layout
    base = scan.base_seq
    records: list[tuple[int | None, int, int, str, str]] = []
    out_entries: list[WalEntry] = []
    for e in before:
        records.append((None, e.seq, base + len(out_entries), e.op.name, e.key))
        out_entries.append(WalEntry(base + len(out_entries), e.op, e.key, e.body))
    for s in after:
        e = s.entry
        records.append((s.offset, e.seq, base + len(out_entries), e.op.name, e.key))
        out_entries.append(WalEntry(base + len(out_entries), e.op, e.key, e.body))
    data = bytearray(prefix)
    data += encode_wal_header(WalHeader(len(out_entries), base))
    if layout.block_compressed:
        for i in range(0, len(out_entries), MAX_BLOCK_ENTRIES):
            data += encode_wal_block(WalBlock(out_entries[i:i + MAX_BLOCK_ENTRIES]),
                                     **layout.block_params())
    else:
        for e in out_entries:
            data += encode_wal_entry(e, **layout.entry_params())
    try:
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise StoreError(f"{dest}: already exists; salvage writes a new file only") from None
    try:
        write_all(fd, bytes(data), 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(dest)
    return SalvageReport(source, dest, None if damage is None else damage.offset,
                         None if damage is None else damage.reason, len(before), len(after),
                         records)

"""amputate, reframe and diagnose (facts.md §7; issue 14's safe-repair rules).

amputate cuts only a ``CorruptPile`` tail, under the exclusive lock, after re-validating;
an ``UnsupportedRecord`` is never cut. Damage followed by valid-looking records (bit rot in
the middle, not a torn append) is refused unless the caller names the offset in
``discard_after``. Whatever is cut goes through ``runtime/cut.py``: it is first copied to
``FILE.discarded-OFFSET`` and fsynced, torn tails included. reframe rewrites a pile with legacy records into current framing in a new file
(tmp + fsync + rename), refusing before writing anything if an opaque record is present.
"""

from __future__ import annotations

import fcntl
import mmap
import os
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field

from ...generated import pile as g
from .. import cut as _cut
from ..atomic import AtomicFile
from ..errors import DecodeError
from ..mapped import RELEASE_EVERY, mapped_file, released_as_walked
from . import kinds
from .errors import CorruptPile, RepairRefused, UnsupportedRecord
from .scan import Record, blob_hash_ok, blob_parts, iter_records, read_record, valid_after
from .store import blob_span, encode_blob, frame


@dataclass
class Damage:
    """Where and why reading stops, and whether valid-looking records follow."""

    offset: int
    reason: str
    error: DecodeError
    valid_after: int

    @property
    def torn_tail(self) -> bool:
        return self.valid_after == 0 and isinstance(self.error, CorruptPile)


def find_damage(buf, release=None) -> Damage | None:
    """Scan the whole buffer; None when every record is intact. ``release(upto)`` (a
    mapped file's, ``runtime/mapped.py``) gives the walked pages back as it goes."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    try:
        for _ in released_as_walked(iter_records(mv, heads_only=True), release or _keep_pages,
                                     _end):
            pass
    except (CorruptPile, UnsupportedRecord) as exc:
        return Damage(exc.offset, str(exc), exc, valid_after(mv, exc.offset))
    return None


def _keep_pages(upto: int) -> None:
    """A buffer in memory: nothing to give back."""


def _end(rec: Record) -> int:
    return rec.end


def _crash(crash_at: str | None, step: str) -> None:
    if crash_at == step:  # crash-point tests: die exactly here
        os._exit(70)


class _DieBeforeCutting:
    """Write steps for the crash-point tests of the steps before the cut. ``cut`` shortens
    the file only once the side file is written and fsynced, so dying at its first step is
    a crash after the cut bytes are kept and before the file is shortened."""

    def ftruncate(self, fd: int, size: int) -> None:
        os._exit(70)

    def fsync(self, fd: int) -> None:
        os._exit(70)


@dataclass
class AmputateResult:
    truncated: bool
    valid_length: int
    old_length: int
    discarded: str | None = None
    valid_after: int = 0


def amputate(path: str, *, expected: int | None = None, discard_after: int | None = None,
             crash_at: str | None = None) -> AmputateResult:
    """Truncate a corrupt tail to ``valid_length``.

    ``expected`` (the CLI's ``--truncate-to``): truncate only if the boundary found equals
    it, else raise ``CorruptPile(actual)`` without touching the file. Middle damage needs
    ``discard_after`` equal to the damage offset. Raises ``UnsupportedRecord`` unchanged."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        # read through a map (only the records' heads are touched)
        with mapped_file(path) as (data, release):
            damage = find_damage(data, release)
            if damage is None:
                return AmputateResult(False, size, size)
            if isinstance(damage.error, UnsupportedRecord):
                raise damage.error
            offset = damage.offset
            if expected is not None and expected != offset:
                raise CorruptPile(offset, f"boundary is {offset}, not {expected}; file untouched")
            if damage.valid_after and discard_after != offset:
                raise RepairRefused(
                    f"{path}: damage at offset {offset} is followed by {damage.valid_after} "
                    f"valid-looking record(s); refusing to cut them (pass --discard-after "
                    f"{offset} to cut them anyway; they are copied to "
                    f"{_cut.side_path(path, offset)} first)")
        # the map is closed before the file is cut: the cut bytes are read from the file
        steps = _DieBeforeCutting() if crash_at in ("side-written", "side-synced") else None
        done = _cut.cut(path, fd, offset, reason=f"pile amputate: {damage.reason}", io=steps)
        _crash(crash_at, "truncated")
        return AmputateResult(True, offset, size, done.side, damage.valid_after)
    finally:
        os.close(fd)


@dataclass
class ReframeResult:
    written: int = 0
    copied: int = 0
    blobs: int = 0
    pins: int = 0
    dropped: Counter = field(default_factory=Counter)
    bad_blobs: int = 0


_CURRENT = {"blob_body", "commit_body", "merge_v6_body", "derive_v7_body", "want_v3_body",
            "proof_v5_body", "pin_head_body", "pin_tombstone_body"}


def reframe(src: str, dest: str) -> ReframeResult:
    """Re-encode ``src`` into current framing at ``dest`` (which must not exist).

    Two passes over a map of ``src`` under its shared lock, neither holding more than a
    record: the first refuses a damaged pile or one with opaque records before anything
    is written; the second writes ``dest`` through a temporary file, piece by piece."""
    res = ReframeResult()
    with _mapped_locked(src) as (buf, release):
        opaque, first = 0, None
        for rec in released_as_walked(iter_records(buf), release, _end):  # a damaged pile raises here
            if rec.opaque:
                opaque += 1
                first = rec.offset if first is None else first
        if opaque:
            raise RepairRefused(f"{src}: {opaque} opaque record(s) of unknown kind (first at "
                                f"offset {first}); reframe refuses to drop them")
        if os.path.exists(dest):
            raise RepairRefused(f"{dest}: already exists; reframe writes a new file")
        with AtomicFile(dest) as out:
            for rec in released_as_walked(iter_records(buf), release, _end):
                piece = _reframed(rec, buf, res)
                if piece:
                    out.write(piece)
                    res.written += 1
            out.commit()
    return res


@contextmanager
def _mapped_locked(path: str):
    """``(buf, release)`` of a read-only map of ``path`` (``runtime/mapped.py``), under a
    shared lock held while the caller reads it."""
    with open(path, "rb") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_SH)
        with mapped_file(path) as mapped:
            yield mapped



def _reframed(rec: Record, data: bytes, res: ReframeResult) -> bytes | None:
    v = rec.value
    if rec.form == "current" and rec.name in _CURRENT:
        if rec.name == "blob_body" and blob_hash_ok(rec) is False:
            res.bad_blobs += 1
            return None
        res.copied += 1
        return data[rec.offset:rec.end]  # current records are copied byte for byte
    parts = blob_parts(rec)
    if parts is not None:
        if blob_hash_ok(rec) is False:
            res.bad_blobs += 1
            return None
        res.blobs += 1
        return encode_blob(parts[1], v.timestamp, parts[0])
    if rec.name in ("v1_branch", "v3_branch", "env_branch_body"):
        res.pins += 1
        return frame(kinds.KIND_PIN_HEAD, g.PinHeadBody(v.branch, v.head))
    if rec.name in ("v1_tombstone", "v3_tombstone", "env_tombstone_body"):
        res.pins += 1
        return frame(kinds.KIND_PIN_TOMBSTONE, g.PinTombstoneBody(v.branch))
    if rec.name in ("v4_commit", "env_commit_body"):
        res.copied += 1  # a V4 commit is a current COMMIT in older framing
        return frame(kinds.KIND_COMMIT, g.CommitBody(v.collection, v.data, v.metadata,
                                                     v.author, v.sig_r, v.sig_s))
    res.dropped[rec.name] += 1  # retired, inert records have no replay effect
    return None


@dataclass
class SalvageResult:
    kept: int = 0
    kept_bytes: int = 0
    skipped: list[tuple[int, int]] = field(default_factory=list)  # [start, end) not copied


def salvage(src: str, dest: str, step: int = 64) -> SalvageResult:
    """Copy every record that still verifies, before and after any damage, byte for byte
    into a new file ``dest`` for a human to judge. A record verifies when it decodes and,
    for a blob, its payload hashes to its handle; the search after damage moves in 64-byte
    steps (every record start in a pile is 64-aligned). ``src`` is read through a map and
    ``dest`` written piece by piece, so neither has to fit in memory."""
    if os.path.exists(dest):
        raise RepairRefused(f"{dest}: already exists; salvage writes a new file")
    res = SalvageResult()
    with _mapped_locked(src) as (mv, release), AtomicFile(dest) as out:
        size = len(mv)
        pos, gap, mark = 0, None, RELEASE_EVERY
        while pos < size:
            if pos >= mark:
                release(pos)
                mark = pos + RELEASE_EVERY
            try:
                rec = read_record(mv, pos, heads_only=False)
                good = blob_hash_ok(rec) is not False
            except DecodeError:
                good = False
            if not good:
                gap = pos if gap is None else gap
                pos += step - pos % step
                continue
            if gap is not None:
                res.skipped.append((gap, pos))
                gap = None
            out.write(mv[rec.offset:rec.end])
            res.kept += 1
            pos = rec.end
        if gap is not None:
            res.skipped.append((gap, size))
        res.kept_bytes = out.written
        out.commit()
    return res


def diagnose(path: str, offset: int) -> dict:
    """What the reader sees at ``offset``: the record, or the error it raises there.

    The file is mapped, not read: only the pages of the record (and, after damage, of
    the search for the next valid one) are touched, so memory does not grow with the
    file."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        # the mapping stays valid after the file is closed; it is unmapped when the
        # last view of it (a record's payload, say) is gone
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    if not 0 <= offset <= len(data):
        raise RepairRefused(f"{path}: offset {offset} is outside the file (0..{len(data)})")
    try:
        rec = read_record(memoryview(data), offset, heads_only=False)
    except (CorruptPile, UnsupportedRecord) as exc:
        return {"offset": offset, "status": type(exc).__name__, "error": str(exc),
                "valid_after": valid_after(memoryview(data), offset)}
    out = {"offset": offset, "status": "ok", "form": rec.form, "record": rec.name,
           "kind": rec.kind.hex(), "length": rec.length, "span": rec.span}
    ok = blob_hash_ok(rec)
    if ok is not None:
        out["blob_hash_ok"] = ok
        out["payload_length"] = len(blob_parts(rec)[1])
        out["span_expected"] = blob_span(len(blob_parts(rec)[1])) if rec.form == "current" else None
    return out

"""amputate, reframe, salvage and diagnose (facts.md §7; spec.txt "Recovery").

amputate cuts only a ``CorruptPile`` tail, under the exclusive lock, after re-validating;
an ``UnsupportedRecord`` is never cut. Damage followed by valid-looking records (bit rot in
the middle, not a torn append) is refused unless the caller names the offset in
``discard_after``. Whatever is cut goes through ``runtime/cut.py``: it is first copied to
``FILE.discarded-OFFSET`` and fsynced, torn tails included. reframe is the spec's semantic
re-encode into a new file (tmp + fsync + rename), refusing before writing anything if an
opaque record is present; salvage copies what still verifies into a new file.
"""

from __future__ import annotations

import dataclasses
import enum
import fcntl
import mmap
import os
import shlex
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field

from ...generated import pile as g
from .. import cut as _cut
from ..atomic import AtomicFile
from ..errors import DecodeError
from ..mapped import RELEASE_EVERY, mapped_file, released_as_walked
from . import crypto, kinds
from .errors import CorruptPile, RepairRefused, UnsupportedRecord
from .scan import (
    Record,
    Resume,
    blob_hash_ok,
    blob_parts,
    good_record,
    iter_records,
    opaque_label,
    read_record,
    valid_after,
)
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
    copied: int = 0          # collection records and proofs, each written once
    blobs: int = 0           # blobs re-inserted once, with a fresh timestamp
    pins: int = 0
    preserved: int = 0       # frames kept byte for byte (unsigned equations, V3 collection)
    wants: int = 0           # current WANTs written (kept, or resolved from retired frames)
    duplicates: int = 0      # repeats of something already written, not written again
    retired_wants: int = 0   # retired WANT frames resolved into ``wants``
    dropped: Counter = field(default_factory=Counter)
    bad_blobs: int = 0


# Frames that survive byte for byte: "Retired unsigned equations stay inert but retain their
# exact source frames" (all five forms), "Earlier V3 definition-ID collection frames also
# survive byte-for-byte", and current MERGE / DERIVE / proofs, "preserved exactly".
_EXACT = {"unsigned_merge_body", "unsigned_derive_body", "v4_merge", "env_merge_body",
          "env_derive_v5_body", "v3_collection_definition", "v3_commit", "v3_merge",
          "v3_derive", "merge_v6_body", "derive_v7_body", "proof_v5_body"}
# "Records that no longer carry retained evidence are dropped and counted": PEER,
# STORE_SCOPE, artifact offer, the older derivation generations, and the retired proofs
# ("semantic rewrites may drop them").
_DROP = {"peer_body", "store_scope_body", "artifact_offer_body", "v4_derive",
         "env_derive_v4_body", "proof_v1_body", "proof_v2_body", "proof_v3_body"}
_COMMITS = {"commit_body", "v4_commit", "env_commit_body"}
_PIN_HEADS = {"pin_head_body", "v1_branch", "v3_branch", "env_branch_body"}
_PIN_TOMBSTONES = {"pin_tombstone_body", "v1_tombstone", "v3_tombstone", "env_tombstone_body"}
_BLOBS = {"blob_body", "env_blob_body", "v3_blob", "v1_blob"}
_RETIRED_WANTS = {"retired_blob_want_body", "retired_typed_want_body", "v3_blob_want",
                  "env_blob_want_body", "env_typed_want_body"}


def reframe_rule(name: str) -> str | None:
    """Which of reframe's rules a record kind (its schema body name) falls under; None
    for a kind reframe has no rule for, which it refuses before writing."""
    for rule, names in (("blob", _BLOBS), ("pin", _PIN_HEADS | _PIN_TOMBSTONES),
                        ("commit", _COMMITS), ("want", {"want_v3_body"}),
                        ("retired want", _RETIRED_WANTS), ("exact", _EXACT),
                        ("drop", _DROP)):
        if name in names:
            return rule
    return None


def reframe(src: str, dest: str) -> ReframeResult:
    """Re-encode ``src`` into current framing at ``dest`` (which must not exist), as the
    spec's semantic reframe does, in source order: blobs re-inserted once with a fresh
    timestamp; pins replayed in order; collection records, proofs and WANTs written once
    each; the retired WANT log resolved once and its active set emitted as current WANTs;
    unsigned equations and V3 collection frames kept byte for byte; PEER, STORE_SCOPE,
    artifact offers, retired derivations and retired proofs dropped and counted.

    Two passes over a map of ``src`` under its shared lock, neither holding more than a
    record (plus one 32-byte digest per distinct record written): the first refuses a
    damaged pile or one with opaque records before anything is written; the second
    writes ``dest`` through a temporary file, piece by piece."""
    from .migrate import resolve_retired_wants, retired_want

    res = ReframeResult()
    with _mapped_locked(src) as (buf, release):
        opaque: Counter = Counter()
        first = None
        for rec in released_as_walked(iter_records(buf), release, _end):  # a damaged pile raises here
            if rec.opaque:
                opaque[opaque_label(rec)] += 1
                first = rec.offset if first is None else first
            elif reframe_rule(rec.name) is None:
                raise RepairRefused(f"{src}: offset {rec.offset}: reframe has no rule for "
                                    f"{rec.name} records; nothing written")
        if opaque:
            what = ", ".join(f"{n} {label}" for label, n in sorted(opaque.items()))
            raise RepairRefused(f"{src}: {sum(opaque.values())} opaque record(s) ({what}; "
                                f"first at offset {first}); reframe refuses to drop them")
        if os.path.exists(dest):
            raise RepairRefused(f"{dest}: already exists; reframe writes a new file")
        seen: set[bytes] = set()    # digests of what was written (blob handles, frames)
        log: list[tuple[int, bool, bytes]] = []
        with AtomicFile(dest) as out:
            for rec in released_as_walked(iter_records(buf), release, _end):
                rw = retired_want(rec.name, bytes(rec.kind), rec.value)
                if rw is not None:  # resolved once, after the whole log is read
                    log.append((rec.offset, *rw))
                    res.retired_wants += 1
                    continue
                piece = _reframed(rec, buf, res, seen)
                if piece:
                    out.write(piece)
                    res.written += 1
            for req in resolve_retired_wants(log):
                piece = frame(kinds.KIND_WANT_V3, g.WantV3Body(req.tag, req.request))
                if _once(piece, seen, res):  # "already-current markers union with that projection"
                    out.write(piece)
                    res.written += 1
                    res.wants += 1
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


def _once(piece: bytes, seen: set[bytes], res: ReframeResult) -> bool:
    """Whether ``piece`` (a whole frame) is new; grow-only sets take each record once."""
    digest = crypto.blake3(piece)
    if digest in seen:
        res.duplicates += 1
        return False
    seen.add(digest)
    return True


def _reframed(rec: Record, data, res: ReframeResult, seen: set[bytes]) -> bytes | None:
    v, name = rec.value, rec.name
    parts = blob_parts(rec)
    if parts is not None:
        handle, payload = parts
        if crypto.blake3(payload) != handle:
            res.bad_blobs += 1
            return None
        if b"blob" + handle in seen:  # content addressing: one copy per handle
            res.duplicates += 1
            return None
        seen.add(b"blob" + handle)
        res.blobs += 1
        # "their insertion timestamps are stamped afresh"
        return encode_blob(bytes(payload), int(time.time() * 1000), handle)
    if name in _PIN_HEADS:  # "Legacy pins are replayed in order"
        res.pins += 1
        return frame(kinds.KIND_PIN_HEAD, g.PinHeadBody(getattr(v, "pin", None) or v.branch,
                                                       v.head))
    if name in _PIN_TOMBSTONES:
        res.pins += 1
        return frame(kinds.KIND_PIN_TOMBSTONE,
                     g.PinTombstoneBody(getattr(v, "pin", None) or v.branch))
    if name in _COMMITS:  # a V4 or enveloped commit is a current COMMIT in older framing
        piece = frame(kinds.KIND_COMMIT, g.CommitBody(v.collection, v.data, v.metadata,
                                                      v.author, v.sig_r, v.sig_s))
        if not _once(piece, seen, res):
            return None
        res.copied += 1
        return piece
    if name == "want_v3_body":
        piece = bytes(data[rec.offset:rec.end])
        if not _once(piece, seen, res):
            return None
        res.wants += 1
        return piece
    if name in _EXACT:
        piece = bytes(data[rec.offset:rec.end])
        if not _once(piece, seen, res):
            return None
        if name in ("merge_v6_body", "derive_v7_body", "proof_v5_body"):
            res.copied += 1
        else:
            res.preserved += 1
        return piece
    if name in _DROP:
        res.dropped[name] += 1
        return None
    # unreachable: the preflight refused every record without a rule
    raise RepairRefused(f"offset {rec.offset}: reframe has no rule for {name} records")


@dataclass
class SalvageResult:
    kept: int = 0
    kept_bytes: int = 0
    skipped: list[tuple[int, int]] = field(default_factory=list)  # [start, end) not copied


def salvage(src: str, dest: str) -> SalvageResult:
    """Copy every record that still verifies, before and after any damage, byte for byte
    into a new file ``dest`` for a human to judge. A record verifies when it decodes and,
    for a blob, its payload hashes to its handle.

    Reading resumes only where a record may start (``scan.Resume``): a blob whose header
    decodes at a known boundary owns its payload, so when the payload fails its hash the
    whole record is skipped, never read inside; after bytes that do not decode, a V1
    record may start at any 64-byte step, any other form only at whole 256-byte blocks
    from the damage. ``src`` is read through a map and ``dest`` written piece by piece."""
    if os.path.exists(dest):
        raise RepairRefused(f"{dest}: already exists; salvage writes a new file")
    res = SalvageResult()
    with _mapped_locked(src) as (mv, release), AtomicFile(dest) as out:
        size = len(mv)
        pos, mark = 0, RELEASE_EVERY
        gap: int | None = None     # start of the bytes not copied
        resume = Resume()
        while pos < size:
            if pos >= mark:
                release(pos)
                mark = pos + RELEASE_EVERY
            rec, good = good_record(mv, pos, resume)
            if not good:
                gap = pos if gap is None else gap
                pos = resume.failed(mv, pos, rec)
                continue
            if gap is not None:
                res.skipped.append((gap, pos))
                gap = None
            out.write(mv[rec.offset:rec.end])
            res.kept += 1
            resume.found()
            pos = rec.end
        if gap is not None:
            res.skipped.append((gap, size))
        res.kept_bytes = out.written
        out.commit()
    return res


def diagnose(path: str, offset: int) -> dict:
    """What the reader sees at ``offset``, walking the canonical decoder from byte zero.

    An offset inside a record is rejected, naming that record and the next boundary. At a
    boundary: the marker, classification, span, next offset and decoded fields; at damage,
    the error, and - only for a malformed or torn record (``CorruptPile``) - the repair
    command ``pile amputate`` accepts for it. An unsupported marker asks for a newer reader.
    The file is mapped, not read: the walk touches record heads and the record at
    ``offset``, so memory does not grow with the file."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        # the mapping stays valid after the file is closed; it is unmapped when the
        # last view of it (a record's payload, say) is gone
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    if not 0 <= offset <= len(data):
        raise RepairRefused(f"{path}: offset {offset} is outside the file (0..{len(data)})")
    mv = memoryview(data)
    pos = 0
    while pos < offset:
        try:
            rec = read_record(mv, pos, heads_only=True)
        except (CorruptPile, UnsupportedRecord) as exc:
            return {"offset": offset, "status": "unreachable",
                    "error": f"reading stops at offset {pos}, before {offset}: {exc}",
                    "stops_at": pos, "repair": _repair_command(path, mv, exc)}
        if rec.end > offset:
            return {"offset": offset, "status": "inside_record",
                    "error": f"offset {offset} is inside the {rec.name} record at {rec.offset} "
                             f"(bytes {rec.offset}..{rec.end}); not a record boundary",
                    "inside": {"offset": rec.offset, "record": rec.name, "end": rec.end},
                    "next_offset": rec.end}
        pos = rec.end
    marker = bytes(mv[offset:offset + 16]).hex().upper()
    if offset == len(mv):
        return {"offset": offset, "status": "end_of_file", "marker": marker,
                "error": f"offset {offset} is the end of the file: no record starts there"}
    try:
        rec = read_record(mv, offset, heads_only=False)
    except (CorruptPile, UnsupportedRecord) as exc:
        out = {"offset": offset, "status": type(exc).__name__, "error": str(exc),
               "marker": marker, "valid_after": valid_after(mv, offset)}
        repair = _repair_command(path, mv, exc)
        if repair:
            out["repair"] = repair
        else:
            out["advice"] = ("an unknown marker: a newer reader may know it; amputate never "
                             "cuts it")
        return out
    out = {"offset": offset, "status": "ok", "marker": marker, "form": rec.form,
           "record": rec.name if not rec.opaque else f"opaque: {opaque_label(rec)}",
           "kind": bytes(rec.kind).hex(), "length": rec.length, "span": rec.span,
           "next_offset": rec.end}
    ok = blob_hash_ok(rec)
    if ok is not None:
        out["blob_hash_ok"] = ok
        out["payload_length"] = len(blob_parts(rec)[1])
        out["span_expected"] = blob_span(len(blob_parts(rec)[1])) if rec.form == "current" else None
    out["fields"] = _fields(rec.value)
    return out


def _repair_command(path: str, mv: memoryview, exc: DecodeError) -> str | None:
    """The ``pile amputate`` command that cuts this damage, as amputate accepts it; None
    for an unsupported record, which amputate never cuts."""
    if not isinstance(exc, CorruptPile):
        return None
    at = exc.offset
    cmd = f"bytewright pile amputate {shlex.quote(path)} --truncate-to {at}"
    if valid_after(mv, at):  # valid-looking records follow: amputate wants both flags
        cmd += f" --discard-after {at}"
    return cmd


_FIELD_BYTES = 64  # longer byte fields (payloads, opaque bodies) are shown by length only


def _fields(value) -> object:
    """A decoded record as plain data: bytes in hex, enums by name, payloads by length."""
    if dataclasses.is_dataclass(value):
        return {f.name: _fields(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value) if len(value) <= _FIELD_BYTES else None
        return raw.hex() if raw is not None else f"<{len(value)} bytes>"
    if isinstance(value, list):
        return [_fields(x) for x in value]
    return value

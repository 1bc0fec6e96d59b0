"""WAL family 11: writer, prefix replay and batch-run commit (facts §3, rules.txt WAL).

Layouts come from the generated codecs (``wal_file_header``, ``wal_frame``,
``wal_payload``); this module owns only the semantics: which prefix is trusted, how the
first bad record is classified, and which records commit.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ...generated import ze
from ..checksums import xxh3_64
from ..errors import ChecksumError, ConstraintError, DecodeError, EncodeError, TruncatedError
from ..mapped import RELEASE_EVERY
from . import envelope, limits, registry, seals

HEADER_LEN = ze.LAYOUT["wal_file_header"]["layouts"][0]["fixed_size"]  # 40
RECORD_HEADER = ze.LAYOUT["wal_record_header"]["layouts"][0]["fixed_size"]  # 14
OP_AT = next(f["offset"] for f in ze.LAYOUT["wal_record_header"]["layouts"][0]["fields"]
             if f["name"] == "op")  # 12
FRAME_OVERHEAD = RECORD_HEADER + 8  # 22: header plus the trailing xxh3-64
U64_MAX = (1 << 64) - 1
Op = ze.WalOp


class GroupTooLarge(EncodeError):
    """A mixed (op 11) group does not fit the WAL group cap (WalWriteError::GroupTooLarge)."""


class OrphanBatchMember(ConstraintError):
    """A batch member (op 8 or 11) with index > 0 that does not continue its run."""


# -- writing ---------------------------------------------------------------------------

def encode_payload(op: int, body) -> bytes:
    """The payload bytes of one op (``body`` is the op's record, e.g. ``ze.OpDeleteV1``)."""
    return ze.encode_wal_payload(ze.WalPayload(body), op=int(op))


def frame(seq: int, op: int, payload: bytes) -> bytes:
    return ze.encode_wal_frame(ze.WalFrame(seq, int(op), bytes(payload)))


def wal_bytes(first_seq: int = 1, records=()) -> bytes:
    """A complete WAL file: the 40-byte header and records ``(op, payload)`` numbered from
    ``first_seq``."""
    frames = [ze.WalFrame(first_seq + i, int(op), bytes(p)) for i, (op, p) in enumerate(records)]
    return ze.encode_wal_file(ze.WalFile(ze.WalFileHeader(first_seq), frames))


def mixed_group_fits(inner_payload_lens, cap: int, *, fresh: bool) -> int:
    """``H + sum(inner + 32) <= B`` for one op-11 group; returns the total or raises
    :class:`GroupTooLarge` (also on u64 overflow). H = 40 for a fresh WAL, else 0."""
    total = HEADER_LEN if fresh else 0
    for n in inner_payload_lens:
        total += n + 32
        if total > U64_MAX:
            raise GroupTooLarge("mixed group size overflows u64")
    if total > cap:
        raise GroupTooLarge(f"mixed group needs {total} bytes, cap is {cap}")
    return total


# -- replay ----------------------------------------------------------------------------

@dataclass(slots=True)
class Record:
    seq: int
    op: int
    payload: bytes  # a memoryview slice of the input
    offset: int
    end: int
    body: object = None  # the typed op body, when replay decoded it in the same pass


# per-record state in a RecordList: how far replay got with the record's payload
_FRAMED, _CHECKED, _REFUSED = 0, 1, 2


class RecordList(Sequence):
    """The trusted prefix of a replay, held as columns over the input buffer.

    A trusted prefix is contiguous (each record starts where the one before ends) and its
    seqs run from ``first_seq`` one by one, so a record needs only its offset, its op and
    one state byte (11 bytes) while it waits for :func:`commit`: no object per record, so
    memory grows with the record count, not with the decoded values, and the cyclic
    collector has nothing to traverse. :class:`Record` objects are built on access; with
    ``replay(decode=True)`` their ``body`` is decoded again then (replay keeps only the
    outcome of the payload rules, not the values).
    """

    __slots__ = ("_mv", "first_seq", "_starts", "_ops", "_state", "_end", "_errors",
                 "_batch")

    def __init__(self, mv: memoryview | None = None, first_seq: int = 0) -> None:
        self._mv = mv
        self.first_seq = first_seq
        self._starts = array("Q")
        self._ops = array("H")
        self._state = bytearray()
        self._end = 0
        self._errors: dict[int, DecodeError] = {}  # index -> the payload rule it broke
        self._batch: dict[int, tuple[int, int]] = {}  # index -> (index, count), ops 8/11

    def _add(self, pos: int, op: int, end: int, state: int = _FRAMED) -> None:
        self._starts.append(pos)
        self._ops.append(op)
        self._state.append(state)
        self._end = end

    def __len__(self) -> int:
        return len(self._starts)

    def _record(self, i: int, *, body: bool = True) -> Record:
        pos = self._starts[i]
        end = self._starts[i + 1] if i + 1 < len(self._starts) else self._end
        op = self._ops[i]
        rec = Record(self.first_seq + i, op, self._mv[pos + RECORD_HEADER:end - 8], pos, end)
        if body and self._state[i] != _FRAMED:  # replay decoded it: so does the record
            rec.body = ze.decode_wal_payload(rec.payload, op=op)[0].body
        return rec

    def _body(self, i: int):
        """The typed body of record ``i`` (a payload commit has checked)."""
        pos = self._starts[i]
        end = self._starts[i + 1] if i + 1 < len(self._starts) else self._end
        return ze.decode_wal_payload(self._mv[pos + RECORD_HEADER:end - 8],
                                     op=self._ops[i])[0].body

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._record(k) for k in range(*i.indices(len(self)))]
        n = len(self._starts)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("record index out of range")
        return self._record(i)

    def __iter__(self):
        for i in range(len(self._starts)):
            yield self._record(i)

    @property
    def offsets(self) -> list[int]:
        """Every record's offset, without building the records."""
        return self._starts.tolist()

    def __eq__(self, other) -> bool:
        if isinstance(other, (RecordList, list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable while replay fills it

    def __repr__(self) -> str:
        return f"<RecordList of {len(self)} records from seq {self.first_seq}>"


def _payload_body(rec: Record):
    """The typed body of a payload already known to decode (no rule checks again)."""
    return ze.decode_wal_payload(rec.payload, op=rec.op)[0].body


@dataclass
class Replay:
    """The trusted prefix and its terminator (CleanEnd, InvalidHeader or CorruptAt)."""

    first_seq: int | None
    records: RecordList = field(default_factory=RecordList)
    terminator: str = "clean"  # clean | invalid_header | corrupt
    offset: int | None = None  # of the first bad record
    reason: str = ""  # HeaderTruncated, BodyTruncated, ChecksumMismatch, SequenceGap...
    corruption: str | None = None  # "tail" | "middle" (facts §3.3: a successor at the end)
    error: DecodeError | None = None
    #: valid-looking records (frames whose framing and checksum verify, whatever their
    #: op) at or after the damage, found by scanning every offset past it: their offsets
    valid_after_offsets: list[int] = field(default_factory=list)
    scan_complete: bool = True  # False: a scan limit stopped the look past the damage

    @property
    def valid_after(self) -> int:
        return len(self.valid_after_offsets)

    @property
    def damaged(self) -> bool:
        """Valid-looking records follow the damage, or the scan could not rule them out
        (a checksum-valid successor at the declared end, "middle", is one of them)."""
        return self.terminator == "corrupt" and (bool(self.valid_after_offsets)
                                                 or not self.scan_complete
                                                 or self.corruption == "middle")

    def describe(self) -> str:
        """One line: where the trusted prefix ends and why."""
        head = f"{len(self.records)} trusted records"
        if self.terminator == "clean":
            return head + ", clean end"
        if self.terminator == "invalid_header":
            return f"invalid header: {self.error}"
        kind = ("torn tail" if not self.damaged else
                "sequence break" if self.reason.startswith(("Sequence", "FirstSequence")) else
                "checksum mismatch" if self.reason == "ChecksumMismatch" else self.reason)
        text = f"{head}; {kind} at offset {self.offset} ({self.reason})"
        if self.valid_after:
            text += (f"; {self.valid_after} valid-looking records follow "
                     f"(first at offset {self.valid_after_offsets[0]})")
        if not self.scan_complete:
            text += "; the scan past the damage stopped at its limit (more may follow)"
        return text


def scan_after(mv: memoryview, start: int, *, scan_bytes: int = limits.SCAN_BYTES,
               candidates: int = limits.SCAN_CANDIDATES,
               hashed_bytes: int = limits.SCAN_HASHED_BYTES) -> list[int]:
    """Offsets of checksum-valid frames from ``start`` on (at most ``scan_bytes`` scanned).

    Every offset is tried (a damaged length field gives no reliable successor), whatever
    the op field holds: a record is valid-looking when its framing and checksum verify, so
    a newer writer's additive op counts too. After a hit the scan continues at that
    frame's end. A scan that reaches a limit (bytes, candidates, or bytes hashed: random
    bytes declare long frames) raises :class:`_ScanCut` with what it found so far.
    """
    out: list[int] = []
    n = min(len(mv), start + scan_bytes)
    if n - start < FRAME_OVERHEAD:
        return out
    pos = start
    last = n - FRAME_OVERHEAD  # the last offset a frame can start at
    tried = hashed = 0
    window = mv[:n]
    seen: set[bytes] = set()  # short candidates already refused, by their exact bytes
    for chunk in range(start, last + 1, _SCAN_CHUNK):
        for c in _candidates(mv, chunk, min(chunk + _SCAN_CHUNK, last + 1), n):
            if c < pos:
                continue  # inside a record already found
            body = RECORD_HEADER + int.from_bytes(window[c:c + 4], "little")
            key = bytes(window[c:c + body + 8]) if body + 8 <= _SHORT else None
            if key is not None and key in seen:
                continue  # the same bytes fail the same way
            tried += 1
            hashed += body
            if tried > candidates or hashed > hashed_bytes:
                raise _ScanCut(out)
            # the frame's only rule is its checksum (any op, any seq): checked in place
            if xxh3_64(window[c:c + body]) != int.from_bytes(window[c + body:c + body + 8],
                                                             "little"):
                if key is not None and len(seen) < _SEEN_MAX:
                    seen.add(key)
                continue
            out.append(c)
            pos = c + body + 8
    if n < len(mv):
        raise _ScanCut(out)
    return out


class _ScanCut(Exception):
    """The scan stopped at a limit; ``found`` holds what it had found."""

    def __init__(self, found: list[int]) -> None:
        self.found = found


_SCAN_CHUNK = 1 << 14  # offsets per vectorised step (bounded temporary arrays)
_SHORT = 64  # candidates up to this many bytes are remembered once refused
_SEEN_MAX = 4096


def _candidates(mv: memoryview, lo: int, hi: int, n: int) -> list[int]:
    """Offsets in ``[lo, hi)`` whose declared frame (``payload_len`` read as numpy views of
    the u32 at every offset, plus the 22 framing bytes) fits in the ``n`` scanned bytes: a
    vectorised prefilter that drops no frame that could verify, so only candidates pay for
    a checksum. The op field is not consulted: any op may follow. A short candidate whose
    bytes equal those of the candidate one offset before (inside a run of one repeated
    byte, such as a zero-filled tail) is dropped: it verifies exactly when that one does."""
    import numpy as np

    m = hi - lo
    ends = np.zeros(m, dtype=np.int64)
    for k in range(4):  # the u32 at every offset, from four aligned views
        count = (m - k + 3) // 4
        view = np.frombuffer(mv[lo + k:lo + k + 4 * count], dtype="<u4")
        ends[k::4][:len(view)] = view
    offsets = np.arange(lo, hi, dtype=np.int64)
    ends += offsets + FRAME_OVERHEAD  # where each declared frame would end
    fits = ends <= n
    cand = offsets[fits]
    if cand.size == 0:
        return []
    ends = ends[fits]
    base = max(lo - 1, 0)
    raw = np.frombuffer(mv[base:min(n, hi + _SHORT)], dtype=np.uint8)
    changes = np.flatnonzero(raw[1:] != raw[:-1]) + base  # i where byte i != byte i + 1
    changes = np.append(changes, np.iinfo(np.int64).max)  # no change up to the window end
    first_change = changes[np.searchsorted(changes, cand - 1)]
    # bytes cand - 1 .. end - 1 all equal: the same frame as one offset earlier
    repeat = (cand > 0) & (ends - cand <= _SHORT) & (first_change >= ends - 1)
    return cand[~repeat].tolist()


def _valid_frame_at(mv: memoryview, pos: int) -> bool:
    try:
        ze.decode_wal_frame(mv, pos)
        return True
    except DecodeError:
        return False


def replay(buf, *, decode: bool = False, scan_bytes: int = limits.SCAN_BYTES,
           release: Callable[[int], None] | None = None) -> Replay:
    """Prefix replay: validate the header, then records one at a time from offset 40.

    The first record must carry ``first_seq`` and each next one ``seq + 1``; the first bad
    record ends replay. It is "middle" corruption when a checksum-valid record begins at
    its declared end, else "tail" (torn headers and bodies are always tail).

    ``decode=True`` is the fast path: each record is decoded once with the generated
    ``wal_record`` (framing, checksum and the op's typed body in one pass) and the body is
    kept on the :class:`Record`, so :func:`commit` does not decode it again. A record that
    pass refuses is re-read as plain framing, so classification is unchanged: a framing
    failure ends the prefix, a payload failure surfaces in :func:`commit` as before.

    ``release(upto)`` (``runtime/mapped.py``), for a mapped file, is called every
    ``RELEASE_EVERY`` bytes with the offset replay has reached: the pages walked leave
    the resident set (a later read of a record refaults them from the file).
    """
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    try:
        if len(mv) == 0:
            raise TruncatedError("WAL file is missing (0 bytes)", offset=0, path="wal_file_header")
        # magic, family and the registry's accepted version range first (facts §2.1
        # order), then the WAL's own header rules
        registry.read_header(mv, expected_family=11)
        header, pos = ze.decode_wal_file_header(mv)
    except DecodeError as exc:
        return Replay(None, terminator="invalid_header", offset=0, reason="InvalidHeader",
                      error=exc)
    n = len(mv)
    records = RecordList(mv, header.first_seq)
    out = Replay(header.first_seq, records)
    expected = header.first_seq
    add = records._add
    mark = pos + RELEASE_EVERY if release is not None else n + 1
    while pos < n:
        if decode:  # one pass per record until one is refused or out of sequence
            try:
                for v, end in ze.iter_wal_record(mv, pos):
                    if v.seq != expected:
                        break
                    op = v.op.value
                    body = v.payload.body
                    # the payload rules run now, while the body exists; commit reads
                    # the outcome, so no decoded body outlives its record's turn
                    state = _CHECKED
                    try:
                        check_body(op, body, mv[pos + RECORD_HEADER:end - 8]
                                   if op in (10, 11) else None)
                        if op in (8, 11):
                            records._batch[len(records)] = (body.index, body.count)
                    except DecodeError as exc:
                        state = _REFUSED
                        records._errors[len(records)] = exc
                    add(pos, op, end, state)
                    expected += 1
                    pos = end
                    if pos >= mark:
                        release(pos)
                        mark = pos + RELEASE_EVERY
            except DecodeError:
                pass
            if pos >= n:
                break
        reason = None
        err: DecodeError | None = None
        declared_end = None
        try:
            fr, end = ze.decode_wal_frame(mv, pos)
        except TruncatedError as exc:
            reason = "HeaderTruncated" if n - pos < 14 else "BodyTruncated"
            err = exc
        except ChecksumError as exc:
            reason, err = "ChecksumMismatch", exc
            declared_end = pos + FRAME_OVERHEAD + ze.decode_wal_record_header(mv, pos)[0].payload_len
        else:
            if fr.seq != expected:
                reason = ("FirstSequenceMismatch" if not out.records else
                          "SequenceGap" if fr.seq > expected else "SequenceRegression")
                err = ConstraintError(f"sequence rule broken ({reason})", offset=pos,
                                      path="wal_frame.seq", expected=expected, found=fr.seq)
                declared_end = end
        if reason is not None:
            middle = declared_end is not None and declared_end < n and \
                _valid_frame_at(mv, declared_end)
            out.terminator, out.offset, out.reason, out.error = "corrupt", pos, reason, err
            out.corruption = "middle" if middle else "tail"
            try:
                out.valid_after_offsets = scan_after(mv, pos, scan_bytes=scan_bytes)
            except _ScanCut as cut:  # cannot rule out records further on: never a torn tail
                out.valid_after_offsets = cut.found
                out.scan_complete = False
            return out
        add(pos, fr.op, end)
        expected = fr.seq + 1
        pos = end
        if pos >= mark:
            release(pos)
            mark = pos + RELEASE_EVERY
    return out


# -- commit ----------------------------------------------------------------------------

class Committed:
    """A unit that replay applies: one record, or a complete batch run (ops 8 / 11).

    A unit read from :func:`commit`'s result builds its ``records`` and decodes its
    ``payloads`` (the bodies, in order) when first asked: commit has already checked
    them, and a caller applying units one at a time holds one unit's values at a time.
    """

    __slots__ = ("kind", "_records", "_payloads", "_src", "_first", "_count")

    def __init__(self, kind: str, records: list[Record] | None = None,
                 payloads: list | None = None) -> None:
        self.kind = kind  # single | batch | mixed
        self._records = records
        self._payloads = payloads
        self._src = None  # the RecordList a lazy unit reads from
        self._first = self._count = 0

    @classmethod
    def _of(cls, kind: str, src: RecordList, first: int, count: int) -> Committed:
        unit = cls(kind)
        unit._src, unit._first, unit._count = src, first, count
        return unit

    @property
    def records(self) -> list[Record]:
        if self._records is None:
            src, a = self._src, self._first
            self._records = [src._record(i) for i in range(a, a + self._count)]
        return self._records

    @property
    def payloads(self) -> list:
        if self._payloads is None:
            if self._records is None and self._src is not None:
                # straight from the columns: no Record objects when only values are read
                src, a = self._src, self._first
                self._payloads = [src._body(i) for i in range(a, a + self._count)]
            else:
                self._payloads = [r.body if r.body is not None else _payload_body(r)
                                  for r in self.records]
        return self._payloads

    def __eq__(self, other) -> bool:
        if not isinstance(other, Committed):
            return NotImplemented
        return (self.kind, self.records, self.payloads) == \
            (other.kind, other.records, other.payloads)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Committed(kind={self.kind!r}, records={self.records!r})"


_KINDS = ("single", "batch", "mixed")


class CommittedList(Sequence):
    """The committed units of :func:`commit`, as (first record, count, kind) columns over
    the records; a :class:`Committed` is built when a unit is read (9 bytes a unit held)."""

    __slots__ = ("_records", "_first", "_count", "_kind")

    def __init__(self, records) -> None:
        self._records = records
        self._first = array("Q")
        self._count = array("I")
        self._kind = bytearray()

    def _add(self, first: int, count: int, kind: int) -> None:
        self._first.append(first)
        self._count.append(count)
        self._kind.append(kind)

    def __len__(self) -> int:
        return len(self._first)

    def _unit(self, u: int) -> Committed:
        a, c, src = self._first[u], self._count[u], self._records
        if src.__class__ is RecordList:
            return Committed._of(_KINDS[self._kind[u]], src, a, c)
        return Committed(_KINDS[self._kind[u]], src[a:a + c])

    def __getitem__(self, u):
        if isinstance(u, slice):
            return [self._unit(k) for k in range(*u.indices(len(self)))]
        n = len(self._first)
        if u < 0:
            u += n
        if not 0 <= u < n:
            raise IndexError("unit index out of range")
        return self._unit(u)

    def __iter__(self):
        return map(self._unit, range(len(self._first)))

    def __eq__(self, other) -> bool:
        if isinstance(other, (CommittedList, list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<CommittedList of {len(self)} units>"


def decode_body(rec: Record):
    """The op-specific body of a record (``ze.OpUpsertV1``, ``ze.GraphEnvelope``...),
    with the payload rules a layout cannot state (:func:`check_body`). The payload must
    be consumed exactly: bytes after the op's body are refused."""
    value, end = ze.decode_wal_payload(rec.payload, op=rec.op)
    if end != len(rec.payload):
        raise ConstraintError("trailing bytes after the op payload",
                              offset=rec.offset + RECORD_HEADER + end,
                              path="payload", expected=len(rec.payload), found=end)
    check_body(rec.op, value.body, rec.payload)
    return value.body


def decode_record(buf, offset: int = 0) -> tuple[ze.WalRecord, int]:
    """One bare WAL record with its payload decoded by op (``ze.decode_wal_record``), its
    checksum verified before any payload field is read."""
    seals.wal_record(buf, offset)
    return ze.decode_wal_record(buf, offset)


def _field_offset(record: str, name: str) -> int:
    for f in ze.LAYOUT[record]["layouts"][0]["fields"]:
        if f["name"] == name:
            return f["offset"]
    raise KeyError(name)


#: where an op-11 member's inner payload starts (index, count, inner_op before it)
MIXED_INNER_AT = _field_offset("op_mixed_member", "inner")


def _envelope_bytes(op: int, body, payload):
    """The complete envelope an op carries (op 10, or op 11 with inner op 10), else None."""
    if op == 10:
        return payload
    if op == 11 and body.inner_op == 10:
        return payload[MIXED_INNER_AT:]
    return None


def _vector_of(op: int, body):
    """The f32 list an op carries (None when it has none)."""
    if op in (1, 4):
        return body.vector.values
    if op in (5, 6):
        return body.vector
    if op == 7:
        return body.vector.values if body.vector is not None else None
    if op == 8:
        return _vector_of(7, body.body)
    if op in (9, 11):
        return _vector_of(body.inner_op, body.inner) if body.inner_op in (1, 4, 5, 6, 7) \
            else None
    return None


def _all_finite(values) -> bool:
    """No NaN/Inf among the values. A long packed vector is checked as a numpy view (one
    pass in C); short ones are cheaper as one ``sum`` than a numpy call."""
    view = getattr(values, "numpy", None)
    if view is not None and len(values) >= 128:
        import numpy as np

        return bool(np.isfinite(view()).all())
    return math.isfinite(sum(values))


def check_body(op: int, body, payload=None) -> None:
    """Refuse any NaN/+-Inf vector coordinate (NonFiniteVector(index)); with ``payload``,
    run the envelope framing check (indices, batch, sizes, Commit digest) on the envelope
    an op 10 or an op-11 member with inner op 10 carries.

    The sum of f32 values is finite exactly when every value is (a double cannot overflow
    on fewer than 2**32 f32 terms, and NaN/Inf propagate), so the common case costs one sum.
    """
    if payload is not None:
        env = _envelope_bytes(op, body, payload)
        if env is not None:
            try:
                envelope.validate(env)
            except DecodeError as exc:
                raise exc.prefixed("graph_envelope") from None
    values = _vector_of(op, body)
    if values is not None and not _all_finite(values):
        index = next(i for i, x in enumerate(values) if not math.isfinite(x))
        raise ConstraintError(f"non-finite vector value at index {index} (NonFiniteVector)",
                              path=f"vector[{index}]", expected="finite", found=values[index])


def commit(records, *, after_seq: int = 0,
           graph: bool = True) -> tuple[CommittedList, list[Record]]:
    """Group a trusted prefix into committed units; returns (committed, withheld).

    Records with ``seq <= after_seq`` (already absorbed by the manifest) are skipped. Ops 8
    and 11 each keep their own run: index 0 starts a run (discarding a pending one), index
    k continues it only at position k with the same count, index + 1 == count commits it.
    Any other record clears a pending run; an orphan continuation raises
    :class:`OrphanBatchMember`; incomplete runs at the end are withheld. ``graph=False``
    refuses ops 10/11 as a graph-free build does.

    Every payload is decoded and checked here (or was, by ``replay(decode=True)``), but no
    body is kept: a run's members are consecutive records, so each unit is held as its
    first record and count (:class:`CommittedList`) and decoded again when read.
    """
    if isinstance(records, RecordList):
        src = records
        state, errors, batch = records._state, records._errors, records._batch
        first_seq, ops, starts = records.first_seq, records._ops, records._starts
    else:
        # skipped records dropped first, so a run's members are consecutive in ``src``
        # whatever order of seqs a caller's list holds
        src = [rec for rec in records if rec.seq > after_seq]
        state = None
    out = CommittedList(src)
    runs: dict[int, list | None] = {8: None, 11: None}  # op -> [first index, count, members]
    for i in range(len(src)):
        if state is not None:
            seq, op = first_seq + i, ops[i]
        else:
            rec = src[i]
            seq, op = rec.seq, rec.op
        if seq <= after_seq:
            continue
        if not graph and op in (10, 11):
            raise ConstraintError("graph WAL mutation in a graph-free build "
                                  "(UnsupportedWalMutation)",
                                  offset=starts[i] if state is not None else rec.offset,
                                  found=op)
        st = _FRAMED if state is None else state[i]
        try:
            if st == _CHECKED:
                index_count = batch.get(i) if op in (8, 11) else None
            elif st == _REFUSED:
                raise errors[i]
            else:
                if state is not None:
                    rec = src._record(i, body=False)
                body = rec.body
                if body is None:
                    body = decode_body(rec)
                else:
                    check_body(rec.op, body, rec.payload)
                index_count = (body.index, body.count) if op in (8, 11) else None
        except DecodeError as exc:
            if exc.offset is None:
                exc.offset = starts[i] if state is not None else rec.offset
            raise exc.prefixed(f"wal_record[seq {seq}]") from None
        if op not in (8, 11):
            runs[8] = runs[11] = None
            out._add(i, 1, 0)
            continue
        other = 11 if op == 8 else 8
        runs[other] = None  # ops 8 and 11 never continue each other's runs
        run = runs[op]
        index, count = index_count
        if index == 0:
            run = runs[op] = [i, count, 0]
        elif run is None or index != run[2] or count != run[1]:
            raise OrphanBatchMember("orphan batch member (OrphanBatchMember)",
                                    offset=starts[i] if state is not None else rec.offset,
                                    path=f"wal_record[seq {seq}].index",
                                    expected=None if run is None else run[2],
                                    found=index)
        run[2] += 1
        if index + 1 == count:
            out._add(run[0], count, 1 if op == 8 else 2)
            runs[op] = None
    # ops 8 and 11 clear each other's runs: at most one is pending at the end
    withheld = [rec for run in runs.values() if run is not None
                for rec in src[run[0]:run[0] + run[2]]]
    return out, withheld

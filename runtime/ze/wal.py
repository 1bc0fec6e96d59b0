"""WAL family 11: writer, prefix replay and batch-run commit (facts §3, rules.txt WAL).

Layouts come from the generated codecs (``wal_file_header``, ``wal_frame``,
``wal_payload``); this module owns only the semantics: which prefix is trusted, how the
first bad record is classified, and which records commit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...generated import ze
from ..errors import ChecksumError, ConstraintError, DecodeError, EncodeError, TruncatedError
from . import envelope, limits

HEADER_LEN = ze.LAYOUT["wal_file_header"]["layouts"][0]["fixed_size"]  # 40
RECORD_HEADER = ze.LAYOUT["wal_record_header"]["layouts"][0]["fixed_size"]  # 14
OP_AT = next(f["offset"] for f in ze.LAYOUT["wal_record_header"]["layouts"][0]["fields"]
             if f["name"] == "op")  # 12
_KNOWN_OPS = np.array([int(o) for o in ze.WalOp], dtype=np.uint32)
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
    payload: bytes  # a memoryview slice of the input on the ``decode=True`` path
    offset: int
    end: int
    body: object = None  # the typed op body, when replay decoded it in the same pass


@dataclass
class Replay:
    """The trusted prefix and its terminator (CleanEnd, InvalidHeader or CorruptAt)."""

    first_seq: int | None
    records: list[Record] = field(default_factory=list)
    terminator: str = "clean"  # clean | invalid_header | corrupt
    offset: int | None = None  # of the first bad record
    reason: str = ""  # HeaderTruncated, BodyTruncated, ChecksumMismatch, SequenceGap...
    corruption: str | None = None  # "tail" | "middle" (facts §3.3: a successor at the end)
    error: DecodeError | None = None
    #: valid-looking records (checksum-valid frames) at or after the damage, found by
    #: scanning every offset past it (issue 14): their offsets
    valid_after_offsets: list[int] = field(default_factory=list)
    scan_complete: bool = True  # False: a scan limit stopped the look past the damage

    @property
    def valid_after(self) -> int:
        return len(self.valid_after_offsets)

    @property
    def damaged(self) -> bool:
        """Valid-looking records follow the damage, or the scan could not rule them out."""
        return self.terminator == "corrupt" and (bool(self.valid_after_offsets)
                                                 or not self.scan_complete)

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
               candidates: int = limits.SCAN_CANDIDATES) -> list[int]:
    """Offsets of checksum-valid frames from ``start`` on (at most ``scan_bytes`` scanned).

    Every offset is tried (a damaged length field gives no reliable successor); after a hit
    the scan continues at that frame's end.
    """
    out: list[int] = []
    n = min(len(mv), start + scan_bytes)
    if n - start < FRAME_OVERHEAD:
        return out
    pos = start
    last = n - FRAME_OVERHEAD  # the last offset a frame can start at
    tried = 0
    for chunk in range(start, last + 1, _SCAN_CHUNK):
        for c in _candidates(mv, chunk, min(chunk + _SCAN_CHUNK, last + 1), n):
            if c < pos:
                continue  # inside a record already found
            tried += 1
            if tried > candidates:
                raise _ScanCut(out)
            try:
                _, end = ze.decode_wal_frame(mv[:n], c)
            except DecodeError:
                continue
            out.append(c)
            pos = end
    if n < len(mv):
        raise _ScanCut(out)
    return out


class _ScanCut(Exception):
    """The scan stopped at a limit; ``found`` holds what it had found."""

    def __init__(self, found: list[int]) -> None:
        self.found = found


_SCAN_CHUNK = 1 << 18  # bytes per vectorised step (bounded temporary arrays)


def _candidates(mv: memoryview, lo: int, hi: int, n: int) -> list[int]:
    """Offsets in ``[lo, hi)`` whose op field (u16 LE at ``OP_AT``, read as numpy views)
    holds a known WAL op: a vectorised prefilter, so only candidates pay for a decode."""
    m = hi - lo
    ops = np.zeros(m, dtype=np.uint16)
    for k in range(2):  # the u16 at every offset, from two aligned views
        count = (m + 1 - k) // 2
        view = np.frombuffer(mv[lo + OP_AT + k:lo + OP_AT + k + 2 * count], dtype="<u2")
        ops[k::2][:len(view)] = view
    return (lo + np.flatnonzero(np.isin(ops, _KNOWN_OPS))).tolist()


def _valid_frame_at(mv: memoryview, pos: int) -> bool:
    try:
        ze.decode_wal_frame(mv, pos)
        return True
    except DecodeError:
        return False


def replay(buf, *, decode: bool = False, scan_bytes: int = limits.SCAN_BYTES) -> Replay:
    """Prefix replay: validate the header, then records one at a time from offset 40.

    The first record must carry ``first_seq`` and each next one ``seq + 1``; the first bad
    record ends replay. It is "middle" corruption when a checksum-valid record begins at
    its declared end, else "tail" (torn headers and bodies are always tail).

    ``decode=True`` is the fast path: each record is decoded once with the generated
    ``wal_record`` (framing, checksum and the op's typed body in one pass) and the body is
    kept on the :class:`Record`, so :func:`commit` does not decode it again. A record that
    pass refuses is re-read as plain framing, so classification is unchanged: a framing
    failure ends the prefix, a payload failure surfaces in :func:`commit` as before.
    """
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    try:
        if len(mv) == 0:
            raise TruncatedError("WAL file is missing (0 bytes)", offset=0, path="wal_file_header")
        header, pos = ze.decode_wal_file_header(mv)
    except DecodeError as exc:
        return Replay(None, terminator="invalid_header", offset=0, reason="InvalidHeader",
                      error=exc)
    out = Replay(header.first_seq)
    expected = header.first_seq
    n = len(mv)
    records = out.records
    while pos < n:
        if decode:  # one pass per record until one is refused or out of sequence
            try:
                for v, end in ze.iter_wal_record(mv, pos):
                    if v.seq != expected:
                        break
                    records.append(Record(expected, v.op.value, mv[pos + RECORD_HEADER:end - 8], pos, end,
                                          v.payload.body))
                    expected += 1
                    pos = end
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
        out.records.append(Record(fr.seq, fr.op, fr.payload, pos, end))
        expected = fr.seq + 1
        pos = end
    return out


# -- commit ----------------------------------------------------------------------------

@dataclass(slots=True)
class Committed:
    """A unit that replay applies: one record, or a complete batch run (ops 8 / 11)."""

    kind: str  # single | batch | mixed
    records: list[Record]
    payloads: list  # decoded bodies, in order


@dataclass
class _Run:
    count: int
    records: list = field(default_factory=list)
    bodies: list = field(default_factory=list)


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
    if values is not None and not math.isfinite(sum(values)):
        index = next(i for i, x in enumerate(values) if not math.isfinite(x))
        raise ConstraintError(f"non-finite vector value at index {index} (NonFiniteVector)",
                              path=f"vector[{index}]", expected="finite", found=values[index])


def commit(records, *, after_seq: int = 0, graph: bool = True) -> tuple[list[Committed], list]:
    """Group a trusted prefix into committed units; returns (committed, withheld).

    Records with ``seq <= after_seq`` (already absorbed by the manifest) are skipped. Ops 8
    and 11 each keep their own run: index 0 starts a run (discarding a pending one), index
    k continues it only at position k with the same count, index + 1 == count commits it.
    Any other record clears a pending run; an orphan continuation raises
    :class:`OrphanBatchMember`; incomplete runs at the end are withheld. ``graph=False``
    refuses ops 10/11 as a graph-free build does.
    """
    out: list[Committed] = []
    runs: dict[int, _Run | None] = {8: None, 11: None}
    for rec in records:
        if rec.seq <= after_seq:
            continue
        if not graph and rec.op in (10, 11):
            raise ConstraintError("graph WAL mutation in a graph-free build "
                                  "(UnsupportedWalMutation)", offset=rec.offset, found=rec.op)
        body = rec.body
        try:
            if body is None:
                body = decode_body(rec)
            else:
                check_body(rec.op, body, rec.payload)
        except DecodeError as exc:
            if exc.offset is None:
                exc.offset = rec.offset
            raise exc.prefixed(f"wal_record[seq {rec.seq}]") from None
        if rec.op not in (8, 11):
            runs[8] = runs[11] = None
            out.append(Committed("single", [rec], [body]))
            continue
        other = 11 if rec.op == 8 else 8
        runs[other] = None  # ops 8 and 11 never continue each other's runs
        run = runs[rec.op]
        if body.index == 0:
            run = runs[rec.op] = _Run(body.count)
        elif run is None or body.index != len(run.records) or body.count != run.count:
            raise OrphanBatchMember("orphan batch member (OrphanBatchMember)", offset=rec.offset,
                                    path=f"wal_record[seq {rec.seq}].index",
                                    expected=None if run is None else len(run.records),
                                    found=body.index)
        run.records.append(rec)
        run.bodies.append(body)
        if body.index + 1 == body.count:
            out.append(Committed("batch" if rec.op == 8 else "mixed", run.records, run.bodies))
            runs[rec.op] = None
    withheld = [r for run in runs.values() if run is not None for r in run.records]
    return out, withheld

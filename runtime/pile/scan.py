"""The record scanner shared by refresh, the records iterator, amputate and reframe.

Every record is decoded by the generated codecs in ``generated/pile.py``: current frames
first through ``frame_head`` (the first block only, so a blob's payload is never read),
everything else through ``pile_record``, whose first-16-byte switch is the dispatch order
of facts.md §5. Decode failures are mapped to the two pile errors: an unknown marker is
``UnsupportedRecord``; anything else (torn, bad span, reserved bytes, rule broken) is
``CorruptPile`` at the record's start.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ...generated import pile as g
from ..errors import DecodeError, TruncatedError
from . import crypto
from .errors import CorruptPile, UnsupportedRecord
from .kinds import BLOCK, FRAME_MAGIC, KIND_PROOF_V5, MAGIC_HEAD

_FORM = {"frame_rest": "current", "envelope36_rest": "envelope36"}
_CLASS_NAME = {getattr(g, "".join(p.capitalize() for p in name.split("_"))): name
               for name in g.DECODERS}
MAX_PROOF_EDGES = 255


@dataclass
class Record:
    """One record in file order.

    ``form``: current | envelope36 | v1 | v3 | v4. ``kind``: the 32-byte kind (current),
    the 16-byte kind id (envelope36) or the 16-byte marker (legacy). ``name``: the schema
    record of the body (``blob_body``, ``v1_branch``...) or ``opaque``. ``value``: the
    decoded body (a ``BlobHead`` for a current blob read head-only; raw bytes if opaque).
    """

    offset: int
    end: int
    form: str
    kind: bytes
    name: str
    value: Any
    span: int | None = None

    @property
    def length(self) -> int:
        return self.end - self.offset

    @property
    def opaque(self) -> bool:
        return self.name == "opaque"


def record_name(value: Any) -> str:
    return "opaque" if isinstance(value, (bytes, bytearray)) else _CLASS_NAME[type(value)]


def read_record(mv: memoryview, offset: int, *, heads_only: bool = True) -> Record:
    """Decode the record at ``offset`` of ``mv`` (the observed file prefix)."""
    end = len(mv)
    if heads_only:
        try:
            fh, _ = g.decode_frame_head(mv, offset)
        except DecodeError:
            fh = None  # not a (whole) current first block: the full dispatch decides
        if fh is not None and isinstance(fh.head, g.BlobHead):
            rec_end = offset + fh.span * BLOCK
            if rec_end > end:
                raise CorruptPile(offset, f"blob record of {fh.span} blocks runs past the "
                                  f"end of the file ({end})", path="pile_record.record.body")
            return Record(offset, rec_end, "current", fh.kind, "blob_body", fh.head, fh.span)
    try:
        value, rec_end = g.decode_pile_record(mv, offset)
    except TruncatedError as exc:
        head = bytes(mv[offset:offset + len(FRAME_MAGIC)])
        if head.startswith(MAGIC_HEAD) and not FRAME_MAGIC.startswith(head):
            # facts.md §5 step 1: fewer than 28 bytes that are not a prefix of the magic
            # are no torn frame; the 16-byte marker (the magic's first half, which no
            # legacy form uses) is unknown, as it is when more bytes follow
            raise UnsupportedRecord(offset, MAGIC_HEAD) from None
        raise CorruptPile(offset, f"torn record ({exc.message})", path=exc.path,
                          cause=exc) from None
    except DecodeError as exc:
        if exc.path == "pile_record.record" and exc.message.startswith("no case"):
            raise UnsupportedRecord(offset, bytes(exc.found)) from None
        if exc.path == "pile_record.record.magic_tail":
            raise UnsupportedRecord(offset, MAGIC_HEAD) from None  # not the 28-byte magic
        raise CorruptPile(offset, str(exc), path=exc.path, cause=exc) from None
    rec = value.record
    rname = record_name(rec)
    if rname in _FORM:
        body = rec.body
        out = Record(offset, rec_end, _FORM[rname], rec.kind, record_name(body), body, rec.span)
    else:
        out = Record(offset, rec_end, rname[:2], value.marker,
                     "opaque" if rname == "v3_local_cell" else rname, rec)
    if out.name == "proof_v5_body":
        check_proof_structure(out)
    elif out.name in ("proof_v1_body", "proof_v2_body"):
        check_retired_proof_keys(out)
    return out


def check_retired_proof_keys(rec: Record) -> None:
    """facts.md §3.9: v1 keys must be curve points; v2 keys canonical and not weak."""
    content = rec.value.data.body
    keys = [content.root] + [e.delegate for e in content.edges]
    v2 = rec.name == "proof_v2_body"
    for key in keys:
        ok = crypto.key_is_valid(key) if v2 else crypto.is_small_order(key) is not None
        if not ok:
            raise CorruptPile(rec.offset, f"invalid retired proof key {key.hex()}")


def proof_edge_count(body: g.ProofV5Body) -> int:
    n = 0
    for edge in body.edges[:MAX_PROOF_EDGES + 1]:
        if max(edge.capability) == 0 and max(edge.delegate) == 0 and max(edge.signature) == 0:
            break
        n += 1
    return n


def check_proof_structure(rec: Record) -> None:
    """facts.md §3.7 decoding steps 1-3 (structure and key validity, not signatures)."""
    body: g.ProofV5Body = rec.value
    n = proof_edge_count(body)
    for edge in body.edges[n:]:
        if max(edge.capability) or max(edge.delegate) or max(edge.signature):
            raise CorruptPile(rec.offset, "non-zero bytes after the proof body")
    minimal = (32 + 96 + 128 * n + BLOCK - 1) // BLOCK
    if rec.span != minimal:
        raise CorruptPile(rec.offset, f"proof span {rec.span} is not the minimal {minimal}")
    if not 1 <= n <= MAX_PROOF_EDGES:
        raise CorruptPile(rec.offset, f"proof has {n} edges (1..255)")
    for key in [body.root] + [e.delegate for e in body.edges[:n]]:
        if not crypto.key_is_valid(key):
            raise CorruptPile(rec.offset, f"invalid proof key {key.hex()}")


def proof_body_bytes(body: g.ProofV5Body) -> bytes:
    """The exact unpadded proof body (kind/magic through the last edge): what the id hashes."""
    n = proof_edge_count(body)
    trimmed = g.ProofV5Body(body.resource, body.root, list(body.edges[:n]))
    return KIND_PROOF_V5 + g.encode_proof_v5_body(trimmed, span=0)


def iter_records(buf, start: int = 0, *, heads_only: bool = False) -> Iterator[Record]:
    """Every record from ``start`` to the end of ``buf`` in file order; raises the pile
    error of the first bad record (records already yielded are intact)."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    pos = start
    while pos < len(mv):
        rec = read_record(mv, pos, heads_only=heads_only)
        yield rec
        pos = rec.end


def valid_after(mv: memoryview, offset: int, step: int = 64) -> int:
    """How many valid-looking records follow damage at ``offset``: records that decode and,
    for blobs, whose payload hash matches. Record starts in any pile are 64-aligned."""
    count = 0
    pos = offset + step
    while pos < len(mv):
        try:
            rec = read_record(mv, pos, heads_only=False)
        except DecodeError:
            pos += step
            continue
        if blob_hash_ok(rec) is False:
            pos += step
            continue
        count += 1
        pos = rec.end
    return count


def blob_parts(rec: Record) -> tuple[bytes, bytes] | None:
    """(handle, payload) of a fully decoded blob record of any form, else None."""
    v = rec.value
    if isinstance(v, g.BlobBody):
        return v.head.hash, v.data.payload
    if isinstance(v, (g.EnvBlobBody, g.V3Blob, g.V1Blob)):
        return v.hash, v.data.payload
    return None


def blob_hash_ok(rec: Record) -> bool | None:
    parts = blob_parts(rec)
    if parts is None:
        return None
    return crypto.blake3(parts[1]) == parts[0]

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
from .kinds import BLOCK, FRAME_MAGIC, KIND_PROOF_V5, LEGACY_MARKERS, MAGIC_HEAD

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
        raise CorruptPile(offset, short_reason(exc), path=exc.path, cause=exc) from None
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


_SHOW = 16  # bytes of an expected/found value an error text shows


def short_reason(exc: DecodeError) -> str:
    """One short line for a decode failure: a reserved field's first non-zero byte and
    where it is, not two dumps of the whole field (up to 224 bytes each)."""
    found = exc.found
    if exc.message.startswith("reserved bytes") and isinstance(found, (bytes, bytearray,
                                                                       memoryview)):
        found = bytes(found)
        i = next((i for i, x in enumerate(found) if x), 0)
        at = exc.offset + i if exc.offset is not None else i
        return f"reserved bytes must be zero; byte at offset {at} is 0x{found[i]:02x}"
    text = exc.message
    if exc.offset is not None:
        text += f" at offset {exc.offset}"
    if exc.expected is not None or exc.found is not None:
        text += f" (expected {_clip(exc.expected)}, found {_clip(found)})"
    return text


def _clip(value: Any) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        more = f"... ({len(raw)} bytes)" if len(raw) > _SHOW else ""
        return raw[:_SHOW].hex() + more
    text = str(value)
    return text if len(text) <= 2 * _SHOW else text[:2 * _SHOW] + "..."


# Opaque records whose kind this reader does know (spec: retired local cells, the signed
# payload-only equations): a refusal names them instead of calling them unknown.
_KNOWN_OPAQUE = {
    bytes.fromhex("24264FA9EE46A1ACC0E024AE69774B09"): "retired local cell (replace)",
    bytes.fromhex("4FE372AE868D22A44DED7A60D579B651"): "retired local cell (clear)",
    bytes.fromhex("9D9B962D46FA42168AB3A11FB367AC14692D4F51B5190196F2BDB08D5BC2BA07"):
        "retired signed payload-only MERGE (merge v5)",
    bytes.fromhex("B2EE8382C70161379E387D692B822946A60B602A909EED66B7D6DA2A62F36232"):
        "retired signed payload-only DERIVE (derive v6)",
}


def opaque_label(rec: Record) -> str:
    """What an opaque record is, as far as this reader knows: a named retired kind or
    "unknown kind KIND"."""
    known = _KNOWN_OPAQUE.get(bytes(rec.kind))  # a legacy record's kind is its marker
    return known or f"unknown kind {bytes(rec.kind).hex().upper()}"


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


V1_STEP = 64      # facts §5.1: V1 records have 64-byte granularity
FRAME_STEP = 256  # every other form occupies whole 256-byte blocks
_V1_MARKERS = frozenset(LEGACY_MARKERS[n] for n in ("v1_blob", "v1_branch", "v1_tombstone"))


class Resume:
    """Where a record may start after bytes that do not decode. Any record starts where
    the one before it ended; after undecodable bytes at ``anchor`` a V1 record may start
    at any 64-byte step, any other form only whole 256-byte blocks from ``anchor`` -
    unless the damaged record was itself V1, whose length is then unknown. A blob whose
    header decodes at a known boundary owns its payload: nothing inside it is a record."""

    def __init__(self) -> None:
        self.anchor: int | None = None
        self.step = FRAME_STEP

    def allows(self, pos: int, rec: Record) -> bool:
        return self.anchor is None or rec.form == "v1" or (pos - self.anchor) % self.step == 0

    def failed(self, mv: memoryview, pos: int, rec: Record | None) -> int:
        """The next position to try after ``pos`` did not give a good record (``rec``:
        what decoded there, if anything)."""
        if rec is not None and self.anchor is None:
            return rec.end  # an intact header at a known boundary: skip the record whole
        if self.anchor is None:
            self.anchor = pos
            self.step = V1_STEP if bytes(mv[pos:pos + 16]) in _V1_MARKERS else FRAME_STEP
        return pos + V1_STEP - pos % V1_STEP

    def found(self) -> None:
        self.anchor = None


def good_record(mv: memoryview, pos: int, resume: Resume) -> tuple[Record | None, bool]:
    """``(record decoded at pos or None, whether it is a good record there)``: it decodes,
    it may start there, and a blob's payload hashes to its handle."""
    try:
        rec = read_record(mv, pos, heads_only=False)
    except DecodeError:
        return None, False
    if not resume.allows(pos, rec):
        return None, False
    return rec, blob_hash_ok(rec) is not False


def valid_after(mv: memoryview, offset: int) -> int:
    """How many valid-looking records follow damage at ``offset``: good records (see
    ``good_record``) found where a record may start after it (see ``Resume``)."""
    count = 0
    resume = Resume()
    pos = resume.failed(mv, offset, None)
    while pos < len(mv):
        rec, good = good_record(mv, pos, resume)
        if not good:
            pos = resume.failed(mv, pos, rec)
            continue
        count += 1
        resume.found()
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

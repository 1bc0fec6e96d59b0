"""Dense collection records at the ingress boundary (spec "Native Collection Records",
facts.md §4): checked ``from_bytes``, the retired equations, fingerprints and references.

The generated ``decode_dense_record`` is structural only, like upstream's crate-private
``from_bytes_trusted``. The spec requires the *public* dense constructor to "perform strict
signature verification, including canonical non-weak author keys", so :func:`from_bytes`
wraps it and refuses a forged record with :class:`RecordRefused`.

Retired tags 2/3 (unsigned) and 4/5 (signed payload-only) are never current records:
:func:`from_bytes` refuses them as unknown kinds, and only :class:`LegacyUnsignedEquation`
/ :class:`LegacySignedEquation` decode them, as explicit migration and audit evidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...generated import pile as g
from ..errors import DecodeError
from . import crypto
from .errors import RecordRefused

TAG_COMMIT, TAG_UNSIGNED_MERGE, TAG_UNSIGNED_DERIVE = 1, 2, 3
TAG_SIGNED_MERGE, TAG_SIGNED_DERIVE, TAG_WITNESS_MERGE, TAG_WITNESS_DERIVE = 4, 5, 6, 7
_LENGTH = {1: 192, 2: 128, 3: 96, 4: 224, 5: 192, 6: 288, 7: 224}
CURRENT_TAGS = frozenset({TAG_COMMIT, TAG_WITNESS_MERGE, TAG_WITNESS_DERIVE})

# facts.md §4.3: the retired signed payload-only transcripts ("Their signature domains
# ended in .transcript, not .endorsement") and the retired semantic kinds (§4.4).
SIGNED_MERGE_DOMAIN = b"triblespace.collection.merge.transcript"
SIGNED_DERIVE_DOMAIN = b"triblespace.collection.derive.transcript"
SEMANTIC_SIGNED_MERGE = bytes.fromhex("1E5277B23D177FD692B074FBF0EF28F1")
SEMANTIC_SIGNED_DERIVE = bytes.fromhex("CE6A838612D0AA0812C05A50CCD11DC1")
SEMANTIC_UNSIGNED_MERGE = bytes.fromhex("5F20FFC64313969B7E046A7677874D39")
SEMANTIC_UNSIGNED_DERIVE = bytes.fromhex("46C621338B6DD5B71C8E1E6DD74B087C")

# The native frames of the retired signed kinds (spec "Retired payload-only equations"):
# MERGE 512-byte frame (span 2), DERIVE one 256-byte block; ordinary replay keeps them opaque.
KIND_SIGNED_MERGE_V5 = bytes.fromhex(
    "9D9B962D46FA42168AB3A11FB367AC14692D4F51B5190196F2BDB08D5BC2BA07")
KIND_SIGNED_DERIVE_V6 = bytes.fromhex(
    "B2EE8382C70161379E387D692B822946A60B602A909EED66B7D6DA2A62F36232")


def _refuse(reason: str, path: str, offset: int = 0) -> RecordRefused:
    return RecordRefused(reason, offset=offset, path=path)


def _split(data: bytes, path: str) -> tuple[int, bytes]:
    data = bytes(data)
    if not data:
        raise _refuse("dense record is empty (no tag byte)", f"{path}.tag")
    tag, payload = data[0], data[1:]
    want = _LENGTH.get(tag)
    if want is None:
        raise _refuse(f"unknown dense kind {tag}", f"{path}.tag")
    if len(payload) != want:
        raise _refuse(f"dense tag {tag} payload has {len(payload)} bytes; expected exactly "
                      f"{want}", f"{path}.payload", 1)
    return tag, payload


def _fields(payload: bytes) -> list[bytes]:
    return [payload[i:i + 32] for i in range(0, len(payload), 32)]


# -- current records: checked ingress ---------------------------------------------------

def from_bytes_trusted(data: bytes) -> g.DenseRecord:
    """Structural decode of a current dense record (tags 1, 6, 7) without crypto: for
    trusted persisted bytes and audits. Retired tags are unknown kinds here."""
    tag, payload = _split(data, "dense_record")
    if tag not in CURRENT_TAGS:
        raise _refuse(f"unknown dense kind {tag} (retired; not a current collection record)",
                      "dense_record.tag")
    try:
        value, _ = g.decode_dense_record(bytes(data))
    except DecodeError as exc:
        raise _refuse(f"dense record does not decode: {exc}", exc.path or "dense_record",
                      exc.offset or 0) from None
    if tag == TAG_WITNESS_MERGE:
        p = value.payload
        if (p.high, p.high_witness) < (p.low, p.low_witness):
            raise _refuse("merge inputs are not canonically ordered (payload digest, then "
                          "record fingerprint)", "dense_record.payload.high", 65)
    return value


def verify(value: g.DenseRecord) -> None:
    """Strict signature check of a current dense record; raises :class:`RecordRefused`."""
    p, tag = value.payload, value.tag
    key_offset = {TAG_COMMIT: 1 + 3 * 32, TAG_WITNESS_MERGE: 1 + 6 * 32,
                  TAG_WITNESS_DERIVE: 1 + 4 * 32}[int(tag)]
    if not crypto.key_is_valid(p.author):
        raise _refuse("collection record has an invalid public key (not canonical, or weak)",
                      "dense_record.payload.author", key_offset)
    if int(tag) == TAG_COMMIT:
        msg = crypto.commit_transcript(p.author, p.collection, p.data, p.metadata)
    elif int(tag) == TAG_WITNESS_MERGE:
        msg = crypto.merge_transcript(p.author, p.collection, p.low, p.high, p.result,
                                      p.low_witness, p.high_witness)
    else:
        msg = crypto.derive_transcript(p.author, p.target, p.input, p.output, p.input_witness)
    if not crypto.verify_strict(p.author, msg, p.sig_r + p.sig_s):
        raise _refuse("collection record signature is invalid", "dense_record.payload.sig_r",
                      key_offset + 32)


def from_bytes(data: bytes) -> g.DenseRecord:
    """The public dense constructor: decode, then strictly verify the signature."""
    value = from_bytes_trusted(data)
    verify(value)
    return value


def fingerprint(value: g.DenseRecord) -> bytes:
    """BLAKE3(semantic kind || dense payload) of a current record (facts.md §4.4)."""
    kind = {TAG_COMMIT: crypto._semantic("commit_transcript"),
            TAG_WITNESS_MERGE: crypto._semantic("merge_endorsement"),
            TAG_WITNESS_DERIVE: crypto._semantic("derive_endorsement")}[int(value.tag)]
    return crypto.blake3(kind + g.encode_dense_record(value)[1:])


def blob_references(value: g.DenseRecord) -> list[bytes]:
    """Direct blob handles: descriptor and payloads (witnesses are record references)."""
    p, tag = value.payload, int(value.tag)
    if tag == TAG_COMMIT:
        return [p.collection, p.data, p.metadata]
    if tag == TAG_WITNESS_MERGE:
        return [p.collection, p.low, p.high, p.result]
    return [p.target, p.input, p.output]


# -- retired equations -------------------------------------------------------------------

@dataclass(frozen=True)
class LegacyUnsignedEquation:
    """A retired unsigned MERGE (``low``/``high``/``result``) or DERIVE (``input``/
    ``output``) equation: inert evidence, never a current collection record."""

    merge: bool
    collection: bytes  # the target for a DERIVE
    a: bytes           # low | input
    b: bytes           # high | output
    result: bytes | None = None  # merge only

    @classmethod
    def from_bytes(cls, data: bytes) -> LegacyUnsignedEquation:
        tag, payload = _split(data, "dense_record")
        if tag not in (TAG_UNSIGNED_MERGE, TAG_UNSIGNED_DERIVE):
            raise _refuse(f"dense kind {tag} is not a retired unsigned equation (2 or 3)",
                          "dense_record.tag")
        f = _fields(payload)
        if tag == TAG_UNSIGNED_MERGE:
            if f[2] < f[1]:
                raise _refuse("merge high < low", "dense_record.payload.high", 65)
            return cls(True, f[0], f[1], f[2], f[3])
        return cls(False, f[0], f[1], f[2])

    @property
    def payload(self) -> bytes:
        return self.collection + self.a + self.b + (self.result or b"")

    def to_bytes(self) -> bytes:
        return bytes([TAG_UNSIGNED_MERGE if self.merge else TAG_UNSIGNED_DERIVE]) + self.payload

    def fingerprint(self) -> bytes:
        kind = SEMANTIC_UNSIGNED_MERGE if self.merge else SEMANTIC_UNSIGNED_DERIVE
        return crypto.blake3(kind + self.payload)

    def blob_references(self) -> list[bytes]:
        return [self.collection, self.a, self.b] + ([self.result] if self.merge else [])


@dataclass(frozen=True)
class LegacySignedEquation:
    """A retired signed payload-only equation (dense tags 4/5). Decoding checks structure
    only, so an audit can report a bad signature; :meth:`verify_strict` checks it under
    the old ``.transcript`` domain, never as a current endorsement."""

    equation: LegacyUnsignedEquation
    author: bytes
    sig_r: bytes
    sig_s: bytes

    @classmethod
    def from_bytes(cls, data: bytes) -> LegacySignedEquation:
        tag, payload = _split(data, "dense_record")
        f = _fields(payload)
        if tag == TAG_SIGNED_MERGE:
            if f[2] < f[1]:
                raise _refuse("merge high < low", "dense_record.payload.high", 65)
            return cls(LegacyUnsignedEquation(True, f[0], f[1], f[2], f[3]), f[4], f[5], f[6])
        if tag == TAG_SIGNED_DERIVE:
            return cls(LegacyUnsignedEquation(False, f[0], f[1], f[2]), f[3], f[4], f[5])
        raise _refuse(f"dense kind {tag} is not a retired signed equation (4 or 5)",
                      "dense_record.tag")

    @classmethod
    def from_frame(cls, raw: bytes, offset: int = 0) -> LegacySignedEquation:
        """Decode the exact native frame of a retired signed kind (an opaque record to
        replay): MERGE v5 spans 2 blocks with zeros after byte 288; DERIVE v6 spans 1."""
        raw = bytes(raw)
        kind = raw[32:64]
        span = int.from_bytes(raw[28:32], "little") if len(raw) >= 64 else 0
        if kind == KIND_SIGNED_MERGE_V5:
            tag, need, blocks = TAG_SIGNED_MERGE, 224, 2
        elif kind == KIND_SIGNED_DERIVE_V6:
            tag, need, blocks = TAG_SIGNED_DERIVE, 192, 1
        else:
            raise _refuse("not a retired signed equation frame", "pile_record.kind", offset + 32)
        if span != blocks or len(raw) != blocks * 256:
            raise _refuse(f"retired signed equation frame must span exactly {blocks} block(s)",
                          "pile_record.span", offset + 28)
        if any(raw[64 + need:]):
            raise _refuse("nonzero reserved byte after the signed fields",
                          "pile_record.reserved", offset + 64 + need)
        return cls.from_bytes(bytes([tag]) + raw[64:64 + need])

    @property
    def tag(self) -> int:
        return TAG_SIGNED_MERGE if self.equation.merge else TAG_SIGNED_DERIVE

    def to_bytes(self) -> bytes:
        return (bytes([self.tag]) + self.equation.payload + self.author + self.sig_r
                + self.sig_s)

    def signing_transcript(self) -> bytes:
        e = self.equation
        if e.merge:
            return SIGNED_MERGE_DOMAIN + SEMANTIC_SIGNED_MERGE + self.author + e.payload
        return SIGNED_DERIVE_DOMAIN + SEMANTIC_SIGNED_DERIVE + self.author + e.payload

    def verify_strict(self) -> None:
        """Historical authorship only; raises :class:`RecordRefused`."""
        if not crypto.key_is_valid(self.author):
            raise _refuse("retired equation has an invalid public key",
                          "dense_record.payload.author")
        if not crypto.verify_strict(self.author, self.signing_transcript(),
                                    self.sig_r + self.sig_s):
            raise _refuse("retired equation signature is invalid",
                          "dense_record.payload.sig_r")

    def fingerprint(self) -> bytes:
        kind = SEMANTIC_SIGNED_MERGE if self.equation.merge else SEMANTIC_SIGNED_DERIVE
        return crypto.blake3(kind + self.to_bytes()[1:])

    def blob_references(self) -> list[bytes]:
        return self.equation.blob_references()


def sign_legacy_equation(seed: bytes, equation: LegacyUnsignedEquation) -> LegacySignedEquation:
    """Test and migration-fixture helper: sign a payload-only equation under the retired
    ``.transcript`` domain (fresh piles never write these)."""
    unsigned = LegacySignedEquation(equation, crypto.public_key(seed), bytes(32), bytes(32))
    sig = crypto.sign(seed, unsigned.signing_transcript())
    return LegacySignedEquation(equation, unsigned.author, sig[:32], sig[32:])


def legacy_unsigned_from_record(name: str, value) -> LegacyUnsignedEquation | None:
    """The unsigned equation a replayed record carries, or None: current-frame unsigned
    kinds, the 36-byte-envelope MERGE V4 / DERIVE V5 and unenveloped MERGE V4 (spec: "are
    recognized as the same unsigned evidence rather than current equations")."""
    if name in ("unsigned_merge_body", "env_merge_body", "v4_merge"):
        return LegacyUnsignedEquation(True, value.collection, value.low, value.high,
                                      value.result)
    if name in ("unsigned_derive_body", "env_derive_v5_body"):
        return LegacyUnsignedEquation(False, value.target, value.input, value.output)
    return None


def dense_payload(name: str, v: Any) -> bytes:
    """The record's canonical dense payload (what a fingerprint hashes after the kind)."""
    if name == "merge_v6_body":
        return g.encode_dense_witness_merge(g.DenseWitnessMerge(
            v.collection, v.low, v.high, v.result, v.low_witness, v.high_witness, v.author,
            v.sig_r, v.sig_s))
    if name == "derive_v7_body":
        return g.encode_dense_witness_derive(g.DenseWitnessDerive(
            v.target, v.input, v.output, v.input_witness, v.author, v.sig_r, v.sig_s))
    return g.encode_dense_commit(g.DenseCommit(v.collection, v.data, v.metadata, v.author,
                                               v.sig_r, v.sig_s))

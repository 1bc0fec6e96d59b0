"""Ed25519 key validity, strict verification, transcripts and fingerprints (facts.md §4).

Signing and verification use pynacl (libsodium). ed25519-dalek's ``verify_strict`` also
rejects non-canonical S and small-order R or A, so those checks are made here explicitly
rather than trusted to a library default. Transcripts and dense payloads are encoded by
the generated codecs; only curve arithmetic lives in this module.
"""

from __future__ import annotations

import nacl.exceptions
import nacl.signing

from ...generated import pile as g
from .. import checksums

_P = 2**255 - 19
_L = 2**252 + 27742317777372353535851937790883648493
_D = (-121665 * pow(121666, _P - 2, _P)) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)


def _decompress(key: bytes) -> tuple[int, int] | None:
    # Curve arithmetic on a key, not a layout field: RFC 8032 §5.1.3 point decoding.
    y = int.from_bytes(key, "little") & ((1 << 255) - 1)
    sign = key[31] >> 7
    if y >= _P:
        return None
    u = (y * y - 1) % _P
    v = (_D * y * y + 1) % _P
    x2 = u * pow(v, _P - 2, _P) % _P
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P:
        x = x * _SQRT_M1 % _P
        if (x * x - x2) % _P:
            return None
    if (x & 1) != sign:
        x = (_P - x) % _P
    return x, y


def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    (x1, y1), (x2, y2) = a, b
    t = _D * x1 * x2 * y1 * y2 % _P
    x3 = (x1 * y2 + x2 * y1) * pow(1 + t, _P - 2, _P) % _P
    y3 = (y1 * y2 + x1 * x2) * pow(1 - t, _P - 2, _P) % _P
    return x3, y3


def is_canonical(key: bytes) -> bool:
    """y (top bit of byte 31 cleared, little-endian) < 2^255 - 19."""
    return len(key) == 32 and (int.from_bytes(key, "little") & ((1 << 255) - 1)) < _P


def is_small_order(key: bytes) -> bool | None:
    """True when [8]P is the identity (dalek ``is_weak``); None when it is not a point."""
    pt = _decompress(key)
    if pt is None:
        return None
    for _ in range(3):
        pt = _add(pt, pt)
    return pt == (0, 1)


def key_is_valid(key: bytes) -> bool:
    """facts.md §4.5: canonical and not weak (and a curve point at all)."""
    return is_canonical(key) and is_small_order(key) is False


def verify_strict(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """Ed25519 verification with dalek ``verify_strict``'s extra refusals."""
    if len(signature) != 64 or not key_is_valid(public_key):
        return False
    r, s = signature[:32], signature[32:]
    if int.from_bytes(s, "little") >= _L or is_small_order(r) is not False:
        return False
    try:
        nacl.signing.VerifyKey(public_key).verify(message, signature)
    except (nacl.exceptions.BadSignatureError, ValueError, TypeError):
        return False
    return True


def public_key(seed: bytes) -> bytes:
    return bytes(nacl.signing.SigningKey(seed).verify_key)


def sign(seed: bytes, message: bytes) -> bytes:
    """Deterministic Ed25519 signature (64 bytes: R then S)."""
    return nacl.signing.SigningKey(seed).sign(message).signature


def blake3(data: bytes) -> bytes:
    return checksums.blake3_256(data)


EMPTY_ARCHIVE = blake3(b"")  # "no metadata": the handle of the empty SimpleArchive


# -- transcripts (the exact signed bytes) -------------------------------------------------

def commit_transcript(author: bytes, collection: bytes, data: bytes, metadata: bytes) -> bytes:
    return g.encode_commit_transcript(g.CommitTranscript(author, collection, data, metadata))


def merge_transcript(author: bytes, collection: bytes, low: bytes, high: bytes, result: bytes,
                     low_witness: bytes, high_witness: bytes) -> bytes:
    return g.encode_merge_endorsement(g.MergeEndorsement(
        author, collection, low, high, result, low_witness, high_witness))


def derive_transcript(author: bytes, target: bytes, input: bytes, output: bytes,
                      input_witness: bytes) -> bytes:
    return g.encode_derive_endorsement(g.DeriveEndorsement(author, target, input, output,
                                                           input_witness))


# -- dense payloads and fingerprints (§4.4) -----------------------------------------------

def commit_fingerprint(b: g.CommitBody | g.V4Commit | g.EnvCommitBody) -> bytes:
    dense = g.encode_dense_commit(g.DenseCommit(b.collection, b.data, b.metadata, b.author,
                                                b.sig_r, b.sig_s))
    return blake3(_semantic("commit_transcript") + dense)


def merge_fingerprint(b: g.MergeV6Body) -> bytes:
    dense = g.encode_dense_witness_merge(g.DenseWitnessMerge(
        b.collection, b.low, b.high, b.result, b.low_witness, b.high_witness, b.author,
        b.sig_r, b.sig_s))
    return blake3(_semantic("merge_endorsement") + dense)


def derive_fingerprint(b: g.DeriveV7Body) -> bytes:
    dense = g.encode_dense_witness_derive(g.DenseWitnessDerive(
        b.target, b.input, b.output, b.input_witness, b.author, b.sig_r, b.sig_s))
    return blake3(_semantic("derive_endorsement") + dense)


def _semantic(record: str) -> bytes:
    from .kinds import _const
    return _const(record, "semantic_kind")


def commit_signature_ok(b) -> bool:
    msg = commit_transcript(b.author, b.collection, b.data, b.metadata)
    return verify_strict(b.author, msg, b.sig_r + b.sig_s)


def merge_signature_ok(b: g.MergeV6Body) -> bool:
    msg = merge_transcript(b.author, b.collection, b.low, b.high, b.result, b.low_witness,
                           b.high_witness)
    return verify_strict(b.author, msg, b.sig_r + b.sig_s)


def derive_signature_ok(b: g.DeriveV7Body) -> bool:
    msg = derive_transcript(b.author, b.target, b.input, b.output, b.input_witness)
    return verify_strict(b.author, msg, b.sig_r + b.sig_s)

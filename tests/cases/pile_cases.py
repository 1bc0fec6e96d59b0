"""Pile golden fixtures as field values: every record form (facts.md §1-§5), the 97-byte
WantRequest keys, dense encodings, transcripts, and whole-file piles.

``write.py`` encodes each case into ``fixtures/pile/<name>.hex``; ``bad_cases()`` are
whole files a reader must refuse (torn last record, 16 bytes of A5), written to
``fixtures/pile/bad/`` with the error they must raise. Signatures are made with the
facts.md §8.1 signing key (07 x 32) and are deterministic.
"""

from __future__ import annotations

from bytewright.generated import pile as g
from bytewright.runtime.pile import crypto, kinds
from bytewright.runtime.pile.store import sign_proof

SEED = bytes([7]) * 32
PK = crypto.public_key(SEED)
TS = 1700000000000
MAGIC = kinds.MAGIC_HEAD
ENV = kinds.ENVELOPE_MARKER
M = kinds.LEGACY_MARKERS
ZERO_EDGE = g.ProofEdge(bytes(32), bytes(32), bytes(64))


def b(n: int) -> bytes:
    """32 bytes of ``n`` (facts.md §8.1's collection(b) / hash(b))."""
    return bytes([n]) * 32


def h16(n: int) -> bytes:
    return bytes([n]) * 16


def cur(kind: bytes, body, span: int = 1) -> g.PileRecord:
    return g.PileRecord(MAGIC, g.FrameRest(span, kind, body))


def env(kind: bytes, body, span: int = 1) -> g.PileRecord:
    return g.PileRecord(ENV, g.Envelope36Rest(kind, span, body))


def legacy(form: str, value) -> g.PileRecord:
    return g.PileRecord(M[form], value)


def blob(payload: bytes, ts: int = TS) -> g.PileRecord:
    n = len(payload)
    return cur(kinds.KIND_BLOB, g.BlobBody(g.BlobHead(ts, n, crypto.blake3(payload)),
                                           g.BlobData(payload)), 1 + (n + 255) // 256)


def commit(coll: bytes = b(1), data: bytes = b(2), meta: bytes = b(3)) -> g.PileRecord:
    sig = crypto.sign(SEED, crypto.commit_transcript(PK, coll, data, meta))
    return cur(kinds.KIND_COMMIT, g.CommitBody(coll, data, meta, PK, sig[:32], sig[32:]))


def merge_v6() -> g.PileRecord:
    sig = crypto.sign(SEED, crypto.merge_transcript(PK, b(1), b(4), b(5), b(6), b(7), b(8)))
    return cur(kinds.KIND_MERGE_V6, g.MergeV6Body(b(1), b(4), b(5), b(6), b(7), b(8), PK,
                                                  sig[:32], sig[32:]), 2)


def derive_v7() -> g.PileRecord:
    sig = crypto.sign(SEED, crypto.derive_transcript(PK, b(1), b(2), b(3), b(4)))
    return cur(kinds.KIND_DERIVE_V7, g.DeriveV7Body(b(1), b(2), b(3), b(4), PK,
                                                    sig[:32], sig[32:]), 2)


def want(request: g.WantRequest) -> g.PileRecord:
    return cur(kinds.KIND_WANT_V3, g.WantV3Body(request.tag, request.request))


WANT_BLOB = g.WantRequest(g.WantTag.Blob, g.WantBlob(b(0x41)))
WANT_MERGE = g.WantRequest(g.WantTag.Merge, g.WantMerge(b(1), b(2), b(3)))
WANT_DERIVE = g.WantRequest(g.WantTag.Derive, g.WantDerive(b(1), b(2)))


def proof(n_edges: int) -> g.PileRecord:
    """A signed proof v5 with ``n_edges`` edges (root 01x32, delegates 02.., resource 09)."""
    chain = [(b(4 + i), bytes([2 + i]) * 32) for i in range(n_edges)]
    body = sign_proof(b(9), b(1), chain)
    span = (32 + 96 + 128 * n_edges + 255) // 256
    pad = (span * 256 - 128 - 128 * n_edges) // 128
    return cur(kinds.KIND_PROOF_V5, g.ProofV5Body(body.resource, body.root,
                                                  list(body.edges) + [ZERO_EDGE] * pad), span)


def kind_of(record: str) -> bytes:
    return kinds.FRAME_KINDS[record]


def retired_kind(hex_handle: str) -> bytes:
    return bytes.fromhex(hex_handle)


# Second handles of kinds that share a body record with another handle (facts §2.2).
RETRACT_BLOB_WANT = retired_kind("ACCB531FC7489357C40FCEF0DDE8BD9088F2AC1924A652EA211ADD5C30B95B46")
RETRACT_TYPED_WANT = retired_kind("A57C866A83A90635090A947D92464B19D9F898C0C961AB7A91C79A979F9F1483")
MERGE_V5_SIGNED = retired_kind("9D9B962D46FA42168AB3A11FB367AC14692D4F51B5190196F2BDB08D5BC2BA07")
UNKNOWN_KIND = bytes(range(0xC0, 0xE0))  # no description hashes to this: an opaque kind



def proof_v1() -> g.PileRecord:
    content = g.ProofV1Content(crypto.public_key(b(1)),
                               [g.ProofV1Edge(b(4) + b(5) + b(6), crypto.public_key(b(2)))])
    return cur(kind_of("proof_v1_body"), g.ProofV1Body(160, g.ProofV1Data(content, bytes(0))), 1)


def proof_v2() -> g.PileRecord:
    edge = g.ProofV2Edge(h16(0x0A), 1, 0, 0, crypto.public_key(b(2)), bytes(64))
    content = g.ProofV2Content(b(9), crypto.public_key(b(1)), [edge])  # 80 + 145 = 225 bytes
    span = (96 + 225 + 255) // 256
    return cur(kind_of("proof_v2_body"),
               g.ProofV2Body(225, g.ProofV2Data(content, bytes(span * 256 - 96 - 225))), span)


def proof_v3() -> g.PileRecord:
    """Retired proof v3 (161-byte edges): one edge, 80 + 161 = 241-byte body, span 2."""
    edge = g.ProofV3Edge(b(4), 3, 0, 0, crypto.public_key(b(2)), bytes(64))
    content = g.ProofV3Content(h16(0x0C), b(9), crypto.public_key(b(1)), [edge])
    span = (96 + 241 + 255) // 256
    return cur(kind_of("proof_v3_body"),
               g.ProofV3Body(241, g.ProofV3Data(content, bytes(span * 256 - 96 - 241))), span)


def env_blob(payload: bytes) -> g.PileRecord:
    n = len(payload)
    return env(M["v3_blob"], g.EnvBlobBody(TS, n, crypto.blake3(payload), g.BlobData(payload)),
               1 + (n + 255) // 256)


def v1_blob(payload: bytes) -> g.PileRecord:
    return legacy("v1_blob", g.V1Blob(TS, len(payload), crypto.blake3(payload),
                                      g.V1BlobData(payload)))


def record_cases():
    """(name, value, doc) of every record form, each a ``pile_record``."""
    yield "blob_hello", blob(b"hello"), "facts.md 8.2: blob 'hello', ts 1700000000000, span 2"
    yield "blob_empty", blob(b""), "an empty blob: span 1, no payload block"
    yield "blob_256", blob(bytes(range(256))), "a 256-byte blob fills its payload block exactly (span 2)"
    yield "blob_257", blob(b"\xab" * 257), "257 bytes need span 3"
    yield "commit_golden", commit(), "facts.md 8.1/8.2: the golden COMMIT (key 07x32; coll 01, data 02, meta 03)"
    yield "merge_v6", merge_v6(), "MERGE v6 witness-bound, span 2 (coll 01, low 04/wit 07, high 05/wit 08, result 06)"
    yield "derive_v7", derive_v7(), "DERIVE v7 witness-bound, span 2"
    yield "want_blob", want(WANT_BLOB), "facts.md 8.2: WANT Blob(41x32)"
    yield "want_merge", want(WANT_MERGE), "WANT Merge(coll 01, low 02, high 03)"
    yield "want_derive", want(WANT_DERIVE), "WANT Derive(target 01, input 02)"
    yield "proof_v5_one_edge", proof(1), "facts.md 8.2: one-edge proof v5 (root 01, delegate 02, resource 09, capability 04)"
    yield "proof_v5_two_edges", proof(2), "two-edge proof v5: span 2, 128 zero bytes after the body"
    yield "pin_head", cur(kinds.KIND_PIN_HEAD, g.PinHeadBody(h16(0x11), b(0x22))), "legacy pin head in the current frame"
    yield "pin_tombstone", cur(kinds.KIND_PIN_TOMBSTONE, g.PinTombstoneBody(h16(0x11))), "legacy pin tombstone in the current frame"
    yield "retired_blob_want_assert", cur(kind_of("retired_blob_want_body"), g.RetiredBlobWantBody(b(0x41))), "retired weak pin (EC1C...)"
    yield "retired_blob_want_retract", cur(RETRACT_BLOB_WANT, g.RetiredBlobWantBody(b(0x41))), "retired weak unpin (ACCB...)"
    yield "retired_typed_want_assert", cur(kind_of("retired_typed_want_body"), g.RetiredTypedWantBody(3, b(1), b(2), b(3))), "retired typed want, tag 3 allowed here"
    yield "retired_typed_want_retract", cur(RETRACT_TYPED_WANT, g.RetiredTypedWantBody(2, b(1), b(2), b(3))), "retired typed want retract"
    yield "unsigned_merge", cur(kind_of("unsigned_merge_body"), g.UnsignedMergeBody(b(1), b(2), b(3), b(4))), "retired unsigned MERGE (0CEE...)"
    yield "unsigned_derive", cur(kind_of("unsigned_derive_body"), g.UnsignedDeriveBody(b(1), b(2), b(3))), "retired unsigned DERIVE (7ACE...)"
    yield "peer", cur(kind_of("peer_body"), g.PeerBody(b(0x31), b(0x32))), "retired PEER"
    yield "store_scope", cur(kind_of("store_scope_body"), g.StoreScopeBody(b(0x31))), "retired STORE_SCOPE"
    yield "artifact_offer", cur(kind_of("artifact_offer_body"), g.ArtifactOfferBody(bytes(range(192)))), "retired artifact offer: body never inspected"
    yield "proof_v1", proof_v1(), "retired proof v1: root + one 128-byte edge (160-byte body)"
    yield "proof_v2", proof_v2(), "retired proof v2: 225-byte body (one 145-byte edge), span 2"
    yield "proof_v3", proof_v3(), "retired proof v3: 241-byte body (one 161-byte edge), span 2; inert"
    yield "opaque_unknown_kind", cur(UNKNOWN_KIND, bytes(range(256)) + bytes(192), 2), "an unknown kind: opaque, crossed at its span (2)"
    yield "opaque_merge_v5", cur(MERGE_V5_SIGNED, b(1) * 7 + bytes(224), 2), "signed MERGE v5 (payload-only): not matched, opaque"
    yield "v1_blob", v1_blob(b"hello, v1"), "V1 blob (v0.46.4): 64-byte granularity, payload at 64"
    yield "v1_branch", legacy("v1_branch", g.V1Branch(h16(0x11), b(0x22))), "V1 branch"
    yield "v1_tombstone", legacy("v1_tombstone", g.V1Tombstone(h16(0x11), bytes(32))), "V1 tombstone"
    yield "v3_blob", legacy("v3_blob", g.V3Blob(TS, 3, crypto.blake3(b"abc"), bytes(192), g.BlobData(b"abc"))), "unenveloped V3 blob"
    yield "v3_branch", legacy("v3_branch", g.V3Branch(h16(0x11), b(0x22), bytes(192))), "unenveloped V3 branch"
    yield "v3_tombstone", legacy("v3_tombstone", g.V3Tombstone(h16(0x11), bytes(224))), "unenveloped V3 tombstone"
    yield "v3_weak_pin", legacy("v3_blob_want", g.V3BlobWant(b(0x41), bytes(208))), "V3 weak pin (retired WANT)"
    yield "v3_local_cell", legacy("v3_local_cell", g.V3LocalCell(h16(0x12), b(0x13) + bytes(192))), "V3 local cell replace: opaque legacy"
    yield "v3_collection_definition", legacy("v3_collection_definition", g.V3CollectionDefinition(h16(1), h16(2), h16(3))), "V3 collection definition"
    yield "v3_commit", legacy("v3_commit", g.V3Commit(h16(1), b(2), b(3), PK, b(5), b(6))), "V3 commit (inert)"
    yield "v3_merge", legacy("v3_merge", g.V3Merge(h16(1), b(2), b(3), b(4))), "V3 merge (inert)"
    yield "v3_derive", legacy("v3_derive", g.V3Derive(h16(1), h16(2), b(3), b(4))), "V3 derive (inert)"
    c = commit().record.body
    yield "v4_commit", legacy("v4_commit", g.V4Commit(c.collection, c.data, c.metadata, c.author, c.sig_r, c.sig_s)), "V4 commit: decoded as a current COMMIT (golden signature)"
    yield "v4_merge", legacy("v4_merge", g.V4Merge(b(1), b(2), b(3), b(4))), "V4 merge (unsigned evidence)"
    yield "v4_derive", legacy("v4_derive", g.V4Derive(b(1), b(2), b(3), b(4))), "V4 derive (retired)"
    yield "env_blob", env_blob(b"enveloped"), "36-byte-envelope blob"
    yield "env_branch", env(M["v3_branch"], g.EnvBranchBody(h16(0x11), b(0x22))), "36-byte-envelope branch"
    yield "env_tombstone", env(M["v3_tombstone"], g.EnvTombstoneBody(h16(0x11))), "36-byte-envelope tombstone"
    yield "env_weak_pin", env(M["v3_blob_want"], g.EnvBlobWantBody(b(0x41))), "36-byte-envelope weak pin"
    yield "env_typed_want", env(kinds.ENVELOPE_KINDS["env_typed_want_body"], g.EnvTypedWantBody(2, b(1), b(2), b(3))), "36-byte-envelope typed want"
    yield "env_commit", env(M["v4_commit"], g.EnvCommitBody(c.collection, c.data, c.metadata, c.author, c.sig_r, c.sig_s)), "36-byte-envelope V4 commit"
    yield "env_merge", env(M["v4_merge"], g.EnvMergeBody(b(1), b(2), b(3), b(4))), "36-byte-envelope V4 merge"
    yield "env_derive_v4", env(M["v4_derive"], g.EnvDeriveV4Body(b(1), b(2), b(3), b(4))), "36-byte-envelope V4 derive"
    yield "env_derive_v5", env(kinds.ENVELOPE_KINDS["env_derive_v5_body"], g.EnvDeriveV5Body(b(1), b(2), b(3))), "36-byte-envelope V5 derive"
    yield "env_opaque_local_cell", env(M["v3_local_cell"], h16(0x12) + b(0x13) + bytes(172)), "36-byte-envelope local cell: opaque"


def mixed_pile() -> g.PileFile:
    """facts.md/issue 12 whole file: V1 records, a 36-byte-envelope record, current records
    and an opaque unknown kind."""
    recs = dict((name, value) for name, value, _ in record_cases())
    return g.PileFile([recs["v1_blob"], recs["v1_branch"], recs["env_blob"], recs["blob_hello"],
                       recs["commit_golden"], recs["want_blob"], recs["proof_v5_one_edge"],
                       recs["opaque_unknown_kind"], recs["blob_empty"]])


def cases():
    for name, value, doc in record_cases():
        yield name, "pile_record", {}, value, doc
    yield "want_request_blob", "want_request", {}, WANT_BLOB, "97-byte WantRequest key: Blob(41x32)"
    yield "want_request_merge", "want_request", {}, WANT_MERGE, "97-byte WantRequest key: Merge"
    yield "want_request_derive", "want_request", {}, WANT_DERIVE, "97-byte WantRequest key: Derive"
    c = commit().record.body
    yield "commit_transcript_golden", "commit_transcript", {}, g.CommitTranscript(PK, b(1), b(2), b(3)), "facts.md 8.1 COMMIT transcript (188 bytes)"
    yield "merge_endorsement", "merge_endorsement", {}, g.MergeEndorsement(PK, b(1), b(4), b(5), b(6), b(7), b(8)), "MERGE v6 transcript (280 bytes)"
    yield "derive_endorsement", "derive_endorsement", {}, g.DeriveEndorsement(PK, b(1), b(2), b(3), b(4)), "DERIVE v7 transcript (217 bytes)"
    T = g.DenseTag
    dense = [(T.Commit, g.DenseCommit(c.collection, c.data, c.metadata, c.author, c.sig_r, c.sig_s)),
             (T.UnsignedMerge, g.DenseUnsignedMerge(b(1), b(2), b(3), b(4))),
             (T.UnsignedDerive, g.DenseUnsignedDerive(b(1), b(2), b(3))),
             (T.SignedMerge, g.DenseSignedMerge(b(1), b(2), b(3), b(4), PK, b(5), b(6))),
             (T.SignedDerive, g.DenseSignedDerive(b(1), b(2), b(3), PK, b(5), b(6))),
             (T.WitnessMerge, g.DenseWitnessMerge(b(1), b(4), b(5), b(6), b(7), b(8), PK, b(5), b(6))),
             (T.WitnessDerive, g.DenseWitnessDerive(b(1), b(2), b(3), b(4), PK, b(5), b(6)))]
    for tag, payload in dense:
        yield f"dense_{tag.value}_{tag.name.lower()}", "dense_record", {}, g.DenseRecord(tag, payload), f"dense tag {tag.value} ({tag.name}): tag byte || payload"
    yield "pile_mixed", "pile_file", {}, mixed_pile(), "whole pile: V1 blob + branch, envelope blob, current blob/commit/WANT/proof, opaque kind, empty blob"
    yield "pile_empty", "pile_file", {}, g.PileFile([]), "the empty pile (an empty file)"


def bad_cases():
    """(name, bytes, expected error, expected offset, doc): whole files a reader refuses."""
    data = g.encode_pile_file(mixed_pile())
    last = len(data) - 256  # the trailing empty blob is one block
    yield ("pile_mixed_torn_last", data[:-100], "CorruptPile", last,
           "pile_mixed with its last record torn (100 bytes short): CorruptPile(valid_length = its start)")
    yield ("pile_mixed_trailing_a5", data + b"\xa5" * 16, "UnsupportedRecord", len(data),
           "pile_mixed then 16 bytes of A5: UnsupportedRecord(offset = old length, marker = A5 x 16)")


def bad_fixture_text(data: bytes, error: str, offset: int, doc: str) -> str:
    """A refused whole file: ``#: expect: ERROR OFFSET`` then the bytes, 32 a line.

    These live in fixtures/pile/bad/, outside ``bytewright check`` (which requires every
    fixture to decode); tests/test_pile.py opens each with the runtime instead."""
    lines = [f"# {doc}", f"#: expect: {error} {offset}"]
    lines += [data[i:i + 32].hex() for i in range(0, len(data), 32)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # python tests/cases/pile_cases.py: (re)write the bad fixtures
    from pathlib import Path

    out = Path(__file__).resolve().parents[2] / "fixtures" / "pile" / "bad"
    out.mkdir(parents=True, exist_ok=True)
    for name, data, error, offset, doc in bad_cases():
        (out / f"{name}.hex").write_text(bad_fixture_text(data, error, offset, doc))
        print(f"pile/bad/{name}.hex {len(data)} bytes")

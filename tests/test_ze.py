"""ZE: conformance round trips, runtime semantics (replay, runs, segments, graph, artifacts)
and bad input (only project errors, each named rule with its own message)."""

from __future__ import annotations

import copy
import hashlib
import re
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bytewright.generated import ze
from bytewright.review.checks import FIXTURE_DIR, parse_fixture
from bytewright.runtime.checksums import xxh3_64
from bytewright.runtime.errors import (
    BytewrightError,
    ChecksumError,
    ConstraintError,
    DecodeError,
    TruncatedError,
    UnsupportedError,
)
from bytewright.runtime.ze import artifacts, envelope, graph, registry, segment, wal

from .conftest import ROOT, load_cases

CONFORMANCE = ROOT.parent / "shared" / "conformance" / "ze" / "format"
CASES = list(load_cases("ze_cases").cases())
BY_NAME = {c[0]: c for c in CASES}
REFUSED = {"manifest_v1", "manifest_clustering_ranges_v1"}  # rejected inputs, tested below


def _digests() -> dict[str, tuple[str, int]]:
    """fixtures/ze/upstream.sha256: name -> (sha256, size) of each upstream corpus file."""
    out = {}
    for line in (FIXTURE_DIR / "ze" / "upstream.sha256").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            digest, size, name = line.split()
            out[name] = (digest, int(size))
    return out


DIGESTS = _digests()


def upstream(name: str) -> bytes | None:
    """The upstream corpus file, where the corpus is at hand (it is not part of a clone)."""
    path = CONFORMANCE / f"{name}.hex"
    if not path.exists():
        return None
    return bytes.fromhex("".join(path.read_text().split()))


def fixture(name: str) -> bytes:
    return parse_fixture(FIXTURE_DIR / "ze" / f"{name}.hex").data


def golden(name: str) -> bytes:
    return upstream(name) or fixture(name)


def same_as_upstream(name: str, data: bytes) -> bool:
    digest, size = DIGESTS[name]
    return len(data) == size and hashlib.sha256(data).hexdigest() == digest


# -- conformance ----------------------------------------------------------------------------

def test_one_case_per_upstream_file():
    assert set(DIGESTS) - REFUSED == set(BY_NAME)


def test_digests_match_the_corpus_where_it_is_at_hand():
    """The digest list is the corpus: same names, and each file hashes to its line."""
    if not CONFORMANCE.exists():
        pytest.skip("the upstream corpus is not beside this checkout; the digests stand in")
    have = {p.stem for p in CONFORMANCE.glob("*.hex")}
    assert have == set(DIGESTS)
    for name in sorted(have):
        assert same_as_upstream(name, upstream(name)), name


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_encoder_reproduces_upstream(name):
    _, record, params, value, _ = BY_NAME[name]
    data = ze.ENCODERS[record](value, **params)
    assert data == fixture(name)
    assert same_as_upstream(name, data)
    decoded, end = ze.DECODERS[record](data, **params)
    assert end == len(data) and decoded == value
    assert ze.CONSTRUCT_DECODERS[record](data, **params) == value
    assert ze.CONSTRUCT_ENCODERS[record](value, **params) == data


def _as_v1(data: bytes) -> bytes:
    """A manifest with family_version 1 at offset 10 (u16le), the rest unchanged."""
    return data[:10] + (1).to_bytes(2, "little") + data[12:]


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_v1_manifests_refused(name):
    data = upstream(name)
    if data is None:  # the same refusal on a v2 manifest relabelled v1
        data = _as_v1(fixture("manifest_v2"))
    assert int.from_bytes(data[10:12], "little") == 1
    with pytest.raises(UnsupportedError, match="version"):
        artifacts.read_manifest(data)
    with pytest.raises(UnsupportedError):
        ze.decode_manifest_file(data)


def test_field_values_match_facts():
    v, _ = ze.decode_wal_record(golden("wal_upsert_record_v1"))
    assert v.seq == 0x0102030405060708 and v.op == ze.WalOp.upsert_v1
    body = v.payload.body
    assert body.doc_id == 0x00112233445566778899AABBCCDDEEFF
    assert body.revision == 0x1122334455667788 and body.vector.values == [1.5, -2.25]
    v, _ = ze.decode_wal_record(golden("wal_upsert_bitmap_record_v2"))
    b = v.payload.body
    assert (b.text, b.ts, b.metadata) == ("bronze", -1234, b"meta")
    assert [(c.column_id, c.value.value.value) for c in b.columns] == [(9, 17), (10, "blue")]
    m = artifacts.read_manifest(golden("manifest_v2"))
    assert m.family_version == 2 and m.block.payload.generation == 21
    assert artifacts.epoch_id(m.block.payload.epochs[0]) == 0x4ABAE71C1BEFAFEC
    m3 = artifacts.read_manifest(golden("manifest_v3"))
    g = m3.block.payload.extensions[0].body.graph
    assert m3.family_version == 3 and g.absorbed_through == 37
    assert (g.state.store, g.state.generation, g.state.sequence) == (0xB, 9, 7)
    assert [(o.artifact_id, o.length, o.checksum) for o in g.objects] == [(0xD, 4096, 0x13),
                                                                         (0x11, 4096, 0x13)]
    f = artifacts.read_frame(golden("frame_v1"))
    assert f.flags == 0x10203040 and f.block.payload == b"golden"


# -- shared header and registry ---------------------------------------------------------

def test_registry_from_schema():
    assert registry.FAMILIES[10] == ("manifest", 2, (2, 3))
    assert registry.FAMILIES[11] == ("wal", 1, (1, 1))
    assert set(registry.FAMILIES) == set(range(1, 20))
    registry.check_version(10, 3)
    with pytest.raises(UnsupportedError, match="UnsupportedVersion"):
        registry.check_version(10, 1)
    with pytest.raises(UnsupportedError, match="UnknownFamily"):
        registry.check_version(99, 1)


def test_retired_scheme_refused_distinctly():
    hdr = bytearray(golden("segment_zero_header_v1"))
    for scheme, msg in ((3, "retired"), (5, "retired"), (6, "unknown (quant_scheme|QuantScheme)")):
        bad = bytearray(hdr)
        bad[56:58] = struct.pack("<H", scheme)
        bad[-8:] = xxh3_64(bytes(bad[:-8])).to_bytes(8, "little")
        with pytest.raises(ConstraintError, match=msg):
            ze.decode_segment_header(bytes(bad))
        with pytest.raises(DecodeError, match=msg):
            ze.construct_decode_segment_header(bytes(bad))
    with pytest.raises(ConstraintError, match="retired"):
        registry.check_scheme(3)


def test_shared_header_checks():
    data = golden("wal_empty_v1")
    with pytest.raises(TruncatedError):
        registry.read_header(data[:31])
    with pytest.raises(ConstraintError, match="magic"):
        registry.read_header(b"X" + data[1:])
    with pytest.raises(ConstraintError, match="wrong family"):
        registry.read_header(data, expected_family=10)
    bad = bytearray(data)
    bad[10] = 2
    with pytest.raises(UnsupportedError):
        registry.read_header(bytes(bad))


@pytest.mark.parametrize("offset,value,msg,err", [
    (8, 12, "wrong family id", ConstraintError),
    (10, 2, "unsupported wal version", UnsupportedError),  # the registry's message
    (12, 1, "flags must be zero", ConstraintError),
    (16, 48, "header_length must be exactly 40", ConstraintError),
    (24, 7, "file_length must be zero", ConstraintError),
])
def test_wal_header_rules(offset, value, msg, err):
    bad = bytearray(golden("wal_empty_v1"))
    bad[offset] = value
    if offset != 10:
        # the version is not the layout's to check: replay checks it against the
        # registry (rules: "readers accept only the registry's declared inclusive range")
        with pytest.raises(err, match=msg):
            ze.decode_wal_file_header(bytes(bad))
    r = wal.replay(bytes(bad))
    assert r.terminator == "invalid_header" and not r.records
    assert isinstance(r.error, err) and re.search(msg, str(r.error))


# -- WAL replay -------------------------------------------------------------------------------

def test_replay_clean_and_torn_tail():
    multi = golden("wal_multi_v1")
    r = wal.replay(multi)
    assert r.terminator == "clean" and [x.seq for x in r.records] == [1, 2, 3]
    torn = multi[:-3]  # wal_torn_tail_v1 (held back upstream): same bytes minus 3
    r = wal.replay(torn)
    assert (r.terminator, r.reason, r.corruption, len(r.records)) == (
        "corrupt", "BodyTruncated", "tail", 2)
    r = wal.replay(multi[:-len(multi) + 40 + 22 + 5])
    assert r.reason == "HeaderTruncated" and r.corruption == "tail"
    assert wal.replay(b"").terminator == "invalid_header"


def test_replay_middle_vs_tail_corruption():
    multi = bytearray(golden("wal_multi_v1"))
    multi[40 + 14] ^= 1  # record 1's checksum; record 2 is intact at its declared end
    r = wal.replay(bytes(multi))
    assert (r.reason, r.corruption, r.offset, r.records) == ("ChecksumMismatch", "middle", 40, [])
    last = bytearray(golden("wal_multi_v1"))
    last[-1] ^= 1
    r = wal.replay(bytes(last))
    assert (r.reason, r.corruption, len(r.records)) == ("ChecksumMismatch", "tail", 2)


@pytest.mark.parametrize("seqs,reason,kept", [
    ([2, 3], "FirstSequenceMismatch", 0),
    ([1, 3], "SequenceGap", 1),
    ([1, 2, 2], "SequenceRegression", 2),
])
def test_replay_sequence_rules(seqs, reason, kept):
    data = wal.wal_bytes(1, []) + b"".join(wal.frame(s, 1, b"") for s in seqs)
    r = wal.replay(data)
    assert (r.terminator, r.reason, len(r.records)) == ("corrupt", reason, kept)
    assert r.corruption == ("middle" if len(seqs) > kept + 1 else "tail")


def _upsert2(doc=1):
    return ze.OpUpsertV2(ze.UpsertFields(vector=True), doc, 1, ze.F32Vector([1.0]), None, None,
                         None, None)


def _member8(i, n):
    return (8, wal.encode_payload(8, ze.OpBatchMember(i, n, _upsert2(i))))


def _member11(i, n):
    return (11, wal.encode_payload(11, ze.OpMixedMember(i, n, 2, ze.OpDeleteV1(
        ze.PayloadV1Header(), [i + 1]))))


def _delete():
    return (2, wal.encode_payload(2, ze.OpDeleteV1(ze.PayloadV1Header(), [5])))


def _commit(recs, **kw):
    return wal.commit(wal.replay(wal.wal_bytes(1, recs)).records, **kw)


def test_batch_runs_commit_and_withhold():
    done, held = _commit([_member8(0, 2), _member8(1, 2), _delete(), _member8(0, 3),
                          _member8(1, 3)])
    assert [c.kind for c in done] == ["batch", "single"]
    assert [r.seq for r in held] == [4, 5]
    done, held = _commit([_member11(0, 2), _member11(1, 2)])
    assert [c.kind for c in done] == ["mixed"] and not held
    done, held = _commit([_member8(0, 2), _member8(0, 2), _member8(1, 2)])  # restart discards
    assert [len(c.records) for c in done] == [2] and not held
    done, _ = _commit([_member8(0, 2), _delete(), _member8(0, 2), _member8(1, 2)],
                      after_seq=2)
    assert [c.records[0].seq for c in done] == [3]


@pytest.mark.parametrize("recs", [
    [_member8(1, 2)],                                   # continuation without a run
    [_member8(0, 2), _member8(1, 2), _member8(1, 2)],   # after a complete run
    [_member8(0, 3), _member8(2, 3)],                   # skips a position
    [_member8(0, 3), _member8(1, 2)],                   # different count
    [_member8(0, 2), _member11(1, 2)],                  # 11 never continues an op-8 run
    [_member11(0, 2), _member8(1, 2)],                  # nor 8 an op-11 run
])
def test_orphan_members_fail_loudly(recs):
    with pytest.raises(wal.OrphanBatchMember, match="OrphanBatchMember"):
        _commit(recs)


def test_graph_free_build_refuses_ops_10_11():
    rec = golden("wal_graph_commit_v1")
    payload = rec[14:-8]
    with pytest.raises(ConstraintError, match="UnsupportedWalMutation"):
        _commit([(10, payload)], graph=False)
    done, _ = _commit([(10, payload)])
    assert isinstance(done[0].payloads[0], ze.GraphEnvelope)


def test_mixed_group_helper():
    assert wal.mixed_group_fits([10, 20], 40 + 42 + 52, fresh=True) == 134
    assert wal.mixed_group_fits([10, 20], 94, fresh=False) == 94
    with pytest.raises(wal.GroupTooLarge):
        wal.mixed_group_fits([10, 20], 133, fresh=True)
    with pytest.raises(wal.GroupTooLarge, match="overflow"):
        wal.mixed_group_fits([2**63, 2**63], 2**65, fresh=False)


# -- op payload rules: each refused with its own message -----------------------------------

def _payload(op, body) -> bytes:
    return wal.encode_payload(op, body)


def _diff_at(a: bytes, b: bytes) -> int:
    """The first offset where two same-length encodings differ: where a field lives."""
    assert len(a) == len(b) and a != b
    return next(i for i in range(len(a)) if a[i] != b[i])


def _reseal_framed(b: bytearray) -> bytes:
    """Re-seal a single-block framed artifact after a patch: a manifest's trailing ZGR3
    section checksum (over ``ZGR3``, section_len and body; located as runtime/ze/seals.py
    does), the block checksum (over the payload from byte 40) and then the whole-file
    checksum (facts \u00a72.2)."""
    body = bytes(b[40:-16])
    at = len(body)
    while (at := body.rfind(b"ZGR3", 0, at)) >= 0:
        if at + 16 <= len(body) and at + 16 + struct.unpack_from("<I", body, at + 4)[0] == len(body):
            b[40 + len(body) - 8:40 + len(body)] = xxh3_64(
                bytes(b[40 + at:40 + len(body) - 8])).to_bytes(8, "little")
            break
    b[-16:-8] = xxh3_64(bytes(b[40:-16])).to_bytes(8, "little")
    b[-8:] = xxh3_64(bytes(b[:-8])).to_bytes(8, "little")
    return bytes(b)


def _manifest_patch(payload, tweak, delta: int, fmt: str, old, new) -> bytes:
    """A manifest carrying a value its encoder refuses: encode the valid ``payload``, find
    the field by diffing against a valid copy changed by ``tweak`` (the field sits
    ``delta`` bytes from the first differing byte), overwrite it ``old`` -> ``new`` and
    re-seal every checksum covering it."""
    ok = artifacts.manifest_file(payload)
    other = copy.deepcopy(payload)
    tweak(other)
    at = _diff_at(ok, artifacts.manifest_file(other)) + delta
    bad = bytearray(ok)
    assert struct.unpack_from(fmt, bad, at)[0] == old
    struct.pack_into(fmt, bad, at, new)
    return _reseal_framed(bad)


def _bad(op, data, err, msg):
    with pytest.raises(err, match=msg):
        ze.decode_wal_payload(data, op=op)


def test_payload_rules():
    up = _payload(1, ze.OpUpsertV1(ze.PayloadV1Header(), 1, 2, ze.F32Vector([1.0])))
    _bad(1, b"\x02" + up[1:], UnsupportedError, r"payload version \(Version\)")
    _bad(1, up[:2] + b"\x01" + up[3:], ConstraintError, r"\(Flags\)")
    empty = up[:28] + b"\x00\x00\x00\x00"
    _bad(1, empty, ConstraintError, "EmptyVector")
    _, end = ze.decode_wal_payload(up + b"x", op=1)
    assert end == len(up)  # the record's payload_len section refuses the extra byte:
    framed = wal.frame(1, 1, up + b"x")
    with pytest.raises(ConstraintError, match="section size mismatch"):
        ze.decode_wal_record(framed)
    _bad(2, _payload(2, ze.OpDeleteV1(ze.PayloadV1Header(), [1]))[:4] + b"\0" * 4, ConstraintError,
         "EmptyDelete")
    edit = bytearray(_payload(3, ze.OpMetadataEditV1(ze.PayloadV1Header(), 1, 2, 3, ze.MetadataValue(
        ze.ValueKind.bool, ze.ValueBool(1)))))
    ok, _ = ze.decode_wal_payload(bytes(edit), op=3)
    assert ok.body.value.value.value == 1
    bad = bytearray(edit)
    bad[-1] = 2
    _bad(3, bytes(bad), ConstraintError, r"\(Boolean\)")
    bad = bytearray(edit)
    bad[33] = 1  # the 3 reserved bytes after value_kind
    _bad(3, bytes(bad), ConstraintError, "reserved bytes must be zero")
    bad = bytearray(edit)
    bad[36] = 2  # value_len 2 for a 1-byte Bool
    with pytest.raises(DecodeError):
        ze.decode_wal_payload(bytes(bad), op=3)
    bad = bytearray(edit)
    bad[32] = 9
    _bad(3, bytes(bad), ConstraintError, "unknown value_kind")
    u2 = bytearray(_payload(7, _upsert2()))
    u2[0] |= 0x20
    _bad(7, bytes(u2), ConstraintError, "undefined upsert_fields bits")
    text = _payload(7, ze.OpUpsertV2(ze.UpsertFields(text=True), 1, 1, None, "ok", None, None,
                                     None))
    assert ze.decode_wal_payload(text, op=7)[0].body.text == "ok"
    raw = bytearray(text)
    raw[-1] = 0xFF
    _bad(7, bytes(raw), ConstraintError, "utf-8|decode")
    null_col = _payload(7, ze.OpUpsertV2(ze.UpsertFields(columns=True), 1, 1, None, None, None,
                                         None, [ze.TypedColumn(1, ze.MetadataValue(
                                             ze.ValueKind.u64, ze.ValueU64(1)))]))
    bad = bytearray(null_col)
    bad[32], bad[33:41] = 0, b"\0" * 8  # kind Null, len 0, then 8 bytes extra
    with pytest.raises(DecodeError):
        ze.decode_wal_payload(bytes(bad[:41]), op=7)
    # the encoder refuses index >= count: encode a valid member, then patch index to 2
    ok = _payload(8, ze.OpBatchMember(1, 2, _upsert2()))
    assert ze.decode_wal_payload(ok, op=8)[0].body.index == 1
    at = _diff_at(ok, _payload(8, ze.OpBatchMember(0, 2, _upsert2())))  # the index field
    member = bytearray(ok)
    member[at:at + 4] = struct.pack("<I", 2)
    _bad(8, bytes(member), ConstraintError, "BatchPosition")
    mixed = bytearray(_payload(11, ze.OpMixedMember(0, 2, 2, ze.OpDeleteV1(ze.PayloadV1Header(),
                                                                             [1]))))
    mixed[8] = 1
    _bad(11, bytes(mixed), ConstraintError, "inner op must be 2, 7 or 10")


def test_prepared_mutation_golden_and_rules():
    hexs = ("010000000100000000000000000000000000000002000000000000000000000000000000030000000000"
            "000003000000000000000400000000000000050000000000000000000000010000000200010000000100"
            "000006000000000000000000000000000000")
    data = bytes.fromhex(hexs)
    v, end = ze.decode_wal_payload(data, op=9)
    b = v.body
    assert end == 102 and (b.binding.transaction, b.binding.final_generation) == (1, 5)
    assert b.inner.doc_ids == [6] and wal.encode_payload(9, b) == data
    bad = bytearray(data)
    bad[4] = 0
    _bad(9, bytes(bad), ConstraintError, "transaction id must be non-zero")
    bad = bytearray(data)
    bad[72] = 2
    _bad(9, bytes(bad), ConstraintError, "count must equal")


# -- framed artifacts -------------------------------------------------------------------------

def test_frame_rules():
    data = golden("frame_v1")
    with pytest.raises(ConstraintError, match="trailing|file_length"):
        artifacts.read_frame(data + b"\0")
    bad = bytearray(data)
    bad[40] ^= 1
    with pytest.raises(ChecksumError):
        artifacts.read_frame(bytes(bad))
    bad = bytearray(data)
    bad[16] = 40
    with pytest.raises(ConstraintError, match="header_length must be 32"):
        ze.decode_frame_file(bytes(bad))
    value = ze.FrameFile(0x10203040, ze.FrameBlock(b"golden"))
    assert ze.encode_frame_file(value) == data


def test_purge_intent():
    data = artifacts.purge_file(2, [0x00112233445566778899AABBCCDDEEFF])
    v = artifacts.read_purge(data)
    assert v.block.payload.token_id == 0x5107F4C1521F6F87 and len(data) == 56 + 32
    bad = bytearray(data)
    bad[40 + 12] = 1
    # facts §2.2 order: the whole-file checksum is checked before anything in the block
    with pytest.raises(ChecksumError, match="file_checksum"):
        artifacts.read_purge(bytes(bad))
    # re-seal both checksums: the block checksum covers the payload from byte 40 (facts
    # §2.2), and is verified before any payload field, so only then is "reserved" reached
    bad[-16:-8] = xxh3_64(bytes(bad[40:-16])).to_bytes(8, "little")
    bad[-8:] = xxh3_64(bytes(bad[:-8])).to_bytes(8, "little")
    with pytest.raises(ConstraintError, match="reserved"):
        artifacts.read_purge(bytes(bad))
    bad = bytearray(data)
    bad[40 + 1] ^= 1
    with pytest.raises(ChecksumError):
        artifacts.read_purge(bytes(bad))


def test_manifest_extension_rules():
    m = artifacts.read_manifest(golden("manifest_v3"))
    payload = m.block.payload
    assert artifacts.manifest_file(payload) == golden("manifest_v3")
    # v2 header with a ZGR3 section: refused
    # the encoder refuses ZGR3 under v2: encode the valid v3 file, patch the header's
    # family_version (ze_header offset 10) to 2 and re-seal the block and file checksums
    at = next(f["offset"] for f in ze.LAYOUT["ze_header"]["layouts"][0]["fields"]
              if f["name"] == "family_version")
    v2 = bytearray(ze.encode_manifest_file(ze.ManifestFile(3, ze.ManifestBlock(payload))))
    assert struct.unpack_from("<H", v2, at)[0] == 3
    v2[at:at + 2] = struct.pack("<H", 2)
    v2 = _reseal_framed(v2)
    with pytest.raises(ConstraintError, match="requires manifest v3"):
        artifacts.read_manifest(v2)
    # ZGR3 checksum
    data = bytearray(golden("manifest_v3"))
    data[-20] ^= 1  # the ZGR3 section checksum
    with pytest.raises(ChecksumError, match="xxh3_64"):
        ze.decode_manifest_file(bytes(data))
    g = payload.extensions[0].body.graph
    g.zgen = [ze.ZgenExtension(1, 40, None)]
    one = artifacts.read_manifest(artifacts.manifest_file(payload))
    assert one.block.payload.extensions[0].body.graph.zgen[0].counted_through == 40
    g.zgen = [ze.ZgenExtension(2, 40, [ze.ZgenRow(7, 1)])]
    assert artifacts.read_manifest(artifacts.manifest_file(payload))
    # the encoder refuses these: patch a valid encoding (zgen_extension: version u32 at 4,
    # counted_through u64 at 8; zgen_row: after_sequence u64 at 0, increment_count at 8)
    g.zgen = [ze.ZgenExtension(1, 40, None)]
    bad = _manifest_patch(payload, lambda q: setattr(
        q.extensions[0].body.graph.zgen[0], "counted_through", 41), -4, "<I", 1, 3)
    with pytest.raises(UnsupportedError, match="unknown graph generation boundary"):
        artifacts.read_manifest(bad)
    g.zgen = [ze.ZgenExtension(2, 40, [ze.ZgenRow(7, 1)])]
    bad = _manifest_patch(payload, lambda q: setattr(
        q.extensions[0].body.graph.zgen[0].rows[0], "after_sequence", 8), 8, "<Q", 1, 0)
    with pytest.raises(ConstraintError, match="positive"):
        artifacts.read_manifest(bad)


def test_manifest_presence_and_ranges():
    m = artifacts.read_manifest(golden("manifest_v2"))
    p = m.block.payload
    # the encoder refuses present=2: encode the valid file (present=1), locate the alias by
    # diffing against one with another embedding_epoch_id (alias offset 8), patch
    # present (alias offset 0) to 2 and re-seal the block and file checksums
    assert p.alias.present == 1
    ok = artifacts.manifest_file(p)
    other = copy.deepcopy(p)
    other.alias.embedding_epoch_id ^= 1
    at = _diff_at(ok, artifacts.manifest_file(other)) - 8
    bad = bytearray(ok)
    assert bad[at] == 1
    bad[at] = 2
    with pytest.raises(ConstraintError, match="unknown presence tag"):
        artifacts.read_manifest(_reseal_framed(bad))
    seg = p.segments[0]
    p.extensions = [ze.ManifestExtension(0x31525354, ze.Tsr1Body([ze.ClusteringRange(
        ze.RangeTag.bounded, -7, 14)]))]
    assert artifacts.read_manifest(artifacts.manifest_file(p)).family_version == 2
    # the encoder refuses these: patch a valid encoding (clustering_range: tag u8 at 0,
    # min_ts i64 at 8, max_ts i64 at 16)
    p.extensions[0].body.ranges[0] = ze.ClusteringRange(ze.RangeTag.bounded, 5, 6)
    bad = _manifest_patch(p, lambda q: setattr(q.extensions[0].body.ranges[0], "max_ts", 7),
                          0, "<q", 6, 1)  # bounded 5..1
    with pytest.raises(ConstraintError, match="min_ts <= max_ts"):
        artifacts.read_manifest(bad)
    p.extensions[0].body.ranges[0] = ze.ClusteringRange(ze.RangeTag.empty, 0, 0)
    bad = _manifest_patch(p, lambda q: setattr(q.extensions[0].body.ranges[0], "tag",
                                               ze.RangeTag.bounded), 16, "<q", 0, 1)  # empty 0..1
    with pytest.raises(ConstraintError, match="zero bounds"):
        artifacts.read_manifest(bad)
    # count 2 for the one segment: patch tsr1_body.count (u32, 4 bytes before ranges[0])
    p.extensions[0].body.ranges = [ze.ClusteringRange(ze.RangeTag.empty, 0, 0)]
    bad = _manifest_patch(p, lambda q: setattr(q.extensions[0].body.ranges[0], "tag",
                                               ze.RangeTag.bounded), -4, "<I", 1, 2)
    with pytest.raises(ConstraintError, match="TSR1 count"):
        artifacts.read_manifest(bad)
    assert seg.scheme == ze.QuantScheme.bit4


# -- segments ---------------------------------------------------------------------------------

ONE_ID = bytes.fromhex("000000000003" + "01" * 10)


def one_segment() -> bytes:
    pieces = [(k, golden(n)) for k, n in ((1, "columns_one_v1"), (2, "alive_one_v1"),
                                           (4, "vector_factors_bit4_v1"),
                                           (3, "vector_codes_odd_v1"),
                                           (5, "vector_rescore_one_v1"))]
    return segment.build_segment(ONE_ID, 1, 4, 3, pieces)


def test_rebuild_one_segment_trailer():
    data = one_segment()
    assert len(data) == 98400 and data[-8:].hex() == "e5878a13be8f58f6"
    assert data[:264] == golden("segment_one_header_v1")
    seg = segment.open_segment(data, expected_id=ONE_ID)
    seg.validate_all()
    assert seg.region(11).entries[0].chunk_index == 0
    assert list(seg.region(5).values) == [-1.0, -0.75, -0.5]
    assert seg.region(4).bit4[0]["scale"] == 1.0
    cols = seg.region(1)
    col, pos = [], 0
    for d in cols.defs:
        v, pos = ze.decode_column_data(cols.data, pos, type=int(d.type), rows=cols.row_count)
        col.append(v)
    assert pos == len(cols.data)
    assert col[0].i64s == [-7] and col[1].u64s == [9] and col[6].raw_strings == ["raw"]
    assert col[5].dictionary.strings == ["x"]


def test_segment_lazy_checksums_and_placement():
    data = bytearray(one_segment())
    data[16384 + 4] ^= 1  # inside the columns region: only that region fails, lazily
    seg = segment.open_segment(bytes(data))
    assert seg.region(2).row_count == 1
    with pytest.raises(ChecksumError, match="region checksum"):
        seg.region(1)
    with pytest.raises(ChecksumError):
        seg.validate_all()
    with pytest.raises(ConstraintError, match="segment id"):
        segment.open_segment(one_segment(), expected_id=b"\0" * 16)
    with pytest.raises(ConstraintError, match="file_length"):
        segment.open_segment(one_segment() + b"\0")


def test_unknown_region_kind_kept_and_skipped():
    hdr, _ = ze.decode_segment_header(golden("unknown_kind_header_v1"))
    assert [e.kind for e in hdr.regions][4] == 65000
    data = segment.build_segment(ONE_ID, 1, 4, 3, [(2, golden("alive_one_v1")), (65000, b"??")])
    seg = segment.open_segment(data)
    assert [e.kind for e in seg.unknown] == [65000] and 65000 not in seg.entries
    seg.validate_all()


def test_segment_header_rules():
    hdr = bytearray(golden("segment_zero_header_v1"))
    bad = bytearray(hdr)
    bad[40] ^= 1
    with pytest.raises(ChecksumError):
        ze.decode_segment_header(bytes(bad))
    bad = bytearray(hdr)
    bad[54] = 1
    with pytest.raises(ConstraintError, match="reserved"):
        ze.decode_segment_header(bytes(bad))
    with pytest.raises(ConstraintError, match="reserved"):
        ze.decode_segment_header(bytes(bad))
    bad = bytearray(hdr)
    bad[64 + 8] = 1  # region offset not 16 KiB aligned
    bad[-8:] = xxh3_64(bytes(bad[:-8])).to_bytes(8, "little")
    with pytest.raises(ConstraintError, match="16 KiB aligned"):
        ze.decode_segment_header(bytes(bad))


def test_stored_regions():
    v, _ = ze.decode_stored_metadata_region(golden("stored_metadata_one_v1"))
    assert v.ends == [4] and v.data == b"meta"
    v, _ = ze.decode_document_versions_region(golden("document_versions_one_v1"))
    assert v.rows == [ze.DocumentVersion(0x00112233445566778899AABBCCDDEEFF, 0x0102030405060708)]
    text = ze.StoredTextRegion(bytes([0b101]), [1, 1, 3], "Aé".encode())
    data = ze.encode_stored_text_region(text)
    assert ze.decode_stored_text_region(data)[0] == text


# -- graph node blocks --------------------------------------------------------------------------

def test_graph_blocks_numpy_view():
    data = golden("graph_node_blocks_d128_r44_FROZEN_v1")
    g = graph.open_blocks(data)
    assert g.view.base is not None and g.view.dtype.itemsize == 256  # zero-copy, stride 256
    assert [list(map(int, g.neighbours(i))) for i in range(4)] == [[3, 1, 2], [0], [3, 0], [2]]
    assert g.view["flags"].tolist() == [1, 2, 0, 0]
    assert g.view["factors"][0].tolist() == [1.25, 2.5, -0.75]
    nodes = []
    for i in range(4):
        blk, end = ze.decode_graph_node_block(data, i * 256, code_bytes=64, max_degree=44)
        assert end == (i + 1) * 256 and blk.degree == g.view["degree"][i]
        nodes.append(blk)
    assert graph.build_blocks(128, 128, 44, nodes) == data


@pytest.mark.parametrize("at,value,msg", [
    (1152 - 128 + 10, 1, "trailer flags must be zero"),
    (1152 - 128 + 24, 1, "stride must equal"),
    (1152 - 128 + 28, 5, "stride x node_count"),
    (1152 - 128 + 8, 2, "unsupported graph node block version"),
])
def test_graph_trailer_rules(at, value, msg):
    data = bytearray(golden("graph_node_blocks_d128_r44_FROZEN_v1"))
    data[at] = value
    with pytest.raises(DecodeError, match=msg):
        ze.decode_graph_node_blocks_region(bytes(data), region_len=len(data))


def test_graph_block_rules():
    data = bytearray(golden("graph_node_blocks_d128_r44_FROZEN_v1"))
    fix = bytes(data)

    def resum(buf):
        buf[1152 - 96:1152 - 88] = xxh3_64(bytes(buf[:1152 - 96])).to_bytes(8, "little")
        return bytes(buf)

    for off, val, msg in ((64 + 13, 4, "reserved graph flag"), (64 + 16 + 3 * 4, 9,
                                                                   "unused neighbour"),
                          (64 + 16, 7, "out of range"), (64 + 12, 45, "degree exceeds")):
        buf = bytearray(fix)
        buf[off] = val
        with pytest.raises(ConstraintError, match=msg):
            graph.open_blocks(resum(buf))
    buf = bytearray(fix)
    buf[5] ^= 1
    with pytest.raises(ChecksumError):
        graph.open_blocks(bytes(buf))


# -- family-19 envelope ---------------------------------------------------------------------------

def test_envelope_validation():
    payload = golden("wal_graph_commit_v1")[14:-8]
    env = envelope.validate(payload, expected_sequence=1)
    assert env.begin.payload.change_count == 1
    assert env.changes[0].payload.zgop.key.namespace == "n\x00é"
    with pytest.raises(ConstraintError, match="advance"):
        envelope.validate(payload, expected_sequence=2)
    bad = bytearray(payload)
    bad[-8 - 1544 - 16 + 8] ^= 1  # Commit digest, frame checksum repaired
    bad[-8:] = xxh3_64(bytes(bad[len(payload) - 1632:-8])).to_bytes(8, "little")
    with pytest.raises(ConstraintError, match="digest"):
        envelope.validate(bytes(bad))
    with pytest.raises(ChecksumError):
        envelope.validate(payload[:-1] + bytes([payload[-1] ^ 1]))


# -- bad input: only project errors ---------------------------------------------------------------

RECORDS = [(c[0], c[1], c[2]) for c in CASES]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(RECORDS), st.data())
def test_truncated_and_flipped_raise_project_errors(case, data):
    name, record, params = case
    blob = bytearray(fixture(name))
    cut = data.draw(st.integers(0, len(blob) - 1))
    try:
        _, end = ze.DECODERS[record](bytes(blob[:cut]), **params)
        assert end == cut  # records ending in repeat/size eos accept a shorter section
    except DecodeError:
        pass
    pos = data.draw(st.integers(0, len(blob) - 1))
    blob[pos] ^= 1 << data.draw(st.integers(0, 7))
    try:
        value, _ = ze.DECODERS[record](bytes(blob), **params)
    except DecodeError:
        return
    ze.ENCODERS[record](value, **params)  # a surviving flip (no checksum) still re-encodes


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(RECORDS), st.binary(max_size=300))
def test_random_bytes_raise_only_project_errors(case, blob):
    _, record, params = case
    try:
        ze.DECODERS[record](blob, **params)
    except BytewrightError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_runtime_never_leaks_foreign_errors(blob):
    r = wal.replay(golden("wal_empty_v1") + blob)
    assert r.terminator in ("clean", "corrupt")
    for fn in (artifacts.read_manifest, artifacts.read_frame, artifacts.read_purge,
               segment.open_segment, graph.open_blocks, envelope.validate):
        try:
            fn(blob)
        except BytewrightError:
            pass
    assert isinstance(np.zeros(1), np.ndarray)

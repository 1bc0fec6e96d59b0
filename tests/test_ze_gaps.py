"""ZE spec gaps, each with a regression test built from its reproduction:
trailing bytes after a WAL op payload, the envelope framing check for op 10 and inside an
op-11 mixed run, check order, the segment writer's region order, and the missing checks."""

from __future__ import annotations

import copy
import struct

import pytest

from bytewright.generated import ze
from bytewright.review.checks import FIXTURE_DIR, parse_fixture
from bytewright.runtime.checksums import xxh3_64
from bytewright.runtime.errors import ConstraintError, DecodeError
from bytewright.runtime.ze import envelope, wal


def fixture(name: str) -> bytes:
    return parse_fixture(FIXTURE_DIR / "ze" / f"{name}.hex").data


ENV1 = fixture("wal_graph_commit_v1")[14:-8]
DELETE_PAYLOAD = fixture("wal_delete_record_v1")[14:-8]


def _commit_all(buf: bytes, decode: bool):
    r = wal.replay(buf, decode=decode)
    assert r.terminator == "clean", r.reason
    return wal.commit(r.records)


# -- WAL: trailing bytes after an op payload ---------------------------------------------

@pytest.mark.parametrize("decode", [False, True])
def test_trailing_byte_after_op_payload_is_refused(decode):
    wal.decode_body(wal.Record(1, 2, DELETE_PAYLOAD, 40, 0))  # the intact payload decodes
    buf = wal.wal_bytes(1, [(2, DELETE_PAYLOAD + b"\x00")])
    with pytest.raises(ConstraintError, match="trailing bytes after the op payload") as exc:
        _commit_all(buf, decode)
    assert exc.value.offset == 40 + 14 + len(DELETE_PAYLOAD)


# -- WAL: the envelope framing check for op 10 and inside op 11 ---------------------------

def _bad_digest_envelope() -> bytes:
    env, _ = ze.decode_graph_envelope(ENV1)
    bad = copy.deepcopy(env)
    bad.commit.payload.digest ^= 1  # frame checksums are recomputed on encode: only the digest
    raw = ze.encode_graph_envelope(bad)
    assert len(raw) == len(ENV1) and raw != ENV1
    return raw


@pytest.mark.parametrize("decode", [False, True])
def test_op10_with_a_bad_commit_digest_does_not_commit(decode):
    assert _commit_all(wal.wal_bytes(1, [(10, ENV1)]), decode)[0][0].kind == "single"
    buf = wal.wal_bytes(1, [(10, _bad_digest_envelope())])
    with pytest.raises(ConstraintError, match="Commit digest") as exc:
        _commit_all(buf, decode)
    assert exc.value.offset is not None and "graph_envelope" in exc.value.path


@pytest.mark.parametrize("decode", [False, True])
def test_op11_mixed_run_runs_the_envelope_check(decode):
    env_bad, _ = ze.decode_graph_envelope(_bad_digest_envelope())
    env_ok, _ = ze.decode_graph_envelope(ENV1)
    delete, _ = ze.decode_op_delete_v1(DELETE_PAYLOAD)

    def run(env):
        return wal.wal_bytes(1, [
            (11, wal.encode_payload(11, ze.OpMixedMember(0, 2, 10, env))),
            (11, wal.encode_payload(11, ze.OpMixedMember(1, 2, 2, delete)))])

    committed, withheld = _commit_all(run(env_ok), decode)
    assert [c.kind for c in committed] == ["mixed"] and not withheld
    with pytest.raises(ConstraintError, match="Commit digest"):
        _commit_all(run(env_bad), decode)
    assert wal.MIXED_INNER_AT == 10  # index u32, count u32, inner_op u16 (from LAYOUT)


def test_envelope_validate_still_refuses_directly():
    with pytest.raises(DecodeError):
        envelope.validate(_bad_digest_envelope())


# -- check order ------------------------------------------------------------------------

def test_wrong_family_with_short_header_length_reports_the_family():
    from bytewright.runtime.ze import artifacts, registry

    frame = bytearray(fixture("frame_v1"))
    frame[8:10] = (2).to_bytes(2, "little")  # family 2 (segment), not 1 (frame)
    frame[16:24] = (8).to_bytes(8, "little")  # header_length 8 < 32
    with pytest.raises(ConstraintError, match="wrong family id") as exc:
        artifacts.read_frame(bytes(frame))
    assert exc.value.offset == 8
    # with the right family, the short header_length is what is reported
    frame[8:10] = (1).to_bytes(2, "little")
    with pytest.raises(ConstraintError, match="header_length"):
        registry.read_header(bytes(frame), expected_family=1)


def test_framed_decode_checks_the_whole_file_checksum_before_the_block_checksum():
    from bytewright.runtime.errors import ChecksumError
    from bytewright.runtime.ze import artifacts

    frame = bytearray(fixture("frame_v1"))
    artifacts.read_frame(bytes(frame))
    frame[48] ^= 1  # a payload byte: both the block and the whole-file checksum now fail
    with pytest.raises(ChecksumError) as exc:
        artifacts.read_frame(bytes(frame))
    assert exc.value.path.endswith("file_checksum") and exc.value.offset == len(frame) - 8
    manifest = bytearray(fixture("manifest_v2"))
    manifest[60] ^= 1
    with pytest.raises(ChecksumError) as exc:
        artifacts.read_manifest(bytes(manifest))
    assert exc.value.path.endswith("file_checksum")


# -- the segment writer follows WRITER_ORDER ----------------------------------------------

def test_segment_writer_places_regions_in_writer_order():
    from bytewright.runtime.ze import segment

    one_id = bytes.fromhex("000000000003" + "01" * 10)
    alive = fixture("alive_one_v1")
    docs = fixture("document_versions_one_v1")
    columns = fixture("columns_one_v1")
    given = [(12, docs), (65000, b"??"), (2, alive), (1, columns)]  # not in writer order
    data = segment.build_segment(one_id, 1, 4, 3, given)
    seg = segment.open_segment(data)
    seg.validate_all()
    by_offset = [e.kind for e in sorted(seg.header.regions, key=lambda e: e.offset)]
    assert by_offset == [1, 2, 12, 65000, 11]  # WRITER_ORDER, then unknown kinds, table last
    assert [e.kind for e in seg.header.regions] == by_offset
    # the same regions in any input order give the same bytes
    assert segment.build_segment(one_id, 1, 4, 3, list(reversed(given))) == data
    with pytest.raises(ConstraintError, match="built by the writer"):
        segment.build_segment(one_id, 1, 4, 3, [(11, b"")])
    with pytest.raises(ConstraintError, match="duplicate region kind"):
        segment.build_segment(one_id, 1, 4, 3, [(2, alive), (2, alive)])


# -- missing checks: ZGOP kinds, ReclaimIntent, ReclaimComplete ----------------------------

def _env1_parts():
    env, _ = ze.decode_graph_envelope(ENV1)
    return env, env.begin.payload, env.commit.payload.state


def _rebuild(changes, kind=1):
    env, begin, state = _env1_parts()
    return envelope.build_envelope(store=begin.store, batch_id=env.begin.batch_id, sequence=1,
                                   kind=kind, base_generation=0, changes=changes, state=state)


def _reseal_envelope(b: bytearray) -> bytes:
    """Re-seal an envelope after a payload patch: each frame's header checksum (bytes
    0..56) and frame checksum (header + payload), and the Commit's digest over Begin +
    changes (zgw_commit offset 8) before the Commit frame's own checksum."""
    pos = 0
    while pos < len(b):
        end = pos + 64 + struct.unpack_from("<I", b, pos + 8)[0]
        if end + 8 == len(b):  # the Commit ends the envelope
            struct.pack_into("<Q", b, pos + 64 + 8, xxh3_64(bytes(b[:pos])))
        struct.pack_into("<Q", b, pos + 56, xxh3_64(bytes(b[pos:pos + 56])))
        struct.pack_into("<Q", b, end, xxh3_64(bytes(b[pos:end])))
        pos = end + 8
    return bytes(b)


def _patched_change(tweak, other, delta: int, old: int, new: int) -> bytes:
    """ENV1 with one u8 of its first change overwritten ``old`` -> ``new``, a value the
    encoder refuses: the byte is found by diffing two valid envelopes (``tweak`` and
    ``other`` change a copy of the first change's payload; the byte sits ``delta`` from
    the first differing offset), then every covering checksum is re-sealed."""
    env, _, _ = _env1_parts()
    changes = [(c.kind, c.payload) for c in env.changes]

    def build(change):
        mut = copy.deepcopy(env.changes[0].payload)
        change(mut)
        return _rebuild([(2, mut)] + changes[1:])
    a, b = build(tweak), build(other)
    assert len(a) == len(b)
    envelope.validate(a)
    envelope.validate(b)
    at = next(i for i in range(len(a)) if a[i] != b[i]) + delta
    bad = bytearray(a)
    assert bad[at] == old
    bad[at] = new
    return _reseal_envelope(bad)


def test_zgop_key_and_expected_kinds_must_match_the_incarnation_kind():
    env, _, _ = _env1_parts()
    changes = [(c.kind, c.payload) for c in env.changes]
    assert _rebuild(changes) == ENV1
    mut = copy.deepcopy(env.changes[0].payload)
    assert mut.zgop.key is not None and mut.zgop.incarnation_kind == ze.EntityKind.node
    # the encoder refuses a key kind other than the incarnation kind: ENV1 (node, node)
    # against a valid (relationship, relationship) copy first differs at zgop.key.entity
    # (the key precedes incarnation_kind); set only that byte to relationship
    assert mut.zgop.key.entity == ze.EntityKind.node

    def both(m):
        m.zgop.key.entity = m.zgop.incarnation_kind = ze.EntityKind.relationship
    bad = _patched_change(lambda m: None, both, 0, int(ze.EntityKind.node),
                          int(ze.EntityKind.relationship))
    with pytest.raises(ConstraintError, match="key kind must match the incarnation kind"):
        envelope.validate(bad)
    # likewise expected.entity: a valid Expected(node) against one with another entity_id
    # first differs at entity_id, which follows the 1-byte entity kind

    def expect(entity_id):
        return lambda m: setattr(m.zgop, "expected",
                                 ze.ZgopExpected(2, ze.EntityKind.node, entity_id, None))
    bad = _patched_change(expect(5), expect(6), -1, int(ze.EntityKind.node),
                          int(ze.EntityKind.relationship))
    with pytest.raises(ConstraintError, match="expected entity kind must match"):
        envelope.validate(bad)


def _desc(artifact: int, serial: int, store: int):
    return ze.ArtifactDescriptor(store, artifact, 0, serial, 104, 18, 1, 0)


def _intent(candidates, fence=10):
    _, begin, state = _env1_parts()
    ref = state.catalog
    return ze.ZgwReclaimIntent(9, 0, 1, fence, 1, ref, 0, ref, 0, candidates)


def test_reclaim_intent_candidates_increase_and_stay_under_the_fence():
    _, begin, _ = _env1_parts()
    s = begin.store
    envelope.validate(_rebuild([(4, _intent([_desc(3, 2, s), _desc(7, 10, s)]))], kind=2))
    with pytest.raises(ConstraintError, match="strictly increasing") as exc:
        envelope.validate(_rebuild([(4, _intent([_desc(7, 2, s), _desc(3, 2, s)]))], kind=2))
    assert "candidates[1].artifact" in exc.value.path
    with pytest.raises(ConstraintError, match="strictly increasing"):
        envelope.validate(_rebuild([(4, _intent([_desc(3, 2, s), _desc(3, 2, s)]))], kind=2))
    with pytest.raises(ConstraintError, match="beyond the serial fence"):
        envelope.validate(_rebuild([(4, _intent([_desc(3, 11, s)]))], kind=2))


def test_reclaim_complete_lists_increase_and_are_disjoint():
    _, begin, state = _env1_parts()
    s = begin.store

    def complete(done, rest):
        return ze.ZgwReclaimComplete(9, state.catalog, 3, ze.DescriptorList(done),
                                     ze.DescriptorList(rest))

    envelope.validate(_rebuild([(5, complete([_desc(1, 0, s), _desc(4, 0, s)],
                                             [_desc(2, 0, s)]))], kind=2))
    with pytest.raises(ConstraintError, match="strictly increasing"):
        envelope.validate(_rebuild([(5, complete([_desc(4, 0, s), _desc(1, 0, s)], []))], kind=2))
    with pytest.raises(ConstraintError, match="strictly increasing"):
        envelope.validate(_rebuild([(5, complete([], [_desc(2, 0, s), _desc(2, 0, s)]))], kind=2))
    with pytest.raises(ConstraintError, match="disjoint"):
        envelope.validate(_rebuild([(5, complete([_desc(2, 0, s)], [_desc(2, 0, s)]))], kind=2))


# -- missing checks: Bit4 codes/factors, Columns region ----------------------------------

ONE_ID = bytes.fromhex("000000000003" + "01" * 10)


def _region(kind: int, data: bytes, rows: int = 1, scheme: int = 4, dims: int = 3):
    from bytewright.runtime.ze import segment

    seg = segment.open_segment(segment.build_segment(ONE_ID, rows, scheme, dims, [(kind, data)]))
    return seg.region(kind)


def test_bit4_codes_with_odd_dims_end_in_a_zero_nibble():
    codes = bytearray(fixture("vector_codes_odd_v1"))
    _region(3, bytes(codes))
    codes[-1] |= 0x01
    with pytest.raises(ConstraintError, match="zero nibble") as exc:
        _region(3, bytes(codes))
    assert exc.value.path.endswith("codes[0]") and exc.value.found == 1


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_bit4_factors_are_finite(bad):
    import struct

    factors = bytearray(fixture("vector_factors_bit4_v1"))
    _region(4, bytes(factors))
    factors[-4:] = struct.pack("<f", bad)  # normalized_correction of row 0
    with pytest.raises(ConstraintError, match="finite") as exc:
        _region(4, bytes(factors))
    assert exc.value.path.endswith("bit4[0].normalized_correction")


def test_columns_region_rules():
    from bytewright.runtime.ze import segment

    good = fixture("columns_one_v1")
    cols = segment.columns(_region(1, good))
    assert len(cols) == 7 and list(cols[0].i64s) == [-7] and list(cols[4].bools) == [1]
    v, _ = ze.decode_columns_region(good)
    # a Bool value of 2
    bools_at = len(good) - len(v.data)
    data = bytearray(v.data)
    pos = 0
    for d in v.defs:
        col, end = ze.decode_column_data(data, pos, type=int(d.type), rows=1)
        if d.name == "b":
            data[pos + 4 + 1] = 2
        pos = end
    with pytest.raises(ConstraintError, match="Bool column values must be 0 or 1"):
        _region(1, good[:bools_at] + bytes(data))
    # trailing bytes after the last column
    with pytest.raises(ConstraintError, match="trailing bytes after the columns"):
        _region(1, good + b"\x00")
    # ts not first: swap the first two definitions
    swapped = ze.encode_columns_region(ze.ColumnsRegion(1, [v.defs[1], v.defs[0]] + v.defs[2:],
                                                        v.data))
    with pytest.raises(ConstraintError, match="first column must be ts"):
        _region(1, swapped)


def test_segment_without_document_versions_reports_no_document_identity():
    from bytewright.runtime.ze import segment

    seg = segment.open_segment(segment.build_segment(ONE_ID, 1, 4, 3,
                                                     [(2, fixture("alive_one_v1"))]))
    with pytest.raises(ConstraintError, match="no document identity") as exc:
        seg.document_versions()
    assert not isinstance(exc.value, KeyError) and exc.value.offset == 64
    with pytest.raises(ConstraintError, match="no region of kind 13"):
        seg.region(13)
    withdocs = segment.open_segment(segment.build_segment(
        ONE_ID, 1, 4, 3, [(12, fixture("document_versions_one_v1"))]))
    assert len(withdocs.document_versions()) == 1


def test_graph_free_build_refuses_manifest_v3():
    from bytewright.runtime.errors import UnsupportedError
    from bytewright.runtime.ze import artifacts

    v3 = fixture("manifest_v3")
    artifacts.read_manifest(v3)
    artifacts.read_manifest(fixture("manifest_v2"), graph=False)
    with pytest.raises(UnsupportedError, match="graph-free") as exc:
        artifacts.read_manifest(v3, graph=False)
    assert exc.value.offset == 10


# -- ZGEN replay rules -------------------------------------------------------------------

def _graph_section(generation: int, absorbed: int, zgen):
    from bytewright.runtime.ze import artifacts

    m = artifacts.read_manifest(fixture("manifest_v3"))
    g = copy.deepcopy(next(x.body.graph for x in m.block.payload.extensions
                           if x.tag == artifacts.ZGR3))
    g.absorbed_through = absorbed
    g.state.generation = generation
    g.zgen = [zgen] if zgen is not None else []
    return g


def test_zgen_replay_subtracts_covered_batches_and_restores_increments():
    from bytewright.runtime.ze import artifacts

    rows = [ze.ZgenRow(6, 2)]
    g = _graph_section(10, 5, ze.ZgenExtension(2, 8, rows))
    # batch 3 is absorbed; 6, 7, 8 are counted (cutoff 8); the +2 returns after batch 6
    assert artifacts.zgen_generations(g, [3, 6, 7, 8, 9]) == [(6, 8), (7, 9), (8, 10), (9, 11)]
    # the generation at the cutoff is the manifest's
    # an increment recorded before the first replayed batch is restored at the start
    g = _graph_section(10, 5, ze.ZgenExtension(2, 8, [ze.ZgenRow(4, 1)]))
    assert artifacts.zgen_generations(g, [6, 7, 8]) == [(6, 8), (7, 9), (8, 10)]
    # v1 (cutoff only) and no ZGEN at all
    g = _graph_section(10, 5, ze.ZgenExtension(1, 7, None))
    assert artifacts.zgen_generations(g, [6, 7, 8]) == [(6, 9), (7, 10), (8, 11)]
    g = _graph_section(10, 5, None)
    assert artifacts.zgen_generations(g, [6, 7]) == [(6, 11), (7, 12)]
    # a ZGEN that covers more than the generation counts is refused
    g = _graph_section(2, 5, ze.ZgenExtension(2, 8, rows))
    with pytest.raises(ConstraintError, match="covers more"):
        artifacts.zgen_generations(g, [6, 7, 8])
    with pytest.raises(ConstraintError, match="strictly increasing"):
        artifacts.zgen_generations(_graph_section(10, 5, None), [7, 6])


# -- implemented but untested before: envelope consistency and limits, segment regions ----

def _tampered(mutate) -> bytes:
    env, _ = ze.decode_graph_envelope(ENV1)
    env = copy.deepcopy(env)
    mutate(env)
    return ze.encode_graph_envelope(env)


@pytest.mark.parametrize("mutate, message", [
    (lambda e: setattr(e.changes[0], "frame_index", 5), "frame index, sequence and batch"),
    (lambda e: setattr(e.changes[0], "sequence", e.changes[0].sequence + 1),
     "frame index, sequence and batch"),
    (lambda e: setattr(e.commit, "batch_id", e.commit.batch_id + 1),
     "frame index, sequence and batch"),
    (lambda e: setattr(e.begin.payload, "complete_envelope_bytes",
                       e.begin.payload.complete_envelope_bytes + 1),
     "complete_envelope_bytes must equal"),
    (lambda e: setattr(e.commit.payload, "change_count", e.commit.payload.change_count + 1),
     "Commit change_count must equal"),
    (lambda e: setattr(e.commit.payload.state, "sequence", 7), "CommitState must name"),
    (lambda e: setattr(e.commit.payload.state, "store", 7), "CommitState must name"),
])
def test_envelope_consistency_rules(mutate, message):
    with pytest.raises(ConstraintError, match=message):
        envelope.validate(_tampered(mutate))


def test_envelope_limits_and_admitted_kinds(monkeypatch):
    with pytest.raises(ConstraintError, match="exceeds 16 MiB"):
        envelope.validate(bytes(envelope.LIMIT + 1))
    env, _ = ze.decode_graph_envelope(ENV1)
    changes = [(c.kind, c.payload) for c in env.changes]
    # a Maintenance envelope (kind 2) admits no Mutation change
    with pytest.raises(ConstraintError, match="change kind not admitted"):
        envelope.validate(_rebuild(changes, kind=2))
    # the mutation cap (16384), lowered so the reproduction stays small
    monkeypatch.setattr(envelope, "MAX_MUTATIONS", 1)
    with pytest.raises(ConstraintError, match="mutation changes"):
        envelope.validate(_rebuild(changes * 2))


@pytest.mark.parametrize("edit, message", [
    (lambda es: setattr(es[1], "offset", es[0].offset), "regions overlap"),
    (lambda es: setattr(es[0], "offset", 0), "region starts inside the header"),
    (lambda es: setattr(es[0], "length", 1 << 30), "region ends past the trailer"),
    (lambda es: setattr(es[1], "kind", es[0].kind), "duplicate region kind"),
])
def test_segment_region_placement_checks(edit, message):
    from bytewright.runtime.ze import segment

    data = bytearray(segment.build_segment(ONE_ID, 1, 4, 3, [
        (2, fixture("alive_one_v1")), (12, fixture("document_versions_one_v1"))]))
    hdr, end = ze.decode_segment_header(data)
    edit(hdr.regions)
    data[:end] = ze.encode_segment_header(hdr)
    with pytest.raises(ConstraintError, match=message):
        segment.open_segment(bytes(data))


def test_op6_layout_byte_for_byte():
    """op 6 (upsert + ts + metadata v1): version 1, flags 0, doc_id u128, revision u64, ts
    i64, metadata_len u32, dims u32, metadata bytes, f32[dims] (facts §3.4), built here
    independently of the schema and decoded by both paths."""
    import struct

    doc, rev, ts, meta, vec = 0x00112233445566778899AABBCCDDEEFF, 7, -1234, b"meta", [1.5, -2.25]
    want = (struct.pack("<HH", 1, 0) + doc.to_bytes(16, "little") + struct.pack("<Qq", rev, ts)
            + struct.pack("<II", len(meta), len(vec)) + meta + struct.pack("<2f", *vec))
    body, end = ze.decode_op_upsert_ts_metadata_v1(want)
    assert end == len(want)
    assert (body.doc_id, body.revision, body.ts, body.metadata, list(body.vector)) == \
        (doc, rev, ts, meta, vec)
    assert ze.construct_decode_op_upsert_ts_metadata_v1(want) == body
    assert ze.encode_op_upsert_ts_metadata_v1(body) == want
    assert wal.encode_payload(6, body) == want
    rec = wal.Record(1, 6, want, 40, 0)
    assert wal.decode_body(rec) == body
    with pytest.raises(ConstraintError, match="trailing bytes"):
        wal.decode_body(wal.Record(1, 6, want + b"\x00", 40, 0))
    bad = bytearray(want)
    bad[40:44] = (0).to_bytes(4, "little")  # dims 0 (metadata_len is at 36)
    with pytest.raises(DecodeError, match="EmptyVector"):
        ze.decode_op_upsert_ts_metadata_v1(bytes(bad))

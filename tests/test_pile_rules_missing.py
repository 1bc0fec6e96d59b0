"""Pile rules the runtime lacked: checked dense ingress, cached blob validation, retired
equations, MAP records, snapshots and selectors, kind descriptions, migrations and
conservative rewrites. Each test quotes the spec.txt / facts.md words it checks."""

from __future__ import annotations

import os

import pytest

from bytewright.generated import pile as g
from bytewright.runtime.errors import BytewrightError, DecodeError
from bytewright.runtime.pile import Pile, crypto, kinds
from bytewright.runtime.pile.store import encode_blob, frame

SEED = bytes([7]) * 32  # facts.md §8.1: "signing key = 32 bytes of 07"
PK = bytes.fromhex("EA4A6C63E29C520ABEF5507B132EC5F9954776AEBEBE7B92421EEA691446D22C")


def b(x: int) -> bytes:
    return bytes([x]) * 32


def _commit_dense(seed: bytes = SEED, c: bytes = b(1), d: bytes = b(2), m: bytes = b(3)) -> bytes:
    author = crypto.public_key(seed)
    sig = crypto.sign(seed, crypto.commit_transcript(author, c, d, m))
    return bytes([1]) + c + d + m + author + sig


@pytest.fixture
def path(tmp_path) -> str:
    return str(tmp_path / "a.pile")


# -- 2. dense from_bytes verifies signatures -------------------------------------------------

def test_dense_from_bytes_refuses_a_forged_commit():
    # spec: "Public dense from_bytes constructors perform strict signature verification,
    # including canonical non-weak author keys."
    from bytewright.runtime.pile import records
    good = _commit_dense()
    rec = records.from_bytes(good)
    # facts §8.1 golden: COMMIT R / S and fingerprint B1740DE9...
    assert rec.payload.sig_r.hex().upper() == (
        "F89FCF5C72BC7EC3E376C6AB6BDEFC6ECEA3ADBBCA7A36DBF1729413A7820564")
    assert records.fingerprint(rec).hex().upper() == (
        "B1740DE9C272B4552B97EDDF77C796D72688A2B9325D815C302236882657E608")
    forged = bytearray(good)
    forged[-1] ^= 1  # S flipped
    with pytest.raises(records.RecordRefused) as exc:
        records.from_bytes(bytes(forged))
    assert isinstance(exc.value, DecodeError) and exc.value.path.startswith("dense_record")
    # the structural decoder keeps it (audit evidence), the checked one refuses it
    assert records.from_bytes_trusted(bytes(forged)).payload.sig_s == bytes(forged[-32:])
    # each signed field is bound
    for start in range(1, 1 + 4 * 32, 32):
        altered = bytearray(good)
        altered[start] ^= 1
        with pytest.raises(BytewrightError):
            records.from_bytes(bytes(altered))


def test_dense_from_bytes_refuses_weak_authors_and_retired_tags():
    from bytewright.runtime.pile import records
    weak = bytearray(_commit_dense())
    weak[1 + 96:1 + 128] = bytes([1]) + bytes(31)  # the identity point: weak
    with pytest.raises(records.RecordRefused, match="public key"):
        records.from_bytes(bytes(weak))
    # spec: "Tags 2/3 are retired unsigned layouts; tags 4/5 are retired signed payload-only
    # layouts. None is an alias for a witness-bound endorsement."
    for tag, n in ((2, 128), (3, 96), (4, 224), (5, 192)):
        with pytest.raises(records.RecordRefused, match="unknown dense kind"):
            records.from_bytes(bytes([tag]) + bytes(n))
    with pytest.raises(records.RecordRefused):
        records.from_bytes(_commit_dense() + b"\0")  # trailing byte


def test_dense_witness_merge_and_derive_verify_and_refuse_forgery():
    from bytewright.runtime.pile import records
    author = crypto.public_key(SEED)
    sig = crypto.sign(SEED, crypto.merge_transcript(author, b(1), b(2), b(3), b(4), b(2), b(3)))
    merge = bytes([6]) + b(1) + b(2) + b(3) + b(4) + b(2) + b(3) + author + sig
    records.from_bytes(merge)
    bad = bytearray(merge)
    bad[1 + 4 * 32] ^= 1  # the low witness: signed, so refused
    with pytest.raises(records.RecordRefused):
        records.from_bytes(bytes(bad))


# -- 5. blob validation is cached ------------------------------------------------------------

def test_blob_is_hashed_once_for_repeated_reads(path, monkeypatch):
    # spec: "Each record's validation state is cached for the lifetime of the process ...
    # avoiding repeated hash verification for frequently accessed blobs."
    payload = b"cached payload" * 100
    with Pile.create(path) as p:
        h = p.put(payload)
    pile = Pile.open(path)
    calls = []
    real = crypto.blake3
    monkeypatch.setattr(crypto, "blake3", lambda data: (calls.append(len(data)), real(data))[1])
    for _ in range(5):
        assert pile.get(h) == payload
    assert calls.count(len(payload)) == 1
    pile.close()


def test_cached_blob_verdict_is_dropped_when_the_file_changes(path, monkeypatch):
    payload = b"x" * 300
    with Pile.create(path) as p:
        h = p.put(payload)
    pile = Pile.open(path)
    assert pile.get(h) == payload
    # rewrite the payload in place (same size): a cached "valid" must not hide it
    with open(path, "r+b") as f:
        f.seek(256)
        f.write(b"y")
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    from bytewright.runtime.pile.store import BlobUnavailable
    with pytest.raises(BlobUnavailable):
        pile.get(h)
    pile.close()


def test_cached_verdicts_survive_own_appends_and_fallback_is_hashed_once(path, monkeypatch):
    payload = b"z" * 100
    with Pile.create(path) as p:
        h = p.put(payload)
        p.put(b"other")
        calls = []
        real = crypto.blake3
        monkeypatch.setattr(crypto, "blake3",
                            lambda data: (calls.append(bytes(data)), real(data))[1])
        for _ in range(3):
            p.get(h)
            p.put(b"more" + bytes([len(calls)]))
        assert calls.count(payload) == 1


# -- 1. retired equations ------------------------------------------------------------------

# upstream golden records (records.rs test retired_signed_equations_keep_their_exact_...)
MERGE_R = "39D1BE8DC91EE25298CD4B03D4CDD9D1D021994A0B5999EFCD86F1BB4D87EE08"
MERGE_S = "A64EE5C40BBBAA21F01C6963BCF2F259CD76D93CBBB4D4351879CB7167ADB00B"
DERIVE_R = "10325E15C286E263AFE7D7219F4F637F852F1EB61ECA68916DA4793C6BE9BAB5"
DERIVE_S = "287380B741FF9D1AE6AD5FA36329785AAA36C6FAABFEB759A7E5387F1F2D140B"


def test_retired_signed_equations_verify_with_golden_signatures_and_fingerprints():
    # spec: "Its dense tag 4 carried 224 bytes ... DERIVE ... dense tag 5 with 192 bytes ...
    # Their signature domains ended in .transcript, not .endorsement."
    # facts §4.3: merge domain "triblespace.collection.merge.transcript", kind 1E52...
    from bytewright.runtime.pile import records
    merge = (bytes([4]) + b(1) + b(2) + b(3) + b(4) + PK + bytes.fromhex(MERGE_R)
             + bytes.fromhex(MERGE_S))
    derive = (bytes([5]) + b(2) + b(3) + b(4) + PK + bytes.fromhex(DERIVE_R)
              + bytes.fromhex(DERIVE_S))
    for raw, fp, refs in (
            (merge, "BF31C64514D9721278866D2AD87819D0C4282D5AC59A7AEBC37729D078038BDC", 4),
            (derive, "2CEC0E4B0A78362E7EC93F5951B4FE6B1BB8233A1A6377C51ECF455A5B945672", 3)):
        eq = records.LegacySignedEquation.from_bytes(raw)
        eq.verify_strict()
        assert eq.to_bytes() == raw
        assert eq.fingerprint().hex().upper() == fp
        assert len(eq.blob_references()) == refs
        altered = bytearray(raw)
        altered[-1] ^= 1
        with pytest.raises(records.RecordRefused, match="signature"):
            records.LegacySignedEquation.from_bytes(bytes(altered)).verify_strict()
        with pytest.raises(records.RecordRefused):
            records.LegacySignedEquation.from_bytes(raw + b"\0")
        with pytest.raises(records.RecordRefused):
            records.LegacyUnsignedEquation.from_bytes(raw)


def test_retired_unsigned_equations_fingerprints_and_references():
    # spec: "Their retired dense tags 2/3 carry 128/96 payload bytes and retain historical
    # semantic kinds 5F20FFC64313969B7E046A7677874D39 / 46C621338B6DD5B71C8E1E6DD74B087C."
    from bytewright.runtime.pile import records
    m = records.LegacyUnsignedEquation.from_bytes(bytes([2]) + b(1) + b(2) + b(3) + b(4))
    d = records.LegacyUnsignedEquation.from_bytes(bytes([3]) + b(2) + b(3) + b(4))
    assert m.fingerprint().hex().upper() == (
        "92A19C12DAF4046397A43C607051ECCB1DD1EFB74D8B977B8A19AE7846521170")
    assert d.fingerprint().hex().upper() == (
        "2CF7BBFA3A8567AECED029BC0A0A74925501AC0E60D51CC5AAA32E5225F54B4B")
    assert m.blob_references() == [b(1), b(2), b(3), b(4)]
    assert d.blob_references() == [b(2), b(3), b(4)]
    with pytest.raises(records.RecordRefused):
        records.LegacyUnsignedEquation.from_bytes(bytes([2]) + b(1) + b(3) + b(2) + b(4))


def _signed_frame(kind: bytes, span: int, fields: bytes) -> bytes:
    return (kinds.FRAME_MAGIC + span.to_bytes(4, "little") + kind + fields
            + bytes(span * 256 - 64 - len(fields)))


def test_retired_signed_frames_stay_opaque_but_decode_and_verify_explicitly():
    # spec: "Ordinary native replay crosses these exact framed kinds as opaque evidence and
    # does not put them in the current collection record index or repair stream."
    from bytewright.runtime.pile import records
    merge = _signed_frame(records.KIND_SIGNED_MERGE_V5, 2, b(1) + b(2) + b(3) + b(4) + PK
                          + bytes.fromhex(MERGE_R + MERGE_S))
    derive = _signed_frame(records.KIND_SIGNED_DERIVE_V6, 1, b(2) + b(3) + b(4) + PK
                           + bytes.fromhex(DERIVE_R + DERIVE_S))
    pile = Pile.load(merge + derive)
    assert not pile.collection and len(pile.opaque) == 2
    for op in pile.opaque:
        eq = records.LegacySignedEquation.from_frame(op.raw, op.offset)
        eq.verify_strict()
    bad = bytearray(merge)
    bad[400] = 1
    with pytest.raises(records.RecordRefused, match="reserved"):
        records.LegacySignedEquation.from_frame(bytes(bad))


def test_legacy_unsigned_collection_equations_are_exposed_in_file_order():
    # spec: "PileSnapshot::legacy_unsigned_collection_equations() exposes their exact
    # equations for explicit migration, separate from CollectionRead".
    um = frame(bytes.fromhex(
        "0CEE320DE0BDA40A6A6F52221C5E4E4D2CE3B165B69C858673FD13D98F655379"),
        g.UnsignedMergeBody(b(1), b(2), b(3), b(4)))
    ud = frame(bytes.fromhex(
        "7ACE1ED10F3EBC632627058CC461DC1CC171CD2E56C52E5DCE60EA4C8DC23C36"),
        g.UnsignedDeriveBody(b(5), b(6), b(7)))
    pile = Pile.load(um + ud)
    eqs = pile.legacy_unsigned_collection_equations()
    assert [e.fingerprint().hex().upper()[:8] for e in eqs][:1] == ["92A19C12"]
    assert [(e.merge, e.collection) for e in eqs] == [(True, b(1)), (False, b(5))]
    assert not pile.collection
    assert pile.snapshot().legacy_unsigned_collection_equations() == eqs


# -- 4. snapshots, changes_since, selectors ------------------------------------------------

def test_snapshot_is_immutable_and_changes_since_classifies_components(path):
    # spec: "Later refreshes can extend the pile without changing existing snapshots." and
    # "For Blobs the physical occurrence root means adding a duplicate fallback ... is
    # visible while unrelated appended records are not."
    with Pile.create(path) as p:
        h = p.put(b"one")
        s1 = p.snapshot()
        p.want(g.WantRequest(1, g.WantBlob(b(9))))
        s2 = p.snapshot()
        assert s2.changes_since(s1) == frozenset()
        h2 = p.put(b"two")
        p.commit(SEED, b(1), h2)
        s3 = p.snapshot()
        assert s3.changes_since(s2) == {"blobs", "collection"}
        assert h2 in s3 and h2 not in s1 and h in s1
        with pytest.raises(KeyError):
            s1.get(h2)
        assert s1.records() == [] and len(s3.records()) == 1
        # a duplicate occurrence of a resident handle is a blob change
        with open(path, "ab") as f:
            f.write(encode_blob(b"one", 5))
        s4 = p.snapshot()
        assert s4.changes_since(s3) == {"blobs"}


def test_selectors_by_collection_member_and_kind(path):
    # spec: "Collection(C) selects every record naming C; ProducedMember(C, H) selects every
    # COMMIT data, MERGE result, or DERIVE output matching the exact collection and payload;
    # CommitMember, MergeCollection and DeriveTarget narrow those by kind ... Mixed selectors
    # return each record once, in index order".
    from bytewright.runtime.pile.snapshot import (
        Collection,
        CommitMember,
        DeriveTarget,
        MergeCollection,
        ProducedMember,
    )
    with Pile.create(path) as p:
        c1 = p.commit(SEED, b(1), b(0x20))
        c2 = p.commit(SEED, b(1), b(0x10))
        m = p.merge(SEED, b(1), (b(0x10), c2), (b(0x20), c1), b(0x30))
        d = p.derive(SEED, b(2), b(0x30), b(0x40), m)
        p.commit(SEED, b(2), b(0x40))
        s = p.snapshot()
        fps = lambda recs: [r.fingerprint for r in recs]  # noqa: E731
        assert fps(s.records(Collection(b(1)))) == [c2, c1, m]  # member order 10, 20, 30
        assert fps(s.records(ProducedMember(b(1), b(0x30)))) == [m]
        assert fps(s.records(CommitMember(b(1)))) == [c2, c1]
        assert fps(s.records(MergeCollection(b(1)))) == [m]
        assert fps(s.records(DeriveTarget(b(2)))) == [d]
        assert len(s.records(ProducedMember(b(2), b(0x40)))) == 2
        mixed = s.records(Collection(b(1)), ProducedMember(b(1), b(0x30)), DeriveTarget(b(2)))
        assert fps(mixed) == [c2, c1, m, d]


# -- 7. MAP records ------------------------------------------------------------------------

def test_map_signature_domain_kind_and_host_belief():
    # spec: "semantic kind 329669AA662709605053C123671DF1D2, pile description anchor
    # ED7B98CD20AD9A4D172F037A08CC47F1 ... signed over the domain 4A5191C36898D0B453FEFF99ED0E3852
    # || 4AADD87ED8EB8620BD39623B5221B5BE ... a store believes a MAP only when its own host
    # key signed it, keeps it as the attachment of its node".
    from bytewright.runtime.pile import maps
    from bytewright.runtime.pile.records import RecordRefused
    host, other = SEED, bytes([8]) * 32
    rec = maps.sign_map(host, b(1), b(2), b(3))
    t = rec.signing_transcript()
    assert t[:32] == bytes.fromhex("4A5191C36898D0B453FEFF99ED0E38524AADD87ED8EB8620BD39623B5221B5BE")
    assert t[32:48] == bytes.fromhex("329669AA662709605053C123671DF1D2")
    assert maps.MapRecord.from_bytes(rec.to_bytes()) == rec
    forged = bytearray(rec.to_bytes())
    forged[64] ^= 1  # the attachment
    with pytest.raises(RecordRefused):
        maps.MapRecord.from_bytes(bytes(forged))
    index = maps.MapIndex(crypto.public_key(host))
    assert index.add(rec)
    assert not index.add(maps.sign_map(other, b(1), b(2), b(4)))  # another key's MAP
    assert index.attachment_of(b(1), b(2)) == {b(3)} and index.ignored == 1
    # in a pile, MAP frames are opaque to replay (handle unpublished) but readable given it
    kind = bytes(range(32))
    bad = bytearray(maps.sign_map(host, b(1), b(5), b(6)).frame(kind))
    bad[-1] ^= 1
    pile = Pile.load(rec.frame(kind) + maps.sign_map(other, b(1), b(2), b(7)).frame(kind)
                     + bytes(bad))
    assert not pile.collection and len(pile.opaque) == 3
    idx = maps.maps_in_pile(pile, crypto.public_key(host), kind)
    assert idx.attachment_of(b(1), b(2)) == {b(3)} and idx.ignored == 1 and idx.refused == 1


# -- 3. kind handles recomputed from their descriptions; migrations ----------------------

def test_every_kind_handle_is_the_hash_of_its_description():
    # spec: "The handles are pinned ... and a test recomputes every one of them from its
    # description". facts §2.1: "A kind handle = BLAKE3( SimpleArchive bytes of a description
    # entity with 3 tribles )".
    from bytewright.runtime.pile import descriptions
    described = descriptions.DESCRIBED_KINDS + descriptions.RETIRED_KINDS
    for d in described:
        assert d.handle() == d.pinned, d.name
    # every current kind constant in kinds.py is covered
    current = {kinds.KIND_BLOB, kinds.KIND_COMMIT, kinds.KIND_MERGE_V6, kinds.KIND_DERIVE_V7,
               kinds.KIND_WANT_V3, kinds.KIND_PROOF_V5, kinds.KIND_PIN_HEAD,
               kinds.KIND_PIN_TOMBSTONE}
    assert current <= {d.handle() for d in described}
    # editing a description is a format change: the handle moves
    d = descriptions.DESCRIBED_KINDS[0]
    assert descriptions.KindDescription(d.constant, d.anchor, d.name, d.layout + " ").handle() \
        != d.pinned


def test_record_kind_descriptions_migration_is_idempotent_with_an_honest_census(path):
    # spec: "stores those description archives for every kind the current binary writes ...
    # Content addressing makes the call idempotent, and the migration's census distinguishes
    # 'already resident' from 'left to store'". Retired kinds are not advertised.
    from bytewright.runtime.pile import descriptions
    with Pile.create(path) as p:
        first = descriptions.publish_record_kind_descriptions(p)
        n = len(descriptions.description_blobs())
        assert (first.already_resident, first.left_to_store, first.stored) == (0, n, n)
        for d in descriptions.DESCRIBED_KINDS:
            assert p.get(d.handle()) == d.archive()
            assert p.get(crypto.blake3(d.layout.encode())) == d.layout.encode()
        for d in descriptions.RETIRED_KINDS:
            assert d.handle() not in p
        size = p.size()
        again = descriptions.publish_record_kind_descriptions(p)
        assert (again.already_resident, again.left_to_store) == (n, 0) and p.size() == size


def _retired(kind: bytes, body: bytes) -> bytes:
    return kinds.FRAME_MAGIC + (1).to_bytes(4, "little") + kind + body + bytes(192 - len(body))


ASSERT_BLOB = bytes.fromhex("EC1C024C04AF08243DB3AE318C93FA500355C74395C0F553CFFC0AF0A4BA0346")
RETRACT_BLOB = bytes.fromhex("ACCB531FC7489357C40FCEF0DDE8BD9088F2AC1924A652EA211ADD5C30B95B46")
ASSERT_TYPED = bytes.fromhex("65EE9E4279FFE01D263E75A8E2DF6289B6DE403CB4468098A0EAB925F81C28ED")


def test_monotone_wants_migration_resolves_the_retired_log_once(path):
    # spec: "It scans the retired log, resolves its final active set once, and appends only
    # missing current positives. The operation is additive and idempotent." and "Historical
    # typed tag 3 encoded a derive as (source, target, input); resolution keeps all three
    # fields in its historical identity, then projects each active key to current
    # Derive(target, input)."
    from bytewright.runtime.pile import migrate
    typed3 = bytes([3]) + bytes(31) + b(0xA) + b(0xB) + b(0xC)
    with open(path, "wb") as f:
        f.write(_retired(ASSERT_BLOB, b(1)) + _retired(ASSERT_BLOB, b(2))
                + _retired(RETRACT_BLOB, b(2)) + _retired(ASSERT_TYPED, typed3))
    with Pile.open(path) as p:
        assert p.wants == frozenset()  # retired frames are inert in ordinary replay
        census = migrate.monotone_wants(p)
        assert (census.retired_frames, census.active, census.appended) == (4, 2, 2)
        assert p.wants == {
            g.encode_want_request(g.WantRequest(1, g.WantBlob(b(1)))),
            g.encode_want_request(g.WantRequest(4, g.WantDerive(b(0xB), b(0xC))))}
        size = p.size()
        again = migrate.monotone_wants(p)
        assert (again.appended, again.already_current) == (0, 2) and p.size() == size


# -- 6. retained rewrite, Yard refusal and retention -----------------------------------------

def test_rewrite_retained_into_keeps_opaque_and_every_blob_in_a_new_file(tmp_path):
    # spec: "Pile::rewrite_retained_into carries each byte-distinct opaque frame unchanged and
    # retains every resident blob in the observed prefix, regardless of the caller's narrower
    # roots. Repeated copies use BLAKE3 digests to avoid appending the same frame again".
    from bytewright.runtime.pile.errors import RepairRefused
    from bytewright.runtime.pile.rewrite import rewrite_retained_into
    src, dest = str(tmp_path / "s.pile"), str(tmp_path / "d.pile")
    opaque = _retired(bytes(range(32)), b"unknown future kind")
    peer = _retired(bytes.fromhex(
        "327FFCAAA3F5A10424DC2059E3A7A3517F837E7E56A3C850979EFA9F5E3A1ED7"), b(1) + b(2))
    with Pile.create(src) as p:
        h1, h2 = p.put(b"kept one"), p.put(b"kept two")
        p.commit(SEED, b(1), h1)
    with open(src, "ab") as f:
        f.write(opaque + opaque + peer + encode_blob(b"kept one", 1))
    before = open(src, "rb").read()
    pile = Pile.open(src, writable=False)
    res = rewrite_retained_into(pile, dest, roots=[h1])
    assert open(src, "rb").read() == before  # never in place
    out = Pile.open(dest, writable=False)
    assert out.get(h1) == b"kept one" and out.get(h2) == b"kept two"
    assert [o.raw for o in out.opaque] == [opaque] and len(out.collection) == 1
    assert res.dropped == {"peer_body": 1} and res.repeats == 1
    assert len(out.blobs[h1]) == 1  # duplicate occurrences are not preserved
    with pytest.raises(RepairRefused):
        rewrite_retained_into(pile, dest)  # refuses to overwrite


def test_yard_refuses_opaque_and_retains_referenced_blobs(tmp_path):
    # spec: "Yard collection, compaction, and reclaim still refuse before mutation when any
    # opaque record is present." and "Every retained WANT owns each independently resident
    # handle named by its request recursively" / records "strongly own each independently
    # resident direct blob reference recursively".
    from bytewright.runtime.pile.errors import RepairRefused
    from bytewright.runtime.pile.rewrite import yard_collect
    src = str(tmp_path / "s.pile")
    with Pile.create(src) as p:
        leaf = p.put(b"leaf")
        archive = p.put(b"\x01" * 16 + b"\x02" * 16 + bytes(32) + b"\x03" * 32 + leaf)
        member = p.put(b"member")
        wanted = p.put(b"wanted")
        garbage = p.put(b"garbage")
        um = frame(bytes.fromhex(
            "0CEE320DE0BDA40A6A6F52221C5E4E4D2CE3B165B69C858673FD13D98F655379"),
            g.UnsignedMergeBody(b(1), b(2), b(3), member))
        p.commit(SEED, archive, b(0x55))
        p.want(g.WantRequest(1, g.WantBlob(wanted)))
    with open(src, "ab") as f:
        f.write(um)
    pile = Pile.open(src, writable=False)
    dest = str(tmp_path / "y.pile")
    yard_collect(pile, dest, roots=[])
    out = Pile.open(dest, writable=False)
    for h in (leaf, archive, member, wanted):
        assert h in out, h
    assert garbage not in out
    assert out.legacy_unsigned_collection_equations() == \
        pile.legacy_unsigned_collection_equations()
    with open(src, "ab") as f:
        f.write(_retired(bytes(range(32)), b"opaque"))
    pile = Pile.open(src, writable=False)
    with pytest.raises(RepairRefused, match="opaque"):
        yard_collect(pile, str(tmp_path / "z.pile"), roots=[])
    assert not os.path.exists(str(tmp_path / "z.pile"))


def test_retained_rewrite_refuses_local_cells(tmp_path):
    # spec: "Pile::rewrite_retained_into and Yard collection/reclaim refuse a destructive
    # rewrite while any such record remains."
    from bytewright.runtime.pile.errors import RepairRefused
    from bytewright.runtime.pile.rewrite import rewrite_retained_into
    src = str(tmp_path / "s.pile")
    cell = bytes.fromhex("24264FA9EE46A1ACC0E024AE69774B09") + b(1)[:16] + b(2) + bytes(192)
    with open(src, "wb") as f:
        f.write(encode_blob(b"x", 1) + cell)
    pile = Pile.open(src, writable=False)
    with pytest.raises(RepairRefused, match="local cell"):
        rewrite_retained_into(pile, str(tmp_path / "d.pile"))
    assert not os.path.exists(str(tmp_path / "d.pile"))


def test_merge_v6_and_derive_v7_golden_signatures_and_fingerprints(path):
    # facts §0: "COMMIT/MERGE/DERIVE signatures and fingerprints must match" the upstream
    # goldens (records.rs transcript_and_record_fingerprints_are_golden); spec: "An equation
    # signs its domain bytes ..., the corresponding new semantic kind ID, author public key,
    # and its ordered collection/operand/result/witness fields."
    from bytewright.runtime.pile import records
    with Pile.create(path) as p:
        m = p.merge(SEED, b(1), (b(3), b(3)), (b(2), b(2)), b(4))
        d = p.derive(SEED, b(2), b(3), b(4), b(3))
        assert m.hex().upper() == "8E67D751DDC13E67624C0B657ACDF57FCAEE7E15BAC7AD9522658A2B080EBF30"
        assert d.hex().upper() == "EAF3D8007F8D355502562B45099C569DDF64A8051387551D8B3C468CB9A15471"
        mv = p.collection[m].value
        assert (mv.sig_r + mv.sig_s).hex().upper() == (
            "7C0F9640365009531D00D24E2087787E69AFE915D07468730DAD13485C646B7D"
            "70F768A1D876D28EA442C66E3C4DECDBD517FA4F7E5670ED3FABC6B9E7AA6E0B")
        dv = p.collection[d].value
        assert (dv.sig_r + dv.sig_s).hex().upper() == (
            "19F3BB4CB02901E4BE1535998D53B3EE8AB27BB0CE7B4AE899835F2C73EFD9A8"
            "212F7FDD727340E3E4072379F0E2BDB8354026CC037F42061BE1912FB250900E")
        dense = bytes([7]) + b(2) + b(3) + b(4) + b(3) + dv.author + dv.sig_r + dv.sig_s
        assert records.fingerprint(records.from_bytes(dense)) == d

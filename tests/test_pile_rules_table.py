"""Pile spec rules that were implemented but had no test of their own. Each test quotes the
rule it checks (shared/specs/pile/spec.txt line numbers, normative; facts.md fills gaps)
and asserts the spec's words. docs/pile.md's rule table (P-001...) names these tests."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

import pytest

from bytewright.generated import pile as g
from bytewright.runtime.pile import (
    CorruptPile,
    InvalidRecord,
    Pile,
    UnsupportedRecord,
    amputate,
    crypto,
    iter_records,
    kinds,
    proof_frame,
    reframe,
    sign_proof,
)
from bytewright.runtime.pile import store as pile_store
from bytewright.runtime.pile.rewrite import rewrite_retained_into, yard_collect
from bytewright.runtime.pile.snapshot import Collection

from .conftest import load_cases

C = load_cases("pile_cases")
RECS = {n: v for n, v, _ in C.record_cases()}
SEED = bytes([7]) * 32


def enc(name_or_value) -> bytes:
    v = RECS[name_or_value] if isinstance(name_or_value, str) else name_or_value
    return g.encode_pile_record(v)


@pytest.fixture
def path(tmp_path) -> str:
    return str(tmp_path / "a.pile")


def write(path: str, *parts: bytes) -> bytes:
    data = b"".join(parts)
    Path(path).write_bytes(data)
    return data


def side_files(path: str) -> list[str]:
    return sorted(p.name for p in Path(path).parent.iterdir() if ".discarded-" in p.name)


# -- framing ---------------------------------------------------------------------------------

def test_p006_magic_is_two_genids_concatenated_and_cut_to_28_bytes():
    # L11: "two trible genid calls, 0371B249F0626B2ABDDB80E23EA96905 and
    # 9D9656A5EA5A497320351F3BE712CF82, concatenated and truncated to 28 bytes"
    ids = bytes.fromhex("0371B249F0626B2ABDDB80E23EA96905" "9D9656A5EA5A497320351F3BE712CF82")
    assert kinds.FRAME_MAGIC == ids[:28]
    assert len(kinds.FRAME_MAGIC) == 28


def test_p007_fixed_record_fields_sit_at_absolute_multiples_of_32(path):
    # L13: "A 32-byte digest, handle, or signature component in a fixed record begins at a
    # multiple of 32 ... the alignment holds at absolute file offsets"
    with Pile.create(path) as p:
        p.put(b"x" * 300)  # a 3-block blob first, so later records start at 768
        p.commit(SEED, C.b(0xA1), C.b(0xA2), C.b(0xA3))
        p.merge(SEED, C.b(0xA1), (C.b(0xB1), C.b(0xC1)), (C.b(0xB2), C.b(0xC2)), C.b(0xB3))
        p.derive(SEED, C.b(0xD1), C.b(0xD2), C.b(0xD3), C.b(0xD4))
    data = Path(path).read_bytes()
    for marker in (0xA1, 0xA2, 0xA3, 0xB1, 0xB2, 0xB3, 0xC1, 0xC2, 0xD1, 0xD2, 0xD3, 0xD4):
        hits = [i for i in range(0, len(data) - 31) if data[i:i + 32] == C.b(marker)]
        assert hits and all(i % 32 == 0 for i in hits), hex(marker)
    for rec in iter_records(data):
        assert rec.offset % 256 == 0


def test_p005_blob_payload_is_zero_padded_to_its_declared_span(path):
    # L9: "Blobs and variable capability proofs may continue after the first block and are
    # zero-padded to their declared span"; L156: "post-padded to the next 256-byte boundary"
    with Pile.create(path) as p:
        p.put(b"hello")
        p.insert(proof_frame(sign_proof(C.b(9), C.b(1), [(C.b(4), C.b(2)), (C.b(5), C.b(3))])))
    data = Path(path).read_bytes()
    assert len(data) == 512 + 512
    assert int.from_bytes(data[28:32], "little") == 2
    assert data[256:261] == b"hello" and data[261:512] == bytes(251)
    # two edges: 32 + 96 + 256 = 384 bytes of frame, then 128 zero bytes to the span
    assert data[512 + 384:] == bytes(128)


def test_p023_a_record_means_the_same_thing_at_any_offset(path):
    # L27: "Blob data starts at the constant record_start + 256; there is no offset-derived
    # padding. A record means the same thing at any offset"
    alone = pile_store.encode_blob(b"payload", 1)
    for prefix in (b"", enc("blob_hello"), enc("merge_v6") + enc("want_blob")):
        data = prefix + alone
        p = Pile.load(data)
        assert p.blobs[crypto.blake3(b"payload")] == [len(prefix)]
        assert p.get(crypto.blake3(b"payload")) == b"payload"
        assert data[len(prefix) + 256:len(prefix) + 263] == b"payload"


def test_p025_every_blob_payload_lands_on_a_256_byte_boundary(path):
    # L28: "Every blob payload in such a pile lands on a 256-byte boundary"
    with Pile.create(path) as p:
        for n in (0, 1, 255, 256, 257, 1000):
            p.put(bytes([n % 251]) * n)
        p.want(C.WANT_BLOB)
        p.commit(SEED, C.b(1), C.b(2))
        p.put(b"after")
    for rec in iter_records(Path(path).read_bytes()):
        if rec.name == "blob_body":
            assert (rec.offset + 256) % 256 == 0


def test_p003_every_written_record_begins_with_the_generic_marker_kind_and_span(path):
    # L86: "Every newly written record begins with the generic marker, kind ID, and span"
    with Pile.create(path) as p:
        p.put(b"a" * 600)
        p.commit(SEED, C.b(1), C.b(2))
        p.merge(SEED, C.b(1), (C.b(4), C.b(7)), (C.b(5), C.b(8)), C.b(6))
        p.derive(SEED, C.b(1), C.b(2), C.b(3), C.b(4))
        p.want(C.WANT_MERGE)
        p.insert(proof_frame(sign_proof(C.b(9), C.b(1), [(C.b(4), C.b(2))])))
    data = Path(path).read_bytes()
    recs = list(iter_records(data))
    assert [r.name for r in recs] == ["blob_body", "commit_body", "merge_v6_body",
                                      "derive_v7_body", "want_v3_body", "proof_v5_body"]
    for r in recs:
        assert data[r.offset:r.offset + 28] == kinds.FRAME_MAGIC
        assert int.from_bytes(data[r.offset + 28:r.offset + 32], "little") * 256 == r.length
        assert data[r.offset + 32:r.offset + 64] == r.kind
    # L9: "COMMIT and WANT fit in one block; signed MERGE and DERIVE use two"
    assert [r.length for r in recs[1:5]] == [256, 512, 512, 256]


@pytest.mark.parametrize("name,span", [("want_blob", 2), ("pin_head", 2), ("peer", 2),
                                       ("merge_v6", 1), ("merge_v6", 3), ("derive_v7", 3)])
def test_p004_fixed_kinds_have_their_exact_span(name, span):
    # L9 "COMMIT and WANT fit in one block; signed MERGE and DERIVE use two"; facts §1:
    # fixed-header kinds "require span == 1", MERGE v6 / DERIVE v7 "span == 2 exactly"
    data = bytearray(enc(name))
    data = data[:28] + span.to_bytes(4, "little") + data[32:]
    data = bytes(data[:span * 256]).ljust(span * 256, b"\0")
    with pytest.raises(CorruptPile) as exc:
        Pile.load(enc("blob_hello") + data)
    assert exc.value.valid_length == 512


# -- opaque kinds, concatenation --------------------------------------------------------------

def test_p029_replay_skips_an_unknown_kind_and_continues_with_later_records():
    # L33: "Normal pile replay semantically skips them and continues with subsequent known
    # records"
    p = Pile.load(enc("opaque_unknown_kind") + enc("want_blob") + enc("blob_hello"))
    assert len(p.opaque) == 1 and p.opaque[0].offset == 0 and p.opaque[0].span == 2
    assert p.wants == {g.encode_want_request(C.WANT_BLOB)}
    assert p.get(crypto.blake3(b"hello")) == b"hello"


def test_p017_concatenated_stale_history_cannot_change_current_demand():
    # L35: "retired WANT frames and bounded unknown kinds are inert, so concatenating stale
    # history cannot change current demand"; L43 "after cutover, old frames stay inert even if
    # a stale pile is concatenated"
    current = enc(C.want(C.WANT_MERGE))
    key = g.encode_want_request(C.WANT_MERGE)
    stale = (enc(C.cur(C.RETRACT_TYPED_WANT, g.RetiredTypedWantBody(2, C.b(1), C.b(2), C.b(3))))
             + enc("retired_typed_want_assert") + enc("retired_blob_want_assert")
             + enc("opaque_unknown_kind") + enc("env_typed_want"))
    assert Pile.load(current + stale).wants == {key}
    assert Pile.load(stale + current).wants == {key}
    assert Pile.load(stale).wants == frozenset()


def test_p159_the_retired_gossip_kind_reads_as_an_unknown_record():
    # L249: "A pile is not expected to contain one; if any did, it would read as an unknown
    # record rather than a permission."
    gossip = bytes.fromhex("5E18D982337466E65CB8278658CF53027FC109385456B49D35C4E66D6E9CE599")
    p = Pile.load(enc(C.cur(gossip, bytes(192))) + enc("blob_hello"))
    assert [(o.offset, o.kind) for o in p.opaque] == [(0, gossip)]
    assert not p.collection and not p.proofs and not p.wants


def test_p063_an_unknown_envelope_kind_is_crossed_as_opaque():
    # L293: "A complete unknown envelope kind is structurally accepted and semantically
    # skipped"; facts §5.3 "any other 16-byte kind -> Opaque(Legacy kind), crossed at the
    # declared span"
    rec = C.env(C.h16(0x5A), bytes(220) + bytes(256), 2)
    p = Pile.load(enc(rec) + enc("want_blob"))
    assert [(o.offset, o.form, o.span) for o in p.opaque] == [(0, "envelope36", 2)]
    assert p.applied == 768 and p.wants


@pytest.mark.parametrize("marker", [
    "9A06797600FA90B8A8259B0ED029EC21",   # typed want: envelope-only
    "ED6B46F7286D4556B076C17B79FD8315",   # V5 derive: envelope-only
    "E25B4427F30DCE7B36F3F80BB38E375A",   # PEER anchor: current-frame only
])
def test_p056_envelope_only_markers_are_unsupported_unenveloped(marker):
    # facts §5.2: "Other markers are not valid unenveloped: the V5 derive ED6B..., the
    # typed-want markers and the envelope-only kinds give UnsupportedRecord"; L293 "an
    # unknown unenveloped marker reports its bytes and offset using UnsupportedRecord"
    head = enc("blob_hello")
    with pytest.raises(UnsupportedRecord) as exc:
        Pile.load(head + bytes.fromhex(marker) + bytes(240))
    assert exc.value.offset == 512 and exc.value.marker == bytes.fromhex(marker)


# -- refresh ---------------------------------------------------------------------------------

def test_p059_open_can_skip_reading_and_never_creates(path):
    # L72: "Pile::open builds the struct ... It does not read any records yet (and it does
    # not create missing files"
    with pytest.raises(FileNotFoundError):
        Pile.open(path)
    assert not os.path.exists(path)
    write(path, enc("blob_hello"), b"\x03q")  # a torn tail: reading it would raise
    with Pile.open(path, refresh=False) as p:
        assert p.applied == 0 and p.records == 0
        with pytest.raises(CorruptPile):
            p.refresh()


@pytest.mark.parametrize("tail,error", [(b"\x03q", CorruptPile),
                                        (b"\xa5" * 300, UnsupportedRecord),
                                        (enc("blob_hello")[:300], CorruptPile)])
def test_p002_refresh_never_mutates_the_file(path, tail, error):
    # L73: "It fails loud on a corrupt or torn record ... It never mutates the file."
    # L293: "Both errors leave the file untouched"; L74 amputate "is deliberately not part
    # of the normal open sequence"
    data = write(path, enc("blob_hello"), enc("want_blob"), tail)
    before = os.stat(path)
    with pytest.raises(error):
        Pile.open(path)
    p = Pile.open(path, refresh=False)
    with pytest.raises(error):
        p.refresh()
    p.close()
    assert Path(path).read_bytes() == data
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert side_files(path) == []


def test_p061_refresh_holds_a_shared_lock_while_scanning(path):
    # L73 "refresh acquires a shared lock"; L297 "refresh holds a shared file lock while
    # scanning. This prevents a concurrent amputate call from truncating the file"
    write(path, enc("blob_hello"))
    p = Pile.open(path, refresh=False)
    holder = os.open(path, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)  # what amputate holds while it cuts
    done = threading.Event()
    t = threading.Thread(target=lambda: (p.refresh(), done.set()))
    t.start()
    try:
        assert not done.wait(0.3), "refresh scanned while an exclusive lock was held"
    finally:
        fcntl.flock(holder, fcntl.LOCK_UN)
        os.close(holder)
    t.join(5)
    assert done.is_set() and p.applied == 512
    # and a shared holder does not block it (readers share)
    reader = os.open(path, os.O_RDONLY)
    fcntl.flock(reader, fcntl.LOCK_SH)
    try:
        with open(path, "ab") as f:
            f.write(enc("want_blob"))
        assert p.refresh() == 1
    finally:
        os.close(reader)
        p.close()


def test_p086_a_shared_parse_failure_is_rechecked_once_under_the_exclusive_lock(path, monkeypatch):
    # L132: "a shared replay parse failure is rechecked once under an exclusive lock with a
    # fresh length. This completion barrier waits for participating writers; a persistent
    # malformed or unsupported record remains an error, without truncation"
    whole = enc("blob_hello")
    write(path, enc("want_blob"), whole[:300])  # a writer between its steps
    p = Pile.open(path, refresh=False)
    real = p._locked
    seen: list[int] = []

    def locked(op):
        seen.append(op)
        if op == fcntl.LOCK_EX:  # the writer finishes before the barrier is taken
            with open(path, "ab") as f:
                f.write(whole[300:])
        return real(op)

    monkeypatch.setattr(p, "_locked", locked)
    assert p.refresh() == 2
    assert seen == [fcntl.LOCK_SH, fcntl.LOCK_EX]
    assert p.get(crypto.blake3(b"hello")) == b"hello"
    p.close()
    # persistent damage: still an error after the one recheck, the file untouched
    data = write(path, enc("want_blob"), whole[:300])
    q = Pile.open(path, refresh=False)
    with pytest.raises(CorruptPile) as exc:
        q.refresh()
    assert exc.value.valid_length == 256
    q.close()
    assert Path(path).read_bytes() == data and side_files(path) == []


def test_p065_observations_refresh_internally(path):
    # L73: "Pile::snapshot and collection/WANT/pin-snapshot observations refresh internally
    # before observing records, so external writers are visible without a standalone scan"
    write(path, b"")
    a = Pile.open(path)
    with open(path, "ab") as f:  # another writer
        f.write(enc("want_merge") + enc("pin_head") + enc("commit_golden") + enc("blob_hello"))
    assert a.wants == {g.encode_want_request(C.WANT_MERGE)}
    assert a.pins == {C.h16(0x11): C.b(0x22)}
    assert len(a.collection) == 1
    with open(path, "ab") as f:
        f.write(enc("pin_tombstone"))
    snap = a.snapshot()
    assert snap.pins == {} and snap.get(crypto.blake3(b"hello")) == b"hello"
    a.close()


def test_p072_an_append_first_applies_records_other_writers_appended(path):
    # L90: "Each handle remembers the last offset it processed and, after appending, scans
    # any gap left by concurrent writes before advancing this applied_length"
    write(path, b"")
    a, b = Pile.open(path), Pile.open(path)
    hb = b.put(b"from b")
    b.want(C.WANT_BLOB)
    a.put(b"from a")
    # no lookup in between: the append itself crossed b's records
    assert hb in a.blobs
    assert a.applied == os.path.getsize(path) == 512 * 2 + 256
    assert a.records == 3
    a.close()
    b.close()


def test_p100_blob_timestamp_is_unix_milliseconds_at_append(path):
    # L151: "Timestamp - milliseconds since the Unix epoch when the append occurred"
    lo = int(time.time() * 1000)
    with Pile.create(path) as p:
        p.put(b"now")
    hi = int(time.time() * 1000)
    ts = int.from_bytes(Path(path).read_bytes()[64:72], "little")
    assert lo <= ts <= hi


# -- amputate ---------------------------------------------------------------------------------

def test_p067_amputate_crosses_complete_opaque_frames_and_cuts_a_torn_one_at_its_start(path):
    # L74: "It crosses complete opaque envelopes and may truncate a torn opaque tail at its
    # known start"; L299 "It crosses complete opaque envelopes, truncates a torn one at its
    # start"
    good = enc("blob_hello") + enc("opaque_unknown_kind") + enc("env_opaque_local_cell")
    torn = enc("opaque_unknown_kind")[:300]
    write(path, good, torn)
    r = amputate(path, expected=len(good))
    assert r.truncated and r.valid_length == len(good)
    assert Path(path).read_bytes() == good
    assert Path(r.discarded).read_bytes() == torn
    assert not amputate(path).truncated  # complete opaque frames are not damage


def test_p071_amputate_refuses_a_boundary_other_than_the_readers(path):
    # L74: "The reader compares that offset and calls set_len while holding the same
    # exclusive file lock"; L299 "The CLI refuses a boundary that differs from the current
    # reader's result."
    data = write(path, enc("blob_hello"), enc("want_blob")[:100])
    for wrong in (0, 256, 612, 768):
        with pytest.raises(CorruptPile) as exc:
            amputate(path, expected=wrong)
        assert exc.value.valid_length == 512
        assert Path(path).read_bytes() == data and side_files(path) == []


# -- collection records --------------------------------------------------------------------

def test_p126_replay_keeps_each_frame_and_reads_hand_a_record_out_once():
    # L194: "Replay does not make that comparison ... each frame gets its own index entry
    # until a compaction rewrites the pile through insert. Reads hide the repeat"
    one = enc("commit_golden") + enc("merge_v6")
    p = Pile.load(one + one)
    c = C.b(1)
    assert sorted(p.by_collection[c][C.b(2)]) == [0, 768]       # COMMIT data 02
    assert sorted(p.by_collection[c][C.b(6)]) == [256, 1024]    # MERGE result 06
    recs = p.snapshot().records(Collection(c))
    assert len(recs) == 2 and len(p.collection) == 2


def test_p114_replay_is_structural_and_insert_verifies(path):
    # L184: "Native replay and explicit raw audit decode structurally"; L229 "Pile and
    # MemoryRepo insertion verify every signature; trusted native replay checks framing and
    # keys without repeating cryptography"
    c = RECS["commit_golden"].record.body
    forged = C.cur(kinds.KIND_COMMIT, g.CommitBody(c.collection, C.b(0x77), c.metadata, c.author,
                                                   c.sig_r, c.sig_s))
    p = Pile.load(enc(forged))
    assert len(p.collection) == 1  # replay accepted it: no signature check
    with Pile.create(path) as q, pytest.raises(InvalidRecord, match="signature"):
        q.insert(enc(forged))


def test_p113_verification_rejects_a_non_canonical_s(path):
    # facts §4.5: "Verification is ed25519-dalek's verify_strict. It rejects non-canonical S"
    c = RECS["commit_golden"].record.body
    ell = 2**252 + 27742317777372353535851937790883648493
    s = int.from_bytes(c.sig_s, "little") + ell  # the same signature, S not reduced
    assert s < 2**256
    bad = C.cur(kinds.KIND_COMMIT, g.CommitBody(c.collection, c.data, c.metadata, c.author,
                                                c.sig_r, s.to_bytes(32, "little")))
    with Pile.create(path) as q:
        with pytest.raises(InvalidRecord, match="signature"):
            q.insert(enc(bad))
        q.insert(enc("commit_golden"))


def test_p049_reframe_keeps_signed_fields_without_repeating_crypto(tmp_path):
    # L54: "Structural replay and semantic reframe preserve those exact signed fields without
    # repeating crypto. Explicit audit verifies the raw records separately"
    c = RECS["commit_golden"].record.body
    forged = enc(C.cur(kinds.KIND_COMMIT, g.CommitBody(c.collection, C.b(0x77), c.metadata,
                                                       c.author, c.sig_r, c.sig_s)))
    src, dest = str(tmp_path / "s.pile"), str(tmp_path / "d.pile")
    write(src, forged, enc("merge_v6"))
    reframe(src, dest)
    out = Path(dest).read_bytes()
    assert forged in out and enc("merge_v6") in out


# -- proofs ------------------------------------------------------------------------------------

def _edge(cap: bytes, delegate_seed: bytes, sig: bytes = b"\x11" * 64) -> bytes:
    return cap + crypto.public_key(delegate_seed) + sig


def test_p143_proof_body_has_one_to_255_edges():
    # L223: "The body length must be exactly 96 + 128n for 1 <= n <= 255."
    root = crypto.public_key(C.b(1))
    none = kinds.FRAME_MAGIC + (1).to_bytes(4, "little") + kinds.KIND_PROOF_V5 + C.b(9) + root
    with pytest.raises(CorruptPile):
        Pile.load(none.ljust(256, b"\0"))
    edge = _edge(C.b(4), C.b(2))
    n = 256  # one edge too many
    body = kinds.KIND_PROOF_V5 + C.b(9) + root + edge * n
    span = (32 + len(body) + 255) // 256
    data = (kinds.FRAME_MAGIC + span.to_bytes(4, "little") + body).ljust(span * 256, b"\0")
    with pytest.raises(CorruptPile):
        Pile.load(data)
    ok = 255
    body = kinds.KIND_PROOF_V5 + C.b(9) + root + edge * ok
    span = (32 + len(body) + 255) // 256
    data = (kinds.FRAME_MAGIC + span.to_bytes(4, "little") + body).ljust(span * 256, b"\0")
    p = Pile.load(data)
    [proof] = p.proofs.values()
    assert len(proof.body) == 96 + 128 * 255


@pytest.mark.parametrize("which", ["root", "delegate"])
def test_p144_replay_requires_canonical_non_weak_keys(which):
    # L223: "Replay parses every Ed25519 key, requires canonical non-weak principals"
    noncanonical = b"\xff" * 31 + b"\x7f"  # y = 2^255 - 1 >= p
    small_order = bytes(31) + b"\x80"      # y = 0 with the sign bit: order 4
    for bad in (noncanonical, small_order, (1).to_bytes(32, "little")):
        root = bad if which == "root" else crypto.public_key(C.b(1))
        edge = C.b(4) + (bad if which == "delegate" else crypto.public_key(C.b(2))) + b"\x11" * 64
        data = kinds.FRAME_MAGIC + (1).to_bytes(4, "little") + kinds.KIND_PROOF_V5 + C.b(9) \
            + root + edge
        with pytest.raises(CorruptPile):
            Pile.load(data)


@pytest.mark.parametrize("at", [0, 31, 100, 127])
def test_p146_a_nonzero_padding_byte_is_corruption(at):
    # L223: "rejects any nonzero padding byte as corruption ... A bounded scan, the
    # minimal-span check, and an entirely zero remainder make this unambiguous even when
    # padding occupies one complete edge." (Byte 32..64 of the padding edge is a delegate
    # slot: one nonzero byte there is not a valid key, so it is corrupt too.)
    data = bytearray(enc("proof_v5_two_edges"))
    assert len(data) == 512 and data[384:] == bytes(128)
    data[384 + at] = 1
    with pytest.raises(CorruptPile):
        Pile.load(bytes(data))


def test_p147_zero_bytes_ending_a_signature_stay_in_the_proof():
    # L223: "Zero bytes at the end of a signature remain part of the proof."
    root = crypto.public_key(C.b(1))
    e1 = _edge(C.b(4), C.b(2))
    e2 = _edge(C.b(5), C.b(3), b"\x22" * 32 + bytes(32))  # signature ends in 32 zero bytes
    body = kinds.KIND_PROOF_V5 + C.b(9) + root + e1 + e2
    data = (kinds.FRAME_MAGIC + (2).to_bytes(4, "little") + body).ljust(512, b"\0")
    p = Pile.load(data)
    [(pid, proof)] = p.proofs.items()
    assert proof.body == body and len(body) == 352
    assert pid == crypto.blake3(body)


def test_p150_different_bytes_with_one_proof_id_are_a_collision(monkeypatch):
    # L227: "Different bytes reconstructing to the same proof ID are a collision and fail."
    # A BLAKE3 collision cannot be built, so the id function is forced to collide.
    real = crypto.blake3
    monkeypatch.setattr(crypto, "blake3", lambda d: bytes(32) if len(d) in (224, 352) else real(d))
    one, two = enc("proof_v5_one_edge"), enc("proof_v5_two_edges")
    with pytest.raises(CorruptPile) as exc:
        Pile.load(one + two)
    assert exc.value.valid_length == 256
    assert len(Pile.load(one + one).proofs) == 1  # identical bytes: idempotent


def test_p152_a_prefix_ending_after_any_signature_is_a_complete_proof(path):
    # L227: "An exact prefix ending after any signature is therefore a complete proof for that
    # intermediate delegate."
    full = sign_proof(C.b(9), C.b(1), [(C.b(4), C.b(2)), (C.b(5), C.b(3)), (C.b(6), C.b(8))])
    with Pile.create(path) as p:
        for n in (1, 2, 3):
            prefix = g.ProofV5Body(full.resource, full.root, full.edges[:n])
            pid = p.insert(proof_frame(prefix))
            body = kinds.KIND_PROOF_V5 + full.resource + full.root + b"".join(
                e.capability + e.delegate + e.signature for e in full.edges[:n])
            assert pid == crypto.blake3(body)
        assert len(p.proofs) == 3


def test_p153_replay_does_not_verify_proof_signatures_but_insert_does(path):
    # L229: "Pile and MemoryRepo insertion verify every signature; trusted native replay
    # checks framing and keys without repeating cryptography."
    root = crypto.public_key(C.b(1))
    data = kinds.FRAME_MAGIC + (1).to_bytes(4, "little") + kinds.KIND_PROOF_V5 + C.b(9) + root \
        + _edge(C.b(4), C.b(2), b"\x11" * 64)
    assert len(Pile.load(data).proofs) == 1
    with Pile.create(path) as p, pytest.raises(InvalidRecord, match="signature"):
        p.insert(data)


def test_p155_rewrites_keep_proofs_and_their_capabilities_but_not_the_resource(tmp_path):
    # L231: "Conservative rewrites preserve every current canonical proof record and each
    # resident capability definition it references, without fetching absent blobs or
    # authoring WANTs. The opaque resource field is not interpreted as a blob handle by
    # storage."
    src = str(tmp_path / "s.pile")
    with Pile.create(src) as p:
        cap = p.put(b"capability definition")
        resource = p.put(b"a blob whose handle is also the resource")
        absent = C.b(0x5C)  # a capability definition not resident here
        p.insert(proof_frame(sign_proof(resource, C.b(1), [(cap, C.b(2)), (absent, C.b(3))])))
        dest = str(tmp_path / "yard.pile")
        yard_collect(p, dest, roots=[])
        with Pile.open(dest) as y:
            assert len(y.proofs) == 1 and cap in y and resource not in y and absent not in y
            assert not y.wants
        dest2 = str(tmp_path / "retained.pile")
        rewrite_retained_into(p, dest2)
        with Pile.open(dest2) as r:
            assert len(r.proofs) == 1 and cap in r and not r.wants


# -- retired kinds ---------------------------------------------------------------------------

def test_p157_peer_fields_are_uninterpreted_and_only_framing_is_validated():
    # L237: "the current reader treats both 32-byte fields as uninterpreted historical bytes
    # ... replay validates only its fixed framing, span, kind, and reserved zeros—not whether
    # either field encodes an Ed25519 point."
    not_points = b"\xff" * 32, bytes(31) + b"\x80"
    p = Pile.load(enc(C.cur(C.kind_of("peer_body"), g.PeerBody(*not_points))))
    assert p.records == 1 and not p.opaque
    data = bytearray(enc("peer"))
    data[200] = 1
    with pytest.raises(CorruptPile):
        Pile.load(bytes(data))
    data = bytearray(enc("store_scope"))
    data[100] = 1
    with pytest.raises(CorruptPile):
        Pile.load(bytes(data))


def test_p158_peer_and_store_scope_build_no_state_and_rewrites_drop_them(tmp_path):
    # L241: "Current replay validates both layouts and exposes dedicated retired record
    # variants to raw inspection, but builds no index or repository state from either ...
    # Semantic reframe, retained rewrite, Yard reclaim, and trible pile compact deliberately
    # drop both retired kinds."
    data = enc("peer") + enc("store_scope") + enc("blob_hello")
    p = Pile.load(data)
    names = [r.name for r in iter_records(data)]
    assert names == ["peer_body", "store_scope_body", "blob_body"]
    assert not p.opaque and not p.wants and not p.pins and not p.proofs and not p.collection
    src = str(tmp_path / "s.pile")
    write(src, data)
    with Pile.open(src) as q:
        for fn, dest in ((lambda d: rewrite_retained_into(q, d), "r.pile"),
                         (lambda d: yard_collect(q, d, roots=[crypto.blake3(b"hello")]), "y.pile")):
            out = str(tmp_path / dest)
            fn(out)
            assert [r.name for r in iter_records(Path(out).read_bytes())] == ["blob_body"]
    rf = reframe(src, str(tmp_path / "f.pile"))
    assert rf.dropped["peer_body"] == 1 and rf.dropped["store_scope_body"] == 1


def test_p099_retired_v4_derive_is_known_not_opaque_and_droppable(tmp_path):
    # L144: "The retired V4 collection DERIVE kind is deliberately not opaque ... Replay
    # exposes it as RetiredCollectionDeriveV4, projects no collection record, and semantic
    # rewrites may discard it."
    data = enc("v4_derive") + enc("env_derive_v4")
    p = Pile.load(data)
    assert not p.opaque and not p.collection and not p.unsigned_equations
    assert [r.name for r in iter_records(data)] == ["v4_derive", "env_derive_v4_body"]
    src = str(tmp_path / "s.pile")
    write(src, data)
    rf = reframe(src, str(tmp_path / "d.pile"))  # semantic reframe is not refused by it
    assert sum(rf.dropped.values()) == 2 and Path(tmp_path / "d.pile").read_bytes() == b""


def test_p046_v3_collection_records_are_inert_evidence(tmp_path):
    # L257: "they never enter CollectionStore, assert membership, or retain blobs. Semantic
    # reframe preserves these raw V3 headers too."
    v3 = enc("v3_collection_definition") + enc("v3_commit") + enc("v3_merge") + enc("v3_derive")
    src = str(tmp_path / "s.pile")
    with Pile.create(src) as p:
        data_blob = p.put(b"member")
    with open(src, "ab") as f:
        f.write(enc(C.legacy("v3_commit", g.V3Commit(C.h16(1), data_blob, C.b(3), C.PK,
                                                     C.b(5), C.b(6)))) + v3)
    with Pile.open(src) as p:
        assert not p.collection and not p.by_collection and not p.opaque
        yard_collect(p, str(tmp_path / "y.pile"), roots=[])
        with Pile.open(str(tmp_path / "y.pile")) as y:
            assert data_blob not in y  # the V3 commit retained nothing
    reframe(src, str(tmp_path / "f.pile"))
    assert v3 in Path(tmp_path / "f.pile").read_bytes()


def test_p161_pins_have_no_writer_and_need_no_resident_blob():
    # L261: "No current publication API appends, advances, or tombstones a pin. The legacy
    # encoding never required the referenced blob to be resident locally."
    p = Pile.load(enc("pin_head") + enc("v1_branch"))
    assert C.b(0x22) not in p.blobs and p.pins == {C.h16(0x11): C.b(0x22)}
    assert not any(hasattr(Pile, n) for n in ("pin", "set_pin", "advance", "tombstone"))
    with pytest.raises(InvalidRecord):
        Pile.load(b"").insert(enc("pin_head"))


def test_p162_local_cells_are_opaque_crossed_at_256_and_own_nothing(tmp_path):
    # L269: "They expose either form as PileRecordContent::Opaque, do not project a value into
    # current state, and do not treat its referenced archive as a retention root"; L287
    # "their historical 256-byte boundary is known, so the reader crosses them"
    data = enc("v3_local_cell") + enc("env_opaque_local_cell") + enc("want_blob")
    p = Pile.load(data)
    assert [(o.offset, o.length) for o in p.opaque] == [(0, 256), (256, 256)]
    assert p.wants and not p.pins and not p.collection
    assert p.opaque[0].raw == enc("v3_local_cell")


def test_p156_retired_proof_kinds_project_no_authority():
    # L233: "remain structurally recognizable as inert frames ... Fresh writers do not emit
    # them, replay projects no authority from them"
    data = enc("proof_v1") + enc("proof_v2") + enc("proof_v3")
    p = Pile.load(data)
    assert not p.proofs and not p.opaque
    with pytest.raises(InvalidRecord):
        Pile.load(b"").insert(enc("proof_v2"))


def test_p074_appends_are_serialised_against_other_writers(path):
    # L74 (step 4): records too large for one atomic writev are appended while "put takes an
    # exclusive file lock ... serialised against other writers for the duration of the
    # append". This runtime takes that lock for every append, so a held lock delays any put.
    write(path, b"")
    p = Pile.open(path)
    holder = os.open(path, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_SH)  # a reader mid-scan
    done = threading.Event()
    t = threading.Thread(target=lambda: (p.put(b"big"), done.set()))
    t.start()
    try:
        assert not done.wait(0.3), "put appended while another process held the file lock"
        assert os.path.getsize(path) == 0
    finally:
        fcntl.flock(holder, fcntl.LOCK_UN)
        os.close(holder)
    t.join(5)
    assert done.is_set() and os.path.getsize(path) == 512
    p.close()


# -- the operator commands the spec names -----------------------------------------------------

def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    from bytewright.cli.main import main
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_p097_compact_cli_carries_opaque_frames_and_reports_them(tmp_path, capsys):
    # L140: "trible pile compact uses this conservative path and reports the opaque frames it
    # carries"; L241 "trible pile compact deliberately drop[s] both retired kinds"
    import json
    src, dest = str(tmp_path / "s.pile"), str(tmp_path / "c.pile")
    write(src, enc("blob_hello"), enc("opaque_unknown_kind"), enc("peer"), enc("store_scope"),
          enc("opaque_unknown_kind"), enc("commit_golden"))
    code, out, err = _cli(capsys, "pile", "compact", src, "--into", dest, "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["opaque"] == 1 and res["blobs"] == 1 and res["repeats"] == 1
    names = [r.name for r in iter_records(Path(dest).read_bytes())]
    assert sorted(names) == ["blob_body", "commit_body", "opaque"]
    code, _, err = _cli(capsys, "pile", "compact", src, "--into", dest)
    assert code != 0 and len(err.strip().splitlines()) == 1  # never overwrites


def test_p010_migrate_cli_runs_both_migrations_with_honest_censuses(tmp_path, capsys):
    # L17: "trible pile migrate <PILE> run record-kind-descriptions ... the migration's census
    # distinguishes 'already resident' from 'left to store' so a re-run reports honestly";
    # L43: "explicitly run trible pile migrate <pile> run monotone-wants ... additive and
    # idempotent"
    import json
    path = str(tmp_path / "m.pile")
    write(path, enc("retired_blob_want_assert"), enc("retired_typed_want_assert"))
    code, out, _ = _cli(capsys, "pile", "migrate", path, "run", "monotone-wants", "--dry-run",
                        "--json")
    assert code == 0 and json.loads(out)["appended"] == 2
    assert os.path.getsize(path) == 512  # a dry run appends nothing
    code, out, _ = _cli(capsys, "pile", "migrate", path, "run", "monotone-wants", "--json")
    assert json.loads(out) == {"retired_frames": 2, "active": 2, "already_current": 0,
                               "appended": 2}
    code, out, _ = _cli(capsys, "pile", "migrate", path, "run", "monotone-wants", "--json")
    assert json.loads(out)["appended"] == 0 and json.loads(out)["already_current"] == 2
    with Pile.open(path) as p:
        assert p.wants == {bytes([1]) + C.b(0x41) + bytes(64),
                           bytes([4]) + C.b(2) + C.b(3) + bytes(32)}
    code, out, _ = _cli(capsys, "pile", "migrate", path, "run", "record-kind-descriptions",
                        "--json")
    first = json.loads(out)
    assert code == 0 and first["already_resident"] == 0 and first["stored"] == first["left_to_store"] > 0
    code, out, _ = _cli(capsys, "pile", "migrate", path, "run", "record-kind-descriptions",
                        "--json")
    again = json.loads(out)
    assert (again["already_resident"], again["left_to_store"]) == (first["left_to_store"], 0)

"""Pile runtime on real files: open/create, refresh, lazy blob reads, signed writes,
idempotent inserts, pins, opaque records, concatenation = set union, two processes
appending, amputate / reframe / diagnose, and crash points in append and amputate."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bytewright.generated import pile as g
from bytewright.runtime.pile import (
    CorruptPile,
    InvalidRecord,
    Pile,
    PileShrunk,
    RepairRefused,
    UnsupportedRecord,
    amputate,
    crypto,
    diagnose,
    frame,
    iter_records,
    kinds,
    proof_frame,
    reframe,
    sign_proof,
)

from .conftest import load_cases

HERE = Path(__file__).resolve().parent
PY = sys.executable


C = load_cases("pile_cases")  # field values of the fixtures (tests/cases)
KEY = bytes([7]) * 32


def _enc(v) -> bytes:
    return g.encode_pile_record(v)


@pytest.fixture
def path(tmp_path) -> str:
    return str(tmp_path / "a.pile")


def test_open_never_creates_and_create_refuses_existing(path):
    with pytest.raises(FileNotFoundError):
        Pile.open(path)
    assert not os.path.exists(path)
    Pile.create(path).close()
    assert os.path.getsize(path) == 0
    with pytest.raises(FileExistsError):
        Pile.create(path)
    with Pile.open(path) as p:
        assert p.records == 0 and p.applied == 0


def test_put_get_dedupe_and_refresh_only_new_bytes(path):
    with Pile.create(path) as a:
        h = a.put(b"hello", timestamp=C.TS)
        assert h == crypto.blake3(b"hello") and a.get(h) == b"hello"
        assert os.path.getsize(path) == 512
        assert a.put(b"hello") == h and os.path.getsize(path) == 512  # deduplicated
        with Pile.open(path) as b:
            assert b.records == 1
            b.put(b"world")
            assert a.refresh() == 1 and a.get(crypto.blake3(b"world")) == b"world"
            assert a.refresh() == 0
    assert open(path, "rb").read(512) == _enc(C.blob(b"hello"))  # the §8.2 frame on disk


def test_put_rewrites_a_blob_whose_only_copy_is_damaged(path):
    good = bytearray(_enc(C.blob(b"hello")))
    good[300] = 0xFF  # inside the zero post-padding: not checked, blob still valid
    bad = bytearray(_enc(C.blob(b"hello")))
    bad[256] ^= 1     # payload byte: the handle no longer matches
    Path(path).write_bytes(bytes(bad))
    with Pile.open(path) as p:
        h = crypto.blake3(b"hello")
        assert h in p
        p.put(b"hello")
        assert p.blobs[h] == [0, 512] and p.get(h) == b"hello"


def test_file_shrinking_below_applied_is_a_hard_error(path):
    with Pile.create(path) as p:
        p.put(b"a" * 600)
        os.truncate(path, 256)
        with pytest.raises(PileShrunk):
            p.refresh()


def test_signed_records_verify_and_are_idempotent(path):
    with Pile.create(path) as p:
        fp = p.commit(KEY, C.b(1), C.b(2), C.b(3))
        assert fp == bytes.fromhex("B1740DE9C272B4552B97EDDF77C796D72688A2B9325D815C302236882657E608")
        size = os.path.getsize(path)
        assert p.commit(KEY, C.b(1), C.b(2), C.b(3)) == fp and os.path.getsize(path) == size
        m = p.merge(KEY, C.b(1), (C.b(5), C.b(8)), (C.b(4), C.b(7)), C.b(6))
        assert m == crypto.merge_fingerprint(C.merge_v6().record.body)  # inputs put in order
        d = p.derive(KEY, C.b(1), C.b(2), C.b(3), C.b(4))
        assert d == crypto.derive_fingerprint(C.derive_v7().record.body)
        assert p.members(C.b(1)) == [C.b(2), C.b(6), C.b(3)]
        size = os.path.getsize(path)
        assert p.insert(_enc(C.merge_v6())) == m and os.path.getsize(path) == size
        body = C.commit().record.body
        forged = g.CommitBody(body.collection, C.b(9), body.metadata, body.author, body.sig_r, body.sig_s)
        with pytest.raises(InvalidRecord, match="signature"):
            p.insert(frame(kinds.KIND_COMMIT, forged))
        weak = g.CommitBody(body.collection, body.data, body.metadata, b"\x01" + bytes(31),
                            body.sig_r, body.sig_s)  # the identity point: small order
        with pytest.raises(InvalidRecord, match="weak"):
            p.insert(frame(kinds.KIND_COMMIT, weak))
        assert os.path.getsize(path) == size
    with Pile.open(path) as q:  # replay sees the same sets
        assert set(q.collection) == {fp, m, d}


def test_key_validity_rules():
    assert crypto.key_is_valid(C.PK)
    assert not crypto.is_canonical(b"\xff" * 31 + b"\x7f")      # y = 2^255 - 1 >= p
    assert crypto.is_small_order(bytes(32)) is True               # order 4
    assert not crypto.key_is_valid(b"\x01" + bytes(31))           # identity
    sig = crypto.sign(KEY, b"m")
    assert crypto.verify_strict(C.PK, b"m", sig)
    high_s = sig[:32] + (int.from_bytes(sig[32:], "little") + crypto._L).to_bytes(32, "little")
    assert not crypto.verify_strict(C.PK, b"m", high_s)           # non-canonical S


def test_proofs_verify_every_edge_on_insert(path):
    body = sign_proof(C.b(9), C.b(1), [(C.b(4), C.b(2)), (C.b(5), C.b(3)), (C.b(6), bytes([8]) * 32)])
    data = proof_frame(body)
    assert len(data) == 512  # 3 edges: 32 + 96 + 384 = 512, fills two blocks exactly
    with Pile.create(path) as p:
        pid = p.insert(data)
        assert list(p.proofs) == [pid] and p.insert(data) == pid and os.path.getsize(path) == 512
        bad = g.ProofV5Body(body.resource, body.root, list(body.edges))
        bad.edges[1] = g.ProofEdge(bad.edges[1].capability, bad.edges[1].delegate, bytes(64))
        with pytest.raises(InvalidRecord, match="edge 1"):
            p.insert(proof_frame(bad))


def test_want_is_idempotent_and_keys_are_97_bytes(path):
    with Pile.create(path) as p:
        k1 = p.want(C.WANT_BLOB)
        p.want(C.WANT_BLOB)
        k2 = p.want(C.WANT_MERGE)
        assert len(k1) == 97 and p.wants == {k1, k2} and os.path.getsize(path) == 512


def test_pins_replay_last_writer_wins_across_forms():
    pin = C.h16(0x11)
    data = b"".join(_enc(r) for r in [
        C.legacy("v1_branch", g.V1Branch(pin, C.b(1))),
        C.env(kinds.LEGACY_MARKERS["v3_branch"], g.EnvBranchBody(C.h16(0x22), C.b(2))),
        C.cur(kinds.KIND_PIN_HEAD, g.PinHeadBody(pin, C.b(3))),
        C.cur(kinds.KIND_PIN_TOMBSTONE, g.PinTombstoneBody(C.h16(0x22))),
    ])
    p = Pile.load(data)
    assert p.pins == {pin: C.b(3)} and [e[2] for e in p.pin_log] == [C.b(1), C.b(2), C.b(3), None]


def test_opaque_records_are_counted_with_offset_kind_span_and_raw_bytes():
    recs = dict((n, v) for n, v, _ in C.record_cases())
    data = b"".join(_enc(recs[n]) for n in ("blob_hello", "opaque_unknown_kind", "v3_local_cell",
                                            "opaque_merge_v5", "env_opaque_local_cell"))
    p = Pile.load(data)
    assert [(o.offset, o.form, o.span) for o in p.opaque] == [
        (512, "current", 2), (1024, "v3", None), (1280, "current", 2), (1792, "envelope36", 1)]
    assert p.opaque[0].kind == C.UNKNOWN_KIND and p.opaque[0].raw == _enc(recs["opaque_unknown_kind"])


def test_records_iterator_covers_every_form_in_file_order():
    data = g.encode_pile_file(C.mixed_pile())
    recs = list(iter_records(data))
    assert [r.form for r in recs] == ["v1", "v1", "envelope36"] + ["current"] * 6
    assert [r.name for r in recs][-3:] == ["proof_v5_body", "opaque", "blob_body"]
    assert recs[0].value.data.payload == b"hello, v1"


def test_cat_of_two_piles_is_the_set_union(tmp_path):
    a, b = str(tmp_path / "a.pile"), str(tmp_path / "b.pile")
    with Pile.create(a) as p, Pile.create(b) as q:
        for x in (b"one", b"two", b"shared"):
            p.put(x)
        for x in (b"three", b"shared"):
            q.put(x)
        p.commit(KEY, C.b(1), C.b(2))
        q.commit(KEY, C.b(1), C.b(2))   # the same record on both sides
        q.commit(KEY, C.b(1), C.b(3))
        p.want(C.WANT_BLOB)
        q.want(C.WANT_DERIVE)
        q.insert(_enc(C.proof(1)))
    cat = str(tmp_path / "cat.pile")
    subprocess.run(f"cat {a} {b} > {cat}", shell=True, check=True)
    with Pile.open(a) as p, Pile.open(b) as q, Pile.open(cat) as u:
        assert set(u.blobs) == set(p.blobs) | set(q.blobs) and len(u.blobs) == 4
        assert u.blobs[crypto.blake3(b"shared")] == [p.blobs[crypto.blake3(b"shared")][0],
                                                    os.path.getsize(a) + q.blobs[crypto.blake3(b"shared")][0]]
        assert set(u.collection) == set(p.collection) | set(q.collection) and len(u.collection) == 2
        assert u.members(C.b(1)) == [C.b(2), C.b(3)]
        assert u.wants == p.wants | q.wants and set(u.proofs) == set(q.proofs)
        for h in u.blobs:
            assert u.get(h) in (b"one", b"two", b"shared", b"three")


WRITER = textwrap.dedent("""
    import sys
    from bytewright.runtime.pile import Pile
    path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with Pile.open(path) as p:
        for i in range(n):
            p.put(f"{tag}-{i}".encode() * (1 + i % 5))
""")


def test_two_processes_append_concurrently(path):
    Pile.create(path).close()
    n = 60
    procs = [subprocess.Popen([PY, "-c", WRITER, path, tag, str(n)]) for tag in ("A", "B")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    with Pile.open(path) as p:
        assert p.records == 2 * n and p.applied == os.path.getsize(path)
        for tag in ("A", "B"):
            for i in range(n):
                data = f"{tag}-{i}".encode() * (1 + i % 5)
                assert p.get(crypto.blake3(data)) == data


# -- amputate ------------------------------------------------------------------------------

def _write(path: str, *parts: bytes) -> bytes:
    data = b"".join(parts)
    Path(path).write_bytes(data)
    return data


def test_amputate_torn_tail_keeps_the_cut_bytes(path):
    good = _enc(C.blob(b"a")) + _enc(C.commit())
    torn = _enc(C.blob(b"b" * 300))[:700]
    _write(path, good, torn)
    with pytest.raises(CorruptPile) as exc:
        Pile.open(path, writable=False)
    assert exc.value.valid_length == len(good)
    with pytest.raises(CorruptPile):  # the caller's boundary must equal the reader's
        amputate(path, expected=len(good) - 256)
    assert os.path.getsize(path) == len(good) + 700
    res = amputate(path, expected=len(good))
    assert res.truncated and res.valid_length == len(good) and res.valid_after == 0
    assert Path(res.discarded).read_bytes() == torn and res.discarded.endswith(f".discarded-{len(good)}")
    with Pile.open(path) as p:
        assert p.records == 2
    assert not amputate(path).truncated  # nothing more to cut


def test_amputate_refuses_unsupported_record(path):
    data = _write(path, _enc(C.blob(b"a")), b"\xa5" * 16)
    with pytest.raises(UnsupportedRecord):
        amputate(path)
    assert Path(path).read_bytes() == data


def test_amputate_refuses_damage_in_the_middle_unless_told(path):
    recs = [_enc(C.blob(bytes([i]) * 10)) for i in range(5)]
    bad = bytearray(recs[1])
    bad[90] = 1  # scalar pad (reserved) of the second blob
    data = _write(path, recs[0], bytes(bad), *recs[2:])
    with pytest.raises(RepairRefused) as exc:
        amputate(path, expected=512)
    msg = str(exc.value)
    assert "offset 512" in msg and "3 valid-looking" in msg and "\n" not in msg
    assert Path(path).read_bytes() == data
    res = amputate(path, expected=512, discard_after=512)
    assert res.truncated and os.path.getsize(path) == 512
    assert Path(res.discarded).read_bytes() == data[512:]


CRASHER = textwrap.dedent("""
    import sys
    from bytewright.runtime.pile import Pile, amputate
    path, what, step = sys.argv[1], sys.argv[2], sys.argv[3]
    if what == "put":
        p = Pile.open(path)
        p.crash_at = step
        p.put(b"new blob " * 40, timestamp=1)
    else:
        amputate(path, crash_at=step)
""")


@pytest.mark.parametrize("step", ["before-write", "mid-write", "after-write", "after-fsync"])
def test_crash_points_in_append(path, step):
    with Pile.create(path) as p:
        p.put(b"old", timestamp=1)
    old = Path(path).read_bytes()
    r = subprocess.run([PY, "-c", CRASHER, path, "put", step])
    assert r.returncode == 70
    new_handle = crypto.blake3(b"new blob " * 40)
    data = Path(path).read_bytes()
    if step == "mid-write":  # a torn append: the old state, then a tail amputate cuts
        assert data.startswith(old) and len(data) > len(old)
        with pytest.raises(CorruptPile) as exc:
            Pile.open(path)
        assert exc.value.valid_length == len(old)
        amputate(path, expected=len(old))
        assert Path(path).read_bytes() == old
        return
    with Pile.open(path) as p:
        state = set(p.blobs)
    assert state == {crypto.blake3(b"old")} if step == "before-write" else \
        state == {crypto.blake3(b"old"), new_handle}


@pytest.mark.parametrize("step", ["side-written", "side-synced", "truncated"])
def test_crash_points_in_amputate(path, step):
    good = _enc(C.blob(b"a"))
    _write(path, good, _enc(C.blob(b"b"))[:300])
    r = subprocess.run([PY, "-c", CRASHER, path, "amputate", step])
    assert r.returncode == 70
    data = Path(path).read_bytes()
    if data == good:  # new state
        assert step == "truncated"
    else:             # old state: same damage at the same boundary, still repairable
        assert step != "truncated"
        with pytest.raises(CorruptPile) as exc:
            Pile.open(path)
        assert exc.value.valid_length == len(good)
        assert amputate(path, expected=len(good)).truncated
    assert Path(path).read_bytes() == good
    assert Path(path + f".discarded-{len(good)}").exists()


# -- reframe and diagnose ------------------------------------------------------------------

def test_reframe_rewrites_legacy_records_in_current_framing(tmp_path):
    recs = dict((n, v) for n, v, _ in C.record_cases())
    names = ["v1_blob", "v1_branch", "env_blob", "v3_blob", "v3_tombstone", "v4_commit",
             "blob_hello", "commit_golden", "want_blob", "proof_v5_one_edge", "v3_merge",
             "retired_typed_want_assert", "env_branch", "v1_tombstone"]
    src, dest = str(tmp_path / "old.pile"), str(tmp_path / "new.pile")
    _write(src, *[_enc(recs[n]) for n in names])
    res = reframe(src, dest)
    out = list(iter_records(Path(dest).read_bytes()))
    # spec: "Earlier V3 definition-ID collection frames also survive byte-for-byte"; every
    # other record comes out in current framing
    assert [r.name for r in out if r.form != "current"] == ["v3_merge"]
    assert _enc(recs["v3_merge"]) in Path(dest).read_bytes()
    assert not any(r.opaque for r in out)
    # spec: "Retired WANT state is resolved in order once and emitted only as current
    # positive markers": the retired typed tag-3 assert becomes Derive(target, input)
    assert res.blobs == 4 and res.pins == 4 and sum(res.dropped.values()) == 0
    before, after = Pile.open(src), Pile.open(dest)
    assert set(after.blobs) == set(before.blobs)
    for h in before.blobs:
        assert after.get(h) == before.get(h)
    assert after.pins == before.pins and [e[1:] for e in after.pin_log] == [e[1:] for e in before.pin_log]
    assert set(after.collection) == set(before.collection)  # V4 commit == the golden COMMIT
    derive = g.encode_want_request(g.WantRequest(g.WantTag.Derive, g.WantDerive(C.b(2), C.b(3))))
    assert after.wants == before.wants | {derive} and set(after.proofs) == set(before.proofs)
    # spec: blob "insertion timestamps are stamped afresh"; COMMIT and proof frames are
    # copied byte for byte
    assert all(r.value.head.timestamp > C.TS for r in out if r.name == "blob_body")
    for n in ("commit_golden", "want_blob", "proof_v5_one_edge"):
        assert _enc(recs[n]) in Path(dest).read_bytes()


def test_reframe_refuses_opaque_before_writing(tmp_path):
    recs = dict((n, v) for n, v, _ in C.record_cases())
    src, dest = str(tmp_path / "old.pile"), str(tmp_path / "new.pile")
    _write(src, _enc(recs["v1_blob"]), _enc(recs["opaque_unknown_kind"]))
    with pytest.raises(RepairRefused, match="opaque"):
        reframe(src, dest)
    assert not os.path.exists(dest)


def test_diagnose_record_at(path):
    data = _write(path, _enc(C.blob(b"hello")), _enc(C.commit())[:100])
    ok = diagnose(path, 0)
    assert ok["status"] == "ok" and ok["record"] == "blob_body" and ok["blob_hash_ok"] is True
    bad = diagnose(path, 512)
    assert bad["status"] == "CorruptPile" and "512" in bad["error"]
    with pytest.raises(RepairRefused):
        diagnose(path, len(data) + 1)


def test_diagnose_maps_the_file_instead_of_reading_it(tmp_path):
    """A read-only path: diagnosing one record of a 160 MB pile
    touches that record's pages, not the file (``f.read()`` held all 160 MB)."""
    from bytewright.runtime.pile import encode_blob
    path = tmp_path / "big.pile"
    with open(path, "wb") as f:
        for i in range(16):
            f.write(encode_blob(bytes([i]) * 10_000_000, 1_700_000_000_000 + i))
    script = textwrap.dedent(f"""
        import json
        from bytewright.runtime.pile.repair import diagnose
        def hwm():
            for line in open("/proc/self/status"):
                if line.startswith("VmHWM"):
                    return int(line.split()[1]) // 1024
        before = hwm()
        out = diagnose({str(path)!r}, 0)
        print(json.dumps({{"net_mb": hwm() - before, "out": out}}))
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True)
    got = __import__("json").loads(res.stdout)
    assert got["out"]["status"] == "ok" and got["out"]["blob_hash_ok"] is True
    assert got["out"]["payload_length"] == 10_000_000
    assert got["net_mb"] < 80, got  # one 10 MB record and its copies, not the file
    empty = tmp_path / "empty.pile"
    empty.write_bytes(b"")
    assert diagnose(str(empty), 0)["status"] != "ok"  # nothing to map: refused, not a crash


def test_salvage_keeps_every_record_that_verifies(tmp_path):
    from bytewright.runtime.pile import salvage
    recs = [_enc(C.blob(bytes([i]) * 100)) for i in range(6)] + [_enc(C.commit())]
    bad = bytearray(recs[2])
    bad[90] = 1                    # reserved byte: the record no longer decodes
    rot = bytearray(recs[4])
    rot[256] ^= 1                  # payload byte: decodes, but the hash no longer matches
    src, dest = str(tmp_path / "s.pile"), str(tmp_path / "d.pile")
    _write(src, recs[0], recs[1], bytes(bad), recs[3], bytes(rot), recs[5], recs[6], b"\xa5" * 40)
    res = salvage(src, dest)
    assert res.kept == 5
    assert Path(dest).read_bytes() == recs[0] + recs[1] + recs[3] + recs[5] + recs[6]
    assert res.skipped == [(1024, 1536), (2048, 2560), (3328, 3368)]
    with pytest.raises(RepairRefused):
        salvage(src, dest)  # never overwrites

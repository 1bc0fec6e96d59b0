"""HTT spec gaps: each test is built from the audit's reproduction."""

from __future__ import annotations

import zlib

import pytest

from bytewright.generated import htt as g
from bytewright.runtime.errors import ConstraintError, DecodeError, UnsupportedError
from bytewright.runtime.htt import locking, replay
from bytewright.runtime.htt.errors import SemanticError
from bytewright.runtime.htt.store import Store

from .conftest import read, write

P0 = {"semantic_dims": 0, "tail_layout": 0}
WAL = 44  # plain file: header 32 + empty v2 snapshot 12


def _unknown_op_entry(seq: int, op: int, key: bytes, body: bytes, good_crc: bool) -> bytes:
    head = seq.to_bytes(4, "little") + bytes([op]) + len(key).to_bytes(2, "little") + key + body
    crc = zlib.crc32(head) ^ (0 if good_crc else 1)
    return head + crc.to_bytes(4, "little")


# -- unknown op with a valid CRC is an error, not a torn tail (§4) --------------------------

@pytest.mark.parametrize("body", [b"", b"\x01\x02\x03 future payload"])
def test_unknown_op_with_valid_crc_fails_the_open_and_changes_nothing(tmp_path, body):
    p = str(tmp_path / "u.htt")
    with Store.create(p) as s:
        s.put("/a", b"1")
    data = read(p) + _unknown_op_entry(2, 7, b"/a", body, True)
    write(p, data)
    for ro in (True, False):
        with pytest.raises(UnsupportedError, match="unknown op") as exc:
            Store.open(p, readonly=ro)
        assert exc.value.offset == len(data) - len(body) - 11 - 2 + 4 and exc.value.file == p
    assert read(p) == data  # the writer open did not truncate it


def test_unknown_op_with_bad_crc_is_damage_as_before(tmp_path):
    p = str(tmp_path / "u.htt")
    with Store.create(p) as s:
        s.put("/a", b"1")
    write(p, read(p) + _unknown_op_entry(2, 7, b"/a", b"", False))
    with Store.open(p, readonly=True) as s:
        assert s.keys() == ["/a"] and s.scan.damage.reason == "torn tail"


def test_unknown_op_inside_a_block_fails_the_open(tmp_path):
    p = str(tmp_path / "ub.htt")
    with Store.create(p, compression="zstd") as s:
        s.put("/a", b"1")
    good = g.encode_wal_entry(g.WalEntry(2, g.WalOp.DELETE, "/a", None), **P0)
    plain = good + _unknown_op_entry(3, 9, b"", b"xyz", True)
    block = g.encode_wal_block_plain(g.WalBlockPlain(2, plain), algorithm=0)
    write(p, read(p) + block)
    with pytest.raises(UnsupportedError, match="inside a block"):
        Store.open(p, readonly=True)


# -- semantic placement quantizing to all zeros (§7, §7.3) ---------------------------------

def test_placement_that_quantizes_to_all_zeros_is_refused(tmp_path):
    p = str(tmp_path / "q.htt")
    tiny = [0.0] * 16 + [1e-9, 0.0, 0.0, 0.0]  # nonzero, but TQ1.9 rounds it to 0
    with Store.create(p, semantic_dims=20, quantized=True) as s:
        with pytest.raises(SemanticError, match="quantizes to all zeros"):
            s.put("/a", b"", semantic=tiny)
        assert len(s) == 0
        s.put("/a", b"", semantic=[0.0] * 16 + [0.5, 0, 0, 0])
        with pytest.raises(SemanticError, match="quantizes to all zeros"):
            s.set_semantic("/a", tiny)
        assert s.get("/a").semantic[16] == pytest.approx(0.5, abs=1e-3)
    with Store.open(p, readonly=True) as s:
        assert s.get("/a").semantic is not None


# -- a failure applying an entry inside a block: memory == what a reopen gives --------------

def test_apply_failure_inside_a_block_keeps_memory_and_disk_in_step(tmp_path):
    p = str(tmp_path / "ab.htt")
    sem = [0.0] * 16 + [0.5, 0.0, 0.0, 0.0]
    with Store.create(p, semantic_dims=20, quantized=True, compression="zstd",
                      durability="batched", batch_size=3) as s:
        for k in ("/a", "/b", "/c"):
            s.put(k, b"v", semantic=sem)  # one flush: one 3-entry block
    full = read(p)
    layout = {"semantic_dims": 20, "tail_layout": g.SemTailLayout.quantized}
    blk, end = g.decode_wal_block(full, 52, algorithm=0, **layout)
    assert len(blk.entries) == 3 and end == len(full)
    # entry 2 carries a TQ1.9 value outside +-29524 with a valid CRC: it decodes, but
    # applying it fails (ConstraintError from the tail conversion)
    e = blk.entries[1]
    bad_tail = g.TailQuantized([30000, 0, 0, 0])
    entries = [blk.entries[0], g.WalEntry(e.seq, e.op, e.key, g.InsertBody(
        e.body.data, e.body.meta, bad_tail)), blk.entries[2]]
    write(p, full[:52] + g.encode_wal_block(g.WalBlock(entries), algorithm=0, **layout))
    with Store.open(p, readonly=True) as r:
        assert r.keys() == ["/a"] and r.next_seq == 2
        assert r.scan.damage is not None and r.scan.damage.records_after >= 1
    with Store.open(p) as w:
        assert w.keys() == ["/a"] and w.next_seq == 2  # /a counted, not re-used
        w.put("/new", b"n", semantic=sem)
        mem = {v.key: v.data for v in w.iterate()}
        assert w.discarded is not None  # /b and /c verify: their block was kept aside
    with Store.open(p, readonly=True) as r:
        assert {v.key: v.data for v in r.iterate()} == mem
        seqs = [x.seq for x in r.committed_entries()]
        assert seqs == list(range(1, len(seqs) + 1)) and r.scan.damage is None


# -- header flag bits vs version (§2, §9) ---------------------------------------------------

@pytest.mark.parametrize("version,flags,dims,why", [
    (2, g.HeaderFlags(has_semantic=True, meaning_addressed=True), 18, "bit 6"),
    (3, g.HeaderFlags(has_semantic=True, quantized=True), 18, "bit 7"),
    (3, g.HeaderFlags(has_semantic=True), 18, "without flag bit 6"),
])
def test_flag_bits_must_fit_the_version(tmp_path, version, flags, dims, why):
    p = str(tmp_path / "h.htt")
    header = g.FileHeader(version, flags, 4, dims, 1 << 64, 0)
    write(p, g.encode_file_header(header) + bytes(40))
    with pytest.raises(ConstraintError, match=why) as exc:
        Store.open(p, readonly=True)
    assert exc.value.offset == 5 and exc.value.file == p


def test_v4_with_16_or_fewer_dims_and_reserved_algorithm_are_refused(tmp_path):
    p = str(tmp_path / "v4.htt")
    header = g.FileHeader(4, g.HeaderFlags(has_semantic=True, quantized=True), 4, 16,
                          1 << 64, 0)
    write(p, g.encode_file_header(header) + bytes(20))
    with pytest.raises(SemanticError, match="semantic_dims > 16"):
        Store.open(p, readonly=True)
    with Store.create(p, overwrite=True, compression="zstd") as s:
        s.put("/a", b"")
        s.compact()  # a compressed snapshot
        s.put("/b", b"")  # and a WAL block
    bad = bytearray(read(p))
    bad[5] |= 0b110  # algorithm bits 1-2 = 11: reserved
    bad[28:32] = zlib.crc32(bytes(bad[:28])).to_bytes(4, "little")
    write(p, bytes(bad))
    with pytest.raises(DecodeError, match="reserved|unsupported|algorithm"):
        Store.open(p, readonly=True)


# -- §5: a writer never rewrites a written block in place -----------------------------------

def test_damaged_block_repair_matches_the_reader_and_leaves_earlier_bytes(tmp_path):
    """A writer that meets a damaged last block cuts it and re-appends the intact entries
    as a fresh block (docs/recovery.md): the same entries, seqs and order a read-only
    reader recovers, and every byte before the damaged block untouched."""
    p = str(tmp_path / "w.htt")
    with Store.create(p, compression="zstd", durability="batched", batch_size=4) as s:
        s.put("/first", b"f")
        s.flush()
        for i in range(4):
            s.put(f"/k{i}", bytes([i]) * 30)
    full = read(p)
    _, first_end = g.decode_wal_block_plain(full, 52, algorithm=0)
    blk, _ = g.decode_wal_block_plain(full, first_end, algorithm=0)
    plain = bytearray(blk.plain)
    ends = [e for _, e in g.iter_wal_entry(bytes(plain), **P0)]
    plain[ends[2] - 1] ^= 0x10  # entry 3 of the block: CRC broken
    bad = full[:first_end] + g.encode_wal_block_plain(g.WalBlockPlain(4, bytes(plain)),
                                                      algorithm=0)
    write(p, bad)
    with Store.open(p, readonly=True) as r:
        seen = [(e.seq, e.key) for e in r.committed_entries()]
        reader_keys = r.keys()
    assert reader_keys == ["/first", "/k0", "/k1"]
    with Store.open(p) as w:
        assert w.keys() == reader_keys
    after = read(p)
    # no earlier byte touched but the advisory wal_entry_count (§6 rewrites it in place)
    assert after[:WAL] == full[:WAL]
    assert after[52:first_end] == full[52:first_end]
    with Store.open(p, readonly=True) as r:
        assert [(e.seq, e.key) for e in r.committed_entries()][:3] == seen[:3]
        assert r.keys() == reader_keys and r.scan.damage is None


# -- readers take LOCK_SH ------------------------------------------------------------------

def test_readers_take_a_shared_lock(tmp_path, monkeypatch):
    p = str(tmp_path / "r.htt")
    Store.create(p).close()
    calls = []
    real = locking.lock_shared

    def spy(fd, path, *, wait=False):
        calls.append(path)
        return real(fd, path, wait=wait)

    from bytewright.runtime.htt import store as store_mod

    monkeypatch.setattr(store_mod, "lock_shared", spy)
    Store.open(p, readonly=True).close()
    assert calls == [p]


def test_wal_header_size_comes_from_the_generated_layout():
    assert replay.WAL_HEADER_SIZE == len(g.encode_wal_header(g.WalHeader(0, 1)))
    assert replay.HEADER_SIZE == len(g.encode_file_header(
        g.FileHeader(2, g.HeaderFlags(), 4, 0, 1 << 64, 0)))


# -- missing API of the spec ----------------------------------------------------------------

def test_auto_compact_threshold(tmp_path):
    p = str(tmp_path / "ac.htt")
    with Store.create(p, auto_compact_threshold=5) as s:
        for i in range(4):
            s.put(f"/k{i}", b"x")
        assert s.base_seq == 1  # 4 entries: below the threshold
        s.put("/k4", b"x")
        s.wait_for_compaction()  # §6: it runs on a background thread off the writer
        assert s.base_seq == 6 and s.info()["wal_entries"] == 0  # compacted
        s.put("/k5", b"x")
    with Store.open(p, readonly=True) as r:
        assert r.keys() == [f"/k{i}" for i in range(6)] and r.base_seq == 6
    with pytest.raises(ValueError):
        Store.open(p, auto_compact_threshold=-1)


@pytest.mark.parametrize("mode", ["per_op", "batched", "manual"])
def test_subscribe_wal_delivers_after_fsync_and_meets_wal_entries_since(tmp_path, mode):
    p = str(tmp_path / "sub.htt")
    with Store.create(p, durability=mode, batch_size=3) as s:
        s.put("/a", b"1")
        s.flush()
        s.put("/b", b"2")  # committed before the subscription
        got = []
        sub = s.subscribe_wal(got.append)
        since = s.wal_entries_since(1)
        s.put("/c", b"3")
        s.update("/a", b"4")
        if mode == "manual":
            assert got == []  # written, not fsynced: nothing delivered yet
        s.flush()
        seqs = [e.seq for e in since] + [e.seq for e in got]
        assert seqs == list(range(1, s.next_seq))  # no gap, no repeat
        sub.close()
        s.put("/d", b"5")
        s.flush()
        assert got[-1].seq == s.next_seq - 2


def test_subscriber_sees_nothing_before_fsync(tmp_path):
    p = str(tmp_path / "m.htt")
    with Store.create(p, durability="manual") as s:
        got = []
        s.subscribe_wal(got.append)
        s.put("/a", b"1")
        assert got == []  # written, not fsynced
        s.flush()
        assert [e.key for e in got] == ["/a"]


def test_history_delta(tmp_path):
    from bytewright.runtime.htt.history import DeltaKind, HistoryReader

    p = str(tmp_path / "d.htt")
    with Store.create(p, history_retention="archive") as s:
        s.put("/keep", b"k")
        s.put("/gone", b"g")
        s.seal_epoch()
        s.update("/keep", b"k2")
        s.delete("/gone")
        s.put("/new", b"n")
        s.seal_epoch()
        s.compact()
    h = HistoryReader(p)
    d = {x.key: x for x in h.delta(1, 2)}
    assert {k: x.kind for k, x in d.items()} == {
        "/gone": DeltaKind.REMOVED, "/keep": DeltaKind.CHANGED, "/new": DeltaKind.ADDED}
    assert d["/keep"].before.data == b"k" and d["/keep"].after.data == b"k2"
    assert [x.kind for x in h.delta(0, 1)] == [DeltaKind.ADDED, DeltaKind.ADDED]
    assert h.delta(2, 2) == []


def test_gacl_groups_combine_by_max_and_narrow_intersects(tmp_path):
    from bytewright.runtime.fixedpoint import q64_from_float as q
    from bytewright.runtime.htt import gacl

    alice = gacl.Credentials.of_groups({"read": 0.50, "domain": 0.50}, {"read": 0.70})
    assert alice.raw["read"] == q(0.70) and alice.raw["domain"] == q(0.50)
    parent = [0] * 20
    parent[0], parent[1] = q(0.5), q(1.0)  # read [0.5, 1]
    child = [0] * 20
    child[0], child[1] = q(0.25), q(0.8)  # read [0.25, 0.8]
    child[6], child[7] = q(0.4), q(0.6)  # domain: the parent leaves it open
    eff = gacl.narrow(child, parent)
    assert (eff[0], eff[1]) == (q(0.5), q(0.8)) and (eff[6], eff[7]) == (q(0.4), q(0.6))
    disjoint = [0] * 20
    disjoint[0], disjoint[1] = q(0.1), q(0.2)
    eff = gacl.narrow(disjoint, parent)
    assert not gacl.allowed(eff, gacl.Credentials(read=1.0), "read")
    assert not gacl.allowed(eff, gacl.Credentials(read=0.15), "read")
    assert gacl.narrow(child, None) == child
    # end to end: alice reads what her best group allows
    p = str(tmp_path / "g.htt")
    with Store.create(p, semantic_dims=20, gacl=True) as s:
        s.put("/sec", b"s", semantic=gacl.bands_vector(20, read=(0.7, 1.0)))
        s.set_credentials(gacl.Credentials.of_groups({"read": 0.5}))
        assert s.keys() == []
        s.set_credentials(alice)
        assert s.keys() == ["/sec"]


def test_one_flush_of_more_than_64_entries_splits_into_blocks_of_64(tmp_path):
    p = str(tmp_path / "split.htt")
    deep = "/" + "/".join(f"d{i}" for i in range(70))  # 69 ancestors + itself: one flush
    with Store.create(p, compression="zstd") as s:
        s.put(deep, b"leaf")
    buf = read(p)
    sizes, pos = [], 52
    while pos < len(buf):
        blk, pos = g.decode_wal_block(buf, pos, algorithm=0, **P0)
        sizes.append(len(blk.entries))
    assert sizes == [64, 6]
    with Store.open(p, readonly=True) as r:
        assert len(r) == 70 and r.get(deep).data == b"leaf"

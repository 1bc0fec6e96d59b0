"""HTT store runtime: API, replay/recovery, compaction, locking, CLI.

Every test works on real files in tmp_path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zlib

import pytest

from bytewright.generated import htt as g
from bytewright.runtime.errors import ChecksumError, DecodeError
from bytewright.runtime.fixedpoint import q64_from_float
from bytewright.runtime.htt import compaction, wal_writer
from bytewright.runtime.htt.errors import (
    KeyExistsError,
    ReservedKeyError,
    SemanticError,
    SnapshotRequired,
    StoreLocked,
)
from bytewright.runtime.htt.quantized import TailCodec
from bytewright.runtime.htt.state import State
from bytewright.runtime.htt.store import Store

from .conftest import read, write

P0 = {"semantic_dims": 0, "tail_layout": 0}


def state_of(store: Store) -> dict:
    return {v.key: (v.data, v.meta, v.semantic_raw) for v in store.iterate()}


def wal_entries(path: str) -> list[g.WalEntry]:
    with Store.open(path, readonly=True) as s:
        return s.committed_entries()


# -- 1. store API ------------------------------------------------------------------------

EMPTY_01 = bytes.fromhex(
    "485454000208041000000000000000000100000000000000000000006b5b486c"
    "00000000000000000000000000000000" "01000000")


def test_create_empty_file_matches_upstream_golden(tmp_path):
    p = tmp_path / "e.htt"
    Store.create(str(p), semantic_dims=16).close()
    assert read(p) == EMPTY_01  # facts.md §4 01_empty: 52 bytes, header CRC 1816681323


@pytest.mark.parametrize("opts,version,flags", [
    ({}, 2, 0x00),
    ({"semantic_dims": 20, "meaning_addressed": True}, 3, 0x48),
    ({"semantic_dims": 40, "quantized": True}, 4, 0x88),
    ({"semantic_dims": 40, "quantized": True, "meaning_addressed": True}, 4, 0xC8),
    ({"semantic_dims": 20, "compression": "zstd"}, 2, 0x19),
])
def test_create_picks_version_from_features(tmp_path, opts, version, flags):
    p = str(tmp_path / "v.htt")
    Store.create(p, **opts).close()
    header, _ = g.decode_file_header(read(p))
    assert (header.version, header.flags.to_int(), header.node_count) == (version, flags, 0)
    _, wal = _wal_header(p)
    assert (wal.wal_entry_count, wal.wal_base_seq) == (0, 1)


def _wal_header(p):
    with Store.open(p, readonly=True) as s:
        off = s.scan.wal_offset
    return off, g.decode_wal_header(read(p), off)[0]


def test_put_logs_explicit_parents_first_ancestors(tmp_path):
    p = str(tmp_path / "a.htt")
    with Store.create(p) as s:
        s.put("/a/b/c", b"leaf", {"kind": "x"})
        s.put("/a/b/d", b"leaf2")
        with pytest.raises(KeyExistsError):
            s.put("/a/b/c", b"again")
    es = wal_entries(p)
    assert [(e.seq, e.op, e.key) for e in es] == [
        (1, g.WalOp.INSERT, "/a"), (2, g.WalOp.INSERT, "/a/b"),
        (3, g.WalOp.INSERT, "/a/b/c"), (4, g.WalOp.INSERT, "/a/b/d")]
    assert es[0].body.data == b"" and ("content_type", "application/x-directory") in [
        (m.key, m.value) for m in es[0].body.meta]
    with Store.open(p, readonly=True) as s:
        assert s.get("/a").is_directory and s.get("/a/b").is_directory
        assert s.get("/a/b/c").meta == {"kind": "x"}
        assert s.children("/a/b") == ["/a/b/c", "/a/b/d"]
        assert s.children() == ["/a"]


def test_child_index_counters_never_reused(tmp_path):
    p = str(tmp_path / "c.htt")
    with Store.create(p) as s:
        for name in ("x", "y", "z"):
            s.put(f"/p/{name}", b"")
        s.delete("/p/y")
        s.put("/p/w", b"")
        s.put("/top", b"")
        idx = {k: s.reserved_meta(k) for k in s.keys()}
    assert idx["/p"] == [("_child_index", "0")]  # first top-level node gets 0
    assert idx["/top"] == [("_child_index", "1")]
    assert [idx[f"/p/{n}"][0][1] for n in "xzw"] == ["0", "2", "3"]  # y's 1 is not reused
    # reopen: counters are seeded from the stored values
    with Store.open(p) as s:
        s.put("/p/v", b"")
        assert s.reserved_meta("/p/v") == [("_child_index", "4")]
    s = Store.open(p, readonly=True)
    assert s.reserved_meta("/p/v") == [("_child_index", "4")]


def test_reserved_keys_rejected_hidden_and_preserved(tmp_path):
    p = str(tmp_path / "r.htt")
    with Store.create(p) as s:
        with pytest.raises(ReservedKeyError):
            s.put("/n", b"", {"_secret": "1"})
        assert "/n" not in s
        s.put("/n", b"v1", {"a": "1", "B": "2"})
        with pytest.raises(ReservedKeyError):
            s.set_meta("/n", "_child_index", "9")
        with pytest.raises(ReservedKeyError):
            s.update("/n", b"v2", {"_x": "y"})
        s.update("/n", b"v2", {"c": "3"})
        assert s.get("/n").meta == {"c": "3"}
        assert s.reserved_meta("/n") == [("_child_index", "0")]
    upd = [e for e in wal_entries(p) if e.op is g.WalOp.UPDATE][0]
    # the UPDATE (full replacement) carries the reserved pair byte for byte, sorted first
    assert [(m.key, m.value) for m in upd.body.meta] == [("_child_index", "0"), ("c", "3")]
    with Store.open(p) as s:
        s.compact()
        assert s.get("/n").meta == {"c": "3"}
    with Store.open(p, readonly=True) as s:
        assert s.reserved_meta("/n") == [("_child_index", "0")]


def test_update_delete_set_meta_get_iterate(tmp_path):
    p = str(tmp_path / "u.htt")
    with Store.create(p) as s:
        s.put("/d/a", b"1", {"k": "v"})
        s.put("/d/b/c", b"2")
        s.set_meta("/d/a", "k", "w")
        s.set_meta("/d/a", "extra", "e")
        s.update("/d/a", b"11")  # meta=None keeps user metadata
        s.delete("/d/b")  # subtree goes too, logged children first
        assert s.get("/d/b/c") is None and s.get("/d/b") is None
        assert [v.key for v in s.iterate()] == ["/d", "/d/a"]
        assert [v.key for v in s.iterate("/d/a")] == ["/d/a"]
        mem = state_of(s)
    dels = [e.key for e in wal_entries(p) if e.op is g.WalOp.DELETE]
    assert dels == ["/d/b/c", "/d/b"]
    with Store.open(p, readonly=True) as s:
        assert state_of(s) == mem
        assert s.get("/d/a").data == b"11" and s.get("/d/a").meta == {"extra": "e", "k": "w"}


def test_semantic_zero_tail_rules(tmp_path):
    p = str(tmp_path / "z.htt")
    with Store.create(p, semantic_dims=4) as s:
        with pytest.raises(SemanticError):
            s.put("/n", b"", semantic=[0.0, 0.0, 0.0, 0.0])  # explicit origin is rejected
        s.put("/n", b"", semantic=[0.0, 0.5, 0.0, 0.0])
        s.put("/m", b"")
        assert s.get("/m").semantic is None  # zero tail = not set
        assert s.get("/n").semantic == (0.0, 0.5, 0.0, 0.0)
        with pytest.raises(SemanticError):
            s.set_semantic("/n", [0, 0, 0, 0])
        s.set_semantic("/n", None)  # clear
        assert s.get("/n").semantic is None
        s.set_semantic("/m", [1.0, 2.0, 3.0, 4.0])
    sem = [e for e in wal_entries(p) if e.op is g.WalOp.SET_SEMANTIC]
    assert sem[0].body.tail.dims == [0, 0, 0, 0]  # the clear op is the all-zero tail
    with Store.open(p) as s:
        assert s.get("/n").semantic is None and s.get("/m").semantic == (1.0, 2.0, 3.0, 4.0)
        s.compact()
    with Store.open(p, readonly=True) as s:
        assert s.get("/n").semantic is None and s.get("/m").semantic == (1.0, 2.0, 3.0, 4.0)


def test_seal_epoch_speculative_and_restamp(tmp_path):
    p = str(tmp_path / "ep.htt")
    with Store.create(p) as s:
        assert s.seal_epoch() == 1
        s.put("/a", b"")
        assert s.seal_epoch(speculative=True) == 2
    es = [e for e in wal_entries(p) if e.op is g.WalOp.EPOCH]
    assert [(e.key, e.body.epoch_id, e.body.flags.speculative) for e in es] == [
        ("", 1, False), ("", 2, True)]
    with Store.open(p) as s:
        assert s.epoch == 2
        last = s.next_seq - 1
        r = s.compact()
        assert r["restamp"] and r["wal_base_seq"] == last + 1
    off, wal = _wal_header(p)
    assert (wal.wal_entry_count, wal.wal_base_seq) == (1, last + 1)
    (e,) = wal_entries(p)
    assert e.seq == last + 1 and e.body.flags.restamp and e.body.epoch_id == 2
    with Store.open(p, readonly=True) as s:
        assert s.epoch == 2 and s.info()["header_node_count"] == 1
    # no epochs: compaction leaves an empty WAL
    q = str(tmp_path / "ne.htt")
    with Store.create(q) as s:
        s.put("/x", b"")
        s.compact()
    assert wal_entries(q) == [] and _wal_header(q)[1].wal_base_seq == 2


# -- 2. replay and recovery --------------------------------------------------------------

def _raw_wal_file(path, entries, header_count=None, sem=0, layout=0):
    """A WAL-only file holding exactly ``entries`` (as an old writer might have)."""
    Store.create(path, semantic_dims=sem).close()
    head = read(path)[:-8]
    body = b"".join(g.encode_wal_entry(e, semantic_dims=sem, tail_layout=layout)
                    for e in entries)
    count = len(entries) if header_count is None else header_count
    write(path, head + g.encode_wal_header(g.WalHeader(count, 1)) + body)


def _ins(seq, key, data=b"", meta=()):
    return g.WalEntry(seq, g.WalOp.INSERT, key, g.InsertBody(data, list(meta), None))


def test_replay_skips_duplicate_insert_and_synthesizes_ancestors(tmp_path):
    p = str(tmp_path / "old.htt")
    entries = [_ins(1, "/x/y/z", b"deep", [g.MetaPair("k", "v")]),  # pre-2026 writer
               _ins(2, "/x/y/z", b"dup"),  # race: the same INSERT twice
               _ins(3, "/x/q", b"q"),
               g.WalEntry(4, g.WalOp.UPDATE, "/nope", g.UpdateBody(b"", [])),
               g.WalEntry(5, g.WalOp.SET_META, "/x/q", g.MetaPair("m", "1"))]
    _raw_wal_file(p, entries, header_count=999)  # advisory count is wrong on purpose
    with Store.open(p) as s:
        assert s.scan.count == 5 and s.scan.problem is None
        assert s.get("/x/y/z").data == b"deep"
        assert s.get("/x").is_directory and s.get("/x/y").is_directory
        assert s.state.synthesized == 2
        assert s.reserved_meta("/x/q") == [("_child_index", "1")]
        assert s.get("/x/q").meta == {"m": "1"}
        mem = state_of(s)
        s.compact()  # compacted snapshots always contain the ancestors
    with Store.open(p, readonly=True) as s:
        assert state_of(s) == mem and s.state.synthesized == 0


def _build_wal(path, n, **opts):
    with Store.create(path, **opts) as s:
        for i in range(n):
            s.put(f"/k{i}", bytes([i]) * (i + 1), {"i": str(i)})
    return read(path)


def _entry_ends(buf, block):
    """File offsets where each WAL entry (or single-entry block) ends."""
    pos = 52  # 32-byte header + 12-byte empty snapshot + 8-byte WAL header
    ends = []
    if block:
        while pos < len(buf):
            blk, pos = g.decode_wal_block(buf, pos, algorithm=0, **P0)
            assert len(blk.entries) == 1
            ends.append(pos)
    else:
        ends = [end for _, end in g.iter_wal_entry(buf, pos, **P0)]
    return ends


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "blocks"])
def test_truncation_sweep(tmp_path, compressed, caplog):
    p = str(tmp_path / "t.htt")
    n = 6
    full = _build_wal(p, n, compression="zstd" if compressed else None)
    # compressed files have an empty (plain-layout) snapshot too: 52-byte prefix
    ends = _entry_ends(full, compressed)
    assert len(ends) == n and ends[-1] == len(full)
    keys = [f"/k{i}" for i in range(n)]
    cut_file = str(tmp_path / "cut.htt")
    for cut in range(44, len(full) + 1):  # from the WAL header start to the end
        write(cut_file, full[:cut])
        with Store.open(cut_file, readonly=True) as s:
            k = sum(1 for e in ends if e <= cut)
            assert s.keys() == keys[:k], cut
            assert (s.scan.problem is None) == (cut in ends or cut == 52), cut
    assert "WAL truncated" in caplog.text
    # a writer repairs the torn tail and appends after the intact prefix
    cut = ends[2] + 3
    write(cut_file, full[:cut])
    with Store.open(cut_file) as s:
        s.put("/new", b"n")
    with Store.open(cut_file, readonly=True) as s:
        assert s.keys() == keys[:3] + ["/new"] and s.scan.problem is None
        assert s.info()["wal_header_count"] == 4


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "blocks"])
def test_bit_flip_drops_entry_and_rest_never_more(tmp_path, compressed):
    p = str(tmp_path / "f.htt")
    n = 5
    full = _build_wal(p, n, compression="zstd" if compressed else None)
    ends = _entry_ends(full, compressed)
    starts = [52] + ends[:-1]
    flip = str(tmp_path / "flip.htt")
    with Store.open(p, readonly=True) as s:
        original = state_of(s)
    benign = 0
    for i, (a, b) in enumerate(zip(starts, ends, strict=True)):
        for off in range(a, b):
            for bit in (0, 5):
                bad = bytearray(full)
                bad[off] ^= 1 << bit
                write(flip, bytes(bad))
                with Store.open(flip, readonly=True) as s:
                    if compressed and off < a + 2 and s.scan.count == i + 1:
                        # the block's entry-count field, not the entry: the frame still
                        # decompresses and the entry's own CRC holds, so it is kept
                        assert s.keys() == [f"/k{j}" for j in range(i + 1)], (i, off, bit)
                        assert s.scan.problem is not None
                        continue
                    if compressed and s.scan.count == n:
                        # a flip in a redundant zstd frame-header bit (e.g. the
                        # single-segment flag) can decode to the very same entries:
                        # accepted only because every entry CRC still matches
                        assert state_of(s) == original, (i, off, bit)
                        benign += 1
                        continue
                    assert s.scan.count == i, (i, off, bit)
                    assert s.keys() == [f"/k{j}" for j in range(i)]
    assert benign <= n  # at most the odd header bit per block


def test_bad_header_crc_version_and_length_name_file_and_offset(tmp_path):
    p = str(tmp_path / "h.htt")
    good = _build_wal(p, 2)
    bad = bytearray(good)
    bad[6] ^= 1  # dimension byte: header CRC no longer matches
    write(p, bytes(bad))
    with pytest.raises(ChecksumError) as exc:
        Store.open(p, readonly=True)
    assert exc.value.file == p and exc.value.offset == 28
    assert p in str(exc.value) and "offset 28" in str(exc.value)

    bad = bytearray(good)
    bad[4] = 9  # unknown version, with a valid CRC
    bad[28:32] = zlib.crc32(bytes(bad[:28])).to_bytes(4, "little")
    write(p, bytes(bad))
    with pytest.raises(DecodeError) as exc:
        Store.open(p)
    assert exc.value.offset == 4 and p in str(exc.value) and "version" in str(exc.value)

    bad = bytearray(good)
    bad[32:36] = (0xFFFFFFF0).to_bytes(4, "little")  # snap_byte_len far past the file
    write(p, bytes(bad))
    with pytest.raises(DecodeError) as exc:
        Store.open(p, readonly=True)
    assert exc.value.file == p and exc.value.offset == 40 and "offset 40" in str(exc.value)


def test_snapshot_crc_mismatch_fails_open(tmp_path):
    p = str(tmp_path / "s.htt")
    with Store.create(p) as s:
        s.put("/a", b"payload")
        s.compact()
    bad = bytearray(read(p))
    bad[bad.index(b"payload")] ^= 0x20
    write(p, bytes(bad))
    with pytest.raises(ChecksumError) as exc:
        Store.open(p, readonly=True)
    assert "snapshot_crc" in str(exc.value) and p in str(exc.value)


def test_v1_file_is_read_and_upgraded_by_compaction(tmp_path):
    p = str(tmp_path / "v1.htt")
    header = g.FileHeader(1, g.HeaderFlags(), 4, 0, 1 << 64, 1)
    snap = g.SnapshotSection([g.SnapshotEntry("/old", b"o", [g.MetaPair("_child_index", "0")],
                                              None)])
    data = (g.encode_file_header(header)
            + g.encode_snapshot_section(snap, version=1, compressed=False, algorithm=0, **P0)
            + g.encode_wal_header(g.WalHeader(1, 5))
            + g.encode_wal_entry(_ins(5, "/new", b"n"), **P0))
    write(p, data)
    with Store.open(p) as s:
        assert s.keys() == ["/old", "/new"] and s.next_seq == 6
        s.compact()
    assert g.decode_file_header(read(p))[0].version == 2
    with Store.open(p, readonly=True) as s:
        assert s.keys() == ["/old", "/new"]


# -- 3. compression ------------------------------------------------------------------------

@pytest.mark.parametrize("alg", ["zstd", "zlib", "lz4"])
def test_compressed_snapshot_and_wal_blocks(tmp_path, alg):
    p = str(tmp_path / f"{alg}.htt")
    with Store.create(p, semantic_dims=20, compression=alg) as s:
        for i in range(10):
            s.put(f"/c/{i}", b"data" * 50, {"n": str(i)}, semantic=[0.0] * 16 + [(i + 1) / 10] * 4)
        mem = state_of(s)
        s.compact()
        s.put("/after", b"x")
        mem["/after"] = (b"x", {}, None)
    buf = read(p)
    hdr = g.decode_file_header(buf)[0]
    assert hdr.flags.compressed and hdr.flags.wal_block_compressed
    assert hdr.flags.algorithm.name == alg and hdr.node_count == 11
    f, _ = g.decode_htt_file(buf)  # strict whole-file decode agrees
    assert len(f.snapshot.entries) == 11 and len(f.wal.blocks) == 1
    assert b"datadata" not in buf  # the snapshot really is one compressed frame
    with Store.open(p, readonly=True) as s:
        assert state_of(s) == mem


def test_blocks_mirror_flush_batches_and_are_never_rewritten(tmp_path, monkeypatch):
    p = str(tmp_path / "b.htt")
    s = Store.create(p, compression="zstd", durability="batched", batch_size=5)
    for i in range(12):
        s.put(f"/n{i}", b"x")
        if i == 9:
            snap = read(p)
    before = read(p)
    assert before == snap  # the 2 pending entries are not written yet
    s.flush()
    after = read(p)
    s.close()
    wal_off = 44  # WAL header right after the 32-byte header and empty snapshot
    # only the advisory count in the WAL header changed; old blocks are a byte prefix
    assert after[:wal_off] == before[:wal_off] and after[wal_off + 8:len(before)] == \
        before[wal_off + 8:]
    sizes, pos = [], wal_off + 8
    while pos < len(after):
        blk, pos = g.decode_wal_block(after, pos, algorithm=0, **P0)
        sizes.append(len(blk.entries))
    assert sizes == [5, 5, 2]
    assert g.decode_wal_header(after, wal_off)[0].wal_entry_count == 12
    # a put with ancestors is one flush under per_op: one 3-entry block
    q = str(tmp_path / "b2.htt")
    with Store.create(q, compression="zstd") as s2:
        s2.put("/a/b/c", b"")
    blk, _ = g.decode_wal_block(read(q), 52, algorithm=0, **P0)
    assert [e.key for e in blk.entries] == ["/a", "/a/b", "/a/b/c"]


# -- 4. durability and concurrency ---------------------------------------------------------

@pytest.mark.parametrize("mode,expected", [("per_op", 4), ("batched", 1), ("manual", 0)])
def test_fsync_policy(tmp_path, monkeypatch, mode, expected):
    p = str(tmp_path / "d.htt")
    s = Store.create(p, durability=mode, batch_size=4)
    calls = []
    real = os.fsync
    monkeypatch.setattr(wal_writer.os, "fsync", lambda fd: (calls.append(fd), real(fd)))
    for i in range(4):
        s.put(f"/n{i}", b"")
    assert len(calls) == expected
    if mode == "manual":  # written already, durable only on flush
        assert len(wal_entries(p)) == 4
    s.flush()
    assert len(calls) == (expected if mode != "manual" else 1)
    s.close()
    assert len(wal_entries(p)) == 4


def test_compaction_interrupted_before_rename_leaves_original(tmp_path, monkeypatch):
    p = str(tmp_path / "i.htt")
    s = Store.create(p, semantic_dims=20)
    for i in range(5):
        s.put(f"/x/{i}", b"v", semantic=[0.0] * 16 + [0.1 * (i + 1)] * 4)
    s.seal_epoch()
    mem = state_of(s)
    original = read(p)

    def boom(src, dst):
        raise OSError("simulated crash before rename")

    monkeypatch.setattr(compaction.os, "replace", boom)
    with pytest.raises(OSError, match="simulated"):
        s.compact()
    assert read(p) == original
    assert [f for f in os.listdir(tmp_path) if f != "i.htt"] == []  # temp file removed
    with Store.open(p, readonly=True) as r:
        assert state_of(r) == mem
    monkeypatch.undo()
    s.put("/y", b"still writable")  # the session survived the failed compaction
    s.compact()
    s.close()
    with Store.open(p, readonly=True) as r:
        assert r.get("/y").data == b"still writable" and len(r) == len(mem) + 1


_CONTENDER = textwrap.dedent("""
    import sys
    from bytewright.runtime.htt.store import Store
    from bytewright.runtime.htt.errors import StoreLocked
    path = sys.argv[1]
    try:
        Store.open(path).close()
        print("GOT-LOCK")
    except StoreLocked as exc:
        print("LOCKED:", exc)
    r = Store.open(path, readonly=True)
    print("READER-SEES", len(r))
""")


def test_second_writer_fails_fast_across_processes(tmp_path):
    p = str(tmp_path / "l.htt")
    s = Store.create(p)
    s.put("/held", b"")

    def contend():
        out = subprocess.run([sys.executable, "-c", _CONTENDER, p], capture_output=True,
                             text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        return out.stdout

    out = contend()
    assert "LOCKED:" in out and p in out and "another process holds the lock" in out
    assert "READER-SEES 1" in out  # readers still work (lock-free degraded mode)
    with pytest.raises(StoreLocked):  # same process, second session: also refused
        Store.open(p)
    s.compact()  # the lock survives the atomic rename
    assert "LOCKED:" in contend()
    s.close()
    out = contend()
    assert "GOT-LOCK" in out and "READER-SEES 1" in out


# -- round trips ---------------------------------------------------------------------------

@pytest.mark.parametrize("opts", [
    {},
    {"semantic_dims": 20},
    {"semantic_dims": 20, "compression": "zstd"},
    {"semantic_dims": 40, "quantized": True},
    {"semantic_dims": 40, "quantized": True, "gacl": True, "compression": "zstd"},
    {"semantic_dims": 20, "meaning_addressed": True},
], ids=["plain", "sem", "zstd", "v4", "v4-gacl", "v3"])
def test_round_trip_wal_only_and_snapshot(tmp_path, opts):
    p = str(tmp_path / "rt.htt")
    sem = opts.get("semantic_dims", 0)
    s = Store.create(p, **opts)
    for i in range(30):
        vec = None
        if sem and i % 3:
            vec = [0.0] * sem
            for d in range(16, sem):
                vec[d] = ((i * 7 + d) % 19) / 19 - 0.3 + 1e-7 * i
        s.put(f"/r/g{i % 4}/n{i}", f"payload-{i}".encode(), {"tier": str(i % 5), "é": "ü"},
              semantic=vec)
    s.update("/r/g1/n1", b"updated", {"new": "meta"})
    s.set_meta("/r/g2/n2", "tier", "x")
    s.delete("/r/g3")
    if sem:
        s.set_semantic("/r/g0/n4", None)
    s.seal_epoch()
    mem = state_of(s)
    s.close()
    with Store.open(p, readonly=True) as r:  # WAL-only path
        assert state_of(r) == mem
    with Store.open(p) as w:
        w.compact()
    with Store.open(p, readonly=True) as r:  # snapshot path
        assert state_of(r) == mem and r.epoch == 1
        assert r.info()["header_node_count"] == len(mem)


# -- 5. snapshot order -----------------------------------------------------------------------

def _snapshot_keys(p):
    f, _ = g.decode_htt_file(read(p))
    return f, [e.key for e in f.snapshot.entries]


def test_snapshot_order_insertion_without_user_dims(tmp_path):
    p = str(tmp_path / "o.htt")
    with Store.create(p, semantic_dims=16) as s:
        for k in ("/z", "/a/q", "/m", "/a/b"):
            s.put(k, b"")
        s.compact()
    _, keys = _snapshot_keys(p)
    assert keys == ["/z", "/a", "/a/q", "/m", "/a/b"]


def test_snapshot_order_depth_hilbert_key_with_user_dims(tmp_path):
    from bytewright.runtime.htt.ordering import is_parents_first, node_hilbert

    p = str(tmp_path / "h.htt")
    with Store.create(p, semantic_dims=18) as s:
        for i in range(20):
            s.put(f"/b{i % 3}/n{i:02d}", b"", semantic=[0.0] * 16 + [(i * 37 % 20 + 1) / 21,
                                                                        (i * 11 % 20) / 20])
        s.compact()
        nodes = {n.key: n for n in s.state.nodes.values()}
        bounds = s.bounds
    _, keys = _snapshot_keys(p)
    assert is_parents_first(keys)
    expected = sorted(nodes, key=lambda k: (k.count("/"), node_hilbert(nodes[k], bounds), k))
    assert keys == expected
    assert keys != sorted(keys, key=lambda k: (k.count("/"), k))  # the curve reorders


def test_v3_meaning_addressed_global_hilbert_order(tmp_path):
    from bytewright.runtime.htt.ordering import node_hilbert

    p = str(tmp_path / "v3.htt")
    with Store.create(p, semantic_dims=17, meaning_addressed=True,
                      semantic_bounds=(0.0, 10.0)) as s:
        for i in range(12):
            s.put(f"/d/n{i}", b"", semantic=[0.0] * 16 + [10.0 - i * 0.8])
        s.put("/p", b"", semantic=[0.0] * 16 + [9.0])
        s.put("/p/c", b"", semantic=[0.0] * 16 + [0.5])  # a child nearer the origin
        mem = state_of(s)
        s.compact()
        nodes = dict(s.state.nodes)
    f, keys = _snapshot_keys(p)
    assert f.header.version == 3 and [(b.min, b.max) for b in f.bounds.bounds] == [(0.0, 10.0)]
    hil = [node_hilbert(nodes[k], [(0.0, 10.0)]) for k in keys]
    assert hil == sorted(hil) and keys[0] == "/d"  # unset placements normalize to 0
    assert keys.index("/p/c") < keys.index("/p")  # pure Hilbert: not parents-first on disk
    with Store.open(p, readonly=True) as r:  # readers depth-sort before replay
        assert state_of(r) == mem and set(r.children("/d")) == {f"/d/n{i}" for i in range(12)}


# -- 6. quantized tails and GACL -------------------------------------------------------------

def test_quantized_reject_dont_saturate_and_canonicalize(tmp_path):
    from bytewright.runtime.fixedpoint import tq19_canonical

    p = str(tmp_path / "q.htt")
    with Store.create(p, semantic_dims=20, quantized=True) as s:
        with pytest.raises(SemanticError, match="TQ1.9"):
            s.put("/big", b"", semantic=[0.0] * 16 + [1.6, 0, 0, 0])
        with pytest.raises(SemanticError, match="reserved"):
            s.put("/res", b"", semantic=[0.5] + [0.0] * 15 + [0.1, 0, 0, 0])
        assert "/big" not in s and "/res" not in s and s.next_seq == 1
        v = 0.123456789
        s.put("/q", b"", semantic=[0.0] * 16 + [v, -v, 1.4998, 0])
        got = s.get("/q").semantic_raw
        raw = q64_from_float(v)
        assert got[16] == tq19_canonical(raw) != raw and got[17] == -got[16]
        mem = state_of(s)
    ins = wal_entries(p)[0]
    assert isinstance(ins.body.tail, g.TailQuantized) and len(ins.body.tail.user) == 4
    with Store.open(p) as s:
        assert state_of(s) == mem
        s.compact()
    with Store.open(p, readonly=True) as s:
        assert state_of(s) == mem
    assert len(read(p)) < 200  # 8-byte tails, not 320


def test_quantized_gacl_keeps_reserved_region(tmp_path):
    codec = TailCodec(20, g.SemTailLayout.quantized_gacl)
    from bytewright.runtime.fixedpoint import tq19_canonical

    raw = [q64_from_float(0.3)] + [0] * 15 + [q64_from_float(0.5)] + [0] * 3
    tail = codec.to_disk(raw)
    assert isinstance(tail, g.TailQuantizedGacl) and tail.reserved[0] == raw[0]
    # reserved (band) dims stay full width; user dims are canonicalized to TQ1.9
    assert codec.from_disk(tail) == raw[:16] + [tq19_canonical(raw[16])] + [0] * 3
    assert codec.canonical(codec.from_disk(tail)) == codec.from_disk(tail)


def _gacl_store(p, **kw):
    from bytewright.runtime.htt.gacl import bands_vector

    s = Store.create(p, semantic_dims=16, gacl=True, **kw)
    s.put("/pub", b"open")
    s.put("/eng", b"e", semantic=bands_vector(16, read=(0.5, 1.0), write=(0.85, 1.0)))
    s.put("/eng/doc", b"d", semantic=bands_vector(16, read=(0.5, 1.0), write=(0.85, 1.0)))
    return s


def test_gacl_filters_reads_writes_and_listings(tmp_path):
    from bytewright.runtime.htt.errors import AccessDenied

    p = str(tmp_path / "g.htt")
    s = _gacl_store(p)
    s.set_credentials(read=0.3)
    assert s.children() == ["/pub"] and s.keys() == ["/pub"]
    with pytest.raises(AccessDenied):
        s.get("/eng")
    s.set_credentials(read=0.7)
    assert s.get("/eng/doc").data == b"d" and s.children("/eng") == ["/eng/doc"]
    with pytest.raises(AccessDenied):
        s.update("/eng/doc", b"x")
    with pytest.raises(AccessDenied):
        s.put("/eng/new", b"")
    s.set_credentials(read=0.7, write=0.9)
    s.update("/eng/doc", b"x")
    s.clear_credentials()  # no credentials, not fail-closed: full access
    assert len(s.keys()) == 3 and s.get("/eng/doc").data == b"x"
    s.close()
    r = Store.open(p, readonly=True, gacl_fail_closed=True)
    assert r.keys() == [] and r.children() == []
    with pytest.raises(AccessDenied):
        r.get("/pub")
    r.set_credentials(read=0.6)
    assert r.keys() == ["/pub", "/eng", "/eng/doc"]
    w = Store.open(p, gacl_fail_closed=True)
    with pytest.raises(AccessDenied):
        w.put("/other", b"")
    w.close()


# -- 7. history sidecars ---------------------------------------------------------------------

def test_history_sidecars_epochs_as_of_trajectory(tmp_path, monkeypatch):
    from bytewright.runtime.htt.history import HistoryReader, sidecar_paths

    p = str(tmp_path / "hist.htt")
    s = Store.create(p, history_retention="archive")
    s.put("/doc", b"v1")
    s.seal_epoch()
    s.update("/doc", b"v2")
    s.seal_epoch()
    assert s.compact()["archived"] == [p + ".h000001"]
    s.update("/doc", b"v3")
    s.seal_epoch(speculative=True)
    real_replace = os.replace

    def crash_main_rename(src, dst):
        if dst == p:
            raise OSError("crash")
        real_replace(src, dst)

    monkeypatch.setattr(compaction.os, "replace", crash_main_rename)
    with pytest.raises(OSError):  # crash after archiving, before the main rename
        s.compact()
    monkeypatch.undo()
    assert os.path.exists(p + ".h000002")
    s.compact()  # re-archives the same span as h000003; readers dedupe by seq
    s.put("/doc2", b"live")
    s.close()
    assert [os.path.basename(x) for x in sidecar_paths(p)] == [
        "hist.htt.h000001", "hist.htt.h000002", "hist.htt.h000003"]
    seg, _ = g.decode_sidecar_segment(read(p + ".h000001"))
    assert (seg.version, seg.first_seq, seg.end_seq) == (1, 1, 5)
    h = HistoryReader(p)
    assert [(e.epoch_id, e.speculative) for e in h.epochs()] == [(1, False), (2, False),
                                                                    (3, True)]
    assert h.as_of(1).nodes["/doc"].data == b"v1"
    assert h.as_of(2).nodes["/doc"].data == b"v2"
    assert "/doc2" not in h.as_of(3).nodes
    traj = h.trajectory("/doc")
    assert [(t.op, t.data, t.epoch) for t in traj] == [
        ("INSERT", b"v1", 0), ("UPDATE", b"v2", 1), ("UPDATE", b"v3", 2)]
    seqs = [e.seq for e in h.entries]
    assert seqs == sorted(set(seqs)) and seqs[0] == 1
    for side in sidecar_paths(p):  # deleting the sidecars leaves a plain, valid file
        os.unlink(side)
    with Store.open(p, readonly=True) as r:
        assert r.get("/doc").data == b"v3" and r.epoch == 3


def test_history_sidecar_v2_for_quantized(tmp_path):
    from bytewright.runtime.htt.history import HistoryReader

    p = str(tmp_path / "hq.htt")
    with Store.create(p, semantic_dims=20, quantized=True, history_retention="archive") as s:
        s.put("/a", b"", semantic=[0.0] * 16 + [0.5, 0, 0, 0.25])
        s.seal_epoch()
        s.compact()
    seg, _ = g.decode_sidecar_segment(read(p + ".h000001"))
    assert seg.version == 2 and seg.layout.quantized and not seg.layout.gacl
    from bytewright.runtime.fixedpoint import tq19_canonical

    assert HistoryReader(p).as_of(1).nodes["/a"].tail[16] == tq19_canonical(q64_from_float(0.5))


# -- 8. replication --------------------------------------------------------------------------

def test_wal_entries_since_and_snapshot_required(tmp_path):
    p = str(tmp_path / "prim.htt")
    q = str(tmp_path / "rep.htt")
    prim = Store.create(p, durability="batched", batch_size=64)
    rep = Store.create(q)
    prim.put("/a/b", b"1")
    assert prim.wal_entries_since(1) == []  # not committed (fsynced) yet
    prim.flush()
    got = prim.wal_entries_since(1)
    assert [e.seq for e in got] == [1, 2]
    rep.replicate(got)
    prim.put("/a/c", b"2")
    prim.set_meta("/a/b", "k", "v")
    prim.flush()
    more = prim.wal_entries_since(rep.next_seq)
    assert [e.seq for e in more] == [3, 4]
    rep.replicate(more)
    assert state_of(rep) == state_of(prim)
    prim.compact()
    with pytest.raises(SnapshotRequired) as exc:
        prim.wal_entries_since(3)
    assert exc.value.base_seq == 5
    assert prim.wal_entries_since(5) == []
    prim.close()
    rep.close()
    with Store.open(q, readonly=True) as r, Store.open(p, readonly=True) as pp:
        assert state_of(r) == state_of(pp)


# -- 9. CLI ----------------------------------------------------------------------------------

def test_cli_info_dump_verify_compact(tmp_path, capsys):
    from bytewright.cli.main import main

    p = str(tmp_path / "cli.htt")
    with Store.create(p, semantic_dims=4) as s:
        s.put("/a/b", b"hello", {"k": "v"}, semantic=[1.0, 0, 0, 0])
        s.seal_epoch()
    assert main(["htt", "info", p, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["live_nodes"] == 2 and info["wal_entries"] == 3 and info["current_epoch"] == 1
    assert main(["htt", "info", p]) == 0
    assert "live nodes 2" in capsys.readouterr().out
    assert main(["htt", "dump", p, "--json"]) == 0
    dump = json.loads(capsys.readouterr().out)
    assert dump["nodes"][1] == {"key": "/a/b", "data_hex": b"hello".hex(), "meta": [["k", "v"]],
                                "semantic": [1.0, 0.0, 0.0, 0.0]}
    assert main(["htt", "verify", p]) == 0
    assert "OK" in capsys.readouterr().out
    assert main(["htt", "compact", p, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["node_count"] == 2
    with open(p, "ab") as fh:
        fh.write(b"\x07torn")
    assert main(["htt", "verify", p, "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert not out["ok"] and "truncated" in out["problems"][0]
    bad = bytearray(read(p))
    bad[0] = 0
    write(p, bytes(bad))
    assert main(["htt", "info", p]) == 1  # corrupt data (cli/common.py exit codes)
    assert p in capsys.readouterr().err
    assert main(["htt", "info", p + ".missing"]) == 3  # a path that cannot be read
    assert p in capsys.readouterr().err


def test_bench_smoke():
    from bytewright.runtime.htt.bench import bench_htt_store

    r = bench_htt_store(300, 200)
    assert r["replay_entries"] == 300 and r["compact_nodes"] == 200
    assert r["replay_entries_per_s"] > 0 and 0 < r["replay_vs_decode_only"]


def test_state_apply_matches_store_for_every_op(tmp_path):
    """The writer and replay share State.apply: replaying the file's own entries into a
    fresh State reproduces the live store exactly."""
    p = str(tmp_path / "s.htt")
    with Store.create(p, semantic_dims=2) as s:
        s.put("/a/b", b"1", semantic=[0.5, 0.5])
        s.set_semantic("/a/b", [0.25, 0])
        s.put("/a/c", b"2")
        s.delete("/a/c")
        s.update("/a/b", b"3", {"z": "1"})
        live = {k: (n.data, n.meta, n.tail) for k, n in s.state.nodes.items()}
    st = State(TailCodec(2, 0))
    for e in wal_entries(p):
        st.apply(e)
    assert {k: (n.data, n.meta, n.tail) for k, n in st.nodes.items()} == live


def test_bit_flip_inside_a_multi_entry_block_keeps_the_entries_before_it(tmp_path):
    """Per-entry CRC and sequence rules apply inside blocks (facts §3.5)."""
    p = str(tmp_path / "m.htt")
    with Store.create(p, compression="zstd", durability="batched", batch_size=5) as s:
        for i in range(5):
            s.put(f"/k{i}", bytes([i]) * 40, {"i": str(i)})  # one flush: a 5-entry block
    full = read(p)
    blk, end = g.decode_wal_block_plain(full, 52, algorithm=0)
    assert blk.block_entry_count == 5 and end == len(full)
    entries = list(g.iter_wal_entry(blk.plain, **P0))
    for k in range(5):
        # rebuild the block with entry k's CRC broken, as a corrupt writer would leave it
        plain = bytearray(blk.plain)
        stop = entries[k][1]
        plain[stop - 1] ^= 0x40
        bad = g.encode_wal_block_plain(g.WalBlockPlain(5, bytes(plain)), algorithm=0)
        write(p, full[:52] + bad)
        with Store.open(p, readonly=True) as s:
            assert s.keys() == [f"/k{j}" for j in range(k)], k
            assert s.scan.problem is not None
        with Store.open(p) as s:  # a writer keeps them too, re-appending a fresh block
            s.put("/after", b"x")
        with Store.open(p, readonly=True) as s:
            assert s.keys() == [f"/k{j}" for j in range(k)] + ["/after"], k
            assert s.scan.problem is None

"""HTT golden fixtures as field values.

``write.py`` encodes each case into ``fixtures/htt/<name>.hex``; the tests re-encode
every case and require the stored bytes to match, so the fixtures stay reproducible
from these values. Two cases are upstream bytes from facts.md (``01_empty``,
``02_structural_only``) and are also compared against the hex given there.
"""

from __future__ import annotations

from fractions import Fraction

from bytewright.generated import htt as h
from bytewright.runtime.fixedpoint import Q64_ONE, q64_from_fraction, tq19_from_q64

Alg = h.CompressionAlgorithm
Op = h.WalOp


def flags(**bits) -> h.HeaderFlags:
    f = h.HeaderFlags()
    for k, v in bits.items():
        setattr(f, k, v)
    return f


def header(version=2, sem=0, node_count=0, **bits) -> h.FileHeader:
    bits.setdefault("has_semantic", sem > 0)
    return h.FileHeader(version=version, flags=flags(**bits), dimension=4, semantic_dims=sem,
                        tau=Q64_ONE, node_count=node_count)


def meta(*pairs: tuple[str, str]) -> list[h.MetaPair]:
    return [h.MetaPair(k, v) for k, v in sorted(pairs)]


def q(x) -> int:
    return q64_from_fraction(Fraction(x))


def full_tail(sem: int, values: dict[int, object]) -> h.TailFull:
    return h.TailFull([q(values.get(i, 0)) for i in range(sem)])


def quant_tail(sem: int, user: list) -> h.TailQuantized:
    return h.TailQuantized([tq19_from_q64(q(x)) for x in user] + [0] * (sem - 16 - len(user)))


def gacl_tail(sem: int, bands: list, user: list) -> h.TailQuantizedGacl:
    reserved = [q(x) for x in bands] + [0] * (min(sem, 16) - len(bands))
    return h.TailQuantizedGacl(reserved, [tq19_from_q64(q(x)) for x in user]
                               + [0] * (sem - 16 - len(user)))


def directory(key: str, child_index: int, tail=None) -> h.SnapshotEntry:
    return h.SnapshotEntry(key, b"", meta(("_child_index", str(child_index)),
                                          ("content_type", "application/x-directory")), tail)


def file(path_header, snapshot_entries, wal_entries=(), blocks=None, base_seq=1,
         bounds=None) -> h.HttFile:
    wal = h.WalSection(h.WalHeader(len(wal_entries) if blocks is None else
                                   sum(len(b.entries) for b in blocks), base_seq),
                       None if blocks is not None else list(wal_entries), blocks)
    return h.HttFile(path_header, bounds, h.SnapshotSection(list(snapshot_entries)), wal)


def wal_all_ops(sem: int, tail) -> list[h.WalEntry]:
    """One entry per op (INSERT of a dir + leaf, UPDATE, SET_META, SET_SEMANTIC, DELETE, EPOCHs)."""
    return [
        h.WalEntry(1, Op.INSERT, "/docs", h.InsertBody(b"", meta(
            ("content_type", "application/x-directory")), tail(None))),
        h.WalEntry(2, Op.INSERT, "/docs/a", h.InsertBody(b"hello", meta(("kind", "note")),
                                                         tail(1))),
        h.WalEntry(3, Op.UPDATE, "/docs/a", h.UpdateBody(b"hello, world", meta(
            ("kind", "note"), ("lang", "en")))),
        h.WalEntry(4, Op.SET_META, "/docs/a", h.MetaPair("tier", "2")),
        h.WalEntry(5, Op.SET_SEMANTIC, "/docs/a", h.SetSemanticBody(tail(2))),
        h.WalEntry(6, Op.EPOCH, "", h.EpochBody(1, h.EpochFlags())),
        h.WalEntry(7, Op.DELETE, "/docs/a", None),
        h.WalEntry(8, Op.EPOCH, "", h.EpochBody(2, h.EpochFlags(speculative=True))),
        h.WalEntry(9, Op.SET_SEMANTIC, "/docs", h.SetSemanticBody(tail(None))),
    ]


def cases() -> list[tuple[str, str, dict, object, str]]:
    """(name, record, params, value, doc) for every HTT fixture."""
    out = []

    def add(name, record, value, doc, **params):
        out.append((name, record, params, value, doc))

    add("01_empty", "htt_file", file(header(sem=16), []),
        "Upstream corpus 01_empty: empty v2 store, 16 semantic dims (52 bytes).")
    add("empty_v1", "htt_file", file(header(version=1, sem=0), []),
        "Empty version-1 store: no snapshot CRC (48 bytes).")
    plain = [directory("/plain", 0)] + [
        h.SnapshotEntry(f"/plain/node_{i:02d}", f"payload-{i}".encode(),
                        meta(("_child_index", str(i)), ("kind", "structural")), None)
        for i in range(6)]
    add("02_structural_only", "htt_file", file(header(sem=0, node_count=7), plain, base_seq=8),
        "Upstream corpus 02_structural_only (bytes 0..509 from facts.md); the WAL header's\n"
        "wal_base_seq is not published upstream: 8 (= 7 inserts + 1) is assumed.")
    sem = 16
    add("wal_all_ops_v2", "htt_file",
        file(header(sem=sem), [], wal_all_ops(sem, lambda k: full_tail(sem, {} if k is None else {
            0: Fraction(1, 4), 1: 1, 16 % sem: Fraction(k, 8)}))),
        "v2 plain store, empty snapshot, every WAL op including EPOCH with SPECULATIVE\n"
        "and a SET_SEMANTIC with an all-zero tail (the clear operation).")
    v1_entries = [directory("/a", 0), h.SnapshotEntry("/a/b", b"\x00\x01\xff", meta(
        ("_child_index", "0"), ("note", "grüße")), None)]
    add("v1_with_snapshot", "htt_file", file(header(version=1, node_count=2), v1_entries, [
        h.WalEntry(3, Op.DELETE, "/a/b", None)], base_seq=3),
        "Version-1 store with a snapshot (no snapshot CRC) and one DELETE; non-ASCII metadata.")
    sem = 20
    tree = [directory("/tree", 0, full_tail(sem, {}))] + [
        h.SnapshotEntry(f"/tree/leaf_{i:02d}", f"payload-{i * 7:04d}".encode(),
                        meta(("_child_index", str(i)), ("kind", "leaf"), ("tier", str(i % 5))),
                        full_tail(sem, {16 + d: Fraction((i + d) % 32, 32) for d in range(4)}))
        for i in range(4)]
    zstd_hdr = header(sem=sem, node_count=5, compressed=True, algorithm=Alg.zstd,
                      wal_block_compressed=True)
    blocks = [h.WalBlock([h.WalEntry(6, Op.SET_META, "/tree/leaf_00", h.MetaPair("tier", "9"))]),
              h.WalBlock([h.WalEntry(7, Op.INSERT, "/tree/leaf_04", h.InsertBody(
                  b"late", meta(("kind", "leaf")), full_tail(sem, {16: Fraction(1, 2)}))),
                  h.WalEntry(8, Op.DELETE, "/tree/leaf_01", None)])]
    add("zstd_compressed", "htt_file", file(zstd_hdr, tree, blocks=blocks, base_seq=6),
        "zstd: snapshot as one frame (compressed_len + frame) and WAL blocks of 1 and 2\n"
        "entries (flags 0x19, like upstream 04_zstd), 20 semantic dims.")
    zlib_hdr = header(sem=sem, node_count=5, compressed=True, algorithm=Alg.zlib,
                      wal_block_compressed=True)
    add("zlib_compressed", "htt_file", file(zlib_hdr, tree, blocks=blocks[:1], base_seq=6),
        "zlib-wrapped deflate snapshot frame and one WAL block (readers also accept raw deflate).")
    lz4_hdr = header(sem=sem, node_count=5, compressed=True, algorithm=Alg.lz4,
                     wal_block_compressed=True)
    add("lz4_compressed", "htt_file", file(lz4_hdr, tree, blocks=blocks[1:], base_seq=7),
        "lz4 frame snapshot and one WAL block.")
    sem = 18
    bounds = h.BoundsSection([h.BoundPair(0.0, 1.0), h.BoundPair(0.0, 1.0)])
    v3 = [directory("/m", 0, full_tail(sem, {}))] + [
        h.SnapshotEntry(f"/m/{n}", n.encode(), meta(("_child_index", str(i))),
                        full_tail(sem, {16: Fraction(x, 8), 17: Fraction(y, 8)}))
        for i, (n, x, y) in enumerate([("p", 1, 1), ("q", 2, 7), ("r", 6, 6)])]
    add("v3_meaning_addressed", "htt_file",
        file(header(version=3, sem=sem, node_count=4, meaning_addressed=True), v3, [
            h.WalEntry(5, Op.SET_SEMANTIC, "/m/p", h.SetSemanticBody(full_tail(sem, {
                16: Fraction(3, 8), 17: Fraction(1, 8)})))], base_seq=5, bounds=bounds),
        "v3 meaning-addressed: bounds section (2 user dims, (0,1) each) after the header.")
    sem = 20
    qv4 = [directory("/q", 0, quant_tail(sem, []))] + [
        h.SnapshotEntry(f"/q/n{i}", b"x" * i, meta(("_child_index", str(i))),
                        quant_tail(sem, [Fraction(i + 1, 3), Fraction(-i, 7), Fraction(1, 19683)]))
        for i in range(3)]
    add("v4_quantized", "htt_file",
        file(header(version=4, sem=sem, node_count=4, quantized=True), qv4, [
            h.WalEntry(5, Op.INSERT, "/q/n3", h.InsertBody(b"", [], quant_tail(sem, [
                Fraction(29524, 19683), Fraction(-29524, 19683)]))),
            h.WalEntry(6, Op.SET_SEMANTIC, "/q/n0", h.SetSemanticBody(quant_tail(sem, [])))],
             base_seq=5),
        "v4 quantized tails without GACL (flags 0x88): (20-16) x TQ1.9 = 8-byte tails,\n"
        "reserved region elided; includes the extreme values +-29524.")
    bands = [Fraction(1, 2), 1, Fraction(17, 20), 1, 0, 1, Fraction(2, 5), Fraction(3, 5)]
    gv4 = [directory("/g", 0, gacl_tail(sem, [], []))] + [
        h.SnapshotEntry("/g/secret", b"s3cr3t", meta(("_child_index", "0")),
                        gacl_tail(sem, bands, [Fraction(1, 3)]))]
    add("v4_quantized_gacl", "htt_file",
        file(header(version=4, sem=sem, node_count=2, quantized=True, gacl=True), gv4, [
            h.WalEntry(3, Op.SET_SEMANTIC, "/g/secret", h.SetSemanticBody(
                gacl_tail(sem, bands, [Fraction(-1, 3)])))], base_seq=3),
        "v4 quantized with GACL (flags 0xA8): 16 x Q64.64 reserved bands + 4 x TQ1.9.")
    sem = 16
    add("sidecar_v1", "sidecar_segment", h.SidecarSegment(1, sem, None, 1, 4, [
        h.WalEntry(1, Op.INSERT, "/h", h.InsertBody(b"v1", [], full_tail(sem, {}))),
        h.WalEntry(2, Op.UPDATE, "/h", h.UpdateBody(b"v2", [])),
        h.WalEntry(3, Op.EPOCH, "", h.EpochBody(1, h.EpochFlags()))]),
        "History segment v1 (HTTH): zstd of plain WAL entries seq 1..3, full tails.")
    sem = 20
    add("sidecar_v2", "sidecar_segment", h.SidecarSegment(2, sem, h.SidecarLayout(True, False),
                                                          10, 12, [
        h.WalEntry(10, Op.INSERT, "/h", h.InsertBody(b"", [], quant_tail(sem, [Fraction(1, 2)]))),
        h.WalEntry(11, Op.EPOCH, "", h.EpochBody(3, h.EpochFlags(restamp=True)))]),
        "History segment v2 for a quantized file: layout byte 0x01, TQ1.9 tails inside.")
    # single records, so each op's bytes can be reviewed on their own
    sem = 16
    for entry in wal_all_ops(sem, lambda k: full_tail(sem, {} if k is None else {0: k})):
        add(f"wal_entry_{entry.op.name.lower()}_{entry.seq}", "wal_entry", entry,
            f"One {entry.op.name} WAL entry with 16 full-width semantic dims.",
            semantic_dims=sem, tail_layout=0)
    add("file_header_v4_flags", "file_header",
        header(version=4, sem=40, node_count=100, quantized=True, gacl=True,
               compressed=True, algorithm=Alg.zstd, wal_block_compressed=True),
        "A 32-byte header with flags 0xB9 (compressed zstd, semantic, blocks, GACL, quantized).")
    return out

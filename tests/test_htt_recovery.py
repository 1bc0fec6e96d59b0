"""HTT recovery that never loses intact data (docs/recovery.md).

Torn tail vs damage in the middle, the side file a writer keeps before it cuts, the
refusing ``htt compact``, ``--discard-after``, ``htt salvage``, the recovery modes, and
the truncation / bit-flip sweeps with exact expectations. Real files in tmp_path.
"""

from __future__ import annotations

import os

import pytest

from bytewright.cli.main import main
from bytewright.generated import htt as g
from bytewright.runtime.htt import recovery, salvage
from bytewright.runtime.htt.errors import WalDamaged
from bytewright.runtime.htt.store import Store

from .conftest import read, write

P0 = {"semantic_dims": 0, "tail_layout": 0}
PREFIX = 44  # header 32 + empty v2 snapshot 12: the WAL header of a plain file


def build(path: str, n: int = 10, **create) -> bytes:
    with Store.create(path, **create):
        pass
    with Store.open(path) as s:
        for i in range(n):
            s.put(f"/k{i}", (b"payload-%d-" % i) * 20)
    return read(path)


def flipped(path: str, n: int = 10, entry: int = 3, **create) -> tuple[bytes, bytes]:
    """The acceptance case: one byte flipped in the middle of entry ``entry``."""
    good = build(path, n, **create)
    bad = bytearray(good)
    at = bad.find(b"payload-%d-" % entry) + 15
    bad[at] ^= 0xFF
    write(path, bytes(bad))
    return good, bytes(bad)


def entry_starts(buf: bytes) -> list[int]:
    hdr, pos = g.decode_wal_header(buf, PREFIX)
    starts = []
    for _, end in g.iter_wal_entry(buf, pos, **P0):
        starts.append(pos)
        pos = end
    return starts + [pos]


def keys(path: str) -> list[str]:
    with Store.open(path, readonly=True) as s:
        return s.keys()


# -- the reader reports why and what follows ------------------------------------------------

def test_reader_reports_checksum_mismatch_offset_and_records_after(tmp_path):
    p = str(tmp_path / "s.htt")
    good, _ = flipped(p)
    starts = entry_starts(good)
    with Store.open(p, readonly=True) as s:
        assert s.keys() == ["/k0", "/k1", "/k2"]
        d = s.scan.damage
        assert d.offset == starts[3] and d.reason == "checksum mismatch"
        assert d.records_after == 6
        assert [v.entry.key for v in d.survivors] == [f"/k{i}" for i in range(4, 10)]
        assert [v.offset for v in d.survivors] == starts[4:10]
        info = s.info()
    assert info["wal_damage"] == {"offset": starts[3], "reason": "checksum mismatch",
                                  "records_after": 6}


def test_torn_tail_is_reported_as_torn_tail(tmp_path):
    p = str(tmp_path / "s.htt")
    good = build(p, 4)
    starts = entry_starts(good)
    write(p, good[:starts[3] + 9])
    with Store.open(p, readonly=True) as s:
        d = s.scan.damage
        assert d.offset == starts[3] and d.torn_tail and d.reason == "torn tail"
        assert d.cause == "truncated record" and d.records_after == 0


def test_sequence_break_is_reported_and_the_record_counts_as_valid_looking(tmp_path):
    p = str(tmp_path / "s.htt")
    good = build(p, 4)
    starts = entry_starts(good)
    e, _ = g.decode_wal_entry(good, starts[2], **P0)
    moved = g.encode_wal_entry(g.WalEntry(e.seq + 5, e.op, e.key, e.body), **P0)
    write(p, good[:starts[2]] + moved + good[starts[3]:])
    with Store.open(p, readonly=True) as s:
        assert s.keys() == ["/k0", "/k1"]
        d = s.scan.damage
        assert d.offset == starts[2] and d.reason == "sequence break"
        assert d.records_after == 2  # the out-of-sequence record itself, and /k3


# -- maintenance refuses, the flag cuts with a side file, salvage copies --------------------

def test_compact_refuses_mid_wal_damage_and_leaves_file_byte_identical(tmp_path, capsys):
    p = str(tmp_path / "s.htt")
    good, bad = flipped(p)
    off = entry_starts(good)[3]
    assert main(["htt", "compact", p]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert f"offset {off}" in err and "6 valid-looking record(s)" in err
    assert read(p) == bad
    assert recovery.discarded_paths(p) == []


def test_compact_with_a_wrong_discard_offset_still_refuses(tmp_path, capsys):
    p = str(tmp_path / "s.htt")
    good, bad = flipped(p)
    off = entry_starts(good)[3]
    assert main(["htt", "compact", p, "--discard-after", str(off + 1)]) == 1
    assert f"damaged at offset {off} " in capsys.readouterr().err
    assert read(p) == bad


def test_compact_discard_after_keeps_cut_bytes_and_salvage_recovers_them(tmp_path, capsys):
    p = str(tmp_path / "s.htt")
    good, bad = flipped(p)
    off = entry_starts(good)[3]
    saved = str(tmp_path / "copy.htt")
    write(saved, bad)
    assert main(["htt", "compact", p, "--discard-after", str(off)]) == 0
    side = recovery.discarded_path(p, off)
    assert read(side) == bad[off:]  # every cut byte, kept
    assert keys(p) == ["/k0", "/k1", "/k2"]
    capsys.readouterr()
    # the side file + the prefix give back the original bytes for a human
    assert read(saved)[:off] + read(side) == bad
    dest = str(tmp_path / "salvaged.htt")
    assert main(["htt", "salvage", saved, "--into", dest]) == 0
    out = capsys.readouterr().out
    assert "3 record(s) before the damage and 6 after it" in out
    with Store.open(dest, readonly=True) as s:
        assert s.scan.problem is None
        assert s.keys() == [f"/k{i}" for i in (0, 1, 2, 4, 5, 6, 7, 8, 9)]
        for i in (4, 9):
            assert s.get(f"/k{i}").data == (b"payload-%d-" % i) * 20
    assert read(saved) == bad  # salvage only reads its source
    assert main(["htt", "salvage", saved, "--into", dest]) != 0  # never overwrites


def test_writer_open_keeps_discarded_bytes_warns_and_reports(tmp_path, caplog, capsys):
    p = str(tmp_path / "s.htt")
    good, bad = flipped(p)
    off = entry_starts(good)[3]
    with Store.open(p) as s:  # the spec's automatic recovery (§4/§6)
        assert s.keys() == ["/k0", "/k1", "/k2"]
        assert s.discarded == {"path": recovery.discarded_path(p, off), "offset": off,
                               "bytes": len(bad) - off, "reason": "checksum mismatch",
                               "records_after": 6}
        assert s.info()["discarded"] == s.discarded
        s.put("/new", b"n")
    assert "kept in" in caplog.text and "valid-looking" in caplog.text
    assert read(recovery.discarded_path(p, off)) == bad[off:]
    assert keys(p) == ["/k0", "/k1", "/k2", "/new"]
    with Store.open(p, readonly=True) as s:
        assert s.info()["discarded_files"] == [os.path.basename(p) + f".discarded-{off}"]
    assert main(["htt", "info", p]) == 0
    assert f"s.htt.discarded-{off}" in capsys.readouterr().out
    # the side file holds a WAL tail: salvage of the kept bytes is a human's call,
    # but the records in it still verify
    side = read(recovery.discarded_path(p, off))
    found: list = []
    assert recovery._scan_entries(side, 0, len(side), P0, None, False, found, None) == 6
    assert [s.entry.key for s in found] == [f"/k{i}" for i in range(4, 10)]


def test_torn_tail_is_cut_into_a_side_file_and_compact_proceeds(tmp_path, capsys):
    p = str(tmp_path / "s.htt")
    good = build(p, 5)
    starts = entry_starts(good)
    write(p, good[:starts[4] + 20])
    assert main(["htt", "compact", p]) == 0
    # torn tails are kept too (runtime.cut): a tail that looked torn sometimes is not
    assert recovery.discarded_paths(p) == [recovery.discarded_path(p, starts[4])]
    assert read(recovery.discarded_path(p, starts[4])) == good[starts[4]:starts[4] + 20]
    assert keys(p) == [f"/k{i}" for i in range(4)]


def test_recovery_modes(tmp_path):
    p = str(tmp_path / "s.htt")
    good = build(p, 5)
    starts = entry_starts(good)
    torn = good[:starts[4] + 3]
    write(p, torn)
    with pytest.raises(WalDamaged) as exc:
        Store.open(p, recovery="absolute_consistency")
    assert exc.value.offset == starts[4] and exc.value.reason == "torn tail"
    assert read(p) == torn
    with Store.open(p, recovery="tolerate_corrupted_tail") as s:
        assert len(s) == 4
    p = str(tmp_path / "m.htt")
    _, bad = flipped(p, 5, 2)
    for mode in ("tolerate_corrupted_tail", "absolute_consistency"):
        for ro in (True, False):
            with pytest.raises(WalDamaged) as exc:
                Store.open(p, recovery=mode, readonly=ro)
            assert exc.value.records_after == 2
    assert read(p) == bad
    with pytest.raises(ValueError):
        Store.open(p, recovery="skip_any")


@pytest.mark.parametrize("alg", ["zstd", "zlib", "lz4"])
def test_block_compressed_damage_side_file_and_salvage(tmp_path, alg):
    p = str(tmp_path / "b.htt")
    good = build(p, 6, compression=alg)
    # one single-entry block per put: find block 2 and break its frame
    pos = 52
    blocks = []
    while pos < len(good):
        blocks.append(pos)
        _, pos = g.decode_wal_block_plain(good, pos, algorithm=g.CompressionAlgorithm[alg])
    assert len(blocks) == 6
    bad = bytearray(good)
    bad[blocks[2] + 2] ^= 0x01  # compressed_len: the frame no longer fits
    write(p, bytes(bad))
    with Store.open(p, readonly=True) as s:
        assert s.keys() == ["/k0", "/k1"]
        assert s.scan.damage.offset == blocks[2] and s.scan.damage.records_after == 3
    dest = str(tmp_path / "d.htt")
    rep = salvage.salvage(p, dest)
    assert (rep.kept_before, rep.kept_after) == (2, 3)
    assert keys(dest) == ["/k0", "/k1", "/k3", "/k4", "/k5"]
    with Store.open(p) as s:
        assert s.discarded["offset"] == blocks[2]
    assert read(recovery.discarded_path(p, blocks[2])) == bytes(bad[blocks[2]:])


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_a_reader_holds_the_first_survivors_counts_all_and_salvage_copies_all(
        tmp_path, compression):
    """Damage near the start of a long log: the open's report holds the first
    ``KEEP_SURVIVORS`` records past it whole and counts the rest (its memory does not
    grow with the log); salvage still copies every one of them."""
    n = recovery.KEEP_SURVIVORS + 40
    p = str(tmp_path / "long.htt")
    create = {"compression": compression} if compression else {}
    good, bad = flipped(p, n, entry=2, **create)
    with Store.open(p, readonly=True) as s:
        d = s.scan.damage
        assert s.keys() == ["/k0", "/k1"]
        assert d.records_after == n - 3 > len(d.survivors) == recovery.KEEP_SURVIVORS
        assert [v.entry.key for v in d.survivors] == [f"/k{i}" for i in range(3, 3 + 64)]
        assert not d.torn_tail
        every = recovery.all_survivors(bad, d, s.layout)
    assert [v.entry.key for v in every] == [f"/k{i}" for i in range(3, n)]
    assert every[:64] == d.survivors
    dest = str(tmp_path / "d.htt")
    rep = salvage.salvage(p, dest)
    assert (rep.kept_before, rep.kept_after) == (2, n - 3)
    assert keys(dest) == [f"/k{i}" for i in range(n) if i != 2]


# -- sweeps: exact expectations -------------------------------------------------------------

def _block_bounds(buf: bytes) -> list[int]:
    pos, out = 52, [52]
    while pos < len(buf):
        _, pos = g.decode_wal_block_plain(buf, pos, algorithm=0)
        out.append(pos)
    return out


def test_truncation_sweep_of_a_block_wal_reports_torn_tail(tmp_path):
    p = str(tmp_path / "tb.htt")
    good = build(p, 4, compression="zstd")
    starts = _block_bounds(good)
    cut_file = str(tmp_path / "cut.htt")
    for cut in range(44, len(good) + 1):
        write(cut_file, good[:cut])
        with Store.open(cut_file, readonly=True) as s:
            whole = sum(1 for e in starts[1:] if e <= cut)
            assert s.keys() == [f"/k{i}" for i in range(whole)], cut
            d = s.scan.damage
            if cut in starts:
                assert d is None, cut
            else:
                assert d is not None and d.torn_tail and d.records_after == 0, cut


def test_truncation_sweep_reports_torn_tail_at_every_offset(tmp_path):
    p = str(tmp_path / "t.htt")
    good = build(p, 4)
    starts = entry_starts(good)
    cut_file = str(tmp_path / "cut.htt")
    for cut in range(PREFIX, len(good) + 1):
        write(cut_file, good[:cut])
        with Store.open(cut_file, readonly=True) as s:
            whole = sum(1 for e in starts[1:] if e <= cut)
            assert s.keys() == [f"/k{i}" for i in range(whole)], cut
            d = s.scan.damage
            if cut in starts or cut == PREFIX + 8:
                assert d is None, cut
            else:
                assert d is not None and d.torn_tail and d.records_after == 0, cut


def test_bit_flip_sweep_recovers_exactly_the_records_before_and_counts_the_rest(tmp_path):
    p = str(tmp_path / "f.htt")
    n = 4
    with Store.create(p):
        pass
    with Store.open(p) as s:
        for i in range(n):
            s.put(f"/k{i}", bytes([i]) * 3, {"m": str(i)})
    good = read(p)
    starts = entry_starts(good)
    flip = str(tmp_path / "x.htt")
    for i in range(n):
        for off in range(starts[i], starts[i + 1]):
            for bit in range(8):
                bad = bytearray(good)
                bad[off] ^= 1 << bit
                write(flip, bytes(bad))
                with Store.open(flip, readonly=True) as s:
                    assert s.keys() == [f"/k{j}" for j in range(i)], (off, bit)
                    d = s.scan.damage
                    assert d is not None and d.offset == starts[i], (off, bit)
                    if d.cause == "sequence break":
                        assert d.records_after == n - i, (off, bit)
                    else:
                        assert d.records_after == n - i - 1, (off, bit)
                        # a whole last record whose CRC fails is damage, not a torn
                        # (partial) write: only a record short of bytes is torn
                        torn = i == n - 1 and d.cause != "checksum mismatch"
                        expect = "torn tail" if torn else d.cause
                        assert d.reason == expect and d.reason != "", (off, bit)


def test_verify_names_reason_and_records_after(tmp_path, capsys):
    p = str(tmp_path / "s.htt")
    good, _ = flipped(p)
    off = entry_starts(good)[3]
    assert main(["htt", "verify", p]) == 1
    out = capsys.readouterr().out
    assert f"offset {off} (checksum mismatch; 6 valid-looking record(s) after it)" in out
    assert main(["htt", "info", p]) == 0
    out = capsys.readouterr().out
    assert f"WAL DAMAGED at offset {off}" in out and "6 valid-looking" in out


def test_bit_flip_sweep_of_a_block_wal(tmp_path):
    """Three bits of every byte of every block: the recovered entries are the blocks wholly before the
    damaged one (plus, when only the count field is hit, its own intact entry), the
    damage is reported at the block, and the later blocks are counted as valid-looking."""
    p = str(tmp_path / "fb.htt")
    n = 4
    good = build(p, n, compression="zstd")
    bounds = _block_bounds(good)
    flip = str(tmp_path / "x.htt")
    with Store.open(p, readonly=True) as s:
        everything = s.keys()
    for i in range(n):
        for off in range(bounds[i], bounds[i + 1]):
            for bit in (0, 3, 7):  # low, middle, high bit of every byte (CI time)
                bad = bytearray(good)
                bad[off] ^= 1 << bit
                write(flip, bytes(bad))
                with Store.open(flip, readonly=True) as s:
                    d = s.scan.damage
                    if d is None:  # a redundant zstd frame-header bit: same entries
                        assert s.keys() == everything, (i, off, bit)
                        continue
                    assert d.offset == bounds[i], (i, off, bit)
                    assert s.keys() in ([f"/k{j}" for j in range(i)],
                                        [f"/k{j}" for j in range(i + 1)]), (i, off, bit)
                    kept = len(s.keys())
                    # the later blocks, plus this block's entry when it was not kept
                    assert d.records_after in (n - i - 1, n - kept), (i, off, bit)
                    # a whole entry whose CRC fails inside a frame that decompresses
                    # is damage, not a torn (partial) write
                    torn = d.records_after == 0 and d.cause != "checksum mismatch"
                    assert (d.reason == "torn tail") == torn, (i, off, bit)

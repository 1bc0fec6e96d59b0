"""Nothing lost when an HTT writer repairs its WAL (docs/recovery.md, HTT section).

Every byte a writer open removes is kept in a side file first (``runtime.cut``), torn
tails included; a damaged last block's intact entries survive a crash at any step of
the repair; a complete entry with a bad CRC is reported as a checksum mismatch, not a
torn tail; a damaged ``wal_base_seq`` (no checksum covers it) refuses the writer open
instead of cutting the whole WAL; and reading a history sidecar costs its size, not
``MAX_SIDECAR_BYTES``.
"""

from __future__ import annotations

import inspect
import os
import tracemalloc
from pathlib import Path

import pytest

from bytewright.generated import htt as g
from bytewright.runtime import cut
from bytewright.runtime.htt import recovery, salvage
from bytewright.runtime.htt.errors import WalDamaged
from bytewright.runtime.htt.history import HistoryReader
from bytewright.runtime.htt.store import Store

from .conftest import read, write

P0 = {"semantic_dims": 0, "tail_layout": 0}
PLAIN_WAL = 44  # header 32 + empty v2 snapshot 12
ZSTD = g.CompressionAlgorithm.zstd


def removed_bytes_kept(before: bytes, path: str) -> bool:
    """The file is unchanged, or it keeps a prefix of ``before`` (the advisory
    ``wal_entry_count`` aside) and one side file holds every byte after that prefix."""
    after = read(path)
    if after == before:
        return True
    # bytes 0..len(after) may differ only in the advisory count (rewritten by §6 Write)
    for side in cut.side_files(path, "discarded"):
        off = int(side.rsplit("discarded-", 1)[1].split(".")[0])
        if read(side) == before[off:] and len(after) >= off:
            diff = [i for i in range(off) if after[i] != before[i]]
            if not diff or (diff[0] in (PLAIN_WAL, 52) and diff[-1] < diff[0] + 4):
                return True
    return False


def block_starts(buf: bytes, at: int = 52) -> list[int]:
    out = []
    while at < len(buf):
        out.append(at)
        _, at = g.decode_wal_block_plain(buf, at, algorithm=ZSTD)
    return out


def build_batched(path: str, compression: str | None = None) -> bytes:
    with Store.create(path, durability="batched", batch_size=4,
                      compression=compression) as s:
        for i in range(8):
            s.put(f"/k{i}", (b"payload-%d-" % i) * 10)
    return read(path)


def damaged_last_block(path: str) -> tuple[bytes, int]:
    """Two 4-entry zstd blocks; inside the last one entry /k7's payload has a flipped
    bit, re-compressed so the frame decompresses: /k4../k6 are intact entries of a
    damaged block and nothing valid follows. Returns the bytes and the block offset."""
    good = build_batched(path, "zstd")
    starts = block_starts(good)
    assert len(starts) == 2
    raw, end = g.decode_wal_block_plain(good, starts[1], algorithm=ZSTD)
    assert end == len(good) and raw.block_entry_count == 4
    plain = bytearray(raw.plain)
    plain[plain.find(b"payload-7-") + 3] ^= 1
    bad = good[:starts[1]] + g.encode_wal_block_plain(
        g.WalBlockPlain(4, bytes(plain)), algorithm=ZSTD)
    write(path, bad)
    return bad, starts[1]


# -- 1. a damaged last block: intact entries survive a crash at any step ------------------

_STEPS = ("write", "pwrite", "fsync", "ftruncate")


def _open_and_crash_at(path: str, k: int, torn: bool) -> int:
    """Open ``path`` as a writer in a forked child that dies (``os._exit``: no cleanup,
    no close) at its k-th write step; 0 = died there, 3 = the open finished first."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        try:
            real = {n: getattr(os, n) for n in _STEPS}
            count = [0]

            def wrap(name):
                def step(*args):
                    if count[0] == k:
                        if torn and name in ("write", "pwrite"):  # half reaches the file
                            data = bytes(args[1])[: max(1, len(args[1]) // 2)]
                            real[name](args[0], data, *args[2:])
                        os._exit(0)
                    count[0] += 1
                    return real[name](*args)
                return step

            for n in _STEPS:
                setattr(os, n, wrap(n))
            Store.open(path)
            os._exit(3)
        except BaseException:
            os._exit(4)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_damaged_last_block_crash_at_every_step_loses_no_intact_entry(tmp_path):
    p = str(tmp_path / "b.htt")
    bad, block = damaged_last_block(p)
    intact = [f"/k{i}" for i in range(7)]
    with Store.open(p, readonly=True) as s:
        assert s.keys() == intact  # the spec's reader keeps /k4../k6 of the bad block
    finished = False
    for torn in (False, True):
        for k in range(40):
            for f in os.listdir(tmp_path):
                os.unlink(tmp_path / f)
            write(p, bad)
            rc = _open_and_crash_at(p, k, torn)
            assert rc in (0, 3), (k, torn, rc)
            # every byte the crashed repair removed is in a side file
            assert removed_bytes_kept(bad, p), (k, torn)
            with Store.open(p) as w:  # the next writer open finishes the repair
                assert w.keys() == intact, (k, torn)
            with Store.open(p, readonly=True) as r:
                assert r.keys() == intact and r.scan.damage is None, (k, torn)
                assert r.next_seq == 8, (k, torn)
            assert any(read(s) == bad[block:] for s in cut.side_files(p)), (k, torn)
            assert cut.side_files(p, recovery.REAPPEND) == [], (k, torn)  # done with
            if rc == 3:
                finished = True
                break
    assert finished


def test_damaged_last_block_keeps_a_side_file_and_reappends_as_a_new_block(tmp_path):
    p = str(tmp_path / "b.htt")
    bad, block = damaged_last_block(p)
    with Store.open(p) as w:
        assert w.discarded["offset"] == block and w.discarded["reason"] == "checksum mismatch"
        w.put("/after", b"a")
    assert read(recovery.discarded_path(p, block)) == bad[block:]
    after = read(p)
    assert after[:block] == bad[:block]  # blocks before the damage are never rewritten
    with Store.open(p, readonly=True) as r:
        assert r.keys() == [f"/k{i}" for i in range(7)] + ["/after"]
        assert [e.seq for e in r.committed_entries()] == list(range(1, 9))


def test_kept_intact_entries_are_appended_only_to_the_file_they_were_cut_from(tmp_path):
    """The intent file names its file by a fingerprint of the bytes the cut leaves: a
    file that ends at the same offset with the same next seq but other bytes (a file
    recreated since) does not get them."""
    p = str(tmp_path / "b.htt")
    bad, block = damaged_last_block(p)
    with Store.open(p, readonly=True) as r:
        layout, wal = r.layout, r.scan.wal_offset
        salvaged = list(r.scan.salvaged)
    assert [e.key for e in salvaged] == ["/k4", "/k5", "/k6"]
    intent = recovery.keep_reappend(p, bad, wal, block, salvaged, layout)
    other = bytearray(bad[:block])
    other[other.find(b"\x28\xb5\x2f\xfd") + 8] ^= 1  # same length, other bytes
    applied: list = []
    got = recovery.reappends(p, bytes(other), wal, block, 5, layout, 1 << 20, applied.append)
    assert got == ([], []) and applied == [] and os.path.exists(intent)
    got = recovery.reappends(p, bad[:block], wal, block, 5, layout, 1 << 20, applied.append)
    assert [e.key for e in got[0]] == ["/k4", "/k5", "/k6"] and got[1] == [intent]
    assert applied == got[0]


# -- 2. a complete last entry with a flipped byte -----------------------------------------

def test_complete_last_entry_with_a_flipped_byte_is_a_checksum_mismatch_kept_aside(tmp_path):
    p = str(tmp_path / "last.htt")
    build_batched(p)
    d = bytearray(read(p))
    d[len(d) - 30] ^= 1
    d = bytes(d)
    write(p, d)
    with Store.open(p, readonly=True) as r:
        dmg = r.scan.damage
        assert dmg.records_after == 0
        # every byte of the record is there (not a partial write, §4): damage
        assert dmg.reason == "checksum mismatch" and not dmg.torn_tail
    with Store.open(p) as w:
        assert len(w.keys()) == 7
        assert w.discarded is not None and w.discarded["reason"] == "checksum mismatch"
    assert removed_bytes_kept(d, p)


def test_truncated_last_entry_is_still_a_torn_tail_and_kept_aside(tmp_path):
    p = str(tmp_path / "torn.htt")
    good = build_batched(p)
    torn = good[:-30]
    write(p, torn)
    with Store.open(p, readonly=True) as r:
        assert r.scan.damage.reason == "torn tail" and r.scan.damage.torn_tail
    with Store.open(p):
        pass
    assert removed_bytes_kept(torn, p)
    assert cut.side_files(p)  # torn tails are kept too


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_byte_flip_sweep_of_the_last_record_never_cuts_without_a_side_file(
        tmp_path, compression):
    p = str(tmp_path / "s.htt")
    good = build_batched(p, compression)
    if compression:
        last = block_starts(good)[-1]
    else:
        hdr, at = g.decode_wal_header(good, PLAIN_WAL)
        for _, end in g.iter_wal_entry(good, at, **P0):
            if end < len(good):
                at = end
        last = at
    cuts = 0
    for off in range(last, len(good)):
        for f in os.listdir(tmp_path):
            os.unlink(tmp_path / f)
        d = bytearray(good)
        d[off] ^= 1
        d = bytes(d)
        write(p, d)
        with Store.open(p) as w:
            assert len(w.keys()) >= 4, off
        if read(p) != d:
            cuts += 1
        assert removed_bytes_kept(d, p), off
    assert cuts > 0


# -- 3. a damaged wal_base_seq --------------------------------------------------------------

@pytest.mark.parametrize("compression", [None, "zstd"])
def test_flipped_wal_base_seq_refuses_the_writer_open_and_changes_nothing(
        tmp_path, compression):
    p = str(tmp_path / "s.htt")
    with Store.create(p, compression=compression) as s:
        for i in range(5):
            s.put(f"/k{i}", b"v%d" % i)
    wal = PLAIN_WAL  # an empty snapshot is always plain (§3), compressed file or not
    d = bytearray(read(p))
    d[wal + 4] ^= 0x02  # wal_base_seq 1 -> 3
    d = bytes(d)
    write(p, d)
    with pytest.raises(WalDamaged, match="wal_base_seq") as exc:
        Store.open(p)
    assert exc.value.offset == wal + 8 and exc.value.records_after == 5
    assert read(p) == d and cut.side_files(p) == []
    with Store.open(p, readonly=True) as r:  # readers still report, as before
        assert r.scan.damage.offset == wal + 8
        assert r.scan.damage.suspect == "wal_header.wal_base_seq"
    # the explicit flag repeats the offset: cut, every byte kept
    with Store.open(p, discard_after=wal + 8) as w:
        assert w.keys() == []
    assert read(recovery.discarded_path(p, wal + 8)) == d[wal + 8:]


def test_salvage_of_a_flipped_wal_base_seq_keeps_the_entries_own_seqs(tmp_path):
    p = str(tmp_path / "s.htt")
    with Store.create(p) as s:
        for i in range(5):
            s.put(f"/k{i}", b"v%d" % i)
    d = bytearray(read(p))
    d[PLAIN_WAL + 4] ^= 0x02
    write(p, bytes(d))
    dest = str(tmp_path / "d.htt")
    salvage.salvage(p, dest)
    with Store.open(dest, readonly=True) as r:
        assert r.scan.damage is None and r.keys() == [f"/k{i}" for i in range(5)]
        assert [e.seq for e in r.committed_entries()] == [1, 2, 3, 4, 5]


def test_sequence_break_after_the_first_entry_still_cuts_point_in_time(tmp_path):
    """The refusal is for the header field only: a later break is not about it."""
    p = str(tmp_path / "s.htt")
    with Store.create(p) as s:
        for i in range(4):
            s.put(f"/k{i}", b"v")
    good = read(p)
    hdr, at = g.decode_wal_header(good, PLAIN_WAL)
    starts = []
    for _, end in g.iter_wal_entry(good, at, **P0):
        starts.append(at)
        at = end
    e, _ = g.decode_wal_entry(good, starts[2], **P0)
    moved = g.encode_wal_entry(g.WalEntry(e.seq + 5, e.op, e.key, e.body), **P0)
    bad = good[:starts[2]] + moved + good[starts[3]:]
    write(p, bad)
    with Store.open(p) as w:
        assert w.keys() == ["/k0", "/k1"]
    assert read(recovery.discarded_path(p, starts[2])) == bad[starts[2]:]


# -- 4. history sidecars are read by their size ---------------------------------------------

def test_small_history_sidecar_is_read_with_a_small_buffer(tmp_path):
    p = str(tmp_path / "h.htt")
    with Store.create(p, history_retention="archive") as s:
        s.put("/a", b"x")
        s.seal_epoch()
        s.compact()
    assert os.path.getsize(p + ".h000001") < 4096
    tracemalloc.start()
    try:
        h = HistoryReader(p)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert h.segments == [p + ".h000001"]
    assert peak < 16 << 20, peak  # was MAX_SIDECAR_BYTES + 1 (1 GiB) per sidecar


# -- 5. truncation goes through runtime/cut.py ----------------------------------------------

def test_recovery_files_never_truncate_themselves():
    from bytewright.runtime.htt import history as hist
    from bytewright.runtime.htt import replay, salvage, wal_writer

    root = Path(recovery.__file__).resolve().parents[2]
    for mod in (recovery, replay, hist, wal_writer, salvage):
        assert "ftruncate" not in inspect.getsource(mod), mod.__name__
    assert "ftruncate" not in (root / "cli" / "htt.py").read_text()
    for name in ("_check_recovery", "_repair_tail"):
        assert "ftruncate" not in inspect.getsource(getattr(Store, name)), name


def test_discarded_path_names_are_the_cut_module_names(tmp_path):
    p = str(tmp_path / "x.htt")
    assert recovery.discarded_path(p, 7) == cut.side_path(p, 7)
    Path(cut.side_path(p, 9)).write_bytes(b"a")
    Path(cut.side_path(p, 3)).write_bytes(b"b")
    assert recovery.discarded_paths(p) == cut.side_files(p, "discarded")

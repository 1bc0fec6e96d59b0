"""HTT hardening: history sidecars from elsewhere, bad sidecar paths, resource
limits, and compaction crash points (a real process killed between every write step).
"""

from __future__ import annotations

import os

import pytest

from bytewright.cli.main import main
from bytewright.generated import htt as g
from bytewright.runtime.errors import DecodeError
from bytewright.runtime.htt import limits as L
from bytewright.runtime.htt.errors import TooLarge
from bytewright.runtime.htt.history import HistoryReader, sidecar_paths
from bytewright.runtime.htt.store import Store

from .conftest import read, write


def state_of(store: Store) -> dict:
    return {v.key: (v.data, v.meta, v.semantic_raw) for v in store.iterate()}


SEM = [0.0] * 16 + [0.5, 0.25, 0.125, 0.0625]


# -- history sidecars -----------------------------------------------------------------------

def test_sidecar_of_another_store_with_other_tail_layout_is_skipped(tmp_path):
    """Reproduction: same semantic_dims, different tail layout -> AttributeError in
    as_of (quantized.py read ``tail.user`` of a full-width tail)."""
    full = str(tmp_path / "full.htt")
    with Store.create(full, semantic_dims=20, history_retention="archive") as s:
        s.put("/a", b"full", semantic=SEM)
        s.seal_epoch()
        s.compact()
    q = str(tmp_path / "q.htt")
    with Store.create(q, semantic_dims=20, quantized=True) as s:
        s.put("/b", b"quantized", semantic=SEM)
        s.seal_epoch()
    os.rename(full + ".h000001", q + ".h000001")  # the wrong store's history
    h = HistoryReader(q)
    assert h.segments == [] and "tail layout full" in h.skipped[0][1]
    assert h.as_of(1).nodes["/b"].data == b"quantized"  # no AttributeError
    assert [t.data for t in h.trajectory("/b")] == [b"quantized"]


def test_sidecar_path_that_is_a_directory_is_reported_not_raised(tmp_path, capsys):
    p = str(tmp_path / "d.htt")
    with Store.create(p) as s:
        s.put("/a", b"x")
        s.seal_epoch()
    os.mkdir(p + ".h000001")
    h = HistoryReader(p)  # was IsADirectoryError
    assert h.segments == [] and "unreadable" in h.skipped[0][1]
    assert h.as_of(1).nodes["/a"].data == b"x"
    assert main(["htt", "verify", p]) == 1
    out = capsys.readouterr().out
    assert "1 unreadable history sidecar(s)" in out


def test_sidecar_sequence_numbers_must_match_the_entries(tmp_path):
    p = str(tmp_path / "s.htt")
    with Store.create(p, history_retention="archive") as s:
        s.put("/a", b"1")
        s.seal_epoch()
        s.compact()
    side = p + ".h000001"
    seg, _ = g.decode_sidecar_segment(read(side))
    assert (seg.first_seq, seg.end_seq) == (1, 3)
    for first, end in ((5, 7), (1, 9)):  # header fields no CRC covers
        bad = g.SidecarSegment(seg.version, seg.semantic_dims, seg.layout, first, end,
                               seg.entries)
        write(side, g.encode_sidecar_segment(bad))
        h = HistoryReader(p)
        assert h.segments == [] and "header says" in h.skipped[0][1], (first, end)
    write(side, g.encode_sidecar_segment(seg))
    assert HistoryReader(p).segments == [side]


# -- resource limits ------------------------------------------------------------------------

def test_limits_are_named_constants_with_an_api_override(tmp_path):
    assert L.MAX_KEY_BYTES == 0xFFFF and L.MAX_SNAPSHOT_BYTES == 1 << 30
    assert L.Limits().max_block_bytes == L.MAX_BLOCK_BYTES
    p = str(tmp_path / "l.htt")
    small = L.Limits(max_entry_data=10)
    with Store.create(p, limits=small) as s:
        s.put("/ok", b"x" * 10)
        with pytest.raises(TooLarge, match="MAX_ENTRY_DATA"):
            s.put("/big", b"x" * 11)
        with pytest.raises(TooLarge):
            s.update("/ok", b"y" * 11)
        assert s.keys() == ["/ok"]
    with pytest.raises(ValueError):
        L.Limits(max_block_bytes=-1)


def test_compressed_snapshot_over_the_limit_fails_before_decoding(tmp_path):
    p = str(tmp_path / "z.htt")
    with Store.create(p, compression="zstd") as s:
        for i in range(20):
            s.put(f"/k{i}", b"v" * 100)
        s.compact()
    with Store.open(p, readonly=True) as s:
        assert len(s) == 20
    tight = L.Limits(max_snapshot_bytes=100)
    with pytest.raises(L.LimitExceeded) as exc:
        Store.open(p, readonly=True, limits=tight)
    assert exc.value.offset == 32 and exc.value.file == p
    assert "MAX_SNAPSHOT_BYTES" in str(exc.value)
    assert isinstance(exc.value, DecodeError)


def test_block_over_the_limit_fails_the_open_and_is_never_cut(tmp_path):
    p = str(tmp_path / "b.htt")
    with Store.create(p, compression="zstd") as s:
        s.put("/a", b"a")
        s.put("/big", b"x" * 5000)
    before = read(p)
    tight = L.Limits(max_block_bytes=1000)
    for ro in (True, False):
        with pytest.raises(L.LimitExceeded, match="MAX_BLOCK_BYTES") as exc:
            Store.open(p, readonly=ro, limits=tight)
        assert exc.value.offset > 52 and exc.value.file == p
    assert read(p) == before  # a writer did not mistake it for a torn tail
    with Store.open(p, readonly=True) as s:
        assert s.keys() == ["/a", "/big"]


# -- crash points ---------------------------------------------------------------------------

_STEPS = ("pwrite", "fsync", "replace", "ftruncate")


def _crash_compact_at(path: str, k: int, torn: bool) -> int:
    """Compact ``path`` in a forked child that dies (``os._exit``, no cleanup) at its
    k-th write step; 0 = died there, 3 = the compaction finished first."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        try:
            real = {n: getattr(os, n) for n in _STEPS}
            count = [0]

            def wrap(name):
                def step(*args):
                    if count[0] == k:
                        if torn and name == "pwrite":  # half the bytes reach the file
                            fd, data, off = args
                            real["pwrite"](fd, bytes(data)[: max(1, len(data) // 2)], off)
                        os._exit(0)
                    count[0] += 1
                    return real[name](*args)
                return step

            s = Store.open(path, history_retention="archive")
            for n in _STEPS:
                setattr(os, n, wrap(n))
            s.compact()
            os._exit(3)
        except BaseException:
            os._exit(4)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_compaction_crash_at_every_write_step_leaves_old_or_new_state(tmp_path):
    p = str(tmp_path / "c.htt")
    with Store.create(p, semantic_dims=20, history_retention="archive") as s:
        for i in range(6):
            s.put(f"/x/{i}", b"v%d" % i, semantic=SEM)
        s.seal_epoch()
        s.update("/x/1", b"changed")
        s.delete("/x/2")
        s.seal_epoch()
    original = read(p)
    with Store.open(p, readonly=True) as s:
        expected = state_of(s)
    steps = 0
    for torn in (False, True):
        for k in range(100):
            for f in os.listdir(tmp_path):
                os.unlink(tmp_path / f)
            write(p, original)
            rc = _crash_compact_at(p, k, torn)
            assert rc in (0, 3), (k, torn, rc)
            with Store.open(p, readonly=True) as r:  # never an error
                assert state_of(r) == expected, (k, torn)
                assert r.scan.damage is None, (k, torn)
                assert r.epoch == 2
                compacted = r.base_seq > 1
            assert read(p) == original or compacted, (k, torn)
            h = HistoryReader(p)  # history never loses the span: sidecar or live WAL
            assert h.as_of(1).nodes["/x/1"].data == b"v1", (k, torn)
            assert h.as_of(2).nodes["/x/1"].data == b"changed", (k, torn)
            with Store.open(p, history_retention="archive") as w:  # and a writer goes on
                w.put("/after", b"ok")
                w.compact()
            assert len(sidecar_paths(p)) >= 1
            steps += 1
            if rc == 3:
                break
        else:
            pytest.fail("compaction never finished")
    assert steps > 10  # temp write, fsyncs, sidecar write + rename, main rename, dir sync


# -- bytes no checksum covers: the semantic checks ------------------------------------------

P0 = {"semantic_dims": 0, "tail_layout": 0}


def _v1_file(entries: list[str]) -> bytes:
    header = g.FileHeader(1, g.HeaderFlags(), 4, 0, 1 << 64, len(entries))
    snap = g.SnapshotSection([g.SnapshotEntry(k, b"d", [], None) for k in entries])
    return (g.encode_file_header(header)
            + g.encode_snapshot_section(snap, version=1, compressed=False, algorithm=0, **P0)
            + g.encode_wal_header(g.WalHeader(0, 1)))


@pytest.mark.parametrize("keys,why", [
    (["/a/b"], "before its parent"),          # a flipped byte in the parent's key
    (["/a", "/"], "not a new node path"),      # the root is never an entry (§3)
    (["/a", "/a"], "not a new node path"),
    (["/a", "a"], "not a new node path"),
    (["/a", "/a//b"], "not a new node path"),
])
def test_v1_snapshot_without_crc_gets_the_spec_entry_rules(tmp_path, keys, why):
    from bytewright.runtime.errors import ConstraintError

    p = str(tmp_path / "v1.htt")
    write(p, _v1_file(keys))
    with pytest.raises(ConstraintError, match=why) as exc:
        Store.open(p, readonly=True)
    assert exc.value.offset == 32 and exc.value.file == p
    assert exc.value.path.startswith("snapshot_section.entries[")
    write(p, _v1_file(["/a", "/a/b"]))
    with Store.open(p, readonly=True) as s:
        assert s.keys() == ["/a", "/a/b"]


@pytest.mark.parametrize("pair", [(1.0, 1.0), (2.0, 1.0), (float("nan"), 1.0),
                                  (0.0, float("inf"))])
def test_bounds_without_crc_must_be_finite_and_ordered(tmp_path, pair):
    from bytewright.runtime.errors import ConstraintError

    p = str(tmp_path / "v3.htt")
    with Store.create(p, semantic_dims=18, meaning_addressed=True) as s:
        s.put("/a", b"", semantic=[0.0] * 16 + [0.5, 0.5])
    good = read(p)
    bad = bytearray(good)
    bad[32 + 16:32 + 32] = g.encode_bound_pair(g.BoundPair(*pair))  # second pair
    write(p, bytes(bad))
    with pytest.raises(ConstraintError, match="finite min < max") as exc:
        Store.open(p, readonly=True)
    assert exc.value.offset == 48 and exc.value.path == "bounds_section.bounds[1]"

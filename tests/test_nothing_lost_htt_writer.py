"""HTT writer side: the writer lock follows the file at the path (§11), auto-compaction
runs off the writer (§6), subscribers see every seq (§8), reserved ``_`` metadata is
kept byte for byte (§3), and nothing the writer shortens or rewrites is lost."""

from __future__ import annotations

import errno
import fcntl
import os
import threading

import pytest

from bytewright.generated import htt as g
from bytewright.runtime import cut as cutmod
from bytewright.runtime.htt.errors import KeyExistsError
from bytewright.runtime.htt.store import Store

from .conftest import read, write


def state_of(store: Store) -> dict:
    return {v.key: (v.data, v.meta, v.semantic_raw, tuple(store.reserved_meta(v.key)))
            for v in store.iterate()}


def no_tmp_left(tmp_path) -> bool:
    return not [n for n in os.listdir(tmp_path) if ".compact-" in n or ".tmp" in n]


# -- §11: the writer lock is taken on the file that is at the path ---------------------------

def _race_on_first_exclusive_lock(monkeypatch, during):
    """Run ``during()`` between a writer's open and its flock (another writer wins)."""
    real = fcntl.flock
    armed = [True]

    def flock(fd, op):
        if armed[0] and op & fcntl.LOCK_EX:
            armed[0] = False
            during()
        return real(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock)


def test_writer_opened_before_another_writers_compaction_writes_to_the_file_at_the_path(
        tmp_path, monkeypatch):
    p = str(tmp_path / "race.htt")
    with Store.create(p) as s:
        s.put("/a", b"1")

    def other_writer_compacts():
        with Store.open(p) as b:
            b.put("/b", b"2")
            b.compact()  # replaces the file A has open

    _race_on_first_exclusive_lock(monkeypatch, other_writer_compacts)
    with Store.open(p) as a:
        assert "/b" in a  # A sees the file at the path, B's entry included
        a.put("/c", b"3")
    monkeypatch.undo()
    with Store.open(p, readonly=True) as r:
        assert r.keys() == ["/a", "/b", "/c"]
        assert r.get("/c").data == b"3"


def test_create_overwrite_racing_a_compaction_locks_the_file_at_the_path(
        tmp_path, monkeypatch):
    p = str(tmp_path / "race2.htt")
    with Store.create(p) as s:
        s.put("/a", b"1")

    def other_writer_compacts():
        with Store.open(p) as b:
            b.put("/b", b"2")
            b.compact()

    _race_on_first_exclusive_lock(monkeypatch, other_writer_compacts)
    with Store.create(p, overwrite=True) as a:
        a.put("/x", b"new")
    monkeypatch.undo()
    with Store.open(p, readonly=True) as r:
        assert r.keys() == ["/x"]
    # what create replaced is kept: the file B compacted, holding /a and /b
    sides = cutmod.side_files(p)
    assert len(sides) == 1
    with Store.open(sides[0], readonly=True) as old:
        assert old.keys() == ["/a", "/b"]


# -- §6: auto-compaction runs on a background thread off the writer ---------------------------

def test_failed_auto_compaction_does_not_fail_the_committed_put(tmp_path, monkeypatch):
    p = str(tmp_path / "enospc.htt")
    s = Store.create(p, auto_compact_threshold=2)
    s.put("/a", b"1")

    def no_space(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), src)

    monkeypatch.setattr(os, "replace", no_space)
    s.put("/b", b"2")  # reaches the threshold; the compaction fails, the put does not
    s.wait_for_compaction()
    failure = s.info()["auto_compaction"]["error"]
    assert failure is not None and failure["errno"] == errno.ENOSPC
    with pytest.raises(KeyExistsError):
        s.put("/b", b"2")  # only because the first put succeeded
    assert s.base_seq == 1  # not compacted: the original file is untouched
    monkeypatch.undo()
    s.put("/c", b"3")
    s.close()
    assert no_tmp_left(tmp_path)
    with Store.open(p, readonly=True) as r:
        assert r.keys() == ["/a", "/b", "/c"] and r.get("/b").data == b"2"


def test_auto_compaction_runs_after_the_put_returned_and_close_waits_for_it(
        tmp_path, monkeypatch):
    p = str(tmp_path / "bg.htt")
    real = os.replace
    go, renamed = threading.Event(), threading.Event()

    def slow_replace(src, dst):
        go.wait(5)
        real(src, dst)
        renamed.set()

    s = Store.create(p, auto_compact_threshold=3)
    s.put("/a", b"1")
    s.put("/b", b"2")
    monkeypatch.setattr(os, "replace", slow_replace)
    s.put("/c", b"3")  # reaches the threshold
    assert not renamed.is_set()  # the put did not wait for the compaction
    assert s.get("/c").data == b"3"
    go.set()
    s.close()  # joins the compaction
    assert renamed.is_set()
    monkeypatch.undo()
    with Store.open(p, readonly=True) as r:
        assert r.keys() == ["/a", "/b", "/c"]
        assert r.base_seq == 4 and r.info()["wal_entries"] == 0  # compacted
    assert no_tmp_left(tmp_path)


def test_writes_while_an_auto_compaction_runs_are_kept(tmp_path, monkeypatch):
    p = str(tmp_path / "busy.htt")
    with Store.create(p, auto_compact_threshold=4) as s:
        for i in range(40):
            s.put(f"/k{i:02d}", b"v%d" % i)
            if i % 7 == 0:
                s.update(f"/k{i:02d}", b"u%d" % i)
        s.wait_for_compaction()
        assert s.info()["auto_compaction"]["runs"] >= 1
        assert s.info()["auto_compaction"]["error"] is None
        expected = state_of(s)
    with Store.open(p, readonly=True) as r:
        assert state_of(r) == expected and len(r) == 40


# -- §8: subscribers get every committed seq, the compaction's RESTAMP included ---------------

@pytest.mark.parametrize("auto", [False, True])
def test_subscriber_receives_the_restamp_and_a_replica_converges(tmp_path, auto):
    p, q = str(tmp_path / "src.htt"), str(tmp_path / "replica.htt")
    src = Store.create(p, auto_compact_threshold=4 if auto else 0)
    got = []
    src.subscribe_wal(got.append)
    src.put("/a", b"1")   # seq 1
    src.seal_epoch()      # seq 2
    if auto:
        src.put("/b", b"2")  # seq 3
        src.put("/c", b"3")  # seq 4: reaches the threshold
        src.wait_for_compaction()
    else:
        src.compact()
    assert src.base_seq == (5 if auto else 3)
    src.put("/d", b"4")
    src.seal_epoch()
    src.compact()
    src.put("/e", b"5")
    src.flush()
    assert [e.seq for e in got] == list(range(1, src.next_seq))  # contiguous
    restamps = [e for e in got if e.op is g.WalOp.EPOCH and e.body.flags.restamp]
    assert len(restamps) == 2
    replica = Store.create(q)
    for e in got:
        replica.replicate([e])
    assert state_of(replica) == state_of(src)
    assert replica.epoch == src.epoch == 2 and replica.next_seq == src.next_seq
    src.close()
    replica.close()
    with Store.open(q, readonly=True) as r, Store.open(p, readonly=True) as s:
        assert state_of(r) == state_of(s) and r.epoch == s.epoch


# -- §3: reserved metadata is preserved byte for byte ----------------------------------------

@pytest.mark.parametrize("value", ["x1", "", "1_0", "\u0661", " 2"])
def test_non_decimal_child_index_is_kept_byte_for_byte(tmp_path, value):
    q = str(tmp_path / "ci.htt")
    pairs = [g.MetaPair("_child_index", value), g.MetaPair("kind", "v")]
    with Store.create(q) as s:
        # as a primary running another writer could ship it (§8)
        s.replicate([g.WalEntry(1, g.WalOp.INSERT, "/n", g.InsertBody(b"d", pairs, None))])
        assert s.state.nodes["/n"].meta == pairs
        s.put("/m", b"")  # a sibling written after it
    for _ in range(4):
        with Store.open(q) as s:
            assert s.state.nodes["/n"].meta == pairs
            s.compact()
    data = read(q)
    assert data.count(b"_child_index") == 2  # /n's own pair and /m's, nothing appended
    with Store.open(q, readonly=True) as r:
        assert r.state.nodes["/n"].meta == pairs
        assert r.reserved_meta("/n") == [("_child_index", value)]
        assert r.get("/n").meta == {"kind": "v"}


# -- nothing lost: what create and compaction replace or rewrite is kept ----------------------

def test_create_overwrite_keeps_the_bytes_it_replaces(tmp_path):
    p = str(tmp_path / "old.htt")
    with Store.create(p) as s:
        s.put("/precious", b"keep me")
    before = read(p)
    with Store.create(p, overwrite=True) as s:
        assert len(s) == 0
    sides = cutmod.side_files(p)
    assert len(sides) == 1 and read(sides[0]) == before
    fresh = str(tmp_path / "fresh.htt")
    with Store.create(fresh):
        pass
    assert cutmod.side_files(fresh) == []  # a new file replaces nothing


def test_compaction_and_archiving_never_truncate_an_existing_file(tmp_path, monkeypatch):
    p = str(tmp_path / "c.htt")
    stray = f"{p}.compact-{os.getpid()}.tmp"  # e.g. left by an earlier crashed compaction
    write(stray, b"an earlier compaction's bytes")
    real_open = os.open
    truncating = []

    def spy_open(path, flags, *args, **kw):
        if flags & os.O_TRUNC:
            truncating.append(path)
        return real_open(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", spy_open)
    with Store.create(p, history_retention="archive") as s:
        s.put("/a", b"1")
        s.seal_epoch()
        s.compact()
        s.put("/b", b"2")
        s.compact()
    monkeypatch.undo()
    assert truncating == []
    assert read(stray) == b"an earlier compaction's bytes"
    with Store.open(p, readonly=True) as r:
        assert r.keys() == ["/a", "/b"] and len(r.info()["sidecars"]) == 2

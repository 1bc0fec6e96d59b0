"""HTT writer sessions after an I/O error (§6 Write, the fsync-gate lesson): a failed
WAL write or fsync poisons the session. The failing call raises ``Poisoned`` (cause: the
``OSError``), so does every later mutating or flushing call, ``close()`` writes nothing
more, and reopening the file gives exactly its durable state: every acknowledged entry,
the failed one at most once, never half an entry."""

from __future__ import annotations

import errno
import os

import pytest

from bytewright.generated import htt as g
from bytewright.runtime import cut as cutmod
from bytewright.runtime.errors import BytewrightError
from bytewright.runtime.htt import errors as htt_errors
from bytewright.runtime.htt.store import Store

from .conftest import read

# a stand-in that nothing raises keeps each test failing on its own assertion where the
# class does not exist yet
Poisoned = getattr(htt_errors, "Poisoned", type("PoisonedMissing", (Exception,), {}))

ACKED = {f"/ok/{i}": b"acked %d" % i for i in range(4)}


class Faults:
    """Fail ``os.pwrite`` / ``os.fsync`` on one file descriptor once armed."""

    def __init__(self, monkeypatch) -> None:
        self.fd: int | None = None
        self.mode: str | None = None
        self.calls = 0
        real_pwrite, real_fsync = os.pwrite, os.fsync

        def pwrite(fd, data, offset):
            if fd == self.fd and self.mode is not None:
                self.calls += 1
                if self.mode == "enospc_write":
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                if self.mode == "short_write":
                    if self.calls == 1:  # the kernel takes half, then the disk is full
                        return real_pwrite(fd, bytes(data)[: max(1, len(data) // 2)], offset)
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                if self.mode == "eio_header" and self.calls == 2:
                    raise OSError(errno.EIO, os.strerror(errno.EIO))
            return real_pwrite(fd, data, offset)

        def fsync(fd):
            if fd == self.fd and self.mode == "eio_fsync":
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            return real_fsync(fd)

        monkeypatch.setattr(os, "pwrite", pwrite)
        monkeypatch.setattr(os, "fsync", fsync)

    def arm(self, store: Store, mode: str) -> None:
        self.fd, self.mode, self.calls = store.fd, mode, 0

    def disarm(self) -> None:
        self.mode = None


MODES = ("enospc_write", "short_write", "eio_fsync", "eio_header")
ERRNO = {"enospc_write": errno.ENOSPC, "short_write": errno.ENOSPC,
         "eio_fsync": errno.EIO, "eio_header": errno.EIO}


@pytest.fixture
def faults(monkeypatch):
    return Faults(monkeypatch)


def _acked_store(p: str, **kw) -> Store:
    s = Store.create(p, **kw)
    for k, v in ACKED.items():
        s.put(k, v)
    s.flush()
    return s


def _assert_poisoned(exc_info, mode: str) -> None:
    exc = exc_info.value
    assert isinstance(exc, BytewrightError)
    assert isinstance(exc.__cause__, OSError) and exc.__cause__.errno == ERRNO[mode]
    assert "close" in str(exc) and "reopen" in str(exc)


def _every_mutation_is_refused(s: Store, failed_key: str) -> None:
    for call in (lambda: s.put(failed_key, b"again"), lambda: s.put("/fresh", b"x"),
                 lambda: s.update("/ok/0", b"changed"), lambda: s.delete("/ok/1"),
                 lambda: s.set_meta("/ok/2", "k", "v"), s.seal_epoch, s.flush, s.sync,
                 s.compact):
        with pytest.raises(Poisoned):
            call()


def _reopen_and_check(p: str, failed: dict[str, bytes]) -> tuple[Store, object]:
    """The durable state: every acknowledged entry, each failed one at most once and
    whole; the WAL replays clean or ends in a torn tail the writer keeps aside. Returns
    the writer session and the damage the first (read-only) open reported."""
    with Store.open(p, readonly=True) as r:
        damage = r.scan.damage
        assert damage is None or damage.records_after == 0, damage
    w = Store.open(p)
    for k, v in ACKED.items():
        assert w.get(k).data == v
    keys = [e.key for e in w.committed_entries() if e.op == g.WalOp.INSERT]
    assert len(keys) == len(set(keys))  # never an entry twice
    for k, v in failed.items():
        got = w.get(k)
        assert got is None or got.data == v
    if damage is not None:  # the cut tail is kept, byte for byte
        sides = cutmod.side_files(p)
        assert sides, "a cut without a side file"
        assert os.path.getsize(sides[0]) > 0
    with Store.open(p, readonly=True, recovery="absolute_consistency") as r2:
        assert r2.scan.damage is None  # after the writer open the WAL is clean
    return w, damage


@pytest.mark.parametrize("compression", [None, "zlib"])
@pytest.mark.parametrize("mode", MODES)
def test_failed_put_poisons_per_op(tmp_path, faults, mode, compression):
    p = str(tmp_path / "s.htt")
    s = _acked_store(p, compression=compression)
    faults.arm(s, mode)
    with pytest.raises(Poisoned) as exc_info:
        s.put("/failed", b"the failed entry")
    _assert_poisoned(exc_info, mode)
    faults.disarm()  # the disk is fine again: still nothing may be written
    size = os.path.getsize(p)
    image = read(p)
    _every_mutation_is_refused(s, "/failed")
    s.close()  # no error, nothing written, lock released
    s.close()
    assert s.fd is None
    assert read(p) == image and os.path.getsize(p) == size
    w, damage = _reopen_and_check(p, {"/failed": b"the failed entry"})
    if mode == "short_write":  # half an entry reached the file: a torn tail, kept aside
        assert damage is not None and damage.torn_tail
        assert w.get("/failed") is None
        with open(cutmod.side_files(p)[0], "rb") as fh:
            assert fh.read() == image[damage.offset:]  # every cut byte
    elif mode in ("eio_fsync", "eio_header"):  # the bytes reached the file whole
        assert damage is None and w.get("/failed").data == b"the failed entry"
    else:
        assert damage is None and w.get("/failed") is None
    if w.get("/failed") is None:
        w.put("/failed", b"the failed entry")  # the retry after reopening succeeds
    w.put("/later", b"later")
    w.close()
    with Store.open(p, readonly=True) as r:
        assert r.get("/failed").data == b"the failed entry"
        assert r.get("/later").data == b"later"
        assert r.scan.damage is None


@pytest.mark.parametrize("mode", MODES)
def test_failed_batch_flush_poisons(tmp_path, faults, mode):
    """batched: a put is acknowledged only by the flush that writes it; the put that
    fills the batch runs that flush, and its failure poisons the session."""
    p = str(tmp_path / "b.htt")
    s = _acked_store(p, durability="batched", batch_size=4)
    batch = {f"/batch-{i}": b"batched %d" % i for i in range(4)}  # one entry each
    items = list(batch.items())
    size = os.path.getsize(p)
    for k, v in items[:3]:
        s.put(k, v)  # buffered: not acknowledged, nothing written yet
    assert os.path.getsize(p) == size
    faults.arm(s, mode)
    with pytest.raises(Poisoned) as exc_info:
        s.put(*items[3])  # fills the batch: the flush fails
    _assert_poisoned(exc_info, mode)
    faults.disarm()
    image = read(p)
    _every_mutation_is_refused(s, items[0][0])
    s.close()
    assert read(p) == image
    _reopen_and_check(p, batch)[0].close()


@pytest.mark.parametrize(("durability", "mode"),
                         [("batched", m) for m in MODES] + [("manual", "eio_fsync")])
def test_failed_explicit_flush_poisons(tmp_path, faults, durability, mode):
    """batched: the puts wait in memory for flush(); manual: they are written at once
    and flush() is their fsync. Either way flush() is the acknowledgement, and its
    failure poisons the session."""
    p = str(tmp_path / "f.htt")
    s = _acked_store(p, durability=durability, batch_size=64)
    pending = {"/p/1": b"one", "/p/2": b"two"}
    for k, v in pending.items():
        s.put(k, v)
    faults.arm(s, mode)
    with pytest.raises(Poisoned) as exc_info:
        s.flush()
    _assert_poisoned(exc_info, mode)
    faults.disarm()
    image = read(p)
    _every_mutation_is_refused(s, "/p/1")
    s.close()
    assert read(p) == image
    _reopen_and_check(p, pending)[0].close()


@pytest.mark.parametrize("mode", MODES)
def test_failed_flush_at_close_poisons_and_releases(tmp_path, faults, mode):
    p = str(tmp_path / "c.htt")
    s = _acked_store(p, durability="batched", batch_size=64)
    s.put("/at-close", b"flushed by close")
    faults.arm(s, mode)
    with pytest.raises(Poisoned) as exc_info:
        s.close()
    _assert_poisoned(exc_info, mode)
    faults.disarm()
    assert s.fd is None  # released: the next writer gets the lock
    s.close()  # closing again is quiet
    with pytest.raises(Poisoned):
        s.put("/x", b"x")
    _reopen_and_check(p, {"/at-close": b"flushed by close"})[0].close()


def test_reads_and_info_still_answer_after_poisoning(tmp_path, faults):
    p = str(tmp_path / "r.htt")
    s = _acked_store(p)
    faults.arm(s, "eio_fsync")
    with pytest.raises(Poisoned):
        s.put("/failed", b"x")
    faults.disarm()
    assert s.get("/ok/0").data == ACKED["/ok/0"]
    assert s.get("/failed") is None  # per_op: memory changes only once the write succeeds
    poisoned = s.info()["poisoned"]
    assert poisoned and "EIO" in poisoned["errno"] and "reopen" in poisoned["message"]
    s.close()


def test_a_failed_write_is_never_delivered_to_subscribers(tmp_path, faults):
    p = str(tmp_path / "sub.htt")
    s = _acked_store(p)
    seen = []
    s.subscribe_wal(seen.append)
    s.put("/delivered", b"1")
    faults.arm(s, "eio_fsync")
    with pytest.raises(Poisoned):
        s.put("/failed", b"2")
    faults.disarm()
    s.close()
    assert [e.key for e in seen] == ["/delivered"]


def test_retry_after_a_failed_put_does_not_claim_the_key_exists(tmp_path, faults):
    """Whatever the failing call raised, the retry must not report ``KeyExistsError`` for
    an entry nothing acknowledged, nor succeed on top of a failed fsync."""
    p = str(tmp_path / "k.htt")
    s = _acked_store(p)
    faults.arm(s, "eio_fsync")
    with pytest.raises((OSError, Poisoned)):
        s.put("/failed", b"x")
    faults.disarm()
    with pytest.raises(Poisoned):
        s.put("/failed", b"x")
    size = os.path.getsize(p)
    s.close()
    assert os.path.getsize(p) == size  # close wrote nothing on top of the failed fsync

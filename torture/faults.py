"""A fault-injecting file layer: wraps the ``os`` calls the format runtimes write through.

While a :class:`Faults` context is active, ``os.write``, ``os.pwrite``, ``os.fsync``,
``os.fdatasync``, ``os.replace``, ``os.rename`` and ``os.ftruncate`` (and ``os.close`` in
drop mode) are replaced in the whole process by wrappers that, for threads that joined
with :meth:`Faults.join`, consult a seeded schedule before each call. A call the schedule picks fails in one of these ways:

* ``fsync-eio``: ``fsync``/``fdatasync`` raises ``EIO`` (the data was written);
* ``short-write``: the write puts a prefix on disk and returns the short count;
* ``short-write-eio``: the write puts a prefix on disk and raises ``EIO`` (a torn write);
* ``enospc``: the write raises ``ENOSPC`` and writes nothing;
* ``replace-fail``: ``os.replace``/``os.rename`` raises ``EIO`` and renames nothing;
* ``truncate-fail``: ``os.ftruncate`` raises ``EIO`` and changes nothing.

With ``drop=True`` a failed fsync also loses data, as a kernel may after a writeback
error (the dirty pages are marked clean and can be evicted at once): the layer tracks, per
file descriptor, every write since that descriptor's last successful ``fsync`` (where it
landed and the bytes it replaced; a successful fsync of the file through any descriptor
clears them, and so does closing the descriptor), and when an injected ``fsync-eio`` fails
that descriptor it puts the replaced bytes back (zeros where the write extended the file),
newest write first, so the file reads as it stood at the last successful fsync plus what
other descriptors wrote. Each such loss is counted as ``fsync-drop`` and appended to the
drop log (:func:`read_drops`) at once, so a later kill cannot hide it.

Each joined thread has its own random stream (seed, thread slot), so a thread's sequence
of calls meets the same faults on a re-run. Threads that did not join (the harness's own
bookkeeping) are never faulted, and the harness writes its oracle through :data:`REAL`.
"""

from __future__ import annotations

import errno
import fcntl
import glob
import os
import random
import signal
import stat
import threading
from collections import Counter
from dataclasses import dataclass
from types import SimpleNamespace

__all__ = ["DROP", "KINDS", "REAL", "Drop", "Faults", "read_drops"]

KINDS = ("fsync-eio", "short-write", "short-write-eio", "enospc", "replace-fail",
         "truncate-fail")

# the unwrapped calls, taken once at import: the oracle and the harness use these
REAL = SimpleNamespace(write=os.write, pwrite=os.pwrite, fsync=os.fsync,
                       fdatasync=getattr(os, "fdatasync", os.fsync), replace=os.replace,
                       rename=os.rename, ftruncate=os.ftruncate, close=os.close)

_WRITE_KINDS = ("short-write", "short-write-eio", "enospc")
DROP = "fsync-drop"  # the tally of data lost to a failed fsync (``drop=True``)


@dataclass(frozen=True)
class Drop:
    """Bytes a failed fsync lost: ``path`` (as the descriptor named it) ``[offset,
    offset + length)`` went back to what it held at the last successful fsync."""

    path: str
    offset: int
    length: int


def read_drops(directory: str) -> list[Drop]:
    """Every drop the processes of a run logged in ``directory`` (``drops-PID.log``)."""
    out = []
    for log in sorted(glob.glob(os.path.join(directory, "drops-*.log"))):
        with open(log, "rb") as fh:
            for raw in fh.read().decode("utf-8", "replace").splitlines():
                path, _, rest = raw.rpartition(" ")
                path, _, off = path.rpartition(" ")
                if off.isdigit() and rest.isdigit():
                    out.append(Drop(path, int(off), int(rest)))
    return out


def _fd_path(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return f"fd {fd}"


def _pread(fd: int, n: int, offset: int) -> bytes:
    try:
        return os.pread(fd, n, offset)
    except OSError:  # a write-only descriptor: read the same file through another one
        rfd = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)
        try:
            return os.pread(rfd, n, offset)
        finally:
            REAL.close(rfd)


def _eio(what: str) -> OSError:
    return OSError(errno.EIO, f"injected I/O error ({what})")


class Faults:
    """Seeded fault schedule; ``rate`` is the chance that one eligible call fails.

    ``kinds`` limits which faults are drawn. ``counts`` tallies the faults injected, by
    kind; ``fired()`` is the number the calling thread has met so far (a writer compares
    it before and after an API call to tell an injected error from a real one)."""

    def __init__(self, seed: int, rate: float, kinds: tuple[str, ...] = KINDS,
                 skip: int = 0, crash_at: int | None = None, crash_torn: bool = False,
                 drop: bool = False, drop_dir: str | None = None) -> None:
        self.seed = seed
        self.rate = rate
        self.kinds = tuple(k for k in kinds if k in KINDS)
        self.skip = skip  # calls each thread makes before any fault (let setup succeed)
        # a crash point: the joined thread's call number at which the process SIGKILLs
        # itself (before the call, or after half a write landed when ``crash_torn``)
        self.crash_at = crash_at
        self.crash_torn = crash_torn
        self.drop = drop and "fsync-eio" in self.kinds
        self.drop_dir = drop_dir  # where ``drops-PID.log`` goes (None: not logged)
        # fd -> ((dev, ino), [(offset, bytes replaced, length written)]) since its fsync
        self._unsynced: dict[int, tuple[tuple[int, int], list[tuple[int, bytes, int]]]] = {}
        self.counts: Counter[str] = Counter()
        self._local = threading.local()
        self._lock = threading.Lock()
        self._saved: dict[str, object] | None = None

    # -- threads -------------------------------------------------------------------------
    def join(self, slot: int) -> None:
        """Let the calling thread be faulted, with its own stream for ``slot``."""
        self._local.rng = random.Random(f"{self.seed}:{slot}")
        self._local.calls = 0
        self._local.fired = 0
        self._local.counts = Counter()
        self._local.dropped = []

    def take(self) -> Counter:
        """The faults the calling thread met since the last ``take`` (then cleared)."""
        counts = getattr(self._local, "counts", None)
        if not counts:
            return Counter()
        self._local.counts = Counter()
        return counts

    def leave(self) -> None:
        self._local.rng = None

    def fired(self) -> int:
        return getattr(self._local, "fired", 0)

    def dropped(self) -> list[str]:
        """Paths whose data the calling thread's failed fsyncs lost, oldest first (a
        writer compares the length before and after an API call)."""
        return getattr(self._local, "dropped", [])

    def paused(self) -> _Paused:
        """A ``with`` block in which the calling thread is not faulted."""
        return _Paused(self)

    # -- the schedule --------------------------------------------------------------------
    def _pick(self, family: str) -> str | None:
        rng = getattr(self._local, "rng", None)
        if rng is None or not (self.kinds or self.crash_at):
            return None
        self._local.calls += 1
        if self._local.calls == self.crash_at:
            if family == "write" and self.crash_torn:
                return "crash-torn"
            os.kill(os.getpid(), signal.SIGKILL)
        if self._local.calls <= self.skip or rng.random() >= self.rate:
            return None
        if family == "write":
            options = [k for k in _WRITE_KINDS if k in self.kinds]
        elif family == "fsync":
            options = ["fsync-eio"] if "fsync-eio" in self.kinds else []
        elif family == "rename":
            options = ["replace-fail"] if "replace-fail" in self.kinds else []
        else:
            options = ["truncate-fail"] if "truncate-fail" in self.kinds else []
        if not options:
            return None
        kind = rng.choice(options)
        self._local.fired += 1
        self._local.counts[kind] += 1
        with self._lock:
            self.counts[kind] += 1
        return kind

    def _prefix(self, n: int) -> int:
        return self._local.rng.randrange(0, n) if n > 1 else 0

    # -- the wrappers --------------------------------------------------------------------
    # -- what a failed fsync loses (``drop=True``) -------------------------------------
    def _before(self, fd: int, offset: int | None, data):
        """Before a write of ``data`` at ``offset`` (None: the descriptor's position):
        ``(file, offset or None for an append, bytes it replaces)``, or None when
        nothing is tracked (drop mode off, or not a regular file)."""
        if not self.drop:
            return None
        length = memoryview(data).nbytes
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None
            if offset is None:
                if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND:
                    return (st.st_dev, st.st_ino), None, b""
                offset = os.lseek(fd, 0, os.SEEK_CUR)
            n = max(0, min(length, st.st_size - offset))
            return (st.st_dev, st.st_ino), offset, _pread(fd, n, offset) if n else b""
        except OSError:
            return None

    def _track(self, fd: int, before, written: int) -> None:
        if before is None or written <= 0:
            return
        key, offset, old = before
        if offset is None:  # an O_APPEND write: it ended where the position now is
            try:
                offset = os.lseek(fd, 0, os.SEEK_CUR) - written
            except OSError:
                return
        with self._lock:
            held = self._unsynced.get(fd)
            if held is None or held[0] != key:
                held = self._unsynced[fd] = (key, [])
            held[1].append((offset, old[:written], written))

    def _synced(self, fd: int) -> None:
        # an fsync writes back every dirty page of the file, whichever descriptor wrote it
        if self.drop:
            try:
                st = os.fstat(fd)
            except OSError:
                return
            key = (st.st_dev, st.st_ino)
            with self._lock:
                for other in [f for f, (k, _) in self._unsynced.items() if k == key]:
                    del self._unsynced[other]

    def _close(self, fd):
        # a closed descriptor's number may be reused for the same file: what it wrote is
        # no longer this descriptor's to lose (a later fsync of the file writes it back)
        if self.drop:
            with self._lock:
                self._unsynced.pop(fd, None)
        return REAL.close(fd)

    def _lose(self, fd: int) -> None:
        """An injected fsync failure: put back what ``fd`` wrote since its last fsync."""
        with self._lock:
            held = self._unsynced.pop(fd, None)
        if not held:
            return
        key, writes = held
        try:
            st = os.fstat(fd)
        except OSError:
            return
        if (st.st_dev, st.st_ino) != key:
            return  # the descriptor number now names another file
        path = _fd_path(fd)
        wfd = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY)  # no O_APPEND: pwrite lands
        lost = []
        try:
            for offset, old, length in reversed(writes):
                end = min(offset + length, st.st_size)  # a cut since: those bytes are gone
                if end <= offset:
                    continue
                back = (old + bytes(length - len(old)))[:end - offset]
                REAL.pwrite(wfd, back, offset)
                lost.append(Drop(path, offset, end - offset))
        finally:
            REAL.close(wfd)
        if not lost:
            return
        self._local.dropped = self.dropped() + [path]
        self._local.counts[DROP] += 1
        with self._lock:
            self.counts[DROP] += 1
        if self.drop_dir is not None:
            log = os.open(os.path.join(self.drop_dir, f"drops-{os.getpid()}.log"),
                          os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                REAL.write(log, "".join(f"{d.path} {d.offset} {d.length}\n"
                                        for d in lost).encode("utf-8", "replace"))
                REAL.fsync(log)
            finally:
                REAL.close(log)

    # -- the wrappers --------------------------------------------------------------------
    def _write(self, fd, data):
        kind = self._pick("write")
        before = self._before(fd, None, data)
        if kind is None:
            n = REAL.write(fd, data)
            self._track(fd, before, n)
            return n
        view = memoryview(data).cast("B")
        if kind == "crash-torn":
            REAL.write(fd, view[:len(view) // 2])
            os.kill(os.getpid(), signal.SIGKILL)
        if kind == "enospc" or len(view) == 0:
            raise OSError(errno.ENOSPC, "injected: no space left on device")
        n = REAL.write(fd, view[:self._prefix(len(view))])
        self._track(fd, before, n)
        if kind == "short-write" and n > 0:
            return n
        raise _eio("torn write")

    def _pwrite(self, fd, data, offset):
        kind = self._pick("write")
        before = self._before(fd, offset, data)
        if kind is None:
            n = REAL.pwrite(fd, data, offset)
            self._track(fd, before, n)
            return n
        view = memoryview(data).cast("B")
        if kind == "crash-torn":
            REAL.pwrite(fd, view[:len(view) // 2], offset)
            os.kill(os.getpid(), signal.SIGKILL)
        if kind == "enospc" or len(view) == 0:
            raise OSError(errno.ENOSPC, "injected: no space left on device")
        n = REAL.pwrite(fd, view[:self._prefix(len(view))], offset)
        self._track(fd, before, n)
        if kind == "short-write" and n > 0:
            return n
        raise _eio("torn pwrite")

    def _fsync(self, fd):
        if self._pick("fsync"):
            if self.drop:
                self._lose(fd)
            raise _eio("fsync")
        REAL.fsync(fd)
        self._synced(fd)

    def _fdatasync(self, fd):
        if self._pick("fsync"):
            if self.drop:
                self._lose(fd)
            raise _eio("fdatasync")
        REAL.fdatasync(fd)
        self._synced(fd)

    def _replace(self, src, dst, **kw):
        if self._pick("rename"):
            raise _eio("replace")
        return REAL.replace(src, dst, **kw)

    def _rename(self, src, dst, **kw):
        if self._pick("rename"):
            raise _eio("rename")
        return REAL.rename(src, dst, **kw)

    def _ftruncate(self, fd, size):
        if self._pick("truncate"):
            raise _eio("ftruncate")
        return REAL.ftruncate(fd, size)

    # -- install / remove ----------------------------------------------------------------
    def __enter__(self) -> Faults:
        wrappers = {"write": self._write, "pwrite": self._pwrite, "fsync": self._fsync,
                    "fdatasync": self._fdatasync, "replace": self._replace,
                    "rename": self._rename, "ftruncate": self._ftruncate}
        if self.drop:
            wrappers["close"] = self._close
        self._saved = {name: getattr(os, name) for name in wrappers if hasattr(os, name)}
        for name, fn in wrappers.items():
            if name in self._saved:
                setattr(os, name, fn)
        return self

    def __exit__(self, *exc) -> None:
        for name, fn in (self._saved or {}).items():
            setattr(os, name, fn)
        self._saved = None


class _Paused:
    def __init__(self, faults: Faults) -> None:
        self.faults = faults

    def __enter__(self) -> None:
        self.rng = getattr(self.faults._local, "rng", None)
        self.faults._local.rng = None

    def __exit__(self, *exc) -> None:
        self.faults._local.rng = self.rng

"""ZE files on disk: atomic artifact writes, the WAL appender, repair and salvage.

* :func:`write_atomic` writes a whole artifact (segment, manifest, purge intent, frame)
  as temp file, fsync, rename, directory fsync: a crash leaves the old file or the new
  one, never a mixture.
* :class:`WalAppender` appends records to a WAL (family 11) and fsyncs each append. Its
  open follows RocksDB's ``kTolerateCorruptedTailRecords``: a torn tail (damage with no
  valid-looking record, of any op, after it) is cut and the append continues; damage
  followed by valid-looking records refuses the open (:class:`WalDamaged`) unless the
  caller repeats the reported offset in ``discard_after``. Every cut, a torn tail's
  included, goes through :func:`bytewright.runtime.cut.cut`: the removed bytes are kept
  in ``FILE.discarded-OFFSET`` (fsynced) before the file is shortened.
* :func:`salvage_wal` copies every record that still verifies, before and after the
  damage, into a new WAL file for a human to judge.

Every write goes through ``io`` (``OsIO`` by default) so tests can crash at each step.
"""

from __future__ import annotations

import os

from ...generated import ze
from .. import cut
from ..atomic import AtomicFile
from ..errors import ConstraintError, DecodeError
from ..mapped import RELEASE_EVERY, mapped_file
from . import wal


class OsIO(cut.OsSteps):
    """The write steps (tests substitute one that crashes after step k). The truncate step
    is the shared one of ``runtime.cut``, which alone shortens files (after keeping the
    bytes)."""

    def write(self, fd: int, data: bytes, offset: int) -> None:
        view = memoryview(data)
        while view:
            n = os.pwrite(fd, view, offset)
            view, offset = view[n:], offset + n

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)


def fsync_dir(path: str | os.PathLike) -> None:
    d = os.path.dirname(os.path.abspath(path))
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems do not fsync directories
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike, data: bytes, *, io: OsIO | None = None) -> None:
    """Replace ``path`` with ``data``: temp file, fsync, rename, directory fsync."""
    io = io or OsIO()
    path = os.fspath(path)
    tmp = f"{path}.tmp-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        io.write(fd, data, 0)
        io.fsync(fd)
    finally:
        os.close(fd)
    io.rename(tmp, path)
    fsync_dir(path)


class WalDamaged(ConstraintError):
    """WAL damage with valid-looking records after it: a cut there needs ``discard_after``."""


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


class WalAppender:
    """Appends records to one WAL file; each :meth:`append` is durable when it returns."""

    def __init__(self, path: str | os.PathLike, *, discard_after: int | None = None,
                 first_seq: int = 1, io: OsIO | None = None) -> None:
        self.path = os.fspath(path)
        self.io = io or OsIO()
        self.discarded: str | None = None
        self.replay: wal.Replay | None = None
        if not os.path.exists(self.path) or os.path.getsize(self.path) == 0:
            # a new WAL appears whole or not at all: a torn header would refuse every open
            write_atomic(self.path, wal.wal_bytes(first_seq), io=self.io)
        self.fd = os.open(self.path, os.O_RDWR)
        try:
            self._recover(discard_after)
        except BaseException:
            os.close(self.fd)
            raise

    def _recover(self, discard_after: int | None) -> None:
        data = _read(self.path)
        r = wal.replay(data)
        self.replay = r
        if r.terminator == "invalid_header":
            raise r.error
        self.next_seq = r.first_seq + len(r.records)
        self.end = r.records[-1].end if r.records else wal.HEADER_LEN
        if r.terminator == "clean":
            return
        if r.damaged and discard_after != r.offset:
            more = "" if r.scan_complete else " (or more: the scan stopped at its limit)"
            raise WalDamaged(f"WAL damaged at offset {r.offset} ({r.reason}) with "
                             f"{r.valid_after} valid-looking records after it{more}; salvage "
                             f"first, or pass discard_after={r.offset} to cut there",
                             offset=r.offset, path="wal", found=r.valid_after)
        # a torn tail, or a cut the caller asked for: either way the bytes are kept
        reason = (f"WAL damage at {r.offset} ({r.reason}), cut by discard_after"
                  if r.damaged else f"torn WAL tail at {r.offset} ({r.reason})")
        done = cut.cut(self.path, self.fd, r.offset, reason=reason, data=data, io=self.io)
        self.discarded = done.side
        self.end = r.offset

    def append(self, op: int, payload: bytes) -> int:
        """Append one record (``op``, raw ``payload``); returns its seq."""
        if self.fd < 0:
            raise ConstraintError("WAL appender is closed", path="wal")
        seq = self.next_seq
        rec = wal.frame(seq, op, payload)
        self.io.write(self.fd, rec, self.end)
        self.io.fsync(self.fd)
        self.end += len(rec)
        self.next_seq += 1
        return seq

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> WalAppender:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def salvage_wal(data: bytes) -> tuple[bytes, list[int]]:
    """A new WAL holding every record that still verifies, before and after the damage,
    byte for byte in file order (their original seqs: a human judges the gap). Returns the
    bytes and the source offset of each record kept."""
    out = bytearray()
    offsets = _salvage(data, out.__iadd__, None)
    return bytes(out), offsets


def salvage_wal_file(src: str | os.PathLike, dest: str | os.PathLike) -> list[int]:
    """:func:`salvage_wal` from the file ``src`` into a new file ``dest`` (which the
    caller has checked does not exist): ``src`` read through a map whose walked pages
    are given back, ``dest`` written piece by piece through a temporary file, so neither
    has to fit in memory. Returns the source offset of each record kept."""
    with mapped_file(src) as (buf, release), AtomicFile(dest) as out:
        offsets = _salvage(buf, out.write, release)
        out.commit()
    return offsets


def _salvage(buf, write, release) -> list[int]:
    r = wal.replay(buf, release=release)
    if r.terminator == "invalid_header":
        raise r.error
    offsets = r.records.offsets + list(r.valid_after_offsets)  # no Record per offset
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    write(wal.wal_bytes(r.first_seq))
    mark = RELEASE_EVERY
    for at in offsets:
        try:
            _, end = ze.decode_wal_frame(mv, at)
        except DecodeError:  # the scan only returns verifying frames
            continue
        write(mv[at:end])
        if release is not None and end >= mark:
            release(end)
            mark = end + RELEASE_EVERY
    return offsets

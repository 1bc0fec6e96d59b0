"""Writing files so that nothing is half-written: every byte or an error, and a new file
that appears whole or not at all.

``write_all`` loops until the kernel has taken every byte (one ``write`` call takes at
most ~2 GiB on Linux, and fewer when interrupted: a single call can silently write part).
``AtomicFile`` writes a new file through a temporary sibling, in pieces, so the output of a
rewrite never has to fit in memory, and renames it into place after an fsync.
"""

from __future__ import annotations

import os
from types import TracebackType

__all__ = ["AtomicFile", "fsync_dir", "write_all"]


def write_all(fd: int, data, offset: int | None = None) -> None:
    """Write all of ``data`` (any buffer) to ``fd``: at ``offset`` (``pwrite``), or at the
    file position when ``offset`` is None."""
    view = memoryview(data).cast("B")
    while view:
        n = os.write(fd, view) if offset is None else os.pwrite(fd, view, offset)
        if n <= 0:  # a device that takes nothing would loop for ever
            raise OSError(28, "write took no bytes (no space left on device?)")
        view = view[n:]
        if offset is not None:
            offset += n


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync the directory holding ``path``, so that a rename or a new name in it is
    durable (best effort where the platform refuses a directory fsync)."""
    d = os.path.dirname(os.path.abspath(path))
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class AtomicFile:
    """A new file at ``path``, written in pieces: ``write`` buffers up to ``buffer``
    bytes, ``commit`` flushes, fsyncs and renames the temporary sibling into place, then
    fsyncs the directory. Leaving the ``with`` block without ``commit`` (an exception)
    removes the temporary file; ``path`` is then untouched.

    ``os.replace`` semantics: a caller that must not overwrite checks first (as the
    repair commands do, before reading anything)."""

    def __init__(self, path: str | os.PathLike[str], buffer: int = 1 << 20) -> None:
        self.path = os.fspath(path)
        self.tmp = f"{self.path}.tmp-{os.getpid()}"
        self.fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self._buf = bytearray()
        self._limit = buffer
        self.written = 0
        self.committed = False

    def write(self, data) -> None:
        self._buf += data
        self.written += len(data)
        if len(self._buf) >= self._limit:
            self._flush()

    def _flush(self) -> None:
        if self._buf:
            write_all(self.fd, self._buf)
            self._buf = bytearray()

    def commit(self) -> None:
        self._flush()
        os.fsync(self.fd)
        os.close(self.fd)
        self.fd = -1
        os.replace(self.tmp, self.path)
        self.committed = True
        fsync_dir(self.path)

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if not self.committed:
            try:
                os.unlink(self.tmp)
            except FileNotFoundError:
                pass

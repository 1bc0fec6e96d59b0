"""The one way a file is shortened or overwritten in place: keep the bytes first.

Every operation of every format that truncates a file, or rewrites bytes that are already
there, goes through this module. Before anything is removed, the removed bytes are copied
to a side file next to the original, ``FILE.discarded-OFFSET`` (``FILE.overwritten-OFFSET``
for an in-place rewrite), and that side file and its directory are fsynced. Torn tails are
kept too: keeping them is cheap, and a tail that looked torn is sometimes not.

* :func:`cut` keeps ``[offset, end)`` and then truncates the file at ``offset``.
* :func:`keep_overwritten` keeps bytes an in-place write is about to replace.
* :func:`keep` writes one side file (never overwriting an earlier one) and returns its path.
* :func:`grow` extends a file; it refuses to shorten one (use :func:`cut`).
* :func:`side_files` lists the side files of a path, in offset order.

``io`` is any object with ``ftruncate(fd, size)`` and ``fsync(fd)`` (the format runtimes'
write-step objects), so crash-point tests can stop between keeping and cutting. A test in
``tests/test_cut.py`` checks that no other module of the package calls ``ftruncate``.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass

from .atomic import fsync_dir, write_all

__all__ = ["Cut", "OsSteps", "cut", "grow", "keep", "keep_overwritten", "side_files", "side_path"]

DISCARDED = "discarded"
OVERWRITTEN = "overwritten"


@dataclass(frozen=True)
class Cut:
    """What one cut removed: the file, where it was cut, how many bytes went, the side
    file that holds them (None when nothing was removed) and why."""

    path: str
    offset: int
    length: int
    side: str | None
    reason: str

    def as_dict(self) -> dict:
        return {"path": self.side, "offset": self.offset, "length": self.length,
                "reason": self.reason}


class OsSteps:
    """The two steps :func:`cut` takes after keeping the bytes; a format's write-step
    object subclasses it so crash-point tests can stop between them."""

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)


def side_path(path: str | os.PathLike[str], offset: int, label: str = DISCARDED) -> str:
    return f"{os.fspath(path)}.{label}-{offset}"


def side_files(path: str | os.PathLike[str], label: str | None = None) -> list[str]:
    """Side files kept for ``path`` (every label, or one), ordered by offset then name."""
    path = os.fspath(path)
    found = []
    labels = [label] if label else [DISCARDED, OVERWRITTEN]
    for lab in labels:
        prefix = f"{path}.{lab}-"
        for p in glob.glob(glob.escape(prefix) + "*"):
            rest = p[len(prefix):]
            tail = rest.split(".")[0]
            if tail.isdigit() and ".tmp-" not in rest:  # a temporary copy is not yet kept
                found.append((int(tail), p))
    return [p for _, p in sorted(found)]


def keep(path: str | os.PathLike[str], data, offset: int, label: str = DISCARDED) -> str:
    """Write ``data`` (the bytes that stood at ``offset``) to a new side file, fsync it and
    its directory, and return its path. The side file appears whole or not at all (written
    under a temporary name, then linked into place). An earlier side file is never
    overwritten: a second cut at the same offset gets ``.2``, ``.3``...; a side file that
    already holds exactly these bytes (a crash between keeping and cutting) is reused."""
    base = side_path(path, offset, label)
    payload = bytes(data)
    tmp = f"{base}.tmp-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, payload, 0)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    target, n = base, 1
    try:
        while True:
            try:
                os.link(tmp, target)  # fails if the name exists: never overwrites
                break
            except FileExistsError:
                if os.path.getsize(target) == len(payload):
                    with open(target, "rb") as fh:
                        if fh.read() == payload:
                            break
                n += 1
                target = f"{base}.{n}"
    finally:
        os.unlink(tmp)
    fsync_dir(target)
    return target


def _read_from(fd: int, offset: int, size: int) -> bytes:
    chunks, at = [], offset
    while at < size:
        piece = os.pread(fd, min(1 << 24, size - at), at)
        if not piece:
            break
        chunks.append(piece)
        at += len(piece)
    return b"".join(chunks)


def cut(path: str | os.PathLike[str], fd: int, offset: int, *, reason: str,
        data=None, io=None) -> Cut:
    """Keep every byte of the file from ``offset`` to its end in a side file, then truncate
    the file at ``offset`` and fsync it. ``data`` is the file's content when the caller
    already holds it (bytes, a map or a memoryview; only ``data[offset:]`` is read);
    otherwise the bytes are read from ``fd``. Returns what was cut."""
    io = io or OsSteps()
    path = os.fspath(path)
    size = os.fstat(fd).st_size
    if offset < 0 or offset > size:
        raise ValueError(f"cut offset {offset} outside the file (size {size})")
    if offset == size:
        return Cut(path, offset, 0, None, reason)
    removed = bytes(data[offset:size]) if data is not None else _read_from(fd, offset, size)
    side = keep(path, removed, offset, DISCARDED)
    io.ftruncate(fd, offset)
    io.fsync(fd)
    return Cut(path, offset, len(removed), side, reason)


def keep_overwritten(path: str | os.PathLike[str], old: bytes, offset: int, *,
                     reason: str) -> Cut:
    """Keep ``old`` (the bytes at ``offset`` an in-place write is about to replace) before
    the caller overwrites them. Call it only when ``old`` holds something a reader might
    still need (a damaged header slot, a record being replaced)."""
    side = keep(path, old, offset, OVERWRITTEN)
    return Cut(os.fspath(path), offset, len(old), side, reason)


def grow(fd: int, size: int, io=None) -> None:
    """Extend the file to ``size`` bytes (zero-filled); refuses to shorten it."""
    current = os.fstat(fd).st_size
    if size < current:
        raise ValueError(f"grow to {size} would shorten a file of {current} bytes; use cut()")
    if size > current:
        (io or OsSteps()).ftruncate(fd, size)

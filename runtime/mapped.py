"""Reading a large file through a memory map with bounded resident memory.

A read-only map costs no anonymous memory, but every page the decoder has walked stays
resident (and counts in the process's RSS) until the map is closed: iterating a 1 GB log
would end at ~1 GB resident. :func:`iter_mapped` walks the records of a file and tells the
kernel, every ``release_every`` bytes, that the pages already walked are not needed; they
are clean pages of a shared file mapping, so a later read refaults them from the file:
nothing is lost, and the peak stays bounded by the window.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["RELEASE_EVERY", "iter_mapped", "mapped_file", "released_as_walked", "releaser"]

RELEASE_EVERY = 16 << 20  # bytes walked between two releases of a map's passed pages


def releaser(mm: mmap.mmap) -> Callable[[int], None] | None:
    """``release(upto)`` for a read-only map: drop the resident pages before ``upto``
    (whole pages only); None where the platform has no ``MADV_DONTNEED``."""
    advice = getattr(mmap, "MADV_DONTNEED", None)
    if advice is None or not hasattr(mm, "madvise"):
        return None

    def release(upto: int) -> None:
        length = upto - upto % mmap.PAGESIZE
        if length > 0:
            try:
                mm.madvise(advice, 0, length)
            except OSError:
                pass  # advice only: a refusal changes memory, never results

    return release


def _no_release(upto: int) -> None:
    """Where nothing is mapped (an empty file) or the platform cannot release pages."""


@contextlib.contextmanager
def mapped_file(path: str | os.PathLike[str]) -> Iterator[tuple[Any, Callable[[int], None]]]:
    """``(buf, release)`` for reading the file at ``path`` without copying it: ``buf`` a
    memoryview of a read-only map (the bytes themselves for an empty file, a pipe or a
    device) and ``release(upto)`` (see :func:`releaser`; a no-op where unsupported),
    which a reader calls as it goes so that the pages it has walked leave the resident
    set. Objects decoded from ``buf`` may keep views of it: the map then closes when the
    last of them goes."""
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
            # a pipe or a device cannot be mapped: its bytes, read as before
            yield fh.read(), _no_release
            return
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    mv = memoryview(mm)
    try:
        yield mv, releaser(mm) or _no_release
    finally:
        try:
            mv.release()
            mm.close()
        except BufferError:
            pass  # a decoded value still holds a view: the map closes with it


def released_as_walked(items: Iterable, release: Callable[[int], None],
                       end: Callable[[Any], int], *, start: int = 0,
                       every: int | None = None) -> Iterator:
    """``items`` (in file order) as they come; after each whose ``end(item)`` offset has
    passed the next mark (every ``every`` bytes from ``start``), ``release(that end)``:
    a walk over a mapped file whose resident pages stay bounded by ``every`` (default
    ``RELEASE_EVERY``, read at the call)."""
    every = RELEASE_EVERY if every is None else every
    mark = start + every
    for item in items:
        yield item
        at = end(item)
        if at >= mark:
            release(at)
            mark = at + every


def iter_mapped(path: str, iterate: Callable[..., Iterator[tuple[Any, int]]],
                offset: int = 0, *, release_every: int = RELEASE_EVERY,
                **params: Any) -> Iterator[tuple[Any, int]]:
    """``(value, end offset)`` of each record ``iterate`` (a generated ``iter_<record>``)
    finds in the file at ``path`` from ``offset``, read through a memory map whose walked
    pages are released as it goes. Values are decoded copies (a ``view: numpy`` field is
    a view of the map: reading it after the walk refaults its pages, still correct)."""
    with mapped_file(path) as (buf, release):
        yield from released_as_walked(iterate(buf, offset, **params), release, _second,
                                      start=offset, every=release_every)


def _second(pair: tuple[Any, int]) -> int:
    return pair[1]

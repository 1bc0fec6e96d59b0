"""The blob index of an open pile: handle -> the offsets of its occurrences, compact.

A pile of small blobs has as many handles as records, and the index is what an open pile
holds: a ``dict`` of ``bytes`` keys to lists cost ~250 B per blob (240 MB for the 838k
blobs of a 1 GiB pile of 1 KiB blobs). Here a handle costs its 32 bytes in one
``bytearray``, its first offset 8 bytes in an ``array``, and 16 to 32 bytes of an
open-addressing table of row numbers: ~60-70 B. The few handles written more than once
keep their later offsets in a small dict.
"""

from __future__ import annotations

from array import array
from collections.abc import ItemsView, Iterator, Mapping

HANDLE = 32  # a BLAKE3 handle
_START = 1 << 10  # table slots to begin with (a power of two)


class BlobIndex(Mapping):
    """``handle -> [offset, ...]`` in the order handles were first seen, offsets in the
    order added (``Mapping``: ``index[h]`` is a fresh list). Handles are BLAKE3 outputs,
    and Python's keyed hash of ``bytes`` (cached on the handle object) spreads them over
    the table; every probe compares the whole handle."""

    __slots__ = ("_handles", "_first", "_more", "_slots", "_mask")

    def __init__(self) -> None:
        self._handles = bytearray()  # row r: handles[32r:32r + 32]
        self._first = array("q")  # row r: the first offset of its handle
        self._more: dict[int, list[int]] = {}  # row -> later offsets (handles seen twice)
        self._slots = array("q", bytes(8 * _START))  # row + 1 per slot, 0 = empty
        self._mask = _START - 1

    def _row(self, handle: bytes) -> tuple[int, int]:
        """``(row, slot)``: the handle's row (-1 if absent) and where probing stopped."""
        if len(handle) != HANDLE:
            return -1, -1
        slots, handles, mask = self._slots, self._handles, self._mask
        i = hash(bytes(handle)) & mask
        while True:
            r = slots[i] - 1
            if r < 0:
                return -1, i
            if handles.startswith(handle, r * HANDLE):  # compared in place, no copy
                return r, i
            i = (i + 1) & mask

    def add(self, handle: bytes, offset: int) -> None:
        """Record an occurrence of ``handle`` at ``offset``."""
        if len(handle) != HANDLE:
            raise ValueError(f"a blob handle is {HANDLE} bytes, not {len(handle)}")
        r, i = self._row(handle)
        if r >= 0:
            self._more.setdefault(r, []).append(offset)
            return
        r = len(self._first)
        self._handles += handle
        self._first.append(offset)
        self._slots[i] = r + 1
        if 2 * (r + 1) > len(self._slots):  # keep the table at most half full
            self._grow()

    def _grow(self) -> None:
        n = 2 * len(self._slots)
        slots, mask, handles = array("q", bytes(8 * n)), n - 1, self._handles
        for r in range(len(self._first)):
            i = hash(bytes(handles[r * HANDLE:(r + 1) * HANDLE])) & mask
            while slots[i]:
                i = (i + 1) & mask
            slots[i] = r + 1
        self._slots, self._mask = slots, mask

    # -- Mapping --------------------------------------------------------------------------
    def __getitem__(self, handle: bytes) -> list[int]:
        r = self._row(handle)[0] if isinstance(handle, (bytes, bytearray)) else -1
        if r < 0:
            raise KeyError(handle)
        return [self._first[r], *self._more.get(r, ())]

    def __contains__(self, handle: object) -> bool:
        return isinstance(handle, (bytes, bytearray)) and self._row(handle)[0] >= 0

    def __iter__(self) -> Iterator[bytes]:
        handles = self._handles
        for r in range(len(self._first)):
            yield bytes(handles[r * HANDLE:(r + 1) * HANDLE])

    def __len__(self) -> int:
        return len(self._first)

    def items(self) -> ItemsView:
        return _Items(self)

    def __repr__(self) -> str:
        return f"<BlobIndex of {len(self)} handles>"


class _Items(ItemsView):
    """``(handle, offsets)`` row by row, without looking each handle up again."""

    def __iter__(self) -> Iterator[tuple[bytes, list[int]]]:
        index: BlobIndex = self._mapping
        handles, first, more = index._handles, index._first, index._more
        for r in range(len(first)):
            yield (bytes(handles[r * HANDLE:(r + 1) * HANDLE]),
                   [first[r], *more[r]] if r in more else [first[r]])

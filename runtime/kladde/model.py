"""kladde constants and the runtime's statement model (absolute ids and offsets).

The generated codecs (``generated/kladde.py``) hold statements delta-coded, exactly as
they sit in a page; :class:`Stmt` is one statement after the cursor rules, tagged with
the epoch of its page and where it came from.
"""

from __future__ import annotations

from typing import NamedTuple

PAGE_SIZE = 4096
LOG2_PAGE_SIZE = 12
FRAMING = 15
CONTENT_OFFSET = 11
HEADER_FIELDS = 48
HEADER_CONTENT_OFFSET = 59
MAX_PAGE_CONTENT = PAGE_SIZE - FRAMING  # 4081
MAX_HEADER_CONTENT = MAX_PAGE_CONTENT - HEADER_FIELDS  # 4033
MAGIC = bytes.fromhex("8b4b4c414444450d0a1a0a")
READER_VERSION = 0
U32_MAX = (1 << 32) - 1
ADDRESS_LIMIT = 1 << 49
INLINE_MAX = 251

KIND_TABLE = 1
KIND_DATA = 2

REF, ZERO, SHRINK, GROW, TOMBSTONE, INLINE = 0, 1, 2, 3, 4, 5
KIND_NAMES = {REF: "Ref", ZERO: "Zero", SHRINK: "Shrink", GROW: "Grow",
              TOMBSTONE: "Tombstone", INLINE: "Inline"}


class Stmt(NamedTuple):
    """One statement with absolute id and offset.

    ``offset`` is ``n`` for Shrink/Grow and 0 for Tombstone; ``size`` is the content
    length of Ref/Zero/Inline (0 otherwise); ``data`` is the Ref address or the Inline
    payload. ``page``/``index`` locate it (page number, statement index in that page).
    """

    id: int
    kind: int
    offset: int
    size: int = 0
    data: int | bytes | None = None
    epoch: int = 0
    page: int = -1
    index: int = -1

    @property
    def end(self) -> int:
        return self.offset + self.size

    def describe(self) -> str:
        name = KIND_NAMES[self.kind]
        if self.kind == TOMBSTONE:
            return f"Tombstone({self.id})"
        if self.kind in (SHRINK, GROW):
            return f"{name}({self.id}, {self.offset})"
        if self.kind == REF:
            return f"Ref({self.id}, {self.offset}, {self.size}, {self.data})"
        if self.kind == ZERO:
            return f"Zero({self.id}, {self.offset}, {self.size})"
        return f"Inline({self.id}, {self.offset}, {bytes(self.data).hex()})"


def ref(id_: int, offset: int, size: int, address: int, epoch: int = 0) -> Stmt:
    return Stmt(id_, REF, offset, size, address, epoch)


def zero(id_: int, offset: int, size: int, epoch: int = 0) -> Stmt:
    return Stmt(id_, ZERO, offset, size, None, epoch)


def shrink(id_: int, n: int, epoch: int = 0) -> Stmt:
    return Stmt(id_, SHRINK, n, 0, None, epoch)


def grow(id_: int, n: int, epoch: int = 0) -> Stmt:
    return Stmt(id_, GROW, n, 0, None, epoch)


def tombstone(id_: int, epoch: int = 0) -> Stmt:
    return Stmt(id_, TOMBSTONE, 0, 0, None, epoch)


def inline(id_: int, offset: int, payload: bytes, epoch: int = 0) -> Stmt:
    return Stmt(id_, INLINE, offset, len(payload), bytes(payload), epoch)

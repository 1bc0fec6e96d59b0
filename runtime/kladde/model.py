"""kladde constants and the runtime's statement model (absolute ids and offsets).

The generated codecs (``generated/kladde.py``) hold statements delta-coded, exactly as
they sit in a page; :class:`Stmt` is one statement after the cursor rules, tagged with
the epoch of its page and where it came from.
"""

from __future__ import annotations

from typing import NamedTuple

from ...generated import kladde as _g


def _field(record: str, name: str) -> dict:
    """One field of a record's layout, as the generated module exports it."""
    for f in _g.LAYOUT[record]["layouts"][0]["fields"]:
        if f["name"] == name:
            return f
    raise KeyError(f"{record}.{name}")


# The layout constants come from the schema (generated LAYOUT), so a layout change in
# schemas/kladde.yaml cannot leave the runtime behind.
PAGE_SIZE = _g.LAYOUT["journal_page"]["layouts"][0]["fixed_size"]  # 4096: a whole page
LOG2_PAGE_SIZE = _field("header_fields", "log2_page_size")["const"]  # 12
CONTENT_OFFSET = _field("page", "content")["offset"]  # 11
HEADER_FIELDS = _g.LAYOUT["header_fields"]["layouts"][0]["fixed_size"]  # 48
HEADER_CONTENT_OFFSET = _field("header_page", "content")["offset"]  # 59
FRAMING = CONTENT_OFFSET + _field("page", "crc")["size"]  # 15
MAX_PAGE_CONTENT = _field("page", "content_size")["valid"][1]  # 4081
MAX_HEADER_CONTENT = _field("header_page", "content_size")["valid"][1]  # 4033
MAGIC = bytes.fromhex(_field("header_fields", "magic")["const"])
READER_VERSION = 0
assert PAGE_SIZE == 1 << LOG2_PAGE_SIZE and MAX_PAGE_CONTENT == PAGE_SIZE - FRAMING
assert MAX_HEADER_CONTENT == MAX_PAGE_CONTENT - HEADER_FIELDS
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

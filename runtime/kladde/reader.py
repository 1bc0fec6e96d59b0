"""Open a kladde file: header-slot choice, tree walk, statement decoding, resolution.

Everything layout-shaped goes through the generated codecs (``generated/kladde.py``):
``decode_header_slot`` and ``decode_page`` check framing and CRC with the content kept
opaque, then ``decode_table_content`` decodes the child refs and statements of a page.
This module adds what a layout cannot say (facts.md §2.2, §4.2-§4.3, §5): which slot
governs, that the child refs form a tree, the delta cursors and their bounds, and the
conflict resolution by epoch (existence, size, content per byte).
"""

from __future__ import annotations

import gc
import mmap
import os
from array import array
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import repeat
from operator import index as _index
from typing import TYPE_CHECKING

from ...generated import kladde as g
from ..errors import ChecksumError, DecodeError
from ..mapped import RELEASE_EVERY, releaser
from . import limits as _limits
from .errors import Corrupt, DanglingPointer, NotKladde, OutOfBounds, UnsupportedVersion
from .model import (
    ADDRESS_LIMIT,
    CONTENT_OFFSET,
    GROW,
    HEADER_CONTENT_OFFSET,
    INLINE,
    KIND_DATA,
    KIND_TABLE,
    PAGE_SIZE,
    READER_VERSION,
    REF,
    SHRINK,
    TOMBSTONE,
    U32_MAX,
    ZERO,
    Stmt,
)

if TYPE_CHECKING:  # numpy is imported where a value needs it
    import numpy as np

_REF, _ZERO, _SHRINK, _GROW, _TOMB = 0, 1, 2, 3, 4

# fragment kinds of a resolved allocation
FRAG_ZERO, FRAG_INLINE, FRAG_REF = 0, 1, 2


@dataclass(slots=True)
class PageInfo:
    """One reachable address-table page."""

    page: int
    epoch: int
    children: list[int]
    content_start: int
    content_end: int
    statements: int


@dataclass(slots=True)
class Allocation:
    """A resolved allocation: its size and the fragments that give every byte.

    ``fragments`` are ``(start, end, kind, source)`` covering ``[0, size)`` in order:
    ``FRAG_ZERO`` (source None), ``FRAG_INLINE`` (source ``(payload, payload_offset)``)
    or ``FRAG_REF`` (source: the file address of byte ``start``).
    """

    id: int
    size: int
    fragments: list[tuple[int, int, int, object]] = field(default_factory=list)

    def content(self, buf, offset: int = 0, length: int | None = None) -> bytes:
        """Bytes ``[offset, offset+length)`` (``length`` None: to the end); only the
        fragments that overlap the range are read."""
        if length is None:
            length = self.size - offset
        if offset < 0 or length < 0 or offset + length > self.size:
            raise OutOfBounds(f"range {offset}+{length} outside allocation {self.id} "
                              f"({self.size} bytes)")
        lo, hi = offset, offset + length
        out = bytearray()
        for start, end, kind, src in self.fragments:
            if end <= lo or start >= hi:
                continue
            a, b = max(start, lo), min(end, hi)
            n = b - a
            if kind == FRAG_ZERO:
                out += bytes(n)
            elif kind == FRAG_INLINE:
                payload, at = src
                at += a - start
                out += payload[at:at + n]
            else:
                at = src + (a - start)
                out += buf[at:at + n]
        return bytes(out)


_make_stmt = partial(tuple.__new__, Stmt)  # a Stmt from a row, without a Python frame
assert array("I").itemsize >= 4  # ids, offsets and sizes are at most 2**32 - 1


class StmtTable(Sequence):
    """A file's statements in walk order, held as columns; :class:`Stmt` tuples are built
    when read.

    A ``Stmt`` tuple with its own id and index objects costs about 190 bytes; here a
    statement costs 13 bytes of columns plus one slot for its data (a Ref address or an
    Inline payload, None otherwise). Epoch and page are the same for a page's statements
    and ``index`` is the row's place in its page, so they are kept once per page.
    """

    __slots__ = ("_id", "_kind", "_off", "_size", "_data", "_run_row", "_run_page",
                 "_run_epoch")

    def __init__(self) -> None:
        self._id = array("I")
        self._kind = bytearray()
        self._off = array("I")
        self._size = array("I")
        self._data: list = []
        self._run_row = array("Q")  # the first row of each page's statements
        self._run_page = array("Q")
        self._run_epoch = array("Q")

    def _extend_page(self, rows: list[Stmt], page: int, epoch: int) -> None:
        """Append one page's statements (``rows[i].index == i``, one page and epoch)."""
        if not rows:
            return
        self._run_row.append(len(self._id))
        self._run_page.append(page)
        self._run_epoch.append(epoch)
        ids, kinds, offs, sizes, datas = list(zip(*rows, strict=True))[:5]
        self._id.extend(ids)
        self._kind.extend(kinds)
        self._off.extend(offs)
        self._size.extend(sizes)
        self._data.extend(datas)

    def __len__(self) -> int:
        return len(self._id)

    def _row(self, i: int) -> Stmt:
        r = bisect_right(self._run_row, i) - 1
        return _make_stmt((self._id[i], self._kind[i], self._off[i], self._size[i],
                           self._data[i], self._run_epoch[r], self._run_page[r],
                           i - self._run_row[r]))

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._row(k) for k in range(*i.indices(len(self)))]
        n = len(self._id)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("statement index out of range")
        return self._row(i)

    def __iter__(self):
        rows, n = self._run_row, len(self._id)
        for r in range(len(rows)):
            a = rows[r]
            b = rows[r + 1] if r + 1 < len(rows) else n
            yield from map(_make_stmt, zip(
                self._id[a:b], self._kind[a:b], self._off[a:b], self._size[a:b],
                self._data[a:b], repeat(self._run_epoch[r], b - a),
                repeat(self._run_page[r], b - a), range(b - a), strict=True))

    def __eq__(self, other) -> bool:
        if isinstance(other, (StmtTable, list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<StmtTable of {len(self)} statements>"


def _to_array(code: str, values: np.ndarray) -> array:
    """A numpy result as a plain ``array`` (``I``: u32, ``Q``: u64)."""
    import numpy as np

    out = array(code)
    out.frombytes(values.astype(np.uint32 if code == "I" else np.uint64).tobytes())
    return out


class StmtGroups(Mapping):
    """``KladdeFile.by_id``: id -> its statements in walk order, ids in order of first
    appearance. Held as a stable sort of the rows by id (4 bytes a statement, about 16 an
    id); a group's :class:`Stmt` list is built when it is read, so resolving every
    allocation holds one group at a time rather than a tuple per statement."""

    __slots__ = ("_table", "_order", "_keys", "_bounds", "_appearance")

    def __init__(self, table: StmtTable) -> None:
        import numpy as np  # imported when a file's statements are grouped by id

        self._table = table
        ids = np.array(table._id, dtype=np.uint32)  # a copy: the table's buffer stays free
        order = np.argsort(ids, kind="stable")
        keys, first = np.unique(ids[order], return_index=True)
        # lookups go through bisect on plain arrays: cheaper than a numpy call per id
        self._order = _to_array("I", order)
        self._keys = _to_array("I", keys)
        self._bounds = _to_array("Q", np.append(first, len(ids)))
        self._appearance = _to_array("I", np.argsort(order[first], kind="stable"))

    def _group(self, key) -> int:
        try:
            k = _index(key)
        except TypeError:
            raise KeyError(key) from None
        grp = bisect_left(self._keys, k)
        if grp == len(self._keys) or self._keys[grp] != k:
            raise KeyError(key)
        return grp

    def _stmts(self, grp: int) -> list[Stmt]:
        row = self._table._row
        return [row(r) for r in self._order[self._bounds[grp]:self._bounds[grp + 1]]]

    def __getitem__(self, key) -> list[Stmt]:
        return self._stmts(self._group(key))

    def __contains__(self, key) -> bool:
        try:
            self._group(key)
        except KeyError:
            return False
        return True

    def __iter__(self):
        keys = self._keys
        return (keys[grp] for grp in self._appearance)

    def __len__(self) -> int:
        return len(self._keys)

    def items(self):  # type: ignore[override]  # one pass, no lookup per id
        keys = self._keys
        for grp in self._appearance:
            yield keys[grp], self._stmts(grp)

    def ascending(self):
        """``(id, statements)`` by ascending id (what resolving every id walks)."""
        for grp, key in enumerate(self._keys):
            yield key, self._stmts(grp)

    def __repr__(self) -> str:
        return f"<StmtGroups of {len(self)} ids>"


def _corrupt(message: str, page: int | None, offset: int | None, **kw) -> Corrupt:
    return Corrupt(message, page=page, offset=offset, **kw)


class KladdeFile:
    """One kladde file: the committed state (``read``, ``allocations``), the recovered
    journal (``journal``) and the current state, committed plus journal (``current()``)."""

    def __init__(self, data, *, name: str | None = None,
                 limits: _limits.Limits = _limits.DEFAULT) -> None:
        self.data = data
        self.name = name
        self.limits = limits
        self._journal = None  # cached by journal.journal_of (the journal sits above)
        self.mv = memoryview(data)
        self.npages = len(data) // PAGE_SIZE
        self.slot, self.header_slot = pick_header(self.mv, name=name)
        self.header = self.header_slot.header
        self.epoch = self.header_slot.epoch
        self.pages: list[PageInfo] = []
        self.statements = StmtTable()
        self.root_statements: list[Stmt] = []
        self.ref_bytes: dict[int, int] = {}
        # one byte per page: data pages already checked (a dict of page numbers cost
        # ~100 B per page, 26 MB for a 1 GiB file of data)
        self._data_ok = bytearray(self.npages)
        # a mapped file: the data pages a resolution checks leave memory as it goes
        self._release = releaser(data) if isinstance(data, mmap.mmap) else None
        self._checked = 0
        # collector paused for the walk: each page's tuples die with the page (nothing
        # cyclic is made), yet their churn set off ~1100 collections per 200k statements
        # (measured: load 1.05-1.21 s with the collector, 0.80-0.93 s without)
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            self._walk()
        finally:
            if was_enabled:
                gc.enable()
        self._by_id: StmtGroups | None = None
        self._check_bounds()

    # -- walk --------------------------------------------------------------------------
    def _walk(self) -> None:
        slot = self.slot
        start = slot * PAGE_SIZE + HEADER_CONTENT_OFFSET
        end = start + len(self.header_slot.content)
        root = self._table(slot, self.epoch, start, end)
        self.root_statements = self.statements[:]
        seen = {slot}
        queue = deque((c, slot, i) for i, c in enumerate(root.children))
        while queue:
            p, parent, index = queue.popleft()
            if p >= self.npages:
                raise _corrupt(f"child page {p} of page {parent} lies outside the file "
                               f"({self.npages} whole pages)", p,
                               self._child_offset(parent, index), path=f"children[{index}]")
            if p in seen:
                raise _corrupt(f"the address-table pages do not form a tree: page {p} is "
                               f"named twice (again by page {parent})", p,
                               self._child_offset(parent, index), path=f"children[{index}]")
            seen.add(p)
            base = p * PAGE_SIZE
            try:
                raw, _ = g.decode_page(self.mv, base)
            except DecodeError as exc:
                raise _corrupt(f"address-table page {p} fails its check: {exc.message}", p,
                               exc.offset, path=exc.path) from None
            if raw.kind != KIND_TABLE:
                raise _corrupt(f"page {p} is not an address-table page (kind {int(raw.kind)})",
                               p, base, expected=KIND_TABLE, found=int(raw.kind))
            if raw.epoch > self.epoch:
                raise _corrupt(f"page {p} is newer than its header: the fsync contract was "
                               f"broken (epoch {raw.epoch} > {self.epoch})", p, base + 1,
                               expected=f"<= {self.epoch}", found=raw.epoch)
            start = base + CONTENT_OFFSET
            info = self._table(p, raw.epoch, start, start + len(raw.content))
            queue.extend((c, p, i) for i, c in enumerate(info.children))

    def _table(self, page: int, epoch: int, start: int, end: int) -> PageInfo:
        """Decode one page's content; append its statements (cursor rules applied)."""
        mv = self.mv[:end]
        try:
            content, _ = g.decode_table_content(mv, start)
        except DecodeError as exc:
            raise _corrupt(_content_message(exc) + f" (page {page})", page, exc.offset,
                           path=exc.path) from None
        children = []
        cursor = 0
        for i, delta in enumerate(content.children):
            cursor += delta
            if cursor < 2 or cursor > U32_MAX:
                raise _corrupt(f"child reference out of range: page {cursor}", page,
                               _child_pos(mv, start, i), path=f"children[{i}]",
                               expected="2..2**32-1", found=cursor)
            children.append(cursor)
        info = PageInfo(page, epoch, children, start, end, len(content.statements))
        self.pages.append(info)
        self._statements(content.statements, page, epoch, info)
        return info

    def _statements(self, decoded, page: int, epoch: int, info: PageInfo) -> None:
        rows: list[Stmt] = []  # one page's tuples, moved into the columns just below
        try:
            apply_cursors(decoded, epoch, page, rows, self.ref_bytes)
        except _Bad as bad:
            raise _corrupt(f"{bad.message} in page {page}, statement {bad.index}", page,
                           self.statement_offset(info, bad.index),
                           path=f"statements[{bad.index}]", found=bad.found) from None
        self.statements._extend_page(rows, page, epoch)
        if len(self.statements) > U32_MAX:
            raise _corrupt("the file holds more than 2**32 - 1 statements", page, None)

    # -- locating things for error messages (slow path only) ---------------------------
    def _child_offset(self, parent: int, index: int) -> int:
        info = next(p for p in self.pages if p.page == parent)
        return _child_pos(self.mv[:info.content_end], info.content_start, index)

    def statement_offset(self, info: PageInfo, index: int) -> int:
        """Absolute file offset of statement ``index`` of a page."""
        mv = self.mv[:info.content_end]
        pos = _statements_start(mv, info.content_start)
        for i, (_, end) in enumerate(g.iter_statement(mv, pos, info.content_end)):
            if i == index:
                return pos
            pos = end
        return pos

    def locate(self, st: Stmt) -> int | None:
        """Absolute file offset of a statement (for messages)."""
        for info in self.pages:
            if info.page == st.page:
                return self.statement_offset(info, st.index)
        return None

    # -- resolution ---------------------------------------------------------------------
    @property
    def by_id(self) -> StmtGroups:
        """Statements grouped by id (in walk order, each page sorted by offset)."""
        if self._by_id is None:
            self._by_id = StmtGroups(self.statements)
        return self._by_id

    def ids(self) -> list[int]:
        """Every existing allocation id, ascending."""
        return sorted(i for i, sts in self.by_id.items() if _exists(sts))

    def allocation(self, alloc_id: int) -> Allocation | None:
        """The resolved allocation, or None if it does not exist."""
        sts = self.by_id.get(alloc_id)
        if not sts:
            return None
        alloc = resolve_statements(alloc_id, sts)
        if alloc is not None:
            self._check_refs(alloc, sts)
        return alloc

    def allocations(self) -> dict[int, Allocation]:
        """Every existing allocation, resolved, with winning Ref pages checked."""
        return dict(self.iter_allocations())

    def iter_allocations(self) -> Iterator[tuple[int, Allocation]]:
        """``allocations()`` one at a time, by ascending id: a caller that prints or
        copies them need not hold them all."""
        for alloc_id, sts in self.by_id.ascending():
            alloc = resolve_statements(alloc_id, sts)
            if alloc is not None:
                self._check_refs(alloc, sts)
                yield alloc_id, alloc

    def read(self, alloc_id: int, offset: int = 0, length: int | None = None) -> bytes:
        """Committed bytes ``[offset, offset+length)`` of an allocation (None: to the end)."""
        sts = self.by_id.get(alloc_id)
        alloc = resolve_statements(alloc_id, sts) if sts else None
        if alloc is None:
            raise DanglingPointer(alloc_id)
        end = alloc.size if length is None else offset + length
        self._check_refs(alloc, sts, offset, end)  # only the data pages the range reads
        return alloc.content(self.mv, offset, length)

    # -- bounds that need resolution (facts.md §7.2) -------------------------------------
    def _check_bounds(self) -> None:
        lim = self.limits
        over = {p for p, total in self.ref_bytes.items() if total > lim.ref_bytes_per_data_page}
        if over:  # the raw sum counts shadowed Refs too: recount the live ones only
            live: dict[int, int] = {}
            ids = {st.id for st in self.statements if st.kind == REF and
                   st.data // PAGE_SIZE in over}
            for alloc_id in sorted(ids):
                for st in self._live(alloc_id):
                    if st.kind == REF and st.data // PAGE_SIZE in over:
                        dp = st.data // PAGE_SIZE
                        live[dp] = live.get(dp, 0) + st.size
            for dp in sorted(over):
                if live.get(dp, 0) > lim.ref_bytes_per_data_page:
                    raise _corrupt(f"the live Ref sizes into data page {dp} sum past "
                                   f"{lim.ref_bytes_per_data_page} bytes", dp, dp * PAGE_SIZE,
                                   expected=f"<= {lim.ref_bytes_per_data_page}",
                                   found=live[dp])
        cap = lim.framing_bytes_per_id // _limits.STATEMENT_FRAMING_MAX
        if len(self.statements) <= cap:
            return  # no id has more statements than the file: none can reach the bound
        for alloc_id, sts in self.by_id.items():
            if len(sts) <= cap:
                continue  # cannot reach the bound even at 21 framing bytes each
            live_sts = self._live(alloc_id)
            total = sum(self._framing(st) for st in live_sts)
            if total > lim.framing_bytes_per_id:
                first = live_sts[0] if live_sts else sts[0]
                raise _corrupt(f"the framing bytes of the live statements naming id "
                               f"{alloc_id} sum past {lim.framing_bytes_per_id}", first.page,
                               self.locate(first), expected=f"<= {lim.framing_bytes_per_id}",
                               found=total)

    def _live(self, alloc_id: int) -> list[Stmt]:
        """Statements of an id that a newer statement has not fully overwritten."""
        sts = self.by_id.get(alloc_id, [])
        winners: set = set()
        size = _size_of(alloc_id, sts)
        if size is None:  # deleted: only the Tombstone that decides it is live
            return [max(sts, key=lambda s: s.epoch)]
        paint(sts, size, winners)
        keep = [st for st in sts if st in winners or st.kind in (SHRINK, GROW, TOMBSTONE)]
        return keep

    def _framing(self, st: Stmt) -> int:
        """Encoded bytes of one statement except an Inline payload (slow path)."""
        info = next(p for p in self.pages if p.page == st.page)
        mv = self.mv[:info.content_end]
        pos = _statements_start(mv, info.content_start)
        for i, (_, end) in enumerate(g.iter_statement(mv, pos, info.content_end)):
            if i == st.index:
                return end - pos - (st.size if st.kind == INLINE else 0)
            pos = end
        return 0

    def contents(self) -> dict[int, bytes]:
        return {i: a.content(self.mv) for i, a in self.allocations().items()}

    def _check_refs(self, alloc: Allocation, sts: list[Stmt], lo: int = 0,
                    hi: int | None = None) -> None:
        for start, _end, kind, src in alloc.fragments:
            if kind != FRAG_REF or _end <= lo or (hi is not None and start >= hi):
                continue
            p = src // PAGE_SIZE
            if p < 2 or p >= self.npages:
                # the statement's offset is for the message only: locating it re-reads
                # its page, so it is found here, not for every data page checked (that
                # made resolving a 200 MB file take 18 s)
                st = _winner_at(sts, start)
                raise _corrupt(f"a Ref points outside the file, into page {p} "
                               f"(allocation {alloc.id})", p,
                               self.locate(st) if st is not None else None)
            if self._data_ok[p]:
                continue
            try:
                raw, _ = g.decode_page(self.mv, p * PAGE_SIZE)
            except DecodeError as exc:
                raise _corrupt(f"data page {p} fails its check: {exc.message}", p,
                               exc.offset, path=exc.path) from None
            if raw.kind != KIND_DATA:
                raise _corrupt(f"page {p} is referenced as data but is not a data page "
                               f"(kind {int(raw.kind)})", p, p * PAGE_SIZE,
                               expected=KIND_DATA, found=int(raw.kind))
            if raw.epoch > self.epoch:
                raise _corrupt(f"page {p} is newer than its header: the fsync contract was "
                               f"broken (epoch {raw.epoch} > {self.epoch})", p,
                               p * PAGE_SIZE + 1)
            self._data_ok[p] = 1
            self._checked += 1
            if self._release is not None and self._checked * PAGE_SIZE >= RELEASE_EVERY:
                self._release(len(self.data))
                self._checked = 0


class _Bad(Exception):
    def __init__(self, message: str, found, index: int = -1) -> None:
        self.message = message
        self.found = found
        self.index = index


def statements_of(content, epoch: int = 0, page: int = -1) -> list[Stmt]:
    """Absolute statements of one decoded ``TableContent`` (cursor rules and checks)."""
    out: list[Stmt] = []
    try:
        apply_cursors(content.statements, epoch, page, out, {})
    except _Bad as bad:
        raise Corrupt(f"{bad.message} (statement {bad.index})", page=None if page < 0 else page,
                      path=f"statements[{bad.index}]", found=bad.found) from None
    return out


def apply_cursors(decoded, epoch: int, page: int, out: list, ref_bytes: dict) -> None:
    """The delta cursors of facts.md §4.2 with the reader checks of §4.3 and the bounds.

    Appends one :class:`Stmt` per decoded statement to ``out``; raises ``_Bad`` with the
    statement index on the first violation.
    """
    append = out.append
    _new = tuple.__new__  # skips NamedTuple.__new__'s Python frame (hot loop)
    id_cursor = 0
    off = 0
    index = 0
    try:
        for index, st in enumerate(decoded):
            delta = st.id_delta
            if delta:
                id_cursor += delta
                off = 0
            if id_cursor == 0 or id_cursor > U32_MAX:
                raise _Bad("statement id out of range", id_cursor)
            tag = st.tag
            if tag == _TOMB:
                append(_new(Stmt, (id_cursor, TOMBSTONE, 0, 0, None, epoch, page, index)))
                continue
            body = st.body
            off += body.offset_delta
            if off > U32_MAX:
                raise _Bad("statement offset out of range", off)
            if tag == _REF:
                size = body.size
                addr = body.address
                if off + size > U32_MAX:
                    raise _Bad("statement offset out of range", off + size)
                if addr >= ADDRESS_LIMIT:
                    raise _Bad("a Ref address is out of range (>= 2**49)", addr)
                if (addr % PAGE_SIZE) + size > PAGE_SIZE:
                    raise _Bad("a Ref spans a page boundary", addr)
                dp = addr // PAGE_SIZE  # raw sum; KladdeFile recounts live Refs past the bound
                ref_bytes[dp] = ref_bytes.get(dp, 0) + size
                append(_new(Stmt, (id_cursor, REF, off, size, addr, epoch, page, index)))
                off += size
            elif tag == _ZERO:
                size = body.size
                if off + size > U32_MAX:
                    raise _Bad("statement offset out of range", off + size)
                append(_new(Stmt, (id_cursor, ZERO, off, size, None, epoch, page, index)))
                off += size
            elif tag == _SHRINK:
                append(_new(Stmt, (id_cursor, SHRINK, off, 0, None, epoch, page, index)))
            elif tag == _GROW:
                append(_new(Stmt, (id_cursor, GROW, off, 0, None, epoch, page, index)))
            else:
                payload = body.payload
                size = len(payload)
                if off + size > U32_MAX:
                    raise _Bad("statement offset out of range", off + size)
                append(_new(Stmt, (id_cursor, INLINE, off, size, payload, epoch, page, index)))
                off += size
    except _Bad as bad:
        bad.index = index
        raise


def _content_message(exc: DecodeError) -> str:
    path = exc.path or ""
    if path.endswith("payload"):
        return "inline payload runs past the page content"
    if path.endswith(".tag") or path.endswith("tag"):
        return "statement without a tag"
    if "children" in path and "statements" not in path:
        return "truncated varint in an address-table page (the child list has no 0 delimiter)"
    return f"truncated varint in an address-table page ({exc.message})"


def _child_pos(mv, start: int, index: int) -> int:
    """Offset of child ``index`` (the schema's ``child_ref`` walked ``index`` times)."""
    pos = start
    for i, (_, end) in enumerate(g.iter_child_ref(mv, start, len(mv))):
        if i == index:
            break
        pos = end
    return pos


def _statements_start(mv, start: int) -> int:
    """Offset just past the child list's 0 delimiter."""
    for ref, end in g.iter_child_ref(mv, start, len(mv)):
        if ref.page_delta == 0:
            return end
    return len(mv)


# -- header slot choice ----------------------------------------------------------------

def slot_report(mv: memoryview) -> list[str]:
    """Each header slot's state in words: ``"slot 0: valid, epoch 4"`` or why it is
    skipped (CRC mismatch, kind, parity...), as the slot choice saw it."""
    out: list[str] = []
    try:
        pick_header(mv, report=out)
    except DecodeError:
        pass
    return out


def pick_header(mv: memoryview, *, name: str | None = None, report: list | None = None):
    """The governing header slot per facts.md §2.2: ``(slot, HeaderSlot)``.

    ``report`` (a list) receives one line per slot: valid with its epoch, or the reason
    the slot was skipped."""
    if len(mv) < PAGE_SIZE:
        raise NotKladde(f"file is shorter than one page ({len(mv)} bytes)", offset=0,
                        file=name)
    best = None
    magic_seen = False
    reasons = [] if report is None else report
    slots = 2 if len(mv) >= 2 * PAGE_SIZE else 1
    for slot in range(slots):
        base = slot * PAGE_SIZE
        try:  # the magic is the header's first field: its const check says if it is there
            g.decode_header_fields(mv[:base + PAGE_SIZE], base)
            magic_seen = True
        except DecodeError as exc:
            magic_seen = magic_seen or not exc.path.endswith("magic")
        try:
            hs, _ = g.decode_header_slot(mv[:base + PAGE_SIZE], base)
        except DecodeError as exc:
            kind = "CRC mismatch" if isinstance(exc, ChecksumError) else exc.message
            reasons.append(f"slot {slot}: {kind}")
            continue
        if hs.kind != KIND_TABLE:
            reasons.append(f"slot {slot}: kind {int(hs.kind)}")
            continue
        if hs.epoch % 2 != slot:
            reasons.append(f"slot {slot}: epoch {hs.epoch} has the wrong parity")
            continue
        if report is not None:
            report.append(f"slot {slot}: valid, epoch {hs.epoch}")
        if best is None or hs.epoch > best[1].epoch:
            best = (slot, hs)
    if slots == 1 and report is not None:
        report.append("slot 1: missing (the file is one page long)")
    if best is None:
        if magic_seen:
            raise Corrupt("neither header slot is valid (" + "; ".join(reasons) + ")",
                          offset=0, file=name)
        raise NotKladde("not a kladde file: neither header slot has the magic", offset=0,
                        file=name)
    slot, hs = best
    if hs.header.min_reader_version > READER_VERSION:
        raise UnsupportedVersion(
            f"header slot {slot} needs reader version {hs.header.min_reader_version}; "
            f"this reader is version {READER_VERSION}", page=slot,
            offset=slot * PAGE_SIZE + 14, min_reader_version=hs.header.min_reader_version,
            expected=f"<= {READER_VERSION}", found=hs.header.min_reader_version, file=name)
    return slot, hs


# -- resolution of one id (facts.md §5.3) -------------------------------------------------

def _exists(sts: list[Stmt]) -> bool:
    best = sts[0]
    for st in sts:
        if st.epoch > best.epoch:
            best = st
    return best.kind != TOMBSTONE


def resolve_statements(alloc_id: int, sts: list[Stmt]) -> Allocation | None:
    """Existence, size and content fragments of one id from all its statements."""
    if len(sts) == 1:
        st = sts[0]
        k = st.kind
        if k == TOMBSTONE:
            return None
        if k == GROW or k == SHRINK:
            return Allocation(alloc_id, st.offset,
                              [(0, st.offset, FRAG_ZERO, None)] if st.offset else [])
        return Allocation(alloc_id, st.offset + st.size, _single(st))
    # existence: the newest statement (first in merge order on ties)
    newest = None
    for st in sts:
        if newest is None or st.epoch > newest.epoch or (
                st.epoch == newest.epoch and st.offset < newest.offset):
            newest = st
    if newest.kind == TOMBSTONE:
        return None
    size = _size_of(alloc_id, sts)
    return Allocation(alloc_id, size, paint(sts, size))


def _size_of(alloc_id: int, sts: list[Stmt]) -> int | None:
    """The resolved size of an id (None if it does not exist)."""
    newest = None
    for st in sts:
        if newest is None or st.epoch > newest.epoch or (
                st.epoch == newest.epoch and st.offset < newest.offset):
            newest = st
    if newest.kind == TOMBSTONE:
        return None
    anchor_epoch = -1
    anchor_n = 0
    for st in sts:
        if (st.kind == SHRINK or st.kind == TOMBSTONE) and st.epoch > anchor_epoch:
            anchor_epoch = st.epoch
            anchor_n = st.offset if st.kind == SHRINK else 0
    size = anchor_n
    for st in sts:
        if st.epoch > anchor_epoch:
            k = st.kind
            if k == GROW:
                if st.offset > size:
                    size = st.offset
            elif k != SHRINK and k != TOMBSTONE and st.offset + st.size > size:
                size = st.offset + st.size
    if size > U32_MAX:
        raise Corrupt(f"allocation {alloc_id} is larger than 2**32 - 1 bytes", found=size)
    return size


def _single(st: Stmt) -> list:
    out = []
    if st.offset:
        out.append((0, st.offset, FRAG_ZERO, None))
    if st.size:
        end = st.offset + st.size
        if st.kind == REF:
            out.append((st.offset, end, FRAG_REF, st.data))
        elif st.kind == INLINE:
            out.append((st.offset, end, FRAG_INLINE, (st.data, 0)))
        else:
            out.append((st.offset, end, FRAG_ZERO, None))
    return out


def _match(st: Stmt, size: int) -> tuple[int, int]:
    k = st.kind
    if k == TOMBSTONE:
        return 0, size
    if k == SHRINK:
        return st.offset, size
    if k == GROW:
        return 0, 0
    return st.offset, min(st.offset + st.size, size)


def paint(sts: list[Stmt], size: int,
          winners: set | None = None) -> list[tuple[int, int, int, object]]:
    """Content fragments of ``[0, size)``: each byte from its highest-epoch matcher
    (``winners`` collects the statements that give at least one byte)."""
    if size == 0:
        return []
    cands = sorted((st for st in sts if st.kind != GROW), key=lambda s: -s.epoch)
    gaps = [(0, size)]
    frags = []
    for st in cands:
        a, b = _match(st, size)
        if a >= b:
            continue
        new_gaps = []
        for g0, g1 in gaps:
            if g1 <= a or g0 >= b:
                new_gaps.append((g0, g1))
                continue
            if g0 < a:
                new_gaps.append((g0, a))
            lo, hi = max(g0, a), min(g1, b)
            frags.append(_fragment(st, lo, hi))
            if winners is not None:
                winners.add(st)
            if hi < g1:
                new_gaps.append((hi, g1))
        gaps = new_gaps
        if not gaps:
            break
    for g0, g1 in gaps:
        frags.append((g0, g1, FRAG_ZERO, None))
    frags.sort(key=lambda f: f[0])
    # merge adjacent zero runs
    out: list[tuple[int, int, int, object]] = []
    for fr in frags:
        if out and fr[2] == FRAG_ZERO and out[-1][2] == FRAG_ZERO and out[-1][1] == fr[0]:
            out[-1] = (out[-1][0], fr[1], FRAG_ZERO, None)
        else:
            out.append(fr)
    return out


def _fragment(st: Stmt, lo: int, hi: int) -> tuple[int, int, int, object]:
    k = st.kind
    if k == REF:
        return (lo, hi, FRAG_REF, st.data + (lo - st.offset))
    if k == INLINE:
        return (lo, hi, FRAG_INLINE, (st.data, lo - st.offset))
    return (lo, hi, FRAG_ZERO, None)


def _winner_at(sts: list[Stmt], probe: int) -> Stmt | None:
    best = None
    for st in sts:
        if st.kind == REF and st.offset <= probe < st.offset + st.size and (
                best is None or st.epoch > best.epoch):
            best = st
    return best


# -- entry points ------------------------------------------------------------------------

def load(data, *, name: str | None = None,
         limits: _limits.Limits = _limits.DEFAULT) -> KladdeFile:
    """Open kladde bytes (``bytes``, ``bytearray``, ``mmap``)."""
    return KladdeFile(data, name=name, limits=limits)


def open_file(path: str | os.PathLike, *, limits: _limits.Limits = _limits.DEFAULT,
              mapped: bool = False) -> KladdeFile:
    """Read a kladde file from disk and open it (``current()`` replays the journal).

    ``mapped``: map the file read-only instead of reading it, for a reader that will not
    write the file while it holds the result: only the pages the walk and later reads
    touch are ever in memory (an allocation's data pages are not, until read)."""
    with open(path, "rb") as fh:
        if mapped and os.fstat(fh.fileno()).st_size > 0:
            try:
                data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError):  # not mappable (a pipe, a device): read it
                data = fh.read()
        else:
            data = fh.read()
    return KladdeFile(data, name=os.fspath(path), limits=limits)

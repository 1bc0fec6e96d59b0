"""Write kladde files: statements into pages, and a store whose edits flush as epochs.

:func:`encode_table` turns absolute statements into one page's delta-coded content
(sorted by ``(id, offset)``, minimal varints through the generated encoder, never a Grow
behind content in the same page, Inline only for 1..251 bytes). :func:`pack_tables`
splits a sorted run over as many pages as it needs.

:class:`Store` keeps allocation edits (write, zero, resize, delete, create) in memory and
:meth:`Store.flush` turns them into the next epoch ``E``: data pages and address-table
pages framed with epoch ``E`` are appended to the file, fsynced, and only then is the
header written into slot ``E mod 2`` and fsynced (invariants I1/I2 of facts.md §7.1:
a flush only extends the file, and the commit overwrites the older header slot).

Writer policy (not format): the header content holds child refs only; each flush's
statements go to new pages; a header slot's own root statements written by another
writer are carried into a page of their original epoch so nothing is lost when that slot
is overwritten; when the header has more than ``HEADER_FANOUT`` children they move into
an interior page. Pages are never reused (there is no consolidation yet).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from dataclasses import dataclass, field

from ...generated import kladde as g
from .. import cut as _cut
from ..atomic import fsync_dir, write_all
from ..errors import ChecksumError, DecodeError, EncodeError
from . import journal as jn
from . import limits as _limits
from .errors import Corrupt, DanglingPointer, OutOfBounds, Poisoned
from .model import (
    CONTENT_OFFSET,
    GROW,
    INLINE,
    INLINE_MAX,
    KIND_DATA,
    KIND_TABLE,
    MAX_HEADER_CONTENT,
    MAX_PAGE_CONTENT,
    PAGE_SIZE,
    REF,
    SHRINK,
    TOMBSTONE,
    U32_MAX,
    ZERO,
    Stmt,
)
from .reader import KladdeFile, load


class OsIO(_cut.OsSteps):
    """The store's write steps; tests substitute one that crashes after step k. Its
    ``ftruncate`` and ``fsync`` are the steps of ``runtime.cut`` (the file only changes
    length through :func:`bytewright.runtime.cut.grow` and ``cut``)."""

    def pwrite(self, fd: int, data: bytes, offset: int) -> None:
        write_all(fd, data, offset)


HEADER_FANOUT = 256
INTERIOR_FANOUT = 700  # children per interior page (5-byte deltas at most: < 4081 bytes)
INLINE_THRESHOLD = 32  # policy: data runs up to this many bytes go inline
ZERO_RUN = 16  # policy: zero runs at least this long inside data become Zero statements


def sort_key(st: Stmt) -> tuple[int, int]:
    return (st.id, 0 if st.kind == TOMBSTONE else st.offset)


def _delta_statement(st: Stmt, id_cursor: int, off_cursor: int):
    """(generated Statement, new id cursor, new offset cursor)."""
    if st.id < 1 or st.id > U32_MAX:
        raise OutOfBounds(f"allocation id {st.id} outside 1..2**32-1")
    if st.id < id_cursor:
        raise EncodeError(f"statements not sorted by id ({st.id} after {id_cursor})")
    id_delta = st.id - id_cursor
    if id_delta:
        off_cursor = 0
    k = st.kind
    if k == TOMBSTONE:
        return g.Statement(id_delta, g.StatementTag.Tombstone, None), st.id, off_cursor
    if st.offset < off_cursor:
        raise EncodeError(f"the offset cursor would go backwards for id {st.id} "
                          f"({st.offset} < {off_cursor}): statements overlap or are unsorted")
    if st.offset + st.size > U32_MAX:
        raise OutOfBounds(f"allocation {st.id}: offset {st.offset} + size {st.size} "
                          "past 2**32 - 1")
    od = st.offset - off_cursor
    if k == SHRINK:
        return g.Statement(id_delta, g.StatementTag.Shrink, g.ShrinkBody(od)), st.id, st.offset
    if k == GROW:
        return g.Statement(id_delta, g.StatementTag.Grow, g.GrowBody(od)), st.id, st.offset
    end = st.offset + st.size
    if k == REF:
        if st.size < 1:
            raise EncodeError(f"allocation {st.id}: zero-length Ref")
        if (st.data % PAGE_SIZE) + st.size > PAGE_SIZE:
            raise EncodeError(f"allocation {st.id}: a Ref would span a page boundary")
        return (g.Statement(id_delta, g.StatementTag.Ref, g.RefBody(od, st.size, st.data)),
                st.id, end)
    if k == ZERO:
        if st.size < 1:
            raise EncodeError(f"allocation {st.id}: zero-length Zero")
        return g.Statement(id_delta, g.StatementTag.Zero, g.ZeroBody(od, st.size)), st.id, end
    if k == INLINE:
        n = len(st.data)
        if not 1 <= n <= INLINE_MAX:
            raise EncodeError(f"allocation {st.id}: Inline payload of {n} bytes "
                              f"(must be 1..{INLINE_MAX})")
        return g.Statement(id_delta, n + 4, g.InlineBody(od, bytes(st.data))), st.id, end
    raise EncodeError(f"unknown statement kind {k}")


class _PageBuilder:
    def __init__(self, children: list[int]) -> None:
        self.children = children
        self.statements: list = []
        self.size = len(g.encode_table_content(g.TableContent(children, [])))
        self.id_cursor = 0
        self.off_cursor = 0
        self.content_end: dict[int, int] = {}
        self.grow: dict[int, int] = {}


def encode_table(children: list[int], statements: list[Stmt]) -> g.TableContent:
    """One page's content from sorted absolute statements (raises on any writer rule)."""
    pages = pack_tables(statements, children=children, limit=None)
    return pages[0]


def pack_tables(statements: list[Stmt], *, children: list[int] | None = None,
                limit: int | None = MAX_PAGE_CONTENT) -> list[g.TableContent]:
    """Split sorted statements over pages of at most ``limit`` content bytes each.

    The first page carries ``children``. Each page is a sorted run with fresh cursors.
    """
    children = sorted(children or [])
    if any(c < 2 or c > U32_MAX for c in children) or len(set(children)) != len(children):
        raise EncodeError("children must be distinct page numbers >= 2")
    deltas = [b - a for a, b in zip([0] + children, children, strict=False)]
    pages: list[g.TableContent] = []
    cur = _PageBuilder(deltas)
    if limit is not None and cur.size > limit:
        raise OutOfBounds(f"{len(children)} child refs do not fit one page")
    prev_key = None
    for st in statements:
        key = sort_key(st)
        if prev_key is not None and key < prev_key:
            raise EncodeError(f"statements not sorted by (id, offset): {key} after {prev_key}")
        prev_key = key
        enc, idc, offc = _delta_statement(st, cur.id_cursor, cur.off_cursor)
        n = len(g.encode_statement(enc))
        if limit is not None and cur.size + n > limit and cur.statements:
            pages.append(g.TableContent(cur.children, cur.statements))
            cur = _PageBuilder([])
            enc, idc, offc = _delta_statement(st, 0, 0)
            n = len(g.encode_statement(enc))
        if st.kind == GROW:
            if cur.content_end.get(st.id, 0) > st.offset:
                raise EncodeError(f"Grow({st.id}, {st.offset}) behind content of id {st.id} "
                                  "in the same page")
            cur.grow[st.id] = st.offset
        if st.kind in (REF, ZERO, INLINE):
            end = st.offset + st.size
            if end > cur.grow.get(st.id, end):
                raise EncodeError(f"Grow({st.id}, {cur.grow[st.id]}) behind content of id "
                                  f"{st.id} reaching {end} in the same page")
            cur.content_end[st.id] = max(cur.content_end.get(st.id, 0), end)
        cur.statements.append(enc)
        cur.size += n
        cur.id_cursor, cur.off_cursor = idc, offc
    pages.append(g.TableContent(cur.children, cur.statements))
    return pages


def frame_table(content: g.TableContent, epoch: int) -> bytes:
    return g.encode_table_page(g.TablePage(g.PageKind.AddressTable, epoch, content))


def frame_data(content: bytes, epoch: int) -> bytes:
    return g.encode_page(g.Page(g.PageKind.Data, epoch, content))


def header_fields(**kw) -> g.HeaderFields:
    base = dict(format_version=0, min_reader_version=0, root_allocation=0, schema_table=0,
                consolidator_state=0, root_fingerprint=bytes(16), journal_pointer=2)
    base.update(kw)
    return g.HeaderFields(**base)


def frame_header(fields: g.HeaderFields, epoch: int, content: g.TableContent) -> bytes:
    return g.encode_header_page(g.HeaderPage(fields, g.PageKind.AddressTable, epoch, content))


def empty_file() -> bytes:
    """A new file as the reference implementation creates it (facts.md §2.3)."""
    page0 = frame_header(header_fields(journal_pointer=2), 0, g.TableContent([], []))
    return page0 + bytes(PAGE_SIZE)


# -- the store: edits -> epochs ------------------------------------------------------------

@dataclass
class _Dirty:
    committed_exists: bool
    committed_size: int
    exists: bool
    content: bytearray
    low: int  # the lowest size reached since the last flush
    ranges: list[tuple[int, int]] = field(default_factory=list)  # written/zeroed ranges

    def mark(self, a: int, b: int) -> None:
        if a >= b:
            return
        out = []
        for x, y in self.ranges:
            if y < a or x > b:
                out.append((x, y))
            else:
                a, b = min(a, x), max(b, y)
        out.append((a, b))
        out.sort()
        self.ranges = out

    def clip(self, n: int) -> None:
        self.ranges = [(x, min(y, n)) for x, y in self.ranges if x < n]


class Store:
    """A kladde file opened for writing: read committed state, edit, flush epochs."""

    def __init__(self, path: str | os.PathLike, fd: int, table: KladdeFile, *,
                 io: OsIO | None = None, limits: _limits.Limits = _limits.DEFAULT) -> None:
        self.path = os.fspath(path)
        self.fd = fd
        self.io = io or OsIO()
        self.limits = limits
        self.poisoned: Poisoned | None = None  # set by a failed write: the store is unusable
        self._replaying = False  # replay at open materialises under limits.replay_*
        self.table = table
        self.dirty: dict[int, _Dirty] = {}
        self.fields = {k: getattr(table.header, k) for k in
                       ("root_allocation", "schema_table", "consolidator_state",
                        "root_fingerprint")}
        self.pending: list = []  # journal records of the open transaction
        self._journaling = True
        self.recovered: jn.Journal | None = None  # what open() found in the journal
        self.discarded: str | None = None  # side file of the journal bytes a fold dropped
        self.segment = jn.SegmentWriter(table.epoch + 1, table.header.journal_pointer)

    # -- lifecycle -----------------------------------------------------------------
    @classmethod
    def create(cls, path: str | os.PathLike) -> Store:
        """Create a new file (2 pages, as the reference implementation does) and open it."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, empty_file())
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(path)
        return cls.open(path)

    @classmethod
    def open(cls, path: str | os.PathLike, *, io: OsIO | None = None,
             discard_after: int | None = None,
             limits: _limits.Limits = _limits.DEFAULT) -> Store:
        """Open for writing: replay the journal and fold it into a new epoch (facts.md §8).

        A non-empty recovered journal is folded (flushed) before any new append; replaying
        it is bounded by ``limits`` as the read-only replay is (:class:`jn.ReplayLimit`).
        The fold moves the journal pointer past the segment, so every byte it leaves
        behind (a torn tail, or damage and what follows it) is first kept in
        ``FILE.discarded-OFFSET`` (fsynced, never overwriting an earlier side file).

        Refused (``Corrupt``, the file untouched) when valid-looking transactions follow
        damage in the journal, unless ``discard_after`` repeats the offset of the damage
        (``Journal.stop_offset``); then a warning names the side file. Refused too when
        the newer header slot is damaged and a journal of its epoch still verifies: the
        older slot governs, and folding its journal would overwrite the damaged slot and
        lose those committed transactions; and when that slot is all zero bytes (damage,
        never a torn commit) while pages of its epoch verify.
        """
        name = os.fspath(path)
        fd = os.open(path, os.O_RDWR)
        try:
            os.fsync(fd)  # retires the older header's world (facts.md §7.1, reuse rule)
            data = _read_all(fd)
            table = load(data, name=name, limits=limits)
            orphans = _check_other_slot(data, table, name)
            journal = jn.recover(data, table.epoch, table.header.journal_pointer,
                                 limits=limits, name=name)
            if journal.damaged and discard_after != journal.stop_offset:
                at = journal.stop_offset
                raise Corrupt(f"{journal.describe()}; folding would drop the transactions "
                              f"from offset {at} on: salvage them first (`bytewright kladde "
                              f"salvage`), or pass discard_after={at} (`kladde fold "
                              f"--discard-after {at}`) to cut there", offset=at,
                              path=f"journal[{len(journal.transactions)}]", file=name)
            if orphans is not None:
                # the damaged slot may be a committed header whose pages no header names
                # now: a later fold or cut must not be the first to drop them
                a, b = orphans
                kept = _cut.keep(path, memoryview(data)[a:b], a)
                warnings.warn(f"{name}: header slot {1 - table.slot} does not verify and "
                              f"pages of its epoch {table.epoch + 1} remain; the older slot "
                              f"governs, and the bytes from offset {a} to {b} were copied "
                              f"to {kept}", stacklevel=2)
            if len(data) % PAGE_SIZE:
                _pad_short_page(name, fd, data, io or OsIO())
        except BaseException:
            os.close(fd)
            raise
        store = cls(path, fd, table, io=io, limits=limits)
        store.recovered = journal
        if journal.transactions or journal.stop not in ("empty", "end"):
            try:
                if journal.stop not in ("empty", "end") and journal.stop_offset is not None:
                    at = journal.stop_offset
                    store.discarded = _cut.keep(path, memoryview(data)[at:], at)
                    if journal.damaged:
                        warnings.warn(f"{name}: {journal.describe()}; the bytes from offset "
                                      f"{at} were copied to {store.discarded}", stacklevel=2)
                store._replay(journal)
                store.flush()
            except BaseException:
                store.close()
                raise
        return store

    def _replay(self, journal: jn.Journal) -> None:
        self._journaling = False
        self._replaying = True
        try:
            for txn in journal.transactions:
                for i, rec in enumerate(txn.records):
                    try:
                        jn.apply_record(self, rec)
                    except jn.ReplayLimit:
                        raise
                    except OutOfBounds as exc:
                        raise Corrupt(f"journal transaction {txn.index} record {i} breaks a "
                                      f"bound: {exc}", offset=txn.offset,
                                      path=f"journal[{txn.index}].records[{i}]") from None
        finally:
            self._journaling = True
            self._replaying = False

    def _limit(self, alloc_id: int, size: int) -> None:
        """The read-only replay's bound on one materialised allocation, at open."""
        if self._replaying and size > self.limits.replay_allocation_bytes:
            raise jn.ReplayLimit(
                f"replaying the journal would materialise allocation {alloc_id} at {size} "
                f"bytes (limit {self.limits.replay_allocation_bytes}; raise "
                "limits.replay_allocation_bytes)")

    def _usable(self) -> None:
        if self.poisoned is not None:
            raise self.poisoned
        if self.fd < 0:
            raise EncodeError("store is closed")

    @contextlib.contextmanager
    def _writing(self):
        # a failed write leaves memory and file out of step (a transaction half written,
        # or written and retried): nothing may run on this store after it
        try:
            yield
        except BaseException as exc:
            self.poisoned = Poisoned(self.path, exc)
            raise

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def epoch(self) -> int:
        return self.table.epoch

    # -- reading (current state, edits included) -------------------------------------
    def exists(self, alloc_id: int) -> bool:
        self._usable()
        d = self.dirty.get(alloc_id)
        if d is not None:
            return d.exists
        return self.table.allocation(alloc_id) is not None

    def read(self, alloc_id: int, offset: int = 0, length: int | None = None) -> bytes:
        """Bytes ``[offset, offset+length)`` of the current state (``length`` None: to the end)."""
        self._usable()
        d = self.dirty.get(alloc_id)
        if d is not None:
            if not d.exists:
                raise DanglingPointer(alloc_id)
            return bytes(jn._slice(d.content, alloc_id, offset, length))
        return self.table.read(alloc_id, offset, length)

    def size(self, alloc_id: int) -> int:
        self._usable()
        d = self.dirty.get(alloc_id)
        if d is not None:
            if not d.exists:
                raise DanglingPointer(alloc_id)
            return len(d.content)
        alloc = self.table.allocation(alloc_id)
        if alloc is None:
            raise DanglingPointer(alloc_id)
        return alloc.size

    def ids(self) -> list[int]:
        self._usable()
        out = set(self.table.ids())
        for i, d in self.dirty.items():
            (out.add if d.exists else out.discard)(i)
        return sorted(out)

    # -- edits ---------------------------------------------------------------------------
    def _touch(self, alloc_id: int) -> _Dirty:
        self._usable()
        if not 1 <= alloc_id <= U32_MAX:
            raise OutOfBounds(f"allocation id {alloc_id} outside 1..2**32-1")
        d = self.dirty.get(alloc_id)
        if d is None:
            alloc = self.table.allocation(alloc_id)
            if alloc is None:
                d = _Dirty(False, 0, False, bytearray(), 0)
            else:
                self._limit(alloc_id, alloc.size)
                content = bytearray(alloc.content(self.table.mv))
                d = _Dirty(True, alloc.size, True, content, alloc.size)
            self.dirty[alloc_id] = d
        return d

    def _live(self, alloc_id: int) -> _Dirty:
        d = self._touch(alloc_id)
        if not d.exists:  # writing brings an id into existence (as journal records do)
            d.exists = True
            d.content = bytearray()
            d.ranges = []
            d.low = 0
        return d

    @staticmethod
    def _bound(offset: int, length: int) -> None:
        if offset < 0 or length < 0 or offset + length > U32_MAX:
            raise OutOfBounds(f"range {offset}+{length} outside an allocation's 2**32-1 bytes")

    def create_allocation(self, alloc_id: int) -> None:
        """Bring ``alloc_id`` into existence with size 0 (it must not exist)."""
        d = self._touch(alloc_id)
        if d.exists:
            raise EncodeError(f"allocation {alloc_id} already exists")
        self._live(alloc_id)
        self._log(jn.resize(alloc_id, 0))

    def write(self, alloc_id: int, offset: int, data: bytes) -> None:
        """Set bytes ``[offset, offset+len(data))``, growing the allocation if needed."""
        self._bound(offset, len(data))
        d = self._live(alloc_id)
        end = offset + len(data)
        if end > len(d.content):
            self._limit(alloc_id, end)
            d.content.extend(bytes(end - len(d.content)))
        d.content[offset:end] = data
        d.mark(offset, end)
        self._log(jn.write(alloc_id, offset, data))

    def zero(self, alloc_id: int, offset: int, length: int) -> None:
        """Set ``[offset, offset+length)`` to zero, growing the allocation if needed."""
        self._bound(offset, length)
        d = self._live(alloc_id)
        end = offset + length
        if end > len(d.content):
            self._limit(alloc_id, end)
            d.content.extend(bytes(end - len(d.content)))
        d.content[offset:end] = bytes(length)
        d.mark(offset, end)
        self._log(jn.write(alloc_id, offset, bytes(length)))

    def resize(self, alloc_id: int, n: int) -> None:
        """Truncate or zero-extend to ``n`` bytes (creating the allocation if needed)."""
        self._bound(n, 0)
        d = self._live(alloc_id)
        if n < len(d.content):
            del d.content[n:]
            d.clip(n)
            d.low = min(d.low, n)
        else:
            self._limit(alloc_id, n)
            d.content.extend(bytes(n - len(d.content)))
        self._log(jn.resize(alloc_id, n))

    def delete(self, alloc_id: int) -> None:
        d = self._touch(alloc_id)
        if not d.exists:
            raise DanglingPointer(alloc_id)
        d.exists = False
        d.content = bytearray()
        d.ranges = []
        d.low = 0
        self._log(jn.free(alloc_id))

    def splice(self, alloc_id: int, offset: int, old_len: int, data: bytes) -> None:
        """Replace ``[offset, offset+old_len)`` with ``data``, shifting the tail."""
        self._usable()
        self._bound(offset, old_len)
        self._bound(offset, len(data))
        with self._quiet():
            jn.splice_into(self, alloc_id, offset, old_len, data)
        self._log(jn.splice(alloc_id, offset, old_len, data))

    def copy(self, src: int, src_offset: int, length: int, dst: int, dst_offset: int) -> None:
        """Copy ``length`` bytes from ``src`` to ``dst`` (missing source bytes read as zero)."""
        self._copy(src, src_offset, length, dst, dst_offset, False)

    def move(self, src: int, src_offset: int, length: int, dst: int, dst_offset: int) -> None:
        """A copy, then the vacated source range (inside the source's size) is zeroed."""
        self._copy(src, src_offset, length, dst, dst_offset, True)

    def _copy(self, src, src_offset, length, dst, dst_offset, move: bool) -> None:
        self._usable()
        self._bound(src_offset, length)
        self._bound(dst_offset, length)
        for i in (src, dst):
            if not 1 <= i <= U32_MAX:
                raise OutOfBounds(f"allocation id {i} outside 1..2**32-1")
        with self._quiet():
            jn.copy_into(self, src, src_offset, length, dst, dst_offset, move=move)
        self._log(jn.copy(src, src_offset, length, dst, dst_offset, move=move))

    # -- the journal ------------------------------------------------------------------------
    def _log(self, rec) -> None:
        if self._journaling:
            self.pending.append(rec)

    @contextlib.contextmanager
    def _quiet(self):
        # a compound edit journals itself as one record, not as the edits it is made of
        was, self._journaling = self._journaling, False
        try:
            yield
        finally:
            self._journaling = was

    def commit(self) -> int:
        """Append the edits since the last commit or flush to the journal as one transaction.

        Durable once this returns (fsynced); a crash before that loses the whole
        transaction and nothing else. Returns the number of records written.
        """
        self._usable()
        if not self.pending:
            return 0
        if self.segment.page < 2:
            # a header slot cannot hold the journal (pointer < 2 means "no journal"): a reader
            # would never see these transactions, so make them durable as an epoch instead
            n = len(self.pending)
            self.flush()
            return n
        payload = jn.check_records(self.pending)
        with self._writing():
            self.segment.append(payload, self.io, self.fd, self._next_journal_page)
            self.io.fsync(self.fd)
        n = len(self.pending)
        self.pending = []
        return n

    def _commit_epoch(self, epoch: int, file_pages: int, pages: list[bytes],
                      header: bytes) -> None:
        io = self.io
        # 1. data and table pages, appended past the end of the file
        base = max(file_pages, 2) * PAGE_SIZE
        if file_pages < 2:
            _cut.grow(self.fd, 2 * PAGE_SIZE, io=io)
        for i, page in enumerate(pages):
            io.pwrite(self.fd, page, base + i * PAGE_SIZE)
        # 2. fsync: everything the new header references is durable before the header
        io.fsync(self.fd)
        # 3. the commit: header into slot E mod 2 (the older slot), then fsync
        slot_at = (epoch % 2) * PAGE_SIZE
        old = os.pread(self.fd, PAGE_SIZE, slot_at)
        if any(old) and _slot_problem(old, epoch % 2) is not None:
            _cut.keep_overwritten(self.path, old, slot_at,
                                  reason=f"header slot {epoch % 2} does not verify")
        io.pwrite(self.fd, header, slot_at)
        io.fsync(self.fd)

    def _next_journal_page(self) -> int:
        return max(os.fstat(self.fd).st_size // PAGE_SIZE, self.segment.page + 1)

    def set_header(self, **fields) -> None:
        """Set root_allocation, schema_table, consolidator_state or root_fingerprint."""
        self._usable()
        for k, v in fields.items():
            if k not in self.fields:
                raise EncodeError(f"unknown header field {k!r}")
            self.fields[k] = v

    # -- flush ---------------------------------------------------------------------------
    def statements_for_flush(self, data_alloc) -> list[Stmt]:
        """The next epoch's statements (sorted); ``data_alloc(bytes) -> address``."""
        self._usable()
        out: list[Stmt] = []
        for alloc_id in sorted(self.dirty):
            out.extend(_emit(alloc_id, self.dirty[alloc_id], data_alloc))
        return out

    def flush(self) -> int:
        """Write the edits as epoch ``E = committed + 1``; return ``E``.

        A header slot that does not verify is kept (``FILE.overwritten-OFFSET``) before
        the commit overwrites it: it may be a newer header damaged after it committed."""
        self._usable()
        t = self.table
        epoch = t.epoch + 1
        # past every page in the file: the current journal segment must survive until the
        # new header commits (a crash before that replays it again)
        file_pages = max(os.fstat(self.fd).st_size // PAGE_SIZE, t.npages)
        next_page = max(file_pages, 2)
        pages: list[bytes] = []
        data = _DataPages(next_page)
        stmts = self.statements_for_flush(data.place)
        pages += [frame_data(bytes(c), epoch) for c in data.pages]
        next_page += len(data.pages)
        children = list(t.pages[0].children)  # the header's current children
        if t.root_statements:  # carry another writer's root statements, same epoch
            carry = sorted(t.root_statements, key=sort_key)
            for content in pack_tables(carry):
                pages.append(frame_table(content, t.epoch))
                children.append(next_page)
                next_page += 1
        if stmts:
            for content in pack_tables(stmts):
                pages.append(frame_table(content, epoch))
                children.append(next_page)
                next_page += 1
        children.sort()
        while len(children) > HEADER_FANOUT:
            inner = []
            for i in range(0, len(children), INTERIOR_FANOUT):
                chunk = children[i:i + INTERIOR_FANOUT]
                pages.append(frame_table(g.TableContent(_deltas(chunk), []), epoch))
                inner.append(next_page)
                next_page += 1
            children = inner
        total = next_page
        fields = header_fields(journal_pointer=max(total, 2), **self.fields)
        root = g.TableContent(_deltas(children), [])
        if len(g.encode_table_content(root)) > MAX_HEADER_CONTENT:
            raise OutOfBounds("header children do not fit the header page")
        header = frame_header(fields, epoch, root)
        with self._writing():
            self._commit_epoch(epoch, file_pages, pages, header)
        self.table = load(_read_all(self.fd), name=self.path, limits=self.limits)
        self.dirty.clear()
        self.pending = []  # folded into this epoch
        self.segment = jn.SegmentWriter(epoch + 1, self.table.header.journal_pointer)
        return epoch


def _deltas(children: list[int]) -> list[int]:
    return [b - a for a, b in zip([0] + children, children, strict=False)]


class _DataPages:
    """Packs Ref payloads into fresh data pages; a Ref never spans a page."""

    def __init__(self, first_page: int) -> None:
        self.first = first_page
        self.pages: list[bytearray] = []

    def place(self, data: bytes) -> list[tuple[int, int]]:
        """Store ``data``; return ``[(address, length), ...]`` pieces in order."""
        out = []
        pos = 0
        while pos < len(data):
            if not self.pages or len(self.pages[-1]) >= MAX_PAGE_CONTENT:
                self.pages.append(bytearray())
            page = self.pages[-1]
            take = min(MAX_PAGE_CONTENT - len(page), len(data) - pos)
            addr = (self.first + len(self.pages) - 1) * PAGE_SIZE + CONTENT_OFFSET + len(page)
            page += data[pos:pos + take]
            out.append((addr, take))
            pos += take
        return out


def _emit(alloc_id: int, d: _Dirty, place) -> list[Stmt]:
    """One id's statements for the next epoch (no same-epoch conflicts by construction)."""
    if not d.exists:
        return [Stmt(alloc_id, TOMBSTONE, 0)] if d.committed_exists else []
    final = len(d.content)
    need_shrink = d.committed_exists and d.low < d.committed_size
    ranges = [(a, min(b, final)) for a, b in d.ranges if a < final]
    if need_shrink:  # bytes in [low, old size) may still resolve to older content
        hi = min(d.committed_size, final)
        if d.low < hi:
            ranges = _union(ranges + [(d.low, hi)])
    out: list[Stmt] = []
    for a, b in ranges:
        out.extend(_pieces(alloc_id, d.content, a, b, place))
    content_end = max((s.offset + s.size for s in out), default=0)
    if need_shrink:
        out.append(Stmt(alloc_id, SHRINK, final))
    elif (not d.committed_exists and (not out or final > content_end)) or (
            d.committed_exists and final > d.committed_size and final > content_end):
        out.append(Stmt(alloc_id, GROW, final))
    return out


def _union(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _pieces(alloc_id: int, content: bytearray, a: int, b: int, place) -> list[Stmt]:
    """Ref/Inline for data and Zero for long zero runs within ``[a, b)``."""
    out: list[Stmt] = []
    runs: list[tuple[int, int, bool]] = []  # (start, end, is_zero)
    pos = a
    view = bytes(content[a:b])
    while pos < b:
        i = pos - a
        if view[i] == 0:
            j = i
            while j < len(view) and view[j] == 0:
                j += 1
            runs.append((pos, a + j, True))
            pos = a + j
        else:
            j = i
            while j < len(view) and view[j] != 0:
                j += 1
            runs.append((pos, a + j, False))
            pos = a + j
    # short zero runs between data stay inside the data; merge neighbours of one kind
    final: list[list] = []
    for idx, (s, e, z) in enumerate(runs):
        if z and e - s < ZERO_RUN and 0 < idx < len(runs) - 1:
            z = False
        if final and final[-1][2] == z:
            final[-1][1] = e
        else:
            final.append([s, e, z])
    for s, e, z in final:
        if z:
            out.append(Stmt(alloc_id, ZERO, s, e - s))
        elif e - s <= INLINE_THRESHOLD:
            out.append(Stmt(alloc_id, INLINE, s, e - s, bytes(content[s:e])))
        else:
            off = s
            for addr, n in place(bytes(content[s:e])):
                out.append(Stmt(alloc_id, REF, off, n, addr))
                off += n
    return out


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    chunks = []
    pos = 0
    while pos < size:
        chunk = os.pread(fd, size - pos, pos)
        if not chunk:
            break
        chunks.append(chunk)
        pos += len(chunk)
    return b"".join(chunks)


__all__ = ["OsIO", "Store", "encode_table", "pack_tables", "empty_file", "frame_table",
           "frame_data", "frame_header", "header_fields", "KIND_DATA", "KIND_TABLE"]


def _pad_short_page(name: str, fd: int, data: bytes, io: OsIO) -> None:
    """The file ends inside a page (cut short): pad that page to its end, so the file ends
    on a page boundary and the fold appends after it, never over the journal transactions
    it may still hold.

    A file that ends inside header slot 1 is read as having no slot 1; made whole again, a
    header whose bytes survived the cut would govern with the pages the cut removed. Its
    bytes are kept (``FILE.overwritten-4096``) and zeroed first: a never-written slot.
    """
    if len(data) < 2 * PAGE_SIZE and any(data[PAGE_SIZE:]):
        _cut.keep_overwritten(name, bytes(data[PAGE_SIZE:]), PAGE_SIZE,
                              reason="the file ends inside header slot 1")
        io.pwrite(fd, bytes(len(data) - PAGE_SIZE), PAGE_SIZE)
    _cut.grow(fd, -(-len(data) // PAGE_SIZE) * PAGE_SIZE, io=io)
    io.fsync(fd)


def _slot_problem(page: bytes, slot: int) -> str | None:
    """Why one header slot's page does not verify as that slot's header, or None."""
    try:
        hs, _ = g.decode_header_slot(page, 0)
    except DecodeError as exc:
        return "CRC mismatch" if isinstance(exc, ChecksumError) else exc.message
    if hs.kind != KIND_TABLE:
        return f"kind {int(hs.kind)}"
    if hs.epoch % 2 != slot:
        return f"epoch {hs.epoch} has the wrong parity"
    return None


def _check_other_slot(data: bytes, table: KladdeFile, name: str) -> tuple[int, int] | None:
    """Refuse when the slot that does not govern is a newer header damaged after it
    committed: a journal of the segment that header would have named still verifies.

    A torn write of that slot (a crash during a commit) leaves no such journal, since a
    segment is only appended to after its header is durable; a journal of segment
    ``E + 2`` (``E`` the governing epoch) therefore proves header ``E + 1`` committed.
    Refused too when that slot is all zero bytes where a header stood and pages of epoch
    ``E + 1`` verify: no torn write zeroes a slot (a page the file ends inside is read
    padded with zeros). Any other damaged slot, and a zeroed slot 1 under epoch 0, may be
    a torn commit; then the byte range from the first to the last page whose framing
    names epoch ``E + 1`` (verifying or not) is returned (None when there is none), for
    the caller to keep.
    """
    if len(data) < 2 * PAGE_SIZE:
        return None
    npages = -(-len(data) // PAGE_SIZE)  # a page the file ends inside may hold the journal
    other = 1 - table.slot
    page = bytes(data[other * PAGE_SIZE:(other + 1) * PAGE_SIZE])
    # all zeros is a new file's never-written slot 1, or a newer header zeroed whole (a
    # zeroed sector holds all of its bytes): only a journal of its segment tells them apart
    why = _slot_problem(page, other) if any(page) else "all zero bytes"
    if why is None:
        return None  # the older header: overwriting it is the commit protocol
    candidates: list[int] = []
    try:  # the damaged header's own journal pointer first, though nothing vouches for it
        fields, _ = g.decode_header_fields(page, 0)
        candidates.append(fields.journal_pointer)
    except DecodeError:
        pass
    candidates += range(2, npages)
    for p in candidates:
        if not 2 <= p < npages:
            continue
        n = jn.committed_at(data, table.epoch + 1, p)
        if n:
            raise Corrupt(
                f"header slot {other} does not verify ({why}), so the older slot "
                f"{table.slot} (epoch {table.epoch}) governs; but page {p} holds {n} "
                f"committed journal transactions of segment {table.epoch + 2}, which only a "
                f"committed header of epoch {table.epoch + 1} names: the damaged slot was "
                "that header. Writing would overwrite it and lose them and that epoch; the "
                "file is left as it is (`bytewright kladde info` shows both slots)",
                offset=other * PAGE_SIZE, path=f"header_slot[{other}]",
                file=name)
    # A header write starts with the magic, and the slot it overwrites held a header (page
    # 0 from creation, page 1 once epoch 1 committed), so a slot of zeros is damage, never
    # a torn commit. Pages of epoch E + 1 that verify were fsynced for a header of that
    # epoch in this slot (step 2 of a commit): it may have committed, and nothing tells.
    # A never-written slot 1 (epoch 0 governs) is zeros too: pages of epoch 1 then may be
    # a first commit that crashed before its header, so they are kept, never refused.
    written = other == 0 or table.epoch >= 2
    refuse = not any(page) and written
    found: list[int] = []
    for p in range(2, npages):
        # the page the file ends inside is read padded with zeros, as the fold pads it:
        # the padding is not checksummed, so a cut past its CRC leaves it verifying
        head = bytes(data[p * PAGE_SIZE:p * PAGE_SIZE + 9]).ljust(9, b"\0")
        if head[0] not in (KIND_DATA, KIND_TABLE) or \
                int.from_bytes(head[1:9], "little") != table.epoch + 1:
            continue
        body = bytes(data[p * PAGE_SIZE:(p + 1) * PAGE_SIZE]).ljust(PAGE_SIZE, b"\0")
        # a page whose framing claims the epoch is kept even when damage elsewhere in it
        # fails its CRC: the writes in it need not be where the damage is
        found.append(p)
        try:
            g.decode_page(memoryview(body))
        except DecodeError:
            continue
        if refuse:
            raise Corrupt(
                f"header slot {other} is all zero bytes, so the older slot {table.slot} "
                f"(epoch {table.epoch}) governs; but page {p} verifies as a page of epoch "
                f"{table.epoch + 1}, written only for a header in slot {other}, and a "
                "torn commit never leaves zeros: the slot may have been that header, "
                "damaged after it committed. Writing would overwrite it and lose that "
                "epoch; the file is left as it is (`bytewright kladde info` shows both "
                "slots)",
                offset=other * PAGE_SIZE, path=f"header_slot[{other}]", file=name)
    if not found:
        return None
    return found[0] * PAGE_SIZE, min((found[-1] + 1) * PAGE_SIZE, len(data))

"""The kladde journal (facts.md §8): recovery, the CRC chain, replay and appending.

The layouts (records, transaction framing, journal page and trailer) are schema records in
``schemas/kladde.yaml`` (``journal_record``, ``journal_records``, ``journal_transaction``,
``journal_page``); this module adds what a layout cannot say:

* the **CRC chain**: one running CRC-32C per segment, seeded with the segment epoch
  (header epoch + 1) as 8 LE bytes, fed every stream byte except stored CRCs, and every
  trailer ``next`` field; each stored CRC is the chain value at that point;
* the **stream** continues across pages (even inside a field); a reader follows a trailer
  only if its CRC matches the chain and ``next`` is >= 2, inside the file and new to the
  segment;
* **recovery** starts at the header's ``journal_pointer`` (empty if < 2 or past EOF),
  stops at the first CRC failure or bad pointer, and keeps the complete transactions. A
  transaction whose CRC matches but whose records do not decode or break a bound is a
  writer bug: the file is refused (``Corrupt``), never treated as a torn tail;
* **why it stopped**: the end of the journal (only zero bytes follow), a torn
  tail, or damage with valid-looking transactions after it. A transaction after damage
  "looks valid" when its CRC verifies against the chain state the previous stored CRC
  gives (CRC-32C's state is its value), so bit rot in the middle is told apart from a
  crash's partial write without trusting the damaged bytes;
* **replay**: the records applied in order over the committed state, as the reference
  implementation's oracle does (every record except Free brings its id into existence;
  Copy reads unwritten source bytes as zero; Move then zeroes the vacated source range
  inside the source's size, except what the destination just overwrote).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import google_crc32c

from ...generated import kladde as g
from .. import cut as _cut
from ..errors import DecodeError
from ..varint import decode_uleb128
from . import limits as _limits
from .errors import Corrupt, DanglingPointer, OutOfBounds
from .model import PAGE_SIZE, U32_MAX, _field

#: stream bytes per journal page (the trailer's offset), from the schema's journal_page
STREAM_BYTES = _field("journal_page", "next")["offset"]
#: the trailer CRC's offset within a journal page
TRAILER_CRC_AT = _field("journal_page", "crc")["offset"]
#: the stored transaction CRC's width
CRC_SIZE = _field("journal_transaction", "crc")["size"]
#: the unit a disk loses or zeroes at once: zeros from such a boundary to the end of a
#: page may be damage rather than the journal's clean end
SECTOR = 512

Tag = g.JournalTag


class ReplayLimit(OutOfBounds):
    """Replaying the journal would exceed a resource limit (``limits.Limits``)."""


def _extend(crc: int, data) -> int:
    return int(google_crc32c.extend(crc, bytes(data)))


def chain_seed(segment_epoch: int) -> int:
    """The chain's value after its seed: the segment epoch as 8 little-endian bytes."""
    return _extend(0, g.encode_journal_seed(g.JournalSeed(segment_epoch)))


def _next_bytes(next_page: int) -> bytes:
    # the trailer's next field as the schema encodes it (fed into the chain)
    page = g.encode_journal_page(g.JournalPage(bytes(STREAM_BYTES), next_page, 0))
    return page[STREAM_BYTES:TRAILER_CRC_AT]


# -- records ------------------------------------------------------------------------------

def free(alloc_id: int) -> g.JournalRecord:
    return g.JournalRecord(Tag.Free, g.JournalFree(alloc_id))


def resize(alloc_id: int, size: int) -> g.JournalRecord:
    return g.JournalRecord(Tag.Resize, g.JournalResize(alloc_id, size))


def write(alloc_id: int, offset: int, data: bytes) -> g.JournalRecord:
    return g.JournalRecord(Tag.Write, g.JournalWrite(alloc_id, offset, bytes(data)))


def splice(alloc_id: int, offset: int, old_len: int, data: bytes) -> g.JournalRecord:
    return g.JournalRecord(Tag.Splice, g.JournalSplice(alloc_id, offset, old_len, bytes(data)))


def copy(src: int, src_offset: int, length: int, dst: int, dst_offset: int, *,
         move: bool = False) -> g.JournalRecord:
    return g.JournalRecord(Tag.Move if move else Tag.Copy,
                           g.JournalCopy(src, src_offset, length, dst, dst_offset))


def encode_records(records: Iterable[g.JournalRecord]) -> bytes:
    """A transaction's record bytes (the schema's ``journal_records``)."""
    try:
        return g.encode_journal_records(g.JournalRecords(list(records)))
    except Exception as exc:  # an id or bound the schema's asserts refuse on decode
        raise OutOfBounds(f"journal records do not encode: {exc}") from None


def check_records(records: Iterable[g.JournalRecord]) -> bytes:
    """Encode and decode back: a writer never appends what a reader would refuse."""
    data = encode_records(records)
    try:
        g.decode_journal_records(data)
    except DecodeError as exc:
        raise OutOfBounds(f"journal record out of bounds: {exc.message}") from None
    return data


# -- recovery -------------------------------------------------------------------------------

@dataclass(slots=True)
class Transaction:
    """One committed transaction: where it sits and its records."""

    index: int
    offset: int  # file offset of its first byte (the length prefix)
    end: int  # file offset just past its stored CRC
    records: list


@dataclass(slots=True)
class Journal:
    """What recovery found in the segment the governing header names.

    ``stop`` says why reading ended: ``"empty"`` (no segment), ``"end"`` (only zero bytes
    follow the last transaction: a clean end), ``"torn tail"`` (damage that no valid-looking
    transaction follows) or ``"checksum mismatch"`` / ``"trailer"`` / ``"length"`` with
    ``valid_after`` > 0 (damage in the middle). ``stop_offset`` is the file offset where
    reading stopped.
    """

    segment_epoch: int
    first_page: int
    transactions: list[Transaction] = field(default_factory=list)
    pages: list[int] = field(default_factory=list)
    stop: str = "empty"
    stop_offset: int | None = None
    detail: str = ""
    valid_after: int = 0
    valid_after_offsets: list[int] = field(default_factory=list)
    scan_complete: bool = True  # False: the scan limit stopped the look past the damage

    @property
    def records(self) -> list:
        return [r for t in self.transactions for r in t.records]

    @property
    def damaged(self) -> bool:
        """Damage with valid-looking transactions after it, or a look past the damage that
        the scan limit cut short (either way, not known to be a crash's torn tail)."""
        return self.valid_after > 0 or not self.scan_complete

    def describe(self) -> str:
        n = len(self.transactions)
        head = f"journal segment {self.segment_epoch} at page {self.first_page}: {n} transactions"
        if self.stop == "empty":
            return f"journal empty (pointer {self.first_page})"
        if self.stop == "end":
            return head
        text = f"{head}; reading stopped at offset {self.stop_offset}: {self.detail}"
        if self.valid_after:
            text += (f"; {self.valid_after} valid-looking transactions follow the damage "
                     f"(first at offset {self.valid_after_offsets[0]})")
        return text


class _Stream:
    """Reads the segment's stream bytes across pages, feeding the chain."""

    def __init__(self, mv: memoryview, npages: int, first: int, chain: int) -> None:
        self.mv = mv
        self.npages = npages
        self.pages = [first]
        self.page = first
        self.pos = 0
        self.chain = chain
        self.why = ""
        self.why_at: int | None = None
        self.scan_complete = True

    def offset(self) -> int:
        return self.page * PAGE_SIZE + self.pos

    def read(self, n: int, spans: list, feed: bool = True) -> bytes | None:
        out = bytearray()
        while len(out) < n:
            if self.pos == STREAM_BYTES and not self._cross():
                return None
            k = min(n - len(out), STREAM_BYTES - self.pos)
            at = self.page * PAGE_SIZE + self.pos
            if at + k > len(self.mv):  # the file ends inside this page: cut short
                self.why = (f"the file ends at offset {len(self.mv)}, inside journal page "
                            f"{self.page}")
                self.why_at = len(self.mv)
                return None
            chunk = self.mv[at:at + k]
            spans.append((len(out), at))
            out += chunk
            if feed:
                self.chain = _extend(self.chain, chunk)
            self.pos += k
        return bytes(out)

    def _cross(self) -> bool:
        base = self.page * PAGE_SIZE
        if base + PAGE_SIZE > len(self.mv):
            self.why = (f"the file ends at offset {len(self.mv)}, before the trailer of "
                        f"journal page {self.page}")
            self.why_at = len(self.mv)
            return False
        page, _ = g.decode_journal_page(self.mv, base)
        chained = _extend(self.chain, _next_bytes(page.next))
        if chained != page.crc:
            self.why = f"trailer of journal page {self.page} fails its CRC"
            self.why_at = base + STREAM_BYTES
            return False
        if page.next < 2 or page.next >= self.npages or page.next in self.pages:
            self.why = (f"trailer of journal page {self.page} points at page {page.next} "
                        "(outside the file, a header slot or already in the segment)")
            self.why_at = base + STREAM_BYTES
            return False
        self.chain = chained
        self.pages.append(page.next)
        self.page = page.next
        self.pos = 0
        return True


def _map(spans: list, rel: int) -> int:
    at = spans[0][1]
    for start, file_at in spans:
        if start <= rel:
            at = file_at + (rel - start)
    return at


def recover(data, header_epoch: int, journal_pointer: int, *,
            limits: _limits.Limits = _limits.DEFAULT, name: str | None = None) -> Journal:
    """Read the valid prefix of segment ``header_epoch + 1`` starting at ``journal_pointer``."""
    return _read(data, header_epoch, journal_pointer, limits=limits, name=name, classify=True)


def committed_at(data, header_epoch: int, page: int) -> int:
    """How many transactions of segment ``header_epoch + 1`` verify when its stream is read
    from the start of ``page`` (0 when none does). Nothing past them is looked at: a cheap
    probe for a segment whose header is no longer readable."""
    try:
        return len(_read(data, header_epoch, page, limits=_limits.DEFAULT, name=None,
                         classify=False).transactions)
    except Corrupt:  # a CRC match whose records do not decode: still a verifying stream
        return 1


def _read(data, header_epoch: int, journal_pointer: int, *, limits: _limits.Limits,
          name: str | None, classify: bool) -> Journal:
    mv = memoryview(data)
    # a page the file ends inside counts: a truncation after the last transaction leaves
    # them whole, and recovery keeps every complete transaction before the first failure
    npages = -(-len(mv) // PAGE_SIZE)
    seg = header_epoch + 1
    j = Journal(seg, journal_pointer)
    if journal_pointer < 2 or journal_pointer >= npages:
        return j

    def stopped(at: int, kind: str, detail: str) -> None:
        if classify:
            _stopped(j, s, at, kind, detail, limits)
        else:
            j.stop, j.stop_offset, j.detail = kind, at, detail

    s = _Stream(mv, npages, journal_pointer, chain_seed(seg))
    while True:
        start = s.offset()
        spans: list = []
        prefix = bytearray()
        ok = True
        for _ in range(_limits.LENGTH_PREFIX_BYTES):
            b = s.read(1, spans)
            if b is None:
                ok = False
                break
            prefix += b
            if b[0] < 0x80:
                break
        if spans:
            start = spans[0][1]  # the prefix may begin on the next page
        if not ok:
            stopped(start, "trailer", s.why)
            break
        if prefix[-1] >= 0x80:
            stopped(start, "length", "the length prefix runs past 5 bytes")
            break
        length, _ = decode_uleb128(prefix)
        if length > _limits.TRANSACTION_BYTES or length > len(mv):
            stopped(start, "length", f"a transaction length of {length} bytes runs past the file")
            break
        payload = s.read(length, spans_p := [])
        if payload is None:
            stopped(start, "trailer", s.why)
            break
        expected = s.chain
        crc_bytes = s.read(CRC_SIZE, [], feed=False)
        if crc_bytes is None:
            stopped(start, "trailer", s.why)
            break
        raw = bytes(prefix) + payload + crc_bytes
        txn, _ = g.decode_journal_transaction(raw)
        if txn.crc != expected:
            stopped(start, "checksum mismatch",
                    f"transaction {len(j.transactions)} fails its chain CRC")
            break
        index = len(j.transactions)
        try:
            recs, _ = g.decode_journal_records(txn.records)
        except DecodeError as exc:
            rel = (exc.offset or 0) + len(prefix)
            all_spans = spans + [(len(prefix) + a, f) for a, f in spans_p]
            raise Corrupt(f"journal transaction {index} at offset {start}: its CRC matches but "
                          f"its records do not decode ({exc.message}); a writer bug, the file "
                          "is refused", offset=_map(all_spans, rel),
                          path=f"journal[{index}].{exc.path}", expected=exc.expected,
                          found=exc.found, file=name) from None
        j.transactions.append(Transaction(index, start, s.offset(), recs.records))
    j.pages = s.pages
    return j


def _stopped(j: Journal, s: _Stream, at: int, kind: str, detail: str,
             limits: _limits.Limits) -> None:
    """Classify where reading stopped: clean end, torn tail, or damage in the middle."""
    j.stop_offset = at
    j.detail = detail
    if at >= len(s.mv):  # the file ends right after the last transaction: nothing to keep
        j.stop = "end"
        j.detail = f"the file ends at offset {at}"
        return
    if _all_zero_rest(s, at):  # no trailer either, so the stream cannot go on
        # a zeroed sector over the end of a page looks the same from inside the page;
        # when the zeros start on a sector boundary, look at the page after it too
        after = _scan(s, at, limits) if at % SECTOR == 0 else []
        if not after:
            j.stop = "end"
            j.detail = "only zero bytes follow"
            return
        j.stop = kind
        j.detail = (f"{detail}; only zero bytes follow on page {at // PAGE_SIZE} (its "
                    "trailer too), yet the journal goes on after it")
        j.valid_after = len(after)
        j.valid_after_offsets = after
        j.scan_complete = s.scan_complete
        return
    after = _scan(s, at, limits)
    j.scan_complete = s.scan_complete
    if after:
        j.stop = kind
        j.valid_after = len(after)
        j.valid_after_offsets = after
    elif not s.scan_complete:  # cannot rule out valid transactions further on: not a tail
        j.stop = kind
        j.detail += (f"; the scan past the damage stopped after {limits.scan_bytes} bytes, "
                     "so valid-looking transactions may follow")
    else:
        j.stop = "torn tail"


def _all_zero_rest(s: _Stream, at: int) -> bool:
    page_end = (at // PAGE_SIZE) * PAGE_SIZE + PAGE_SIZE
    rest = s.mv[at:page_end]
    return not any(rest)


def _framed(mv: memoryview, page: int) -> bool:
    """Whether ``page`` is a framed (data or address-table) page whose CRC verifies."""
    if (page + 1) * PAGE_SIZE > len(mv):
        return False  # the file ends inside it
    try:
        g.decode_page(mv, page * PAGE_SIZE)
    except DecodeError:
        return False
    return True


def _guess_next(s: _Stream, page: int, seen: set) -> int | None:
    """Where the stream most likely went on when ``page``'s trailer cannot be used (zeroed
    or damaged): the next page of the file, where journal pages are appended, unless
    that page is outside the file, already read, or a framed page (not journal)."""
    nxt = page + 1
    if nxt < 2 or nxt >= s.npages or nxt in seen or _framed(s.mv, nxt):
        return None
    return nxt


def _raw_stream(s: _Stream, at: int, limits: _limits.Limits):
    """The stream bytes from file offset ``at`` on, following trailers by range only.

    Returns ``(bytes, file_offsets, boundaries)``; ``boundaries`` maps a stream index
    where a page ended to that trailer's next bytes. A trailer that cannot be used is
    taken to name the next page of the file (:func:`_guess_next`).
    """
    mv = s.mv
    out = bytearray()
    offs: list[tuple[int, int]] = []
    bounds: dict[int, bytes] = {}
    page = at // PAGE_SIZE
    pos = at - page * PAGE_SIZE
    if pos >= STREAM_BYTES:
        pos = STREAM_BYTES
    # only the pages read before the damage: a transaction that failed may already have
    # crossed into the next page, and that page must still be scanned
    if page in s.pages:
        seen = set(s.pages[:s.pages.index(page) + 1])
    else:
        seen = set(s.pages) | {page}
    s.scan_complete = True
    while True:
        if len(out) >= limits.scan_bytes:
            s.scan_complete = False  # more pages follow than the scan may read
            break
        offs.append((len(out), page * PAGE_SIZE + pos))
        out += mv[page * PAGE_SIZE + pos:page * PAGE_SIZE + STREAM_BYTES]
        if (page + 1) * PAGE_SIZE > len(mv):
            break  # the file ends inside this page: no trailer
        jp, _ = g.decode_journal_page(mv, page * PAGE_SIZE)
        nxt = jp.next
        if nxt < 2 or nxt >= s.npages or nxt in seen:
            nxt = _guess_next(s, page, seen)
            if nxt is None:
                break
        seen.add(nxt)
        bounds[len(out)] = _next_bytes(nxt)
        page, pos = nxt, 0
    if len(out) > limits.scan_bytes:
        if any(out[limits.scan_bytes:]):
            s.scan_complete = False
        del out[limits.scan_bytes:]
    return bytes(out), offs, bounds


def _scan(s: _Stream, at: int, limits: _limits.Limits) -> list[int]:
    """File offsets of valid-looking transactions after the damage at ``at``.

    A candidate at stream index ``i`` verifies when its stored CRC equals the chain
    continued from the CRC stored just before it (plus any trailer next fed in between).
    """
    if at >= len(s.mv):
        return []
    return [t.offset for t in _scan_transactions(s, at, limits)]


def _scan_transactions(s: _Stream, at: int, limits: _limits.Limits) -> list[Transaction]:
    raw, offs, bounds = _raw_stream(s, at, limits)
    found: list[Transaction] = []
    # a transaction made only of zero bytes would need a stored CRC of 0 (odds 2**-32):
    # candidates start before the trailing zeros
    n = min(len(raw.rstrip(b"\0")) + CRC_SIZE, len(raw))
    u32 = _u32_at(raw)
    bl = sorted(bounds)
    i = CRC_SIZE
    while i + 1 + CRC_SIZE <= n:
        hit = _try(raw, u32, bounds, bl, i)
        if hit is None:
            i += 1
            continue
        end, records = hit
        found.append(Transaction(-1, _map(offs, i), _map(offs, end - 1) + 1, records))
        i = end
    return found


def _u32_at(raw: bytes):
    """``u32[k]``: the little-endian u32 stored at byte ``k`` (the stored CRCs' layout,
    ``journal_transaction.crc``), for every ``k`` at once: four aligned numpy views."""
    import numpy as np

    out = np.zeros(max(len(raw) - CRC_SIZE + 1, 0), dtype=np.uint64)
    for k in range(CRC_SIZE):
        if len(raw) - k < CRC_SIZE:
            break
        view = np.frombuffer(raw, dtype="<u4", offset=k, count=(len(raw) - k) // CRC_SIZE)
        out[k::CRC_SIZE][:len(view)] = view
    return out


def _try(raw: bytes, u32, bounds: dict[int, bytes], bl: list[int],
         i: int) -> tuple[int, list] | None:
    """A verifying transaction at stream index ``i``: (its end, its records), else None.
    Its stored CRC must equal the chain continued from the CRC stored just before it."""
    try:
        length, p = decode_uleb128(raw, i, max_bytes=_limits.LENGTH_PREFIX_BYTES)
    except DecodeError:
        return None
    end_fed = p + length
    if end_fed + CRC_SIZE > len(raw):
        return None
    state = int(u32[i - CRC_SIZE])
    cut = i
    for b in bl:
        if i - CRC_SIZE < b <= i:  # a trailer's next fed after the previous CRC
            state = _extend(state, bounds[b])
        elif i < b < end_fed:  # a trailer inside this transaction's fed bytes
            state = _extend(_extend(state, raw[cut:b]), bounds[b])
            cut = b
    state = _extend(state, raw[cut:end_fed])
    if state != int(u32[end_fed]):
        return None
    try:  # only a CRC match pays for the schema decode
        txn, _ = g.decode_journal_transaction(raw[i:end_fed + CRC_SIZE])
        recs, _ = g.decode_journal_records(txn.records)
    except DecodeError:
        return None
    return end_fed + CRC_SIZE, recs.records


def salvage(data, *, limits: _limits.Limits = _limits.DEFAULT) -> list[Transaction]:
    """Every transaction of the governing header's segment that still verifies: the
    recovered prefix, then the valid-looking ones after the damage (for a human to judge;
    the ones after the damage are not the file's state)."""
    from .reader import load

    table = load(data, limits=limits)
    mv = memoryview(data)
    j = recover(mv, table.epoch, table.header.journal_pointer, limits=limits)
    out = list(j.transactions)
    if j.valid_after and j.stop_offset is not None:
        s = _Stream(mv, -(-len(mv) // PAGE_SIZE), j.first_page, 0)
        s.pages = list(j.pages)
        out += _scan_transactions(s, j.stop_offset, limits)
    for i, t in enumerate(out):
        t.index = i
    return out


def journal_of(table) -> Journal:
    """The recovered journal segment ``table``'s governing header names (cached on it)."""
    if table._journal is None:
        table._journal = recover(table.mv, table.epoch, table.header.journal_pointer,
                                 limits=table.limits, name=table.name)
    return table._journal


def current_state(table) -> CurrentState:
    """The current state: ``table``'s committed state with the journal replayed over it."""
    return CurrentState(table, journal_of(table), limits=table.limits)


# -- replay ---------------------------------------------------------------------------------

def apply_record(t, rec: g.JournalRecord) -> None:
    """Apply one record to ``t`` (a ``Store`` or a :class:`CurrentState`)."""
    b = rec.body
    tag = rec.tag
    if tag == Tag.Free:
        if t.exists(b.id):
            t.delete(b.id)
    elif tag == Tag.Resize:
        t.resize(b.id, b.size)
    elif tag == Tag.Write:
        t.write(b.id, b.offset, b.data)
    elif tag == Tag.Splice:
        splice_into(t, b.id, b.offset, b.old_len, b.data)
    else:
        copy_into(t, b.src, b.src_offset, b.length, b.dst, b.dst_offset,
                  move=tag == Tag.Move)


def splice_into(t, alloc_id: int, offset: int, old_len: int, data: bytes) -> None:
    """Replace ``[offset, offset+old_len)`` with ``data`` (growing first if needed)."""
    size = t.size(alloc_id) if t.exists(alloc_id) else 0
    end = offset + old_len
    grown = max(size, end)
    new_size = grown - old_len + len(data)
    if new_size > U32_MAX:
        raise OutOfBounds(f"a Splice makes allocation {alloc_id} larger than 2**32 - 1 bytes")
    t._limit(alloc_id, max(grown, new_size))  # before a byte of it is materialised
    cur = bytearray(t.read(alloc_id)) if t.exists(alloc_id) else bytearray()
    if len(cur) < end:
        cur.extend(bytes(end - len(cur)))
    tail = bytes(data) + bytes(cur[end:])
    t.write(alloc_id, offset, tail)
    t.resize(alloc_id, new_size)


def copy_into(t, src: int, src_offset: int, length: int, dst: int, dst_offset: int, *,
              move: bool = False) -> None:
    """Copy (or Move) ``length`` bytes; unwritten or missing source bytes read as zero."""
    if dst_offset + length > U32_MAX:
        raise OutOfBounds(f"range {dst_offset}+{length} past 2**32 - 1")
    t._limit(dst, dst_offset + length)  # before the copied bytes are materialised
    if t.exists(src):
        have = t.size(src)
        lo = min(src_offset, have)
        piece = t.read(src, lo, min(src_offset + length, have) - lo)
        piece += bytes(length - len(piece))
    else:
        piece = bytes(length)
    t.write(dst, dst_offset, piece)
    if not move or not length or not t.exists(src):
        return
    size = t.size(src)
    lo, hi = src_offset, min(src_offset + length, size)
    ranges = [(lo, hi)] if lo < hi else []
    if src == dst:  # what the destination just overwrote keeps the copied bytes
        d0, d1 = dst_offset, dst_offset + length
        ranges = [r for a, b in ranges for r in ((a, min(b, d0)), (max(a, d1), b)) if r[0] < r[1]]
    for a, b in ranges:
        t.zero(src, a, b - a)


class CurrentState:
    """Committed state plus the journal: what a reader sees as the file's current state.

    Only the allocations the journal touches are materialised (each bounded by
    ``limits.replay_allocation_bytes``); the rest read through to the committed table.
    """

    def __init__(self, table, journal: Journal, *,
                 limits: _limits.Limits = _limits.DEFAULT) -> None:
        self.table = table
        self.journal = journal
        self.limits = limits
        self.changed: dict[int, bytearray | None] = {}
        for txn in journal.transactions:
            for i, rec in enumerate(txn.records):
                try:
                    apply_record(self, rec)
                except ReplayLimit:
                    raise
                except OutOfBounds as exc:
                    raise Corrupt(f"journal transaction {txn.index} record {i} breaks a bound: "
                                  f"{exc}", offset=txn.offset,
                                  path=f"journal[{txn.index}].records[{i}]") from None

    # -- the edit interface apply_record uses ------------------------------------------
    def _get(self, alloc_id: int) -> bytearray | None:
        if alloc_id in self.changed:
            return self.changed[alloc_id]
        alloc = self.table.allocation(alloc_id)
        buf = None
        if alloc is not None:
            self._limit(alloc_id, alloc.size)
            buf = bytearray(alloc.content(self.table.mv))
        self.changed[alloc_id] = buf
        return buf

    def _limit(self, alloc_id: int, size: int) -> None:
        if size > self.limits.replay_allocation_bytes:
            raise ReplayLimit(f"replaying the journal would materialise allocation {alloc_id} "
                              f"at {size} bytes (limit {self.limits.replay_allocation_bytes}; "
                              "raise limits.replay_allocation_bytes)")

    def _live(self, alloc_id: int) -> bytearray:
        buf = self._get(alloc_id)
        if buf is None:
            buf = bytearray()
            self.changed[alloc_id] = buf
        return buf

    def exists(self, alloc_id: int) -> bool:
        if alloc_id in self.changed:
            return self.changed[alloc_id] is not None
        return self.table.allocation(alloc_id) is not None

    def size(self, alloc_id: int) -> int:
        if alloc_id in self.changed:
            buf = self.changed[alloc_id]
            if buf is None:
                raise DanglingPointer(alloc_id)
            return len(buf)
        alloc = self.table.allocation(alloc_id)
        if alloc is None:
            raise DanglingPointer(alloc_id)
        return alloc.size

    def read(self, alloc_id: int, offset: int = 0, length: int | None = None) -> bytes:
        if alloc_id in self.changed:
            buf = self.changed[alloc_id]
            if buf is None:
                raise DanglingPointer(alloc_id)
            return bytes(_slice(buf, alloc_id, offset, length))
        return self.table.read(alloc_id, offset, length)

    def write(self, alloc_id: int, offset: int, data: bytes) -> None:
        end = offset + len(data)
        if end > U32_MAX:
            raise OutOfBounds(f"range {offset}+{len(data)} past 2**32 - 1")
        buf = self._live(alloc_id)
        if end > len(buf):
            self._limit(alloc_id, end)
            buf.extend(bytes(end - len(buf)))
        buf[offset:end] = data

    def zero(self, alloc_id: int, offset: int, length: int) -> None:
        self.write(alloc_id, offset, bytes(length))

    def resize(self, alloc_id: int, n: int) -> None:
        if n > U32_MAX:
            raise OutOfBounds(f"size {n} past 2**32 - 1")
        buf = self._live(alloc_id)
        if n < len(buf):
            del buf[n:]
        else:
            self._limit(alloc_id, n)
            buf.extend(bytes(n - len(buf)))

    def delete(self, alloc_id: int) -> None:
        self.changed[alloc_id] = None

    def ids(self) -> list[int]:
        out = set(self.table.ids())
        for i, buf in self.changed.items():
            (out.add if buf is not None else out.discard)(i)
        return sorted(out)

    def contents(self) -> dict[int, bytes]:
        return {i: self.read(i) for i in self.ids()}


def _slice(buf, alloc_id: int, offset: int, length: int | None):
    size = len(buf)
    if length is None:
        length = size - offset
    if offset < 0 or length < 0 or offset + length > size:
        raise OutOfBounds(f"range {offset}+{length} outside allocation {alloc_id} "
                          f"({size} bytes)")
    return buf[offset:offset + length]


# -- appending ------------------------------------------------------------------------------

class SegmentWriter:
    """Appends transactions to one segment: the stream across pages, trailers, the chain.

    ``io`` provides ``pwrite(fd, data, offset)``, ``fsync(fd)`` and the ``ftruncate``
    step :func:`bytewright.runtime.cut.grow` extends the file with (the store's write
    steps, so tests can inject a crash at each).
    """

    def __init__(self, segment_epoch: int, first_page: int, *, chain: int | None = None,
                 pages: list[int] | None = None, pos: int = 0,
                 page_bytes: bytes | None = None) -> None:
        self.segment_epoch = segment_epoch
        self.pages = list(pages) if pages else [first_page]
        self.pos = pos
        self.chain = chain_seed(segment_epoch) if chain is None else chain
        self.buf = bytearray(page_bytes[:PAGE_SIZE]) if page_bytes else bytearray(PAGE_SIZE)
        self.buf.extend(bytes(PAGE_SIZE - len(self.buf)))
        self.dirty_from = pos
        self.fresh = pos == 0  # a new page is written whole: no stale bytes after the stream
        self.transactions = 0

    @property
    def page(self) -> int:
        return self.pages[-1]

    def append(self, payload: bytes, io, fd: int, next_page: Callable[[], int]) -> None:
        """Append one transaction (its record bytes) and write it; the caller fsyncs."""
        if len(payload) > _limits.TRANSACTION_BYTES:
            raise OutOfBounds(f"a transaction of {len(payload)} bytes (limit 2**32 - 1)")
        body = g.encode_journal_transaction(g.JournalTransaction(payload, 0))[:-CRC_SIZE]
        self._ensure(io, fd, self.page)
        self._stream(body, True, io, fd, next_page)
        whole = g.encode_journal_transaction(g.JournalTransaction(payload, self.chain))
        self._stream(whole[len(body):], False, io, fd, next_page)
        self._write(io, fd, self.dirty_from, self.pos)
        self.dirty_from = self.pos
        self.transactions += 1

    @staticmethod
    def _ensure(io, fd: int, page: int) -> None:
        # the file always ends on a page boundary: extend it before writing into a new page
        if os.fstat(fd).st_size < (page + 1) * PAGE_SIZE:
            _cut.grow(fd, (page + 1) * PAGE_SIZE, io=io)

    def _stream(self, data: bytes, feed: bool, io, fd: int, next_page) -> None:
        view = memoryview(data)
        while view:
            if self.pos == STREAM_BYTES:
                nxt = next_page()
                self.chain = _extend(self.chain, _next_bytes(nxt))
                page = g.encode_journal_page(
                    g.JournalPage(bytes(self.buf[:STREAM_BYTES]), nxt, self.chain))
                self.buf[:] = page
                self._write(io, fd, self.dirty_from, PAGE_SIZE)
                self.pages.append(nxt)
                self._ensure(io, fd, nxt)
                self.buf = bytearray(PAGE_SIZE)
                self.pos = 0
                self.dirty_from = 0
                self.fresh = True
            k = min(len(view), STREAM_BYTES - self.pos)
            chunk = view[:k]
            self.buf[self.pos:self.pos + k] = chunk
            if feed:
                self.chain = _extend(self.chain, chunk)
            self.pos += k
            view = view[k:]

    def _write(self, io, fd: int, a: int, b: int) -> None:
        if self.fresh:
            b = PAGE_SIZE
            self.fresh = False
        if a < b:
            io.pwrite(fd, bytes(self.buf[a:b]), self.page * PAGE_SIZE + a)

"""Cold start (§6): header, bounds, snapshot, then the WAL with per-entry recovery.

The header and snapshot are strict: any decode failure there (bad magic, header CRC,
unknown version, a length larger than the file, snapshot CRC) fails the open with the
codec's ``DecodeError``, tagged with the file name. The WAL is recovered, never raised:
entries are applied in order until the first torn tail, bad CRC, undecodable entry or
sequence break, and everything from there on is dropped (and logged). In block-
compressed WALs a block that does not decode whole is re-read as plain bytes
(``wal_block_plain``) and the per-entry CRC and sequence rules apply inside it, so the
intact entries before the bad one are kept (``WalScan.salvaged``); a block whose frame
does not decompress is a torn tail (§5).
"""

from __future__ import annotations

import contextlib
import contextvars
import gc
import itertools
import logging
import math
import mmap
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ...generated.htt import (
    BoundPair,
    FileHeader,
    WalEntry,
    decode_bounds_section,
    decode_file_header,
    decode_prefix_wal_entry,
    decode_rows_wal_entry,
    decode_snapshot_section,
    decode_wal_block,
    decode_wal_block_plain,
    decode_wal_entry,
    decode_wal_header,
    iter_wal_entry,
)
from ..errors import ConstraintError, DecodeError, UnsupportedError
from . import layout as _layout
from . import limits as _limits
from .census import Census
from .layout import FileLayout
from .recovery import Damage, cause_of, scan_after, suspect_header
from .state import Node, State, depth_of

log = logging.getLogger("bytewright.htt")

# sizes come from the generated layout (no hand-parsed layouts)
HEADER_SIZE = _layout.HEADER_SIZE
WAL_HEADER_SIZE = _layout.WAL_HEADER_SIZE
_OP_AT = _layout.field_offset("wal_entry", "op")
_KEY_AT = _layout.field_offset("wal_entry", "key")
_KEY_LEN_SIZE = 2  # the key's u16 length prefix (schema: str length u16)


@dataclass
class Prefix:
    """Header, bounds and snapshot: everything before the WAL header."""

    header: FileHeader
    layout: FileLayout
    bounds: list[BoundPair] | None
    snapshot_offset: int
    wal_offset: int  # where the WAL header starts


@dataclass
class WalScan:
    """Where the intact WAL ends and why it ends there."""

    wal_offset: int
    base_seq: int
    header_count: int | None  # advisory wal_entry_count (None: header torn)
    entries_offset: int
    valid_end: int  # file offset just past the last intact entry/block
    count: int = 0  # intact entries
    next_seq: int = 0
    problem: str | None = None  # why the scan stopped early (None: clean end of file)
    problem_offset: int | None = None
    blocks: int = 0
    # intact entries from a block that did not decode whole; they sit past valid_end
    # on disk, so a writer re-appends them as a fresh block after trimming the tail
    salvaged: list[WalEntry] = field(default_factory=list)
    # why the WAL ends early and which valid-looking records follow (None: clean end)
    damage: Damage | None = None

    @property
    def truncated(self) -> bool:
        return self.problem is not None


def _tag(exc: DecodeError, path: str) -> DecodeError:
    exc.file = path
    return exc


def read_prefix(buf, path: str = "") -> Prefix:
    """Decode header, bounds and snapshot structure; strict (raises ``DecodeError``)."""
    try:
        header, pos = decode_file_header(buf, 0)
        _check_flags_vs_version(header)
        layout = FileLayout.of(header)
        bounds = None
        if header.flags.meaning_addressed:
            start = pos
            section, pos = decode_bounds_section(buf, pos, semantic_dims=header.semantic_dims)
            bounds = section.bounds
            _check_bounds(bounds, start)
        return Prefix(header, layout, bounds, pos, pos)
    except DecodeError as exc:
        raise _tag(exc, path) from None


def load_snapshot(buf, prefix: Prefix, state: State, path: str = "",
                  limits: _limits.Limits = _limits.DEFAULT) -> int:
    """Decode the snapshot into ``state``; returns the offset of the WAL header."""
    layout = prefix.layout
    try:
        if layout.flags.compressed:  # a plain snapshot is bounded by the file itself
            _limits.check_snapshot_size(buf, prefix.snapshot_offset, limits)
        section, end = decode_snapshot_section(buf, prefix.snapshot_offset,
                                               **layout.snapshot_params())
        packed = state.codec.packed
        pack_meta = state.pack_meta
        entries = section.entries
        del section
        nodes = []
        for i, e in enumerate(entries):
            nodes.append(Node(e.key, bytes(e.data), pack_meta(e.meta), packed(e.tail)))
            entries[i] = None  # the decoded entry goes as its node arrives
        del entries
    except DecodeError as exc:
        raise _tag(exc, path) from None
    if layout.version == 1:
        try:
            _check_v1_snapshot(nodes, prefix.snapshot_offset)
        except DecodeError as exc:
            raise _tag(exc, path) from None
    if layout.flags.meaning_addressed:
        # v3 stores global-Hilbert order; full readers depth-sort before replay (§9).
        nodes.sort(key=lambda n: depth_of(n.key))
    for node in nodes:
        state.add_loaded(node)
    _release(buf, 0, end)
    prefix.wal_offset = end
    return end


_FLAGS_AT = _layout.field_offset("file_header", "flags")


def _check_flags_vs_version(header: FileHeader) -> None:
    """§2/§9: flag bit 6 (meaning-addressed) exists from v3, bit 7 (quantized) from v4,
    and v3 means meaning-addressed (v4 wins when both are set). The header CRC covers
    these bytes, so a mismatch is a writer's error, not damage."""
    v, flags = header.version, header.flags
    problem = None
    if flags.meaning_addressed and v < 3:
        problem = "flag bit 6 (meaning-addressed) needs version 3 or later"
    elif flags.quantized and v < 4:
        problem = "flag bit 7 (quantized tails) needs version 4"
    elif v == 3 and not flags.meaning_addressed:
        problem = "a version-3 header without flag bit 6 (meaning-addressed)"
    if problem:
        raise ConstraintError(problem, offset=_FLAGS_AT, path="file_header.flags",
                              expected=f"flags allowed in version {v}",
                              found=f"0x{flags.to_int():02x}")


def _check_bounds(bounds: list[BoundPair], start: int) -> None:
    """No checksum covers the bounds section (§1, §9): refuse pairs that cannot
    normalise anything (non-finite, or min >= max would divide by zero in v3 order)."""
    for i, b in enumerate(bounds):
        if not (math.isfinite(b.min) and math.isfinite(b.max) and b.min < b.max):
            raise ConstraintError(
                "bounds need finite min < max (no checksum covers this section)",
                offset=start + i * _layout.BOUND_PAIR_SIZE, path=f"bounds_section.bounds[{i}]",
                expected="finite min < max", found=(b.min, b.max))


def _check_v1_snapshot(nodes: list[Node], offset: int) -> None:
    """v1 snapshots carry no CRC (§3): run the rules the spec states for entries, so a
    flipped key byte is refused instead of loaded. Keys are ``/seg/...`` paths, the root
    is never an entry, no key repeats, and parents come before children."""
    seen: set[str] = set()
    for i, node in enumerate(nodes):
        key = node.key
        where = f"snapshot_section.entries[{i}].key"
        bad = (not key.startswith("/") or key == "/" or key.endswith("/") or "//" in key)
        if bad or key in seen:
            raise ConstraintError(
                "v1 snapshot entry key is not a new node path (no checksum covers v1 "
                "snapshots)", offset=offset, path=where, expected="'/seg/...' once",
                found=key)
        parent = key[:key.rfind("/")]
        if parent and parent not in seen:
            raise ConstraintError(
                "v1 snapshot entry before its parent (§3 parents-before-children)",
                offset=offset, path=where, expected=f"{parent!r} earlier", found=key)
        seen.add(key)


def scan_wal(buf, wal_offset: int, layout: FileLayout,
             on_entry: Callable[[WalEntry], None] | None, path: str = "", *,
             quiet: bool = False, limits: _limits.Limits = _limits.DEFAULT) -> WalScan:
    """Walk the WAL from its header, calling ``on_entry`` for each intact entry in
    order. Never raises for bad WAL bytes; the result says where and why it stopped
    and (``damage``) which valid-looking records follow. ``quiet``: no log line and no
    search past the damage (for callers that only want the intact prefix)."""
    size = len(buf)
    if size - wal_offset < WAL_HEADER_SIZE:
        scan = WalScan(wal_offset, 1, None, wal_offset, wal_offset, next_seq=1)
        if size > wal_offset:
            scan.problem, scan.problem_offset = "torn WAL header", wal_offset
        elif size == wal_offset:
            scan.problem, scan.problem_offset = "missing WAL header", wal_offset
        if scan.problem is not None:
            scan.damage = Damage(wal_offset, scan.problem)
        _report(scan, path)
        return scan
    hdr, pos = decode_wal_header(buf, wal_offset)
    scan = WalScan(wal_offset, hdr.wal_base_seq, hdr.wal_entry_count, pos, pos,
                   next_seq=hdr.wal_base_seq)
    expected = hdr.wal_base_seq
    cause = ""
    plain_from: int | None = None
    if not layout.block_compressed:
        params = layout.entry_params()
        try:
            if buf.__class__ is bytes:
                for entry, end in iter_wal_entry(buf, pos, **params):
                    if entry.seq != expected:
                        scan.problem = f"sequence break (expected {expected}, found {entry.seq})"
                        scan.problem_offset = scan.valid_end
                        cause = "sequence break"
                        break
                    if on_entry is not None:
                        on_entry(entry)
                    expected += 1
                    scan.valid_end = end
            else:
                expected, cause, failed = _scan_windows(buf, pos, params, expected, on_entry,
                                                        scan)
                if failed is not None:
                    raise failed
        except (DecodeError, ValueError) as exc:
            _refuse_unknown_op(exc, buf, scan.valid_end, path)
            scan.problem, scan.problem_offset = _describe(exc), scan.valid_end
            cause = cause_of(exc)
    else:
        params = layout.block_params() | {"block_limit": limits.max_block_bytes}
        released = pos
        while pos < size:
            try:
                block, end = decode_wal_block(buf, pos, **params)
            except (DecodeError, ValueError) as exc:
                if _over_limit(exc):
                    # not damage: a block bigger than this session allows. Cutting it
                    # would lose data, so the open fails and names the limit instead.
                    raise _tag(_limits.LimitExceeded(
                        "WAL block decompresses past the limit (limits.MAX_BLOCK_BYTES; "
                        "pass limits=Limits(max_block_bytes=...) to allow it)",
                        offset=pos, path="wal_block.entries",
                        expected=f"<= {limits.max_block_bytes}", found="more"), path) from None
                scan.problem, scan.problem_offset = _describe(exc), pos
                cause = cause_of(exc)
                expected, plain_from = _salvage(buf, pos, layout, expected, on_entry, scan, path)
                break
            seqs = [e.seq for e in block.entries]
            if seqs != list(range(expected, expected + len(seqs))):
                scan.problem = f"sequence break in block (expected {expected}, found {seqs[0]}..)"
                scan.problem_offset = pos
                cause = "sequence break"
                expected, plain_from = _salvage(buf, pos, layout, expected, on_entry, scan, path)
                break
            applied = 0
            try:
                if on_entry is not None:
                    for entry in block.entries:
                        on_entry(entry)
                        applied += 1
            except (DecodeError, ValueError) as exc:
                # the entries applied before the failing one are in memory: count them
                # and hand them to the writer to re-append (as for a block that fails to
                # decode), so memory after this open equals what a reopen gives
                scan.problem, scan.problem_offset = _describe(exc), pos
                cause = cause_of(exc)
                scan.salvaged.extend(block.entries[:applied])
                expected += applied
                plain_from = _plain_end_of(buf, pos, layout, applied)
                break
            expected += len(seqs)
            pos = scan.valid_end = end
            scan.blocks += 1
            if pos - released >= WINDOW:
                _release(buf, released, pos)
                released = pos
    scan.count = expected - hdr.wal_base_seq
    scan.next_seq = expected
    if quiet:
        return scan
    if scan.problem is not None:
        after, kept = scan_after(buf, scan.problem_offset, layout, block_plain_from=plain_from)
        scan.damage = Damage(scan.problem_offset, cause, kept, after, plain_from)
        scan.damage.suspect = suspect_header(scan.damage, scan.entries_offset)
    _report(scan, path)
    return scan


WINDOW = 1 << 18  # bytes of a mapped WAL copied and decoded at a time


_PROGRESS: contextvars.ContextVar[Callable[[int], None] | None] = contextvars.ContextVar(
    "htt_read_progress", default=None)


@contextlib.contextmanager
def reading_progress(report: Callable[[int], None]) -> Iterator[None]:
    """Within the block, ``report(offset)`` is called as a replay or survey walks past
    ``offset`` (once a window), so a caller can show how far it has read."""
    token = _PROGRESS.set(report)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def _release(buf, lo: int, hi: int) -> None:
    """Drop the pages of ``buf[lo:hi]`` from this process when ``buf`` is a mapped file
    (``MADV_DONTNEED``: the kernel re-reads them if touched again), so that a read-only
    replay holds the live state and a window, not the file."""
    report = _PROGRESS.get()
    if report is not None:
        report(hi)
    advise = getattr(buf, "madvise", None)
    if advise is None or not hasattr(mmap, "MADV_DONTNEED"):
        return
    lo -= lo % mmap.PAGESIZE
    hi -= hi % mmap.PAGESIZE
    if hi > lo:
        advise(mmap.MADV_DONTNEED, lo, hi - lo)


def _scan_windows(buf, pos: int, params: dict, expected: int,
                  on_entry: Callable[[WalEntry], None] | None,
                  scan: WalScan) -> tuple[int, str, Exception | None]:
    """The plain-WAL loop of ``scan_wal`` over a mapped file: each ``WINDOW``-sized
    ``bytes`` copy (the codec's fast case, as for a file read whole) has its whole
    records decoded in one loop and applied in one call (``_runner``), and its pages
    released behind it. The record a window's end cuts starts the next window. A record
    that does not decode in a window that holds it whole, or in the window that ends the
    file, is read again from the file itself (never from a larger copy), so its error's
    offset and ``wal_entry[i]`` index are the file's, exactly as without windows.
    Returns (next expected seq, cause, the error that ended the WAL or None)."""
    size = len(buf)
    start = pos  # file offset where the next undecoded entry begins
    done = 0  # entries decoded before ``start``, for the error path's index
    run = _runner(on_entry, params)
    while start < size:
        stop = min(size, start + WINDOW)
        chunk = buf[start:stop]
        applied, total, found, at, cut, exc = run(chunk, expected)
        expected += applied
        done += applied
        if applied < total or exc is not None:
            # a sequence break, or an entry that decoded but does not apply: the WAL
            # ends where that entry starts
            scan.valid_end = start + at
            if exc is not None:
                return expected, "", exc
            scan.problem = f"sequence break (expected {expected}, found {found})"
            scan.problem_offset = scan.valid_end
            return expected, "sequence break", None
        _release(buf, start, start + cut)
        start += cut
        scan.valid_end = start
        if cut == len(chunk):
            continue  # every record of the window was whole (at the file's end: done)
        if cut > 0 and stop < size:
            continue  # the window's end may have cut that record: the next window has it
        # the record at ``start`` does not decode in a window that holds all the file
        # has after it, or is longer than a window: read it from the file itself
        try:
            entry, end = next(iter_wal_entry(buf, start, **params))
        except DecodeError as again:
            if again.path.startswith("wal_entry[0]"):
                again.path = f"wal_entry[{done}]" + again.path[len("wal_entry[0]"):]
            return expected, "", again
        except ValueError as again:
            return expected, "", again
        if entry.seq != expected:
            scan.problem = f"sequence break (expected {expected}, found {entry.seq})"
            scan.problem_offset = start
            return expected, "sequence break", None
        if on_entry is not None:
            try:
                on_entry(entry)
            except (DecodeError, ValueError) as failed:
                return expected, "", failed
        expected += 1
        done += 1
        _release(buf, start, end)
        start = scan.valid_end = end
    return expected, "", None


# one window's run: (applied, decoded, the seq found where the run stopped early, where
# that entry starts in the window, where the whole records end, the apply error or None)
Run = Callable[[bytes, int], tuple[int, int, int | None, int, int, Exception | None]]


def _runner(on_entry: Callable[[WalEntry], None] | None, params: dict) -> Run:
    """A function that decodes one window's whole records and applies them in order
    while their seqs continue (see ``Run``). ``State.apply`` reads the window as rows
    (``decode_rows_wal_entry``) in the state's own loop (``State.apply_rows``: no entry
    object for a common INSERT), and so does ``Census.apply`` (``Census.apply_rows``, the
    counts ``htt info`` streams); any other callback gets the entries one by one."""
    owner = getattr(on_entry, "__self__", None)
    if isinstance(owner, (State, Census)) \
            and getattr(on_entry, "__func__", None) is type(owner).apply:
        apply_rows = owner.apply_rows

        def rows(chunk: bytes, expected: int):
            got, starts, cut = decode_rows_wal_entry(chunk, 0, len(chunk), **params)
            applied, exc = apply_rows(
                got, expected, lambda i: decode_wal_entry(chunk, starts[i], **params)[0])
            stopped = applied < len(got)
            return (applied, len(got), got[applied][0] if stopped else None,
                    starts[applied] if stopped else cut, cut, exc)
        return rows

    def run(chunk: bytes, expected: int):
        entries, cut = decode_prefix_wal_entry(chunk, 0, len(chunk), **params)
        n = 0
        exc = None
        try:
            for entry in entries:
                if entry.seq != expected + n:
                    break
                if on_entry is not None:
                    on_entry(entry)
                n += 1
        except (DecodeError, ValueError) as failed:
            exc = failed
        stopped = n < len(entries)
        return (n, len(entries), entries[n].seq if stopped else None,
                _end_of(chunk, n, params) if stopped else cut, cut, exc)
    return run


def _end_of(chunk: bytes, count: int, params: dict) -> int:
    """Where the first ``count`` records of ``chunk`` end."""
    ends = [stop for _, stop in itertools.islice(iter_wal_entry(chunk, 0, **params), count)]
    return ends[-1] if ends else 0


@contextlib.contextmanager
def bulk_load():
    """Pause the cyclic garbage collector while a file is loaded.

    Loading creates one small acyclic object graph per node; with the collector on, every
    generation-2 pass re-traverses the whole growing tree (measured: ~40% of a 300k-node
    replay). Reference counting still frees everything; the collector resumes after.

    On the way out, what was loaded goes straight to the oldest generation (``freeze``
    then ``unfreeze``: two list splices, nothing traversed) instead of being walked by a
    young collection right after (measured: ~5% of an open, ~0.7 s at 1M entries), then
    by the middle one. Nothing stays frozen: a full collection sees every object as
    before, so cyclic garbage is still collected, at the next full pass. Skipped when
    the program froze objects itself (``unfreeze`` would undo that).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _salvage(buf, pos: int, layout: FileLayout, expected: int,
             on_entry: Callable[[WalEntry], None] | None,
             scan: WalScan, path: str = "") -> tuple[int, int | None]:
    """Keep the intact, in-sequence entries at the start of a block that failed whole.
    Returns the next expected seq and where the kept entries end in the block's
    decompressed bytes (None: the frame itself does not decompress)."""
    try:
        raw, _ = decode_wal_block_plain(buf, pos, algorithm=layout.flags.algorithm)
    except (DecodeError, ValueError):
        return expected, None  # the frame itself is torn: nothing inside can be trusted
    kept_end = 0
    try:
        for entry, end in iter_wal_entry(raw.plain, **layout.entry_params()):
            if entry.seq != expected or len(scan.salvaged) >= raw.block_entry_count:
                break
            if on_entry is not None:
                on_entry(entry)
            scan.salvaged.append(entry)
            expected += 1
            kept_end = end
    except (DecodeError, ValueError) as exc:
        if _unknown_op_end(exc, raw.plain, kept_end) is not None:
            raise _tag(UnsupportedError(
                "WAL entry with an unknown op and a valid CRC inside a block (§4: reserved "
                "op codes are an error, not a torn tail; written by a newer writer?)",
                offset=pos, path="wal_block.entries"), path) from None
    return expected, kept_end


def _plain_end_of(buf, pos: int, layout: FileLayout, count: int) -> int | None:
    """Where the first ``count`` entries end in the decompressed block at ``pos``."""
    if count == 0:
        return 0
    try:
        raw, _ = decode_wal_block_plain(buf, pos, algorithm=layout.flags.algorithm)
        ends = iter_wal_entry(raw.plain, **layout.entry_params())
        return [stop for _, stop in itertools.islice(ends, count)][-1]
    except (DecodeError, ValueError, IndexError):
        return None


def _unknown_op_end(exc: Exception, buf, start: int) -> int | None:
    """If ``exc`` is the decoder refusing the op byte of the entry at ``start``, the end
    of that entry when some body length makes its CRC match (a well-formed entry with an
    op this reader does not know), else None. Searches ``limits.UNKNOWN_OP_SCAN`` bytes."""
    if not (isinstance(exc, ConstraintError) and exc.path.endswith("op")
            and exc.offset == start + _OP_AT):
        return None
    mv = memoryview(buf)
    p = start + _KEY_AT + _KEY_LEN_SIZE
    crc = zlib.crc32(mv[start:p])
    stop = min(len(buf) - 4, p + _limits.UNKNOWN_OP_SCAN)
    while p <= stop:
        if int.from_bytes(mv[p:p + 4], "little") == crc:
            return p + 4
        crc = zlib.crc32(mv[p:p + 1], crc)
        p += 1
    return None


def _refuse_unknown_op(exc: Exception, buf, start: int, path: str) -> None:
    end = _unknown_op_end(exc, buf, start)
    if end is not None:
        raise _tag(UnsupportedError(
            "WAL entry with an unknown op and a valid CRC (§4: reserved op codes are an "
            "error, not a torn tail; written by a newer writer?)", offset=start + _OP_AT,
            path="wal_entry.op", expected=exc.expected, found=exc.found), path) from None


def _over_limit(exc: Exception) -> bool:
    """A decompression that stopped at the caller's cap (runtime/compression.py words
    it "output exceeds the limit"); every other failure is damage."""
    return isinstance(exc, DecodeError) and "exceeds the limit" in exc.message


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


def _report(scan: WalScan, path: str) -> None:
    if scan.problem is not None:
        damage = scan.damage
        follow = damage.records_after if damage is not None else 0
        log.warning("%s: WAL truncated at offset %s after %d intact entries: %s (%s); "
                    "%d valid-looking record(s) follow the damage",
                    path or "<buffer>", scan.problem_offset, scan.count,
                    damage.reason if damage is not None else "damage", scan.problem, follow)
    elif scan.header_count is not None and scan.header_count != scan.count:
        log.info("%s: advisory wal_entry_count %d, found %d entries",
                 path or "<buffer>", scan.header_count, scan.count)


def load(buf, state: State, path: str = "") -> tuple[Prefix, WalScan]:
    """Full cold start into ``state``: strict prefix, recovered WAL."""
    prefix = read_prefix(buf, path)
    load_snapshot(buf, prefix, state, path)
    scan = scan_wal(buf, prefix.wal_offset, prefix.layout, state.apply, path)
    return prefix, scan


def committed_entries(buf, wal_offset: int, layout: FileLayout) -> list[WalEntry]:
    """The intact WAL entries, in order (for replication and history archiving)."""
    out: list[WalEntry] = []
    scan_wal(buf, wal_offset, layout, out.append, quiet=True)
    return out

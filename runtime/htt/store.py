"""The HTT store API: create/open a ``.htt`` file, mutate it through the WAL, read it,
compact it. Layouts come from the generated codecs only; the semantics live in the
sibling modules (``state``: what ops do, ``replay``: recovery, ``wal_writer``: appends,
``compaction``/``ordering``: snapshots, ``quantized``/``gacl``: tails and access,
``history``: sidecars, ``locking``/``durability``: the file discipline).
"""

from __future__ import annotations

import errno
import functools
import logging
import mmap
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from ...generated.htt import (
    BoundPair,
    BoundsSection,
    CompressionAlgorithm,
    EpochBody,
    EpochFlags,
    FileHeader,
    HeaderFlags,
    InsertBody,
    MetaPair,
    SetSemanticBody,
    SnapshotSection,
    UpdateBody,
    WalEntry,
    WalHeader,
    WalOp,
    encode_bounds_section,
    encode_file_header,
    encode_snapshot_section,
    encode_wal_header,
)
from ..cut import cut
from ..fixedpoint import q64_from_float, q64_to_float
from . import compaction, gacl, recovery, replay, sidecars
from .describe import describe
from .durability import Durability, fsync_dir, write_all
from .errors import (
    AccessDenied,
    InvalidKeyError,
    KeyExistsError,
    KeyMissingError,
    Poisoned,
    ReadOnlyError,
    ReservedKeyError,
    SemanticError,
    SnapshotRequired,
    StoreError,
    TooLarge,
    WalDamaged,
)
from .layout import USER_DIM_START, FileLayout, version_for
from .limits import MAX_KEY_BYTES, Limits
from .locking import lock_shared, open_locked, read_all, unlock
from .quantized import TailCodec, raw_from_floats
from .state import (
    CHILD_INDEX,
    CONTENT_TYPE,
    DIRECTORY_TYPE,
    ROOT,
    State,
    ancestors_of,
    directory_meta,
    parent_of,
    sort_meta,
)
from .wal_writer import WalWriter

log = logging.getLogger("bytewright.htt")

DEFAULT_BOUNDS = (0.0, 1.0)
_ALGORITHMS = {"zstd": CompressionAlgorithm.zstd, "zlib": CompressionAlgorithm.zlib,
               "lz4": CompressionAlgorithm.lz4}


def _serialized(method):
    """Run a method holding the session's mutex: the background auto-compaction (§6)
    swaps the file, the writer and the sequence counter, so nothing that reads or moves
    them may interleave with it."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with self._mutex:
            return method(self, *args, **kwargs)
    return run


@dataclass(frozen=True)
class NodeView:
    """What readers see of a node: reserved ``_`` keys are hidden from ``meta``."""

    key: str
    data: bytes
    meta: dict[str, str]
    semantic_raw: tuple[int, ...] | None  # full-width Q64.64 raw values; None = not set

    @property
    def semantic(self) -> tuple[float, ...] | None:
        return None if self.semantic_raw is None else tuple(
            q64_to_float(v) for v in self.semantic_raw)

    @property
    def is_directory(self) -> bool:
        return self.meta.get(CONTENT_TYPE) == DIRECTORY_TYPE


def validate_key(key: str) -> str:
    if not isinstance(key, str) or not key.startswith("/") or key == ROOT:
        raise InvalidKeyError(f"node keys are paths like '/a/b', got {key!r}")
    if key.endswith("/") or "//" in key:
        raise InvalidKeyError(f"empty path segment in {key!r}")
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        raise InvalidKeyError(f"key longer than {MAX_KEY_BYTES} UTF-8 bytes")
    return key


def _map_readonly(fd: int) -> mmap.mmap | None:
    """A read-only mapping of the whole file, or None (empty file, or no mmap here)."""
    try:
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except (ValueError, OSError):
        return None


def _unmap(mapped: mmap.mmap) -> None:
    try:
        mapped.close()
    except BufferError:
        # a decode error's traceback still holds a view of it: the mapping goes when
        # that does (nothing the state holds refers to the mapping: values are copies)
        pass


def _user_meta(meta: Mapping[str, str] | None) -> list[MetaPair]:
    pairs = []
    for k, v in (meta or {}).items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise StoreError(f"metadata keys and values are strings, got {k!r}: {v!r}")
        if k.startswith("_"):
            raise ReservedKeyError(f"metadata key {k!r}: keys starting with '_' are "
                                   f"reserved for the format (HTT §3)")
        pairs.append(MetaPair(k, v))
    return pairs


def _as_bytes(data, limit: int) -> bytes:
    out = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if len(out) > limit:
        raise TooLarge(f"node data of {len(out)} bytes is over the limit of {limit} "
                       f"(limits.MAX_ENTRY_DATA; pass limits=Limits(max_entry_data=...))")
    return out


class Store:
    """One open ``.htt`` file: a writer session (``LOCK_EX`` held) or a read-only view."""

    def __init__(self, path: str, buf: bytes, *, fd: int | None, readonly: bool,
                 durability: Durability, gacl_fail_closed: bool,
                 history_retention: str | None,
                 semantic_bounds: tuple[float, float] | None,
                 recovery_mode: str = recovery.POINT_IN_TIME,
                 discard_after: int | None = None, limits: Limits | None = None,
                 auto_compact_threshold: int = 0) -> None:
        if recovery_mode not in recovery.MODES:
            raise ValueError(f"recovery must be one of {recovery.MODES}, got {recovery_mode!r}")
        self.path = path
        self.limits = limits or Limits()
        self.readonly = readonly
        self.fd = fd
        self.durability = durability
        self.fail_closed = gacl_fail_closed
        if history_retention not in (None, sidecars.ARCHIVE):
            raise ValueError(f"history_retention must be None or 'archive', "
                             f"got {history_retention!r}")
        self.retention = history_retention
        self.credentials: gacl.Credentials | None = None
        prefix = replay.read_prefix(buf, path)
        self.header = prefix.header
        self.layout = prefix.layout
        self.codec = TailCodec(self.header.semantic_dims, self.layout.tail_layout)
        self.state = State(self.codec)
        with replay.bulk_load():
            replay.load_snapshot(buf, prefix, self.state, path, self.limits)
            self.scan = replay.scan_wal(buf, prefix.wal_offset, self.layout,
                                        self.state.apply, path, limits=self.limits)
        if prefix.bounds is not None:
            self.bounds = [(b.min, b.max) for b in prefix.bounds]
        else:
            self.bounds = [semantic_bounds or DEFAULT_BOUNDS] * self.layout.user_dims
        self.next_seq = self.scan.next_seq
        self.writer: WalWriter | None = None
        self.closed = False
        # the cut a writer open made (a torn tail included): its side file, offset, size
        self.discarded: dict | None = None
        self.auto_compact_threshold = auto_compact_threshold
        if auto_compact_threshold < 0:
            raise ValueError("auto_compact_threshold must be >= 0 (0 disables)")
        self._subscribers: list[WalSubscription] = []
        self._undelivered: list[WalEntry] = []  # committed, not yet fsynced
        self._mutex = threading.RLock()
        self._compactor: threading.Thread | None = None
        # outcome of the background auto-compactions (info()["auto_compaction"])
        self._auto: dict = {"runs": 0, "failures": 0, "error": None, "last": None}
        self._auto_wait_until = 0  # after a failure: WAL length of the next attempt
        self._check_recovery(recovery_mode, discard_after)
        if not readonly:
            self._repair_tail(buf)

    def _check_recovery(self, mode: str, discard_after: int | None) -> None:
        """Refuse (before anything is written) what the recovery mode does not allow."""
        damage = self.scan.damage
        if damage is None:
            return
        how = (f"`bytewright htt salvage {self.path} --into DEST` copies every record that "
               f"still verifies into a new file; `--discard-after {damage.offset}` cuts "
               f"them (the cut bytes are kept in "
               f"{recovery.discarded_path(self.path, damage.offset)})")
        if damage.records_after and discard_after is not None \
                and discard_after != damage.offset:
            raise WalDamaged(
                f"{self.path}: WAL damaged at offset {damage.offset} ({damage.reason}), not "
                f"at {discard_after}; {damage.records_after} valid-looking record(s) follow "
                f"it; nothing changed", path=self.path, offset=damage.offset,
                reason=damage.reason, records_after=damage.records_after)
        if damage.suspect and not self.readonly and discard_after is None:
            # §6 recovers a crash's partial write; no partial write makes the first entry
            # break the sequence while it and every record after it verify and run on:
            # a damaged header field does, and cutting there would cut the whole WAL
            first = damage.survivors[0].entry.seq
            exc = WalDamaged(
                f"{self.path}: the first WAL entry (offset {damage.offset}) carries seq "
                f"{first} but {damage.suspect} says {self.scan.base_seq}; it and "
                f"{damage.records_after - 1} record(s) after it verify and run on from "
                f"{first}, so the damage is likely that header field (no checksum covers "
                f"it); refusing to cut the whole WAL: {how}", path=self.path,
                offset=damage.offset, reason=damage.reason,
                records_after=damage.records_after)
            exc.field = damage.suspect
            raise exc
        if mode == recovery.ABSOLUTE_CONSISTENCY or (
                mode == recovery.TOLERATE_CORRUPTED_TAIL and damage.records_after
                and discard_after is None):
            raise WalDamaged(
                f"{self.path}: WAL damaged at offset {damage.offset} ({damage.reason}); "
                f"{damage.records_after} valid-looking record(s) follow it; refusing to cut "
                f"them: {how}", path=self.path, offset=damage.offset,
                reason=damage.reason, records_after=damage.records_after)

    def _repair_tail(self, buf: bytes) -> None:
        """Cut a torn/damaged tail off before appending, and restore a torn header. Every
        cut byte goes to a side file (``FILE.discarded-OFFSET``, fsynced) first
        (``runtime.cut``), torn tails too. The intact entries of a damaged block are
        appended again as a fresh block (§5: the written block is never rewritten);
        they are made durable in ``FILE.reappend-OFFSET`` before the cut, and a writer
        open after a crash in between appends them from there."""
        scan = self.scan
        damage = scan.damage
        again = list(scan.salvaged)  # applied while scanning, counted in scan.count
        intents: list[str] = []
        cutting = scan.header_count is None or scan.valid_end < len(buf)
        if again and cutting:
            intents.append(recovery.keep_reappend(self.path, buf, scan.wal_offset,
                                                  scan.valid_end, again, self.layout))
        if cutting:
            reason = damage.reason if damage is not None else "bytes past the WAL"
            after = damage.records_after if damage is not None else 0
            done = cut(self.path, self.fd, scan.valid_end, reason=reason, data=buf)
            if done.side is not None:
                self.discarded = {"path": done.side, "offset": done.offset,
                                  "bytes": done.length, "reason": reason,
                                  "records_after": after}
                log.warning("%s: WAL damaged at offset %d (%s) with %d valid-looking "
                            "record(s) after it; cut %d byte(s), kept in %s", self.path,
                            done.offset, reason, after, done.length, done.side)
            if scan.header_count is None:
                write_all(self.fd, encode_wal_header(WalHeader(0, scan.base_seq)),
                          scan.wal_offset)
                scan.valid_end = scan.entries_offset = scan.wal_offset + replay.WAL_HEADER_SIZE
                os.fsync(self.fd)
        on_disk = scan.count - len(again)
        self.writer = WalWriter(self.fd, self.layout, scan.wal_offset, scan.valid_end,
                                scan.base_seq, on_disk, self.durability, self.path)
        if not again and self.layout.block_compressed:
            again, intents = recovery.reappends(
                self.path, buf, scan.wal_offset, scan.valid_end, scan.next_seq, self.layout,
                self.limits.max_block_bytes, self.state.apply)
            if again:
                scan.count += len(again)
                scan.next_seq = self.next_seq = scan.next_seq + len(again)
                log.warning("%s: %d intact WAL entr(y/ies) of a damaged block, kept aside "
                            "by a repair a crash interrupted, appended at offset %d",
                            self.path, len(again), scan.valid_end)
        if again:
            # intact entries of a damaged block: written back as one fresh block
            self.writer.pending = [(e, b"") for e in again]
            self.writer.write(fsync=True)
            scan.valid_end = self.writer.end
            scan.salvaged = []
        elif scan.header_count not in (None, scan.count):
            self.writer.count = scan.count
            write_all(self.fd, encode_wal_header(WalHeader(scan.count, scan.base_seq)),
                      scan.wal_offset)
        recovery.forget(intents)  # their entries are in the file, fsynced
        self.writer.synced_end = scan.next_seq

    # -- lifecycle ---------------------------------------------------------------------

    @classmethod
    def create(cls, path: str, *, dimension: int = 4, semantic_dims: int = 0,
               tau: float = 1.0, compression: str | bool | None = None,
               quantized: bool = False, gacl: bool = False, meaning_addressed: bool = False,
               semantic_bounds: tuple[float, float] = DEFAULT_BOUNDS,
               durability: str = "per_op", batch_size: int = 64,
               history_retention: str | None = None, gacl_fail_closed: bool = False,
               overwrite: bool = False, limits: Limits | None = None,
               auto_compact_threshold: int = 0) -> Store:
        """Create a new file (§6 Create) and return a writer session on it."""
        if compression is True:
            compression = "zstd"
        if compression not in (None, False, *_ALGORITHMS):
            raise ValueError(f"compression must be None or one of {sorted(_ALGORITHMS)}")
        if not 0 <= semantic_dims <= 255 or not 0 <= dimension <= 255:
            raise ValueError("dimension and semantic_dims are u8")
        if quantized and semantic_dims <= USER_DIM_START:
            raise ValueError("quantized tails need semantic_dims > 16 (§7.3)")
        if meaning_addressed and semantic_dims <= USER_DIM_START:
            raise ValueError("meaning-addressed files need user dims (semantic_dims > 16)")
        if meaning_addressed and compression:
            raise ValueError("meaning-addressed files need an uncompressed snapshot (§9)")
        if gacl and semantic_dims < gacl_band_dims():
            raise ValueError("GACL needs semantic_dims >= 12 (bands in dims 0-11)")
        lo, hi = semantic_bounds
        if not lo < hi:
            raise ValueError(f"semantic_bounds need lo < hi, got {semantic_bounds}")
        comp = bool(compression)
        flags = HeaderFlags(comp, _ALGORITHMS[compression] if comp else CompressionAlgorithm.zstd,
                            semantic_dims > 0, comp, gacl, meaning_addressed, quantized)
        header = FileHeader(version_for(flags), flags, dimension, semantic_dims,
                            q64_from_float(tau), 0)
        layout = FileLayout.of(header)
        data = bytearray(encode_file_header(header))
        if meaning_addressed:
            data += encode_bounds_section(
                BoundsSection([BoundPair(float(lo), float(hi))] * layout.user_dims),
                semantic_dims=semantic_dims)
        data += encode_snapshot_section(SnapshotSection([]), **layout.snapshot_params())
        data += encode_wal_header(WalHeader(0, 1))

        def open_fd() -> int:
            try:
                return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                if not overwrite:
                    raise
                return os.open(path, os.O_RDWR)

        fd = open_locked(path, open_fd)
        try:
            if os.fstat(fd).st_size:
                # overwrite=True replaces a file: its bytes are kept (FILE.discarded-0)
                kept = cut(path, fd, 0, reason="replaced by create(overwrite=True)")
                log.warning("%s: replaced a file of %d byte(s); they are kept in %s",
                            path, kept.length, kept.side)
            write_all(fd, bytes(data), 0)
            os.fsync(fd)
            fsync_dir(path)
            return cls(path, bytes(data), fd=fd, readonly=False,
                       durability=Durability(durability, batch_size),
                       gacl_fail_closed=gacl_fail_closed,
                       history_retention=history_retention, semantic_bounds=semantic_bounds,
                       limits=limits, auto_compact_threshold=auto_compact_threshold)
        except BaseException:
            os.close(fd)
            raise

    @classmethod
    def open(cls, path: str, *, readonly: bool = False, durability: str = "per_op",
             batch_size: int = 64, gacl_fail_closed: bool = False,
             history_retention: str | None = None,
             semantic_bounds: tuple[float, float] | None = None,
             lock_wait: bool = False, recovery: str = "point_in_time",
             discard_after: int | None = None, limits: Limits | None = None,
             auto_compact_threshold: int = 0) -> Store:
        """Open an existing file. Writers take ``LOCK_EX`` (failing fast with
        ``StoreLocked``); readers take ``LOCK_SH`` while loading, or read lock-free if a
        writer is active and ``lock_wait`` is false (CRC recovery covers torn tails).

        ``recovery`` (docs/recovery.md): ``point_in_time`` (the spec's automatic rule: a
        writer cuts at the first damage, keeping every cut byte, a torn tail's too, in
        ``FILE.discarded-OFFSET``),
        ``tolerate_corrupted_tail`` (cut a torn tail only; ``WalDamaged`` when valid
        records follow the damage, unless ``discard_after`` repeats the damage offset)
        or ``absolute_consistency`` (``WalDamaged`` on any damage)."""
        path = os.fspath(path)
        dur = Durability(durability, batch_size)
        rec = {"recovery_mode": recovery, "discard_after": discard_after, "limits": limits,
               "auto_compact_threshold": auto_compact_threshold}
        if readonly:
            fd = os.open(path, os.O_RDONLY)
            mapped = None
            try:
                locked = lock_shared(fd, path, wait=lock_wait)
                if locked:
                    # mapped and replayed under the lock (no writer can truncate the file
                    # under the mapping); the replay releases pages behind it, so memory
                    # holds the live state, not the file
                    mapped = _map_readonly(fd)
                else:
                    log.info("%s: a writer is active; reading without a lock", path)
                buf = read_all(fd) if mapped is None else mapped
                if mapped is None:
                    unlock(fd)
                return cls(path, buf, fd=None, readonly=True, durability=dur,
                           gacl_fail_closed=gacl_fail_closed,
                           history_retention=history_retention,
                           semantic_bounds=semantic_bounds, **rec)
            finally:
                if mapped is not None:
                    _unmap(mapped)
                unlock(fd)
                os.close(fd)
        fd = open_locked(path, lambda: os.open(path, os.O_RDWR))
        try:
            buf = read_all(fd)
            return cls(path, buf, fd=fd, readonly=False, durability=dur,
                       gacl_fail_closed=gacl_fail_closed, history_retention=history_retention,
                       semantic_bounds=semantic_bounds, **rec)
        except BaseException:
            os.close(fd)
            raise

    @_serialized
    def flush(self) -> None:
        """Write every pending entry and fsync (the durability point of every policy):
        when it returns, every entry committed so far is acknowledged. A failed write or
        fsync raises ``Poisoned`` and the session writes nothing more."""
        if self.writer is not None:
            self.writer.check()
        if self.writer is not None and not self.closed:
            self.writer.write(fsync=True)
            self.writer.synced_end = self.next_seq
            self._deliver()

    sync = flush

    def close(self) -> None:
        """Flush and release the file; a background auto-compaction is waited for first,
        so the session never ends halfway through swapping the file. A poisoned session
        (a write or fsync failed) only releases the file: nothing more is written, and
        reopening recovers the durable state. Raises ``Poisoned`` if the final flush
        fails (the file is released all the same)."""
        if self.closed:
            return
        self.wait_for_compaction()
        with self._mutex:
            if self.closed:
                return
            try:
                if self.writer is None or self.writer.poisoned is None:
                    self.flush()
            finally:
                self.closed = True
                if self.fd is not None:
                    unlock(self.fd)
                    os.close(self.fd)
                    self.fd = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- GACL --------------------------------------------------------------------------

    def set_credentials(self, credentials: gacl.Credentials | Mapping[str, float] | None = None,
                        **positions: float) -> None:
        """Scope subsequent reads, writes and listings to these credentials (§7.2)."""
        if isinstance(credentials, gacl.Credentials):
            self.credentials = credentials
        else:
            self.credentials = gacl.Credentials(credentials, **positions)

    def clear_credentials(self) -> None:
        self.credentials = None

    def _allowed(self, tail: list[int] | None, action: str) -> bool:
        if not self.layout.flags.gacl:
            return True
        if self.credentials is None:
            return not self.fail_closed
        return gacl.allowed(tail, self.credentials, action)

    def _readable(self, node) -> bool:
        """``_allowed(node.tail, "read")`` without unpacking the placement when no GACL
        applies (listings touch every node)."""
        return not self.layout.flags.gacl or self._allowed(node.tail, "read")

    def _check(self, key: str, action: str) -> None:
        node = self.state.nodes.get(key)
        if not self._allowed(None if node is None else node.tail, action):
            raise AccessDenied(f"{self.path}: {action} access to {key!r} denied by GACL")

    # -- writing -----------------------------------------------------------------------

    def _writable(self) -> WalWriter:
        if self.writer is not None:
            self.writer.check()  # a poisoned session refuses first, closed or not
        if self.closed:
            raise StoreError(f"{self.path}: store is closed")
        if self.readonly or self.writer is None:
            raise ReadOnlyError(f"{self.path}: opened read-only")
        return self.writer

    def _entry(self, offset: int, op: WalOp, key: str, body) -> WalEntry:
        return WalEntry(self.next_seq + offset, op, key, body)

    def _commit(self, entries: list[WalEntry]) -> None:
        """Log ``entries`` and apply them. The memory changes only after ``add`` has
        written them (when the policy writes now): a failed write leaves the state and
        the sequence counter as they were, and poisons the session."""
        writer = self._writable()
        encoded = writer.stage(entries)  # a bad value fails here, before any change
        writer.add(entries, encoded)
        try:
            for e in entries:
                self.state.apply(e)
        except BaseException as exc:
            # logged (or queued) but not in memory: the session no longer matches its file
            raise writer.poison(exc) from exc
        self.next_seq += len(entries)
        if self._subscribers:
            self._undelivered.extend(entries)
        if not writer.pending and not writer.dirty:
            writer.synced_end = self.next_seq
            self._deliver()
        threshold = self.auto_compact_threshold
        if threshold and self.next_seq - writer.base_seq >= max(threshold,
                                                                self._auto_wait_until):
            # §6: "WAL entry count >= auto_compact_threshold ... runs on a background
            # thread off the writer": the entries are committed; how the compaction
            # goes is no concern of this call
            self._start_auto_compaction()

    def _start_auto_compaction(self) -> None:
        running = self._compactor
        if running is not None and running.is_alive():
            return  # it re-reads the WAL length once it holds the mutex
        # not a daemon: an interpreter exiting without close() lets it finish the swap
        self._compactor = threading.Thread(target=self._auto_compact,
                                           name=f"htt-compact {self.path}")
        self._compactor.start()

    def _auto_compact(self) -> None:
        with self._mutex:
            writer = self.writer
            if self.closed or writer is None or writer.poisoned is not None \
                    or self.next_seq - writer.base_seq < max(
                    self.auto_compact_threshold, self._auto_wait_until):
                return  # compacted (or closed) since it was asked for
            try:
                result = self.compact()
            except Exception as exc:  # reported in info(), never to the writer's caller
                wal = self.next_seq - self.writer.base_seq
                # the next attempt once the WAL has grown by another threshold
                self._auto_wait_until = wal + self.auto_compact_threshold
                self._auto["failures"] += 1
                self._auto["error"] = {"type": type(exc).__name__, "message": str(exc),
                                       "errno": getattr(exc, "errno", None),
                                       "wal_entries": wal}
                log.error("%s: background compaction failed (%s); the file is unchanged "
                          "and every committed entry is in its WAL", self.path, exc)
            else:
                self._auto_wait_until = 0
                self._auto["runs"] += 1
                self._auto["error"] = None
                self._auto["last"] = result

    def wait_for_compaction(self, timeout: float | None = None) -> dict:
        """Wait for a running background auto-compaction; returns
        ``info()["auto_compaction"]``."""
        running = self._compactor
        if running is not None and running is not threading.current_thread():
            running.join(timeout)
        return self._auto_info()

    def _auto_info(self) -> dict:
        running = self._compactor
        return {"threshold": self.auto_compact_threshold,
                "running": running is not None and running.is_alive()} | self._auto

    # -- subscription (§8) --------------------------------------------------------------

    @_serialized
    def subscribe_wal(self, callback: Callable[[WalEntry], None]) -> WalSubscription:
        """Deliver every entry committed from now on to ``callback``, in sequence order,
        once it is fsynced (§8). ``subscription.from_seq`` is the first seq delivered:
        ``wal_entries_since(x)`` returns exactly the entries before it, so a replica
        catches up and then tails without a gap or a repeat."""
        writer = self._writable()
        sub = WalSubscription(self, callback, writer.synced_end)
        if not self._subscribers:
            self._undelivered = [e for e in self._pending_entries() if e.seq >= sub.from_seq]
        self._subscribers.append(sub)
        return sub

    def _pending_entries(self) -> list[WalEntry]:
        """Committed entries not fsynced yet (written or still buffered)."""
        writer = self.writer
        if writer is None:
            return []
        buffered = [e for e, _ in writer.pending]
        if writer.synced_end >= self.next_seq - len(buffered):
            return buffered
        on_disk = [e for e in self.committed_entries() if e.seq >= writer.synced_end]
        return on_disk + buffered

    def _deliver(self) -> None:
        if not self._subscribers or self.writer is None:
            return
        limit = self.writer.synced_end
        ready = [e for e in self._undelivered if e.seq < limit]
        self._undelivered = [e for e in self._undelivered if e.seq >= limit]
        for e in ready:
            for sub in list(self._subscribers):
                if e.seq >= sub.from_seq:
                    try:
                        sub.callback(e)
                    except Exception:  # a subscriber's bug must not break the writer
                        log.exception("%s: WAL subscriber failed on seq %d", self.path, e.seq)

    def _tail(self, semantic: Sequence[float] | None, raw: Sequence[int] | None):
        if raw is None and semantic is None:
            return self.codec.zero()
        if self.header.semantic_dims == 0:
            raise SemanticError(f"{self.path} has no semantic dimensions")
        values = list(raw) if raw is not None else raw_from_floats(semantic)
        if not any(values):
            raise SemanticError("an explicit all-zero placement is not representable: the "
                                "zero tail means 'not set' (§7); pass None to clear")
        tail = self.codec.to_disk(values)
        if self.codec.from_disk(tail) is None:
            # canonicalisation (§7.3: store decode(encode(v))) would turn it into "not set"
            raise SemanticError("this placement quantizes to all zeros, which means 'not "
                                "set' (§7, §7.3); pass None to clear or use larger values")
        return tail

    @_serialized
    def put(self, key: str, data=b"", meta: Mapping[str, str] | None = None,
            semantic: Sequence[float] | None = None, *,
            semantic_raw: Sequence[int] | None = None) -> None:
        """INSERT ``key``; missing ancestors are logged first as directory INSERTs."""
        self._writable()
        validate_key(key)
        nodes = self.state.nodes
        if key in nodes:
            raise KeyExistsError(f"{key!r} already exists")
        parent = parent_of(key)
        if parent != ROOT and parent in nodes:
            self._check(parent, "write")
        elif self.layout.flags.gacl and self.credentials is None and self.fail_closed:
            raise AccessDenied(f"{self.path}: write denied (fail-closed, no credentials)")
        user = _user_meta(meta)
        tail = self._tail(semantic, semantic_raw)
        counters: dict[str, int] = {}
        entries = []
        for anc in ancestors_of(key):
            if anc in nodes:
                continue
            p = parent_of(anc)
            idx = counters.get(p, self.state.next_child_index(p))
            counters[p] = idx + 1
            entries.append(self._entry(len(entries), WalOp.INSERT, anc,
                                       InsertBody(b"", directory_meta(idx), self.codec.zero())))
        idx = counters.get(parent, self.state.next_child_index(parent))
        pairs = sort_meta(user + [MetaPair(CHILD_INDEX, str(idx))])
        payload = _as_bytes(data, self.limits.max_entry_data)
        entries.append(self._entry(len(entries), WalOp.INSERT, key,
                                   InsertBody(payload, pairs, tail)))
        self._commit(entries)

    def _existing(self, key: str, action: str = "write"):
        node = self.state.nodes.get(key)
        if node is None:
            raise KeyMissingError(f"{key!r} does not exist")
        self._check(key, action)
        return node

    @_serialized
    def update(self, key: str, data, meta: Mapping[str, str] | None = None) -> None:
        """UPDATE: replace data and user metadata (``meta=None`` keeps the user
        metadata); reserved ``_`` pairs are carried over byte for byte."""
        self._writable()
        node = self._existing(key)
        reserved = [p for p in node.meta if p.key.startswith("_")]
        if meta is None:
            pairs = list(node.meta)
        else:
            pairs = sort_meta(_user_meta(meta) + reserved)
        payload = _as_bytes(data, self.limits.max_entry_data)
        self._commit([self._entry(0, WalOp.UPDATE, key, UpdateBody(payload, pairs))])

    @_serialized
    def delete(self, key: str) -> None:
        """DELETE ``key`` and its subtree (one explicit DELETE per node, children
        first, so any replay model converges)."""
        self._writable()
        self._existing(key)
        doomed = list(reversed(self.state.descendants(key))) + [key]
        self._commit([self._entry(i, WalOp.DELETE, k, None) for i, k in enumerate(doomed)])

    @_serialized
    def set_meta(self, key: str, name: str, value: str) -> None:
        self._writable()
        (pair,) = _user_meta({name: value})
        self._existing(key)
        self._commit([self._entry(0, WalOp.SET_META, key, pair)])

    @_serialized
    def set_semantic(self, key: str, semantic: Sequence[float] | None = None, *,
                     semantic_raw: Sequence[int] | None = None) -> None:
        """SET_SEMANTIC; ``None`` clears the placement (the all-zero tail, §7)."""
        self._writable()
        self._existing(key)
        if self.header.semantic_dims == 0:
            raise SemanticError(f"{self.path} has no semantic dimensions")
        tail = self._tail(semantic, semantic_raw)
        self._commit([self._entry(0, WalOp.SET_SEMANTIC, key, SetSemanticBody(tail))])

    @_serialized
    def seal_epoch(self, *, speculative: bool = False) -> int:
        """Append an EPOCH marker; returns the new epoch id (1-based)."""
        self._writable()
        epoch = self.state.epoch + 1
        self._commit([self._entry(0, WalOp.EPOCH, "",
                                  EpochBody(epoch, EpochFlags(speculative, False)))])
        return epoch

    @_serialized
    def replicate(self, entries: Sequence[WalEntry]) -> None:
        """Apply entries shipped from a primary (§8), keeping their sequence numbers."""
        if not entries:
            return
        self._writable()
        want = list(range(self.next_seq, self.next_seq + len(entries)))
        if [e.seq for e in entries] != want:
            raise StoreError(f"replicated entries must continue at seq {self.next_seq}")
        self._commit([WalEntry(e.seq, e.op, e.key, e.body) for e in entries])

    # -- reading -----------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        return self.state.epoch

    def __len__(self) -> int:
        return len(self.state.nodes)

    def __contains__(self, key: str) -> bool:
        return key in self.state.nodes

    def _view(self, node) -> NodeView:
        tail = node.tail
        return NodeView(node.key, node.data, dict(node.meta_items(reserved=False)),
                        None if tail is None else tuple(tail))

    def get(self, key: str) -> NodeView | None:
        node = self.state.nodes.get(key)
        if node is None:
            return None
        if not self._allowed(node.tail, "read"):
            raise AccessDenied(f"{self.path}: read access to {key!r} denied by GACL")
        return self._view(node)

    def reserved_meta(self, key: str) -> list[tuple[str, str]]:
        """The format's own ``_`` pairs of a node (for tools and tests)."""
        return self.state.nodes[key].meta_items(reserved=True)

    def children(self, key: str = ROOT) -> list[str]:
        nodes = self.state.nodes
        return [k for k in self.state.children.get(key, {}) if self._readable(nodes[k])]

    def keys(self) -> list[str]:
        return [k for k, n in self.state.nodes.items() if self._readable(n)]

    def iterate(self, prefix: str | None = None) -> Iterator[NodeView]:
        """Readable nodes, parents first; ``prefix`` limits to a subtree."""
        for key, node in list(self.state.nodes.items()):
            if prefix is not None and key != prefix and not key.startswith(prefix.rstrip("/")
                                                                              + "/"):
                continue
            if self._readable(node):
                yield self._view(node)

    # -- replication and history -------------------------------------------------------

    def _file_bytes(self) -> bytes:
        if self.fd is not None:
            return read_all(self.fd)
        with open(self.path, "rb") as fh:
            return fh.read()

    @_serialized
    def committed_entries(self) -> list[WalEntry]:
        """The entries of the current WAL that are on disk (intact prefix)."""
        buf = self._file_bytes()
        if self.writer is not None:
            wal_offset = self.writer.wal_offset
        else:  # re-parse: the file may have been compacted since it was opened
            prefix = replay.read_prefix(buf, self.path)
            wal_offset = replay.load_snapshot(buf, prefix, State(self.codec), self.path)
        return replay.committed_entries(buf, wal_offset, self.layout)

    @property
    def base_seq(self) -> int:
        return self.writer.base_seq if self.writer is not None else self.scan.base_seq

    @_serialized
    def wal_entries_since(self, from_seq: int) -> list[WalEntry]:
        """Committed (fsynced) entries with ``seq >= from_seq``, in order (§8);
        ``SnapshotRequired(base_seq)`` if compaction folded ``from_seq`` away."""
        base = self.base_seq
        if from_seq < base:
            raise SnapshotRequired(base, from_seq)
        limit = self.writer.synced_end if self.writer is not None else self.next_seq
        return [e for e in self.committed_entries() if from_seq <= e.seq < limit]

    # -- compaction --------------------------------------------------------------------

    @_serialized
    def compact(self) -> dict:
        """Fold the WAL into a new snapshot; atomic replace (see ``compaction``)."""
        writer = self._writable()
        self.flush()
        first_seq = writer.base_seq
        built = compaction.build(self.state, self.header, self.layout, self.bounds,
                                 self.next_seq)
        archived: list[str] = []

        def before_rename() -> None:
            if self.retention == sidecars.ARCHIVE:
                entries = self.committed_entries()
                p = sidecars.archive(self.path, self.layout, entries, first_seq, self.next_seq)
                if p:
                    archived.append(p)

        new_fd = compaction.replace(self.path, built, before_rename)
        old_fd = self.fd
        self.fd = new_fd
        unlock(old_fd)
        os.close(old_fd)
        self.header = built.header
        self.layout = FileLayout.of(built.header)
        self.next_seq = built.base_seq + built.wal_count
        self.writer = WalWriter(new_fd, self.layout, built.wal_offset, len(built.data),
                                built.base_seq, built.wal_count, self.durability, self.path)
        self.writer.synced_end = self.next_seq
        self.scan = replay.WalScan(built.wal_offset, built.base_seq, built.wal_count,
                                   built.wal_offset + replay.WAL_HEADER_SIZE, len(built.data),
                                   built.wal_count, self.next_seq)
        if self._subscribers:
            # the RESTAMP is a committed, fsynced entry with its own seq: a subscriber
            # missing it could not continue the sequence (§8)
            self._undelivered.extend(built.entries)
            self._deliver()
        return {"node_count": built.node_count, "file_bytes": len(built.data),
                "wal_base_seq": built.base_seq, "restamp": built.wal_count == 1,
                "archived": archived}

    # -- description -------------------------------------------------------------------

    @_serialized
    def info(self) -> dict:
        return describe(
            self.path, self.header, self.scan, live_nodes=len(self.state.nodes),
            base_seq=self.base_seq, next_seq=self.next_seq,
            header_count=(self.writer.count if self.writer is not None
                          else self.scan.header_count),
            epoch=self.state.epoch, synthesized=self.state.synthesized, bounds=self.bounds,
            discarded=self.discarded, poisoned=self._poison_info(),
            auto_compaction=self._auto_info())

    def _poison_info(self) -> dict | None:
        cause = None if self.writer is None else self.writer.poisoned
        if cause is None:
            return None
        code = getattr(cause, "errno", None)
        return {"error": type(cause).__name__,
                "errno": errno.errorcode.get(code, str(code)) if code is not None else None,
                "message": str(Poisoned(self.path, cause))}


class WalSubscription:
    """A live ``subscribe_wal`` registration; ``close()`` stops the deliveries."""

    def __init__(self, store: Store, callback: Callable[[WalEntry], None],
                 from_seq: int) -> None:
        self.store = store
        self.callback = callback
        self.from_seq = from_seq

    def close(self) -> None:
        if self in self.store._subscribers:
            self.store._subscribers.remove(self)


def gacl_band_dims() -> int:
    return gacl.BAND_DIMS

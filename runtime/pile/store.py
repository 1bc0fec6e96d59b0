"""The ``Pile``: open/create, refresh, blob reads and every write (facts.md §1-§7).

Refresh scans only the bytes past the applied length, under a shared ``flock``, through
the scanner in ``scan.py`` (heads only: blob payloads are neither read nor hashed).
Writers take the exclusive lock, catch up, append one complete record with a single
``write`` on an ``O_APPEND`` descriptor, and feed the new bytes back through the scanner.

One handle may be shared by threads. ``flock`` belongs to the open file description, so
it cannot keep two threads of one handle apart (one thread's unlock would drop the other's
lock); every operation that touches the descriptor, the map or the indexes therefore also
holds the handle's ``threading.RLock``. Lookups (``get``, ``in``, ``members``, ``wants``,
``pins``) refresh first when the file grew, so records other handles appended are seen.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ...generated import pile as g
from ..atomic import fsync_dir
from ..errors import BytewrightError
from ..mapped import RELEASE_EVERY, releaser
from . import crypto, kinds
from .errors import CorruptPile, InvalidRecord, PileShrunk, UnsupportedRecord
from .index import BlobIndex
from .migrate import retired_want
from .records import LegacyUnsignedEquation, dense_payload, legacy_unsigned_from_record
from .scan import (
    Record,
    blob_parts,
    proof_body_bytes,
    proof_edge_count,
    read_record,
    valid_after,
)

_PIN_HEADS = {"pin_head_body", "v1_branch", "v3_branch", "env_branch_body"}
_PIN_TOMBSTONES = {"pin_tombstone_body", "v1_tombstone", "v3_tombstone", "env_tombstone_body"}
_COMMITS = {"commit_body", "v4_commit", "env_commit_body"}
_BLOBS = {"blob_body", "env_blob_body", "v3_blob", "v1_blob"}


class BlobUnavailable(BytewrightError):
    """No occurrence of a known blob handle has a payload that hashes to it."""

    @classmethod
    def none_of(cls, handle: bytes, occurrences: int) -> BlobUnavailable:
        return cls(f"blob {handle.hex()}: none of {occurrences} occurrence(s) "
                   "has a payload matching its handle")


@dataclass
class CollectionRecord:
    """A COMMIT / MERGE v6 / DERIVE v7 record, keyed by its fingerprint."""

    fingerprint: bytes
    name: str
    collection: bytes
    member: bytes
    value: Any
    offsets: list[int] = field(default_factory=list)


@dataclass
class ProofRecord:
    proof_id: bytes
    body: bytes
    value: g.ProofV5Body
    offsets: list[int] = field(default_factory=list)


@dataclass
class OpaqueRecord:
    offset: int
    form: str
    kind: bytes
    span: int | None
    length: int
    pile: Pile

    @property
    def raw(self) -> bytes:
        """The record's exact bytes (read from the mapped file on demand)."""
        with self.pile._lock:
            return bytes(self.pile._map()[self.offset:self.offset + self.length])


class Pile:
    """An open pile file. Use :meth:`open` (never creates) or :meth:`create`."""

    def __init__(self, path: str, fd: int, *, writable: bool, sync: bool) -> None:
        self.path = path
        self._fd = fd
        self.writable = writable
        self.sync = sync
        self._mm: mmap.mmap | None = None
        self._mm_size = 0
        self._lock = threading.RLock()
        self._flocked = False  # this handle holds its flock (nested calls must not re-take it)
        self._examined = -1    # file size the last refresh looked at
        self.crash_at: str | None = None  # test hook: os._exit at a named write step
        self.applied = 0
        self.records = 0
        self.counts: Counter[tuple[str, str]] = Counter()
        self.blobs = BlobIndex()  # handle -> offsets (a Mapping; compact: index.py)
        # Replay indexes each collection frame by collection | member | offset and keeps
        # its decoded fields; fingerprints are computed on demand (``collection``), never
        # at replay (spec: "The pile computes none at replay").
        self.by_collection: dict[bytes, dict[bytes, list[int]]] = {}
        self.frames: dict[int, tuple[str, Any]] = {}  # collection frame offset -> (name, value)
        self._frame_order: list[int] = []
        self._folded = 0
        self._by_fp: dict[bytes, CollectionRecord] = {}
        self._fp_at: dict[int, bytes] = {}
        self.proofs: dict[bytes, ProofRecord] = {}
        self._wants: set[bytes] = set()
        self._pins: dict[bytes, bytes] = {}
        self.pin_log: list[tuple[int, bytes, bytes | None]] = []
        self.opaque: list[OpaqueRecord] = []
        # Retired unsigned equations (offset, equation): inert evidence for migration.
        self.unsigned_equations: list[tuple[int, LegacyUnsignedEquation]] = []
        # Retired WANT frames (offset, asserts, historical key): monotone-wants input only.
        self.retired_wants: list[tuple[int, bool, bytes]] = []
        # Component versions for snapshots: blob occurrences, collection frames, proof frames.
        self.versions: dict[str, int] = {"blobs": 0, "collection": 0, "proofs": 0}
        # Blob validation verdicts by record offset ("Each record's validation state is
        # cached for the lifetime of the process"), dropped whenever the file changed in
        # a way this handle did not make itself (see ``_check_verdicts``).
        self._verdicts: dict[int, bool] = {}
        self._verdict_stamp: tuple[int, int, int, int] | None = None

    # -- lifecycle ------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str, *, writable: bool = True, sync: bool = True,
             refresh: bool = True) -> Pile:
        """Open an existing pile (``FileNotFoundError`` if absent) and refresh it."""
        flags = (os.O_RDWR | os.O_APPEND) if writable else os.O_RDONLY
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
        pile = cls(path, fd, writable=writable, sync=sync)
        if refresh:
            pile.refresh()
        return pile

    @classmethod
    def create(cls, path: str, *, sync: bool = True) -> Pile:
        """Create a new, empty pile; refuses an existing path."""
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        if sync:
            os.fsync(fd)
            fsync_dir(path)
        return cls(path, fd, writable=True, sync=sync)

    def close(self) -> None:
        with self._lock:
            self._unmap()
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> Pile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- locking and mapping --------------------------------------------------------------
    @contextmanager
    def _locked(self, op: int):
        """The thread lock, then the file lock. A nested call (a read inside a write) keeps
        the file lock already held: a second ``flock`` on the same descriptor would convert
        it, and its unlock would release the outer caller's lock."""
        with self._lock:
            if self._flocked:
                yield
                return
            fcntl.flock(self._fd, op)
            self._flocked = True
            try:
                yield
            finally:
                self._flocked = False
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    @classmethod
    def load(cls, data: bytes, name: str = "<bytes>", *, strict: bool = True) -> Pile:
        """An in-memory, read-only pile over ``data`` (standard input, tests). Scans it all;
        the first bad record's error is raised (``strict``) or kept in ``error`` with the
        records before it applied."""
        pile = cls(name, -1, writable=False, sync=False)
        pile._data = bytes(data)
        try:
            pile._scan(memoryview(pile._data), len(pile._data))
        except (CorruptPile, UnsupportedRecord) as exc:
            if strict:
                raise
            pile.error = exc
        return pile

    def refresh_or_error(self) -> CorruptPile | UnsupportedRecord | None:
        """``refresh``, keeping the first bad record's error in ``error`` (and returning it)
        instead of raising; what was applied before it stays applied."""
        with self._lock:
            try:
                self.refresh()
                self.error = None
            except (CorruptPile, UnsupportedRecord) as exc:
                self.error = exc
            return self.error

    error: CorruptPile | UnsupportedRecord | None = None

    _data: bytes | None = None

    def _map(self) -> mmap.mmap | bytes:
        """The file's map (callers hold ``_lock``: a map one thread reads must not be
        replaced and closed by another)."""
        if self._data is not None:
            return self._data
        size = os.fstat(self._fd).st_size
        if size != self._mm_size or self._mm is None:
            self._unmap()
            if size == 0:
                return b""
            self._mm = mmap.mmap(self._fd, size, access=mmap.ACCESS_READ)
            self._mm_size = size
        return self._mm

    def _unmap(self) -> None:
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:  # a caller still holds a view; the GC unmaps it later
                pass
            self._mm = None
            self._mm_size = 0

    # -- refresh --------------------------------------------------------------------------
    def refresh(self) -> int:
        """Apply the records appended since the last refresh; returns how many.

        A parse failure under the shared lock is re-checked once under the exclusive lock
        with a fresh file length (a writer could have been between steps)."""
        with self._lock:
            before = self.records  # the shared pass may apply records before it fails
            try:
                with self._locked(fcntl.LOCK_SH):
                    self._refresh_locked()
            except (CorruptPile, UnsupportedRecord):
                with self._locked(fcntl.LOCK_EX):
                    self._refresh_locked()
            return self.records - before

    def _fresh(self) -> None:
        """Refresh before a lookup, only if the file's size changed since the last refresh
        looked at it (one ``fstat`` otherwise). A damaged tail raises here once; later
        lookups at the same size answer from the records applied before it (``refresh``
        reports it again)."""
        if self._fd >= 0 and os.fstat(self._fd).st_size != self._examined:
            self.refresh()

    def _refresh_locked(self) -> int:
        size = os.fstat(self._fd).st_size
        if size < self.applied:
            raise PileShrunk(self.applied, size)
        self._examined = size
        if size == self.applied:
            return 0
        mv = memoryview(self._map())
        try:
            return self._scan(mv, size, self._releaser())
        finally:
            mv.release()

    def _scan(self, mv: memoryview, size: int,
              release: Callable[[int], None] | None = None) -> int:
        n = 0
        pos = self.applied
        mark = pos + RELEASE_EVERY if release is not None else size + 1
        while pos < size:
            rec = read_record(mv, pos)
            self._apply(rec)
            pos = rec.end
            self.applied = pos
            n += 1
            if pos >= mark:  # the scan reads every record's head: give its pages back
                release(pos)
                mark = pos + RELEASE_EVERY
        return n

    def _releaser(self) -> Callable[[int], None] | None:
        return releaser(self._mm) if self._mm is not None else None

    def release_pages(self) -> None:
        """Drop the resident pages of the file's map. They are clean pages of a read-only
        file mapping: a later read refaults them from the file, so nothing changes but
        memory. A reader walking a large pile (``pile verify``) calls it as it goes."""
        with self._lock:
            release = self._releaser()
            if release is not None:
                release(self._mm_size)

    def _apply(self, rec: Record) -> None:
        self.records += 1
        self.counts[(rec.form, rec.name)] += 1
        name, v = rec.name, rec.value
        if name in _BLOBS:
            handle = v.hash
            self.blobs.add(handle, rec.offset)
            self.versions["blobs"] += 1
        elif name in _COMMITS:
            self._add_collection(rec, v.collection, v.data)
        elif name == "merge_v6_body":
            self._add_collection(rec, v.collection, v.result)
        elif name == "derive_v7_body":
            self._add_collection(rec, v.target, v.output)
        elif name == "proof_v5_body":
            body = proof_body_bytes(v)
            pid = crypto.blake3(body)
            self.versions["proofs"] += 1
            old = self.proofs.get(pid)
            if old is None:
                self.proofs[pid] = ProofRecord(pid, body, v, [rec.offset])
            elif old.body != body:
                raise CorruptPile(rec.offset, "proof id collision with a different body")
            else:
                old.offsets.append(rec.offset)
        elif name == "want_v3_body":
            self._wants.add(g.encode_want_request(g.WantRequest(v.tag, v.request)))
        elif name in _PIN_HEADS or name in _PIN_TOMBSTONES:
            pin = getattr(v, "pin", None) or v.branch
            head = v.head if name in _PIN_HEADS else None
            self.pin_log.append((rec.offset, pin, head))
            if head is None:
                self._pins.pop(pin, None)
            else:
                self._pins[pin] = head
        elif (eq := legacy_unsigned_from_record(name, v)) is not None:
            self.unsigned_equations.append((rec.offset, eq))
        elif (rw := retired_want(name, rec.kind, v)) is not None:
            self.retired_wants.append((rec.offset, *rw))
        elif name == "opaque":
            self.opaque.append(OpaqueRecord(rec.offset, rec.form, rec.kind, rec.span,
                                            rec.length, self))

    def _add_collection(self, rec: Record, collection: bytes, member: bytes) -> None:
        self.frames[rec.offset] = (rec.name, rec.value)
        self._frame_order.append(rec.offset)
        self.versions["collection"] += 1
        self.by_collection.setdefault(collection, {}).setdefault(member, []).append(rec.offset)

    @property
    def collection(self) -> dict[bytes, CollectionRecord]:
        """Fingerprint -> record over the frames applied so far, computed on first use and
        then only for frames applied since (repeats of a record share one entry)."""
        with self._lock:
            order = self._frame_order
            while self._folded < len(order):
                off = order[self._folded]
                name, v = self.frames[off]
                fp = _fingerprint(name, v)
                entry = self._by_fp.get(fp)
                if entry is None:
                    c, m = _collection_member(name, v)
                    entry = self._by_fp[fp] = CollectionRecord(fp, name, c, m, v)
                entry.offsets.append(off)
                self._fp_at[off] = fp
                self._folded += 1
            return self._by_fp

    def collection_record_at(self, offset: int) -> CollectionRecord:
        """The collection record whose frame starts at ``offset``."""
        with self._lock:
            records = self.collection  # folds any frame not yet fingerprinted
            return records[self._fp_at[offset]]

    def _holds_record(self, name: str, v: Any) -> bool:
        """Whether the file already holds this record: only the producers of the same
        collection member can be it, and they are compared as records (dense bytes)."""
        c, m = _collection_member(name, v)
        want = dense_payload(name, v)
        return any(dense_payload(*self.frames[off]) == want
                   for off in self.by_collection.get(c, {}).get(m, ()))

    # -- reads ----------------------------------------------------------------------------
    def members(self, collection: bytes) -> list[bytes]:
        """Distinct members of a collection (repeats collapse), in first-seen order."""
        with self._lock:
            self._fresh()
            return list(self.by_collection.get(collection, {}))

    @property
    def wants(self) -> frozenset[bytes]:
        """The WANT set (97-byte keys), including WANTs other handles appended."""
        with self._lock:
            self._fresh()
            return frozenset(self._wants)

    @property
    def pins(self) -> dict[bytes, bytes]:
        """Pin -> head after last-writer-wins replay (a copy), including other handles' pins."""
        with self._lock:
            self._fresh()
            return dict(self._pins)

    def get(self, handle: bytes) -> bytes:
        """A blob's payload; verified with BLAKE3 once per occurrence (the verdict is
        cached), falling back to later occurrences."""
        with self._lock:
            self._fresh()
            return self._get(handle, None)

    def _get(self, handle: bytes, limit: int | None) -> bytes:
        """``get`` over the occurrences before ``limit`` (a snapshot's length)."""
        with self._lock:
            offsets = self.blobs.get(handle)
            if offsets and limit is not None:
                offsets = [o for o in offsets if o < limit]
            if not offsets:
                raise KeyError(handle.hex())
            self._check_verdicts()
            verdicts = self._verdicts
            mv = memoryview(self._map())
            try:
                for off in offsets:
                    if verdicts.get(off) is False:
                        continue
                    try:
                        rec = read_record(mv, off, heads_only=False)
                    except (CorruptPile, UnsupportedRecord):
                        verdicts[off] = False
                        continue
                    parts = blob_parts(rec)
                    if not parts:
                        verdicts[off] = False
                        continue
                    ok = verdicts.get(off)
                    if ok is None:
                        ok = verdicts[off] = crypto.blake3(parts[1]) == handle
                    if ok:
                        return parts[1]
            finally:
                mv.release()
            raise BlobUnavailable.none_of(handle, len(offsets))

    def _stamp(self) -> tuple[int, int, int, int]:
        st = os.fstat(self._fd)
        return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns

    def _check_verdicts(self) -> None:
        """Drop cached blob verdicts when the file changed since they were made, other
        than by this handle's own appends (which never touch old bytes). Another writer's
        append costs a re-hash; a replaced, shrunk or rewritten file cannot go unseen."""
        if self._fd < 0:
            return
        stamp = self._stamp()
        if self._verdict_stamp != stamp:
            self._verdicts.clear()
        self._verdict_stamp = stamp

    def snapshot(self):
        """Refresh, then freeze the observed prefix as a :class:`PileSnapshot`."""
        from .snapshot import PileSnapshot
        with self._lock:
            if self._fd >= 0:
                self.refresh()
            return PileSnapshot(self)

    def legacy_unsigned_collection_equations(self) -> list[LegacyUnsignedEquation]:
        """The retired unsigned MERGE/DERIVE equations in file order (exact evidence for an
        explicit endorsement migration; never part of the collection index)."""
        with self._lock:
            self._fresh()
            return [eq for _, eq in self.unsigned_equations]

    def __contains__(self, handle: bytes) -> bool:
        with self._lock:
            self._fresh()
            return handle in self.blobs

    def size(self) -> int:
        """The current length of the file (or of the loaded bytes)."""
        with self._lock:
            return len(self._data) if self._data is not None else os.fstat(self._fd).st_size

    def valid_after(self, offset: int) -> int:
        """How many valid-looking records follow damage at ``offset`` (see ``scan.valid_after``)."""
        with self._lock:
            mv = memoryview(self._map())
            try:
                return valid_after(mv, offset)
            finally:
                mv.release()

    def record_at(self, offset: int) -> Record:
        with self._lock:
            mv = memoryview(self._map())
            try:
                return read_record(mv, offset, heads_only=False)
            finally:
                mv.release()

    # -- writes ---------------------------------------------------------------------------
    def _step(self, name: str) -> None:
        if self.crash_at == name:  # crash-point tests: die exactly here, no cleanup
            os._exit(70)

    def _append(self, data: bytes) -> None:
        """Append one complete record (caller holds LOCK_EX); single write on O_APPEND."""
        if not self.writable:
            raise BytewrightError(f"{self.path}: opened read-only")
        self._step("before-write")
        ours = self._verdict_stamp is not None and self._verdict_stamp == self._stamp()
        if self.crash_at == "mid-write":
            os.write(self._fd, data[:len(data) // 2])
            os._exit(70)
        written = os.write(self._fd, data)
        while written < len(data):  # short writes are rare; still under the lock
            written += os.write(self._fd, data[written:])
        self._step("after-write")
        if self.sync:
            os.fsync(self._fd)
        self._step("after-fsync")
        if ours:  # only this append happened since the verdicts were made: keep them
            self._verdict_stamp = self._stamp()

    def _write_record(self, data: bytes) -> None:
        with self._locked(fcntl.LOCK_EX):
            self._refresh_locked()
            self._append(data)
            self._refresh_locked()

    def put(self, payload: bytes, *, timestamp: int | None = None) -> bytes:
        """Store a blob; returns its handle. A handle already readable is not rewritten."""
        handle = crypto.blake3(payload)
        ts = int(time.time() * 1000) if timestamp is None else timestamp
        data = encode_blob(payload, ts, handle)
        with self._locked(fcntl.LOCK_EX):
            self._refresh_locked()
            if handle in self.blobs and self._readable(handle):
                return handle
            self._append(data)
            self._refresh_locked()
        return handle

    def _readable(self, handle: bytes) -> bool:
        try:
            self.get(handle)
            return True
        except BlobUnavailable:
            return False

    def commit(self, seed: bytes, collection: bytes, data: bytes,
               metadata: bytes = crypto.EMPTY_ARCHIVE) -> bytes:
        """Sign and insert a COMMIT; returns its fingerprint."""
        author = crypto.public_key(seed)
        sig = crypto.sign(seed, crypto.commit_transcript(author, collection, data, metadata))
        return self.insert(frame(kinds.KIND_COMMIT, g.CommitBody(
            collection, data, metadata, author, sig[:32], sig[32:])))

    def merge(self, seed: bytes, collection: bytes, a: tuple[bytes, bytes],
              b: tuple[bytes, bytes], result: bytes) -> bytes:
        """Sign and insert a MERGE v6 of inputs ``(digest, witness)``; returns the fingerprint."""
        low, high = sorted([a, b], key=lambda x: x[0] + x[1])
        author = crypto.public_key(seed)
        sig = crypto.sign(seed, crypto.merge_transcript(author, collection, low[0], high[0],
                                                        result, low[1], high[1]))
        return self.insert(frame(kinds.KIND_MERGE_V6, g.MergeV6Body(
            collection, low[0], high[0], result, low[1], high[1], author, sig[:32], sig[32:]), 2))

    def derive(self, seed: bytes, target: bytes, input: bytes, output: bytes,
               input_witness: bytes) -> bytes:
        """Sign and insert a DERIVE v7; returns the fingerprint."""
        author = crypto.public_key(seed)
        sig = crypto.sign(seed, crypto.derive_transcript(author, target, input, output,
                                                         input_witness))
        return self.insert(frame(kinds.KIND_DERIVE_V7, g.DeriveV7Body(
            target, input, output, input_witness, author, sig[:32], sig[32:]), 2))

    def want(self, request: g.WantRequest) -> bytes:
        """Insert a WANT v3 (idempotent); returns its 97-byte key."""
        self.insert(frame(kinds.KIND_WANT_V3, g.WantV3Body(request.tag, request.request)))
        return g.encode_want_request(request)

    def insert(self, data: bytes) -> bytes:
        """Insert one encoded current record after the checks insertion owes (signatures,
        key validity, proof edges); idempotent. Returns the record's identity: blob handle,
        fingerprint, proof id or WANT key."""
        try:
            rec = read_record(memoryview(data), 0, heads_only=False)
        except (CorruptPile, UnsupportedRecord) as exc:
            raise InvalidRecord(f"not a valid record: {exc}") from None
        if rec.end != len(data) or rec.form != "current":
            raise InvalidRecord("insert takes exactly one current-framed record")
        ident, known = self._identity(rec)
        with self._locked(fcntl.LOCK_EX):
            self._refresh_locked()
            if not known():
                self._append(data)
                self._refresh_locked()
        return ident

    def _identity(self, rec: Record):
        v, name = rec.value, rec.name
        if name == "blob_body":
            if crypto.blake3(v.data.payload) != v.head.hash:
                raise InvalidRecord("blob payload does not match its handle")
            return v.head.hash, lambda: v.head.hash in self.blobs and self._readable(v.head.hash)
        if name in ("commit_body", "merge_v6_body", "derive_v7_body"):
            check = {"commit_body": (crypto.commit_signature_ok, crypto.commit_fingerprint),
                     "merge_v6_body": (crypto.merge_signature_ok, crypto.merge_fingerprint),
                     "derive_v7_body": (crypto.derive_signature_ok, crypto.derive_fingerprint)}
            ok, fp_of = check[name]
            if not crypto.key_is_valid(v.author):
                raise InvalidRecord(f"author key {v.author.hex()} is not canonical or is weak")
            if not ok(v):
                raise InvalidRecord(f"{name}: signature does not verify")
            fp = fp_of(v)
            return fp, lambda: self._holds_record(name, v)
        if name == "proof_v5_body":
            verify_proof(v)
            pid = crypto.blake3(proof_body_bytes(v))
            return pid, lambda: pid in self.proofs
        if name == "want_v3_body":
            key = g.encode_want_request(g.WantRequest(v.tag, v.request))
            return key, lambda: key in self._wants
        raise InvalidRecord(f"{name} records have no writer (legacy or opaque)")


# -- collection record helpers --------------------------------------------------------------

def _collection_member(name: str, v: Any) -> tuple[bytes, bytes]:
    if name == "merge_v6_body":
        return v.collection, v.result
    if name == "derive_v7_body":
        return v.target, v.output
    return v.collection, v.data


def _fingerprint(name: str, v: Any) -> bytes:
    if name == "merge_v6_body":
        return crypto.merge_fingerprint(v)
    if name == "derive_v7_body":
        return crypto.derive_fingerprint(v)
    return crypto.commit_fingerprint(v)


# -- encoders shared with reframe and the tests ---------------------------------------------

def frame(kind: bytes, body: Any, span: int = 1) -> bytes:
    """One current-framed record of ``kind`` (its span given by the layout)."""
    return g.encode_pile_record(g.PileRecord(kinds.MAGIC_HEAD, g.FrameRest(span, kind, body)))


def blob_span(length: int) -> int:
    return 1 + (length + kinds.BLOCK - 1) // kinds.BLOCK


def encode_blob(payload: bytes, timestamp: int, handle: bytes | None = None) -> bytes:
    handle = crypto.blake3(payload) if handle is None else handle
    n = len(payload)
    return frame(kinds.KIND_BLOB, g.BlobBody(g.BlobHead(timestamp, n, handle),
                                             g.BlobData(payload)), blob_span(n))


def sign_proof(resource: bytes, root_seed: bytes,
               chain: list[tuple[bytes, bytes]]) -> g.ProofV5Body:
    """A proof v5 whose edge i (capability, delegate seed) is signed by the root for i = 0,
    else by delegate i-1, over body bytes [0, 96 + 128 i + 64)."""
    edges: list[g.ProofEdge] = []
    issuer = root_seed
    body = g.ProofV5Body(resource, crypto.public_key(root_seed), edges)
    for capability, delegate_seed in chain:
        edges.append(g.ProofEdge(capability, crypto.public_key(delegate_seed), bytes(64)))
        signed = proof_body_bytes(body)[:96 + 128 * (len(edges) - 1) + 64]
        edges[-1] = g.ProofEdge(capability, edges[-1].delegate, crypto.sign(issuer, signed))
        issuer = delegate_seed
    return body


def proof_frame(body: g.ProofV5Body) -> bytes:
    n = len(body.edges)
    span = (32 + 96 + 128 * n + kinds.BLOCK - 1) // kinds.BLOCK
    pad = (span * kinds.BLOCK - 128 - 128 * n) // 128  # zero edges fill the span
    padded = g.ProofV5Body(body.resource, body.root,
                           list(body.edges) + [g.ProofEdge(bytes(32), bytes(32), bytes(64))] * pad)
    return frame(kinds.KIND_PROOF_V5, padded, span)


def verify_proof(body: g.ProofV5Body) -> None:
    """Every edge signature (facts.md §3.7); raises ``InvalidRecord``."""
    n = proof_edge_count(body)
    full = proof_body_bytes(body)
    issuer = body.root
    for i, edge in enumerate(body.edges[:n]):
        if not crypto.verify_strict(issuer, full[:96 + 128 * i + 64], edge.signature):
            raise InvalidRecord(f"proof edge {i}: signature does not verify")
        issuer = edge.delegate

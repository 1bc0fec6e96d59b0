"""Conservative retained rewrites and Yard collection: always into a new file (tmp +
fsync + rename via ``runtime.atomic.AtomicFile``); the source pile is never modified.

``rewrite_retained_into`` (spec): "carries each byte-distinct opaque frame unchanged and
retains every resident blob in the observed prefix, regardless of the caller's narrower
roots. Repeated copies use BLAKE3 digests to avoid appending the same frame again; physical
offsets and duplicate occurrences are not preserved." It drops the retired PEER,
STORE_SCOPE and artifact-offer kinds, and refuses while a retired local cell remains ("their
former ownership semantics are no longer interpreted").

``yard_collect`` keeps only the blobs reachable from the caller's roots and from every
retained record's direct references, recursively; it "still refuse[s] before mutation when
any opaque record is present". Set-like records (collection records, proofs, WANTs,
equations) are deduplicated by frame digest; ordered logs (legacy pins and retired WANT
frames, both last-writer-wins) are copied in order, repeats included, so their resolution
cannot change.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..atomic import AtomicFile
from . import crypto
from .errors import RepairRefused
from .migrate import RETIRED_BLOB_WANTS, RETIRED_TYPED_WANTS
from .records import legacy_unsigned_from_record
from .scan import Record, blob_parts, iter_records, proof_edge_count, read_record
from .store import Pile

DROPPED = {"peer_body", "store_scope_body", "artifact_offer_body"}
LOCAL_CELLS = {bytes.fromhex("24264FA9EE46A1ACC0E024AE69774B09"),
               bytes.fromhex("4FE372AE868D22A44DED7A60D579B651")}
_ORDERED = {"pin_head_body", "pin_tombstone_body", "v1_branch", "v1_tombstone", "v3_branch",
            "v3_tombstone", "env_branch_body", "env_tombstone_body"} | RETIRED_BLOB_WANTS \
    | RETIRED_TYPED_WANTS


@dataclass
class RewriteResult:
    dest: str
    blobs: int = 0           # blob records written (one per retained handle)
    dropped_blobs: int = 0   # occurrences not copied (duplicates, unreadable, unreachable)
    records: int = 0         # other records written
    repeats: int = 0         # byte-identical set-like frames not appended again
    opaque: int = 0          # opaque frames carried unchanged
    dropped: dict[str, int] = field(default_factory=dict)  # retired kinds left behind


def is_local_cell(rec: Record) -> bool:
    return rec.opaque and rec.kind[:16] in LOCAL_CELLS


def record_blob_references(rec: Record) -> list[bytes]:
    """Direct blob handles a retained record owns (spec: every retained current native
    record, unsigned equation and WANT "strongly own[s] each independently resident direct
    blob reference"; proofs their capability definitions; pins their head)."""
    v, name = rec.value, rec.name
    if name in ("commit_body", "v4_commit", "env_commit_body"):
        return [v.collection, v.data, v.metadata]
    if name == "merge_v6_body":
        return [v.collection, v.low, v.high, v.result]
    if name == "derive_v7_body":
        return [v.target, v.input, v.output]
    if (eq := legacy_unsigned_from_record(name, v)) is not None:
        return eq.blob_references()
    if name == "want_v3_body":
        return [x for x in _want_fields(v.request) if any(x)]
    if name == "proof_v5_body":
        return [e.capability for e in v.edges[:proof_edge_count(v)]]
    if name in ("pin_head_body", "v1_branch", "v3_branch", "env_branch_body"):
        return [v.head]
    return []


def _want_fields(req) -> list[bytes]:
    return [getattr(req, f) for f in ("blob", "collection", "low", "high", "target", "input")
            if hasattr(req, f)]


def blob_closure(pile: Pile, roots: Iterable[bytes]) -> set[bytes]:
    """Every resident handle reachable from ``roots``. A blob's references are followed
    conservatively: every 32-byte-aligned word of its payload that names a resident blob
    (a SimpleArchive's values, an accelerated root's first 32 bytes)."""
    live: set[bytes] = set()
    todo = [h for h in roots if h in pile.blobs]
    while todo:
        h = todo.pop()
        if h in live:
            continue
        live.add(h)
        try:
            payload = pile.get(h)
        except Exception:  # noqa: BLE001 - an unreadable blob is retained, not followed
            continue
        for i in range(0, len(payload) - 31, 32):
            word = payload[i:i + 32]
            if word not in live and word in pile.blobs:
                todo.append(word)
    return live


def rewrite_retained_into(pile: Pile, dest: str, roots: Iterable[bytes] = ()) -> RewriteResult:
    """Copy the pile conservatively into the new file ``dest`` (``roots`` cannot narrow it:
    every resident blob is retained)."""
    return _rewrite(pile, dest, keep_blob=None, refuse_opaque=False)


def yard_collect(pile: Pile, dest: str, roots: Iterable[bytes]) -> RewriteResult:
    """Write ``dest`` with only the blobs reachable from ``roots`` and the retained records;
    refuses, before writing anything, when the pile holds any opaque record."""
    with pile._lock:
        pile.refresh()
        if pile.opaque:
            first = pile.opaque[0]
            raise RepairRefused(f"{pile.path}: {len(pile.opaque)} opaque record(s) (first at "
                                f"offset {first.offset}); Yard cannot infer their ownership")
        mv = memoryview(pile._map())[:pile.applied]
        try:
            refs = [h for rec in iter_records(mv) for h in record_blob_references(rec)]
        finally:
            mv.release()
        live = blob_closure(pile, [*roots, *refs])
    return _rewrite(pile, dest, keep_blob=live, refuse_opaque=True)


def _rewrite(pile: Pile, dest: str, *, keep_blob: set[bytes] | None,
             refuse_opaque: bool) -> RewriteResult:
    if os.path.exists(dest):
        raise RepairRefused(f"{dest}: already exists; a rewrite writes a new file")
    res = RewriteResult(dest)
    with pile._lock:
        pile.refresh()
        mv = memoryview(pile._map())[:pile.applied]
        try:
            records = list(iter_records(mv, heads_only=True))
            for rec in records:  # refuse before the destination exists
                if is_local_cell(rec):
                    raise RepairRefused(f"{pile.path}: retired local cell at offset "
                                        f"{rec.offset}; a destructive rewrite refuses while "
                                        "one remains")
                if refuse_opaque and rec.opaque:
                    raise RepairRefused(f"{pile.path}: opaque record at offset {rec.offset}")
            written_blobs: set[bytes] = set()
            digests: set[bytes] = set()
            with AtomicFile(dest) as out:
                for rec in records:
                    raw = bytes(mv[rec.offset:rec.end])
                    if rec.name in DROPPED:
                        res.dropped[rec.name] = res.dropped.get(rec.name, 0) + 1
                        continue
                    handle = _blob_handle(rec)
                    if handle is not None:
                        if (handle in written_blobs
                                or (keep_blob is not None and handle not in keep_blob)
                                or not _valid_blob(mv, rec)):
                            res.dropped_blobs += 1
                            continue
                        written_blobs.add(handle)
                        out.write(raw)
                        res.blobs += 1
                        continue
                    if rec.name not in _ORDERED:
                        d = crypto.blake3(raw)
                        if d in digests:
                            res.repeats += 1
                            continue
                        digests.add(d)
                    out.write(raw)
                    res.opaque += rec.opaque
                    res.records += 1
                out.commit()
        finally:
            mv.release()
    return res


def _blob_handle(rec: Record) -> bytes | None:
    if rec.name == "blob_body":
        return rec.value.hash if hasattr(rec.value, "hash") else rec.value.head.hash
    if rec.name in ("env_blob_body", "v3_blob", "v1_blob"):
        return rec.value.hash
    return None


def _valid_blob(mv: memoryview, rec: Record) -> bool:
    full = read_record(mv, rec.offset, heads_only=False)
    parts = blob_parts(full)
    return parts is not None and crypto.blake3(parts[1]) == parts[0]


__all__ = ["RewriteResult", "blob_closure", "record_blob_references", "rewrite_retained_into",
           "yard_collect"]

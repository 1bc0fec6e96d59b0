"""History sidecars (§4.1, §7.3): ``<file name>.h000001``, ... oldest first.

With archive retention, compaction writes the pre-compaction WAL span as one segment
(v1; v2 recording the tail layout for quantized/GACL files) crash-safely before the
main file is replaced. A crash in between re-archives the same span under the next
number, so the reader deduplicates by sequence. Deleting the sidecars leaves a valid
file that has forgotten its past.
"""

from __future__ import annotations

import enum
import logging
import os
from dataclasses import dataclass

from ...generated.htt import (
    SidecarSegment,
    WalEntry,
    WalOp,
    decode_sidecar_segment,
)
from ..errors import DecodeError
from . import limits
from .errors import HistoryUnavailable
from .quantized import TailCodec
from .sidecars import (  # noqa: F401 - re-exported
    ARCHIVE,
    archive,
    next_sidecar_path,
    segment_for,
    segment_tail_layout,
    sidecar_paths,
)
from .state import Node, State
from .store import Store

log = logging.getLogger("bytewright.htt")

@dataclass(frozen=True)
class EpochInfo:
    epoch_id: int
    seq: int
    speculative: bool


class DeltaKind(enum.Enum):
    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"


@dataclass(frozen=True)
class KeyDelta:
    """How one key differs between two epochs' states (upstream ``KeyDelta``)."""

    key: str
    kind: DeltaKind
    before: Node | None  # the node at the earlier epoch (None: absent)
    after: Node | None  # the node at the later epoch (None: absent)


@dataclass(frozen=True)
class TrajectoryPoint:
    seq: int
    epoch: int  # epoch counter in force when the entry was written
    op: str
    data: bytes | None  # node payload after the entry (None: node absent)
    semantic: list[int] | None


class HistoryReader:
    """Reads ``path``'s sidecars plus the live WAL as one deduplicated entry stream."""

    def __init__(self, path: str) -> None:
        self.path = path
        with Store.open(path, readonly=True) as store:
            self.layout = store.layout
            live = store.committed_entries()
        self.codec = TailCodec(self.layout.semantic_dims, self.layout.tail_layout)
        by_seq: dict[int, WalEntry] = {}
        self.segments: list[str] = []
        self.skipped: list[tuple[str, str]] = []  # (sidecar, why it was not used)
        for seg_path in sidecar_paths(path):
            why = self._check(seg_path)
            if isinstance(why, str):
                log.warning("%s: history segment skipped: %s", seg_path, why)
                self.skipped.append((seg_path, why))
                continue
            seg = why
            self.segments.append(seg_path)
            for e in seg.entries:
                by_seq.setdefault(e.seq, e)
        for e in live:
            by_seq.setdefault(e.seq, e)
        self.entries = [by_seq[s] for s in sorted(by_seq)]

    def _check(self, seg_path: str) -> SidecarSegment | str:
        """The decoded segment, or why it cannot belong to this file. The sidecar CRC
        covers the entries only, so the header fields get the semantic checks here."""
        too_big = f"larger than {limits.MAX_SIDECAR_BYTES} bytes (limits.MAX_SIDECAR_BYTES)"
        try:
            with open(seg_path, "rb") as fh:
                # sized by the file, not by the limit: ``read(n)`` allocates n bytes up
                # front, and a limit-sized buffer per sidecar exhausts memory
                size = os.fstat(fh.fileno()).st_size
                if size > limits.MAX_SIDECAR_BYTES:
                    return too_big
                buf = fh.read(size + 1)  # one byte more: a file that grew since fstat
        except OSError as exc:  # a directory, a permission problem, a vanished file
            return f"unreadable ({exc.strerror or exc})"
        if len(buf) > limits.MAX_SIDECAR_BYTES:
            return too_big
        try:
            seg, _ = decode_sidecar_segment(buf)
        except DecodeError as exc:
            exc.file = seg_path
            return f"undecodable: {exc}"
        if seg.semantic_dims != self.layout.semantic_dims:
            return (f"semantic_dims {seg.semantic_dims} does not match the file's "
                    f"{self.layout.semantic_dims}")
        layout = segment_tail_layout(seg)
        if layout is not self.layout.tail_layout:
            return (f"tail layout {layout.name} does not match the file's "
                    f"{self.layout.tail_layout.name} (a segment of another store)")
        seqs = [e.seq for e in seg.entries]
        if seqs != list(range(seg.first_seq, seg.first_seq + len(seqs))) \
                or seg.end_seq != seg.first_seq + len(seqs):
            return (f"entries carry seq {seqs[0] if seqs else '-'}..{seqs[-1] if seqs else '-'}"
                    f" but the header says [{seg.first_seq}, {seg.end_seq})")
        return seg

    @property
    def first_seq(self) -> int | None:
        return self.entries[0].seq if self.entries else None

    def epochs(self) -> list[EpochInfo]:
        """Seal moments in order (RESTAMP markers are carry-overs, not seals)."""
        return [EpochInfo(e.body.epoch_id, e.seq, e.body.flags.speculative)
                for e in self.entries
                if e.op is WalOp.EPOCH and not e.body.flags.restamp]

    def _complete(self) -> None:
        if self.entries and self.entries[0].seq != 1:
            raise HistoryUnavailable(
                f"{self.path}: history starts at seq {self.entries[0].seq}, not 1; "
                f"states before it were not archived")

    def as_of(self, epoch: int) -> State:
        """The store state at the seal of ``epoch`` (replay up to and including it)."""
        self._complete()
        state = State(self.codec)
        for e in self.entries:
            state.apply(e)
            if e.op is WalOp.EPOCH and not e.body.flags.restamp and e.body.epoch_id == epoch:
                return state
        raise HistoryUnavailable(f"{self.path}: epoch {epoch} was never sealed")

    def delta(self, from_epoch: int, to_epoch: int) -> list[KeyDelta]:
        """Every key whose node differs between the seals of two epochs (data, metadata
        or placement), in key order. ``from_epoch`` 0 means the empty state before any
        entry."""
        before = State(self.codec) if from_epoch == 0 else self.as_of(from_epoch)
        after = self.as_of(to_epoch)
        out = []
        for key in sorted(set(before.nodes) | set(after.nodes)):
            a, b = before.nodes.get(key), after.nodes.get(key)
            if a is None:
                out.append(KeyDelta(key, DeltaKind.ADDED, None, b))
            elif b is None:
                out.append(KeyDelta(key, DeltaKind.REMOVED, a, None))
            elif (a.data, a.meta, a.tail) != (b.data, b.meta, b.tail):
                out.append(KeyDelta(key, DeltaKind.CHANGED, a, b))
        return out

    def trajectory(self, key: str) -> list[TrajectoryPoint]:
        """Every archived or live entry touching ``key``, with the node after it."""
        self._complete()
        state = State(self.codec)
        out = []
        for e in self.entries:
            state.apply(e)
            touched = e.key == key or (e.op is WalOp.DELETE and key.startswith(e.key + "/"))
            if touched and e.op is not WalOp.EPOCH:
                node = state.nodes.get(key)
                out.append(TrajectoryPoint(e.seq, state.epoch, e.op.name,
                                           None if node is None else node.data,
                                           None if node is None else node.tail))
        return out

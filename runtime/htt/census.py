"""What a replay would count, without the tree: live nodes, synthesized ancestors and the
current epoch of a file, in memory that grows with the number of keys only (8 bytes a
key), not with the file.

``State`` (the one implementation of the ops) holds every live node with its payload,
metadata and placement, which is what ``htt info`` and ``htt verify`` used to build just
to print three counts. ``Census.apply`` follows ``State.apply`` op by op, holding what
the counts depend on and nothing else: a set of 64-bit key hashes (``KeySet``) and, per
node that has children, how many it has.

It never guesses where the tree would be needed. An INSERT of a key already present (a
real repeat, which replay skips, or two keys sharing a hash) and a DELETE of a node that
still has children (replay removes the whole subtree; this writer logs one DELETE per
node, children first, so its files never do that) raise ``NeedsTree``: the caller then
replays into a ``State`` as before. What remains is a hash collision between a key that
does not exist and one that does, met by an op on a missing key or an INSERT whose
parent is missing (neither is written by this writer): about n**2 / 2**64 for n keys.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...generated.htt import SemTailLayout, WalEntry, WalOp
from ..errors import DecodeError
from .quantized import TailCodec
from .state import ROOT, ancestors_of, parent_of

_RECENT = 1 << 16  # hashes kept in a Python set before they move into the sorted array


class NeedsTree(Exception):
    """The counts depend on something only the full tree knows (see the module doc)."""


class KeySet:
    """A set of 64-bit ints: the newest in a Python set, the rest in one sorted numpy
    array (8 bytes each, where a Python set costs ~80), merged in batches."""

    def __init__(self) -> None:
        # numpy comes in at the first merge: a small store's keys never leave ``_recent``
        self._np: Any = None
        self._base: Any = ()  # a sorted int64 numpy array after the first merge
        self._recent: set[int] = set()
        self._gone: set[int] = set()  # removed from ``_base``, not yet compacted away
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def __contains__(self, h: int) -> bool:
        if h in self._recent:
            return True
        base = self._base
        if not len(base) or h in self._gone:
            return False
        i = int(base.searchsorted(h))
        return i < len(base) and int(base[i]) == h

    def in_base(self, hs: list[int]) -> list[bool] | None:
        """For each hash, whether the sorted array holds it (None: the array is empty),
        in one vectorized search; valid until the next ``settle``. A hash is in the set
        when it is in ``recent`` or (in the array and not in ``gone``)."""
        base = self._base
        if not len(base):
            return None
        np = self._np
        want = np.fromiter(hs, np.int64, len(hs))
        at = base.searchsorted(want)
        at[at == len(base)] = 0
        return (base[at] == want).tolist()

    def add(self, h: int) -> None:
        """Add ``h`` (the caller checked it is absent); ``settle`` merges later."""
        if h in self._gone:  # in ``_base``, removed, now back
            self._gone.remove(h)
        else:
            self._recent.add(h)
        self._size += 1

    def settle(self) -> None:
        """Move the newest hashes into the sorted array once there are enough of them."""
        if len(self._recent) >= _RECENT:
            self._merge()

    def remove(self, h: int) -> None:
        """Remove ``h`` (the caller checked it is present)."""
        if h in self._recent:
            self._recent.remove(h)
        else:
            self._gone.add(h)
        self._size -= 1

    def _merge(self) -> None:
        np = self._np
        if np is None:
            import numpy as np

            self._np = np
            self._base = np.empty(0, dtype=np.int64)
        base = self._base
        if self._gone:
            base = base[~np.isin(base, np.fromiter(self._gone, np.int64, len(self._gone)))]
            self._gone = set()
        new = np.sort(np.fromiter(self._recent, np.int64, len(self._recent)))
        self._base = np.insert(base, base.searchsorted(new), new)
        self._recent = set()


class Census:
    """The counts ``State`` would end with (``len(nodes)``, ``synthesized``, ``epoch``),
    fed the same snapshot keys and WAL entries."""

    def __init__(self, codec: TailCodec) -> None:
        self.codec = codec
        self.keys = KeySet()
        self.kids: dict[int, int] = {}  # hash of a node -> live children (> 0 only)
        self.synthesized = 0
        self.epoch = 0
        # a full-width tail the decoder holds packed cannot fail to convert (as in
        # State.apply's hot path): only other layouts are converted to be checked
        self._check_tails = codec.layout is not SemTailLayout.full

    @property
    def live(self) -> int:
        return len(self.keys)

    def _link(self, key: str, h: int) -> None:
        self.keys.add(h)
        p = parent_of(key)
        if p is not ROOT:
            ph = hash(p)
            self.kids[ph] = self.kids.get(ph, 0) + 1

    def ensure_parent(self, key: str) -> None:
        """``State._synthesize_ancestors``: missing ancestors become directory nodes."""
        parent = parent_of(key)
        if parent is ROOT or hash(parent) in self.keys:
            return
        for anc in ancestors_of(key):
            h = hash(anc)
            if h not in self.keys:
                self._link(anc, h)
                self.synthesized += 1

    def add_loaded(self, key: str) -> None:
        """A snapshot entry, in the order ``State.add_loaded`` gets them."""
        h = hash(key)
        if h in self.keys:
            raise NeedsTree(f"snapshot key {key!r} repeats (or shares a hash)")
        self.ensure_parent(key)
        self._link(key, h)
        self.keys.settle()

    def add_unlinked(self, key: str) -> None:
        """A v3 snapshot key, first pass: present, ancestors not yet looked at."""
        h = hash(key)
        if h in self.keys:
            raise NeedsTree(f"snapshot key {key!r} repeats (or shares a hash)")
        self._link(key, h)
        self.keys.settle()

    def apply(self, entry: WalEntry) -> None:
        """``State.apply`` for the counts; raises where it raises (a tail that does not
        convert) before anything changes."""
        op = entry.op
        key = entry.key
        if op is WalOp.INSERT:
            if self._check_tails and entry.body.tail is not None:
                self.codec.packed(entry.body.tail)
            h = hash(key)
            if h in self.keys:
                raise NeedsTree(f"INSERT of {key!r}, present already (or sharing a hash)")
            self.ensure_parent(key)
            self._link(key, h)
        elif op is WalOp.SET_SEMANTIC:
            self.codec.packed(entry.body.tail)
        elif op is WalOp.DELETE:
            h = hash(key)
            if h not in self.keys:
                return
            if self.kids.get(h):
                raise NeedsTree(f"DELETE of {key!r}, which has children")
            self.keys.remove(h)
            p = parent_of(key)
            if p is not ROOT:
                ph = hash(p)
                left = self.kids.get(ph, 0) - 1
                if left > 0:
                    self.kids[ph] = left
                else:
                    self.kids.pop(ph, None)
        elif op is WalOp.EPOCH:
            self.epoch = entry.body.epoch_id
        self.keys.settle()

    def apply_rows(self, rows: list[tuple], expected: int,
                   entry_at: Callable[[int], WalEntry]) -> tuple[int, Exception | None]:
        """``State.apply_rows`` for the counts: ``wal_entry`` rows in order while their
        seqs continue from ``expected``; an INSERT is counted from its row (the array
        part of the key lookups done for the whole window at once), any other op goes
        to ``apply`` as its entry. Returns (applied, the error that stopped it)."""
        insert = WalOp.INSERT
        keys = self.keys
        recent = keys._recent
        gone = keys._gone
        kids = self.kids
        check = self.codec.packed_row if self._check_tails else None
        hashes = [hash(row[2]) for row in rows]
        in_base = keys.in_base(hashes) or [False] * len(rows)
        last_parent = None  # the parent of the last INSERT, known present, and its hash
        last_hash = 0
        first = expected
        try:
            for i, (seq, op, key, body) in enumerate(rows):
                if seq != expected:
                    break
                if op is not insert:
                    self.apply(entry_at(expected - first))
                    recent = keys._recent  # apply may have merged
                    gone = keys._gone
                    in_base = keys.in_base(hashes) or [False] * len(rows)
                    last_parent = None
                    expected += 1
                    continue
                tail = body[2]
                if check is not None and tail is not None:
                    check(tail)
                h = hashes[i]
                if h in recent or (in_base[i] and h not in gone):
                    raise NeedsTree(f"INSERT of {key!r}, present already (or sharing a hash)")
                cut = key.rfind("/")
                if cut <= 0:
                    keys.add(h)
                else:
                    parent = key[:cut]
                    if parent != last_parent:
                        self.ensure_parent(key)
                        last_parent = parent
                        last_hash = hash(parent)
                    keys.add(h)
                    kids[last_hash] = kids.get(last_hash, 0) + 1
                expected += 1
        except (DecodeError, ValueError) as exc:
            return expected - first, exc
        finally:
            keys.settle()
        return expected - first, None

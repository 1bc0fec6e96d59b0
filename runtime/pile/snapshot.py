"""Immutable pile snapshots, ``changes_since`` and the raw record selectors (spec
"Bounded refresh snapshots" and "Native Collection Records").

A pile is append-only, so a snapshot is the applied prefix ``[0, length)``: it keeps the
length and the component versions at creation and filters the live indexes by offset.
Later refreshes extend the pile without changing what an existing snapshot answers.

``changes_since`` compares the Blob, collection-record and capability-proof components.
The blob version counts physical occurrences, so a duplicate fallback appended for a
resident handle is a blob change while an unrelated WANT or pin is not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import BytewrightError
from .records import LegacyUnsignedEquation, dense_payload

# The store calls in here with itself; typed loosely so this module need not import it.
CollectionRecord = Any  # runtime.pile.store.CollectionRecord
Pile = Any  # runtime.pile.store.Pile

COMPONENTS = ("blobs", "collection", "proofs")
_COMMITS = {"commit_body", "v4_commit", "env_commit_body"}
_KIND_OF = {"merge_v6_body": "merge", "derive_v7_body": "derive"}


def record_kind(name: str) -> str:
    """commit | merge | derive for a collection record's schema name."""
    return "commit" if name in _COMMITS else _KIND_OF[name]


# -- selectors: prefixes of the C | member | frame-offset index ---------------------------

@dataclass(frozen=True)
class Collection:
    """Every record naming collection ``c`` (the target for a DERIVE)."""
    c: bytes


@dataclass(frozen=True)
class ProducedMember:
    """Every COMMIT data, MERGE result or DERIVE output equal to ``h`` in collection ``c``."""
    c: bytes
    h: bytes


@dataclass(frozen=True)
class CommitMember:
    """COMMITs of ``h`` into ``c`` (every COMMIT of ``c`` when ``h`` is None)."""
    c: bytes
    h: bytes | None = None


@dataclass(frozen=True)
class MergeCollection:
    """MERGEs in ``c`` (those with result ``h`` when given)."""
    c: bytes
    h: bytes | None = None


@dataclass(frozen=True)
class DeriveTarget:
    """DERIVEs into target ``c`` (those with output ``h`` when given)."""
    c: bytes
    h: bytes | None = None


Selector = Collection | ProducedMember | CommitMember | MergeCollection | DeriveTarget
_NARROW = {CommitMember: "commit", MergeCollection: "merge", DeriveTarget: "derive"}


class SnapshotMismatch(BytewrightError):
    """``changes_since`` between snapshots of different piles."""


class PileSnapshot:
    """One immutable observed prefix of a pile."""

    def __init__(self, pile: Pile) -> None:
        self._pile = pile
        self.length = pile.applied
        self.versions = dict(pile.versions)
        self._wants = frozenset(pile._wants)
        self._pins = dict(pile._pins)
        self._unsigned = tuple(pile.unsigned_equations)
        self._opaque = tuple(pile.opaque)

    # -- blobs --------------------------------------------------------------------------
    def _offsets(self, handle: bytes) -> list[int]:
        offsets = self._pile.blobs.get(handle) or []
        return [o for o in offsets if o < self.length]

    def __contains__(self, handle: bytes) -> bool:
        with self._pile._lock:
            return bool(self._offsets(handle))

    def get(self, handle: bytes) -> bytes:
        """The payload of ``handle`` as of this snapshot (first occurrence that validates)."""
        return self._pile._get(handle, self.length)

    def blobs(self) -> list[bytes]:
        """Resident blob handles (each once), in first-seen order."""
        with self._pile._lock:
            return [h for h, offs in self._pile.blobs.items() if offs[0] < self.length]

    @property
    def wants(self) -> frozenset[bytes]:
        return self._wants

    @property
    def pins(self) -> dict[bytes, bytes]:
        return dict(self._pins)

    @property
    def opaque(self) -> tuple:
        return self._opaque

    def legacy_unsigned_collection_equations(self) -> list[LegacyUnsignedEquation]:
        """Retired unsigned equations, exact, in file order (explicit migration input;
        separate from the collection records and repair)."""
        return [eq for _, eq in self._unsigned]

    # -- collection records ---------------------------------------------------------------
    def records(self, *selectors: Selector) -> list[CollectionRecord]:
        """Records matching any selector, each once, in index order (collection, member,
        frame offset). No selector: every collection record."""
        pile = self._pile
        with pile._lock:
            keys: set[tuple[bytes, bytes, int]] = set()
            cols = ({s.c for s in selectors} if selectors else set(pile.by_collection))
            for c in cols:
                for member, offsets in pile.by_collection.get(c, {}).items():
                    for off in offsets:
                        if off < self.length:
                            keys.add((c, member, off))
            out: list[CollectionRecord] = []
            seen: set[tuple[bytes, bytes, bytes]] = set()
            for c, member, off in sorted(keys):
                name, value = pile.frames[off]
                # repeats of one record sit under the same C | member prefix: hand it out once
                key = (c, member, dense_payload(name, value))
                if key in seen or not _matches(selectors, c, member, record_kind(name)):
                    continue
                seen.add(key)
                out.append(pile.collection_record_at(off))
            return out

    # -- change classification ------------------------------------------------------------
    def changes_since(self, older: PileSnapshot) -> frozenset[str]:
        """The components (``blobs``, ``collection``, ``proofs``) that differ from
        ``older``, a snapshot of the same pile."""
        if older._pile is not self._pile:
            raise SnapshotMismatch("changes_since compares snapshots of one pile handle")
        return frozenset(c for c in COMPONENTS if self.versions[c] != older.versions[c])


def _matches(selectors: tuple, c: bytes, member: bytes, kind: str) -> bool:
    if not selectors:
        return True
    for s in selectors:
        if s.c != c:
            continue
        if isinstance(s, Collection):
            return True
        if isinstance(s, ProducedMember):
            if s.h == member:
                return True
            continue
        if _NARROW[type(s)] == kind and (s.h is None or s.h == member):
            return True
    return False

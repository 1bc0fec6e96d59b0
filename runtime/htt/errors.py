"""Store-level errors of the HTT runtime (decode failures stay ``DecodeError``s)."""

from __future__ import annotations

from ..errors import BytewrightError


class StoreError(BytewrightError):
    """A store operation that cannot be carried out (the file itself is fine)."""


class StoreLocked(StoreError):
    """Another process holds the lock this session needs (single writer, §11)."""


class ReadOnlyError(StoreError):
    """A mutation on a store opened read-only."""


class KeyExistsError(StoreError, KeyError):
    """``put`` of a key that already exists (INSERT is an error if it exists, §4)."""


class KeyMissingError(StoreError, KeyError):
    """A mutation of a key that does not exist."""


class ReservedKeyError(StoreError, ValueError):
    """A user metadata key starting with ``_`` (reserved for the format, §3)."""


class InvalidKeyError(StoreError, ValueError):
    """A node path that is not ``/seg/seg...``."""


class SemanticError(StoreError, ValueError):
    """A semantic placement the format cannot store (§7, §7.3): all zeros, wrong width,
    out of the TQ1.9 range, or nonzero reserved dims when the region is elided."""


class AccessDenied(StoreError, PermissionError):
    """GACL (§7.2): the session credentials fall outside the node's bands."""


class SnapshotRequired(StoreError):
    """``wal_entries_since`` asked for a sequence compaction already folded away (§8)."""

    def __init__(self, base_seq: int, requested: int) -> None:
        super().__init__(
            f"sequence {requested} was folded into the snapshot; the WAL starts at "
            f"{base_seq}: bootstrap from a copy of the file, then tail from there")
        self.base_seq = base_seq
        self.requested = requested


class HistoryUnavailable(StoreError):
    """The history sidecars do not reach back far enough to answer the question."""


class WalDamaged(StoreError):
    """The WAL is damaged where the chosen recovery mode does not allow an automatic cut:
    valid-looking records follow the damage (``tolerate_corrupted_tail``) or any damage
    at all (``absolute_consistency``). Nothing was written. ``offset`` is where the intact
    WAL ends (the value ``--discard-after`` / ``discard_after`` must repeat)."""

    def __init__(self, message: str, *, path: str, offset: int, reason: str,
                 records_after: int) -> None:
        super().__init__(message)
        self.path = path
        self.offset = offset
        self.reason = reason
        self.records_after = records_after


class TooLarge(StoreError, ValueError):
    """A value over one of the session's limits (runtime/htt/limits.py)."""


class Poisoned(StoreError):
    """An earlier write or fsync of the WAL failed, so the session's memory may no longer
    match the file (entries half written, or written but not known to be durable: after a
    failed fsync the kernel may have dropped the dirty pages). Every later mutating or
    flushing call raises this; ``close()`` writes nothing more. Reopening the file
    recovers its durable state. ``__cause__`` and ``cause`` are the original error."""

    def __init__(self, file: str, cause: BaseException) -> None:
        what = f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__
        super().__init__(f"{file}: a WAL write failed ({what}); the session may no longer "
                         "match the file and writes nothing more: close it and reopen the "
                         "file (reopening recovers the durable state)")
        self.file = file
        self.cause = cause

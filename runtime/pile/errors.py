"""Pile errors (facts.md §7), all in the project's one hierarchy.

``CorruptPile.valid_length`` is the offset where the first bad record begins (everything
before it is intact); ``UnsupportedRecord`` names an unknown 16-byte marker, which is never
truncated away because a newer reader may understand it.
"""

from __future__ import annotations

from ..errors import BytewrightError, DecodeError


class CorruptPile(DecodeError):
    """A torn or invalid record; ``valid_length`` = its start offset."""

    def __init__(self, valid_length: int, reason: str = "corrupt record", *, path: str = "",
                 cause: DecodeError | None = None) -> None:
        super().__init__(f"CorruptPile(valid_length={valid_length}): {reason}",
                         offset=valid_length, path=path)
        self.valid_length = valid_length
        self.reason = reason
        self.cause = cause


class UnsupportedRecord(DecodeError):
    """At least 16 bytes that are not a current frame and carry no known marker."""

    def __init__(self, offset: int, marker: bytes) -> None:
        super().__init__(f"UnsupportedRecord(offset={offset}, marker={marker.hex().upper()})",
                         offset=offset, path="pile_record.marker")
        self.marker = marker


class PileShrunk(BytewrightError):
    """The file became shorter than the length already applied (upstream aborts)."""

    def __init__(self, applied: int, size: int) -> None:
        super().__init__(f"pile shrank below its applied length ({size} < {applied}); refusing to go on")
        self.applied = applied
        self.size = size


class InvalidRecord(BytewrightError):
    """A record refused on insert: bad signature, invalid key, malformed proof."""


class RepairRefused(BytewrightError):
    """amputate / reframe refused to touch the file (the message says why, in one line)."""


class RecordRefused(InvalidRecord, DecodeError):
    """Dense or framed record bytes refused at a checked boundary: unknown or retired
    kind, wrong length, non-canonical order, invalid key or signature. Carries the offset
    (within the bytes given) and the field path."""

    def __init__(self, message: str, *, offset: int | None = None, path: str = "") -> None:
        DecodeError.__init__(self, message, offset=offset, path=path)

"""Resource limits of the HTT runtime: named, documented, overridable.

The spec names ``MAX_SNAPSHOT_BYTES`` and ``MAX_ENTRY_DATA`` without public values
(facts §3.1: "a reader should still apply sane caps so a corrupt length cannot exhaust
memory"). These are bytewright's choices. Every length in a file is also checked
against the bytes that remain before anything is allocated (the generated codecs do
that), so the caps below only matter where a *declared* size drives an allocation:
decompressed sections, whose sizes no checksum covers before they are decoded.

Pass ``limits=Limits(max_snapshot_bytes=...)`` to ``Store.open``/``Store.create`` for a
store that needs more; a file over a limit fails with :class:`LimitExceeded`, a
``DecodeError`` naming the limit, the declared size and the offset.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...generated.htt import LAYOUT
from ..errors import ConstraintError

MAX_KEY_BYTES = 0xFFFF
"""A node key's UTF-8 length (the u16 ``key_len`` of §3/§4: a format bound, not a choice)."""

MAX_ENTRY_DATA = 256 << 20
"""Largest payload a writer accepts for one node (INSERT/UPDATE ``data``), 256 MiB."""

MAX_SNAPSHOT_BYTES = 1 << 30
"""Largest decompressed snapshot (``snap_byte_len``) a reader accepts, 1 GiB."""

MAX_BLOCK_BYTES = 64 << 20
"""Largest decompressed WAL block (§5: up to 64 entries), 64 MiB."""

MAX_SIDECAR_BYTES = 1 << 30
"""Largest history sidecar file read into memory, 1 GiB."""

UNKNOWN_OP_SCAN = 1 << 20
"""How far past an unknown op byte the reader looks for a matching entry CRC (to tell a
newer writer's well-formed entry, an error, from damage), 1 MiB."""


class LimitExceeded(ConstraintError):
    """A declared size above one of the limits in this module."""


@dataclass(frozen=True)
class Limits:
    """The limits one store session enforces (defaults: the constants above)."""

    max_entry_data: int = MAX_ENTRY_DATA
    max_snapshot_bytes: int = MAX_SNAPSHOT_BYTES
    max_block_bytes: int = MAX_BLOCK_BYTES

    def __post_init__(self) -> None:
        for name in ("max_entry_data", "max_snapshot_bytes", "max_block_bytes"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")


DEFAULT = Limits()


def _field(record: str, name: str) -> tuple[int, int]:
    """(offset, size) of a fixed-position field, from the generated layout data."""
    for layout in LAYOUT[record]["layouts"]:
        for f in layout["fields"]:
            if f["name"] == name and f["offset"] is not None:
                return f["offset"], f["size"]
    raise KeyError(f"{record}.{name}")  # a schema change the runtime must follow


_SNAP_LEN = _field("snapshot_section", "snap_byte_len")


def check_snapshot_size(buf, offset: int, limits: Limits) -> None:
    """Refuse a snapshot whose declared decompressed size is over the limit, before it
    is decoded (the declared size is what a decompressor would be allowed to produce)."""
    at, size = _SNAP_LEN
    start = offset + at
    if start + size > len(buf):
        return  # too short: the decoder reports the truncation with its own offset
    declared = int.from_bytes(bytes(buf[start:start + size]), "little")
    if declared > limits.max_snapshot_bytes:
        raise LimitExceeded(
            "snapshot larger than the limit (limits.MAX_SNAPSHOT_BYTES; pass "
            "limits=Limits(max_snapshot_bytes=...) to allow it)", offset=start,
            path="snapshot_section.snap_byte_len", expected=f"<= {limits.max_snapshot_bytes}",
            found=declared)

"""The walchain checksum, registered as a bytewright plug-in.

It is SQLite's WAL checksum: the data is read as 32-bit words in the byte order the
file's magic chooses, and two 32-bit sums run over word pairs, starting from a seed
(the previous frame's checksum, or zero for the header). The stored value is the two
sums as one 64-bit integer, ``s0 << 32 | s1``.
"""

from __future__ import annotations

import struct

_MASK = 0xFFFFFFFF


def wal_checksum(data: bytes, seed: int | None = None, order: str = "big") -> int:
    if len(data) % 8:
        raise ValueError(f"walsum covers whole 8-byte units, got {len(data)} bytes")
    s0, s1 = ((seed or 0) >> 32) & _MASK, (seed or 0) & _MASK
    fmt = (">" if order == "big" else "<") + f"{len(data) // 4}I"
    words = struct.unpack(fmt, data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & _MASK
        s1 = (s1 + words[i + 1] + s0) & _MASK
    return s0 << 32 | s1


def register(reg) -> None:
    """Called once by ``bytewright.runtime.registry.load_plugin("walchain_plugins:register")``."""
    reg.add_checksum("walsum", bits=64, seeded=True, params=("order",), func=wal_checksum)

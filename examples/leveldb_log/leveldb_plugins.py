"""LevelDB's log checksum, registered as a bytewright plug-in.

A log fragment stores the CRC-32C (Castagnoli) of its kind byte and its piece, *masked*
(util/crc32c.h): a CRC stored inside data that is itself checksummed would otherwise make
the outer CRC degenerate, so LevelDB rotates it right by 15 bits and adds a constant.
"""

from __future__ import annotations

import google_crc32c

_MASK_DELTA = 0xA282EAD8


def mask(crc: int) -> int:
    """LevelDB's crc32c::Mask."""
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def leveldb_crc32c(data: bytes) -> int:
    return mask(google_crc32c.value(bytes(data)))


def register(reg) -> None:
    """Called once by ``registry.load_plugin("leveldb_plugins:register")``."""
    reg.add_checksum("leveldb_crc32c", bits=32, func=leveldb_crc32c, safe=True,
                     doc="masked CRC-32C (LevelDB util/crc32c.h Mask)")

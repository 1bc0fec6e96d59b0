"""Checksum algorithms used by bytewright layouts, behind one small registry.

Layouts name a checksum by string (``crc32``, ``crc32c``, ``xxh3_64``, ``blake3_256``);
the registry tells codecs how wide the stored value is and whether it is an integer
(stored little-endian) or a raw digest, so no codec has to special-case algorithms.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import blake3 as _blake3
import google_crc32c
import xxhash

from .errors import UnsupportedError

Buffer = bytes | bytearray | memoryview


def _as_bytes(data: Buffer) -> bytes:
    # google_crc32c insists on read-only bytes; the others accept any buffer.
    return data if isinstance(data, bytes) else bytes(data)


def crc32(data: Buffer) -> int:
    """CRC-32 (ISO-HDLC, the zlib/PNG one) as an unsigned 32-bit int."""
    return zlib.crc32(data) & 0xFFFFFFFF


def crc32c(data: Buffer) -> int:
    """CRC-32C (Castagnoli) as an unsigned 32-bit int."""
    return int(google_crc32c.value(_as_bytes(data)))


def xxh3_64(data: Buffer) -> int:
    """XXH3 64-bit hash (seed 0) as an unsigned 64-bit int."""
    return int(xxhash.xxh3_64_intdigest(data))


def blake3_256(data: Buffer) -> bytes:
    """BLAKE3 digest, 32 bytes."""
    return _blake3.blake3(data).digest(length=32)


@dataclass(frozen=True)
class ChecksumAlgorithm:
    """One registered checksum: its name, stored width in bytes and result kind."""

    name: str
    size: int
    kind: Literal["int", "bytes"]
    func: Callable[[Buffer], int | bytes]


ALGORITHMS: dict[str, ChecksumAlgorithm] = {
    a.name: a
    for a in (
        ChecksumAlgorithm("crc32", 4, "int", crc32),
        ChecksumAlgorithm("crc32c", 4, "int", crc32c),
        ChecksumAlgorithm("xxh3_64", 8, "int", xxh3_64),
        ChecksumAlgorithm("blake3_256", 32, "bytes", blake3_256),
    )
}


def get(name: str) -> ChecksumAlgorithm:
    """Look up an algorithm; an unknown name raises :class:`UnsupportedError`."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise UnsupportedError(
            f"unknown checksum algorithm {name!r}",
            expected=sorted(ALGORITHMS),
            found=name,
        ) from None


def compute(name: str, data: Buffer) -> int | bytes:
    """Checksum ``data`` with the algorithm called ``name``."""
    return get(name).func(data)

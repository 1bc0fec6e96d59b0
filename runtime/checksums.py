"""The built-in checksum algorithms, registered like any user's plug-in.

:func:`register` adds crc32, crc32c, xxh3_64 (all seedable, so they can be seeded from a
field or chained across records), blake3 (a 32-byte digest), internet16 (RFC 1071), crc
(any Rocksoft-model CRC from its parameters) and crc32_ogg to
:mod:`bytewright.runtime.registry`. ``ALGORITHMS``/``get``/``compute`` remain as a
small direct view of the same functions.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import blake3 as _blake3
import google_crc32c
import xxhash

from . import crc as _crc
from .errors import UnsupportedError

Buffer = bytes | bytearray | memoryview


def _as_bytes(data: Buffer) -> bytes:
    # google_crc32c insists on read-only bytes; the others accept any buffer.
    return data if isinstance(data, bytes) else bytes(data)


def crc32(data: Buffer, seed: int | None = None) -> int:
    """CRC-32 (ISO-HDLC, the zlib/PNG one) as an unsigned 32-bit int.

    ``seed`` is a previous CRC-32 to continue from (crc32(a + b) == crc32(b, crc32(a))).
    """
    if seed is None:
        return zlib.crc32(data) & 0xFFFFFFFF
    return zlib.crc32(data, seed & 0xFFFFFFFF) & 0xFFFFFFFF


def crc32c(data: Buffer, seed: int | None = None) -> int:
    """CRC-32C (Castagnoli) as an unsigned 32-bit int; ``seed`` continues a previous CRC."""
    if seed is None:
        return int(google_crc32c.value(_as_bytes(data)))
    return int(google_crc32c.extend(seed & 0xFFFFFFFF, _as_bytes(data)))


def xxh3_64(data: Buffer, seed: int | None = None) -> int:
    """XXH3 64-bit hash (seed 0 unless given) as an unsigned 64-bit int."""
    if seed is None:
        return int(xxhash.xxh3_64_intdigest(data))
    return int(xxhash.xxh3_64_intdigest(data, seed=seed & 0xFFFFFFFFFFFFFFFF))


def blake3_256(data: Buffer, seed: None = None) -> bytes:
    """BLAKE3 digest, 32 bytes (no seed)."""
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


def register(reg) -> None:  # noqa: ANN001 - a Registry (not imported: avoids a cycle)
    """Plug-in entry point ``bytewright.runtime.checksums:register``."""
    # zlib.crc32 is unsigned on Python 3 and takes any buffer: bound as is when unseeded
    reg.add_checksum("crc32", bits=32, func=crc32, seeded=True, safe=True, fast=zlib.crc32,
                     doc="CRC-32 (ISO-HDLC; zlib, PNG); a seed continues a previous CRC")
    reg.add_checksum("crc32c", bits=32, func=crc32c, seeded=True, safe=True,
                     doc="CRC-32C (Castagnoli); a seed continues a previous CRC")
    reg.add_checksum("xxh3_64", bits=64, func=xxh3_64, seeded=True, safe=True,
                     fast=xxhash.xxh3_64_intdigest,
                     doc="XXH3 64-bit; the seed is XXH3's seed")
    reg.add_checksum("blake3", bits=256, func=blake3_256, digest=True, safe=True,
                     doc="BLAKE3, 32-byte digest")
    reg.add_checksum("internet16", bits=16, func=_crc.internet16, safe=True,
                     doc="RFC 1071 internet checksum (ones'-complement sum of big-endian "
                         "16-bit words; IPv4, UDP, TCP); store it in a u16be field")
    # a bad parameter set raises: not declared safe, so it becomes the project's error
    reg.add_checksum("crc", bits=64, func=_crc.crc, width_param="width",
                     params=("width", "poly", "init", "refin", "refout", "xorout"),
                     doc="any Rocksoft-model CRC: params width, poly, init, refin, refout, "
                         "xorout (table-driven, tables cached per parameter set)")
    reg.add_checksum("crc32_ogg", bits=32, func=_crc.crc32_ogg, safe=True,
                     doc="CRC-32 poly 0x04C11DB7, init 0, no reflection, no final xor (Ogg)")

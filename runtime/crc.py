"""Parametrised CRCs (the Rocksoft model) and the RFC 1071 internet checksum.

``crc(data, width=, poly=, init=, refin=, refout=, xorout=)`` computes any CRC of the
catalogue from its six parameters (CRC-32/BZIP2, CRC-16/CCITT-FALSE, Ogg's CRC-32 ...).
Each parameter set gets its 256-entry table built once and cached, and the data is run
through it a byte at a time: a few MB a second in pure Python, plenty for headers and
pages. ``internet16`` is the ones'-complement sum of big-endian 16-bit words (IPv4, UDP,
TCP headers).
"""

from __future__ import annotations

from functools import lru_cache

Buffer = bytes | bytearray | memoryview


def _reflect(value: int, width: int) -> int:
    out = 0
    for _ in range(width):
        out = (out << 1) | (value & 1)
        value >>= 1
    return out


@lru_cache(maxsize=64)
def _table(width: int, poly: int, refin: bool) -> tuple[int, ...]:
    """The byte table of one (width, poly, refin): reflected tables run LSB first."""
    mask = (1 << width) - 1
    out = []
    if refin:
        rpoly = _reflect(poly, width)
        for byte in range(256):
            reg = byte
            for _ in range(8):
                reg = (reg >> 1) ^ rpoly if reg & 1 else reg >> 1
            out.append(reg & mask)
    else:  # widths of 8 bits and more: the byte enters at the register's top
        top = 1 << (width - 1)
        for byte in range(256):
            reg = byte << (width - 8)
            for _ in range(8):
                reg = ((reg << 1) ^ poly) if reg & top else reg << 1
            out.append(reg & mask)
    return tuple(out)


def crc(data: Buffer, seed: None = None, *, width: int, poly: int, init: int = 0,
        refin: bool = False, refout: bool = False, xorout: int = 0) -> int:
    """The Rocksoft-model CRC of ``data`` (``width`` 1..64 bits)."""
    width, poly, init, xorout = int(width), int(poly), int(init), int(xorout)
    if not 1 <= width <= 64:
        raise ValueError(f"CRC width must be 1..64 bits, not {width}")
    mask = (1 << width) - 1
    if poly & ~mask or poly & 1 == 0:
        raise ValueError(f"CRC poly {poly:#x} must be odd and fit in {width} bits")
    data = bytes(data)
    table = _table(width, poly, bool(refin)) if refin or width >= 8 else ()
    if refin:
        reg = _reflect(init & mask, width)
        for b in data:
            reg = table[(reg ^ b) & 0xFF] ^ (reg >> 8)
        if not refout:
            reg = _reflect(reg, width)
    elif width >= 8:
        reg = init & mask
        shift = width - 8
        for b in data:
            reg = table[((reg >> shift) ^ b) & 0xFF] ^ ((reg << 8) & mask)
        if refout:
            reg = _reflect(reg, width)
    else:  # registers narrower than a byte: bit by bit
        reg = init & mask
        top = 1 << (width - 1)
        for b in data:
            for i in range(7, -1, -1):
                bit = ((b >> i) & 1) ^ (1 if reg & top else 0)
                reg = (((reg << 1) ^ poly) if bit else reg << 1) & mask
        if refout:
            reg = _reflect(reg, width)
    return (reg ^ xorout) & mask


def crc32_ogg(data: Buffer, seed: None = None) -> int:
    """Ogg's page CRC: CRC-32 poly 0x04C11DB7, init 0, no reflection, no final xor."""
    return crc(data, width=32, poly=0x04C11DB7, init=0, refin=False, refout=False, xorout=0)


def internet16(data: Buffer, seed: None = None) -> int:
    """RFC 1071: the ones'-complement of the ones'-complement sum of the big-endian
    16-bit words of ``data`` (an odd last byte is padded with a zero byte)."""
    data = bytes(data)
    # the sum of big-endian words is 256 x the sum of their high bytes plus the sum of
    # their low bytes (an odd last byte is a high byte with a zero low byte)
    total = (sum(data[0::2]) << 8) + sum(data[1::2])
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF

"""Unsigned LEB128 varints.

Decoding is strict on request: a bounded byte count, a 64-bit value range, and
(with ``minimal=True``) a rejection of padded encodings such as ``80 00``, so that
one value has exactly one accepted encoding where a layout demands it.
"""

from __future__ import annotations

from .errors import ConstraintError, EncodeError, TruncatedError

U64_MAX = (1 << 64) - 1


def decode_uleb128(
    buf: bytes | bytearray | memoryview,
    offset: int = 0,
    *,
    max_bytes: int = 10,
    minimal: bool = False,
    path: str = "",
) -> tuple[int, int]:
    """Decode one ULEB128 at ``offset``; return ``(value, end_offset)``.

    Errors carry the offset of the varint's first byte.
    """
    if offset < 0:
        raise ValueError(f"negative offset {offset}")
    value = 0
    shift = 0
    pos = offset
    end = len(buf)
    while True:
        if pos >= end:
            raise TruncatedError(
                "buffer ends inside a ULEB128 varint",
                offset=offset,
                path=path,
                expected="continuation byte",
                found=f"end of buffer after {pos - offset} byte(s)",
            )
        if pos - offset >= max_bytes:
            raise ConstraintError(
                f"ULEB128 varint longer than {max_bytes} bytes",
                offset=offset,
                path=path,
                expected=f"<= {max_bytes} bytes",
                found=f"> {max_bytes} bytes",
            )
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    count = pos - offset
    # A final group of zero after at least one byte is padding: not minimal.
    if minimal and count > 1 and byte == 0:
        raise ConstraintError(
            "non-minimal ULEB128 encoding",
            offset=offset,
            path=path,
            expected="minimal encoding",
            found=bytes(buf[offset:pos]),
        )
    # Ten bytes can hold 70 bits; a u64 varint must not use the excess.
    if max_bytes <= 10 and value > U64_MAX:
        raise ConstraintError(
            "ULEB128 value does not fit in 64 bits",
            offset=offset,
            path=path,
            expected=f"<= {U64_MAX}",
            found=value,
        )
    return value, pos


# the encodings of 0..127, built once: most varints in real records are one byte, and an
# encoder (generated ones inline this) then returns a prebuilt object instead of building one
ONE_BYTE: tuple[bytes, ...] = tuple(bytes((i,)) for i in range(0x80))


def encode_uleb128(value: int) -> bytes:
    """Minimal ULEB128 encoding of an unsigned 64-bit ``value``."""
    if value.__class__ is int:  # exactly int (a bool or another subclass: checked below)
        if -1 < value < 0x80:
            return ONE_BYTE[value]
        if -1 < value < 0x4000:
            return bytes((value & 0x7F | 0x80, value >> 7))
    elif isinstance(value, bool) or not isinstance(value, int):
        raise EncodeError(f"ULEB128 value must be an int, got {type(value).__name__}")
    if value < 0 or value > U64_MAX:
        raise EncodeError(f"ULEB128 value {value} outside 0..2**64-1")
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def uleb128_size(value: int) -> int:
    """Number of bytes :func:`encode_uleb128` produces for ``value``."""
    if value < 0 or value > U64_MAX:
        raise EncodeError(f"ULEB128 value {value} outside 0..2**64-1")
    return max(1, (value.bit_length() + 6) // 7)


I64_MIN = -(1 << 63)
I64_MAX = (1 << 63) - 1


def decode_sleb128(buf: bytes | bytearray | memoryview, offset: int = 0, *,
                   max_bytes: int = 10, path: str = "") -> tuple[int, int]:
    """Decode one signed LEB128 (two's complement, sign from bit 6 of the last byte)."""
    value, shift, pos, end = 0, 0, offset, len(buf)
    while True:
        if pos >= end:
            raise TruncatedError("buffer ends inside a SLEB128 varint", offset=offset,
                                 path=path, expected="continuation byte",
                                 found=f"end of buffer after {pos - offset} byte(s)")
        if pos - offset >= max_bytes:
            raise ConstraintError(f"SLEB128 varint longer than {max_bytes} bytes",
                                  offset=offset, path=path, expected=f"<= {max_bytes} bytes",
                                  found=f"> {max_bytes} bytes")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    if byte & 0x40:
        value -= 1 << shift
    if not I64_MIN <= value <= I64_MAX:
        raise ConstraintError("SLEB128 value does not fit in 64 bits", offset=offset,
                              path=path, expected=f"{I64_MIN}..{I64_MAX}", found=value)
    return value, pos


def encode_sleb128(value: int) -> bytes:
    """Minimal signed LEB128 encoding of a signed 64-bit ``value``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise EncodeError(f"SLEB128 value must be an int, got {type(value).__name__}")
    if not I64_MIN <= value <= I64_MAX:
        raise EncodeError(f"SLEB128 value {value} outside -2**63..2**63-1")
    out = bytearray()
    while True:
        group = value & 0x7F
        value >>= 7  # arithmetic shift keeps the sign
        if (value == 0 and not group & 0x40) or (value == -1 and group & 0x40):
            out.append(group)
            return bytes(out)
        out.append(group | 0x80)


def decode_zigzag(buf: bytes | bytearray | memoryview, offset: int = 0, *,
                  max_bytes: int = 10, path: str = "") -> tuple[int, int]:
    """Decode one ZigZag varint (protobuf ``sint64``): ULEB128 of (n << 1) ^ (n >> 63)."""
    raw, pos = decode_uleb128(buf, offset, max_bytes=max_bytes, path=path)
    return (raw >> 1) ^ -(raw & 1), pos


def encode_zigzag(value: int) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int):
        raise EncodeError(f"zigzag value must be an int, got {type(value).__name__}")
    if not I64_MIN <= value <= I64_MAX:
        raise EncodeError(f"zigzag value {value} outside -2**63..2**63-1")
    return encode_uleb128((value << 1) ^ (value >> 63))


DECODERS = {"uleb128": decode_uleb128, "sleb128": decode_sleb128, "zigzag": decode_zigzag}
ENCODERS = {"uleb128": encode_uleb128, "sleb128": encode_sleb128, "zigzag": encode_zigzag}

"""tar's two number rules that are not a plain fixed-width ASCII number, registered as a
bytewright plug-in.

- The header checksum is the unsigned sum of the header's 512 bytes, its own eight bytes
  counted as spaces. The header's first 100 bytes (the member name) are read by the
  enclosing record, which passes their sum as the seed.
- GNU tar leaves a numeric field empty (all NULs) when it has no value (the device numbers
  of anything but a device, the access and change times outside incremental dumps), where
  other writers put an octal zero. The `tar_octal_or_empty` integer kind reads an empty
  field as -1 (the schema maps it to None with `absent: -1`) and an octal number otherwise.
"""

from __future__ import annotations

from bytewright.runtime.errors import ConstraintError, TruncatedError


def header_sum(data: bytes, seed: int | None = None) -> int:
    """The unsigned byte sum of ``data`` plus ``seed`` (the sum of the bytes before it)."""
    return (seed or 0) + sum(bytes(data))


def _decode_octal_or_empty(buf, offset: int, *, path: str = "", width: int = 8,
                           **_: object) -> tuple[int, int]:
    raw = bytes(buf[offset:offset + width])
    if len(raw) < width:
        raise TruncatedError(f"{width}-byte number cut short", offset=offset, path=path)
    if raw == bytes(width):
        return -1, offset + width
    digits = raw[:width - 1]
    if raw[width - 1] != 0 or not digits.isdigit() or b"8" in digits or b"9" in digits:
        raise ConstraintError(f"not an octal number or an empty field: {raw!r}",
                              offset=offset, path=path)
    return int(digits, 8), offset + width


def _encode_octal_or_empty(value: int, *, width: int = 8, **_: object) -> bytes:
    if value == -1:
        return bytes(width)
    out = b"%0*o\0" % (width - 1, value)
    if value < 0 or len(out) != width:
        raise ValueError(f"{value} does not fit {width - 1} octal digits")
    return out


def register(reg) -> None:
    reg.add_checksum("tar_header_sum", bits=32, seeded=True, safe=True, func=header_sum,
                     doc="tar header checksum: unsigned byte sum, seeded with the sum of "
                         "the bytes before the covered ones")
    reg.add_integer_kind("tar_octal_or_empty", decode=_decode_octal_or_empty,
                         encode=_encode_octal_or_empty, max_bytes=lambda width=8: width,
                         signed=True, params=("width",))
